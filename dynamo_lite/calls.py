"""Calling symbolic values.

`call` dispatches on the kind of callee: user Python functions are inlined (symbolically
executed), torch functions and tensor methods become graph nodes, builtins and container
methods are modelled by tables, classes are constructed. Anything else is `Unsupported`.
Iteration and subscripting live here too, since builtins share them.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import math
import operator
import types
import weakref
from collections import OrderedDict
from typing import Callable, Optional

import torch

from . import autograd_function, breaks, config, dict_subclass, higher_order, numpy_values
from .breaks import TracedException, Unsupported, user_error
from .fallback import skip
from .operators import (BINARY_OPS, binary, compare, contains, identical, is_python_constant, python_value, truthy,
                        unary)
from .sources import AttrSource, ItemSource, WeakRefTargetSource
from .values import (AutocastValue, CallableValue, CellValue, ClosureValue, Const, DictValue, FunctionValue,
                     GradModeValue, IteratorValue, MethodValue, ModuleValue, NewExceptionValue, NewModuleValue,
                     NewObjectValue, ObjectValue, SeqValue, SetValue, SliceValue, SymValue, TensorValue, Value)
from .wrap import is_torch_namespace, wrap


# ============================================================================================
# dispatch
# ============================================================================================

def call(frame, fn: Value, args: list, kwargs: dict) -> Value:
    handler = _CALLERS.get(type(fn))
    if handler is None:
        raise Unsupported(breaks.UNKNOWN_CALL, f"calling a {type(fn).__name__}")
    return handler(frame, fn, list(args), dict(kwargs))


def _call_function(frame, fn: FunctionValue, args, kwargs):
    f = fn.fn
    modelled = BUILTINS.get(f)
    if modelled is not None:
        return modelled(frame, args, kwargs)
    if f in _MODULE_CALLS and args and isinstance(args[0], ModuleValue):
        return _call_module(frame, args[0], args[1:], kwargs)
    if f is autograd_function.FUNCTION_APPLY and args and isinstance(args[0], CallableValue) \
            and autograd_function.is_function_class(args[0].fn):
        return autograd_function.apply(frame, args[0].fn, args[1:], kwargs)
    rule = skip.call_rule(f)
    if rule == skip.UNWRAP:
        return call(frame, wrap(frame.tracer, skip.unwrapped(f), None) if not isinstance(skip.unwrapped(f), types.FunctionType)
                    else FunctionValue(skip.unwrapped(f)), args, kwargs)
    if rule == skip.DISABLED:
        raise Unsupported(breaks.DISABLED_FUNCTION, f.__qualname__)
    if rule == skip.BREAK:
        raise Unsupported(breaks.EXPLICIT_BREAK, "dynamo_lite.graph_break()")
    if rule == skip.GRAPH_OP and not is_torch_namespace(f):
        return frame.tracer.graph.call("call_function", f, tuple(args), kwargs)
    if rule == skip.GRAPH_OP:
        return torch_call(frame, f, args, kwargs)
    if f in PURE_LIBRARY_FUNCTIONS:
        return _fold_call(f, [Const(_class_or_value(a)) for a in args], kwargs)
    if rule == skip.SKIPPED and numpy_values.is_foldable(f):      # np.ones, np.linspace...
        return numpy_values.fold_call(frame, fn, f, args, kwargs)
    if f is inspect.signature and len(args) == 1 and not kwargs:
        return _signature(args[0])
    if rule == skip.SKIPPED:
        if f in _PRINTERS or getattr(f, "__module__", "") in ("logging", "warnings"):
            raise Unsupported(breaks.PRINT_OR_LOG, f.__qualname__)
        raise Unsupported(breaks.SKIPPED_FILE, f"{f.__module__}.{f.__qualname__}")
    defaults = _wrap_defaults(frame, fn)
    kwdefaults = {k: wrap(frame.tracer, v, _defaults_source(fn, "__kwdefaults__", k))
                  for k, v in (f.__kwdefaults__ or {}).items()}
    closure = _real_closure(frame, fn)
    return inline(frame, f.__code__, f.__globals__, defaults, kwdefaults, closure, args, kwargs, fn.source)


def _defaults_source(fn: FunctionValue, attr, key):
    return ItemSource(AttrSource(fn.source, attr), key) if fn.source is not None else None


def _wrap_defaults(frame, fn: FunctionValue):
    return tuple(wrap(frame.tracer, v, _defaults_source(fn, "__defaults__", i))
                 for i, v in enumerate(fn.fn.__defaults__ or ()))


def _real_closure(frame, fn: FunctionValue) -> tuple:
    from .interpreter import LazyValue
    cells = []
    tracer = frame.tracer
    for i, cell in enumerate(fn.fn.__closure__ or ()):
        known = tracer.wrapped.get(id(cell))
        if known is None:
            source = ItemSource(AttrSource(fn.source, "__closure__"), i) if fn.source is not None else None
            try:
                contents = cell.cell_contents
                lazy = LazyValue(contents, AttrSource(source, "cell_contents") if source is not None else None)
            except ValueError:
                lazy = None
            known = CellValue(lazy, source)
            tracer.wrapped[id(cell)] = known
            tracer.keepalive.append(cell)
        cells.append(known)
    return tuple(cells)


def _call_closure(frame, fn: ClosureValue, args, kwargs):
    return inline(frame, fn.code, fn.globals, fn.defaults, fn.kwdefaults, fn.closure, args, kwargs, None)


def _call_method(frame, m: MethodValue, args, kwargs):
    if isinstance(m.obj, ModuleValue) and m.fn in MODULE_METHODS:
        return MODULE_METHODS[m.fn](frame, m.obj, args, kwargs)
    if isinstance(m.fn, types.FunctionType):
        return call(frame, FunctionValue(m.fn), [m.obj, *args], kwargs)
    if m.fn is object.__getattribute__:            # super().__getattribute__(name) from a custom one
        from .attributes import generic_new_object_attr, generic_object_attr, load_attr
        name = python_value(args[0])
        if isinstance(m.obj, NewObjectValue):
            return generic_new_object_attr(frame, m.obj, name)
        return generic_object_attr(frame, m.obj, name) if isinstance(m.obj, ObjectValue) else load_attr(frame, m.obj, name)
    if isinstance(m.fn, (types.WrapperDescriptorType, types.MethodDescriptorType)):
        # a C slot bound to an object (`super().__setitem__`, `self.keys`): call it unbound
        return call(frame, CallableValue(m.fn), [m.obj, *args], kwargs)
    table = _METHOD_TABLES.get(type(m.obj))
    if table is None:
        raise Unsupported(breaks.UNKNOWN_CALL, f"method {m.fn} of {type(m.obj).__name__}")
    return table(frame, m.obj, m.fn, args, kwargs)


def _call_module(frame, mv: ModuleValue, args, kwargs):
    m = mv.module
    tracer = frame.tracer
    for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
        if getattr(m, hooks, None):
            raise Unsupported(breaks.UNKNOWN_CALL, f"module {type(m).__name__} has {hooks[1:]}")
    if mv.source is not None:
        from .guards import NoHooksMatch
        tracer.add_guard(NoHooksMatch(mv.source))
    from torch.nn.modules import module as module_mod
    if any(getattr(module_mod, name, None) for name in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                        "_global_backward_hooks", "_global_backward_pre_hooks")):
        raise Unsupported(breaks.UNKNOWN_CALL, "global module hooks are registered")
    if "forward" in m.__dict__:
        return call(frame, wrap(tracer, m.__dict__["forward"], AttrSource(mv.source, "forward")
                                if mv.source is not None else None), args, kwargs)
    forward = type(m).forward
    if not isinstance(forward, types.FunctionType):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{type(m).__name__}.forward is not a Python function")
    if forward is torch.nn.Module.forward:
        raise Unsupported(breaks.USER_EXCEPTION, f"{type(m).__name__} has no forward")
    return call(frame, FunctionValue(forward), [mv, *args], kwargs)


def _call_object(frame, obj: Value, args, kwargs):
    real = obj.obj if isinstance(obj, ObjectValue) else None
    if type(real) is weakref.ref and not args and not kwargs:
        return _dereference(frame, obj)
    if numpy_values.is_foldable(real):            # ufuncs, np.where / np.stack dispatchers
        return numpy_values.fold_call(frame, obj, real, args, kwargs)
    if isinstance(obj, NewObjectValue) or real is not None and not isinstance(real, (type, types.ModuleType)):
        from .attributes import load_attr
        return call(frame, load_attr(frame, obj, "__call__"), args, kwargs)
    if isinstance(real, type):
        return _call_callable(frame, CallableValue(real, obj.source), args, kwargs)
    raise Unsupported(breaks.UNKNOWN_CALL, f"calling {type(real).__name__}")


def _dereference(frame, ref: ObjectValue) -> Value:
    """`ref()` of an existing weak reference (nn.RNN keeps its flat weights' refs): the object it
    points to now, read through a source that calls the reference again, so the guards of what it
    returns (an alias of the parameter, or None) are checked on every call."""
    if ref.source is None:
        raise Unsupported(breaks.UNKNOWN_CALL, "calling a weak reference the tracer cannot reload")
    return wrap(frame.tracer, ref.obj(), WeakRefTargetSource(ref.source))


def _call_const(frame, c: Const, args, kwargs):
    raise Unsupported(breaks.USER_EXCEPTION, f"'{type(c.value).__name__}' object is not callable")


def _call_callable(frame, fn: CallableValue, args, kwargs):
    f = fn.fn
    original = getattr(f, "_torchdynamo_inline", None) if isinstance(f, torch.jit.ScriptFunction) else None
    if isinstance(original, types.FunctionType):
        # `@torch.jit.script def f`: torch keeps the Python function for tracers; trace that
        return call(frame, FunctionValue(original), args, kwargs)
    handler = BUILTINS.get(f) if _hashable(f) else None
    if handler is not None:
        return handler(frame, args, kwargs)
    if numpy_values.converts_array(f, args):
        return numpy_values.to_tensor(frame, f, args, kwargs)
    if numpy_values.is_foldable(f):
        return numpy_values.fold_call(frame, fn, f, args, kwargs)
    if isinstance(f, type):
        return construct(frame, fn, args, kwargs)
    if f in _PRINTERS:
        raise Unsupported(breaks.PRINT_OR_LOG, getattr(f, "__qualname__", str(f)))
    if isinstance(f, types.BuiltinFunctionType) and getattr(f, "__module__", None) in ("math", "_operator", "operator"):
        return _fold_call(f, args, kwargs)
    if is_torch_namespace(f) or isinstance(f, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
            and getattr(f, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase):
        return torch_call(frame, f, args, kwargs)
    if isinstance(f, functools.partial) and f.func is _apply_wraps:
        return copy_wrapper_metadata(frame, f.args[0], args[0])
    if isinstance(f, functools.partial):
        inner = wrap(frame.tracer, f.func, AttrSource(fn.source, "func") if fn.source else None)
        pargs = [wrap(frame.tracer, a, None) for a in f.args]
        pkw = {k: wrap(frame.tracer, v, None) for k, v in f.keywords.items()}
        return call(frame, inner, [*pargs, *args], {**pkw, **kwargs})
    if dict_subclass.is_base_method(f) and args and dict_subclass.is_dict_object(args[0]):
        return dict_subclass.call_method(frame, args[0], f, args[1:], kwargs)
    if isinstance(f, functools._lru_cache_wrapper) and all(map(is_python_constant, [*args, *kwargs.values()])):
        # `@lru_cache def is_x_available()`: the cache promises one answer per arguments; keep it
        # when it is a plain constant (the eager program would get the cached answer too)
        from .wrap import is_constant
        result = _fold_call(f, args, kwargs)
        if is_constant(result.value):
            return result
    if isinstance(f, (types.MethodDescriptorType, types.BuiltinMethodType)) and args:
        owner = getattr(f, "__objclass__", None)
        if owner is not None and isinstance(args[0], (SeqValue, DictValue, SetValue, Const)):
            return call(frame, MethodValue(args[0], f.__name__), args[1:], kwargs)
    raise Unsupported(breaks.UNKNOWN_CALL, f"{getattr(f, '__module__', '') or ''}.{getattr(f, '__qualname__', f)}")


def _call_grad_mode(frame, g: GradModeValue, args, kwargs):
    # `@torch.no_grad()` used as a decorator inside traced code is not modelled.
    raise Unsupported(breaks.UNKNOWN_CALL, "calling a grad-mode object")


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


import warnings as _warnings  # noqa: E402

_PRINTERS = {print, builtins.input, breakpoint, _warnings.warn, _warnings.warn_explicit}
_MODULE_CALLS = {torch.nn.Module.__call__, getattr(torch.nn.Module, "_call_impl", None)} - {None}


def plain_exception_class(cls: type) -> bool:
    """An exception class whose construction runs no Python code (builtin or a plain subclass)."""
    return all(not isinstance(getattr(k, attr, None), types.FunctionType)
               for k in cls.__mro__ for attr in ("__init__", "__new__")
               if attr in k.__dict__)


def _fold_call(f, args, kwargs):
    try:
        return Const(f(*[python_value(a) for a in args], **{k: python_value(v) for k, v in kwargs.items()}))
    except Unsupported:
        raise
    except Exception as e:
        raise TracedException(e, f"{f.__name__} raised {type(e).__name__}: {e}")


# ============================================================================================
# inlining
# ============================================================================================

def bind_args(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict, args: list, kwargs: dict) -> dict:
    nargs, nkwonly, nposonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nargs], names[nargs:nargs + nkwonly]
    i = nargs + nkwonly
    varargs = names[i] if code.co_flags & 0x04 else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & 0x08 else None
    bound: dict = {}
    for pname, value in zip(positional, args):
        bound[pname] = value
    extra = args[nargs:]
    if extra and varargs is None:
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {name}() takes {nargs} positional arguments "
                                                 f"but {len(args)} were given")
    extra_kw = {}
    for key, value in kwargs.items():
        if key in positional[nposonly:] or key in kwonly:
            if key in bound:
                raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {name}() got multiple values for {key!r}")
            bound[key] = value
        elif varkw is not None:
            extra_kw[key] = value
        else:
            raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {name}() got an unexpected keyword argument {key!r}")
    first_default = nargs - len(defaults)
    for j, pname in enumerate(positional):
        if pname not in bound:
            if j >= first_default:
                bound[pname] = defaults[j - first_default]
            else:
                raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {name}() missing argument {pname!r}")
    for pname in kwonly:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {name}() missing keyword argument {pname!r}")
    if varargs is not None:
        bound[varargs] = SeqValue(extra, tuple)
    if varkw is not None:
        bound[varkw] = DictValue(extra_kw, dict)
    return bound


def inline(frame, code, globals_, defaults, kwdefaults, closure, args, kwargs, fn_source) -> Value:
    from .interpreter import Frame
    if frame.depth + 1 > config.inline_depth_limit:
        raise Unsupported(breaks.INLINE_LIMIT, f"depth {frame.depth + 1} at {code.co_name}")
    if code.co_flags & 0x180 or code.co_flags & 0x200:   # coroutine / async generator
        raise Unsupported(breaks.GENERATOR_FRAME, f"coroutine {code.co_name}")
    bound = bind_args(code, code.co_name, defaults, kwdefaults, args, kwargs)
    child = Frame(frame.tracer, code, globals_, bound, closure, parent=frame, fn_source=fn_source)
    result = frame.tracer.run(child)
    if child.yields is not None:
        return IteratorValue(child.yields)
    return result


# ============================================================================================
# torch
# ============================================================================================

_GLOBAL_STATE_PREFIXES = ("set_", "manual_seed", "seed", "use_deterministic", "save", "load", "_set", "initial_seed",
                          "get_rng_state", "set_rng_state", "compile", "autocast", "backward", "grad")
_CONST_TORCH_FUNCTIONS = {"is_scripting", "is_tracing", "_get_tracing_state", "is_compiling", "is_dynamo_compiling",
                          "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
                          "is_inference_mode_enabled", "is_autocast_enabled",
                          "get_default_dtype", "is_tensor", "is_storage", "is_floating_point", "is_complex",
                          "numel", "result_type", "promote_types", "can_cast", "broadcast_shapes",
                          "is_nonzero", "get_autocast_gpu_dtype", "is_autocast_cpu_enabled", "typename",
                          "_has_torch_function", "_has_torch_function_unary", "_has_torch_function_variadic",
                          "get_fastpath_enabled", "is_available", "is_built", "device_count",
                          "is_current_stream_capturing"}
_TENSOR_METHODS_TO_PYTHON = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                             "__complex__", "data_ptr", "storage", "untyped_storage", "__array__", "__len__"}
_TENSOR_METHODS_UNSUPPORTED = {"backward", "register_hook", "retain_grad", "share_memory_", "pin_memory",
                               "record_stream", "set_", "resize_", "__setstate__", "__reduce_ex__", "__deepcopy__",
                               "apply_", "map_", "map2_", "tolist", "to_sparse", "numpy"}


_COMPILING_QUERIES = {torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling,
                      getattr(torch._utils, "is_compiling", None)} - {None}


def torch_call(frame, f, args, kwargs) -> Value:
    name = getattr(f, "__name__", "")
    module = getattr(f, "__module__", "") or ""
    if f in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.inference_mode):
        return construct(frame, CallableValue(f), args, kwargs)
    if name == "clone" and type(getattr(f, "__self__", None)) in (torch.no_grad, torch.enable_grad) and not args:
        # `@torch.no_grad()` on a function: its wrapper enters `ctx.clone()`, a fresh no_grad()
        return construct(frame, CallableValue(type(f.__self__)), [], {})
    if f is torch._C._set_grad_enabled:
        enabled = truthy(frame.tracer, args[0])
        frame.tracer.set_grad_enabled(enabled)
        return Const(None)
    if f is torch.is_grad_enabled:
        return Const(frame.tracer.graph.grad_enabled)      # the traced grad mode, not the tracer's
    if f in (torch.is_autocast_enabled, torch.get_autocast_dtype) and len(args) == 1 and not kwargs \
            and isinstance(args[0], Const) and args[0].value in frame.tracer.graph.autocast:
        enabled, dtype = frame.tracer.graph.autocast[args[0].value]     # the traced autocast state
        return Const(enabled if f is torch.is_autocast_enabled else dtype)
    if higher_order.handles(f):
        return higher_order.call(frame, f, args, kwargs)
    if f in _COMPILING_QUERIES:
        # Like TorchDynamo: code being captured is code being compiled, so libraries take their
        # compile-friendly paths (no data-dependent checks, no ContextVars). Frames that run
        # eagerly call the real function and see False.
        return Const(True)
    if name in _CONST_TORCH_FUNCTIONS and not any(isinstance(a, TensorValue) for a in _flat(args, kwargs)):
        return _fold_call(f, args, kwargs)
    if name in _CONST_TORCH_FUNCTIONS and name in ("is_tensor", "is_floating_point", "is_complex", "numel",
                                                   "result_type", "is_nonzero", "has_torch_function",
                                                   "has_torch_function_unary", "has_torch_function_variadic",
                                                   "_has_torch_function", "_has_torch_function_unary",
                                                   "_has_torch_function_variadic"):
        if name.startswith(("has_", "_has_")):
            return Const(False)
        return frame.tracer.graph.call("call_function", f, tuple(args), kwargs)
    if name.startswith(_GLOBAL_STATE_PREFIXES) or module.startswith(("torch.cuda", "torch.random", "torch.distributed",
                                                                     "torch.autograd", "torch.utils", "torch.jit",
                                                                     "torch.testing", "torch.hub", "torch.backends")):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{module}.{name} changes global state or is not a tensor op")
    if isinstance(f, type):
        return construct(frame, CallableValue(f), args, kwargs)
    if module.startswith("torch.nn.modules"):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{module}.{name}")
    result = frame.tracer.graph.call("call_function", f, tuple(args), kwargs)
    if isinstance(result, Const) and not _metadata_result(result.value):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{module}.{name} returned a {type(result.value).__name__}")
    return result


def _metadata_result(value) -> bool:
    from .wrap import is_constant
    return is_constant(value)


def _flat(args, kwargs):
    for a in [*args, *kwargs.values()]:
        if isinstance(a, SeqValue):
            yield from a.items
        else:
            yield a


def tensor_method(frame, obj: TensorValue, name: str, args, kwargs) -> Value:
    if name in _TENSOR_METHODS_TO_PYTHON:
        raise Unsupported(breaks.TENSOR_TO_PYTHON, f"Tensor.{name}()")
    if name in _TENSOR_METHODS_UNSUPPORTED:
        raise Unsupported(breaks.UNKNOWN_CALL, f"Tensor.{name}()")
    if name in ("__enter__", "__exit__"):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, "tensor as a context manager")
    if name == "__setitem__":
        return setitem(frame, obj, args[0], args[1])
    if name == "__getitem__":
        return getitem(frame, obj, args[0])
    if _returns_self(obj, name, args, kwargs):
        return obj
    return frame.tracer.graph.call("call_method", name, (obj, *args), kwargs)


def _returns_self(obj: TensorValue, name, args, kwargs) -> bool:
    """`t.cpu()` / `t.to(device_or_dtype)` that change nothing return `t` itself in eager: no node
    (a graph of only such calls, before a `.numpy()` break, would be an empty graph compiled)."""
    example = obj.example
    if name == "cpu":
        return not args and not kwargs and example.device.type == "cpu"
    if name != "to" or set(kwargs) - {"non_blocking", "copy"} or not args or len(args) > 2:
        return False
    if "copy" in kwargs and python_value(kwargs["copy"]) is not False:
        return False
    for a in args:
        value = a.value if isinstance(a, Const) else None
        if isinstance(value, str):
            try:
                value = torch.device(value)
            except RuntimeError:
                return False
        if isinstance(value, torch.device):
            if value.type != example.device.type or value.index not in (None, example.device.index):
                return False
        elif value is not example.dtype:
            return False
    return True


# ============================================================================================
# construction of classes
# ============================================================================================

def construct(frame, cls_value: CallableValue, args, kwargs) -> Value:
    cls = cls_value.fn
    tracer = frame.tracer
    if cls in (torch.no_grad, torch.enable_grad):
        return GradModeValue(cls is torch.enable_grad)
    if cls is torch.set_grad_enabled:
        return GradModeValue(truthy(tracer, args[0] if args else kwargs["mode"]), None)
    if cls is contextlib.nullcontext and not args and not kwargs:
        return GradModeValue(None)            # enabled=None: a context manager that does nothing
    if cls is torch.inference_mode:
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.inference_mode inside captured code")
    if cls in _AUTOCAST_CLASSES:
        return _autocast(cls, args, kwargs)
    if cls in _CONSTANT_CLASSES:
        if any(isinstance(a, TensorValue) for a in args) and cls in (int, float, bool, complex):
            raise Unsupported(breaks.TENSOR_TO_PYTHON, f"{cls.__name__}(tensor)")
        if cls is bool and len(args) == 1 and not kwargs:     # bool(container): its truth value
            return Const(truthy(tracer, args[0]))
        return _fold_call(cls, args, kwargs)
    if cls is torch.Size:
        return Const(torch.Size(python_value(args[0]) if args else ()))
    if cls in (torch.finfo, torch.iinfo):
        return ObjectValue(_fold_call(cls, args, kwargs).value)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        bound = bind_args(cls.__new__.__code__, cls.__name__, (), {}, [Const(cls), *args], kwargs) \
            if isinstance(cls.__new__, types.FunctionType) else None
        if bound is None:
            raise Unsupported(breaks.UNKNOWN_CALL, f"namedtuple {cls.__name__}")
        defaults = getattr(cls, "_field_defaults", {})
        items = [bound[f] if f in bound else wrap(tracer, defaults[f], None) for f in cls._fields]
        return SeqValue(items, cls)
    if issubclass(cls, BaseException):
        if not plain_exception_class(cls) or kwargs:
            raise Unsupported(breaks.USER_EXCEPTION, f"creates {cls.__name__}")
        return NewExceptionValue(_fold_call(cls, args, {}).value)   # BaseException's own __init__: no user code
    if dict_subclass.dict_base(cls) is not None:
        return dict_subclass.construct(frame, cls, args, kwargs)
    if issubclass(cls, torch.nn.Module):
        return _new_stateless_module(cls, args, kwargs)
    if issubclass(cls, torch.Tensor):
        raise Unsupported(breaks.UNKNOWN_CALL, f"creating a {cls.__name__} inside captured code")
    if type(cls) is type and cls.__new__ is object.__new__ and cls.__module__ not in ("builtins",) \
            and not is_torch_namespace(cls):
        obj = NewObjectValue(cls)
        init = cls.__init__
        if isinstance(init, types.FunctionType):
            result = call(frame, FunctionValue(init), [obj, *args], kwargs)
            if not (isinstance(result, Const) and result.value is None):
                raise Unsupported(breaks.USER_EXCEPTION, "__init__ returned a value")
        elif init is not object.__init__ or args or kwargs:
            raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.__init__")
        return obj
    raise Unsupported(breaks.UNKNOWN_CALL, f"constructing {getattr(cls, '__qualname__', cls)}")


def _new_stateless_module(cls, args, kwargs) -> NewModuleValue:
    """`ACT2FN["silu"]` / `nn.ReLU(inplace=True)` inside forward: a module that holds no tensors
    and whose constructors are torch.nn's own (nothing the user wrote runs, so nothing observable
    happens) is built now, for real, and its forward inlined like any module's. It must not
    escape the trace (see NewModuleValue)."""
    what = f"creating a {cls.__name__} inside captured code"
    inits = [k for k in cls.__mro__ if "__init__" in k.__dict__ and k is not object]
    if not all(k is torch.nn.Module or skip.is_torch_nn_class(k) for k in inits):
        raise Unsupported(breaks.UNKNOWN_CALL, what + " (its __init__ is user code)")
    if not all(map(is_python_constant, [*args, *kwargs.values()])):
        raise Unsupported(breaks.UNKNOWN_CALL, what + " from non-constant arguments")
    args, kwargs = [python_value(a) for a in args], {k: python_value(v) for k, v in kwargs.items()}
    try:
        with torch.device("meta"):   # a first build on meta: initialising weights must not draw random numbers
            probe = cls(*args, **kwargs)
        if any(True for _ in probe.parameters()) or any(True for _ in probe.buffers()) or probe._modules:
            raise Unsupported(breaks.UNKNOWN_CALL, what + " (it holds tensors or submodules)")
        return NewModuleValue(cls(*args, **kwargs))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{what}: {type(e).__name__}: {e}") from None


_AUTOCAST_CLASSES = {torch.autocast, torch.amp.autocast, getattr(torch.cpu.amp, "autocast", None),
                     getattr(torch.cuda.amp, "autocast", None)} - {None}


def _autocast(cls, args, kwargs) -> AutocastValue:
    """`torch.autocast(device_type, dtype=..., enabled=..., cache_enabled=...)`: built for real
    (its constructor checks and normalises the arguments, and warns), then modelled."""
    if not all(map(is_python_constant, [*args, *kwargs.values()])):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.autocast with non-constant arguments")
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = cls(*map(python_value, args), **{k: python_value(v) for k, v in kwargs.items()})
    except Exception as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"torch.autocast(...) raised {type(e).__name__}: {e}") from None
    from .graph_builder import AUTOCAST_DEVICES
    if real.device not in AUTOCAST_DEVICES:
        raise Unsupported(breaks.UNKNOWN_CALL, f"torch.autocast on {real.device!r}")
    return AutocastValue(real.device, bool(real._enabled), real.fast_dtype, bool(real._cache_enabled))


_CONSTANT_CLASSES = {int, float, bool, str, complex, bytes, slice, range, torch.device, torch.dtype}


# ============================================================================================
# iteration and subscripts
# ============================================================================================

def iterate(frame, v: Value) -> list:
    tracer = frame.tracer
    if isinstance(v, IteratorValue):
        items = v.items[v.pos:]
        v.pos = len(v.items)
        return items
    if isinstance(v, (SeqValue, SetValue)):
        return list(v.items)
    if isinstance(v, DictValue):
        return [Const(k) for k in v.items]
    if dict_subclass.is_dict_object(v):
        return iterate(frame, dict_subclass.call_dunder(frame, v, "__iter__", []))
    if isinstance(v, Const):
        value = v.value
        if isinstance(value, (range, tuple, str, bytes, torch.Size, frozenset)):
            if isinstance(value, range) and len(value) > config.instruction_limit:
                raise Unsupported(breaks.INSTRUCTION_LIMIT, f"range of {len(value)}")
            return [Const(x) for x in value]
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: '{type(value).__name__}' object is not iterable")
    if isinstance(v, TensorValue):
        if v.example.dim() == 0:
            raise Unsupported(breaks.USER_EXCEPTION, "TypeError: iteration over a 0-d tensor")
        # as Tensor.__iter__ does: the rows are unbind's views, which autograd forbids writing into
        return list(tracer.graph.call("call_function", torch.unbind, (v, 0), {}).items)
    if isinstance(v, ModuleValue):
        m = v.module
        from .attributes import guard_module_keys, load_attr
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            guard_module_keys(tracer, v)
            return [load_attr(frame, v, k) for k in m._modules]
        if isinstance(m, torch.nn.ModuleDict):
            guard_module_keys(tracer, v)
            return [Const(k) for k in m._modules]
        if isinstance(m, (torch.nn.ParameterList,)):
            return [load_attr(frame, v, k) for k in m._parameters]
        if isinstance(m, torch.nn.ParameterDict):
            return [Const(k) for k in m._parameters]
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"iterating over {type(v).__name__}")


def _normalize_index(i: int, n: int) -> int:
    return i + n if i < 0 else i


def getitem(frame, obj: Value, key: Value) -> Value:
    tracer = frame.tracer
    if isinstance(obj, TensorValue):
        return tracer.graph.call("call_function", operator.getitem, (obj, _index_arg(key)), {})
    if isinstance(obj, SeqValue):
        if isinstance(key, SliceValue):
            key = Const(slice(python_value(key.start), python_value(key.stop), python_value(key.step)))
        k = python_value(key) if not isinstance(key, TensorValue) else None
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise Unsupported(breaks.UNSUPPORTED_VALUE, f"sequence index of type {type(k).__name__}")
        if isinstance(k, slice):
            return SeqValue(obj.items[k], obj.cls if obj.cls in (list, tuple, torch.Size) else tuple)
        if not -len(obj.items) <= k < len(obj.items):
            raise user_error(IndexError, f"{obj.cls.__name__} index out of range")
        return obj.items[k]
    if isinstance(obj, DictValue):
        k = python_value(key)
        if k not in obj.items:
            raise user_error(KeyError, k)
        return obj.items[k]
    if isinstance(obj, Const):
        try:
            return Const(obj.value[python_value(key)])
        except Unsupported:
            raise
        except Exception as e:
            raise TracedException(e)
    if isinstance(obj, ModuleValue):
        m = obj.module
        from .attributes import guard_module_keys, load_attr
        k = python_value(key)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            guard_module_keys(tracer, obj)
            keys = list(m._modules)
            if isinstance(k, slice):
                if type(m) is not torch.nn.ModuleList:
                    raise Unsupported(breaks.UNSUPPORTED_VALUE, "slicing a module container")
                # `self.layers[:n]`: the modules themselves; rebuilt as a ModuleList if it escapes
                return SeqValue([load_attr(frame, obj, name) for name in keys[k]], torch.nn.ModuleList)
            if not isinstance(k, int) or not -len(keys) <= k < len(keys):
                raise user_error(IndexError, f"index {k} is out of range")
            return load_attr(frame, obj, keys[k])
        if isinstance(m, torch.nn.ModuleDict):
            guard_module_keys(tracer, obj)
            return load_attr(frame, obj, k)
        if isinstance(m, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            return load_attr(frame, obj, str(k))
    if isinstance(obj, (ObjectValue, NewObjectValue)) and not isinstance(getattr(obj, "obj", None), type):
        import inspect
        method = inspect.getattr_static(obj.python_type(), "__getitem__", None)
        if isinstance(method, types.FunctionType):          # a user container: run its __getitem__
            return call(frame, FunctionValue(method), [obj, key], {})
    if dict_subclass.is_dict_object(obj):
        return dict_subclass.call_dunder(frame, obj, "__getitem__", [key])
    if isinstance(obj, ObjectValue) and isinstance(obj.obj, type):
        return Const(obj.obj[python_value(key)]) if hasattr(obj.obj, "__class_getitem__") else _unsupported_getitem(obj)
    if isinstance(obj, CallableValue) and isinstance(obj.fn, type) and hasattr(obj.fn, "__class_getitem__"):
        return ObjectValue(obj.fn[python_value(key)])
    return _unsupported_getitem(obj)


def _unsupported_getitem(obj):
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"indexing a {type(obj).__name__}")


def _index_arg(key: Value) -> Value:
    if isinstance(key, (TensorValue, Const, SymValue, SliceValue)):
        return key
    if isinstance(key, SeqValue):
        return SeqValue([_index_arg(k) for k in key.items], list if key.is_list else tuple)
    return Const(python_value(key))


def setitem(frame, obj: Value, key: Value, value: Value) -> Value:
    tracer = frame.tracer
    if isinstance(obj, TensorValue):
        tracer.graph.call("call_function", operator.setitem, (obj, _index_arg(key), value), {}, always_node=True)
        return Const(None)
    if isinstance(obj, SeqValue) and obj.is_list:
        k = python_value(key)
        tracer.mutate(obj)
        if isinstance(k, slice):
            obj.items[k] = iterate(frame, value)
        else:
            if not isinstance(k, int) or not -len(obj.items) <= k < len(obj.items):
                raise user_error(IndexError, "list assignment index out of range")
            obj.items[k] = value
        return Const(None)
    if isinstance(obj, DictValue):
        tracer.mutate(obj)
        obj.items[python_value(key)] = value
        return Const(None)
    if isinstance(obj, Const) and numpy_values.is_array(obj.value):
        numpy_values.setitem(frame, obj.value, key, value)
        return Const(None)
    if dict_subclass.is_dict_object(obj):
        return dict_subclass.call_dunder(frame, obj, "__setitem__", [key, value])
    raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"item assignment on {type(obj).__name__}")


def delitem(frame, obj: Value, key: Value):
    if isinstance(obj, SeqValue) and obj.is_list:
        frame.tracer.mutate(obj)
        k = python_value(key)
        del obj.items[k]
        return
    if isinstance(obj, DictValue):
        frame.tracer.mutate(obj)
        k = python_value(key)
        if k not in obj.items:
            raise user_error(KeyError, k)
        del obj.items[k]
        return
    if dict_subclass.is_dict_object(obj):
        dict_subclass.call_dunder(frame, obj, "__delitem__", [key])
        return
    raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"del on {type(obj).__name__}")


import dataclasses  # noqa: E402

PURE_LIBRARY_FUNCTIONS = {dataclasses.fields, dataclasses.is_dataclass}


def _signature(v: Value) -> Const:
    """`inspect.signature(fn)` of a function the guards pin (an immutable answer, so a constant):
    transformers' apply_chunking_to_forward counts a forward function's parameters this way."""
    if isinstance(v, FunctionValue) and isinstance(v.fn, types.FunctionType):
        return Const(inspect.signature(v.fn))
    if isinstance(v, MethodValue) and isinstance(v.fn, types.FunctionType):
        sig = inspect.signature(v.fn)
        return Const(sig.replace(parameters=list(sig.parameters.values())[1:]))    # bound: no self
    raise Unsupported(breaks.SKIPPED_FILE, f"inspect.signature of a {type(v).__name__}")


def _class_or_value(v: Value):
    """What a pure library function may inspect: the class of a new object, or the real value."""
    if isinstance(v, NewObjectValue):
        return v.cls
    from .operators import real_object
    real = real_object(v)
    return real if real is not None else python_value(v)


from .module_methods import MODULE_METHODS  # noqa: E402
from .builtins_table import BUILTINS, _apply_wraps, builtin_len, copy_wrapper_metadata   # noqa: E402  (the table calls back into this module)
from .methods import METHOD_TABLES as _METHOD_TABLES   # noqa: E402

_CALLERS: dict[type, Callable] = {
    FunctionValue: _call_function, ClosureValue: _call_closure, MethodValue: _call_method,
    ModuleValue: _call_module, NewModuleValue: _call_module, CallableValue: _call_callable, ObjectValue: _call_object,
    NewObjectValue: _call_object, Const: _call_const, GradModeValue: _call_grad_mode,
}
