"""numpy inside captured code.

Three things, all without ever computing numpy on tensor data while tracing:

* **Folding.** A numpy function or ufunc whose arguments are all constants (`np.arange(5)`,
  `np.power(10000, 0.25)`, `np.sin(table)`) runs while tracing; its result is a `Const`. An array
  made that way is a *traced array*: it exists only in this trace, so changing it in place
  (`table[:, 0::2] = ...`, `a += 1`) simply runs too. Arrays read from the frame (an attribute, a
  `.numpy()` result after a break) are never folded: their contents are not guarded
  (`operators._value_is_stable`).
* **Into the graph.** `torch.from_numpy` / `as_tensor` / `tensor` / `torch.FloatTensor(...)` of a
  traced array becomes a graph input holding a snapshot of it, cloned in the graph so each call
  gets a fresh tensor. An array the tensor would share memory with must not change afterwards
  (checked); an array read from the frame becomes a graph input reloaded with `torch.from_numpy`.
* **Out of the graph.** A traced array that outlives the trace (returned, or live at a graph
  break) is rebuilt per call as a copy (codegen), so no call sees another's changes.
"""
from __future__ import annotations

import torch

try:
    import numpy as np
except ImportError:          # torch runs without numpy; then no value is ever an array
    np = None

from . import breaks
from .breaks import Unsupported
from .values import Const, ObjectValue, Value

# Functions with effects beyond their result (files, global settings, printing).
_EFFECTFUL_PREFIXES = ("save", "load", "set", "print", "from", "genfromtxt", "memmap", "info", "show", "seterr",
                       "errstate", "getbufsize", "geterr", "lookfor", "source", "tofile")
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


def fold_call(frame, fn_value: Value, fn, args, kwargs) -> Value:
    """A call of the numpy callable `fn` (read as `fn_value`): folded, its identity guarded."""
    from .guards import IdMatch
    if fn_value.source is not None:
        frame.tracer.add_guard(IdMatch.of(fn_value.source, fn))
    return fold(frame, fn, args, kwargs)


def fold(frame, fn, args, kwargs) -> Value:
    """`fn(*args, **kwargs)` run now: every argument must be a constant."""
    from .operators import python_value
    values = [python_value(a) for a in args]
    kw = {k: python_value(v) for k, v in kwargs.items()}
    try:
        result = fn(*values, **kw)
    except Exception as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}")
    check_unchanged(frame.tracer)
    return as_const(result)


def as_const(result) -> Const:
    if isinstance(result, (np.ndarray, np.generic)) or _plain(result):
        return Const(result)
    raise Unsupported(breaks.UNKNOWN_CALL, f"numpy returned a {type(result).__name__}")


def _plain(value) -> bool:
    from .wrap import is_constant
    if isinstance(value, (tuple, list)):
        return all(_plain(v) or isinstance(v, (np.ndarray, np.generic)) for v in value)
    return is_constant(value)


def array_method(frame, array: np.ndarray, name: str, args, kwargs) -> Value:
    """A method of a traced array (`reshape`, `astype`, `sum`, `fill`...)."""
    if name in ("tofile", "dump", "dumps", "setflags", "resize"):
        raise Unsupported(breaks.UNKNOWN_CALL, f"ndarray.{name}")
    return fold(frame, getattr(array, name), args, kwargs)


def setitem(frame, array: np.ndarray, key: Value, value: Value):
    from .operators import python_value
    if not array.flags.writeable:
        raise Unsupported(breaks.USER_EXCEPTION, "ValueError: assignment destination is read-only")
    fold(frame, array.__setitem__, [Const(python_value(key)), value], {})


# ---- conversions to tensors ------------------------------------------------------------------------

def converts_array(f, args) -> bool:
    """Is `f(*args)` a tensor made from a numpy array?"""
    if not args or not (isinstance(args[0], Const) and is_array(args[0].value)
                        or isinstance(args[0], ObjectValue) and is_array(args[0].obj)):
        return False
    return f in _SHARING_CONVERSIONS or f in _COPYING_CONVERSIONS or f in _LEGACY_TENSOR_TYPES


def to_tensor(frame, f, args, kwargs) -> Value:
    from .operators import python_value
    if len(args) != 1 or set(kwargs) - {"dtype", "device"}:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{getattr(f, '__name__', f)} of an array with these arguments")
    kw = {k: python_value(v) for k, v in kwargs.items()}
    array_value = args[0]
    if isinstance(array_value, ObjectValue):
        return _from_frame_array(frame, f, array_value, kw)
    array = array_value.value
    try:
        if f in _LEGACY_TENSOR_TYPES:
            real = torch.tensor(array, dtype=_LEGACY_TENSOR_TYPES[f])
        else:
            real = f(array, **kw)
    except Exception as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"{getattr(f, '__name__', f)} raised {type(e).__name__}: {e}")
    real = real.clone()                # the snapshot the cache entry holds
    if f in _SHARING_CONVERSIONS:
        _freeze(frame.tracer, array)   # eager's tensor would see later writes to the array
    return _constant_input(frame, real)


def _constant_input(frame, real: torch.Tensor) -> Value:
    """A graph input holding `real`, cloned in the graph: in-place ops or a returned tensor never
    touch the snapshot."""
    tracer = frame.tracer
    source = tracer.ref_source(real)
    placeholder = tracer.graph.add_input(real, source)
    return tracer.graph.call("call_method", "clone", (placeholder,), {})


def _from_frame_array(frame, f, array_value: ObjectValue, kw) -> Value:
    """An array read from the frame (an argument, a `.numpy()` result after a break) becomes a
    graph input reloaded as `torch.from_numpy(array)` on each call, guarded like any tensor."""
    from .sources import FromNumpySource
    from .wrap import wrap
    if array_value.source is None or f not in _SHARING_CONVERSIONS and f not in _COPYING_CONVERSIONS or kw:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{getattr(f, '__name__', f)} of an array the tracer cannot reload")
    array = array_value.obj
    if type(array) is not np.ndarray or array.dtype.kind not in "biuf" or not array.flags.writeable:
        raise Unsupported(breaks.UNKNOWN_CALL, f"torch.from_numpy of a {array.dtype} array")
    tensor = frame.tracer.array_inputs.get(id(array))
    if tensor is None:
        tensor = wrap(frame.tracer, torch.from_numpy(array), FromNumpySource(array_value.source))
        frame.tracer.array_inputs[id(array)] = tensor
    if f in _COPYING_CONVERSIONS:
        return frame.tracer.graph.call("call_method", "clone", (tensor,), {})
    return tensor


# ---- arrays a tensor was made from ---------------------------------------------------------------

def _freeze(tracer, array: np.ndarray):
    tracer.frozen_arrays.append((array, array.copy()))


def check_unchanged(tracer):
    """A traced array that a tensor shares memory with in eager must keep its contents."""
    for array, snapshot in tracer.frozen_arrays:
        if not np.array_equal(array, snapshot, equal_nan=array.dtype.kind in "fc"):
            raise Unsupported(breaks.UNSUPPORTED_MUTATION, "a numpy array changed after a tensor was made from it")


def fresh_copy(array: np.ndarray) -> np.ndarray:
    """What generated code calls to rebuild a traced array for one call."""
    return array.copy()
