"""Memory layouts the extern libraries are fast on: which strides a buffer gets for cuBLAS and cuDNN.

* Matmuls (`MATMUL_OPERANDS`): cuBLAS's fast kernels need every matrix's leading dimension (the
  stride that is not 1) and base address 16-byte aligned, and also the extent of the dim that is
  contiguous (in an operand or the row-major result) a multiple of 16 bytes. A `[4096, 50257]`
  bf16 result (GPT-2's LM head) has 50257 contiguous elements per row, and cuBLAS falls back to an
  align-1 kernel ~7x slower. So:
  - a large matrix with misaligned rows gets rows padded to an aligned pitch (`padded_strides`):
    our kernels store it in a buffer that spans the pad columns and write zeros there, a graph
    input is copied into such a buffer;
  - a matmul result with misaligned rows that leaves the graph as it is (eager's strides, so a
    padded buffer would be copied out) is computed in place by `row_class_mm`: its rows fall in
    a few classes whose start addresses are aligned at a shifted column, each class one matrix
    with an aligned pitch, all of them one batched matmul; the few columns at the edges that no
    class covers come from one small matmul (GPT-2's logits: 2.3x faster than padding + copy);
  - a matmul whose M, K or N is contiguous somewhere and misaligned runs on that dim rounded up
    (`matmul_padding`, Inductor's pad_mm): operands padded with zeros (a buffer of ours already
    zero-padded so is read as it is, anything else is copied by a kernel, on every call), the
    result computed into a buffer of the padded sizes (`aten.mm.out`) of which the graph uses the
    leading part. Pad rows and columns of a result are never read (they may hold anything).
* Convolutions: cuDNN's fast kernels are NHWC. In a graph with convolutions, 4-d values our kernels
  store are channels-last (`channels_last_strides`); a weight that is a graph input is copied
  channels-last by a kernel on each call (a copy kept across calls would go stale under a write
  through `weight.data`, which bypasses the version counter).

Graph outputs keep eager's strides (graph_lowering copies where a layout chosen here differs).
All of this is on where `enabled` says (CUDA; the setting `extern_layouts` forces it on the CPU so
that tests exercise it under the interpreter).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import settings
from .ir import contiguous_strides

aten = torch.ops.aten

#: cuBLAS's vectorized kernels want leading dimensions and base pointers aligned to this
ALIGN_BYTES = 16
#: matrices with fewer elements are left alone (a copy or padding would not pay for itself)
PAD_MIN_NUMEL = 1 << 20

#: extern matmuls -> argument positions of their matrix operands (addmm's bias is not one)
MATMUL_OPERANDS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1),
                   aten.addmm.default: (1, 2), aten.baddbmm.default: (1, 2)}

#: convolutions -> positions of the activations stored NHWC, and of the weight
CHANNELS_LAST_OPERANDS = {aten.convolution.default: (0,), aten.convolution_backward.default: (0, 1)}
WEIGHT_OPERAND = {aten.convolution.default: 1, aten.convolution_backward.default: 2}
CONVOLUTIONS = set(WEIGHT_OPERAND)


def enabled(device: torch.device) -> bool:
    """Are library-friendly layouts chosen for tensors on `device`?"""
    mode = settings.extern_layouts
    return mode == "always" or (mode == "auto" and device.type == "cuda")


def _aligned(n: int, dtype: torch.dtype) -> bool:
    return (n * dtype.itemsize) % ALIGN_BYTES == 0


def _round_up(n: int, dtype: torch.dtype) -> int:
    step = max(1, ALIGN_BYTES // dtype.itemsize)
    return -(-n // step) * step


def _numel(sizes) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def padded_strides(sizes, dtype: torch.dtype) -> tuple[int, ...]:
    """Row-major strides whose row pitch (the stride of dim -2) is rounded up to `ALIGN_BYTES`."""
    strides, acc = [], 1
    for k, s in enumerate(reversed(tuple(sizes))):
        strides.append(acc)
        acc *= max(s, 1)
        if k == 0:
            acc = _round_up(acc, dtype)
    return tuple(reversed(strides))


def misaligned_matrix(sizes, strides, offset: int, dtype: torch.dtype) -> bool:
    """Is this matrix (its last two dims; leading dims are a batch) one cuBLAS runs slowly, and
    large enough to be worth a padded layout? Vectors (a dim of 1) and small matrices are not."""
    if len(sizes) < 2 or sizes[-1] <= 1 or sizes[-2] <= 1 or _numel(sizes) < PAD_MIN_NUMEL:
        return False
    row, col = strides[-2], strides[-1]
    if col == 1:
        leading = row
    elif row == 1:
        leading = col
    else:
        return True                     # no unit stride: aten copies it anyway
    batch_ok = all(_aligned(s, dtype) for n, s in zip(sizes[:-2], strides[:-2]) if n > 1)
    return not (_aligned(leading, dtype) and _aligned(offset, dtype) and batch_ok)


def needs_padding(sizes, dtype: torch.dtype) -> bool:
    """Would a row-major matrix of `sizes` be misaligned (and large)?"""
    from .ir import contiguous_strides
    return misaligned_matrix(sizes, contiguous_strides(tuple(sizes)), 0, dtype)


def matmul_padding(a_sizes, a_strides, b_sizes, b_strides, dtype: torch.dtype) -> tuple[int, int, int]:
    """(M, K, N) of `A [.., M, K] @ B [.., K, N]` with each dim rounded up to `ALIGN_BYTES` where it
    is the contiguous dim (stride 1) of a large matrix among A, B and the row-major result and is
    misaligned; the others as they are. Matrix-vector products (a dim of 1) are left alone."""
    m, k, n = a_sizes[-2], a_sizes[-1], b_sizes[-1]
    if min(m, k, n) <= 1:
        return m, k, n
    batch = tuple(a_sizes[:-2])
    contiguous = set()
    for (rows, cols), (row_stride, col_stride), sizes in (
            (("m", "k"), a_strides[-2:], batch + (m, k)),
            (("k", "n"), b_strides[-2:], batch + (k, n)),
            (("m", "n"), (n, 1), batch + (m, n))):
        if _numel(sizes) < PAD_MIN_NUMEL:
            continue
        if col_stride == 1:
            contiguous.add(cols)
        elif row_stride == 1:
            contiguous.add(rows)
    dims = {"m": m, "k": k, "n": n}
    return tuple(_round_up(dims[d], dtype) if d in contiguous else dims[d] for d in ("m", "k", "n"))


def row_class_plan(m: int, n: int, dtype: torch.dtype) -> Optional[tuple[int, int, int, int]]:
    """How `row_class_mm` computes a row-major [m, n] result whose rows are misaligned: (g, e, w,
    edge), or None where it cannot (n aligned, m not a multiple of g, n too narrow).

    With u elements per ALIGN_BYTES and d = n % u, row i starts at i * d (mod u): rows r, r + g,
    r + 2g, ... (g = u / gcd(d, u)) form class r, and from column r * e (e = -d mod u) on they
    are an aligned matrix of pitch g * n starting at r * (n + e), a multiple of u. Classes
    0..g-1 are one batch (batch stride n + e), each `w` columns wide; every row's columns
    outside its class lie in its first or last `edge` columns."""
    u = ALIGN_BYTES // dtype.itemsize
    d = n % u if u > 1 else 0
    if d == 0:
        return None
    g, e = u // math.gcd(d, u), (-d) % u
    w = u * ((n - (g - 1) * e) // u)
    half = max(1, u // 2)                  # 2 * edge columns: an aligned pitch for the edges' matmul
    edge = -(-max((g - 1) * e, n - w) // half) * half
    if m % g or w <= 0 or 2 * edge >= n:
        return None
    return g, e, w, edge


def row_class_mm(a: torch.Tensor, b: torch.Tensor, g: int, e: int, w: int, edge: int, *, out: torch.Tensor):
    """`out = a @ b` into a row-major `out` [m, n] with misaligned rows (`row_class_plan`), on
    cuBLAS's aligned kernels: `a` row-major and `b` column-major (a transposed weight), both with
    aligned pitches (graph_lowering checks). Three aten calls besides the batched matmul: the
    edge columns of b gathered, their small product, and its copy into out's edges (after the
    batch, whose values it overwrites there with the same dot products)."""
    m, n = out.shape
    k, sa, sb = a.shape[1], a.stride(0), b.stride(1)
    torch.bmm(a.as_strided((g, m // g, k), (sa, g * sa, 1), a.storage_offset()),
              b.as_strided((g, k, w), (e * sb, 1, sb), b.storage_offset()),
              out=out.as_strided((g, m // g, w), (n + e, g * n, 1)))
    edges = torch.mm(a, torch.cat((b[:, :edge], b[:, n - edge:]), 1))
    out.as_strided((m, 2, edge), (n, n - edge, 1)).copy_(edges.view(m, 2, edge))


def channels_last_strides(sizes) -> tuple[int, ...]:
    n, c, h, w = sizes
    return (h * w * c, 1, w * c, c)


def has_convolution(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target in CONVOLUTIONS for n in gm.graph.nodes)


def is_channels_last(sizes, strides) -> bool:
    """Do these strides describe a channels-last layout (size-1 dims do not count)?"""
    expected = channels_last_strides(sizes)
    return all(n == 1 or s == e for n, s, e in zip(sizes, strides, expected))


def only_channels_last(sizes, strides) -> bool:
    """Channels-last strides that are not also the contiguous ones (a 4-d layout; size-1 dims do
    not count: with C or H*W of 1 both are one layout)."""
    if len(sizes) != 4 or not is_channels_last(sizes, strides):
        return False
    return any(n != 1 and s != e for n, s, e in zip(sizes, strides, contiguous_strides(tuple(sizes))))


def dense_strides(meta, sizes) -> Optional[tuple[int, ...]]:
    """`meta`'s strides (an eager result's) if it has `sizes` and they describe a dense,
    non-overlapping layout; else None."""
    if not isinstance(meta, torch.Tensor) or tuple(meta.shape) != tuple(sizes):
        return None
    strides = tuple(meta.stride())
    order = sorted(range(len(sizes)), key=lambda d: (strides[d], sizes[d]))
    expected = 1
    for d in order:
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return None
        expected *= sizes[d]
    return strides
