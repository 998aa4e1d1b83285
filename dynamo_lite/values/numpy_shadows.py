"""Shadows: real numpy arrays with placeholder data that stand for traced numpy arrays.

A traced array (values/arrays.py) keeps its data in a graph tensor, and `torch._numpy` computes
on it with numpy's semantics, but not always with numpy's exact answer about the *kind* of
result: numpy gives a numpy scalar where `torch._numpy` gives a 0-d array, a copy where it gives a
view (`flatten`), C order where it keeps the layout, another dtype here and there. So every
traced array also has a shadow, a real array of eager's dtype, shape and strides whose contents
mean nothing, and every numpy operation on traced arrays also runs, with real numpy, on the
shadows: its result is eager numpy's own answer to "a scalar or an array? which dtype and shape?
is it one of the operands, or a view of one?". Views of shadows are views, so aliasing carries
over from operation to operation.

What never comes from a shadow is data: values, truth, `tolist()` (those are graph breaks).
Shapes are concrete: a symbolic size a shadow needs is specialized (ShapeEnv guards it).
"""
from __future__ import annotations

import math
import warnings

import torch

from ..breaks import UNSUPPORTED_VALUE, USER_EXCEPTION, Unsupported

try:
    import numpy as np
except ImportError:          # torch runs without numpy; then no value is ever an array
    np = None

# Placeholder contents are real memory: past this many elements numpy code is not traced.
MAX_SHADOW_ELEMENTS = 1 << 24

_NUMPY_DTYPES: dict = {}


def numpy_dtype(dtype: torch.dtype):
    """The numpy dtype of `Tensor.numpy()` for a tensor of `dtype`, or None when there is none
    (bfloat16, the float8s...)."""
    if dtype not in _NUMPY_DTYPES:
        try:
            _NUMPY_DTYPES[dtype] = torch.empty((), dtype=dtype).numpy().dtype
        except (TypeError, RuntimeError):
            _NUMPY_DTYPES[dtype] = None
    return _NUMPY_DTYPES[dtype]


def same_dtype(tensor_dtype: torch.dtype, array_dtype) -> bool:
    return numpy_dtype(tensor_dtype) == array_dtype


def concrete(sizes) -> tuple:
    """Sizes or strides as ints; a symbolic one is specialized (ShapeEnv records the guard)."""
    return tuple(int(s) for s in sizes)


def _check_size(shape):
    count = math.prod(shape)
    if count > MAX_SHADOW_ELEMENTS:
        raise Unsupported(UNSUPPORTED_VALUE, f"numpy code on an array of {count} elements (tracing keeps a "
                                             f"placeholder array of that size)")


def placeholder_array(dtype, shape, strides=None):
    """A real array of `dtype`, `shape` and `strides` (in elements; C order when None) holding
    placeholder data: zeros, and ones on the diagonal of the last two dims for inexact dtypes,
    so linear algebra on it (inv, solve, cholesky) does not fail on a singular matrix."""
    shape = tuple(shape)
    _check_size(shape)
    if strides is None or tuple(strides) == _c_strides(shape):
        array = np.zeros(shape, dtype)
    else:
        buffer = np.zeros(_span(shape, strides), dtype)
        array = np.lib.stride_tricks.as_strided(buffer, shape, tuple(s * buffer.itemsize for s in strides))
    if array.dtype.kind in "fc" and array.ndim >= 2 and array.size:
        diagonal = np.arange(min(array.shape[-2:]))
        array[..., diagonal, diagonal] = 1
    return array


def _span(shape, strides) -> int:
    """Elements of memory a strided view of `shape` reaches."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 1


def _c_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def shadow_of_tensor(example: torch.Tensor):
    """The shadow of `tensor.numpy()`: eager's array shares the tensor's layout."""
    dtype = numpy_dtype(example.dtype)
    if dtype is None:
        raise Unsupported(USER_EXCEPTION, f"TypeError: numpy has no dtype for {example.dtype}")
    return placeholder_array(dtype, concrete(example.shape), concrete(example.stride()))


def placeholder_tensor(example: torch.Tensor) -> torch.Tensor:
    """A real CPU tensor like `example` (dtype, sizes, strides, requires_grad) with placeholder
    contents: what eager numpy is handed where the program passes a tensor."""
    shape, strides = concrete(example.shape), concrete(example.stride())
    _check_size(shape)
    tensor = torch.zeros(_span(shape, strides), dtype=example.dtype).as_strided(shape, strides)
    if example.requires_grad:
        tensor = tensor.detach().requires_grad_()
    return tensor


def fresh_copy(shadow):
    """Another shadow with the same metadata and new placeholder contents (nothing aliased)."""
    if isinstance(shadow, np.ndarray):
        size = shadow.itemsize
        strides = tuple(s // size for s in shadow.strides) if all(s >= 0 and s % size == 0 for s in shadow.strides) \
            else None                          # negative or unaligned strides: C order will do
        return placeholder_array(shadow.dtype, shadow.shape, strides)
    if isinstance(shadow, torch.Tensor):
        return placeholder_tensor(shadow)
    return shadow


def run_eager(fn, args, kwargs):
    """`fn(*args, **kwargs)` with real numpy on shadows, quietly: placeholder data may divide by
    zero or warn where the program's data would not."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def shares_memory(a, b) -> bool:
    """Whether two shadows (arrays or tensors) overlap in memory (when in doubt: yes)."""
    a, b = _as_numpy(a), _as_numpy(b)
    if a is None or b is None or not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


def _as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return None


def storage_key(example: torch.Tensor):
    """What identifies the (fake) storage of a graph tensor: two tensors with the same key alias."""
    try:
        return example.untyped_storage()._cdata
    except Exception:       # no storage to look at
        return None
