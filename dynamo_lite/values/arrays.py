"""numpy inside captured code, without ever computing numpy on tensor data while tracing.

* **Folding.** A numpy function or ufunc whose arguments are all constants (`np.arange(5)`,
  `np.power(10000, 0.25)`, `np.sin(table)`) runs while tracing. An array made that way is an
  `ArrayValue`: it exists only in this trace, so changing it in place (`table[:, 0::2] = ...`,
  `a += 1`) simply runs too. Arrays read from the frame (an attribute, a `.numpy()` result after
  a break) are never folded: their contents are not guarded (objects.value_is_stable).
* **Into the graph.** `torch.from_numpy` / `as_tensor` / `tensor` / `torch.FloatTensor(...)` of a
  traced array becomes a graph input holding a snapshot of it, cloned in the graph so each call
  gets a fresh tensor. An array the tensor would share memory with must not change afterwards
  (checked); an array read from the frame becomes a graph input reloaded with `torch.from_numpy`.
* **Out of the graph.** A traced array that outlives the trace (returned, or live at a graph
  break) is rebuilt per call as a copy, so no call sees another's changes.
"""
from __future__ import annotations

import operator

import torch

try:
    import numpy as np
except ImportError:          # torch runs without numpy; then no value is ever an array
    np = None

from ..breaks import UNKNOWN_CALL, UNSUPPORTED_MUTATION, USER_EXCEPTION, Unsupported
from ..modelled import models, models_family
from ..pyops import plain
from ..sources import FromNumpySource
from .base import Const, MethodValue, Value, fold, is_constant
from .containers import SeqValue
from .objects import ObjectValue

# Functions with effects beyond their result (files, global settings, printing).
_EFFECTFUL_PREFIXES = ("save", "load", "set", "print", "from", "genfromtxt", "memmap", "info", "show", "seterr",
                       "errstate", "getbufsize", "geterr", "lookfor", "source", "tofile")
_EFFECTFUL_METHODS = ("tofile", "dump", "dumps", "setflags", "resize")
_LEGACY_TENSOR_TYPES = {torch.FloatTensor: torch.float32, torch.DoubleTensor: torch.float64,
                        torch.HalfTensor: torch.float16, torch.BFloat16Tensor: torch.bfloat16,
                        torch.LongTensor: torch.int64, torch.IntTensor: torch.int32,
                        torch.ShortTensor: torch.int16, torch.CharTensor: torch.int8, torch.ByteTensor: torch.uint8,
                        torch.BoolTensor: torch.bool}
_SHARING_CONVERSIONS = {torch.from_numpy, torch.as_tensor, torch.asarray}
_COPYING_CONVERSIONS = {torch.tensor}


def is_array(value) -> bool:
    return np is not None and isinstance(value, np.ndarray)


def is_foldable(fn) -> bool:
    """A numpy function, ufunc or scalar type that computes only its result from its arguments."""
    if np is None:
        return False
    if isinstance(fn, np.ufunc):
        return True
    module = getattr(fn, "__module__", None) or ""
    if not (module == "numpy" or module.startswith("numpy.")) or module.startswith(("numpy.random", "numpy.testing")):
        return False
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type(np)):
        return False                   # a bound method (a RandomState's, an array's): state we do not see
    return not getattr(fn, "__name__", "").startswith(_EFFECTFUL_PREFIXES)


class ArrayValue(Value):
    """A numpy array made while tracing from constants."""
    __slots__ = ("array",)

    def __init__(self, array, source=None):
        super().__init__(source)
        self.array = array

    def python_type(self):
        return type(self.array)

    def as_python(self):
        return self.array

    def identity(self):
        return id(self.array)

    def rebuild(self, em):
        em.traced_array(self.array)

    def graph_arg(self):
        return self.array, self.array

    def _fold(self, frame, fn, *args, **kwargs):
        return fold_values(frame, fn, list(args), kwargs)

    def load_attr(self, frame, name):
        value = fold(getattr, self.array, name)
        if callable(value):
            return MethodValue(self, name)
        return as_value(value)

    def call_method(self, frame, method, args, kwargs):
        name = method if isinstance(method, str) else getattr(method, "__name__", "")
        if name in _EFFECTFUL_METHODS:
            raise Unsupported(UNKNOWN_CALL, f"ndarray.{name}")
        return self._fold(frame, getattr(self.array, name), *args, **kwargs)

    def getitem(self, frame, key):
        return self._fold(frame, operator.getitem, self, Const(key.as_python()))

    def setitem(self, frame, key, value):
        if not self.array.flags.writeable:
            raise Unsupported(USER_EXCEPTION, "ValueError: assignment destination is read-only")
        self._fold(frame, self.array.__setitem__, Const(key.as_python()), value)

    def unpack(self, frame):
        return [as_value(x) for x in self.array]

    def length(self, frame):
        return Const(fold(len, self.array))

    def contains(self, frame, item):
        return bool(fold(operator.contains, self.array, item.as_python()))

    def truthy(self, frame):
        return bool(fold(bool, self.array))

    def unary(self, frame, fn):
        return self._fold(frame, fn, self)

    def binary(self, frame, fn, other):
        if not other.is_python_constant():
            return NotImplemented
        result = self._fold(frame, fn, self, other)   # `a += 1` changes the array itself
        return self if isinstance(result, ArrayValue) and result.array is self.array else result

    def rbinary(self, frame, fn, other):
        if not other.is_python_constant():
            return NotImplemented
        return self._fold(frame, plain(fn), other, self)

    def compare(self, frame, fn, other):
        if not other.is_python_constant():
            return NotImplemented
        return self._fold(frame, fn, self, other)


def as_value(result) -> Value:
    """A folded numpy result as a value."""
    if is_array(result):
        return ArrayValue(result)
    if np is not None and isinstance(result, np.generic) or is_constant(result):
        return Const(result)
    if isinstance(result, (tuple, list)):
        return SeqValue([as_value(r) for r in result], type(result))
    raise Unsupported(UNKNOWN_CALL, f"numpy returned a {type(result).__name__}")


def fold_values(frame, fn, args: list, kwargs: dict) -> Value:
    """`fn(*args, **kwargs)` run now: every argument must be a constant."""
    values = [a.as_python() for a in args]
    kw = {k: v.as_python() for k, v in kwargs.items()}
    try:
        result = fn(*values, **kw)
    except Exception as e:
        raise Unsupported(USER_EXCEPTION, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}")
    check_unchanged(frame.tracer)
    return as_value(result)


def _fold_numpy(fn):
    def handler(frame, args, kwargs):
        return fold_values(frame, fn, args, kwargs)
    return handler


models_family(is_foldable, _fold_numpy)


# ---- conversions to tensors ------------------------------------------------------------------------

def _to_tensor_handler(f):
    def handler(frame, args, kwargs):
        if not args or not (isinstance(args[0], ArrayValue) or isinstance(args[0], ObjectValue)
                            and is_array(args[0].obj)):
            return NotImplemented
        return to_tensor(frame, f, args, kwargs)
    return handler


for _f in (*_SHARING_CONVERSIONS, *_COPYING_CONVERSIONS, *_LEGACY_TENSOR_TYPES):
    models(_f)(_to_tensor_handler(_f))


def to_tensor(frame, f, args, kwargs) -> Value:
    if len(args) != 1 or set(kwargs) - {"dtype", "device"}:
        raise Unsupported(UNKNOWN_CALL, f"{getattr(f, '__name__', f)} of an array with these arguments")
    kw = {k: v.as_python() for k, v in kwargs.items()}
    array_value = args[0]
    if isinstance(array_value, ObjectValue):
        return _from_frame_array(frame, f, array_value, kw)
    array = array_value.array
    try:
        if f in _LEGACY_TENSOR_TYPES:
            real = torch.tensor(array, dtype=_LEGACY_TENSOR_TYPES[f])
        else:
            real = f(array, **kw)
    except Exception as e:
        raise Unsupported(USER_EXCEPTION, f"{getattr(f, '__name__', f)} raised {type(e).__name__}: {e}")
    real = real.clone()                # the snapshot the cache entry holds
    if f in _SHARING_CONVERSIONS:
        frame.tracer.frozen_arrays.append((array, array.copy()))   # eager's tensor would see later writes
    return _constant_input(frame, real)


def _constant_input(frame, real: torch.Tensor) -> Value:
    """A graph input holding `real`, cloned in the graph: in-place ops or a returned tensor never
    touch the snapshot."""
    tracer = frame.tracer
    placeholder = tracer.graph.add_input(real, tracer.ref_source(real))
    return tracer.graph.call("call_method", "clone", (placeholder,), {})


def _from_frame_array(frame, f, array_value: ObjectValue, kw) -> Value:
    """An array read from the frame (an argument, a `.numpy()` result after a break) becomes a
    graph input reloaded as `torch.from_numpy(array)` on each call, guarded like any tensor."""
    if array_value.source is None or f not in _SHARING_CONVERSIONS and f not in _COPYING_CONVERSIONS or kw:
        raise Unsupported(UNKNOWN_CALL, f"{getattr(f, '__name__', f)} of an array the tracer cannot reload")
    array = array_value.obj
    if type(array) is not np.ndarray or array.dtype.kind not in "biuf" or not array.flags.writeable:
        raise Unsupported(UNKNOWN_CALL, f"torch.from_numpy of a {array.dtype} array")
    tensor = frame.tracer.array_inputs.get(id(array))
    if tensor is None:
        tensor = frame.wrap(torch.from_numpy(array), FromNumpySource(array_value.source))
        frame.tracer.array_inputs[id(array)] = tensor
    if f in _COPYING_CONVERSIONS:
        return frame.tracer.graph.call("call_method", "clone", (tensor,), {})
    return tensor


def check_unchanged(tracer):
    """A traced array that a tensor shares memory with in eager must keep its contents."""
    for array, snapshot in tracer.frozen_arrays:
        if not np.array_equal(array, snapshot, equal_nan=array.dtype.kind in "fc"):
            raise Unsupported(UNSUPPORTED_MUTATION, "a numpy array changed after a tensor was made from it")
