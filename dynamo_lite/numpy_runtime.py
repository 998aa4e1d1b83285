"""What graphs and generated code call at run time for numpy code traced on tensors.

Inside a graph a numpy array is a tensor holding its data (as under TorchDynamo). A numpy
operation on traced arrays is one graph node whose target is a `NumpyCall`: it wraps the tensor
arguments as `torch._numpy` arrays, runs the operation with `torch._numpy`'s numpy semantics
(tensor ops, so FakeTensors and compiling backends go through it), and hands the results back
as tensors. After the graph, `to_array` / `to_scalar` turn a tensor output back into the numpy
array or numpy scalar eager code would have had (`Tensor.numpy()` shares its memory, as the
`.numpy()` it stands for did).

This module imports nothing of dynamo_lite: graphs may be run by any backend.
"""
from __future__ import annotations

import operator

import torch
import torch._numpy as tnp

try:
    import numpy as np
except ImportError:         # then no graph holds numpy code
    np = None


class NumpyCall:
    """Graph target: `fn` (a `torch._numpy` function, a method name or an operator) applied to the
    arguments, with every tensor among them taken as a numpy array. `writes_in_place` says the
    call writes into its first argument (ndarray.fill, `a[i] = v`, `a += b`): the graph builder
    counts it as an in-place op."""

    def __init__(self, fn, name: str, writes_in_place: bool = False):
        self.fn = fn
        self.__name__ = f"numpy_{name}"
        self.writes_in_place = writes_in_place

    def __repr__(self):
        return f"<{self.__name__}>"

    def __call__(self, *args, **kwargs):
        try:
            return _as_tensors(self.fn(*_as_arrays(args), **_as_arrays(kwargs)))
        except tnp.linalg.LinAlgError as e:      # a singular matrix: numpy's own error, as eager raises it
            raise np.linalg.LinAlgError(*e.args) from None


_SINGLE = {"f": 4, "c": 8}          # itemsize of single precision, per dtype kind
_SINGLE_NAMES = {"f": "float32", "c": "complex64"}


def in_input_precision(fn):
    """An np.fft function as numpy >= 2 computes it: single-precision input gives a
    single-precision result (torch._numpy computes in double precision; rounded back here)."""
    def call(a, *args, **kwargs):
        result = fn(a, *args, **kwargs)
        if _single(a) and result.dtype.kind in _SINGLE and not _single(result):
            result = result.astype(_SINGLE_NAMES[result.dtype.kind])
        return result
    return call


def _single(a) -> bool:
    return isinstance(a, tnp.ndarray) and _SINGLE.get(a.dtype.kind) == a.dtype.itemsize


def method(name: str):
    """`obj.name(*args, **kwargs)` as a function of obj."""
    def call(obj, *args, **kwargs):
        return getattr(obj, name)(*args, **kwargs)
    return call


def attribute(name: str):
    """`obj.name` as a function of obj."""
    return operator.attrgetter(name)


def _as_arrays(value):
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if type(value) in (tuple, list):
        return type(value)(_as_arrays(v) for v in value)
    if type(value) is dict:
        return {k: _as_arrays(v) for k, v in value.items()}
    return value


def _as_tensors(value):
    if isinstance(value, tnp.ndarray):
        # torch's lazy conjugate / negative views (`a.conj()`) are copies in numpy, and no array
        # can be made over them
        return value.tensor.resolve_conj().resolve_neg()
    if isinstance(value, tuple):        # plain tuples and torch.return_types alike
        return tuple(_as_tensors(v) for v in value)
    if isinstance(value, list):
        return [_as_tensors(v) for v in value]
    return value


# ---- back to numpy after the graph ------------------------------------------------------------------

def to_array(tensor: torch.Tensor):
    """The numpy array a traced array stands for, over the graph's tensor (no copy)."""
    return tensor.numpy()


def to_scalar(tensor: torch.Tensor):
    """The numpy scalar (np.float32, np.bool_...) a 0-d traced value stands for."""
    return tensor.numpy()[()]
