"""Python builtins the tracer models, one small function each, keyed by the builtin object."""
from __future__ import annotations

import builtins
import functools
import operator

import torch

from . import breaks
from .autograd_function import CTX_METHODS
from .breaks import TracedException, Unsupported, user_error
from .operators import BINARY_OPS, COMPARE_OPS, binary, compare, python_value, truthy, unary
from .sources import ObjectRefSource
from .values import (CallableValue, ClosureValue, Const, DictValue, FunctionValue, IteratorValue, MethodValue,
                     SuperValue,
                     ModuleValue, NewObjectValue, ObjectValue, SeqValue, SetValue, TensorValue, Value)


def _calls():
    from . import calls
    return calls


def python_class(v: Value) -> type:
    """type(v) as the user's program would see it."""
    if isinstance(v, TensorValue):
        real = v.node.meta.get("real_type")
        return real if real is not None else torch.Tensor
    return v.python_type()


def real_class_arg(v: Value):
    """The class (or tuple of classes) passed to isinstance/issubclass."""
    if isinstance(v, CallableValue) and isinstance(v.fn, type):
        return v.fn
    if isinstance(v, ObjectValue) and isinstance(v.obj, type):
        return v.obj
    if isinstance(v, SeqValue):
        return tuple(real_class_arg(i) for i in v.items)
    if isinstance(v, Const) and isinstance(v.value, (type, tuple)):
        return v.value
    raise Unsupported(breaks.UNSUPPORTED_VALUE, "isinstance with a non-class argument")


def builtin_len(tracer, v: Value) -> int:
    if isinstance(v, (SeqValue, DictValue, SetValue)):
        return len(v.items)
    if isinstance(v, Const):
        return len(v.value)
    if isinstance(v, TensorValue):
        if v.example.dim() == 0:
            raise Unsupported(breaks.USER_EXCEPTION, "TypeError: len() of a 0-d tensor")
        return v.example.shape[0]
    if isinstance(v, ModuleValue) and isinstance(v.module, (torch.nn.Sequential, torch.nn.ModuleList,
                                                            torch.nn.ModuleDict)):
        from .attributes import guard_module_keys
        guard_module_keys(tracer, v)
        return len(v.module._modules)
    if isinstance(v, ModuleValue) and isinstance(v.module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
        return len(v.module._parameters)
    from .dict_subclass import call_dunder, is_dict_object
    if is_dict_object(v):
        return python_value(call_dunder(tracer.current_frame, v, "__len__", []))
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"len() of {type(v).__name__}")


def _len(frame, args, kwargs):
    v = args[0]
    if isinstance(v, TensorValue) and v.example.dim() > 0:
        sizes = frame.tracer.graph.sizes(v)
        return Const(sizes.value[0]) if isinstance(sizes, Const) else sizes.items[0]
    return Const(builtin_len(frame.tracer, v))


def _isinstance(frame, args, kwargs):
    cls = python_class(args[0])
    try:
        return Const(issubclass(cls, real_class_arg(args[1])))
    except TypeError as e:
        raise TracedException(e)


def _issubclass(frame, args, kwargs):
    return Const(issubclass(real_class_arg(args[0]), real_class_arg(args[1])))


def _is_attribute_error(e: Unsupported) -> bool:
    return isinstance(e, TracedException) and isinstance(e.exc, AttributeError)


def _getattr(frame, args, kwargs):
    from .attributes import load_attr
    name = python_value(args[1])
    try:
        return load_attr(frame, args[0], name)
    except Unsupported as e:
        if len(args) > 2 and _is_attribute_error(e):
            return args[2]
        raise


def _hasattr(frame, args, kwargs):
    from .attributes import load_attr
    try:
        load_attr(frame, args[0], python_value(args[1]))
        return Const(True)
    except Unsupported as e:
        if _is_attribute_error(e):
            return Const(False)
        raise


def _setattr(frame, args, kwargs):
    from .attributes import store_attr
    store_attr(frame, args[0], python_value(args[1]), args[2])
    return Const(None)


def _items_of(frame, args):
    if len(args) == 1:
        return _calls().iterate(frame, args[0])
    return list(args)


def _minmax(fn, cmp):
    def handler(frame, args, kwargs):
        items = _items_of(frame, args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise user_error(ValueError, f"{fn.__name__}() arg is an empty sequence")
        if "key" in kwargs and not (isinstance(kwargs["key"], Const) and kwargs["key"].value is None):
            keys = [python_value(_calls().call(frame, kwargs["key"], [i], {})) for i in items]
            best = fn(range(len(items)), key=lambda i: keys[i])
            return items[best]
        if all(isinstance(i, Const) for i in items):
            return Const(fn(i.value for i in items))
        if any(isinstance(i, TensorValue) for i in items):
            raise Unsupported(breaks.TENSOR_TO_PYTHON, f"{fn.__name__}() compares tensors by value")
        return Const(fn(python_value(i) for i in items))
    return handler


def _abs(frame, args, kwargs):
    return unary(frame.tracer, operator.abs, args[0])


def _sum(frame, args, kwargs):
    items = _calls().iterate(frame, args[0])
    total = args[1] if len(args) > 1 else kwargs.get("start", Const(0))
    for item in items:
        total = binary(frame.tracer, operator.add, total, item)
    return total


def _any(frame, args, kwargs):
    return Const(any(truthy(frame.tracer, i) for i in _calls().iterate(frame, args[0])))


def _all(frame, args, kwargs):
    return Const(all(truthy(frame.tracer, i) for i in _calls().iterate(frame, args[0])))


def _range(frame, args, kwargs):
    return Const(range(*[python_value(a) for a in args]))


def _enumerate(frame, args, kwargs):
    start = python_value(args[1] if len(args) > 1 else kwargs.get("start", Const(0)))
    items = _calls().iterate(frame, args[0])
    return IteratorValue([SeqValue([Const(start + i), v], tuple) for i, v in enumerate(items)])


def _zip(frame, args, kwargs):
    columns = [_calls().iterate(frame, a) for a in args]
    if python_value(kwargs.get("strict", Const(False))) and len({len(c) for c in columns}) > 1:
        raise user_error(ValueError, "zip() arguments have different lengths")
    return IteratorValue([SeqValue(list(row), tuple) for row in zip(*columns)])


def _tuple(frame, args, kwargs):
    return SeqValue(_calls().iterate(frame, args[0]) if args else [], tuple)


def _list(frame, args, kwargs):
    return SeqValue(_calls().iterate(frame, args[0]) if args else [], list)


def _set(cls):
    def handler(frame, args, kwargs):
        items = _calls().iterate(frame, args[0]) if args else []
        return SetValue([Const(python_value(i)) for i in items], cls)
    return handler


def _dict(frame, args, kwargs):
    from .dict_subclass import is_dict_object, mapping_items
    items = {}
    if args:
        src = args[0]
        if isinstance(src, DictValue):
            items.update(src.items)
        elif is_dict_object(src):
            items.update(mapping_items(frame, src))
        else:
            for pair in _calls().iterate(frame, src):
                k, v = _calls().iterate(frame, pair)
                items[python_value(k)] = v
    items.update(kwargs)
    return DictValue(items, dict)


def _iter(frame, args, kwargs):
    if isinstance(args[0], IteratorValue):
        return args[0]
    return IteratorValue(_calls().iterate(frame, args[0]))


def _next(frame, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorValue):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, "next() on a non-iterator")
    item = it.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise user_error(StopIteration)
    return item


def _reversed(frame, args, kwargs):
    return IteratorValue(list(reversed(_calls().iterate(frame, args[0]))))


def _sorted(frame, args, kwargs):
    items = [python_value(i) for i in _calls().iterate(frame, args[0])]
    if "key" in kwargs:
        raise Unsupported(breaks.UNSUPPORTED_VALUE, "sorted() with key=")
    reverse = python_value(kwargs.get("reverse", Const(False)))
    return SeqValue([Const(i) for i in sorted(items, reverse=reverse)], list)


def _map(frame, args, kwargs):
    fn, columns = args[0], [_calls().iterate(frame, a) for a in args[1:]]
    return IteratorValue([_calls().call(frame, fn, list(row), {}) for row in zip(*columns)])


def _filter(frame, args, kwargs):
    fn, items = args[0], _calls().iterate(frame, args[1])
    if isinstance(fn, Const) and fn.value is None:
        return IteratorValue([i for i in items if truthy(frame.tracer, i)])
    return IteratorValue([i for i in items if truthy(frame.tracer, _calls().call(frame, fn, [i], {}))])


def _callable(frame, args, kwargs):
    v = args[0]
    if isinstance(v, (FunctionValue, ClosureValue, CallableValue, MethodValue, ModuleValue)):
        return Const(True)
    if isinstance(v, (Const, SeqValue, DictValue, SetValue, TensorValue)):
        return Const(callable(python_value(v)) if not isinstance(v, TensorValue) else False)
    return Const(callable(getattr(v, "obj", None)) if isinstance(v, ObjectValue) else hasattr(v.python_type(), "__call__"))


def _type(frame, args, kwargs):
    if len(args) != 1:
        raise Unsupported(breaks.UNKNOWN_CALL, "type() with 3 arguments")
    cls = python_class(args[0])
    # Read through a reference to the class itself, so its attributes are guarded like any
    # object's: `type(self).counter` must not be baked in as the value it had while tracing.
    return CallableValue(cls, ObjectRefSource(cls))


def _fold(fn):
    def handler(frame, args, kwargs):
        if any(isinstance(a, TensorValue) for a in args):
            if fn in (round, pow, divmod):
                method = {round: "__round__", pow: "__pow__", divmod: "__divmod__"}[fn]
                return frame.tracer.graph.call("call_method", method, tuple(args), kwargs)
            raise Unsupported(breaks.TENSOR_TO_PYTHON, f"{fn.__name__}(tensor)")
        try:
            return Const(fn(*[python_value(a) for a in args], **{k: python_value(v) for k, v in kwargs.items()}))
        except Unsupported:
            raise
        except Exception as e:
            raise TracedException(e)
    return handler


def _print(frame, args, kwargs):
    raise Unsupported(breaks.PRINT_OR_LOG, "print()")


def _operator_binary(fn):
    def handler(frame, args, kwargs):
        return binary(frame.tracer, fn, args[0], args[1])
    return handler


def _operator_compare(fn):
    def handler(frame, args, kwargs):
        return compare(frame.tracer, fn, args[0], args[1])
    return handler


def _operator_getitem(frame, args, kwargs):
    return _calls().getitem(frame, args[0], args[1])


def _operator_setitem(frame, args, kwargs):
    return _calls().setitem(frame, args[0], args[1], args[2])


def _operator_not(frame, args, kwargs):
    return Const(not truthy(frame.tracer, args[0]))


def _operator_truth(frame, args, kwargs):
    return Const(truthy(frame.tracer, args[0]))


def _operator_unary(fn):
    def handler(frame, args, kwargs):
        return unary(frame.tracer, fn, args[0])
    return handler


def _object_setattr(frame, args, kwargs):
    from .attributes import generic_setattr
    target, name, value = args
    if isinstance(target, ObjectValue):
        from .attributes import store_existing_attr
        store_existing_attr(frame, target, python_value(name), value, bypass_setattr=True)
    elif isinstance(target, NewObjectValue):
        generic_setattr(frame, target, python_value(name), value)
    else:
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"object.__setattr__ on a {type(target).__name__}")
    return Const(None)


def _check_new(base_new, cls):
    """`base_new(cls)` must work as in eager (object.__new__ refuses e.g. dict subclasses); making
    an instance without running __init__ has no side effects."""
    try:
        base_new(cls)
    except TypeError as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {e}")


def _object_new(frame, args, kwargs):
    cls = real_class_arg(args[0])
    _check_new(object.__new__, cls)
    return NewObjectValue(cls)


def _dict_new(frame, args, kwargs):
    from .dict_subclass import dict_base
    cls = real_class_arg(args[0])
    if dict_base(cls) is None:
        raise Unsupported(breaks.UNKNOWN_CALL, f"dict.__new__({getattr(cls, '__qualname__', cls)})")
    return NewObjectValue(cls, items={})


def _tuple_new(frame, args, kwargs):
    cls = real_class_arg(args[0])
    return SeqValue(_calls().iterate(frame, args[1]) if len(args) > 1 else [], cls)


def _wraps(frame, args, kwargs):
    """functools.wraps(wrapped) -> a decorator that copies wrapped's metadata onto a traced closure."""
    wrapped = args[0]
    return CallableValue(functools.partial(_apply_wraps, wrapped))


def _apply_wraps(wrapped, wrapper):
    raise AssertionError("only called symbolically")


def _apply_wraps_handler(frame, args, kwargs):
    raise AssertionError("dispatched through _call_callable's partial handling")


def copy_wrapper_metadata(frame, wrapped: Value, wrapper: Value) -> Value:
    from .attributes import load_attr
    if not isinstance(wrapper, ClosureValue):
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, "functools.wraps on a function that exists outside the frame")
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            wrapper.attrs[name] = load_attr(frame, wrapped, name)
        except Unsupported:
            pass
    wrapper.attrs["__wrapped__"] = wrapped
    return wrapper


def _super(frame, args, kwargs):
    if args:
        return SuperValue(real_class_arg(args[0]), args[1])
    code = frame.code                       # zero-argument form: __class__ cell and first argument
    if "__class__" not in frame.cells or not code.co_argcount:
        raise Unsupported(breaks.USER_EXCEPTION, "RuntimeError: super(): no arguments")
    from .handlers.names import cell_contents, read_local
    cls = real_class_arg(cell_contents(frame, frame.cells["__class__"], "__class__"))
    return SuperValue(cls, read_local(frame, code.co_varnames[0]))


def _object_init(frame, args, kwargs):
    return Const(None)


def _isinstance_like_id(frame, args, kwargs):
    raise Unsupported(breaks.UNKNOWN_CALL, "id() of a traced value")


BUILTINS = {
    len: _len, isinstance: _isinstance, issubclass: _issubclass, getattr: _getattr, hasattr: _hasattr,
    setattr: _setattr, min: _minmax(min, operator.lt), max: _minmax(max, operator.gt), abs: _abs, sum: _sum,
    any: _any, all: _all, range: _range, enumerate: _enumerate, zip: _zip, tuple: _tuple, list: _list,
    set: _set(set), frozenset: _set(frozenset), dict: _dict, iter: _iter, next: _next, reversed: _reversed,
    sorted: _sorted, map: _map, filter: _filter, callable: _callable, type: _type, print: _print,
    round: _fold(round), divmod: _fold(divmod), pow: _fold(pow), hash: _fold(hash), repr: _fold(repr),
    format: _fold(format), chr: _fold(chr), ord: _fold(ord), id: _isinstance_like_id,
    super: _super, object.__init__: _object_init, functools.wraps: _wraps, object.__setattr__: _object_setattr, object.__new__: _object_new, tuple.__new__: _tuple_new,
    dict.__new__: _dict_new,
    operator.getitem: _operator_getitem, operator.setitem: _operator_setitem, operator.not_: _operator_not,
    operator.truth: _operator_truth, operator.neg: _operator_unary(operator.neg),
    operator.pos: _operator_unary(operator.pos), operator.invert: _operator_unary(operator.invert),
    **{fn: _operator_binary(fn) for fn in BINARY_OPS.values()},
    **{fn: _operator_compare(fn) for fn in COMPARE_OPS.values()},
    **CTX_METHODS,
}
