"""Attribute reads and writes on symbolic values, following Python's lookup order (data
descriptors, instance dict, class attributes; for nn.Module also _parameters, _buffers and
_modules). Reads of real objects go through `wrap`, which installs the guards."""
from __future__ import annotations

import contextvars
import inspect
import types

import torch

from . import breaks, context_vars
from .breaks import TracedException, Unsupported, user_error
from .guards import AttrAbsent, DictKeysMatch
from .sources import AttrSource, GenericAttrSource, ModuleDictSource
from .values import (AutocastValue, CallableValue, ClosureValue, Const, DictValue, FunctionValue, GradModeValue,
                     MethodValue, ModuleValue, NewExceptionValue, NewModuleValue, NewObjectValue, ObjectValue, SeqValue,
                     SetValue, SuperValue, TensorValue, Value)
from .wrap import wrap

_MISSING = object()
TENSOR_CONST_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "is_quantized",
                      "is_meta", "layout", "is_cpu", "is_mps", "is_nested", "itemsize", "nbytes"}
TENSOR_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}


class _GenericOwner:
    """Marks a source whose attributes must be reloaded with object.__getattribute__."""

    def __init__(self, source):
        self.source = source


def _sub(source, name):
    if isinstance(source, _GenericOwner):
        return GenericAttrSource(source.source, name)
    return AttrSource(source, name) if source is not None else None


def load_attr(frame, obj: Value, name: str) -> Value:
    tracer = frame.tracer
    pending = tracer.pending_attrs.get(id(obj))
    if pending and name in pending:
        return pending[name]
    if name == "__class__" and not isinstance(obj, TensorValue):
        from .builtins_table import python_class
        return CallableValue(python_class(obj))
    handler = _LOADERS.get(type(obj))
    if handler is None:
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{type(obj).__name__}.{name}")
    return handler(frame, obj, name)


def _tensor_attr(frame, obj: TensorValue, name):
    if name == "shape":
        return frame.tracer.graph.sizes(obj)
    if name in TENSOR_CONST_ATTRS:
        return Const(getattr(obj.example, name))
    if name == "is_leaf":
        if obj.node.op == "placeholder" and obj.example.requires_grad:
            raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, "is_leaf of an input that requires grad")
        return Const(obj.example.is_leaf)
    if name in TENSOR_VIEW_ATTRS:
        import builtins
        return frame.tracer.graph.call("call_function", builtins.getattr, (obj, Const(name)), {})
    attr = getattr(torch.Tensor, name, _MISSING)
    if attr is not _MISSING and callable(attr):
        return MethodValue(obj, name)
    if name == "__class__":
        return CallableValue(obj.node.meta.get("real_type") or torch.Tensor)
    if attr is _MISSING:
        raise user_error(AttributeError, f"'Tensor' object has no attribute {name!r}")
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"tensor.{name}")


def _const_attr(frame, obj: Const, name):
    try:
        value = getattr(obj.value, name)
    except Exception as e:
        raise TracedException(e, f"{type(obj.value).__name__}.{name}: {type(e).__name__}: {e}")
    if isinstance(value, (types.BuiltinMethodType, types.MethodType)) or callable(value) and not isinstance(value, type):
        return MethodValue(obj, name)
    return Const(value)


def _field_names(cls) -> tuple:
    return tuple(getattr(cls, "_fields", None) or getattr(cls, "__match_args__", None) or ())


def _seq_attr(frame, obj: SeqValue, name):
    fields = _field_names(obj.cls)
    if name in fields:
        return obj.items[fields.index(name)]
    if callable(getattr(obj.cls, name, None)):
        return MethodValue(obj, name)
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{obj.cls.__name__}.{name}")


def _container_attr(frame, obj, name):
    if callable(getattr(obj.cls, name, None)):
        return MethodValue(obj, name)
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{obj.cls.__name__}.{name}")


def _class_attribute(frame, owner: Value, cls: type, name: str, instance_source):
    """A class-level attribute seen through an instance (methods, properties, constants)."""
    attr = inspect.getattr_static(cls, name, _MISSING)
    if attr is _MISSING:
        return _MISSING
    if isinstance(attr, property):
        if attr.fget is None:
            raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"write-only property {name}")
        from .calls import call
        return call(frame, FunctionValue(attr.fget), [owner], {})
    if isinstance(attr, types.FunctionType):
        return MethodValue(owner, attr)
    if isinstance(attr, staticmethod):
        return wrap(frame.tracer, attr.__func__, None) if isinstance(attr.__func__, types.FunctionType) \
            else CallableValue(attr.__func__)
    if isinstance(attr, classmethod):
        return MethodValue(CallableValue(cls), attr.__func__)
    if hasattr(type(attr), "__get__") and not isinstance(attr, (type, types.BuiltinFunctionType)) \
            and not callable(attr):
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"descriptor {type(attr).__name__} for {name}")
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType)):
        raise Unsupported(breaks.UNKNOWN_CALL, f"C method {cls.__name__}.{name}")
    return wrap(frame.tracer, getattr(cls, name), _sub(instance_source, name))


def _module_attr(frame, obj: ModuleValue, name):
    m, src = obj.module, obj.source
    d = m.__dict__
    cls_attr = inspect.getattr_static(type(m), name, _MISSING)
    if isinstance(cls_attr, property) or name not in d and cls_attr is not _MISSING:
        result = _class_attribute(frame, obj, type(m), name, src)
        if result is not _MISSING:
            return result
    if name in d:
        return wrap(frame.tracer, d[name], _sub(src, name))
    for table in ("_parameters", "_buffers", "_modules"):
        entries = d.get(table)
        if entries is not None and name in entries:
            source = ModuleDictSource(src, table, name) if src is not None else None
            return wrap(frame.tracer, entries[name], source)
    if type(m).__getattr__ is not torch.nn.Module.__getattr__:
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"custom __getattr__ of {type(m).__name__}")
    raise missing_attribute(frame, obj, name)


def guard_module_keys(tracer, obj: ModuleValue):
    """Iterating or measuring a container module depends on its _modules keys."""
    if obj.source is not None:
        tracer.add_guard(DictKeysMatch(AttrSource(obj.source, "_modules"), type(obj.module._modules),
                                       tuple(obj.module._modules)))


def _object_attr(frame, obj: ObjectValue, name):
    o, src = obj.obj, obj.source
    if isinstance(o, types.ModuleType) or isinstance(o, type) and _is_plain_getattr(type(o)):
        try:
            value = getattr(o, name)
        except AttributeError:
            raise missing_attribute(frame, obj, name) from None
        if isinstance(o, type):
            raw = inspect.getattr_static(o, name, None)
            if isinstance(raw, classmethod):
                return MethodValue(obj, raw.__func__)
        return wrap(frame.tracer, value, _sub(src, name))
    cls = type(o)
    if not _is_plain_getattr(cls):
        custom = inspect.getattr_static(cls, "__getattribute__")
        if isinstance(custom, types.FunctionType):        # e.g. transformers' config attribute aliases
            from .calls import call
            return call(frame, FunctionValue(custom), [obj, Const(name)], {})
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"custom __getattribute__ of {cls.__name__}")
    return generic_object_attr(frame, obj, name)


def generic_object_attr(frame, obj: ObjectValue, name: str) -> Value:
    """object.__getattribute__: data descriptors, instance dict, class attributes."""
    o, src = obj.obj, obj.source
    cls = type(o)
    if src is not None and not _is_plain_getattr(cls):
        src = _GenericOwner(src)
    cls_attr = inspect.getattr_static(cls, name, _MISSING)
    is_data_descr = cls_attr is not _MISSING and hasattr(type(cls_attr), "__set__")
    d = getattr(o, "__dict__", None)
    if isinstance(o, contextvars.ContextVar) and name in context_vars.METHODS:
        return MethodValue(obj, name)
    if name == "__dict__" and d is not None and src is not None:
        view = wrap(frame.tracer, d, _sub(src, name))
        if isinstance(view, DictValue):               # with this trace's own stores on top
            view.items.update(frame.tracer.pending_attrs.get(id(obj), {}))
        return view
    if is_data_descr and not isinstance(cls_attr, property):
        return wrap(frame.tracer, getattr(o, name), _sub(src, name))   # __slots__ members, getset descriptors
    if not is_data_descr and d is not None and name in d:
        return wrap(frame.tracer, d[name], _sub(src, name))
    if _is_dict_base_method_of(obj, cls_attr):          # `outputs.keys` of an existing ModelOutput
        return MethodValue(obj, cls_attr)
    if cls_attr is not _MISSING:
        return _class_attribute(frame, obj, cls, name, src)
    if d is None or getattr(cls, "__getattr__", None) is not None and _is_plain_getattr(cls):
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}")
    raise missing_attribute(frame, obj, name, generic=not _is_plain_getattr(cls))


def missing_attribute(frame, obj: Value, name: str, generic: bool = False) -> TracedException:
    """The AttributeError eager Python raises for `obj.name`, with a guard that the attribute is
    still missing when the graph is reused (the code may catch it: getattr's default, hasattr)."""
    if obj.source is not None:
        frame.tracer.add_guard(AttrAbsent(obj.source, name, generic))
    kind = obj.python_type()
    what = f"type object '{obj.obj.__name__}'" if isinstance(obj, ObjectValue) and isinstance(obj.obj, type) \
        else f"'{kind.__name__}' object"
    return user_error(AttributeError, f"{what} has no attribute {name!r}")


def _is_plain_getattr(cls) -> bool:
    return cls.__getattribute__ in _GENERIC_GETATTRIBUTE


# Slots that are the generic lookup (PyObject_GenericGetAttr) under another name
_GENERIC_GETATTRIBUTE = (object.__getattribute__, type.__getattribute__, types.ModuleType.__getattribute__,
                         dict.__getattribute__, contextvars.ContextVar.__getattribute__)


def _new_object_attr(frame, obj: NewObjectValue, name):
    if not _is_plain_getattr(obj.cls):
        custom = inspect.getattr_static(obj.cls, "__getattribute__")
        if isinstance(custom, types.FunctionType):
            from .calls import call
            return call(frame, FunctionValue(custom), [obj, Const(name)], {})
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"custom __getattribute__ of {obj.cls.__name__}")
    return generic_new_object_attr(frame, obj, name)


def generic_new_object_attr(frame, obj: NewObjectValue, name: str) -> Value:
    """object.__getattribute__ on an object created while tracing, then the class's __getattr__."""
    if name == "__dict__":
        return _instance_dict(frame, obj)
    if name in obj.attrs:
        return obj.attrs[name]
    if obj.items is not None:
        from .dict_subclass import is_base_method
        attr = inspect.getattr_static(obj.cls, name, None)
        if is_base_method(attr):                 # `self.keys`, `self.items`: modelled on its contents
            return MethodValue(obj, attr)
    result = _class_attribute(frame, obj, obj.cls, name, None)
    if result is not _MISSING:
        return result
    fallback = inspect.getattr_static(obj.cls, "__getattr__", None)
    if isinstance(fallback, types.FunctionType):
        from .calls import call
        return call(frame, FunctionValue(fallback), [obj, Const(name)], {})
    if fallback is not None:
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"__getattr__ of {obj.cls.__name__}")
    raise user_error(AttributeError, f"'{obj.cls.__name__}' object has no attribute {name!r}")


def _instance_dict(frame, obj: NewObjectValue) -> DictValue:
    """`obj.__dict__`: a dict value that shares the object's attribute table, so reads and writes
    through it are the object's. It must not escape the trace (it would come back as a copy)."""
    view = DictValue({}, dict)
    view.items = obj.attrs
    frame.tracer.instance_dicts.append(view)
    return view


def _exception_attr(frame, obj: NewExceptionValue, name):
    """`e.args` and friends of an exception made while tracing (its state is all constants)."""
    try:
        value = getattr(obj.obj, name)
    except AttributeError:
        raise missing_attribute(frame, obj, name) from None
    from .wrap import is_constant
    if name in ("args", "__class__") or is_constant(value) and not name.startswith("__"):
        return wrap(frame.tracer, value, None)
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{type(obj.obj).__name__}.{name}")


def _function_attr(frame, obj, name):
    if isinstance(obj, ClosureValue):
        if name in obj.attrs:
            return obj.attrs[name]
        values = {"__name__": obj.code.co_name, "__qualname__": obj.qualname, "__code__": obj.code,
                  "__doc__": obj.code.co_consts[0] if obj.code.co_consts and isinstance(obj.code.co_consts[0], str)
                  else None, "__module__": obj.globals.get("__name__")}
        if name in values:
            return Const(values[name])
        raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"function.{name}")
    fn = obj.fn
    try:
        value = getattr(fn, name)
    except AttributeError:
        raise missing_attribute(frame, obj, name) from None
    if isinstance(obj, CallableValue) and isinstance(fn, type):
        raw = inspect.getattr_static(fn, name, None)
        if isinstance(raw, classmethod) and isinstance(raw.__func__, types.FunctionType):
            return MethodValue(obj, raw.__func__)
        if isinstance(raw, types.FunctionType):
            return FunctionValue(raw, _sub(obj.source, name))
    return wrap(frame.tracer, value, _sub(obj.source, name))


def _method_attr(frame, obj: MethodValue, name):
    if name == "__self__":
        return obj.obj
    if name == "__func__" and isinstance(obj.fn, types.FunctionType):
        return FunctionValue(obj.fn)
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"method.{name}")


def _super_attr(frame, obj: SuperValue, name):
    from .builtins_table import python_class
    mro = python_class(obj.obj).__mro__
    for klass in mro[mro.index(obj.cls) + 1:]:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if isinstance(attr, types.FunctionType):
                return MethodValue(obj.obj, attr)
            if isinstance(attr, property) and attr.fget is not None:
                from .calls import call
                return call(frame, FunctionValue(attr.fget), [obj.obj], {})
            if isinstance(attr, classmethod):
                return MethodValue(CallableValue(python_class(obj.obj)), attr.__func__)
            if isinstance(attr, staticmethod):
                return wrap(frame.tracer, attr.__func__, None)
            if attr is object.__init__:
                return CallableValue(object.__init__)   # modelled as a no-op (builtins_table)
            if attr is object.__getattribute__:
                return MethodValue(obj.obj, object.__getattribute__)   # the generic lookup (calls.py)
            if attr is object.__setattr__ or _is_dict_base_method_of(obj.obj, attr):
                return MethodValue(obj.obj, attr)       # called unbound with obj first (calls.py)
            raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"super().{name} ({type(attr).__name__})")
    raise user_error(AttributeError, f"'super' object has no attribute {name!r}")


def _is_dict_base_method_of(obj: Value, attr) -> bool:
    from .dict_subclass import is_base_method, is_dict_object
    return is_dict_object(obj) and is_base_method(attr)


def _grad_mode_attr(frame, obj, name):
    """A grad-mode or autocast context manager: only entering and leaving it are modelled."""
    if name in ("__enter__", "__exit__"):
        return MethodValue(obj, name)
    raise Unsupported(breaks.UNSUPPORTED_ATTRIBUTE, f"{type(obj).__name__}.{name}")


_LOADERS = {
    TensorValue: _tensor_attr, Const: _const_attr, SeqValue: _seq_attr, DictValue: _container_attr,
    SetValue: _container_attr, ModuleValue: _module_attr, NewModuleValue: _module_attr, ObjectValue: _object_attr, NewExceptionValue: _exception_attr,
    NewObjectValue: _new_object_attr, FunctionValue: _function_attr, ClosureValue: _function_attr,
    CallableValue: _function_attr, MethodValue: _method_attr, GradModeValue: _grad_mode_attr,
    AutocastValue: _grad_mode_attr,
    SuperValue: _super_attr,
}


def store_attr(frame, obj: Value, name: str, value: Value):
    tracer = frame.tracer
    if isinstance(obj, NewObjectValue):
        setter = inspect.getattr_static(obj.cls, "__setattr__")
        if setter is object.__setattr__:
            generic_setattr(frame, obj, name, value)
        elif isinstance(setter, types.FunctionType):     # e.g. ModelOutput.__setattr__
            from .calls import call
            call(frame, FunctionValue(setter), [obj, Const(name), value], {})
        else:
            raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"custom __setattr__ of {obj.cls.__name__}")
        return
    if isinstance(obj, (ModuleValue, ObjectValue)) and obj.source is not None:
        real = obj.module if isinstance(obj, ModuleValue) else obj.obj
        cls = type(real)
        if isinstance(real, (type, types.ModuleType)):
            raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"setting {name} on {cls.__name__}")
        if isinstance(obj, ModuleValue):
            if cls.__setattr__ is not torch.nn.Module.__setattr__:
                raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"custom __setattr__ of {cls.__name__}")
            for table in ("_parameters", "_modules"):
                if name in real.__dict__.get(table, {}):
                    raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"assigning module {table[1:-1]} {name!r}")
            if name in real.__dict__.get("_buffers", {}):
                if not isinstance(value, TensorValue):
                    raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"assigning a non-tensor to buffer {name!r}")
                current = load_attr(frame, obj, name)
                if isinstance(current, TensorValue) and current.example is value.example:
                    return   # `self.buf += 1`: the in-place op already changed the buffer
            if isinstance(value, (ModuleValue,)):
                raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"assigning a submodule to {name!r}")
        elif cls.__setattr__ is not object.__setattr__:
            setter = inspect.getattr_static(cls, "__setattr__")
            if not isinstance(setter, types.FunctionType):
                raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"custom __setattr__ of {cls.__name__}")
            from .calls import call                        # e.g. ModelOutput.__setattr__ of a real output
            call(frame, FunctionValue(setter), [obj, Const(name), value], {})
            return
        store_existing_attr(frame, obj, name, value)
        return
    raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"setting attribute {name!r} on {type(obj).__name__}")


def store_existing_attr(frame, obj: Value, name: str, value: Value, bypass_setattr: bool = False):
    """object.__setattr__ on an existing object: seen by later reads in this trace, done for real
    after the graph (with object.__setattr__ itself when it bypassed a custom __setattr__)."""
    tracer = frame.tracer
    real = obj.module if isinstance(obj, ModuleValue) else obj.obj
    cls = type(real)
    if obj.source is None or isinstance(real, (type, types.ModuleType)):
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"setting {name} on a {cls.__name__}")
    if hasattr(type(inspect.getattr_static(cls, name, None)), "__set__"):
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"descriptor/property {cls.__name__}.{name}")
    tracer.pending_attrs.setdefault(id(obj), {})[name] = value
    instance_dict = tracer.wrapped.get(id(getattr(real, "__dict__", None)))
    if isinstance(instance_dict, DictValue):          # `obj.__dict__` read earlier: keep it in step
        instance_dict.items[name] = value
    if bypass_setattr:
        tracer.side_effects.append(("call", object.__setattr__, [obj, Const(name), value]))
    else:
        tracer.side_effects.append(("attr", obj, name, value))


def generic_setattr(frame, obj: NewObjectValue, name: str, value: Value):
    """object.__setattr__ on an object created while tracing: a property's setter, else its __dict__."""
    descriptor = inspect.getattr_static(obj.cls, name, None)
    if isinstance(descriptor, property):
        if descriptor.fset is None:
            raise Unsupported(breaks.USER_EXCEPTION, f"AttributeError: property {name!r} has no setter")
        from .calls import call
        call(frame, FunctionValue(descriptor.fset), [obj, value], {})
    elif hasattr(type(descriptor), "__set__"):
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"descriptor {type(descriptor).__name__} for {name!r}")
    else:
        obj.attrs[name] = value
