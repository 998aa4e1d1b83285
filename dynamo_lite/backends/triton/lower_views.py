"""Lowerings of views, scatters, concatenation and table lookups: index rewrites, never kernels
of their own.

`view`/`permute`/`expand`/`slice`/`select`/... rewrite the index a value is read at (values.py),
as `flip` does (a negative step: never a view of a buffer, computed where it is used), and `roll`
(two masked loads per rolled dim);
`cat`, `constant_pad_nd`, `select_scatter` and `slice_scatter` become pointwise values whose loads
are masked to the part of the output each input covers (a slice_scatter with a step gathers), `max_pool2d` one that scans its window
(`avg_pool2d` one that sums it);
`embedding`, `gather`, `index_select` and advanced indexing read the position each index names
(a data-dependent index: ir.gather_var), where their result is used. An index outside the tensor
(for which eager raises) never reads outside it: the gather load is masked, and the element is
NaN for floating-point tensors, 0 (False) for integer and bool ones, which have no NaN.
"""
from __future__ import annotations

import torch

import itertools
import operator

from .codegen import compute_dtype
from .ir import (Affine, Expr, Op, cast, const, contiguous_strides, domain_vars, expr, gather_var, rewrite,
                 substitute_index, walk, with_mask)
from .lowerings import GraphNotLowerable, NotLowerable, binary, from_end, index_expr, out_meta, register, where
from . import layouts, values as V
from .values import Value, broadcast_to, lazy

aten = torch.ops.aten
prims = torch.ops.prims

#: numbers for fresh loop variables (a gather's position, a masked read's probes)
_fresh = itertools.count()

# ---------------------------------------------------------------------------------------------
# views
# ---------------------------------------------------------------------------------------------

def _sizes(node):
    return tuple(int(s) for s in out_meta(node).shape)


@register(aten.view, aten._unsafe_view, aten.reshape)
def lower_view(lw, node, x, size):
    return V.reshape(x, _sizes(node), lw.realize_for_view)


@register(prims.broadcast_in_dim)
def lower_broadcast_in_dim(lw, node, x, shape, broadcast_dims):
    sizes = _sizes(node)
    expanded = [1] * len(sizes)
    for src_dim, dst_dim in enumerate(broadcast_dims):
        expanded[dst_dim] = x.sizes[src_dim]
    return broadcast_to(V.reshape(x, expanded, lw.realize_for_view), sizes)


@register(aten.permute)
def lower_permute(lw, node, x, dims):
    return V.permute(x, dims)


@register(aten.transpose)
def lower_transpose(lw, node, x, d0, d1):
    dims = list(range(x.ndim))
    if dims:
        d0, d1 = d0 % x.ndim, d1 % x.ndim
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return V.permute(x, dims)


@register(aten.t)
def lower_t(lw, node, x):
    return V.permute(x, [1, 0]) if x.ndim == 2 else x


@register(aten.expand)
def lower_expand(lw, node, x, size, *, implicit=False):
    return broadcast_to(x, _sizes(node))


@register(aten.unsqueeze)
def lower_unsqueeze(lw, node, x, dim):
    return V.unsqueeze(x, dim % (x.ndim + 1))


@register(aten.squeeze)
def lower_squeeze(lw, node, x, dims=None):
    if x.ndim == 0:
        return x
    if dims is None:
        dims = range(x.ndim)
    elif isinstance(dims, int):
        dims = [dims]
    return V.squeeze(x, [d % x.ndim for d in dims])


@register(aten.slice)
def lower_slice(lw, node, x, dim=0, start=None, end=None, step=1):
    return V.slice_dim(x, dim % x.ndim, start, end, step)


@register(aten.select)
def lower_select(lw, node, x, dim, index):
    return V.select(x, dim % x.ndim, index)


@register(aten.flip.default)
def lower_flip(lw, node, x, dims):
    """Read backwards along `dims`: an index rewrite with a negative step, computed where it is
    used (torch has no negative strides, so it is never a view of a buffer)."""
    flipped = {d % max(x.ndim, 1) for d in dims}

    def remap(idx):
        return tuple(idx[d] * -1 + (x.sizes[d] - 1) if d in flipped else idx[d] for d in range(x.ndim))
    return lazy(x.sizes, x.dtype, x.device, lambda idx: x.load(remap(idx)))


@register(aten.split, aten.split_with_sizes)
def lower_split(lw, node, x, split, dim=0):
    dim = dim % x.ndim
    sizes = [int(t.shape[dim]) for t in out_meta(node)]
    out, start = [], 0
    for s in sizes:
        out.append(V.slice_dim(x, dim, start, start + s, 1))
        start += s
    return out


@register(aten.unbind)
def lower_unbind(lw, node, x, dim=0):
    dim = dim % x.ndim
    return [V.select(x, dim, i) for i in range(x.sizes[dim])]


# ---------------------------------------------------------------------------------------------
# scatters and concatenation: pointwise with masked loads
# ---------------------------------------------------------------------------------------------

def _in_range(i: Affine, lo: int, hi: int) -> Expr:
    pos = index_expr(i)
    return binary(Op.AND, binary(Op.GE, pos, const(lo, torch.int64)), binary(Op.LT, pos, const(hi, torch.int64)))


def _masked(value: Value, idx, mask: Expr, dtype, varying) -> Expr:
    """value[idx] where `mask` holds. The components of `idx` at the positions `varying` may fall
    outside `value`: the loads whose address depends on them are masked, so out-of-range lanes
    read nothing. The others are in range anyway and stay unmasked, so they are one expression
    wherever the varying components point (a batch norm's per-channel scale, read in each of a
    pooling window's positions, is computed once)."""
    holes = _holes(varying)
    names = set(holes.values())
    e = cast(value.load(_probe(idx, holes)), dtype)

    def add_mask(x, args):
        if x.op is Op.GATHER or (x.op is Op.LOAD and not names.isdisjoint(x.arg[1].vars())):
            return with_mask(expr(x.op, args, x.arg, x.dtype), mask)
        return None
    return substitute_index(rewrite([e], add_mask), {holes[d]: idx[d] for d in holes})[0]


def _holes(positions) -> dict[int, str]:
    """A fresh loop variable for each index position: what depends on that position."""
    return {d: f"_at{next(_fresh)}" for d in positions}


def _probe(idx, holes: dict[int, str]) -> tuple:
    return tuple(Affine.var(holes[d]) if d in holes else a for d, a in enumerate(idx))


@register(aten.cat)
def lower_cat(lw, node, tensors, dim=0):
    meta = out_meta(node)
    sizes = tuple(meta.shape)
    dim = dim % len(sizes)
    parts, start = [], 0
    for t in tensors:
        if t.numel() == 0 and t.ndim == 1:
            continue                        # legacy: cat ignores empty 1-D tensors
        parts.append((t, start, start + t.sizes[dim]))
        start += t.sizes[dim]
    if len(parts) > 8:
        raise NotLowerable("cat of many tensors")

    def loader(idx):
        result = None
        for t, lo, hi in reversed(parts):
            local = idx[:dim] + (idx[dim] + (-lo),) + idx[dim + 1:]
            cond = _in_range(idx[dim], lo, hi)
            value = _masked(t, local, cond, meta.dtype, (dim,))
            result = value if result is None else where(cond, value, result)
        return result
    return lazy(sizes, meta.dtype, meta.device, loader)


@register(aten.as_strided.default)
def lower_as_strided(lw, node, x, size, stride, storage_offset=None):
    """`as_strided` addresses its input's storage, which in eager is laid out by the op that made
    it (the storage's owner: the view chain below the input walked back), and ours, where that op
    is computed, is laid out as we choose. One that only restates its input's own layout (the
    same sizes, strides and offset wherever a dim has more than one element: what
    functionalization leaves after an adaptive pool's squeeze) reads the input as it is. Any
    other is a view of the owner's buffer in eager's layout (`eager_view`: Longformer's
    overlapping chunks of a `reshape` that is a view in eager). Over a graph input's storage it
    is an aten call on the caller's tensor (graph_lowering._extern passes it `eager_view`)."""
    meta, val = out_meta(node), node.args[0].meta.get("val")
    if not isinstance(x, Value) or not isinstance(val, torch.Tensor):
        raise GraphNotLowerable("as_strided of an input we cannot place in eager's layout")
    offset = storage_offset if storage_offset is not None else val.storage_offset()
    if tuple(size) == tuple(val.shape) and offset == val.storage_offset() \
            and all(n <= 1 or a == b for n, a, b in zip(size, stride, val.stride())):
        return lazy(x.sizes, meta.dtype, meta.device, lambda idx: cast(x.load(idx), meta.dtype))
    owner = storage_owner(node.args[0])
    if owner is not None and owner.op == "placeholder":
        raise NotLowerable("an as_strided of a graph input's storage (an aten call on the input's view)")
    buffer, _, at = eager_view(lw, node.args[0]).layout
    return Value.of_buffer(buffer, tuple(size), tuple(stride), at - val.storage_offset() + offset)


#: aten ops whose result depends on their first argument's storage, not only on its elements
#: (graph_lowering._extern hands them `eager_view` of it)
STORAGE_ADDRESSING = {aten.as_strided.default, aten.as_strided_scatter.default}


def eager_view(lw, node) -> Value:
    """`node`'s tensor as a view of memory laid out as its storage is in eager: for a storage a
    graph input owns, a view of the input's buffer (the caller's tensor); else of the owner's
    buffer where ours is in eager's layout, or a copy into it. GraphNotLowerable where that
    cannot be: neither a kernel nor an aten call on a buffer of ours would then read what eager
    reads, so the whole graph runs as captured."""
    val = node.meta.get("val")
    owner = storage_owner(node) if isinstance(val, torch.Tensor) else None
    if owner is None:
        raise GraphNotLowerable("as_strided over a storage viewed as another dtype")
    if owner.op == "placeholder":
        value = lw.env.get(owner)
        if not (isinstance(value, Value) and value.is_strided()):
            raise GraphNotLowerable("as_strided over a graph input not in memory")
        buffer, _, at = value.layout
        return Value.of_buffer(buffer, tuple(val.shape), tuple(val.stride()),
                               at + val.storage_offset() - owner.meta["val"].storage_offset())
    buffer, base = eager_storage(lw, owner)
    return Value.of_buffer(buffer, tuple(val.shape), tuple(val.stride()), base + val.storage_offset())


def storage_owner(node):
    """The node that made the storage `node`'s tensor lives in, in eager: the view chain (each
    node's first argument sharing its storage, of one dtype) walked back; None where the chain
    changes dtype (a `view(dtype)`, whose storage positions are not elements)."""
    from ...graph_builder import storage_key
    val = node.meta.get("val")
    storage = storage_key(val)
    while node.op == "call_function" and node.args and isinstance(node.args[0], torch.fx.Node):
        below = node.args[0]
        if node.target is operator.getitem and isinstance(below.meta.get("val"), (list, tuple)) \
                and below.args and isinstance(below.args[0], torch.fx.Node):
            below = below.args[0]           # a piece of `split`, `unbind`...: that op's input
        below_val = below.meta.get("val")
        if storage_key(below_val) is None or storage_key(below_val) != storage:
            break
        if below_val.dtype != val.dtype:
            return None
        node = below
    return node


def eager_storage(lw, owner) -> tuple:
    """(buffer, offset): where `owner`'s storage position 0 lies in a buffer laid out as eager's
    storage (dense, in eager's strides): the owner's buffer where ours already is so, else a copy
    into eager's strides. GraphNotLowerable where eager's storage is not its tensor's elements
    densely (an offset, gaps, overlaps)."""
    val = owner.meta["val"]
    value = lw.env.get(owner)
    if not isinstance(value, Value) or not _dense(val):
        raise GraphNotLowerable(f"as_strided over a storage of {owner.target} not laid out densely")
    strides = tuple(val.stride())
    if value.is_strided():
        buffer, ours, at = value.layout
        if all(n <= 1 or a == b for n, a, b in zip(value.sizes, ours, strides)):
            return buffer, at
        value = Value(value.sizes, value.dtype, value.device, value.load)     # copied in eager's layout
    stored = lw.realize(value, strides)
    return stored.layout[0], stored.layout[2]


def _dense(t: torch.Tensor) -> bool:
    """Is the storage exactly `t`'s elements, from position 0, without gaps or overlaps?"""
    return t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size() \
        and layouts.dense_strides(t, t.shape) is not None


@register(aten.roll)
def lower_roll(lw, node, x, shifts, dims=()):
    """`torch.roll` along given dims (Swin's shifted windows): per dim, positions below the shift
    read from the end, the rest `shift` back, two masked loads as `cat` reads its parts. Rolling
    the flattened tensor (no dims) stays an aten call."""
    meta = out_meta(node)
    shifts, dims = list(shifts), list(dims)
    if not isinstance(x, Value) or not dims or len(shifts) != len(dims) \
            or not all(isinstance(v, int) for v in shifts + list(x.sizes)):
        raise NotLowerable("a roll of this kind (static shifts along given dims)")
    value = x
    for shift, dim in zip(shifts, dims):
        dim = dim % x.ndim
        if x.sizes[dim]:
            value = _rolled(value, dim, shift % x.sizes[dim], meta)
    return lazy(x.sizes, meta.dtype, meta.device, lambda idx: cast(value.load(idx), meta.dtype))


def _rolled(x: Value, dim: int, shift: int, meta) -> Value:
    size = x.sizes[dim]
    if shift == 0:
        return x

    def loader(idx):
        wrapped, rest = _in_range(idx[dim], 0, shift), _in_range(idx[dim], shift, size)
        from_end = idx[:dim] + (idx[dim] + (size - shift),) + idx[dim + 1:]
        back = idx[:dim] + (idx[dim] + (-shift),) + idx[dim + 1:]
        return where(wrapped, _masked(x, from_end, wrapped, meta.dtype, (dim,)),
                     _masked(x, back, rest, meta.dtype, (dim,)))
    return lazy(x.sizes, meta.dtype, meta.device, loader)


@register(aten.select_scatter)
def lower_select_scatter(lw, node, x, src, dim, index):
    meta = out_meta(node)
    dim = dim % x.ndim
    index = index % x.sizes[dim]

    def loader(idx):
        cond = binary(Op.EQ, index_expr(idx[dim]), const(index, torch.int64))
        inner = idx[:dim] + idx[dim + 1:]
        return where(cond, cast(src.load(inner), meta.dtype), cast(x.load(idx), meta.dtype))
    return lazy(x.sizes, meta.dtype, meta.device, loader)


@register(aten.slice_scatter)
def lower_slice_scatter(lw, node, x, src, dim=0, start=None, end=None, step=1):
    meta = out_meta(node)
    dim = dim % x.ndim
    size = x.sizes[dim]
    lo = V._clamp_index(start, size, 0)
    if step != 1:
        return _strided_slice_scatter(x, src, dim, lo, step, meta)
    hi = lo + src.sizes[dim]

    def loader(idx):
        cond = _in_range(idx[dim], lo, hi)
        local = idx[:dim] + (idx[dim] + (-lo),) + idx[dim + 1:]
        return where(cond, _masked(src, local, cond, meta.dtype, (dim,)), cast(x.load(idx), meta.dtype))
    return lazy(x.sizes, meta.dtype, meta.device, loader)


def _strided_slice_scatter(x: Value, src: Value, dim: int, lo: int, step: int, meta) -> Value:
    """`x` with `src` at positions lo, lo + step, ... along `dim` (the backward of `t[..., ::2]`,
    GPT-J's and CodeGen's rotary halves): where `(i - lo) % step == 0` inside the slice, src's
    element `(i - lo) // step` (a gather: not an affine index), else x's."""
    count = src.sizes[dim]
    if count == 0:
        return lazy(x.sizes, meta.dtype, meta.device, lambda idx: cast(x.load(idx), meta.dtype))

    def loader(idx):
        offset = binary(Op.SUB, index_expr(idx[dim]), const(lo, torch.int64))
        inside = binary(Op.AND, _in_range(idx[dim], lo, lo + (count - 1) * step + 1),
                        binary(Op.EQ, binary(Op.FMOD, offset, const(step, torch.int64)), const(0, torch.int64)))
        position = binary(Op.IDIV, offset, const(step, torch.int64))
        at = tuple(None if k == dim else v for k, v in enumerate(idx))
        return where(inside, _read_at(src, at, {dim: position}, meta.dtype), cast(x.load(idx), meta.dtype))
    return lazy(x.sizes, meta.dtype, meta.device, loader)


@register(aten.constant_pad_nd)
def lower_constant_pad(lw, node, x, pad, value=0):
    """A negative amount crops that side (a slice of x, then the rest padded)."""
    meta = out_meta(node)
    sizes = tuple(meta.shape)
    lows = [0] * len(sizes)
    for k in range(len(pad) // 2):
        d = len(sizes) - 1 - k
        low, high = pad[2 * k], pad[2 * k + 1]
        if low < 0 or high < 0:
            x = V.slice_dim(x, d, max(-low, 0), x.sizes[d] - max(-high, 0), 1)
        lows[d] = max(low, 0)
    if tuple(x.sizes) != tuple(s - lo - hi for s, lo, hi in zip(sizes, lows, _highs(pad, len(sizes)))):
        raise NotLowerable("padding that crops more than the input")
    return padded(x, sizes, lows, value, meta.dtype, meta.device)


def _highs(pad, ndim: int) -> list[int]:
    highs = [0] * ndim
    for k in range(len(pad) // 2):
        highs[ndim - 1 - k] = max(pad[2 * k + 1], 0)
    return highs


def padded(x: Value, sizes, lows, value, dtype: torch.dtype, device) -> Value:
    """`x` placed at `lows` in a value of `sizes`, `value` elsewhere (out-of-range lanes load
    nothing). Also the zero-padded matmul operands of graph_lowering."""
    def loader(idx):
        cond = None
        local, varying = [], []
        for d in range(len(sizes)):
            local.append(idx[d] + (-lows[d]))
            if sizes[d] != x.sizes[d]:
                varying.append(d)
                c = _in_range(idx[d], lows[d], lows[d] + x.sizes[d])
                cond = c if cond is None else binary(Op.AND, cond, c)
        if cond is None:
            return cast(x.load(tuple(local)), dtype)
        return where(cond, _masked(x, tuple(local), cond, dtype, varying), const(value, dtype))
    return lazy(sizes, dtype, device, loader)


# ---------------------------------------------------------------------------------------------
# windows: max pooling
# ---------------------------------------------------------------------------------------------

#: a pooled value computed by more ops than this (per window position: `_window_ops`) is stored
#: before the windows read it. A ResNet stem's batch norm + ReLU is 5 (a subtraction, two
#: multiplications, an addition, the ReLU; its square root and division are per channel): fused,
#: 14.9 us vs Inductor's 15.9; stored first, 20.3 us (H200, bench/kernel_set.py -k resnet50)
POOL_RECOMPUTE_OPS = 8


def _window_ops(x: Value) -> int:
    """How many ops (neither loads nor casts nor indices) compute an element of the lazy `x`
    from values that vary with its position along H and W: what each window position computes
    again (a batch norm's per-channel scale is computed once per output element, not counted)."""
    holes = _holes((2, 3))
    moving = set(holes.values())
    varies: dict[int, bool] = {}
    count = 0
    for e in walk([x.load(_probe(domain_vars(x.ndim), holes))]):
        if e.op in (Op.LOAD, Op.GATHER, Op.INDEX):
            aff = e.arg if e.op is Op.INDEX else e.arg[1]
            varies[id(e)] = not moving.isdisjoint(aff.vars()) or any(varies[id(a)] for a in e.args)
            continue
        varies[id(e)] = any(varies[id(a)] for a in e.args)
        count += varies[id(e)] and e.op not in (Op.CAST, Op.CONST)
    return count


def _window(kernel_size, stride, padding, dilation) -> tuple[int, int, int, int, int, int, int, int]:
    """A pooling window's (kh, kw, dh, dw, sh, sw, ph, pw), the stride defaulting to the kernel."""
    (kh, kw), (dh, dw) = _pair(kernel_size, None), _pair(dilation, 1)
    (sh, sw), (ph, pw) = _pair(stride, kernel_size), _pair(padding, 0)
    if kh * kw > 64:
        raise NotLowerable("pooling with a large window")
    return kh, kw, dh, dw, sh, sw, ph, pw


def _once_if_costly(lw, v: Value) -> Value:
    """`v`, stored first where an element takes more than POOL_RECOMPUTE_OPS ops a window
    position: each element is read by several windows (about kh*kw/(sh*sw))."""
    return lw.realize(v) if not v.is_strided() and _window_ops(v) > POOL_RECOMPUTE_OPS else v


def _pair(v, default) -> tuple[int, int]:
    v = default if v is None or (isinstance(v, (list, tuple)) and not v) else v
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (int(v[0]), int(v[-1]))


@register(aten.max_pool2d_with_indices.default)
def lower_max_pool2d(lw, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Each output element scans its window as eager's kernel does (rows, then columns; a value
    replaces the running max when greater or NaN, the window's first in-range element starts
    it), so values and indices match eager's, ties and NaN included. Positions outside the input
    (padding, ceil_mode) load nothing. A pointwise value: it fuses with what reads it, and with
    what produces x where that is cheap to compute again in each window position (a batch norm
    and ReLU: what depends only on the channel is computed once per output element); a costlier
    x is stored first, as each element is read by several windows."""
    values_meta, indices_meta = out_meta(node)
    if x.ndim != 4:
        raise NotLowerable("max_pool2d of an unbatched input")
    kh, kw, dh, dw, sh, sw, ph, pw = _window(kernel_size, stride, padding, dilation)
    x = _once_if_costly(lw, x)
    height, width = x.sizes[2], x.sizes[3]
    sizes = tuple(values_meta.shape)

    def scan(idx, with_index: bool):
        best = const(float("-inf"), x.dtype)
        best_at = const(-1, torch.int64)
        for i in range(kh):
            h = idx[2] * sh + (i * dh - ph)
            for j in range(kw):
                w = idx[3] * sw + (j * dw - pw)
                inside = binary(Op.AND, _in_range(h, 0, height), _in_range(w, 0, width))
                v = _masked(x, (idx[0], idx[1], h, w), inside, x.dtype, (2, 3))
                better = binary(Op.OR, binary(Op.GT, v, best), binary(Op.NE, v, v))
                if with_index:
                    better = binary(Op.OR, better, binary(Op.EQ, best_at, const(-1, torch.int64)))
                # (the values alone need not know the first element: a -inf there leaves -inf)
                take = binary(Op.AND, inside, better)
                best = where(take, v, best)
                if with_index:
                    best_at = where(take, index_expr(h * width + w), best_at)
        return best if not with_index else best_at
    values = lazy(sizes, values_meta.dtype, values_meta.device, lambda idx: scan(idx, False))
    indices = lazy(sizes, indices_meta.dtype, indices_meta.device, lambda idx: scan(idx, True))
    return values, indices



@register(aten.avg_pool2d.default)
def lower_avg_pool2d(lw, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
    """Each output element sums its window as eager's kernel does (in fp32 for 16-bit inputs,
    rows then columns, positions outside the input skipped) and divides by eager's divisor
    (`_avg_divisor`), IEEE-rounded. A pointwise value, fused like max pooling's (a costly
    producer stored first)."""
    meta = out_meta(node)
    if x.ndim != 4:
        raise NotLowerable("avg_pool2d of an unbatched input")
    window = _window(kernel_size, stride, padding, 1)
    kh, kw, _, _, sh, sw, ph, pw = window
    x = _once_if_costly(lw, x)
    height, width = x.sizes[2], x.sizes[3]
    acc = compute_dtype(meta.dtype)

    def pooled(idx):
        total = const(0.0, acc)
        for i in range(kh):
            h = idx[2] * sh + (i - ph)
            for j in range(kw):
                w = idx[3] * sw + (j - pw)
                inside = binary(Op.AND, _in_range(h, 0, height), _in_range(w, 0, width))
                v = _masked(x, (idx[0], idx[1], h, w), inside, acc, (2, 3))
                total = binary(Op.ADD, total, where(inside, v, const(0.0, acc)))
        divisor = _avg_divisor(idx[2], idx[3], window, (height, width), ceil_mode, count_include_pad,
                               divisor_override, acc)
        return cast(binary(Op.DIV, total, divisor), meta.dtype)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, pooled)


def _avg_divisor(oh, ow, window, plane, ceil_mode, count_include_pad, divisor_override, acc) -> Expr:
    """Eager's divisor of average-pooling window (oh, ow): `divisor_override`, else the window's
    positions inside the padded input (`count_include_pad`) or inside the input itself, along
    each dim; kh * kw where padding and ceil_mode leave every window inside the input."""
    kh, kw, _, _, sh, sw, ph, pw = window
    if divisor_override:
        return const(float(divisor_override), acc)
    if ph == pw == 0 and not ceil_mode:
        return const(float(kh * kw), acc)

    def extent(o, step, pad, k, size):
        lo = binary(Op.SUB, binary(Op.MUL, index_expr(o), const(step, torch.int64)), const(pad, torch.int64))
        hi = binary(Op.MIN, binary(Op.ADD, lo, const(k, torch.int64)), const(size + pad, torch.int64))
        if count_include_pad:
            return binary(Op.SUB, hi, lo)
        return binary(Op.SUB, binary(Op.MIN, hi, const(size, torch.int64)), binary(Op.MAX, lo, const(0, torch.int64)))
    height, width = plane
    return cast(binary(Op.MUL, extent(oh, sh, ph, kh, height), extent(ow, sw, pw, kw, width)), acc)


@register(aten.max_pool2d_with_indices_backward.default)
def lower_max_pool2d_backward(lw, node, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """The input's gradient, gathered (`_window_gradient`): each input element sums the gradients
    of the windows whose max it was (their index equals its position)."""
    if x.ndim != 4 or grad.ndim != 4:
        raise NotLowerable("max_pool2d backward of an unbatched input")
    window = _window(kernel_size, stride, padding, dilation)
    grad = _once_if_costly(lw, grad)
    acc = compute_dtype(out_meta(node).dtype)

    def term(at, cond, here):
        chosen = binary(Op.EQ, _masked(indices, at, cond, torch.int64, (2, 3)), here)
        return where(binary(Op.AND, cond, chosen), _masked(grad, at, cond, acc, (2, 3)), const(0, acc))
    return _window_gradient(lw, node, x, grad, window, term)


@register(aten.avg_pool2d_backward.default)
def lower_avg_pool2d_backward(lw, node, grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                              divisor_override):
    """The input's gradient, gathered (`_window_gradient`): each input element sums, over the
    windows that contain it, the window's gradient divided by its divisor (the forward's), each
    quotient rounded as eager's kernel rounds it, in its order. (Eager's CUDA kernel for a
    channels-last input with padding is wrong in torch before the fix of pytorch#188344: it
    drops the padding from the input's coordinates; ours gives its NCHW kernel's gradients.)"""
    if x.ndim != 4 or grad.ndim != 4:
        raise NotLowerable("avg_pool2d backward of an unbatched input")
    meta = out_meta(node)
    window = _window(kernel_size, stride, padding, 1)
    grad = _once_if_costly(lw, grad)
    acc = compute_dtype(meta.dtype)
    plane = (x.sizes[2], x.sizes[3])

    def term(at, cond, here):
        divisor = _avg_divisor(at[2], at[3], window, plane, ceil_mode, count_include_pad, divisor_override, acc)
        return where(cond, binary(Op.DIV, _masked(grad, at, cond, acc, (2, 3)), divisor), const(0, acc))
    return _window_gradient(lw, node, x, grad, window, term)


def _window_gradient(lw, node, x: Value, grad: Value, window, term) -> Value:
    """A pooling's input gradient, gathered: each input element sums `term(at, cond, here)` over
    the windows that can contain it (`at`: the window's position in grad, `cond`: whether it is a
    window that contains the element, `here`: the element's flat position in its H x W plane),
    in eager's order (window rows, then columns, ascending). Which windows those are depends on
    the element's position modulo the stride, so the gradient is computed over
    (N, C, H/sh, sh, W/sw, sw) (h = q*sh + r: for each residue r the window rows are q +
    constant, an index rewrite) and stored, then viewed as (N, C, H, W), channels-last where x
    is. No atomics; what produces the gradient is computed in the kernel where it is cheap (as
    the forward's producer)."""
    meta = out_meta(node)
    kh, kw, dh, dw, sh, sw, ph, pw = window
    n, c, height, width = x.sizes
    out_h, out_w = grad.sizes[2], grad.sizes[3]
    hq, wq = -(-height // sh), -(-width // sw)
    acc = compute_dtype(meta.dtype)

    def loader(idx):
        b, ch, q, r, p, t = idx
        here = index_expr((q * sh + r) * width + (p * sw + t))
        total = const(0, acc)
        for i in reversed(range(kh)):                 # window rows ascending
            r0 = (i * dh - ph) % sh                   # the residue whose element window row i reaches
            oh = q + (r0 + ph - i * dh) // sh
            for j in reversed(range(kw)):
                t0 = (j * dw - pw) % sw
                ow = p + (t0 + pw - j * dw) // sw
                cond = binary(Op.AND, binary(Op.AND, binary(Op.EQ, index_expr(r), const(r0, torch.int64)),
                                                binary(Op.EQ, index_expr(t), const(t0, torch.int64))),
                              binary(Op.AND, _in_range(oh, 0, out_h), _in_range(ow, 0, out_w)))
                total = binary(Op.ADD, total, term((b, ch, oh, ow), cond, here))
        return cast(total, meta.dtype)
    split = (n, c, hq, sh, wq, sw)
    value = lazy(split, meta.dtype, meta.device, loader)
    if sh == 1 and sw == 1:
        return V.view_by_remap(value, x.sizes, lambda idx: (idx[0], idx[1], idx[2], Affine(0), idx[3], Affine(0)))
    strides = _channels_last_split(split) if _stored_channels_last(x) else contiguous_strides(split)
    whole = V.reshape(lw.realize(value, strides), (n, c, hq * sh, wq * sw), lw.realize_for_view)
    return V.slice_dim(V.slice_dim(whole, 2, 0, height, 1), 3, 0, width, 1)


def _stored_channels_last(x: Value) -> bool:
    return x.is_strided() and layouts.only_channels_last(x.sizes, x.layout[1])


def _channels_last_split(sizes) -> tuple[int, ...]:
    """Strides of (N, C, Hq, sh, Wq, sw) whose view as (N, C, Hq*sh, Wq*sw) is channels-last."""
    n, c, hq, sh, wq, sw = sizes
    return (c * sw * wq * sh * hq, 1, c * sw * wq * sh, c * sw * wq, c * sw, c)


@register(aten.embedding.default)
def lower_embedding(lw, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """`weight[indices]`: each output element gathered from the row its index names, inside the
    kernel that reads it (token + position embeddings and their layer norm: one kernel), as
    Inductor does. An index outside the table (eager raises) reads NaN: the load is masked,
    never outside the tensor. `padding_idx` and the rest concern the backward only."""
    meta = out_meta(node)
    if not (isinstance(weight, Value) and isinstance(indices, Value)) or weight.ndim != 2 \
            or not weight.dtype.is_floating_point or indices.dtype not in (torch.int32, torch.int64):
        raise NotLowerable("an embedding of this kind")
    rows = weight.sizes[0]
    lead = indices.ndim

    def loader(idx):
        return _read_at(weight, (None, idx[lead]), {0: indices.load(tuple(idx[:lead]))}, weight.dtype)
    return lazy(tuple(meta.shape), weight.dtype, weight.device, loader)


#: the integer dtypes a gather reads (and bool): an index outside gives 0 (False), as they have no NaN
GATHER_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def _gathers(dtype: torch.dtype) -> bool:
    """Does a gather read tensors of `dtype` (floats, GATHER_INT_DTYPES)?"""
    return dtype.is_floating_point or dtype in GATHER_INT_DTYPES


def _outside(dtype: torch.dtype) -> Expr:
    """What a gather gives where an index is outside the tensor (eager raises): NaN, or 0 for
    the integer and bool dtypes, which have none."""
    return const(float("nan") if dtype.is_floating_point else 0, dtype)


def _read_at(x: Value, idx: tuple, positions: dict, dtype: torch.dtype, wrap: bool = False) -> Expr:
    """x[idx], each position `d` of `positions` (None in `idx`) being the loaded integer
    `positions[d]`: a gather load, masked to `0 <= index < x.sizes[d]`; NaN (0 for integers and
    bools: `_outside`) where an index is outside (eager raises). `wrap`: negative indices count
    from the end (advanced indexing)."""
    names = {d: f"_pos{next(_fresh)}" for d in positions}
    at = tuple(Affine.var(names[k]) if k in positions else v for k, v in enumerate(idx))
    value, ok = cast(x.load(at), dtype), None
    for d, index in positions.items():
        size, i = x.sizes[d], cast(index, torch.int64)
        if wrap:
            i = from_end(i, size)
        in_range = binary(Op.AND, binary(Op.GE, i, const(0, torch.int64)), binary(Op.LT, i, const(size, torch.int64)))
        value = gather_var([value], names[d], size, i, in_range)[0]
        ok = in_range if ok is None else binary(Op.AND, ok, in_range)
    return where(ok, value, _outside(dtype))


@register(aten.gather.default)
def lower_gather(lw, node, x, dim, index, *, sparse_grad=False):
    """`torch.gather`: each output element read from the position its index names along `dim`,
    inside the kernel that reads it (a gather load; `x` itself may be computed on the way), as
    the embedding (`_read_at`); of float, integer and bool tensors."""
    meta = out_meta(node)
    if not (isinstance(x, Value) and isinstance(index, Value)) or not _gathers(x.dtype) \
            or index.dtype not in (torch.int32, torch.int64) or index.ndim != x.ndim or x.ndim == 0:
        raise NotLowerable("a gather of this kind")
    dim = dim % x.ndim

    def loader(idx):
        return _read_at(x, tuple(idx), {dim: index.load(tuple(idx))}, meta.dtype)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, loader)


def _index_operands(x, index, meta, what: str):
    if not (isinstance(x, Value) and isinstance(index, Value)) or not _gathers(meta.dtype) \
            or index.dtype not in (torch.int32, torch.int64) or x.ndim == 0:
        raise NotLowerable(f"{what} of this kind (float, integer or bool values, int32/int64 indices)")


@register(aten.index_select.default)
def lower_index_select(lw, node, x, dim, index):
    """`x.index_select(dim, index)`: the rows (along `dim`) a 1-D index names, read where they are
    used (a gather load, as `gather`); NaN (0 for integers and bools) for an index outside (eager
    raises)."""
    meta = out_meta(node)
    _index_operands(x, index, meta, "an index_select")
    if index.ndim > 1:
        raise NotLowerable("an index_select with a multi-dim index")
    dim = dim % x.ndim

    def loader(idx):
        position = index.load((idx[dim],) if index.ndim else ())
        return _read_at(x, tuple(None if k == dim else v for k, v in enumerate(idx)), {dim: position}, meta.dtype)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, loader)


@register(aten.index.Tensor, aten._unsafe_index.Tensor)
def lower_index(lw, node, x, indices):
    """`x[i]`, `x[:, i]`, `x[i, j]`, `x[torch.arange(b), last]`: advanced indexing by integer
    tensors, read where the result is used (one gather load however many dims are indexed);
    `_unsafe_index` (what torch's decompositions of upsampling emit in training graphs) alike.
    Python's rule for where the indexed dims go: the index tensors broadcast together, their
    shape replaces the indexed dims where those are adjacent, else comes first. Negative
    indices count from the end; an index outside reads NaN, 0 in integer and bool tensors (eager
    raises). Boolean masks (a result whose size depends on the data) stay aten calls."""
    meta = out_meta(node)
    indices = list(indices) + [None] * (x.ndim - len(indices)) if isinstance(x, Value) else []
    tensors = {d: t for d, t in enumerate(indices) if t is not None}
    if not tensors or len(indices) > x.ndim:
        raise NotLowerable("an index of this kind")
    for t in tensors.values():
        _index_operands(x, t, meta, "an index")
    dims = sorted(tensors)
    try:
        shape = tuple(torch.broadcast_shapes(*(t.sizes for t in tensors.values())))
        loaded = {d: broadcast_to(t, shape) for d, t in tensors.items()}
    except (RuntimeError, ValueError):
        raise NotLowerable("index tensors that do not broadcast together") from None
    start = dims[0] if dims == list(range(dims[0], dims[-1] + 1)) else 0
    rest = [d for d in range(x.ndim) if d not in tensors]
    if tuple(meta.shape) != tuple(x.sizes[d] for d in rest[:start]) + shape + tuple(x.sizes[d] for d in rest[start:]):
        raise NotLowerable("an index whose result shape is not Python's rule")      # never expected

    def loader(idx):
        at = [None] * x.ndim
        for d, v in zip(rest, tuple(idx[:start]) + tuple(idx[start + len(shape):])):
            at[d] = v
        here = tuple(idx[start:start + len(shape)])
        return _read_at(x, tuple(at), {d: t.load(here) for d, t in loaded.items()}, meta.dtype, wrap=True)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, loader)
