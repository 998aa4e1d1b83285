"""Callables the tracer models rather than inlines (`CallableValue`): builtin functions, C methods,
functions of the torch namespace, `functools.partial` objects, and classes — calling a class
constructs an instance (`construct`).

A call is looked up in the modelled callables first (`modelled.py`: `len`, `isinstance`,
`dataclasses.fields`...); a C method called unbound (`list.append(xs, 1)`,
`OrderedDict.__setitem__(self, k, v)`) goes to its first argument's `call_method`; a function of
the torch namespace becomes a graph node; a pure function of `math` / `operator` on constants is
folded. Constructing a class runs its `__new__` and `__init__` as Python would, for user classes
(the instance is a NewObjectValue, rebuilt for real if it escapes), namedtuples, exceptions,
dict subclasses, grad modes, autocast and tensor-free torch.nn modules.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import types
import warnings

import torch

from ..breaks import (PRINT_OR_LOG, TENSOR_TO_PYTHON, UNKNOWN_CALL, USER_EXCEPTION, Unsupported, user_error)
from ..fallback import skip
from ..modelled import modelled
from ..runtime import AUTOCAST_DEVICES
from ..sources import AttrSource
from .base import Const, MethodValue, Value, consumed, fold, missing_attribute
from .containers import SeqValue
from .contexts import AutocastValue, GradModeValue
from .dict_objects import construct as construct_dict_object
from .dict_objects import dict_base
from .functions import FunctionValue
from .modules import NewModuleValue
from .objects import NewExceptionValue, NewObjectValue
from .tensors import TensorValue, torch_call

_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType)


class CallableValue(Value):
    """A callable we model by table rather than by inlining: builtins, torch functions, classes."""
    __slots__ = ("fn",)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self):
        return type(self.fn)

    def real_object(self):
        return self.fn

    def as_python(self):
        return self.fn

    def truthy(self, frame):
        return True

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        else:
            em.const(self.fn)

    def load_attr(self, frame, name):
        fn = self.fn
        if isinstance(fn, type):
            raw = inspect.getattr_static(fn, name, None)
            if isinstance(raw, classmethod) and isinstance(raw.__func__, types.FunctionType):
                return MethodValue(self, raw.__func__)
            if isinstance(raw, types.FunctionType):
                return FunctionValue(raw, AttrSource(self.source, name) if self.source is not None else None)
        try:
            value = getattr(fn, name)
        except AttributeError:
            raise missing_attribute(frame, self, name) from None
        return frame.wrap(value, AttrSource(self.source, name) if self.source is not None else None)

    def getitem(self, frame, key):
        if isinstance(self.fn, type) and hasattr(self.fn, "__class_getitem__"):
            return frame.wrap(fold(self.fn.__class_getitem__, key.as_python()), None)
        return super().getitem(frame, key)

    def call(self, frame, args, kwargs):
        f = self.fn
        original = getattr(f, "_torchdynamo_inline", None) if isinstance(f, torch.jit.ScriptFunction) else None
        if isinstance(original, types.FunctionType):
            # `@torch.jit.script def f`: torch keeps the Python function for tracers; trace that
            return FunctionValue(original).call(frame, args, kwargs)
        handler = modelled(f)
        if handler is not None:
            result = handler(frame, args, kwargs)
            if result is not NotImplemented:
                return result
        if isinstance(f, type):
            return construct(frame, self, args, kwargs)
        if _is_printer(f):
            raise Unsupported(PRINT_OR_LOG, getattr(f, "__qualname__", str(f)))
        if isinstance(f, types.BuiltinFunctionType) and getattr(f, "__module__", None) in ("math", "_operator",
                                                                                          "operator"):
            args = [consumed(frame, a) for a in args]       # math.fsum(gen)
            return Const(fold(f, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}))
        if skip.is_torch_namespace(f) or isinstance(f, _C_METHODS) \
                and getattr(f, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase):
            return torch_call(frame, f, args, kwargs)
        if isinstance(f, functools.partial):
            inner = frame.wrap(f.func, AttrSource(self.source, "func") if self.source else None)
            pargs = [frame.wrap(a, None) for a in f.args]
            pkw = {k: frame.wrap(v, None) for k, v in f.keywords.items()}
            return inner.call(frame, [*pargs, *args], {**pkw, **kwargs})
        if isinstance(f, functools._lru_cache_wrapper) and all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            # `@lru_cache def is_x_available()`: the cache promises one answer per arguments; keep it
            # when it is a plain constant (the eager program would get the cached answer too)
            from .base import is_constant
            result = fold(f, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})
            if is_constant(result):
                return Const(result)
        if isinstance(f, _C_METHODS) and args:
            # a C method called unbound, `list.append(xs, 1)`: its first argument decides
            return args[0].call_method(frame, f, args[1:], kwargs)
        raise Unsupported(UNKNOWN_CALL, f"{getattr(f, '__module__', '') or ''}.{getattr(f, '__qualname__', f)}")


def _is_printer(f) -> bool:
    try:
        return f in skip.PRINTERS
    except TypeError:
        return False


def plain_exception_class(cls: type) -> bool:
    """An exception class whose construction runs no Python code (builtin or a plain subclass)."""
    return all(not isinstance(getattr(k, attr, None), types.FunctionType)
               for k in cls.__mro__ for attr in ("__init__", "__new__")
               if attr in k.__dict__)


# ============================================================================================
# construction of classes
# ============================================================================================

_AUTOCAST_CLASSES = {torch.autocast, torch.amp.autocast, getattr(torch.cpu.amp, "autocast", None),
                     getattr(torch.cuda.amp, "autocast", None)} - {None}
_CONSTANT_CLASSES = {int, float, bool, str, complex, bytes, slice, range, torch.device, torch.dtype}


def construct(frame, cls_value: Value, args: list, kwargs: dict) -> Value:
    """`cls(*args, **kwargs)`."""
    cls = cls_value.real_object()
    if cls in (torch.no_grad, torch.enable_grad):
        return GradModeValue(cls is torch.enable_grad)
    if cls is torch.set_grad_enabled:
        return GradModeValue((args[0] if args else kwargs["mode"]).truthy(frame))
    if cls is contextlib.nullcontext and not args and not kwargs:
        return GradModeValue(None)            # enabled=None: a context manager that does nothing
    if cls is torch.inference_mode:
        raise Unsupported(UNKNOWN_CALL, "torch.inference_mode inside captured code")
    if cls in _AUTOCAST_CLASSES:
        return _autocast(cls, args, kwargs)
    if cls in _CONSTANT_CLASSES:
        if any(isinstance(a, TensorValue) for a in args) and cls in (int, float, bool, complex):
            raise Unsupported(TENSOR_TO_PYTHON, f"{cls.__name__}(tensor)")
        if cls is bool and len(args) == 1 and not kwargs:     # bool(container): its truth value
            return Const(args[0].truthy(frame))
        return Const(fold(cls, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}))
    if cls is torch.Size:
        return Const(torch.Size(args[0].as_python() if args else ()))
    if cls in (torch.finfo, torch.iinfo):
        return frame.wrap(fold(cls, *[a.as_python() for a in args]), None)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return _namedtuple(frame, cls, args, kwargs)
    if issubclass(cls, BaseException):
        if not plain_exception_class(cls) or kwargs:
            raise Unsupported(USER_EXCEPTION, f"creates {cls.__name__}")
        return NewExceptionValue(fold(cls, *[a.as_python() for a in args]))   # BaseException's own __init__
    if dict_base(cls) is not None:
        return construct_dict_object(frame, cls, args, kwargs)
    if issubclass(cls, torch.nn.Module):
        return _new_stateless_module(cls, args, kwargs)
    if issubclass(cls, torch.Tensor):
        raise Unsupported(UNKNOWN_CALL, f"creating a {cls.__name__} inside captured code")
    if type(cls).__call__ is type.__call__ and cls.__module__ != "builtins" and not skip.is_torch_namespace(cls):
        return construct_instance(frame, cls_value, cls, args, kwargs)
    raise Unsupported(UNKNOWN_CALL, f"constructing {getattr(cls, '__qualname__', cls)}")


def construct_instance(frame, cls_value: Value, cls: type, args: list, kwargs: dict) -> Value:
    """What type.__call__ does for a Python class: `__new__`, then `__init__` on its result when that
    is an instance of the class."""
    new = inspect.getattr_static(cls, "__new__")
    new = new.__func__ if isinstance(new, staticmethod) else new
    if new is object.__new__:
        obj = NewObjectValue(cls)
    elif isinstance(new, types.FunctionType):
        obj = FunctionValue(new).call(frame, [cls_value, *args], kwargs)
        if not issubclass(obj.python_type(), cls):
            return obj
    else:
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__new__ ({type(new).__name__})")
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):
        result = FunctionValue(init).call(frame, [obj, *args], kwargs)
        if not (isinstance(result, Const) and result.value is None):
            raise user_error(TypeError, f"__init__() should return None, not '{result.python_type().__name__}'")
    elif init is object.__init__:
        if (args or kwargs) and new is object.__new__:
            raise user_error(TypeError, f"{cls.__name__}() takes no arguments")
    else:
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__init__ ({type(init).__name__})")
    return obj


def _namedtuple(frame, cls, args, kwargs) -> SeqValue:
    new = cls.__new__
    if not isinstance(new, types.FunctionType):
        raise Unsupported(UNKNOWN_CALL, f"namedtuple {cls.__name__}")
    from .functions import bind_args
    defaults = tuple(frame.wrap(v, None) for v in (new.__defaults__ or ()))
    bound = bind_args(new.__code__, cls.__name__, defaults, {}, [Const(cls), *args], kwargs)
    return SeqValue([bound[f] for f in cls._fields], cls)


def _new_stateless_module(cls, args, kwargs) -> NewModuleValue:
    """`ACT2FN["silu"]` / `nn.ReLU(inplace=True)` inside forward: a module that holds no tensors
    and whose constructors are torch.nn's own (nothing the user wrote runs, so nothing observable
    happens) is built now, for real, and its forward inlined like any module's. It must not
    escape the trace (see NewModuleValue)."""
    what = f"creating a {cls.__name__} inside captured code"
    inits = [k for k in cls.__mro__ if "__init__" in k.__dict__ and k is not object]
    if not all(k is torch.nn.Module or skip.is_torch_nn_class(k) for k in inits):
        raise Unsupported(UNKNOWN_CALL, what + " (its __init__ is user code)")
    if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        raise Unsupported(UNKNOWN_CALL, what + " from non-constant arguments")
    args, kwargs = [a.as_python() for a in args], {k: v.as_python() for k, v in kwargs.items()}
    try:
        with torch.device("meta"):   # a first build on meta: initialising weights must not draw random numbers
            probe = cls(*args, **kwargs)
        if any(True for _ in probe.parameters()) or any(True for _ in probe.buffers()) or probe._modules:
            raise Unsupported(UNKNOWN_CALL, what + " (it holds tensors or submodules)")
        return NewModuleValue(cls(*args, **kwargs))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(UNKNOWN_CALL, f"{what}: {type(e).__name__}: {e}") from None


def _autocast(cls, args, kwargs) -> AutocastValue:
    """`torch.autocast(device_type, dtype=..., enabled=..., cache_enabled=...)`: built for real
    (its constructor checks and normalises the arguments, and warns), then modelled."""
    if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        raise Unsupported(UNKNOWN_CALL, "torch.autocast with non-constant arguments")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = cls(*[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})
    except Exception as e:
        raise Unsupported(USER_EXCEPTION, f"torch.autocast(...) raised {type(e).__name__}: {e}") from None
    if real.device not in AUTOCAST_DEVICES:
        raise Unsupported(UNKNOWN_CALL, f"torch.autocast on {real.device!r}")
    return AutocastValue(real.device, bool(real._enabled), real.fast_dtype, bool(real._cache_enabled))
