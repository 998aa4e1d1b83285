"""Lowerings of reductions: sum, mean, amax/amin, any/all, var/var_mean (two passes over the row,
which the scheduler fuses into one kernel). Each adds a `ReductionNode` through the
`GraphLowering`; the result is a view of its keep-dim buffer.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .ir import Op, cast, const
from .lowerings import NotLowerable, binary, out_meta, pointwise, register
from . import values as V
from .values import Value, broadcast_to, lazy

aten = torch.ops.aten
prims = torch.ops.prims

# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------

def _reduce_dims(x: Value, dims) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(x.ndim, 1) for d in dims})


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_floating_point:
        return torch.float64 if dtype is torch.float64 else torch.float32
    return torch.int64 if dtype is not torch.bool else torch.int32


def reduce(lw, x: Value, dims: list[int], kind: str, keepdim: bool, out_dtype: torch.dtype,
           buffer_dtype: Optional[torch.dtype] = None) -> Value:
    """Reduce `x` over `dims`; the result is a strided view of the reduction's buffer."""
    if x.numel() == 0 or x.dtype.is_complex:
        raise NotLowerable("empty or complex reduction")
    buffer_dtype = buffer_dtype or out_dtype
    acc = acc_dtype(buffer_dtype if buffer_dtype.is_floating_point else x.dtype)
    if kind == "sum" and not buffer_dtype.is_floating_point:
        acc = torch.int64 if buffer_dtype is not torch.bool else torch.int32
    if all(x.sizes[d] == 1 for d in dims):         # nothing to reduce: a pointwise cast
        keep_sizes = tuple(1 if d in dims else s for d, s in enumerate(x.sizes))
        result = lazy(keep_sizes, buffer_dtype, x.device,
                      lambda idx: cast(cast(x.load(idx), acc), buffer_dtype))
    else:
        result = lw.add_reduction(x, dims, kind, acc, buffer_dtype)
    if not keepdim:
        result = V.squeeze(result, dims)
    return result


@register(aten.sum, prims.sum)
def lower_sum(lw, node, x, dims=None, keepdim=False, *, dtype=None, **kw):
    if node.target is aten.sum.default:
        dims, keepdim = None, False
    meta = out_meta(node)
    return reduce(lw, x, _reduce_dims(x, dims), "sum", keepdim, meta.dtype)


@register(aten.mean)
def lower_mean(lw, node, x, dims=None, keepdim=False, *, dtype=None):
    if node.target is aten.mean.default:
        dims, keepdim = None, False
    meta = out_meta(node)
    if not meta.dtype.is_floating_point:
        raise NotLowerable("integer mean")
    dims = _reduce_dims(x, dims)
    n = math.prod(x.sizes[d] for d in dims)
    total = reduce(lw, x, dims, "sum", keepdim, meta.dtype, buffer_dtype=acc_dtype(meta.dtype))
    return pointwise(node, lambda s: binary(Op.MUL, s, const(1.0 / n, s.dtype)), [total],
                     compute=acc_dtype(meta.dtype))


@register(aten.amax, aten.amin, aten.max, aten.min)
def lower_amax(lw, node, x, dims=None, keepdim=False):
    name = node.target.overloadpacket.__name__
    if name in ("max", "min") and node.target not in (aten.max.default, aten.min.default):
        raise NotLowerable("max/min with indices or of two tensors")
    kind = "max" if name in ("amax", "max") else "min"
    meta = out_meta(node)
    if x.dtype is torch.bool:
        raise NotLowerable("bool max")
    return reduce(lw, x, _reduce_dims(x, dims), kind, keepdim, meta.dtype)


@register(aten.any, aten.all)
def lower_any(lw, node, x, dims=None, keepdim=False):
    kind = "max" if node.target.overloadpacket is aten.any else "min"
    flag = pointwise(node, lambda a: binary(Op.NE, a, const(0, a.dtype)), [x], compute=x.dtype,
                     out_dtype=torch.int32, sizes=x.sizes)
    r = reduce(lw, flag, _reduce_dims(x, dims), kind, keepdim, torch.int32)
    return pointwise(node, lambda a: binary(Op.NE, a, const(0, a.dtype)), [r], compute=torch.int32)


def _var_mean(lw, x: Value, dims, correction, keepdim, out_dtype):
    dims = _reduce_dims(x, dims)
    n = math.prod(x.sizes[d] for d in dims)
    acc = acc_dtype(out_dtype)
    total = reduce(lw, x, dims, "sum", True, acc)
    mean = lazy(total.sizes, acc, x.device,
                lambda idx: binary(Op.MUL, total.load(idx), const(1.0 / n, acc)))
    mean_b = broadcast_to(mean, x.sizes)

    def centered_sq(idx):
        d = binary(Op.SUB, cast(x.load(idx), acc), mean_b.load(idx))
        return binary(Op.MUL, d, d)
    sq = lazy(x.sizes, acc, x.device, centered_sq)
    m2 = reduce(lw, sq, dims, "sum", True, acc)
    denom = max(n - (1 if correction is None else correction), 0)
    var = lazy(m2.sizes, out_dtype, x.device,
               lambda idx: cast(binary(Op.DIV, m2.load(idx), const(denom, acc)), out_dtype))
    mean_out = lazy(mean.sizes, out_dtype, x.device, lambda idx: cast(mean.load(idx), out_dtype))
    if not keepdim:
        var, mean_out = V.squeeze(var, dims), V.squeeze(mean_out, dims)
    return var, mean_out


@register(aten.var_mean)
def lower_var_mean(lw, node, x, dims=None, *, correction=None, keepdim=False):
    if node.target is not aten.var_mean.correction:
        raise NotLowerable("var_mean overload")
    return _var_mean(lw, x, dims, correction, keepdim, out_meta(node)[0].dtype)


@register(aten.var)
def lower_var(lw, node, x, dims=None, *, correction=None, keepdim=False):
    if node.target is not aten.var.correction:
        raise NotLowerable("var overload")
    return _var_mean(lw, x, dims, correction, keepdim, out_meta(node).dtype)[0]


@register(prims.var)
def lower_prims_var(lw, node, x, dims, correction, *, output_dtype=None):
    return _var_mean(lw, x, dims, correction, False, out_meta(node).dtype)[0]
