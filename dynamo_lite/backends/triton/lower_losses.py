"""Lowerings of the negative log-likelihood loss (what `F.cross_entropy` becomes after
`log_softmax`): a reduction followed by a gather, fused so that the `[N, C]` log-probabilities
are never written.

`nll_loss_forward` reads `logp[i, target[i]]` through a GATHER of the *lazy* log_softmax value:
the gather lands on the logits themselves (`x[i, t] - max_i - log(sumexp_i)`), so the row kernel
only stores its per-row max and sum of exponentials, and a small second kernel picks one logit
per row and reduces over the batch. `nll_loss_backward` is pointwise (`j == target[i]` compares
the class index with the target; no scatter), so the backward of cross-entropy fuses with
`log_softmax`'s backward into one row kernel.

A target out of range (eager raises) makes the loss NaN: the load is masked, never outside the
tensor.
"""
from __future__ import annotations

import itertools

import torch

from .ir import Affine, Op, cast, const, gather_var
from .lower_reductions import acc_dtype, reduce
from .lowerings import NotLowerable, binary, index_expr, out_meta, register, unary, where
from .values import Value, lazy

aten = torch.ops.aten

_fresh = itertools.count()

REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2


def _picked_loss(x: Value, target: Value, weight, ignore_index: int) -> tuple[Value, Value]:
    """Per batch element: `-weight[t] * x[.., t]` (0 where t is ignored) and `weight[t]` (0 where
    ignored), as lazy values over the batch dims, in the accumulation dtype."""
    classes = x.sizes[-1]
    acc = acc_dtype(x.dtype)
    batch = x.sizes[:-1]

    def parts(idx):
        t = cast(target.load(idx), torch.int64)
        valid = binary(Op.NE, t, const(ignore_index, torch.int64))
        in_range = binary(Op.AND, binary(Op.GE, t, const(0, torch.int64)),
                          binary(Op.LT, t, const(classes, torch.int64)))
        ok = binary(Op.AND, valid, in_range)
        var = f"_gather{next(_fresh)}"
        cls = Affine.var(var)
        picked = gather_var([cast(x.load(tuple(idx) + (cls,)), acc)], var, classes, t, ok)[0]
        w = const(1.0, acc)
        if weight is not None:
            w = gather_var([cast(weight.load((cls,)), acc)], var, classes, t, ok)[0]
        w = where(valid, w, const(0.0, acc))
        loss = where(valid, binary(Op.MUL, unary(Op.NEG, picked), w), const(0.0, acc))
        # a class out of range (eager raises): NaN instead of a read outside the tensor
        loss = where(binary(Op.AND, valid, unary(Op.NOT, in_range)), const(float("nan"), acc), loss)
        return loss, w

    loss = lazy(batch, acc, x.device, lambda idx: parts(idx)[0])
    w = lazy(batch, acc, x.device, lambda idx: parts(idx)[1])
    return loss, w


def _check(x, target, weight):
    if not isinstance(x, Value) or not isinstance(target, Value) or x.ndim not in (1, 2):
        raise NotLowerable("nll_loss of this shape")
    if not x.dtype.is_floating_point or target.dtype.is_floating_point:
        raise NotLowerable("nll_loss dtypes")
    if weight is not None and not isinstance(weight, Value):
        raise NotLowerable("nll_loss weight")


@register(aten.nll_loss_forward)
def lower_nll_loss_forward(lw, node, x, target, weight, reduction, ignore_index):
    _check(x, target, weight)
    out_dtype = out_meta(node)[0].dtype
    acc = acc_dtype(x.dtype)
    loss, w = _picked_loss(x, target, weight, ignore_index)
    dims = list(range(loss.ndim))
    if reduction == REDUCTION_NONE:
        out = lazy(loss.sizes, out_dtype, x.device, lambda idx: cast(loss.load(idx), out_dtype))
        zero = lazy((), out_dtype, x.device, lambda idx: const(0.0, out_dtype))
        return out, zero
    total = reduce(lw, loss, dims, "sum", False, out_dtype, buffer_dtype=acc)
    total_weight = reduce(lw, w, dims, "sum", False, out_dtype, buffer_dtype=acc)
    if reduction == REDUCTION_SUM:
        out = lazy((), out_dtype, x.device, lambda idx: cast(total.load(idx), out_dtype))
    else:
        out = lazy((), out_dtype, x.device,
                   lambda idx: cast(binary(Op.DIV, total.load(idx), total_weight.load(idx)), out_dtype))
    tw = lazy((), out_dtype, x.device, lambda idx: cast(total_weight.load(idx), out_dtype))
    return out, tw


@register(aten.nll_loss_backward)
def lower_nll_loss_backward(lw, node, grad_out, x, target, weight, reduction, ignore_index, total_weight):
    _check(x, target, weight)
    if not isinstance(grad_out, Value) or not isinstance(total_weight, Value):
        raise NotLowerable("nll_loss_backward arguments")
    out_dtype = out_meta(node).dtype
    acc = acc_dtype(out_dtype)

    def loader(idx):
        row, cls = tuple(idx[:-1]), idx[-1]
        t = cast(target.load(row), torch.int64)
        hit = binary(Op.AND, binary(Op.EQ, index_expr(cls), t),
                     binary(Op.NE, t, const(ignore_index, torch.int64)))
        g = cast(grad_out.load(row if reduction == REDUCTION_NONE else ()), acc)
        if reduction == REDUCTION_MEAN:
            g = binary(Op.DIV, g, cast(total_weight.load(()), acc))
        if weight is not None:
            g = binary(Op.MUL, cast(weight.load((cls,)), acc), g)
        return cast(where(hit, unary(Op.NEG, g), const(0.0, acc)), out_dtype)
    return lazy(x.sizes, out_dtype, x.device, loader)
