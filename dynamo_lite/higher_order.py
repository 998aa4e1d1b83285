"""torch's higher-order ops that take a Python function, traced by calling that function.

`torch._higher_order_ops.associative_scan(combine_fn, xs, dim)` is what libraries call on their
compile path (transformers' Mamba when `torch.compiler.is_compiling()`). Its eager
implementation either vmaps `combine_fn` or compiles it with TorchDynamo, neither of which we
may put in a graph. Instead the scan is unrolled here: `combine_fn` is inlined once per element
along `dim`, on exactly the per-element slices that vmap would hand it, and the results are
stacked. The values are the scan's own (the combine function is associative by contract), in
the order of a sequential scan. Long scans would unroll into huge graphs, so past
`MAX_UNROLLED_SCAN` elements the call is a graph break instead.
"""
from __future__ import annotations

import torch

from . import breaks
from .breaks import Unsupported
from .modelled import models
from .values.base import Const, Value
from .values.containers import SeqValue
from .values.tensors import TensorValue

MAX_UNROLLED_SCAN = 64

try:
    from torch._higher_order_ops.associative_scan import associative_scan as _ASSOCIATIVE_SCAN
except ImportError:        # older torch: nothing to model
    _ASSOCIATIVE_SCAN = None


@models(_ASSOCIATIVE_SCAN)
def _associative_scan(frame, args: list, kwargs: dict) -> Value:
    return associative_scan(frame, *_bind(args, kwargs))


def _bind(args, kwargs):
    names = ("combine_fn", "xs", "dim", "reverse", "combine_mode")
    if len(args) > len(names) or set(kwargs) - set(names):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan with unexpected arguments")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound:
            raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan got {k!r} twice")
        bound[k] = v
    if "combine_fn" not in bound or "xs" not in bound or "dim" not in bound:
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan without combine_fn, xs and dim")
    for name in ("dim", "reverse", "combine_mode"):
        if name in bound and not bound[name].is_python_constant():
            raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan with a non-constant {name}")
    return (bound["combine_fn"], bound["xs"], bound["dim"].as_python(),
            bool(bound.get("reverse", Const(False)).as_python()))


def _leaves(xs: Value) -> tuple[list[TensorValue], object]:
    """The tensors of `xs` (a tensor, or a tuple/list of them) and how to repack them."""
    if isinstance(xs, TensorValue):
        return [xs], None
    if isinstance(xs, SeqValue) and xs.items and all(isinstance(x, TensorValue) for x in xs.items):
        return list(xs.items), xs.cls
    raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over something other than a tensor or a tuple of tensors")


def _pack(leaves: list, cls):
    return leaves[0] if cls is None else SeqValue(list(leaves), cls)


def associative_scan(frame, combine_fn: Value, xs: Value, dim: int, reverse: bool) -> Value:
    graph = frame.tracer.graph
    leaves, cls = _leaves(xs)
    shape = leaves[0].example.shape
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan over dim {dim!r} of a {len(shape)}-d tensor")
    dim %= len(shape)
    if any(tuple(x.example.shape) != tuple(shape) for x in leaves):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over tensors of different shapes")
    n = shape[dim]
    if not isinstance(n, int):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over a dimension of symbolic size")
    if n == 0 or n > MAX_UNROLLED_SCAN:
        raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan over {n} elements (unrolled up to "
                                               f"{MAX_UNROLLED_SCAN})")
    order = range(n - 1, -1, -1) if reverse else range(n)
    results: dict[int, list] = {}
    carry = None
    for i in order:
        element = [graph.call("call_function", torch.select, (x, dim, i), {}) for x in leaves]
        if carry is None:
            carry = element
        else:
            out = combine_fn.call(frame, [_pack(carry, cls), _pack(element, cls)], {})
            carry = _leaves(out)[0] if cls is not None else [out]
            if len(carry) != len(leaves) or not all(isinstance(c, TensorValue) for c in carry):
                raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan's combine_fn must return xs's structure")
        results[i] = carry
    stacked = [graph.call("call_function", torch.stack, (SeqValue([results[i][j] for i in range(n)], list), dim), {})
               for j in range(len(leaves))]
    return _pack(stacked, cls)
