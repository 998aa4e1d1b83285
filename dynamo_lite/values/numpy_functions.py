"""numpy functions, `Tensor.numpy()`, conversions between arrays and tensors, and arrays read
from the frame: the calls through which numpy values (values/arrays.py) come and go.

* A numpy function, ufunc or scalar type (`np.sum`, `np.exp`, `np.linalg.inv`, `np.float32`) is
  folded when its arguments are all constants, and traced with its `torch._numpy` counterpart
  when graph data is among them. `np.random` is not modelled: eager draws from numpy's global
  generator, which a graph cannot reproduce.
* `t.numpy()` is the tensor's own data seen as an array; `torch.from_numpy` / `as_tensor` /
  `tensor` of an array give a tensor sharing its memory or a copy, as eager does.
* An np.ndarray read from the frame is traced over the graph input `torch.from_numpy(array)`.
"""
from __future__ import annotations

import torch

from ..breaks import UNKNOWN_CALL, UNSUPPORTED_VALUE, USER_EXCEPTION, Unsupported
from ..modelled import models, models_family
from ..numpy_runtime import in_input_precision, tnp
from .arrays import ArrayValue, any_traced, constant_input, fold_values, trace_numpy
from .base import Const, Value
from .numpy_shadows import (MAX_SHADOW_ELEMENTS, np, numpy_dtype, placeholder_array, run_eager, shadow_of_tensor,
                            shares_memory)
from .tensors import TensorValue

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


def _torch_numpy_counterpart(fn):
    """The torch._numpy function standing for numpy's `fn` (same name, same submodule), or None."""
    name = getattr(fn, "__name__", None)
    for np_module, tnp_module in ((np, tnp), (np.linalg, tnp.linalg)):
        if name and getattr(np_module, name, None) is fn:
            return getattr(tnp_module, name, None)
    if name and getattr(np.fft, name, None) is fn and hasattr(tnp.fft, name):
        return in_input_precision(getattr(tnp.fft, name))
    return None


def _numpy_function(fn):
    def handler(frame, args, kwargs):
        if any_traced([*args, *kwargs.values()]):
            return trace_numpy(frame, fn, _torch_numpy_counterpart(fn), getattr(fn, "__name__", "function"),
                               list(args), kwargs)
        return fold_values(frame, fn, args, kwargs)
    return handler


models_family(is_foldable, _numpy_function)


@models(torch.Tensor.numpy)
def _tensor_numpy(frame, args, kwargs):
    """`t.numpy()`: the tensor's own data seen as an array (no node: they share memory), with
    eager's checks; `force=True` first detaches (and moves to the CPU)."""
    if len(args) != 1 or set(kwargs) - {"force"}:
        raise Unsupported(UNKNOWN_CALL, "Tensor.numpy() with these arguments")
    t: TensorValue = args[0]
    if not isinstance(t, TensorValue):
        return NotImplemented
    graph = frame.tracer.graph
    if "force" in kwargs and kwargs["force"].as_python():
        t = graph.call("call_method", "detach", (t,), {})
        for needed, fix in ((t.example.device.type != "cpu", "cpu"), (t.example.is_conj(), "resolve_conj"),
                            (t.example.is_neg(), "resolve_neg")):
            if needed:
                t = graph.call("call_method", fix, (t,), {})
    example = t.example
    if example.requires_grad or example.device.type != "cpu" or example.is_conj() or example.is_neg() \
            or example.layout != torch.strided or numpy_dtype(example.dtype) is None:
        raise Unsupported(USER_EXCEPTION, f"Tensor.numpy() of a {example.dtype} tensor on {example.device}"
                                          f"{' that requires grad' if example.requires_grad else ''} raises")
    return ArrayValue(tensor=t, shadow=shadow_of_tensor(example))


def shareable_tensor(array):
    """`torch.from_numpy(array)` for an np.ndarray read from the frame that numpy code may trace
    on, or None (a subclass, a dtype torch lacks, read-only or unaligned memory, too large for a
    shadow: those stay opaque objects)."""
    if np is None or type(array) is not np.ndarray or not array.flags.writeable or not array.flags.aligned \
            or array.dtype.kind not in "biufc" or array.size > MAX_SHADOW_ELEMENTS:
        return None
    try:
        return torch.from_numpy(array)
    except (TypeError, ValueError, RuntimeError):
        return None


def frame_array(tensor: TensorValue, array, source) -> ArrayValue:
    """An array read from the frame, traced over `tensor`, the graph input that reloads it as
    `torch.from_numpy(array)` on each call (guarded like any tensor: dtype, shape, strides)."""
    return ArrayValue(source=source, tensor=tensor, shadow=placeholder_array(array.dtype, array.shape,
                                                                              tensor.example.stride()))


def _to_tensor_handler(f):
    def handler(frame, args, kwargs):
        if f in _LEGACY_TENSOR_TYPES and len(args) == 1 and not kwargs and args[0].python_type() in (list, tuple):
            # torch.IntTensor([n]): the data as torch.tensor takes it, on the CPU the legacy types
            # live on (an int would be a size: an uninitialized tensor, left alone)
            return frame.wrap(torch.tensor, None).call(
                frame, [args[0]], {"dtype": Const(_LEGACY_TENSOR_TYPES[f]), "device": Const(torch.device("cpu"))})
        if not args or not isinstance(args[0], ArrayValue):
            return NotImplemented
        return to_tensor(frame, f, args, kwargs)
    return handler


for _f in (*_SHARING_CONVERSIONS, *_COPYING_CONVERSIONS, *_LEGACY_TENSOR_TYPES):
    models(_f)(_to_tensor_handler(_f))


def to_tensor(frame, f, args, kwargs) -> Value:
    if len(args) != 1 or set(kwargs) - {"dtype", "device"}:
        raise Unsupported(UNKNOWN_CALL, f"{getattr(f, '__name__', f)} of an array with these arguments")
    kw = {k: v.as_python() for k, v in kwargs.items()}
    if args[0].traced:
        return _traced_to_tensor(frame, f, args[0], kw)
    array = args[0].array
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
    return constant_input(frame, real)


def _traced_to_tensor(frame, f, value: ArrayValue, kw) -> Value:
    """A tensor from a traced array: what eager makes of the shadow says whether it shares the
    array's memory (a view of the graph tensor) or is a converted copy."""
    try:
        real = run_eager(f, [value.shadow], kw)
    except Exception as e:
        raise Unsupported(USER_EXCEPTION, f"{getattr(f, '__name__', f)} raised {type(e).__name__}: {e}")
    graph, t = frame.tracer.graph, value.tensor
    if shares_memory(real, value.shadow):
        result = graph.call("call_method", "view_as", (t, t), {})
    else:
        result = graph.call("call_method", "to", (t,), {"dtype": Const(real.dtype), "device": Const(real.device),
                                                         "copy": Const(True)})
    if result.example.dtype != real.dtype or tuple(result.example.shape) != tuple(real.shape):
        raise Unsupported(UNSUPPORTED_VALUE, f"{getattr(f, '__name__', f)} of a traced array")
    return result
