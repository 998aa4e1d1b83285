"""Tensors during lowering: `Value` = sizes + dtype + how to read one element.

A value is either *lazy* (a loader closure that builds an `Expr` for a given index, so pointwise
ops inline into whoever reads them) or *strided* (a view of a materialized `Buffer`, described by
strides and an offset). View ops never copy: `view_by_remap` rewrites the index of a lazy value,
or the strides of a strided one. Only a reshape that merges dims of a lazy value needs it
materialized first (the caller does that: see `reshape`).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from .ir import Affine, Buffer, BufferArg, Expr, domain_vars, load, strided_index

Index = tuple[Affine, ...]


class Value:
    """A tensor of `sizes`/`dtype`/`device`; `load(index)` gives the element's expression."""

    def __init__(self, sizes: Sequence[int], dtype: torch.dtype, device: torch.device,
                 loader: Optional[Callable[[Index], Expr]] = None, *,
                 layout: Optional[tuple[Buffer, tuple[int, ...], int]] = None):
        self.sizes = tuple(int(s) for s in sizes)
        self.dtype = dtype
        self.device = device
        self.layout = layout            # (buffer, strides, offset) when strided
        self._loader = loader
        self._memo: dict[Index, Expr] = {}
        if layout is None and loader is None:
            raise ValueError("a Value needs a loader or a layout")

    @staticmethod
    def of_buffer(buffer: Buffer, sizes=None, strides=None, offset: int = 0) -> "Value":
        sizes = buffer.sizes if sizes is None else tuple(sizes)
        strides = buffer.strides if strides is None else tuple(strides)
        return Value(sizes, buffer.dtype, buffer.device, layout=(buffer, tuple(strides), offset))

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def is_strided(self) -> bool:
        return self.layout is not None

    def load(self, index: Index) -> Expr:
        """The expression for element `index` (memoized: equal indices give the same Expr)."""
        found = self._memo.get(index)
        if found is None:
            if self.layout is not None:
                buffer, strides, offset = self.layout
                found = load(buffer.name, strided_index(index, strides, offset), buffer.dtype)
            else:
                found = self._loader(index)
            self._memo[index] = found
        return found

    def buffer_arg(self) -> BufferArg:
        buffer, strides, offset = self.layout
        return BufferArg(buffer, self.sizes, strides, offset)

    def __repr__(self) -> str:
        kind = f"view of {self.layout[0].name}" if self.layout else "lazy"
        return f"Value({list(self.sizes)}, {self.dtype}, {kind})"


def lazy(sizes, dtype, device, loader: Callable[[Index], Expr]) -> Value:
    return Value(sizes, dtype, device, loader)


# ---------------------------------------------------------------------------------------------
# views as index rewrites
# ---------------------------------------------------------------------------------------------

def view_by_remap(value: Value, sizes: Sequence[int], remap: Callable[[Index], Index]) -> Value:
    """A view whose element `i` is `value[remap(i)]`; `remap` must be affine in `i`."""
    sizes = tuple(sizes)
    if value.layout is not None:
        buffer, strides, offset = value.layout
        flat = strided_index(remap(domain_vars(len(sizes), "_p")), strides, offset)
        new_strides = tuple(flat.coeff(f"_p{k}") for k in range(len(sizes)))
        return Value.of_buffer(buffer, sizes, new_strides, flat.const)
    return lazy(sizes, value.dtype, value.device, lambda idx: value.load(remap(idx)))


def broadcast_to(value: Value, sizes: Sequence[int]) -> Value:
    """Numpy broadcasting: align right, size-1 dims read index 0."""
    sizes = tuple(sizes)
    if value.sizes == sizes:
        return value
    lead = len(sizes) - value.ndim
    if lead < 0:
        raise ValueError(f"cannot broadcast {value.sizes} to {sizes}")

    def remap(idx: Index) -> Index:
        return tuple(Affine(0) if value.sizes[k] == 1 and sizes[lead + k] != 1 else idx[lead + k]
                     for k in range(value.ndim))
    return view_by_remap(value, sizes, remap)


def permute(value: Value, dims: Sequence[int]) -> Value:
    dims = [d % max(value.ndim, 1) for d in dims]
    sizes = [value.sizes[d] for d in dims]

    def remap(idx: Index) -> Index:
        out = [None] * value.ndim
        for new_pos, old in enumerate(dims):
            out[old] = idx[new_pos]
        return tuple(out)
    return view_by_remap(value, sizes, remap)


def slice_dim(value: Value, dim: int, start: int, end: int, step: int) -> Value:
    size = value.sizes[dim]
    start = _clamp_index(start, size, 0)
    end = _clamp_index(end, size, size)
    length = max(0, (end - start + step - 1) // step)
    sizes = list(value.sizes)
    sizes[dim] = length

    def remap(idx: Index) -> Index:
        return idx[:dim] + (idx[dim] * step + start,) + idx[dim + 1:]
    return view_by_remap(value, sizes, remap)


def _clamp_index(i, size: int, default: int) -> int:
    if i is None:
        return default
    if i < 0:
        i += size
    return min(max(i, 0), size)


def select(value: Value, dim: int, index: int) -> Value:
    if index < 0:
        index += value.sizes[dim]
    sizes = value.sizes[:dim] + value.sizes[dim + 1:]

    def remap(idx: Index) -> Index:
        return idx[:dim] + (Affine(index),) + idx[dim:]
    return view_by_remap(value, sizes, remap)


def unsqueeze(value: Value, dim: int) -> Value:
    sizes = value.sizes[:dim] + (1,) + value.sizes[dim:]
    return view_by_remap(value, sizes, lambda idx: idx[:dim] + idx[dim + 1:])


def squeeze(value: Value, dims: Sequence[int]) -> Value:
    drop = {d for d in dims if value.sizes[d] == 1}
    sizes = tuple(s for k, s in enumerate(value.sizes) if k not in drop)

    def remap(idx: Index) -> Index:
        it = iter(idx)
        return tuple(Affine(0) if k in drop else next(it) for k in range(value.ndim))
    return view_by_remap(value, sizes, remap)


def split_remap(old: Sequence[int], new: Sequence[int]) -> Optional[Callable[[Index], Index]]:
    """Index remap for a reshape that only splits dims (or adds/drops size-1 dims); None if the
    reshape merges dims (that needs div/mod, which our affine indices do not express)."""
    old_nz = [k for k, s in enumerate(old) if s != 1]
    new_nz = [k for k, s in enumerate(new) if s != 1]
    groups: list[tuple[int, list[int]]] = []      # (old dim, new dims it splits into)
    j = 0
    for k in old_nz:
        members, prod = [], 1
        while prod < old[k] and j < len(new_nz):
            members.append(new_nz[j])
            prod *= new[new_nz[j]]
            j += 1
        if prod != old[k]:
            return None
        groups.append((k, members))
    if j != len(new_nz):
        return None

    def remap(idx: Index) -> Index:
        out = [Affine(0)] * len(old)
        for k, members in groups:
            acc, stride = Affine(0), 1
            for m in reversed(members):
                acc = acc + idx[m] * stride
                stride *= new[m]
            out[k] = acc
        return tuple(out)
    return remap


def compute_view_strides(old_sizes, old_strides, new_sizes) -> Optional[tuple[int, ...]]:
    """Strides for viewing a strided tensor with new sizes, or None (ATen's computeStride)."""
    numel = 1
    for s in old_sizes:
        numel *= s
    if numel == 0 or not old_sizes:
        from .ir import contiguous_strides
        return contiguous_strides(tuple(new_sizes))
    new_strides = [0] * len(new_sizes)
    view_d = len(new_sizes) - 1
    chunk_base = old_strides[-1]
    tensor_numel, view_numel = 1, 1
    for d in range(len(old_sizes) - 1, -1, -1):
        tensor_numel *= old_sizes[d]
        if d == 0 or (old_sizes[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_sizes[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_sizes[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = old_strides[d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def reshape(value: Value, sizes: Sequence[int], realize: Callable[[Value, tuple], Value]) -> Value:
    """`view`/`reshape`: an index rewrite when possible, else materialize (in a layout that
    `realize(value, sizes)` makes viewable with `sizes`) then view."""
    sizes = tuple(sizes)
    if sizes == value.sizes:
        return value
    if value.layout is not None:
        buffer, strides, offset = value.layout
        new_strides = compute_view_strides(value.sizes, strides, sizes)
        if new_strides is not None:
            return Value.of_buffer(buffer, sizes, new_strides, offset)
    else:
        remap = split_remap(value.sizes, sizes)
        if remap is not None:
            return view_by_remap(value, sizes, remap)
    dense = realize(value, sizes)
    new_strides = compute_view_strides(dense.sizes, dense.layout[1], sizes)
    return Value.of_buffer(dense.layout[0], sizes, new_strides, dense.layout[2])
