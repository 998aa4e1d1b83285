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
import enum
import functools
import inspect
import operator
import types
import warnings

import torch
from torch.overrides import TorchFunctionMode

from .. import known_data
from ..breaks import (PRINT_OR_LOG, TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_MUTATION, USER_EXCEPTION,
                      TracedException, Unsupported, user_error)
from ..effects import DELETED
from ..fallback import skip
from ..guards import CachedCallMatch, IdMatch, SubclassesMatch
from ..modelled import modelled
from ..runtime import AUTOCAST_DEVICES
from ..semantics import unpack
from ..sources import AttrSource
from .base import (HEAPTYPE, Const, MethodValue, Value, consumed, fold, is_constant, missing_attribute, pinned_real,
                   unknown_call_kind)
from .containers import SeqValue, is_plain_list_subclass
from .contexts import AutocastValue, GradModeValue
from .dict_objects import construct as construct_dict_object
from .dict_objects import dict_base
from .functions import FunctionValue
from .modules import NewModuleValue
from .objects import NewObjectValue, new_exception, pending_class_attr
from .tensors import TensorValue, mode_dispatch, torch_call

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

    # An Enum class is a fixed sequence of its members (guarded by the class's identity):
    # len(Color), `for c in Color`, `Color.RED in Color` read them as they are.
    def length(self, frame):
        if isinstance(self.fn, enum.EnumMeta):
            return Const(len(self.fn))
        return super().length(frame)

    def unpack(self, frame):
        if isinstance(self.fn, enum.EnumMeta):
            return [frame.wrap(member, None) for member in self.fn]
        return super().unpack(frame)

    def contains(self, frame, item):
        if isinstance(self.fn, enum.EnumMeta):
            return fold(operator.contains, self.fn, item.as_python())    # enum's own rules, per Python version
        return super().contains(frame, item)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        else:
            em.const(self.fn)

    def load_attr(self, frame, name):
        fn = self.fn
        if isinstance(fn, type):
            pending = pending_class_attr(frame, fn, name)      # written to a base class by this trace
            if pending is not None:
                return pending
            if name == "__subclasses__" and getattr(type(fn), name, None) is type.__subclasses__ \
                    and name not in fn.__dict__:
                return MethodValue(self, name)
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

    def call_method(self, frame, method, args, kwargs):
        if (method == "__subclasses__" or method is type.__subclasses__) and isinstance(self.fn, type) \
                and not args and not kwargs:
            return self._subclasses(frame)
        return super().call_method(frame, method, args, kwargs)

    def _subclasses(self, frame) -> SeqValue:
        """`cls.__subclasses__()` (einops walks its backends with it): the classes there now, a new
        list each call; a guard recaptures when a subclass is defined or dropped. The class is read
        through a reference the capture holds, whatever its source (the guard is about it)."""
        cls = self.fn
        subclasses = type.__subclasses__(cls)
        frame.tracer.add_guard(SubclassesMatch.of(frame.tracer.ref_source(cls), subclasses))
        return SeqValue([frame.wrap(s, frame.tracer.ref_source(s)) for s in subclasses], list)

    def store_attr(self, frame, name, value):
        """`Cls.name = value` (`type(self).counter += 1`): a write to an existing class, done for
        real after the graph; later reads in this trace (through the class, a subclass or an
        instance) see it."""
        self._class_to_change(name, "setting")
        frame.tracer.effects.store_attr(self, name, value)

    def del_attr(self, frame, name):
        cls = self._class_to_change(name, "deleting")
        pending = frame.tracer.effects.pending_attr(self, name)
        if pending is None and name not in cls.__dict__ or pending is DELETED:
            raise missing_attribute(frame, self, name) if pending is None else \
                user_error(AttributeError, f"type object '{cls.__name__}' has no attribute {name!r}")
        if pending is None:
            frame.wrap(cls.__dict__[name], AttrSource(self.source, name))   # guards that it is there now
        frame.tracer.effects.delete_attr(self, name)

    def _class_to_change(self, name: str, what: str) -> type:
        """The class whose attribute `name` this trace may write: a class written in Python with
        the plain metaclass behaviour, reached through a source; special names would change how
        the class behaves while the trace still uses the old behaviour, so they are refused."""
        cls = self.fn
        if not isinstance(cls, type) or self.source is None:
            raise Unsupported(UNSUPPORTED_MUTATION, f"{what} attribute {name!r} of a {type(cls).__name__}")
        if not cls.__flags__ & HEAPTYPE or type(cls).__setattr__ is not type.__setattr__ \
                or type(cls).__delattr__ is not type.__delattr__:
            raise Unsupported(UNSUPPORTED_MUTATION, f"{what} attribute {name!r} of class {cls.__qualname__}")
        if name.startswith("__") and name.endswith("__"):
            raise Unsupported(UNSUPPORTED_MUTATION, f"{what} special attribute {name!r} of class {cls.__qualname__}")
        if hasattr(type(inspect.getattr_static(cls, name, None)), "__get__") or \
                hasattr(type(inspect.getattr_static(type(cls), name, None)), "__set__"):
            raise Unsupported(UNSUPPORTED_MUTATION, f"{what} {cls.__qualname__}.{name}, a method or descriptor")
        return cls

    def binary(self, frame, fn, other):
        return _union(frame, fn, self.fn, other, reflected=False)

    def rbinary(self, frame, fn, other):
        return _union(frame, fn, self.fn, other, reflected=True)

    def getitem(self, frame, key):
        if isinstance(self.fn, enum.EnumMeta):            # Color["RED"]: the member of that name
            return frame.wrap(fold(operator.getitem, self.fn, key.as_python()), None)
        if isinstance(self.fn, type) and hasattr(self.fn, "__class_getitem__"):
            return frame.wrap(fold(self.fn.__class_getitem__, key.as_python()), None)
        return super().getitem(frame, key)

    def call(self, frame, args, kwargs):
        f = self.fn
        original = getattr(f, "_torchdynamo_inline", None) if isinstance(f, torch.jit.ScriptFunction) else None
        if isinstance(original, types.FunctionType):
            # `@torch.jit.script def f`: torch keeps the Python function for tracers; trace that
            return FunctionValue(original).call(frame, args, kwargs)
        result = mode_dispatch(frame, f, args, kwargs, call=True)
        if result is not NotImplemented:
            return result
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
            return _cached_call(frame, f, args, kwargs)
        if isinstance(f, _C_METHODS) and args:
            # a C method called unbound, `list.append(xs, 1)`: its first argument decides
            return args[0].call_method(frame, f, args[1:], kwargs)
        raise Unsupported(unknown_call_kind(f), f"{getattr(f, '__module__', '') or ''}.{getattr(f, '__qualname__', f)}")


def _cached_call(frame, f, args: list, kwargs: dict) -> Value:
    """A call of an `functools.lru_cache` / `functools.cache` function on constant arguments
    (`is_x_available()`, einops' `_prepare_transformation_recipe(pattern, ...)`), answered by
    the cache itself, while tracing.

    The decorator is the author's promise that the function is pure: the same arguments give an
    equal answer, so calling it now (a cache hit, or a miss that fills the cache as the eager
    call would) and folding its answer is what eager computes. A constant answer is baked in.
    Any other answer (a recipe object, a list) is the very object the cache holds, used as an
    existing object: each attribute the trace reads from it is guarded, so the graph never
    relies on a state it no longer has; and since the cache may evict and later return a new
    (equal) object where code could tell them apart (`is`, writes to it, returning it), a guard
    asks the cache again on each call whether it still returns this object: a hit (what the
    frame's own call would have been: it keeps the cache's order and counts as eager's would) or
    a recapture. Arguments that are objects (a method's self) are pinned by identity: the answer
    is about that object."""
    const_args = [_pinned_constant(frame, a) for a in args]
    const_kwargs = {k: _pinned_constant(frame, v) for k, v in kwargs.items()}
    result = fold(f, *const_args, **const_kwargs)
    if is_constant(result):
        return Const(result)
    frame.tracer.add_guard(CachedCallMatch.of(frame.tracer.ref_source(result), f, const_args, const_kwargs))
    return frame.wrap(result, frame.tracer.ref_source(result))


def _pinned_constant(frame, v: Value):
    """The real value of an argument; an object that is not a constant must be this very one on
    later calls (an identity guard)."""
    real = v.as_python()
    if not is_constant(real):
        if v.source is None:
            raise Unsupported(UNKNOWN_CALL, f"a cached function called with a {type(real).__name__} made in the trace")
        frame.tracer.add_guard(IdMatch.of(v.source, real))
    return real


def _union(frame, fn, cls, other: Value, reflected: bool):
    """`A | B` of classes (and None, and unions of them): a types.UnionType, built now."""
    if fn is not operator.or_ or not isinstance(cls, type):
        return NotImplemented
    try:
        real = pinned_real(other)
    except Unsupported:           # an object made in the trace: its own __ror__ decides
        return NotImplemented
    if not (real is None or isinstance(real, (type, types.UnionType))):
        return NotImplemented
    return frame.wrap(fold(operator.or_, real, cls) if reflected else fold(operator.or_, cls, real), None)


def _is_printer(f) -> bool:
    try:
        return f in skip.PRINTERS
    except TypeError:
        return False


# ============================================================================================
# construction of classes
# ============================================================================================

_AUTOCAST_CLASSES = {torch.autocast, torch.amp.autocast, getattr(torch.cpu.amp, "autocast", None),
                     getattr(torch.cuda.amp, "autocast", None)} - {None}
# Profiler ranges (torch.optim's `step` runs in one): they only name events for a running profiler,
# so captured code leaves them out, as TorchDynamo does.
_PROFILER_RANGES = (torch.autograd.profiler.record_function,)
_CONSTANT_CLASSES = {int, float, bool, str, complex, bytes, slice, range, torch.device, torch.dtype}


def construct(frame, cls_value: Value, args: list, kwargs: dict) -> Value:
    """`cls(*args, **kwargs)`."""
    cls = cls_value.real_object()
    if cls in (torch.no_grad, torch.enable_grad):
        return GradModeValue(cls is torch.enable_grad)
    if cls is torch.set_grad_enabled:
        return GradModeValue.switched_now(frame, (args[0] if args else kwargs["mode"]).truthy(frame))
    if cls is contextlib.nullcontext and not args and not kwargs:
        return GradModeValue(None)            # enabled=None: a context manager that does nothing
    if cls in _PROFILER_RANGES:
        return GradModeValue(None)            # a named range in a profile: nothing the program sees
    if cls is torch.inference_mode:
        raise Unsupported(UNKNOWN_CALL, "torch.inference_mode inside captured code")
    if isinstance(cls, enum.EnumMeta) and not kwargs and len(args) == 1 and _enum_lookup_is_pure(cls, args[0]):
        return frame.wrap(fold(cls, args[0].as_python()), None)   # Color(1): the member with that value
    if cls in _AUTOCAST_CLASSES:
        return _autocast(cls, args, kwargs)
    if cls in _CONSTANT_CLASSES:
        if any(isinstance(a, TensorValue) for a in args) and cls in (int, float, bool, complex):
            value = known_data.python_value(args[0], cls) if len(args) == 1 and not kwargs else known_data.NOT_KNOWN
            if value is known_data.NOT_KNOWN:
                raise Unsupported(TENSOR_TO_PYTHON, f"{cls.__name__}(tensor)")
            return Const(value)
        if cls is bool and len(args) == 1 and not kwargs:     # bool(container): its truth value
            return Const(args[0].truthy(frame))
        if cls is str and len(args) == 1 and not kwargs:
            return _str(frame, args[0])
        return Const(fold(cls, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}))
    if cls is torch.Size:
        return Const(torch.Size(args[0].as_python() if args else ()))
    if cls in (torch.finfo, torch.iinfo):
        return frame.wrap(fold(cls, *[a.as_python() for a in args]), None)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return _namedtuple(frame, cls, args, kwargs)
    if issubclass(cls, BaseException):
        return new_exception(frame, cls, args, kwargs)
    if dict_base(cls) is not None:
        return construct_dict_object(frame, cls, args, kwargs)
    if is_plain_list_subclass(cls):
        if kwargs:
            raise user_error(TypeError, f"{cls.__name__}() takes no keyword arguments")
        if len(args) > 1:
            raise user_error(TypeError, f"{cls.__name__} expected at most 1 argument, got {len(args)}")
        return SeqValue(unpack(frame, args[0]) if args else [], cls)
    if issubclass(cls, torch.nn.Module):
        return _new_stateless_module(cls, args, kwargs)
    if issubclass(cls, torch.Tensor):
        raise Unsupported(UNKNOWN_CALL, f"creating a {cls.__name__} inside captured code")
    if issubclass(cls, TorchFunctionMode) and type(cls).__call__ is type.__call__:
        return construct_instance(frame, cls_value, cls, args, kwargs)   # torch's own modes too (function_modes.py)
    if type(cls).__call__ is type.__call__ and cls.__module__ != "builtins" and not skip.is_torch_namespace(cls):
        return construct_instance(frame, cls_value, cls, args, kwargs)
    raise Unsupported(UNKNOWN_CALL, f"constructing {getattr(cls, '__qualname__', cls)}")


def _enum_lookup_is_pure(cls, value: Value) -> bool:
    """`cls(value)` finds a member, or asks the class's `_missing_`: folded when the value is a
    member's or `_missing_` is enum's own (Flag's makes pseudo-members), never when the program's
    `_missing_` would run (it could do anything), nor through a metaclass's own __call__."""
    if type(cls).__call__ is not type(enum.Enum).__call__ or not value.is_python_constant():
        return False
    try:
        if value.as_python() in cls._value2member_map_:
            return True
    except TypeError:                   # an unhashable value: enum searches the members then asks _missing_
        pass
    missing = getattr(cls._missing_, "__func__", cls._missing_)
    return getattr(missing, "__module__", None) == "enum"


def construct_instance(frame, cls_value: Value, cls: type, args: list, kwargs: dict) -> Value:
    """What type.__call__ does for a Python class: `__new__`, then `__init__` on its result when that
    is an instance of the class."""
    new = inspect.getattr_static(cls, "__new__")
    new = new.__func__ if isinstance(new, staticmethod) else new
    init = inspect.getattr_static(cls, "__init__")
    if new is object.__new__:
        if (args or kwargs) and init is object.__init__:
            raise user_error(TypeError, f"{cls.__name__}() takes no arguments")
        try:                    # what object.__new__ refuses (an abstract class): nothing else happens
            object.__new__(cls)
        except TypeError as e:
            raise TracedException(e) from None
        obj = NewObjectValue(cls)
    elif isinstance(new, types.FunctionType):
        obj = FunctionValue(new).call(frame, [cls_value, *args], kwargs)
        if not issubclass(obj.python_type(), cls):
            return obj
    else:
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__new__ ({type(new).__name__})")
    if isinstance(init, types.FunctionType):
        result = FunctionValue(init).call(frame, [obj, *args], kwargs)
        if not (isinstance(result, Const) and result.value is None):
            raise user_error(TypeError, f"__init__() should return None, not '{result.python_type().__name__}'")
    elif init is not object.__init__:
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__init__ ({type(init).__name__})")
    return obj


def _str(frame, v: Value) -> Value:
    """`str(v)`: the class's Python `__str__` inlined (`__repr__` when it has only that), else
    folded on the real value (for a tensor, a module: only where it is a constant)."""
    cls = v.python_type()
    for name in ("__str__", "__repr__"):
        method = inspect.getattr_static(cls, name, None)
        if isinstance(method, types.FunctionType) and skip.call_rule(method) == skip.INLINE:
            result = FunctionValue(method).call(frame, [v], {})
            if not issubclass(result.python_type(), str):
                raise user_error(TypeError, f"{name} returned non-string (type {result.python_type().__name__})")
            return result
        if method is not object.__str__:
            break                          # a C __str__ (BaseException's, int's...), torch's own: fold it
    return Const(fold(str, v.as_python()))


def _namedtuple(frame, cls, args, kwargs) -> SeqValue:
    new = cls.__new__
    if not isinstance(new, types.FunctionType):
        raise Unsupported(UNKNOWN_CALL, f"namedtuple {cls.__name__}")
    from .functions import bind_args
    defaults = tuple(frame.wrap(v, None) for v in (new.__defaults__ or ()))
    bound = bind_args(new.__code__, new.__qualname__, defaults, {}, [Const(cls), *args], kwargs)
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
        return NewModuleValue(cls(*args, **kwargs), (cls, args, kwargs))
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
