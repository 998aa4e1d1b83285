"""Lowerings of the ops that add values at the positions an index tensor names: `index_add`,
`scatter_add` (and `scatter_reduce` with "sum" including the tensor itself), `index_put` with
accumulate=True, as a kernel of atomic adds (ir.ScatterNode) instead of an aten call; and of those
that store them there (`index_put` without accumulate, `x[i] = v`, `scatter`, `index_copy`), as a
kernel of stores, where of repeated positions any one value is kept (eager's CUDA kernels keep
any one too; its CPU ones the last). With deterministic algorithms asked for, those stay aten's.

Besides what users write (`index_add_`, `scatter_add_`, `x.index_put_((i,), v, accumulate=True)`),
what reaches us is AOTAutograd's decomposition of an embedding's backward,
`_unsafe_masked_index_put_accumulate(zeros, mask, [indices], grad)` (the gradient rows added into
the rows their tokens name, skipping masked positions: the padding index), and the unchecked
`_unsafe_index_put(x, [indices], values, accumulate=True)` some other decompositions leave. The
values are computed where they are added (their producers are inlined into the kernel that adds
them, as into any kernel), and the tensor added into (or the zeros) is stored by a first kernel.

Floats: eager adds on CUDA in a fixed order where it sorts the indices first, atomic adds do not,
so repeated positions may differ from eager in the last bits, as Inductor's do; with
`torch.use_deterministic_algorithms(True)` float scatters stay aten calls (the guards of the graph
check that setting). Integer adds are exact in any order. An index outside the tensor, for which
the checked ops raise, adds nothing (the adds are masked: never a write outside the tensor).
fp16/bf16 destinations stay aten calls (every atomic add would round in the narrow type).
"""
from __future__ import annotations

import torch

from .ir import Affine, Op, cast, const, domain_vars
from .lowerings import NotLowerable, binary, out_meta, register, where
from .values import Value, broadcast_to

aten = torch.ops.aten

#: destination dtypes the kernel adds into (Triton's atomic add), and stores into
ADD_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)
STORE_DTYPES = ADD_DTYPES + (torch.float16, torch.bfloat16)


@register(aten._unsafe_masked_index_put_accumulate.default)
def lower_masked_index_put_accumulate(lw, node, x, mask, indices, values):
    """`x.index_put(indices, values * mask, accumulate=True)` with the indices clamped into
    range (torch._decomp's definition), for one index tensor."""
    return _index_put_add(lw, node, x, indices, values, mask, clamp=True)


@register(aten._unsafe_index_put.default, aten.index_put.default)
def lower_index_put(lw, node, x, indices, values, accumulate=False):
    """`x[..., i, ...] += values` (accumulate) or `x[..., i, ...] = values`."""
    return _index_put_add(lw, node, x, indices, values, None, clamp=False, accumulate=bool(accumulate))


@register(aten.index_add.default)
def lower_index_add(lw, node, x, dim, index, source, *, alpha=1):
    """`x.index_add(dim, index, source, alpha=alpha)`: `alpha * source[..., k, ...]` added into
    `x[..., index[k], ...]` along `dim`."""
    _check(node, x, index, source, True)
    if not isinstance(source, Value) or source.ndim != x.ndim or index.ndim > 1:
        raise NotLowerable("an index_add of this kind")
    dim = dim % max(x.ndim, 1)
    v = domain_vars(x.ndim)
    body = cast(source.load(v), x.dtype)
    if alpha != 1:
        body = binary(Op.MUL, body, const(alpha, x.dtype))
    position = index.load((v[dim],) if index.ndim else ())
    return _add_at(lw, x, dim, source.sizes, v, position, body, None)


@register(aten.scatter_add.default)
def lower_scatter_add(lw, node, x, dim, index, src):
    """`x.scatter_add(dim, index, src)`: `src[p]` added into x at p with its `dim` component
    replaced by `index[p]`, for every position p of `index`."""
    return _scatter(lw, node, x, dim, index, src, accumulate=True)


@register(aten.scatter.src, aten.scatter.value)
def lower_scatter(lw, node, x, dim, index, src):
    """`x.scatter(dim, index, src)`: x with `src[p]` (or the scalar `src`) stored at p with its
    `dim` component replaced by `index[p]`, for every position p of `index`."""
    return _scatter(lw, node, x, dim, index, src, accumulate=False)


@register(aten.index_copy.default)
def lower_index_copy(lw, node, x, dim, index, source):
    """`x.index_copy(dim, index, source)`: `source[..., k, ...]` stored into `x[..., index[k], ...]`."""
    _check(node, x, index, source, False)
    if not isinstance(source, Value) or source.ndim != x.ndim or index.ndim > 1:
        raise NotLowerable("an index_copy of this kind")
    dim = dim % x.ndim
    v = domain_vars(x.ndim)
    position = index.load((v[dim],) if index.ndim else ())
    return _add_at(lw, x, dim, source.sizes, v, position, cast(source.load(v), x.dtype), None, accumulate=False)


def _scatter(lw, node, x, dim, index, src, accumulate: bool) -> Value:
    _check(node, x, index, src, accumulate)
    if index.ndim != x.ndim or (isinstance(src, Value) and src.ndim != x.ndim):
        raise NotLowerable("a scatter of this kind")
    dim = dim % x.ndim
    v = domain_vars(index.ndim)
    body = cast(src.load(v), x.dtype) if isinstance(src, Value) else const(src, x.dtype)
    return _add_at(lw, x, dim, index.sizes, v, index.load(v), body, None, accumulate)


@register(aten.scatter_reduce.two)
def lower_scatter_reduce(lw, node, x, dim, index, src, reduce, *, include_self=True):
    if reduce != "sum" or not include_self:
        raise NotLowerable(f"scatter_reduce {reduce!r}" + ("" if include_self else " without the tensor itself"))
    return lower_scatter_add(lw, node, x, dim, index, src)


def _check(node, x, index, values, accumulate: bool):
    meta = out_meta(node)
    if not (isinstance(x, Value) and isinstance(index, Value)) or x.ndim == 0:
        raise NotLowerable("a scatter of this kind")
    if x.dtype not in (ADD_DTYPES if accumulate else STORE_DTYPES) or meta.dtype != x.dtype \
            or index.dtype not in (torch.int32, torch.int64):
        raise NotLowerable(f"a scatter into {x.dtype} with {index.dtype} indices")
    if (x.dtype.is_floating_point or not accumulate) and torch.are_deterministic_algorithms_enabled():
        raise NotLowerable("a scatter in no fixed order while deterministic algorithms are asked for")
    if not (isinstance(values, Value) or (not accumulate and isinstance(values, (int, float)))):
        raise NotLowerable("values that are no tensor")
    if isinstance(values, Value) and values.dtype.is_complex:
        raise NotLowerable("complex values")


def _index_put_add(lw, node, x, indices, values, mask, clamp: bool, accumulate: bool = True) -> Value:
    """`x[..., index, ...] += values` (`=` where not `accumulate`) for one index tensor (after
    leading full slices: None in `indices`); negative indices count from the end."""
    tensors = [(d, t) for d, t in enumerate(indices or ()) if t is not None]
    if len(tensors) != 1 or not isinstance(tensors[0][1], Value):
        raise NotLowerable("an index_put of this kind (one index tensor)")
    dim, index = tensors[0]
    _check(node, x, index, values, accumulate)
    if not isinstance(values, Value) or (mask is not None and not isinstance(mask, Value)):
        raise NotLowerable("values or a mask that are no tensor")
    domain = x.sizes[:dim] + index.sizes + x.sizes[dim + 1:]
    try:
        values = broadcast_to(values, domain)
        mask = broadcast_to(mask, domain) if mask is not None else None
    except ValueError:
        raise NotLowerable("values that do not broadcast to the indexed shape") from None
    v = domain_vars(len(domain))
    rows = x.sizes[dim]
    position = cast(index.load(v[dim:dim + index.ndim]), torch.int64)
    if clamp:             # clamp(min=-rows, max=rows - 1): always a row of x
        position = binary(Op.MIN, binary(Op.MAX, position, const(-rows, torch.int64)), const(rows - 1, torch.int64))
    position = where(binary(Op.LT, position, const(0, torch.int64)),
                     binary(Op.ADD, position, const(rows, torch.int64)), position)
    ok = cast(mask.load(v), torch.bool) if mask is not None else None
    dest = tuple(v[:dim]) + (Affine(0),) + tuple(v[dim + index.ndim:])
    return _add_at(lw, x, dim, domain, dest, position, cast(values.load(v), x.dtype), ok, accumulate)


def _add_at(lw, x: Value, dim: int, domain, dest, position, body, ok, accumulate: bool = True) -> Value:
    """x with `body` (over `domain`) added (or, not `accumulate`, stored) at `dest` (an index of
    x per domain element), its `dim` component being the loaded `position`; nothing where `ok`
    is false or the position is outside x."""
    rows = x.sizes[dim]
    position = cast(position, torch.int64)
    inside = binary(Op.AND, binary(Op.GE, position, const(0, torch.int64)), binary(Op.LT, position, const(rows, torch.int64)))
    ok = inside if ok is None else binary(Op.AND, inside, ok)
    dest = tuple(Affine(0) if k == dim else a for k, a in enumerate(dest))
    init = cast(x.load(domain_vars(x.ndim)), x.dtype)
    return lw.add_scatter(x.sizes, x.dtype, x.device, init, domain, body, dest, position, ok, dim=dim,
                          accumulate=accumulate)
