"""Lowerings of `F.interpolate`'s nearest and linear modes: each output element read from the
input positions its coordinates map to, where it is used (a gather, as `lower_views._read_at`),
so an upsampling fuses with what computes its input and with what reads its result (a U-Net's or
an FPN's upsample-then-add is one kernel) instead of being a library call between two kernels.

Source positions follow eager's kernels (ATen's UpSample.h): the scale is a float32
`1 / scale_factor` where a factor was given, else `input_size / output_size` in float32;
nearest reads `min(floor(i * scale), size - 1)` (the 2-d kernels `i` where the sizes are equal, and
on the CPU `i // 2` where the output is twice the input, whatever factor was given; not the 1-d
and 3-d ones), nearest-exact `floor((i + 0.5) * scale)`
computed in double as C++ promotes it, so the positions, and so the values, are eager's exactly.
Linear modes weight the two neighbours of `scale * (i + 0.5) - 0.5` (one FMA, as the compilers
contract it: the positions are eager's; clamped at 0), or of `scale * i` with `align_corners`,
and blend dim by dim, the last dim innermost, in float32 (double for double tensors), rounding
once to the result's dtype: eager's order, but not its contractions of the blend, so float32
results may differ from eager's in the last bits (and CPU eager rounds half-precision tensors
after each dim).
Bicubic and antialiased modes stay aten calls.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import layouts
from .ir import Op, cast, const
from .lower_views import _gathers, _read_at
from .lowerings import NotLowerable, binary, index_expr, out_meta, register, unary, where
from .values import Value, lazy

aten = torch.ops.aten


def _float32(value: float) -> float:
    """`value` rounded to float32 (as a C++ `static_cast<float>`), as a Python float."""
    return torch.tensor(value, dtype=torch.float32).item()


def _scale(in_size: int, out_size: int, factor: Optional[float], align_corners: bool = False,
           acc: torch.dtype = torch.float32) -> float:
    """ATen's `area_pixel_compute_scale` in `acc` (float32, or double for double tensors): input
    positions per output position."""
    if align_corners:
        return _divide(in_size - 1, out_size - 1, acc) if out_size > 1 else 0.0
    if factor is not None and factor > 0:
        return 1.0 / factor if acc is torch.float64 else _float32(1.0 / factor)
    return _divide(in_size, out_size, acc)


def _divide(a: int, b: int, acc: torch.dtype) -> float:
    """`(acc)a / b` as C++ computes it: a division of the two converted sizes in `acc`."""
    return (torch.tensor(float(a), dtype=acc) / torch.tensor(float(b), dtype=acc)).item()


def _operands(node, x, output_size, factors: Sequence, what: str, dtype_ok):
    meta = out_meta(node)
    spatial = len(output_size)
    if not isinstance(x, Value) or not dtype_ok(meta.dtype) or x.ndim != spatial + 2 \
            or any(not isinstance(s, int) for s in tuple(output_size) + tuple(x.sizes)):
        raise NotLowerable(f"{what} of this kind (static sizes, {meta.dtype} values)")
    factors = list(factors) + [None] * (spatial - len(factors))
    return meta, spatial, factors


def _shortcut(node, x, output_size, factors, d: int, known: dict, acc=torch.float32) -> bool:
    """Whether dim d reads by a size shortcut (`i` where the output is as large as the input,
    `i // 2` where it is twice the input) instead of the scale factor given, where that factor's
    scale differs from the sizes' one. `known`: per device type, the size ratios (1, 2) whose dims
    eager's kernels read by their sizes there (ATen's CPU kernels checked under the interpreter,
    CUDA's measured on an H100); on another device such a dim stays an aten call."""
    lead = x.ndim - len(output_size)
    size, out = x.sizes[lead + d], output_size[d]
    ratio = out // size if out % size == 0 else None
    if ratio not in (1, 2) or factors[d] is None or \
            _scale(size, out, factors[d], acc=acc) == _scale(size, out, None, acc=acc):
        return False         # no shortcut, or it reads what the scale does
    device = out_meta(node).device.type
    if device not in known:
        raise NotLowerable("an upsampling whose scale factor disagrees with its sizes")
    return ratio in known[device]


def _in_input_layout(lw, node) -> None:
    """ATen's 2-d upsampling kernels store a channels-last image's result channels-last, as its
    input, on every device (the CUDA meta function of the linear ones says contiguous)."""
    src = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if isinstance(src, torch.Tensor) and layouts.only_channels_last(src.shape, src.stride()):
        lw.note_eager_layout(layouts.channels_last_strides(tuple(out_meta(node).shape)))


def _nearest(node, x, output_size, factors, exact: bool):
    meta, spatial, factors = _operands(node, x, output_size, factors, "a nearest upsampling", _gathers)
    lead = x.ndim - spatial
    scales = [_scale(x.sizes[lead + d], output_size[d], factors[d]) for d in range(spatial)]
    # the 2-d kernels' shortcuts (CPU: equal and twice the size; CUDA: equal); the 1-d and 3-d
    # ones follow the factor
    known = {"cpu": (1, 2), "cuda": (1,)} if spatial == 2 else {"cpu": (), "cuda": ()}
    shortcuts = [not exact and _shortcut(node, x, output_size, factors, d, known) for d in range(spatial)]

    def source(d: int, i) -> object:
        size = x.sizes[lead + d]
        if shortcuts[d]:
            i = index_expr(i)
            return i if output_size[d] == size else binary(Op.IDIV, i, const(2, torch.int64))
        if exact:       # floorf((dst_index + 0.5) * scale): the product in double, then to float
            at = binary(Op.MUL, binary(Op.ADD, cast(index_expr(i), torch.float64), const(0.5, torch.float64)),
                        const(scales[d], torch.float64))
            at = cast(at, torch.float32)
        else:           # floorf(dst_index * scale) in float
            at = binary(Op.MUL, cast(index_expr(i), torch.float32), const(scales[d], torch.float32))
        position = cast(unary(Op.FLOOR, at), torch.int64)
        return binary(Op.MIN, position, const(size - 1, torch.int64))

    def loader(idx):
        at = tuple(idx[:lead]) + (None,) * spatial
        return _read_at(x, at, {lead + d: source(d, idx[lead + d]) for d in range(spatial)}, meta.dtype)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, loader)


@register(aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default)
def lower_upsample_nearest(lw, node, x, output_size, *scales):
    _in_input_layout(lw, node)
    return _nearest(node, x, output_size, scales, exact=False)


@register(aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact2d.default,
          aten._upsample_nearest_exact3d.default)
def lower_upsample_nearest_exact(lw, node, x, output_size, *scales):
    _in_input_layout(lw, node)
    return _nearest(node, x, output_size, scales, exact=True)


def _fma(a, b, c):
    """a * b + c rounded once, as the compilers of ATen's kernels contract it: for float32 in
    double (the product of two floats is exact there, and so is the sum at these magnitudes)."""
    if a.dtype is not torch.float32:
        return binary(Op.ADD, binary(Op.MUL, a, b), c)
    wide = torch.float64
    return cast(binary(Op.ADD, binary(Op.MUL, cast(a, wide), cast(b, wide)), cast(c, wide)), torch.float32)


@register(aten.upsample_linear1d.default, aten.upsample_bilinear2d.default, aten.upsample_trilinear3d.default)
def lower_upsample_linear(lw, node, x, output_size, align_corners, *scales):
    _in_input_layout(lw, node)
    meta, spatial, factors = _operands(node, x, output_size, scales, "a linear upsampling",
                                       lambda dtype: dtype.is_floating_point)
    lead = x.ndim - spatial
    acc = torch.float64 if meta.dtype is torch.float64 else torch.float32
    scale = [_scale(x.sizes[lead + d], output_size[d], factors[d], align_corners, acc) for d in range(spatial)]
    # a dim as large as the input is read as it is (the CPU kernel's rule, whatever the factor;
    # where all are, a copy on every device), which scale 1 reads as well
    same = [output_size[d] == x.sizes[lead + d] for d in range(spatial)]
    copied = [same[d] and (all(same) or align_corners or _shortcut(node, x, output_size, factors, d, {"cpu": (1,)}, acc))
              for d in range(spatial)]

    def neighbours(d: int, i):
        """(first index, second index, weight of the first, weight of the second) along dim d;
        (index, None, None, None) where the dim is read as it is."""
        size = x.sizes[lead + d]
        if copied[d]:
            return index_expr(i), None, None, None
        dst = cast(index_expr(i), acc)
        if align_corners:
            real = binary(Op.MUL, const(scale[d], acc), dst)
        else:
            real = _fma(const(scale[d], acc), binary(Op.ADD, dst, const(0.5, acc)), const(-0.5, acc))
            real = where(binary(Op.LT, real, const(0.0, acc)), const(0.0, acc), real)
        first = cast(real, torch.int64)                         # truncation: real >= 0
        first = binary(Op.MIN, first, const(size - 1, torch.int64))
        second = binary(Op.MIN, binary(Op.ADD, first, const(1, torch.int64)), const(size - 1, torch.int64))
        w1 = binary(Op.SUB, real, cast(first, acc))
        w1 = binary(Op.MIN, binary(Op.MAX, w1, const(0.0, acc)), const(1.0, acc))
        return first, second, binary(Op.SUB, const(1.0, acc), w1), w1

    def loader(idx):
        per_dim = [neighbours(d, idx[lead + d]) for d in range(spatial)]
        at = tuple(idx[:lead]) + (None,) * spatial

        def blend(d: int, chosen: tuple):
            """Dims < d fixed to `chosen` corners; dims >= d blended, the first outermost."""
            if d == spatial:
                positions = {lead + k: per_dim[k][c] for k, c in enumerate(chosen)}
                return cast(_read_at(x, at, positions, meta.dtype), acc)
            _, second, w0, w1 = per_dim[d]
            if second is None:
                return blend(d + 1, chosen + (0,))
            low, high = blend(d + 1, chosen + (0,)), blend(d + 1, chosen + (1,))
            return binary(Op.ADD, binary(Op.MUL, w0, low), binary(Op.MUL, w1, high))
        return cast(blend(0, ()), meta.dtype)
    return lazy(tuple(meta.shape), meta.dtype, meta.device, loader)
