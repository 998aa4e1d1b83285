"""Lowerings of reductions: sum, mean, amax/amin, any/all, var/var_mean, argmax/argmin and
max/min over a dim (values and indices). Each adds a `ReductionNode` through the `GraphLowering`;
the result is a view of its keep-dim buffer.
Scans (cumsum, cumprod, logcumsumexp) add a `ScanNode`: a kernel of its own holding whole rows, its producers
computed inside it. So do cummax / cummin and sort / argsort / topk, as scans of positions
(ir.POSITION_SCANS): the kernel finds where each result element lies in the row, and the values
are gathered from there where they are used (the row's own elements, bit for bit).

Shapes: a reduction over any dims (innermost, outer, several) is one node; codegen orders the
loops by stride, so the contiguous dim is the one lanes walk. Few long rows (batch-norm
statistics, `x.sum(0)` of a tall tensor) are *split*: a first reduction keeps some of the
reduced positions (many rows, each a chunk), a small second one reduces the partial results.
var/var_mean runs as two passes over the row (mean, then centered squares) where the row stays
in registers; longer rows take one pass of shifted sums (`sum(x - k)`, `sum((x - k)^2)` with `k`
the row's first element, in fp32), so the loop reads the row once.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .codegen import PERSISTENT_MAX_OUTER, persistent_limit
from .ir import Affine, Op, cast, const, domain_vars, loads
from .lower_views import _read_at
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
        result = _split_reduction(lw, x, dims, kind, acc, buffer_dtype)
    if not keepdim:
        result = V.squeeze(result, dims)
    return result


#: split an inner reduction (lanes along the row) with fewer output rows than this and rows at
#: least SPLIT_MIN_ROW long ...
SPLIT_MAX_ROWS = 2048
SPLIT_MIN_ROW = 16384
#: ... into about this many partial rows, each at least SPLIT_MIN_CHUNK long
SPLIT_TARGET_ROWS = 4096
SPLIT_MIN_CHUNK = 2048
#: rows (contiguous outputs) one program of a reduction over an outer dim covers (launch.py's XBLOCK)
OUTER_ROWS_PER_PROGRAM = 64
#: split an outer reduction (lanes across rows: batch-norm statistics of a channels-last tensor)
#: of at least SPLIT_OUTER_MIN_NUMEL elements that makes fewer programs than SPLIT_OUTER_MAX_PROGRAMS
#: into about SPLIT_OUTER_TARGET_PROGRAMS, each chunk at least SPLIT_OUTER_MIN_CHUNK long (a
#: program then still reads 64 rows x the chunk). 512 programs are ~4 per SM of an H100/H200: the
#: sum over dim 0 of 16384x64x256 fp32 made 256 programs at 85% of copy bandwidth, 101% split in
#: two (H200; Inductor 96%)
SPLIT_OUTER_MAX_PROGRAMS = 512
SPLIT_OUTER_MIN_NUMEL = 1 << 16
SPLIT_OUTER_TARGET_PROGRAMS = 512
SPLIT_OUTER_MIN_CHUNK = 64


#: a reduction whose result is used at its input's size within this many ops, over at least
#: this many rows, is not split (`_normalizes`)
NORMALIZE_MAX_DEPTH = 6
NORMALIZE_MIN_ROWS = 256


def reduces_innermost(x: Value, dims: list[int]) -> bool:
    """Does the reduction run along x's memory (is the dim its main operand walks with stride 1
    among `dims`)? Codegen then puts lanes along the rows (an inner reduction), else across them.
    The main operand is the load with the most index terms (codegen's reference too); without
    one, the logical layout decides."""
    index = domain_vars(x.ndim)
    reads = [ld.arg[1] for ld in loads([x.load(index)]) if ld.op is Op.LOAD]
    if reads:
        main = max(reads, key=lambda a: len(a.terms))
        strides = [(abs(main.coeff(v.terms[0][0])), d) for d, v in enumerate(index)
                   if x.sizes[d] > 1 and main.coeff(v.terms[0][0]) != 0]
        if strides:
            return min(strides)[1] in dims
    return dims[-1] == x.ndim - 1


def _split_plan(sizes, dims: list[int], inner: Optional[bool] = None) -> Optional[tuple[list[int], int, int]]:
    """How to split: (reduced dims kept whole by the first pass, the dim split in two or -1, the
    number of pieces it splits into), or None when the reduction is fine as one pass. `inner`:
    whether the reduction runs along memory (`reduces_innermost`; default: along the last dim)."""
    rows = math.prod(s for d, s in enumerate(sizes) if d not in dims)
    length = math.prod(sizes[d] for d in dims)
    if inner is None:
        inner = dims[-1] == len(sizes) - 1
    if inner:
        if rows >= SPLIT_MAX_ROWS or length < SPLIT_MIN_ROW:
            return None
        wanted = min(-(-SPLIT_TARGET_ROWS // rows), length // SPLIT_MIN_CHUNK)
    else:
        programs = -(-rows // OUTER_ROWS_PER_PROGRAM)   # an outer reduction's program takes many rows
        if programs >= SPLIT_OUTER_MAX_PROGRAMS or rows * length < SPLIT_OUTER_MIN_NUMEL:
            return None
        wanted = min(-(-SPLIT_OUTER_TARGET_PROGRAMS // programs), length // SPLIT_OUTER_MIN_CHUNK)
    whole, pieces = [], 1
    for d in dims:
        if pieces >= wanted:
            break
        need = -(-wanted // pieces)
        if sizes[d] <= need:
            whole.append(d)
            pieces *= sizes[d]
            continue
        # the smallest divisor of the dim that gives enough pieces, else the largest one there is
        divisors = [k for k in range(2, sizes[d] // 2 + 1) if sizes[d] % k == 0]
        enough = [k for k in divisors if k >= need]
        if not divisors:
            break
        return whole, d, min(enough) if enough else max(divisors)
    if not whole or len(whole) == len(dims) or pieces < 2:
        return None
    return whole, -1, 1


def _normalizes(node, x: Value, dims: list[int]) -> bool:
    """Does the reduction's result come back to the input's size within a few ops (a
    normalization: group norm's `(x - mean) * rstd`, softmax) over enough rows to fill the GPU?
    Then one pass per row, not a split: the row kernel can compute the normalize as well, while a
    split's second pass cannot, and the normalize would read the input once more."""
    rows = math.prod(s for d, s in enumerate(x.sizes) if d not in dims)
    if node is None or rows < NORMALIZE_MIN_ROWS:
        return False
    numel = x.numel()
    frontier, seen = [node], {node}
    for _ in range(NORMALIZE_MAX_DEPTH):
        frontier = [u for n in frontier for u in n.users if u not in seen and u.op == "call_function"]
        seen.update(frontier)
        for u in frontier:
            val = u.meta.get("val")
            if isinstance(val, torch.Tensor) and val.numel() >= numel:
                return True
    return False


def _plan(lw, x: Value, dims: list[int]) -> Optional[tuple[list[int], int, int]]:
    """`_split_plan` for this reduction of the graph `lw` lowers (None where it `_normalizes`)."""
    plan = _split_plan(x.sizes, dims, reduces_innermost(x, dims))
    if plan is not None and _normalizes(lw.node, x, dims):
        return None
    return plan


def _split_reduction(lw, x: Value, dims: list[int], kind: str, acc: torch.dtype,
                     buffer_dtype: torch.dtype) -> Value:
    """`lw.add_reduction`, in two passes where there are few long rows (see `_split_plan`)."""
    plan = _plan(lw, x, dims)
    if plan is None:
        return lw.add_reduction(x, dims, kind, acc, buffer_dtype)
    whole, d, pieces = plan
    if d >= 0:                                   # dim d -> (pieces, chunk): an index rewrite
        chunk = x.sizes[d] // pieces
        sizes = x.sizes[:d] + (pieces, chunk) + x.sizes[d + 1:]
        x = V.view_by_remap(x, sizes, lambda idx: idx[:d] + (idx[d] * chunk + idx[d + 1],) + idx[d + 2:])
        moved = [k if k < d else k + 1 for k in dims]         # d itself becomes the chunk dim d + 1
        first = [k for k in moved if k not in whole]
        second = whole + [d]
    else:
        first = [k for k in dims if k not in whole]
        second = whole
    partial = lw.add_reduction(x, first, kind, acc, acc)
    result = lw.add_reduction(partial, sorted(second), kind, acc, buffer_dtype)
    return V.squeeze(result, [d + 1]) if d >= 0 else result


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
        raise NotLowerable("max/min of two tensors")       # (max.dim / min.dim: lower_max_dim)
    kind = "max" if name in ("amax", "max") else "min"
    meta = out_meta(node)
    if x.dtype is torch.bool:
        raise NotLowerable("bool max")
    return reduce(lw, x, _reduce_dims(x, dims), kind, keepdim, meta.dtype)


@register(aten.argmax.default, aten.argmin.default)
def lower_argmax(lw, node, x, dim=None, keepdim=False):
    order = "max" if node.target is aten.argmax.default else "min"
    return _pick(lw, x, dim, keepdim, order, with_values=False)[1]


@register(aten.max.dim, aten.min.dim)
def lower_max_dim(lw, node, x, dim, keepdim=False):
    """(values, indices) of the max (min) over one dim."""
    order = "max" if node.target is aten.max.dim else "min"
    return _pick(lw, x, dim, keepdim, order, with_values=True)


def _pick(lw, x: Value, dim: Optional[int], keepdim: bool, order: str,
          with_values: bool) -> tuple[Optional[Value], Value]:
    """(value, int64 index) of the element eager's argmax (argmin) picks along `dim` (None: over
    every dim, the index into the flattened tensor): the first max (min), a row's first NaN where
    it holds one (ir.PICKS). Never split (`_split_reduction`): the second pass would need each
    piece's position too. Bools are picked as int32 0 / 1 (eager's max.dim of bools)."""
    if x.numel() == 0 or x.dtype.is_complex:
        raise NotLowerable("empty or complex argmax / max.dim")
    dims = list(range(x.ndim)) if dim is None else ([dim % x.ndim] if x.ndim else [])
    keep_sizes = tuple(1 if d in dims else s for d, s in enumerate(x.sizes))
    value_dtype = torch.int32 if x.dtype is torch.bool else x.dtype
    if all(x.sizes[d] == 1 for d in dims):         # one element a row: itself, at 0
        index = lazy(keep_sizes, torch.int64, x.device, lambda idx: const(0, torch.int64))
        value = lazy(x.sizes, x.dtype, x.device, x.load) if with_values else None
    else:
        acc = acc_dtype(x.dtype)
        index = lw.add_reduction(x, dims, f"arg{order}", acc, torch.int64)
        value = lw.add_reduction(x, dims, f"arg{order}_value", acc, value_dtype) if with_values else None
        if value is not None and x.dtype is torch.bool:
            picked = value
            value = lazy(keep_sizes, torch.bool, x.device,
                         lambda idx: binary(Op.NE, picked.load(idx), const(0, torch.int32)))
    if not keepdim:
        index = V.squeeze(index, dims)
        value = V.squeeze(value, dims) if value is not None else None
    return value, index


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
    if _row_in_registers(lw, x, dims, n):
        mean, m2 = _two_pass(lw, x, dims, n, acc)
    else:
        mean, m2 = _shifted_one_pass(lw, x, dims, n, acc)
    denom = max(n - (1 if correction is None else correction), 0)
    var = lazy(m2.sizes, out_dtype, x.device,
               lambda idx: cast(binary(Op.DIV, m2.load(idx), const(denom, acc)), out_dtype))
    mean_out = lazy(mean.sizes, out_dtype, x.device, lambda idx: cast(mean.load(idx), out_dtype))
    if not keepdim:
        var, mean_out = V.squeeze(var, dims), V.squeeze(mean_out, dims)
    return var, mean_out


def _row_in_registers(lw, x: Value, dims: list[int], n: int) -> bool:
    """Will codegen keep each row in registers (a persistent kernel)? Then two passes are free.
    Not where the reduction is split (a first pass over pieces of each row, then one over the
    pieces): each pass would be split again."""
    return n <= persistent_limit(reduces_innermost(x, dims)) and _plan(lw, x, dims) is None


def _two_pass(lw, x: Value, dims, n: int, acc):
    """mean, then the sum of squared deviations from it (keep-dim values)."""
    total = reduce(lw, x, dims, "sum", True, acc)
    mean = lazy(total.sizes, acc, x.device,
                lambda idx: binary(Op.MUL, total.load(idx), const(1.0 / n, acc)))
    mean_b = broadcast_to(mean, x.sizes)

    def centered_sq(idx):
        d = binary(Op.SUB, cast(x.load(idx), acc), mean_b.load(idx))
        return binary(Op.MUL, d, d)
    m2 = reduce(lw, lazy(x.sizes, acc, x.device, centered_sq), dims, "sum", True, acc)
    return mean, m2


def _shifted_one_pass(lw, x: Value, dims, n: int, acc):
    """mean and sum of squared deviations from one read of the row: with `k` the row's first
    element, `s1 = sum(x - k)`, `s2 = sum((x - k)^2)`, `mean = k + s1/n`, `m2 = s2 - s1^2/n`
    (the shift keeps the cancellation small: `k` is a sample of the row, not 0)."""
    def shift(idx):
        return cast(x.load(tuple(Affine(0) if k in dims else i for k, i in enumerate(idx))), acc)

    def shifted(idx):
        return binary(Op.SUB, cast(x.load(idx), acc), shift(idx))

    def shifted_sq(idx):
        d = shifted(idx)
        return binary(Op.MUL, d, d)
    s1 = reduce(lw, lazy(x.sizes, acc, x.device, shifted), dims, "sum", True, acc)
    s2 = reduce(lw, lazy(x.sizes, acc, x.device, shifted_sq), dims, "sum", True, acc)
    inv_n = const(1.0 / n, acc)
    mean = lazy(s1.sizes, acc, x.device,
                lambda idx: binary(Op.ADD, shift(idx), binary(Op.MUL, s1.load(idx), inv_n)))

    def m2(idx):
        a = s1.load(idx)
        return binary(Op.MAX, binary(Op.SUB, s2.load(idx), binary(Op.MUL, binary(Op.MUL, a, a), inv_n)),
                      const(0.0, acc))
    return mean, lazy(s2.sizes, acc, x.device, m2)


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


# ---------------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------------

SCAN_KINDS = {aten.cumsum.default: "sum", aten.cumprod.default: "prod", aten.logcumsumexp.default: "logsumexp"}


@register(*SCAN_KINDS)
def lower_scan(lw, node, x, dim, *, dtype=None):
    """cumsum / cumprod / logcumsumexp along one dim: rows held whole in registers (along memory
    up to `persistent_limit`, across it up to PERSISTENT_MAX_OUTER), in fp32 for fp16/bf16 and
    int64 for integers, as eager accumulates; longer rows stay aten calls."""
    meta = out_meta(node)
    kind = SCAN_KINDS[node.target]
    if x.numel() == 0 or x.dtype.is_complex or meta.dtype.is_complex or meta.dtype is torch.bool:
        raise NotLowerable("an empty, complex or bool scan")
    if kind == "logsumexp" and not meta.dtype.is_floating_point:
        raise NotLowerable("logcumsumexp of integers")
    dim = dim % max(x.ndim, 1)

    source = lazy(x.sizes, meta.dtype, x.device, lambda idx: cast(x.load(idx), meta.dtype))
    if x.ndim == 0 or x.sizes[dim] == 1:           # nothing to combine: a pointwise cast
        return source
    if x.sizes[dim] > (persistent_limit(True) if reduces_innermost(x, [dim]) else PERSISTENT_MAX_OUTER):
        raise NotLowerable("a scan along rows too long to hold in registers")
    return lw.add_scan(source, dim, kind, acc_dtype(meta.dtype), meta.dtype)


# ---------------------------------------------------------------------------------------------
# scans of positions: cummax / cummin, sort, topk
# ---------------------------------------------------------------------------------------------

#: the longest row a sort (and a topk) holds in registers: a bitonic sort of packed keys
#: (codegen.SORT_KEY), log2(n) (log2(n) + 1) / 2 compare-exchange stages over the row. On an H200
#: (bench/sorts.py, 2^24 elements): rows of 256 0.13-0.14x eager's time (fp16, fp32), of 1024
#: 0.57x (fp16, int32 keys) and 0.95x (fp32, int64 keys; 1.74x before the tuner tried 1-2 warps a
#: row and 16-bit values had int32 keys). Wider rows are not measured: aten calls. (At most 2^16:
#: int32 keys hold the position in 16 bits.)
SORT_MAX = 1024
#: cummax / cummin dtypes lowered: of fp16 rows, the scan of (value, position) pairs measured
#: 1.19x (256 wide) and 1.90x (1024) eager's time on an H200, of fp32 0.52x (why fp16 differs is
#: not known yet): 16-bit floats stay aten calls
RUNNING_PICK_DTYPES = (torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64,
                       torch.uint8, torch.bool)
#: what a sort packs with a 32-bit position into its key (fp16 / bf16 as fp32, exact)
SORT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int16, torch.int32,
               torch.uint8, torch.bool)


def _position_scan(lw, x: Value, dim: int, kind: str, longest: Optional[int] = None,
                   keep: Optional[int] = None) -> Value:
    """The int64 positions along `dim` a position scan of `x` gives (ir.POSITION_SCANS; rows of at
    most `longest`, and of what registers hold; `keep`: the first `keep` only)."""
    held = persistent_limit(True) if reduces_innermost(x, [dim]) else PERSISTENT_MAX_OUTER
    if x.sizes[dim] > min(held, longest or held):
        raise NotLowerable(f"a {kind} along rows too long to hold in registers")
    # a sort keeps the values' own dtype: its key is narrower for 16-bit ones (codegen.SORT_KEY)
    dtype = x.dtype if kind in ("sort", "sort_desc") else acc_dtype(x.dtype)
    source = lazy(x.sizes, dtype, x.device, lambda idx: cast(x.load(idx), dtype))
    return lw.add_scan(source, dim, kind, dtype, torch.int64, keep)


def _gathered(x: Value, dim: int, positions: Value) -> Value:
    """x's elements at `positions` along `dim`, read where they are used (a gather load,
    lower_views._read_at: its mask keeps the lanes past a row's end, which hold no position, from
    reading)."""
    return lazy(positions.sizes, x.dtype, x.device,
                lambda idx: _read_at(x, tuple(idx), {dim: positions.load(tuple(idx))}, x.dtype))


def _positioned(lw, x, what: str, dtypes, dim: int, kind: str, longest: Optional[int] = None,
                keep: Optional[int] = None) -> tuple[Value, Value]:
    """(values, indices) of the position scan `kind` of `x` along `dim`: a row of one element is
    itself, at 0."""
    if not isinstance(x, Value) or x.numel() == 0 or x.dtype not in dtypes:
        raise NotLowerable(f"a {what} of this kind")
    dim = dim % max(x.ndim, 1)
    if x.ndim == 0 or x.sizes[dim] == 1:
        index = lazy(x.sizes, torch.int64, x.device, lambda idx: const(0, torch.int64))
        return lazy(x.sizes, x.dtype, x.device, x.load), index
    index = _position_scan(lw, x, dim, kind, longest, keep if keep is not None and keep < x.sizes[dim] else None)
    return _gathered(x, dim, index), index


@register(aten.cummax.default, aten.cummin.default)
def lower_cummax(lw, node, x, dim):
    """(values, indices) of the running max (min) along `dim`: a scan of (value, position) pairs
    that keeps the position (the later of equal values, NaN above every number: eager's), the
    values gathered from it."""
    kind = "cummax" if node.target is aten.cummax.default else "cummin"
    return _positioned(lw, x, "cummax / cummin", RUNNING_PICK_DTYPES, dim, kind)


def _sorted(lw, x, dim: int, descending: bool, what: str, keep: Optional[int] = None) -> tuple[Value, Value]:
    """(values, indices) of `x` sorted along `dim` (the first `keep` of them)."""
    return _positioned(lw, x, what, SORT_DTYPES, dim, "sort_desc" if descending else "sort", SORT_MAX, keep)


@register(aten.sort.default, aten.sort.stable)
def lower_sort(lw, node, x, dim=-1, descending=False, *, stable=None):
    """(values, indices) of `x` sorted along `dim`: a stable sort of packed keys in registers
    (codegen.SORT_KEY; NaN last ascending and first descending, as eager), rows of at most
    SORT_MAX; fp16, bf16, fp32 and integers of up to 32 bits. (sort.stable's arguments are all
    keywords.)"""
    return _sorted(lw, x, dim, bool(descending), "sort")


@register(aten.topk.default)
def lower_topk(lw, node, x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (smallest) along `dim`: the row sorted (descending,
    ascending), its first k kept, in order (sorted=False allows any order); of equal values the
    earlier positions (eager keeps any)."""
    if k <= 0 or not isinstance(x, Value) or x.ndim == 0:
        raise NotLowerable("a topk of no elements or of a scalar")
    return _sorted(lw, x, dim, bool(largest), "topk", k)
