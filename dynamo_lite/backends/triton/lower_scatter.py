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
`index_put` with several index tensors (`x[i, j] = v`, `x[i, j] += v`: a gather, an add and a
store) of adjacent dims adds (stores) at one position flattened over those dims, i * size_j + j,
where the result's layout makes them one dim (stride_i == size_j * stride_j); index tensors apart
(`x[i, :, j]`) or a layout that does not merge the dims (a transposed tensor) stay aten calls.

Floats: eager adds on CUDA in a fixed order where it sorts the indices first, atomic adds do not,
so repeated positions may differ from eager in the last bits, as Inductor's do; with
`torch.use_deterministic_algorithms(True)` float scatters stay aten calls (the guards of the graph
check that setting). Integer adds are exact in any order. An index outside the tensor, for which
the checked ops raise, adds nothing (the adds are masked, each index to its own dim: never a write
outside the tensor, nor at another element).
fp16/bf16 destinations stay aten calls (every atomic add would round in the narrow type).
"""
from __future__ import annotations

import torch

from .ir import Affine, Op, cast, const, domain_vars
from .lowerings import NotLowerable, binary, from_end, out_meta, register
from .values import Value, broadcast_to

aten = torch.ops.aten

#: destination dtypes the kernel adds into (Triton's atomic add), and stores into
ADD_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)
STORE_DTYPES = ADD_DTYPES + (torch.float16, torch.bfloat16)


@register(aten._unsafe_masked_index_put_accumulate.default)
def lower_masked_index_put_accumulate(lw, node, x, mask, indices, values):
    """`x.index_put(indices, values * mask, accumulate=True)` with the indices clamped into
    range (torch._decomp's definition)."""
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
    return _add_at(lw, x, (dim,), source.sizes, v, (position,), body, None)


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
    return _add_at(lw, x, (dim,), source.sizes, v, (position,), cast(source.load(v), x.dtype), None,
                   accumulate=False)


def _scatter(lw, node, x, dim, index, src, accumulate: bool) -> Value:
    _check(node, x, index, src, accumulate)
    if index.ndim != x.ndim or (isinstance(src, Value) and src.ndim != x.ndim):
        raise NotLowerable("a scatter of this kind")
    dim = dim % x.ndim
    v = domain_vars(index.ndim)
    body = cast(src.load(v), x.dtype) if isinstance(src, Value) else const(src, x.dtype)
    return _add_at(lw, x, (dim,), index.sizes, v, (index.load(v),), body, None, accumulate)


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
    """`x[..., i, j, ...] += values` (`=` where not `accumulate`) for index tensors of adjacent
    dims (after leading full slices: None in `indices`), broadcast together (their shape takes the
    indexed dims' place, as in `x[..., i, j, ...]`); negative indices count from the end. Index
    tensors apart (`x[i, :, j]`: their shape would come first) stay aten calls."""
    if not isinstance(x, Value) or len(indices or ()) > x.ndim:
        raise NotLowerable("an index_put of this kind")
    tensors = [(d, t) for d, t in enumerate(indices or ()) if t is not None]
    dims = tuple(d for d, _ in tensors)
    if not tensors or dims != tuple(range(dims[0], dims[0] + len(dims))) \
            or not all(isinstance(t, Value) for _, t in tensors):
        raise NotLowerable("an index_put of this kind (index tensors of adjacent dims)")
    for _, index in tensors:
        _check(node, x, index, values, accumulate)
    if not isinstance(values, Value) or (mask is not None and not isinstance(mask, Value)):
        raise NotLowerable("values or a mask that are no tensor")
    try:
        shape = tuple(torch.broadcast_shapes(*(t.sizes for _, t in tensors)))
    except (RuntimeError, ValueError):
        raise NotLowerable("index tensors that do not broadcast together") from None
    first, after = dims[0], dims[-1] + 1
    domain = x.sizes[:first] + shape + x.sizes[after:]
    try:
        values = broadcast_to(values, domain)
        mask = broadcast_to(mask, domain) if mask is not None else None
    except ValueError:
        raise NotLowerable("values that do not broadcast to the indexed shape") from None
    v = domain_vars(len(domain))
    here = v[first:first + len(shape)]
    positions = [_wrapped(broadcast_to(index, shape).load(here), x.sizes[d], clamp) for d, index in tensors]
    ok = cast(mask.load(v), torch.bool) if mask is not None else None
    dest = tuple(v[:first]) + (Affine(0),) * len(dims) + tuple(v[first + len(shape):])
    return _add_at(lw, x, dims, domain, dest, positions, cast(values.load(v), x.dtype), ok, accumulate)


def _wrapped(index, rows: int, clamp: bool):
    """The loaded `index` into a dim of `rows`, negative ones counting from the end; `clamp`ed
    first into [-rows, rows - 1] (always a row: the masked index_put's decomposition)."""
    position = cast(index, torch.int64)
    if clamp:
        position = binary(Op.MIN, binary(Op.MAX, position, const(-rows, torch.int64)), const(rows - 1, torch.int64))
    return from_end(position, rows)


def _add_at(lw, x: Value, dims: tuple[int, ...], domain, dest, positions, body, ok,
            accumulate: bool = True) -> Value:
    """x with `body` (over `domain`) added (or, not `accumulate`, stored) at `dest` (an index of
    x per domain element), its components at the adjacent `dims` being the loaded `positions`;
    nothing where `ok` is false or a position is outside its dim. Several dims are added at one
    position, flattened over them (i * size_j + j), where the result's layout lays them out as
    one dim (GraphLowering.add_scatter; else NotLowerable)."""
    inside, flat = None, None
    for d, position in zip(dims, positions):
        rows, position = x.sizes[d], cast(position, torch.int64)
        in_dim = binary(Op.AND, binary(Op.GE, position, const(0, torch.int64)),
                        binary(Op.LT, position, const(rows, torch.int64)))
        inside = in_dim if inside is None else binary(Op.AND, inside, in_dim)
        flat = position if flat is None else binary(Op.ADD, binary(Op.MUL, flat, const(rows, torch.int64)), position)
    ok = inside if ok is None else binary(Op.AND, inside, ok)
    dest = tuple(Affine(0) if k in dims else a for k, a in enumerate(dest))
    init = cast(x.load(domain_vars(x.ndim)), x.dtype)
    return lw.add_scatter(x.sizes, x.dtype, x.device, init, domain, body, dest, flat, ok,
                          dim=dims[0] if len(dims) == 1 else dims, accumulate=accumulate)
