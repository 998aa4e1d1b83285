"""Triton source for one fused group: the op -> template table and the kernel skeletons.

Three skeletons (Inductor's names): `poi` pointwise (1-D tile over the flattened domain, or a
2-D [YBLOCK, XBLOCK] tile when an operand is read transposed: `KernelBuilder._transposed_dim`, or
one of rows and their innermost dims when an operand is constant along those, a per-channel vector
over NCHW: `KernelBuilder._row_split`, its math done once a row), `per`
persistent reduction (a [XBLOCK, RBLOCK] tile holding whole rows: every reduction of the group
runs on registers; a scan's kernel is one too, `tl.cumsum` along the rows) and `red` looped
reduction (one loop over the row per reduction, recomputing the inlined prologue, then a last
loop for the stores; where every block size divides the row, no lane masks, else only the last,
partial block is masked: `_row_loop`; what is constant within a block, a dim the blocks never
cross, is computed once a block: `_plan_blocks`). Math runs in fp32 (fp16/bf16 are upcast on
load and rounded on store or at an explicit cast); only `tl.*` functions are used, never
libdevice (max and min reduce with combine functions of the kernel's module: HELPERS), so the
same source runs under TRITON_INTERPRET=1.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Optional

import torch

from . import settings
from .ir import COMPARISONS, PICKS, POSITION_SCANS, Affine, Expr, Op, UNARY, affines, expr, mask_of, rewrite, substitute_index, walk
from .scheduler import Group

#: reductions across rows (lanes across them) keep at most this many rows' worth in registers;
#: along contiguous rows the limit is `settings.persistent_max_inner` (persistent_limit)
PERSISTENT_MAX_OUTER = 64
#: the largest block a looped reduction's launch config may give it (launch.candidates), or half
#: of it where only that half tiles the row or an r dim's inner extent (`KernelSource.rblock_max`,
#: `KernelBuilder._plan_blocks`): the r dims whose inner extent it divides are one value a block
LOOPED_RBLOCK_MAX = 8192
#: rows that the blocks tile exactly have no lane masks (`_plan_blocks`; False: every reduction
#: masks its lanes, to compare with bench/triton_sweep.py)
UNMASKED_EXACT_ROWS = True
#: the online softmax's sum of exp(v - max) is a sum of `tl.exp2((v - max) * log2(e))` (`_emit_stage`):
#: exp2 flushes results below 2^-126 to zero, where tl.exp keeps them (denormals), at the cost of a
#: compare and two multiplies per element; terms that small change no sum holding exp(0) = 1 (the
#: row's max), so only such sums use it (cross-entropy 8192x32000 bf16 on an H200: 146 -> 132 us;
#: values that are stored or used otherwise keep tl.exp). False: tl.exp, to compare
EXP2_ONLINE_SUM = True
LOG2E = 1.4426950408889634
#: a pointwise kernel takes a tile of rows (`KernelBuilder._row_split`) where the innermost dims an
#: operand is constant along hold at least this many elements (fewer: most lanes of a row's block
#: would be masked), a multiple of ROW_TILE_ALIGN: rows that start at odd elements are not read with
#: vector loads (batch norm + add + ReLU over 8x2048x7x7 bf16 on an H200: 3.1 us with a 1-D tile,
#: 4.3 with rows of 49; over 8x1024x14x14, rows of 196: 4.5 -> 3.4 us)
ROW_TILE_MIN_INNER = 16
ROW_TILE_ALIGN = 4
#: a pointwise kernel whose rows are too short or unaligned for a row tile keeps its 1-D tile and
#: computes on vectors of the block's rows instead (`KernelBuilder._row_vector_split`) where those
#: rows hold at least this many elements (fewer: a block covers nearly as many rows as elements)
ROW_VECTOR_MIN_INNER = 8


def persistent_limit(inner: bool) -> int:
    """The longest reduction kept in registers (a `per` kernel: the row read once, every reduction
    of the group and the stores from registers); longer ones loop (`red`). Along contiguous rows
    16384 by default (an instance norm over 128x128 pixels: one read instead of three), across
    rows PERSISTENT_MAX_OUTER."""
    return settings.persistent_max_inner if inner else PERSISTENT_MAX_OUTER


TL_TYPE = {
    torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32",
    torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Registers hold fp16/bf16 values as fp32."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _nan_max(a, b):
    return f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def _nan_min(a, b):
    return f"tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


#: op -> template; arguments are already emitted names or literals
TEMPLATES = {
    Op.ABS: lambda a: f"tl.abs({a})",
    Op.EXP: lambda a: f"tl.exp({a})",
    Op.EXP2: lambda a: f"_exp2({a})",
    Op.LOG: lambda a: f"tl.log({a})",
    Op.LOG2: lambda a: f"tl.log2({a})",
    Op.SQRT: lambda a: f"tl.sqrt({a})",
    Op.RSQRT: lambda a: f"tl.rsqrt({a})",
    Op.RECIP: lambda a: f"1.0 / {a}",
    Op.SIN: lambda a: f"tl.sin({a})",
    Op.COS: lambda a: f"tl.cos({a})",
    Op.TANH: lambda a: f"2.0 * tl.sigmoid(2.0 * {a}) - 1.0",
    Op.SIGMOID: lambda a: f"tl.sigmoid({a})",
    Op.ERF: lambda a: f"tl.erf({a})",
    Op.LOG1P: lambda a: f"_log1p({a})",
    Op.EXPM1: lambda a: f"_expm1({a})",
    Op.ATAN: lambda a: f"_atan({a})",
    Op.ATAN2: lambda a, b: f"_atan2({a}, {b})",
    Op.FLOOR: lambda a: f"tl.floor({a})",
    Op.CEIL: lambda a: f"tl.ceil({a})",
    Op.TRUNC: lambda a: f"tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))",
    Op.NOT: lambda a: f"{a} == 0",
    Op.ISNAN: lambda a: f"{a} != {a}",
    Op.RELU: lambda a: f"tl.where({a} < 0, 0, {a})",
    Op.ADD: lambda a, b: f"{a} + {b}",
    Op.SUB: lambda a, b: f"{a} - {b}",
    Op.MUL: lambda a, b: f"{a} * {b}",
    Op.DIV: lambda a, b: f"{a} / {b}",
    Op.MAX: _nan_max,
    Op.MIN: _nan_min,
    Op.POW: lambda a, b: f"_exp2({b} * tl.log2({a}))",
    Op.EQ: lambda a, b: f"{a} == {b}",
    Op.NE: lambda a, b: f"{a} != {b}",
    Op.LT: lambda a, b: f"{a} < {b}",
    Op.LE: lambda a, b: f"{a} <= {b}",
    Op.GT: lambda a, b: f"{a} > {b}",
    Op.GE: lambda a, b: f"{a} >= {b}",
    Op.AND: lambda a, b: f"{a} & {b}",
    Op.OR: lambda a, b: f"{a} | {b}",
    Op.XOR: lambda a, b: f"{a} ^ {b}",
    Op.FMOD: lambda a, b: f"_fmod({a}, {b})",
    Op.SHL: lambda a, b: f"{a} << {b}",
    Op.SHR: lambda a, b: f"{a} >> {b}",
    Op.WHERE: lambda c, a, b: f"tl.where({c}, {a}, {b})",
}

#: float compute dtypes -> (the integer type of their bits, its sign bit as a literal)
FLOAT_BITS = {torch.float32: ("tl.int32", "-2147483648"), torch.float64: ("tl.int64", "-9223372036854775808")}

#: integer variants where the float template does not apply
INT_TEMPLATES = {
    Op.NEG: lambda a: f"-{a}",
    Op.MAX: lambda a, b: f"tl.maximum({a}, {b})",
    Op.MIN: lambda a, b: f"tl.minimum({a}, {b})",
    Op.IDIV: lambda a, b: f"{a} // {b}",
    Op.FMOD: lambda a, b: f"{a} % {b}",
}

#: ops whose constant operands are emitted as tensors of their dtype (`_as_tensor`), and AND, OR
#: and XOR's on integers: a literal is a Python int to Triton, typed int32 / int64 (an operation of
#: an int8 or uint8 tensor with it is done in int32 and stops wrapping at 8 bits), and an
#: operation of two literals is Python's own (`-7 // 2` is -4, not C's -3)
TYPED_OPERANDS = frozenset({Op.IDIV, Op.FMOD, Op.SHL, Op.SHR})
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR})

#: fmod of fp32 values (fp16 and bf16 are held as fp32), exact as C's fmodf: Triton's float `%` is
#: `a - trunc(a / b) * b` on the GPU, rounded (off for large quotients), and libdevice's fmodf would
#: not run under the interpreter. With the magnitudes as integer significands and exponents,
#: |a| = ma * 2^ea and |b| = mb * 2^eb (ea >= eb where |a| >= |b|), |a| mod |b| is
#: 2^eb * (ma * 2^(ea - eb) mod mb): the power is shifted in at most 39 bits a step, so the int64
#: never overflows (ma, mb < 2^24); one step unless the quotient passes 2^39. The result is exact
#: in float64 and representable in fp32 (a multiple of b's last bit below |b|), with a's sign bit
#: (-4 fmod 2 is -0.0; Triton's `-x` is `0 - x`, +0.0 for x = 0).
#: NaN where b is 0 or a is infinite (or either NaN); a where |a| < |b| (b infinite too).
FMOD_F32 = """@triton.jit
def _fmod(a, b):
    a, b = tl.broadcast(a, b)
    ia = a.to(tl.int32, bitcast=True)
    ib = b.to(tl.int32, bitcast=True)
    ea = (ia >> 23) & 255
    eb = (ib >> 23) & 255
    ma = ((ia & 8388607) | tl.where(ea != 0, 8388608, 0)).to(tl.int64)
    mb = tl.maximum((ib & 8388607) | tl.where(eb != 0, 8388608, 0), 1).to(tl.int64)
    eb = tl.maximum(eb, 1)
    gap = tl.maximum(tl.maximum(ea, 1) - eb, 0)
    step = tl.minimum(gap, 39)
    r = (ma << step) % mb
    gap = gap - step
    while tl.max(gap) > 0:
        step = tl.minimum(gap, 39)
        r = (r << step) % mb
        gap = gap - step
    scale = ((eb + 873).to(tl.int64) << 52).to(tl.float64, bitcast=True)
    mag = (r.to(tl.float64) * scale).to(tl.float32).to(tl.int32, bitcast=True)
    signed = (mag | (ia & -2147483648)).to(tl.float32, bitcast=True)
    out = tl.where(tl.abs(a) < tl.abs(b), a, signed)
    return tl.where((b == 0) | (a != a) | (b != b) | (tl.abs(a) == float("inf")), float("nan"), out)


"""

#: log(1 + x) of fp32 values to within about an ulp, from tl arithmetic alone (libdevice's log1pf
#: does not run under the interpreter, and log(1 + x) loses x's low bits, tl.log's absolute error
#: near 1 all of a small x's). The classic reduction (fdlibm's): 1 + x = 2^k * m with m in
#: [sqrt(2)/2, sqrt(2)) (k from the exponent bits of u = 1 + x biased by m's range), f = m - 1
#: (f = x itself where k is 0), log(1 + f) = 2 atanh(s), s = f / (2 + f), as
#: f - f^2/2 + s (f^2/2 + R(s^2)) with fdlibm's degree-4 minimax R; c = (x - (u - 1)) / u, or
#: (1 - (u - x)) / u from k = 2 on, puts back what rounding u lost (nothing to add from k = 25
#: on); k ln 2 in two parts, the high one exact in fp32. -1 gives -inf, below -1 NaN, +inf
#: itself, a zero keeps its sign.
LOG1P_F32 = """@triton.jit
def _log1p(x):
    u = 1.0 + x
    iu = u.to(tl.int32, bitcast=True) + 4913933
    k = (iu >> 23) - 127
    fix = tl.where(k >= 2, 1.0 - (u - x), x - (u - 1.0))
    c = tl.where((k == 0) | (k >= 25), 0.0, tl.div_rn(fix, u))
    m = ((iu & 8388607) + 1060439283).to(tl.float32, bitcast=True)
    f = tl.where(k == 0, x, m - 1.0)
    s = tl.div_rn(f, 2.0 + f)
    z = s * s
    w = z * z
    r = z * (0.6666666269302368 + w * 0.2849878668785095) + w * (0.40000972151756287 + w * 0.24279078841209412)
    half_sq = 0.5 * f * f
    dk = k.to(tl.float32)
    out = s * (half_sq + r) + (dk * 9.05800061445916e-06 + c) - half_sq + f + dk * 0.6931381225585938
    out = tl.where(x == 0.0, x, out)
    out = tl.where(x == -1.0, float("-inf"), out)
    out = tl.where((x < -1.0) | (x != x), float("nan"), out)
    return tl.where(x == float("inf"), x, out)


"""

#: exp(x) - 1 of fp32 values. Where u = exp(x) lies in [1/2, 2], Kahan's way: (u - 1) * x / log(u),
#: log(u) as log1p(u - 1) (u - 1 is exact there); whatever error u carries, (u - 1) / log(u) is a
#: smooth function of it evaluated at that same u, so the quotient keeps x's accuracy where
#: u - 1 alone would cancel (u = 1 gives x, a zero's sign too). Outside, u - 1 itself: nothing
#: cancels (and u - 1 is no longer exact, so the quotient would not be of the same u).
EXPM1_F32 = """@triton.jit
def _expm1(x):
    u = tl.exp(x)
    um1 = u - 1.0
    near = (u >= 0.5) & (u <= 2.0)
    kahan = um1 * tl.div_rn(x, _log1p(tl.where(near, um1, 1.0)))
    return tl.where(um1 == 0.0, x, tl.where(near, kahan, um1))


"""

#: atan of fp32 values within about 2 ulp, from tl arithmetic alone (libdevice's atanf does not
#: run under the interpreter): Cephes' atanf. |x| is reduced to t in [-tan(pi/8), tan(pi/8)] by
#: atan(|x|) = pi/2 + atan(-1/|x|) above tan(3pi/8) and pi/4 + atan((|x| - 1) / (|x| + 1)) above
#: tan(pi/8), then atan(t) = t + t z P(z), z = t^2, with Cephes' degree-3 minimax P; the sign put
#: back (a zero keeps its own; NaN stays NaN: every comparison of it is false, so t is NaN).
ATAN_F32 = """@triton.jit
def _atan(x):
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.41421356237309503
    t = tl.where(big, -tl.div_rn(1.0, a), tl.where(mid, tl.div_rn(a - 1.0, a + 1.0), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = t * t
    p = (((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * t + t
    r = base + p
    r = tl.where(x < 0, -r, r)
    return tl.where(x == 0.0, x, r)


"""

#: atan2(y, x) of fp32 values: the angle of the smaller magnitude over the larger (in [0, 1], so
#: atan's value in [0, pi/4]), reflected to the octant (pi/2 - r where |y| > |x|, pi - r where x's
#: sign bit is set, -0.0 included, negated where y's is; a zero angle is y * 0, with y's sign,
#: since Triton's `-r` is `0 - r`, +0.0 for r = 0): C's special values, atan2(+-0, -0) is +-pi, both
#: infinite +-pi/4 or +-3pi/4, a NaN operand NaN.
ATAN2_F32 = """@triton.jit
def _atan2(y, x):
    y, x = tl.broadcast(y, x)
    ax = tl.abs(x)
    ay = tl.abs(y)
    hi = tl.maximum(ax, ay)
    lo = tl.minimum(ax, ay)
    q = tl.div_rn(lo, tl.where(hi == 0.0, 1.0, hi))
    q = tl.where(lo == float("inf"), 1.0, q)
    r = _atan(q)
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, 3.141592653589793 - r, r)
    r = tl.where(y.to(tl.int32, bitcast=True) < 0, -r, r)
    r = tl.where(r == 0.0, y * 0.0, r)
    return tl.where((x != x) | (y != y), float("nan"), r)


"""

#: fp32 variants rounded as eager's (IEEE round-to-nearest): Triton's `/` is div.full.f32 (up to 2 ulp
#: off: 4.6875 / 0.9375 gave 5.0000005, so a floor or a comparison of an exact quotient went wrong)
#: and tl.sqrt is sqrt.approx.ftz.f32 on the GPU; except the QUOTIENTS of an APPROXIMATE value
PRECISE_FP32 = {
    Op.DIV: lambda a, b: f"tl.div_rn({a}, {b})",
    Op.RECIP: lambda a: f"tl.div_rn(1.0, {a})",
    Op.SQRT: lambda a: f"tl.sqrt_rn({a})",
}

#: ops whose results on the GPU are not eager's to the last bit (Triton's ex2.approx, lg2.approx and
#: the functions built on them, a few ulp off libm's): a quotient of such a value cannot be eager's
#: bit for bit either way, so it is divided with div.full.f32 (<= 2 ulp more) instead of IEEE
#: division, whose slow path (a subroutine call wherever the numerator is 0 or below ~2^-102, or
#: the divisor out of range) made a causal softmax's normalization, half of whose numerators are
#: exp(-inf) = 0, 1.9x slower, and Adam's update (divided by 1 - beta ** step, an exp2) 1.4x
APPROXIMATE = frozenset({Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.RSQRT, Op.SIN, Op.COS, Op.TANH, Op.SIGMOID,
                         Op.ERF, Op.POW, Op.EXPM1, Op.ATAN, Op.ATAN2})
QUOTIENTS = frozenset({Op.DIV, Op.RECIP})

#: how a reduction kind reduces a tile along its rows. Not `tl.max` / `tl.min`: they combine with
#: maxnumf / minnumf, which drop a NaN on the GPU (eager's max of a row holding NaN is NaN), so
#: max and min reduce with NaN-propagating combine functions of the kernel's module (HELPERS).
#: The picks (ir.PICKS: argmax, max.dim) reduce (value, position) pairs: `_define_picked`
REDUCE = {"sum": "tl.sum({}, 1)", "max": "tl.reduce({}, 1, _max_nan)", "min": "tl.reduce({}, 1, _min_nan)"}
HELPERS = {
    "fmod": FMOD_F32,
    "log1p": LOG1P_F32,
    "expm1": LOG1P_F32 + EXPM1_F32,
    "atan": ATAN_F32,
    "atan2": ATAN_F32 + ATAN2_F32,
    "max": "@triton.jit\ndef _max_nan(a, b):\n    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)\n\n\n",
    "min": "@triton.jit\ndef _min_nan(a, b):\n    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)\n\n\n",
    # 2^x as eager's exp2 and pow: tl.exp2 flushes results below 2^-126 to zero on the GPU
    # (ex2.approx.ftz), eager keeps them (denormals, whose log is finite): 2^(x + 64) * 2^-64
    "exp2": "@triton.jit\ndef _exp2(x):\n"
            "    return tl.where(x < -126.0, tl.exp2(x + 64.0) * 5.421010862427522e-20, tl.exp2(x))\n\n\n",
    # log(exp(a) + exp(b)): equal operands (two infinities of a sign as well) give a + log 2, a NaN
    # propagates; the larger operand is factored out (logcumsumexp's scan)
    "logsumexp": "@triton.jit\ndef _logaddexp(a, b):\n"
                 "    hi = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)\n"
                 "    lo = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)\n"
                 "    return tl.where(a == b, hi + 0.6931471805599453, hi + tl.log(1.0 + tl.exp(lo - hi)))\n\n\n",
}


def _pair_combine(name: str, order: str, ties: str) -> str:
    """A combine function `name` over (value, position) pairs: of two, the larger (smaller, by
    `order` "max" / "min") value, NaN above (below) every number, and of equal values (two NaNs
    too) the lower position (`ties` "<") or the higher (">"). A total order on the pairs: any
    grouping of the combines gives the same pair. The picks (ir.PICKS: argmax keeps the first
    maximum, a row's first NaN; tl.argmax's own combine drops NaN) take the lower position, the
    running picks (cummax: eager's `>=`, [1, 3, 3] gives 0, 1, 2) the higher."""
    better = ">" if order == "max" else "<"
    return (f"@triton.jit\ndef {name}(a, ia, b, ib):\n"
            "    a_nan = a != a\n"
            "    b_nan = b != b\n"
            f"    first = (a {better} b) | (a_nan & ~b_nan) | (((a == b) | (a_nan & b_nan)) & (ia {ties} ib))\n"
            "    return tl.where(first, a, b), tl.where(first, ia, ib)\n\n\n")


HELPERS["argmax"] = _pair_combine("_argmax_nan", "max", "<")
HELPERS["argmin"] = _pair_combine("_argmin_nan", "min", "<")
HELPERS["cummax"] = _pair_combine("_cummax_nan", "max", ">")
HELPERS["cummin"] = _pair_combine("_cummin_nan", "min", ">")

#: a sort's key (int64) of a value (fp32, or an integer of at most 32 bits) and its position in the
#: row: the value's order in the high 32 bits, the position in the low ones, so that ascending keys
#: are the values in eager's order with equal values in position order (a stable sort: what
#: `stable=True` asks and a valid order where it does not). Floats: every NaN is one NaN, above
#: +inf (eager sorts NaN last ascending, first descending); -0.0 is +0.0 (equal to eager's sort);
#: the bits of a negative float flipped but its sign, so that its int32 orders as the float.
#: Descending: the order's complement (~o = -o - 1 never overflows), the position still ascending.
#: Values are gathered from the positions afterwards, so they are the row's own (NaN payloads and
#: -0.0 kept). Values of 16 bits or fewer (fp16, bf16, small integers) make
#: int32 keys (`_sort_key16`), the position in the low 16 bits (rows of at most 2^16): half the registers and
#: exchanges of an int64 key's sort (a 1024-wide fp16 sort ran 1.7x eager's time with int64 keys).
SORT_KEY = """@triton.jit
def _sort_order(v, kind: tl.constexpr, descending: tl.constexpr):
    if kind != 0:
        v = tl.where(v != v, float("nan"), v)
        v = tl.where(v == 0, 0.0, v)
    if kind == 1:
        bits = v.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
        order = tl.where(bits < 0, bits ^ 32767, bits)
    elif kind == 2:
        bits = v.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32)
        order = tl.where(bits < 0, bits ^ 32767, bits)
    elif kind == 3:
        bits = v.to(tl.int32, bitcast=True)
        order = tl.where(bits < 0, bits ^ 2147483647, bits)
    else:
        order = v.to(tl.int32)
    if descending:
        order = ~order
    return order


@triton.jit
def _sort_key16(v, position, kind: tl.constexpr, descending: tl.constexpr):
    return (_sort_order(v, kind, descending) << 16) | position.to(tl.int32)


@triton.jit
def _sort_key(v, position, kind: tl.constexpr, descending: tl.constexpr):
    return (_sort_order(v, kind, descending).to(tl.int64) << 32) | position.to(tl.int64)


"""
#: SORT_KEY's `kind` of a value's dtype (integers: 0)
SORT_KIND = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3}
HELPERS["sort"] = HELPERS["sort_desc"] = SORT_KEY
COMBINE = {"sum": lambda acc, v: f"{acc} + {v}", "max": _nan_max, "min": _nan_min}
#: how a scan kind scans a tile along its rows
SCAN = {"sum": "tl.cumsum({}, 1)", "prod": "tl.cumprod({}, 1)", "logsumexp": "tl.associative_scan({}, 1, _logaddexp)"}


def identity(kind: str, dtype: torch.dtype) -> str:
    """The value lanes past a row's end hold: one that changes no result (a pick's: its order's,
    with a position past the row's end, `_pick_tiles`)."""
    kind = PICKS[kind][0] if kind in PICKS else kind
    if kind == "sum":
        return "0"
    if kind == "prod":
        return "1"
    if kind == "logsumexp":
        return 'float("-inf")'
    if dtype.is_floating_point:
        return 'float("-inf")' if kind == "max" else 'float("inf")'
    info = torch.iinfo(dtype)
    return str(info.min if kind == "max" else info.max)


def literal(value, dtype: torch.dtype) -> str:
    if isinstance(value, float):
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return f'float("{value}")'
        return repr(value)
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


@dataclasses.dataclass
class KernelSource:
    name: str
    source: str
    args: list[str]            # buffer names, in parameter order
    kind: str                  # "poi" | "per" | "red"
    xnumel: int
    rnumel: int
    inner: bool                # reduction over contiguous memory
    ops: list[str]             # the op names (for the kernel name and debugging)
    scalars: tuple[int, ...] = ()   # positions of `args` passed by value (host scalars), not as pointers
    ynumel: int = 1            # a 2-D pointwise tile's other axis (grid axis 1, YBLOCK); 1: a 1-D kernel
    rblock_max: int = 0        # a looped reduction's largest block (its code relies on it); 0: none
    row_tile: bool = False     # the 2-D tile's y axis holds rows, its x axis their innermost dims (_row_split)
    row_inner: int = 0         # a 1-D kernel computing on vectors of its block's rows: their length (_row_vector_split)

    @property
    def numel(self) -> int:
        return self.xnumel * self.ynumel * self.rnumel


class KernelBuilder:
    """Builds the source of one kernel from a scheduled `Group`."""

    def __init__(self, group: Group, scalars: frozenset = frozenset()):
        self.group = group
        self.scalars = scalars                  # buffer names passed by value (one element each)
        self.params: dict[str, str] = {}        # buffer name -> parameter name
        self.param_order: list[str] = []
        self.lines_outer: list[str] = []
        self.sections: list[tuple[str, list[str]]] = []
        self.loop_lines: Optional[list[str]] = None
        self.outer_cse: dict[int, str] = {}
        self.loop_cse: dict[int, str] = {}
        self.counter = 0
        self.ops_used: set[str] = set()
        self._last_loop: dict[tuple, int] = {}     # see _plan_eviction
        self.helpers: set[str] = set()             # HELPERS the kernel calls
        self._loop_no = -1
        self._block_vars: set[str] = set()          # see _plan_blocks
        self._r_even = False
        self._lanes_in_row = False                  # see _row_loop
        self.rblock_max = 0                         # see _block_bound

    # -- preparation: substitute in-group reads, merge dims ------------------------------------

    def prepare(self):
        subst: dict[str, Expr] = {}
        self.reductions: list[tuple[object, Expr]] = []
        final: dict[str, Expr] = {}

        def replace(e, args):
            if e.op is Op.LOAD and not args and e.arg[0] in subst:
                return subst[e.arg[0]]
            return None
        same: dict[tuple, str] = {}            # (kind, body, dtype) -> the reduction computing it
        self.scans: list[tuple[object, Expr]] = []
        for m in self.group.members:
            body = rewrite([m.body], replace)[0]
            if m.role == "scan":
                self.scans.append((m, body))
                dtype = torch.int64 if m.node.kind in POSITION_SCANS else body.dtype
                subst[m.node.name] = expr(Op.SCANNED, (), m.node.name, dtype)
            elif m.role == "reduction":
                key = (m.node.kind, id(body), m.node.buffer.dtype)
                first = same.setdefault(key, m.node.name)
                if first == m.node.name:         # a reduction seen before (softmax + log_softmax) is reused
                    self.reductions.append((m, body))
                subst[m.node.name] = expr(Op.REDUCED, (), first, m.node.buffer.dtype)
            elif m.node.buffer.kind != "input":        # a graph input read means its old value
                subst[m.node.name] = body
            final[m.node.name] = subst.get(m.node.name, body)
        self.stores = [(m.node.buffer, final[m.node.name], m.store, m.role) for m in self.group.stores]
        self._kept = {m.node.buffer.name: m.node.keep for m, _ in self.scans if m.node.keep is not None}
        self._drop_dead_reductions()
        positioned = [m for m, _ in self.reductions if m.node.kind in PICKS] + \
            [m for m, _ in self.scans if m.node.kind in POSITION_SCANS]
        self.position = self._row_position() if positioned else None
        self._merge_dims()

    def _row_position(self) -> Expr:
        """Each element's position in its row, as a pick reduction numbers it (PICKS): row-major
        over the reduced dims in the group's canonical order, which is the reduced nodes' own
        (their dims, size-1 ones dropped: scheduler.fit), whatever order the loops take them in
        (by stride: `_loop_order`) and whichever of them merge (`_merge_dims` merges only dims the
        position walks row-major too)."""
        position, stride = Affine(0), 1
        for k in reversed(range(len(self.group.sizes))):
            if self.group.reduced[k]:
                position = position + Affine.var(f"c{k}", stride)
                stride *= self.group.sizes[k]
        return expr(Op.INDEX, (), position, torch.int64)

    def _drop_dead_reductions(self):
        bodies = {m.node.name: b for m, b in self.reductions}
        live: set[str] = set()
        frontier = [v for _, v, _, _ in self.stores] + [b for _, b in self.scans]
        while frontier:
            found = {e.arg for e in walk(frontier) if e.op is Op.REDUCED} - live
            live |= found
            frontier = [bodies[n] for n in found]
        self.reductions = [(m, b) for m, b in self.reductions if m.node.name in live]

    def _all_affines(self) -> list[Affine]:
        roots = [b for _, b in self.reductions + self.scans] + [v for _, v, _, _ in self.stores]
        roots += [self.position] if self.position is not None else []
        return affines(roots) + [s for _, _, s, _ in self.stores]

    def _loop_order(self, dims: list) -> list:
        """Order the x dims (and the r dims) outer to inner by their stride in the main access,
        so that neighbouring lanes touch neighbouring memory (channels-last tensors, transposes)."""
        reference = None
        # (a scatter's store index leaves out the scattered dim: the domain's own order, the
        # values' logical one, serves better)
        full_stores = [s for _, v, s, role in self.stores if role in ("full", "scan") and v.op is not Op.SCATTER_ADD]
        if full_stores:
            reference = full_stores[0]
        else:
            loads = [e.arg[1] for _, b in self.reductions for e in walk([b]) if e.op is Op.LOAD]
            if loads:
                reference = max(loads, key=lambda a: len(a.terms))
        if reference is None:
            return dims
        # x dims before r dims; larger stride outer; dims the reference does not walk (broadcast)
        # innermost; ties keep the domain's order
        order = sorted(range(len(dims)), key=lambda k: (dims[k][2], -abs(reference.coeff(dims[k][0])), k))
        return [dims[k] for k in order]

    def _merge_dims(self):
        """Collapse neighbouring dims that every access walks as one (contiguous in all of them)."""
        dims = [(f"c{k}", s, r) for k, (s, r) in enumerate(zip(self.group.sizes, self.group.reduced))]
        dims = self._loop_order(dims)
        affs = self._all_affines()
        drop: dict[str, Affine] = {}
        merged = True
        while merged:
            merged = False
            for k in range(len(dims) - 1):
                (a, sa, ra), (b, sb, rb) = dims[k], dims[k + 1]
                if ra == rb and all(f.coeff(a) == f.coeff(b) * sb for f in affs):
                    drop[a] = Affine(0)
                    affs = [f.substitute({a: Affine(0)}) for f in affs]
                    dims[k:k + 2] = [(b, sa * sb, rb)]
                    merged = True
                    break
        xdims = [(n, s) for n, s, r in dims if not r]
        rdims = [(n, s) for n, s, r in dims if r]
        rename = dict(drop)
        rename.update({n: Affine.var(f"x{i}") for i, (n, _) in enumerate(xdims)})
        rename.update({n: Affine.var(f"r{i}") for i, (n, _) in enumerate(rdims)})
        self.xsizes = [s for _, s in xdims]
        self.rsizes = [s for _, s in rdims]
        self.reductions = [(m, substitute_index([b], rename)[0]) for m, b in self.reductions]
        self.scans = [(m, substitute_index([b], rename)[0]) for m, b in self.scans]
        if self.position is not None:
            self.position = substitute_index([self.position], rename)[0]
        self.stores = [(buf, substitute_index([v], rename)[0], s.substitute(rename), role)
                       for buf, v, s, role in self.stores]
        self.xnumel = _prod(self.xsizes)
        self.rnumel = _prod(self.rsizes)
        self.ydim: Optional[int] = None        # the x dim on the 2-D tile's y axis (see _transposed_dim)
        self.row_split: Optional[int] = None   # x dims before it on a row tile's y axis (see _row_split)
        self.row_vectors: Optional[int] = None  # x dims before it index a 1-D kernel's row vectors (_row_vector_split)

    # -- shapes ---------------------------------------------------------------------------------

    def _shape_of(self, e: Expr) -> tuple[bool, bool]:
        """(depends on x vars, varies along the block's lanes: depends on r vars other than the
        block's own, `_block_vars`)."""
        hx, hr, _ = self._dependence(e)
        return hx, hr

    def _in_loop(self, e: Expr) -> bool:
        """Does `e` change from one block of a row to the next (any r var, the block's own too)?"""
        _, hr, hb = self._dependence(e)
        return hr or hb

    def _dependence(self, e: Expr) -> tuple[bool, bool, bool]:
        """(x vars, lane r vars, block r vars) `e` depends on."""
        memo = self._shape_memo
        if id(e) in memo:
            return memo[id(e)]
        hx = hr = hb = False
        if e.op in (Op.LOAD, Op.GATHER, Op.INDEX):
            aff = e.arg if e.op is Op.INDEX else e.arg[1]
            hx = any(v.startswith("x") for v in aff.vars())
            hr = any(self._lane_var(v) for v in aff.vars())
            hb = any(v in self._block_vars for v in aff.vars())
        elif e.op is Op.REDUCED:
            hx = True
        elif e.op is Op.SCANNED:
            hx = hr = True
        for a in e.args:
            ax, ar, ab = self._dependence(a)
            hx, hr, hb = hx or ax, hr or ar, hb or ab
        memo[id(e)] = (hx, hr, hb)
        return hx, hr, hb

    def _lane_var(self, v: str) -> bool:
        """Is `v` an r var that differs between the lanes of a block?"""
        return v.startswith("r") and v not in self._block_vars

    def _in_row(self, value: str, outside: str) -> str:
        """`value` in the lanes inside the row, `outside` in those past its end: in a loop body
        whose lanes are all inside the row (`_lanes_in_row`) there are none, and the value is
        kept everywhere (rows past xnumel compute what no store keeps)."""
        return value if self._lanes_in_row else f"tl.where(xmask & rmask, {value}, {outside})"

    def _plan_blocks(self):
        """What a looped kernel knows of its blocks, whose sizes are powers of two of at most
        `rblock_max` (`_block_bound`; launch.candidates; checked in the kernel):
        `_r_even`: every block size divides the row, so no lane is ever past its end (no rmask;
        a persistent kernel's too, whose block is the row rounded up to a power of two);
        `_block_vars`: the r dims a block never crosses, those whose inner extent (the product of
        the r sizes inside them) every block size divides. Inside a block they are one value,
        computed from `roffset`, and what depends on no other r var is one value a row per block
        ([XBLOCK, 1]: group norm's weight and bias, per channel of its (group, channel, pixel)
        row, a load and a multiply per block instead of two gathers and a multiply per element)."""
        self._block_vars: set[str] = set()
        self.rblock_max = self._block_bound() if self.kind == "red" else 0
        exact = False
        if self.kind == "per":       # its block: the row rounded up to a power of two (launch.candidates)
            exact = self.rnumel & (self.rnumel - 1) == 0
        elif self.kind == "red":
            exact = self.rnumel % self.rblock_max == 0
        self._r_even = self._lanes_in_row = UNMASKED_EXACT_ROWS and exact
        if self.kind != "red":
            return
        for i in range(len(self.rsizes) - 1):
            inner = _prod(self.rsizes[i + 1:])
            if inner % self.rblock_max == 0 and self.rsizes[i] > 1:
                self._block_vars.add(f"r{i}")

    def _block_bound(self) -> int:
        """LOOPED_RBLOCK_MAX, or half of it where that half tiles the row or an r dim's inner
        extent and the whole does not (a row of 5 * 4096: exact blocks, no lane masks, are worth
        more than larger ones). Group norm's rows of 2 * 16384 take blocks of up to 8192 (37 vs
        39 us on an H200: half the block-wide steps), cross-entropy's rows of 32000 too."""
        big, half = LOOPED_RBLOCK_MAX, LOOPED_RBLOCK_MAX // 2
        extents = [_prod(self.rsizes[i:]) for i in range(len(self.rsizes))]
        return half if any(e % half == 0 and e % big != 0 for e in extents) else big

    def _transposed_dim(self) -> Optional[int]:
        """For a pointwise kernel, the x dim a load walks contiguously while the stores walk the
        innermost x dim contiguously (a transposed or permuted operand): with a 1-D tile over the
        flattened domain that load would touch one element per 32-byte sector. A 2-D tile puts
        that dim on its y axis, and Triton's coalescing gives each access its own fast axis
        (through shared memory). None where no load needs it, or the dims are too small."""
        n = len(self.xsizes)
        if self.is_reduction or n < 2 or not settings.tile_2d \
                or any(v.op is Op.SCATTER_ADD for _, v, _, _ in self.stores):
            return None
        inner = f"x{n - 1}"
        if not self.stores or any(index.coeff(inner) != 1 for _, _, index, _ in self.stores):
            return None
        for root in [v for _, v, _, _ in self.stores]:
            for e in walk([root]):
                if e.op is not Op.LOAD or e.arg[0] in self.scalars:
                    continue
                aff = e.arg[1]
                if aff.coeff(inner) in (0, 1):
                    continue
                for j in range(n - 1):
                    if aff.coeff(f"x{j}") == 1 and self.xsizes[j] >= 16 and self.xnumel // self.xsizes[j] >= 16:
                        return j
        return None

    def _row_split(self) -> Optional[int]:
        """For a pointwise kernel, k where the x dims before k make the rows of a [YBLOCK, XBLOCK]
        tile and those from k on its columns, because a load is constant along the dims from k on
        (batch norm's mean, variance, weight and bias over (N, C, H*W): a value per channel). In
        a 1-D tile such a load is a gather per element, and the math on it (batch norm's
        1 / sqrt(var + eps), IEEE-rounded) is done for each element: on the row tile the load is
        [YBLOCK, 1] and its math once a row (a ResNet's batch norm + add + relu over 8x512x28x28
        bf16 on an H200: 7.1 -> 4.2 us, Inductor's 8.4, with the row tile). The largest such k
        whose columns hold at least ROW_TILE_MIN_INNER elements, a multiple of ROW_TILE_ALIGN;
        None where no load is constant along the innermost dims, the stores do not walk the
        innermost dim contiguously, or a load has a mask of its own (a padding, a cat, a max
        pool's window: a ResNet stem's batch norm + relu + max pool, 16.7 -> 21.7 us on rows)."""
        if not settings.row_tile or not self._rows_eligible():
            return None
        loads = self._tensor_loads()
        if any(mask_of(e) is not None for e in loads):
            return None
        best = None
        for k in self._row_constant_splits(loads):
            inner = _prod(self.xsizes[k:])
            if inner >= ROW_TILE_MIN_INNER and inner % ROW_TILE_ALIGN == 0 \
                    and math.ceil(_prod(self.xsizes[:k]) / 1024) <= 65535:      # grid axis 1's limit
                best = k if best is None else max(best, k)
        return best

    def _row_vector_split(self) -> Optional[int]:
        """For a pointwise kernel without a 2-D tile, k as in `_row_split` for rows too short or
        unaligned for a row tile (batch norm over 8x2048x7x7: rows of 49, whose row tile of 64
        columns measured slower than the 1-D tile), of at least ROW_VECTOR_MIN_INNER elements.
        The tile stays 1-D, over the elements; the loads constant along the dims from k on, and
        the math on them alone, are vectors over the rows the block spans ([YBLOCK]: XBLOCK
        elements span at most (XBLOCK - 1) // inner + 2 rows; launch.candidates), expanded to
        the elements with `tl.gather` where they meet a value per element (`_row_domain`). A
        load and the math once a row instead of per element: batch norm + relu over 8x2048x7x7
        bf16 on an H200, 2.96 -> 2.15 us (Inductor 2.66). Loads with masks of their own stay
        per element."""
        if not settings.row_tile or not self._rows_eligible():
            return None
        splits = [k for k in self._row_constant_splits([e for e in self._tensor_loads() if mask_of(e) is None])
                  if _prod(self.xsizes[k:]) >= ROW_VECTOR_MIN_INNER]
        return max(splits, default=None)

    def _rows_eligible(self) -> bool:
        """Can a pointwise kernel hold a row's values once (`_row_split`, `_row_vector_split`)? Not
        a reduction or a scatter; its stores walk the innermost dim contiguously."""
        n = len(self.xsizes)
        if self.is_reduction or n < 2 or any(v.op is Op.SCATTER_ADD for _, v, _, _ in self.stores):
            return False
        return bool(self.stores) and all(index.coeff(f"x{n - 1}") == 1 for _, _, index, _ in self.stores)

    def _tensor_loads(self) -> list[Expr]:
        return [e for e in walk([v for _, v, _, _ in self.stores])
                if e.op in (Op.LOAD, Op.GATHER) and e.arg[0] not in self.scalars]

    def _row_constant_splits(self, loads: list[Expr]) -> list[int]:
        """For each plain load among `loads` constant along the innermost dims: the first dim of
        those (the dims it varies along all come before it)."""
        n = len(self.xsizes)
        out = []
        for e in loads:
            if e.op is not Op.LOAD:
                continue
            k = max((i for i in range(n) if e.arg[1].coeff(f"x{i}") != 0), default=n - 1) + 1
            if k < n:
                out.append(k)
        return out

    def _row_domain(self, e: Expr) -> int:
        """With row vectors (`row_vectors`): 0 for a value without x dims (a constant, a host
        scalar), 1 for one of the block's rows ([YBLOCK]: a plain load indexed by the x dims
        before `row_vectors` only, or math on such loads and scalars), 2 for one per element."""
        memo = self._row_domain_memo
        if id(e) not in memo:
            if e.op is Op.CONST:
                d = 0
            elif e.op in (Op.LOAD, Op.GATHER) and e.arg[0] in self.scalars:
                d = 0 if mask_of(e) is None else 2
            elif e.op is Op.LOAD and mask_of(e) is None:
                on_y, on_x = self._row_axes(e.arg[1])
                d = 2 if on_x else int(on_y)
            elif e.op in (Op.LOAD, Op.GATHER, Op.INDEX, Op.REDUCED, Op.SCANNED):
                d = 2
            else:
                d = max(map(self._row_domain, e.args), default=0)
            memo[id(e)] = d
        return memo[id(e)]

    def emit_elements(self, e: Expr) -> str:
        """`emit(e)`, a row vector expanded to the block's elements (`_row_vector_split`)."""
        name = self.emit(e)
        if self.row_vectors is None or self._row_domain(e) != 1:
            return name
        if name not in self._expanded:
            self._expanded[name] = self._tmp()
            gathered = (f"tl.gather({name}.to(tl.int8), ylocal, 0) != 0" if e.dtype is torch.bool
                        else f"tl.gather({name}, ylocal, 0)")
            self.lines_outer.append(f"{self._expanded[name]} = {gathered}")
        return self._expanded[name]

    def _axes(self, e: Expr) -> tuple[bool, bool]:
        """On a row tile: does `e` vary along its rows (the y axis), along its columns (the x
        axis)? (Its loads have no masks of their own: `_row_split`.)"""
        memo = self._axes_memo
        if id(e) in memo:
            return memo[id(e)]
        on_y = on_x = False
        if e.op in (Op.LOAD, Op.GATHER) and e.arg[0] in self.scalars:
            pass
        elif e.op in (Op.LOAD, Op.GATHER, Op.INDEX):
            on_y, on_x = self._row_axes(e.arg if e.op is Op.INDEX else e.arg[1])
            if e.op is Op.GATHER:
                ty, tx = self._axes(e.args[0])
                on_y, on_x = on_y or ty, on_x or tx
        else:
            for a in e.args:
                ay, ax = self._axes(a)
                on_y, on_x = on_y or ay, on_x or ax
        memo[id(e)] = (on_y, on_x)
        return on_y, on_x

    def _row_axes(self, aff: Affine) -> tuple[bool, bool]:
        """Does the index `aff` walk x dims of the rows (those before `row_split`, or
        `row_vectors`), x dims within a row?"""
        k = self.row_split if self.row_split is not None else self.row_vectors
        dims = [int(v[1:]) for v in aff.vars() if v.startswith("x")]
        return any(d < k for d in dims), any(d >= k for d in dims)

    def _pad_to_tile(self, offset: str, on_y: bool, on_x: bool) -> str:
        """A pointer covering the whole 2-D tile (Triton broadcasts a mask to the pointer's shape,
        not the pointer to the mask's)."""
        return offset + ("" if on_y else " + 0 * yindex") + ("" if on_x else " + 0 * xindex")

    def _mask_for(self, hx: bool, hr: bool) -> Optional[str]:
        if not self.is_reduction or self._lanes_in_row:
            return "xmask" if hx else None
        return {(True, True): "xmask & rmask", (True, False): "xmask",
                (False, True): "rmask", (False, False): None}[(hx, hr)]

    def _full_shape(self) -> str:
        if self.is_reduction:
            return "[XBLOCK, RBLOCK]"
        return "[XBLOCK]" if self.ydim is None and self.row_split is None else "[YBLOCK, XBLOCK]"

    # -- expression emission ---------------------------------------------------------------

    def _tmp(self) -> str:
        self.counter += 1
        return f"tmp{self.counter - 1}"

    def _param(self, buffer_name: str) -> str:
        if buffer_name not in self.params:
            self.params[buffer_name] = f"ptr{len(self.param_order)}"
            self.param_order.append(buffer_name)
        return self.params[buffer_name]

    def _index(self, aff: Affine) -> str:
        n = len(self.xsizes)
        yflat = []
        if self.row_split is not None:
            aff, yflat = self._flatten(aff, "x", self.xsizes, range(self.row_split), "yindex")
            aff, flat = self._flatten(aff, "x", self.xsizes, range(self.row_split, n), "xindex")
        else:
            aff, flat = self._flatten(aff, "x", self.xsizes, [i for i in range(n) if i != self.ydim], "xindex")
        aff, rflat = self._flatten(aff, "r", self.rsizes, range(len(self.rsizes)), "rindex")
        return self._sum_text(aff, yflat + flat + rflat)

    def _row_vector_index(self, aff: Affine) -> str:
        """The index of a row vector's load (`_row_vector_split`): the x dims before `row_vectors`
        as the y dims of the block's rows (`yindex` where it walks them all row-major)."""
        k = self.row_vectors
        aff = aff.substitute({f"x{i}": Affine.var(f"y{i}") for i in range(k)})
        aff, flat = self._flatten(aff, "y", self.xsizes, range(k), "yindex")
        return self._sum_text(aff, flat)

    @staticmethod
    def _sum_text(aff: Affine, flats: list[str]) -> str:
        parts = [(v if c == 1 else f"{c}*{v}") for v, c in aff.terms] + flats
        if aff.const or not parts:
            parts.append(str(aff.const))
        return " + ".join(parts)

    @staticmethod
    def _flatten(aff: Affine, prefix: str, sizes: list[int], dims, flat_name: str) -> tuple[Affine, list[str]]:
        """Use `flat_name` (`xindex`, `rindex`, a row tile's `yindex`) where the index walks the
        x (r) dims `dims` row-major, as `flat_name` does: no div/mod. (The dim on a transposed
        tile's y axis is not part of `xindex`; a row tile's rows are `yindex`, its columns `xindex`.)"""
        dims = list(dims)
        if len(dims) < 2:
            return aff, []
        scale = aff.coeff(f"{prefix}{dims[-1]}")
        stride = 1
        for i in reversed(dims):
            if scale == 0 or aff.coeff(f"{prefix}{i}") != scale * stride:
                return aff, []
            stride *= sizes[i]
        rest = aff.substitute({f"{prefix}{i}": Affine(0) for i in dims})
        return rest, [flat_name if scale == 1 else f"{scale}*{flat_name}"]

    def emit(self, e: Expr) -> str:
        if e.op is Op.CONST:
            return literal(e.arg, e.dtype)
        key = id(e)
        if key in self.outer_cse:
            return self.outer_cse[key]
        if key in self.loop_cse:
            return self.loop_cse[key]
        in_loop = self.loop_lines is not None and self._in_loop(e)
        code = self._emit_code(e)
        if code is None:                      # a no-op cast
            name = self.emit(e.args[0])
        else:
            name = self._tmp()
            (self.loop_lines if in_loop else self.lines_outer).append(f"{name} = {code}")
        (self.loop_cse if in_loop else self.outer_cse)[key] = name
        return name

    def _emit_code(self, e: Expr) -> Optional[str]:
        op = e.op
        if op in (Op.LOAD, Op.GATHER):
            return self._emit_load(e)
        if op is Op.INDEX:
            return f"({self._index(e.arg)}).to(tl.int64)"
        if op in (Op.REDUCED, Op.SCANNED):
            raise AssertionError(f"{op.value} {e.arg} used before it is computed")
        if op is Op.CAST:
            return self._emit_cast(e)
        self.ops_used.add(op.value)
        if op in (Op.EXP2, Op.POW):
            self.helpers.add("exp2")
        if op is Op.FMOD and e.dtype.is_floating_point:
            self.helpers.add("fmod")
        if op in (Op.LOG1P, Op.EXPM1, Op.ATAN, Op.ATAN2):
            self.helpers.add(op.value)
        per_element = self.row_vectors is not None and self._row_domain(e) == 2
        args = [self.emit_elements(a) if per_element else self.emit(a) for a in e.args]
        if op in UNARY or op is Op.WHERE:
            args = [self._as_tensor(a, x) if (op in UNARY or i == 0) else a
                    for i, (a, x) in enumerate(zip(args, e.args))]
        if op in TYPED_OPERANDS or op is Op.ATAN2 or (op in BITWISE and e.dtype is not torch.bool):
            args = [self._as_tensor(a, x) for a, x in zip(args, e.args)]
        if op in PRECISE_FP32 and compute_dtype(e.dtype) is torch.float32 and not (
                op in QUOTIENTS and any(map(self._approximate, e.args))):
            return PRECISE_FP32[op](*args)
        if op is Op.SIGNBIT:
            bits, _ = FLOAT_BITS[compute_dtype(e.args[0].dtype)]
            return f"{args[0]}.to({bits}, bitcast=True) < 0"
        if op is Op.NEG and compute_dtype(e.dtype) in FLOAT_BITS:
            # the sign bit flipped, as eager's neg (Triton's `-x` is `0 - x`: +0.0 for x = +0.0,
            # and a multiplication by -1 keeps a NaN's sign on the GPU)
            bits, sign = FLOAT_BITS[compute_dtype(e.dtype)]
            return f"({args[0]}.to({bits}, bitcast=True) ^ {sign}).to({TL_TYPE[compute_dtype(e.dtype)]}, bitcast=True)"
        table = INT_TEMPLATES if (op in INT_TEMPLATES and not compute_dtype(e.args[0].dtype).is_floating_point) else TEMPLATES
        code = table[op](*args)
        if (op in COMPARISONS or op in (Op.NOT, Op.ISNAN, Op.SIGNBIT)) and not any(self._dependence(e)):
            # a comparison of scalars (a 0-dim tensor's element): Triton's interpreter types its
            # result as the operands' dtype, so broadcast against a block of bools it became a
            # float block and `|` failed; a select of two bool constants is typed bool (and folds
            # away on the GPU)
            code = f"tl.where({code}, True, False)"
        return code

    def _approximate(self, e: Expr) -> bool:
        """Does `e`'s value depend on an APPROXIMATE op?"""
        memo = self._approximate_memo
        if id(e) not in memo:
            memo[id(e)] = e.op in APPROXIMATE or any(map(self._approximate, e.args))
        return memo[id(e)]

    def _as_tensor(self, name: str, e: Expr) -> str:
        if e.op is Op.CONST:
            return f"tl.full([1], {name}, {TL_TYPE[compute_dtype(e.dtype)]})"
        return name

    def _emit_load(self, e: Expr) -> str:
        name, aff = e.arg[0], e.arg[1]
        ptr = self._param(name)
        if name in self.scalars:
            if e.op is Op.GATHER:
                raise NotImplementedError(f"a gather from the scalar argument {name}")
            user_mask = mask_of(e)
            return ptr if user_mask is None else f"tl.where({self.emit(user_mask)}, {ptr}, 0.0)"
        if self.row_split is not None:
            return self._emit_row_tile_load(e, ptr)
        if self.row_vectors is not None and self._row_domain(e) == 1:
            return _in_compute_dtype(f"tl.load({ptr} + ({self._row_vector_index(aff)}), ymask, other=0)", e.dtype)
        hx, hr = self._shape_of(e)
        vx = any(v.startswith("x") for v in aff.vars())
        vr = any(self._lane_var(v) for v in aff.vars())
        mask = self._mask_for(vx, vr)
        offset = self._index(aff)
        user_mask = mask_of(e)
        if e.op is Op.GATHER:
            target = self.emit_elements(e.args[0])
            offset += f" + {target}" if e.arg[2] == 1 else f" + {e.arg[2]} * {target}"
        if user_mask is not None:
            extra = self.emit_elements(user_mask)
            mask = f"({extra})" if mask is None else f"{mask} & ({extra})"
            # a block mask needs a block pointer, even where the index ignores those dims
            if hx and not vx and "xindex" not in offset:
                offset += " + 0 * xindex"
            if hr and not vr and "rindex" not in offset:
                offset += " + 0 * rindex"
        if self.ydim is not None and mask is not None:
            on_y, on_x = self._tile_axes(offset, aff)
            if mask == "xmask" and e.op is Op.LOAD and not (on_y and on_x):
                # a value per row or per column of the 2-D tile (the bias added to a transposed
                # operand): loaded as a [YBLOCK, 1] / [1, XBLOCK] vector, not once per element
                mask = "ymask" if on_y else "cmask" if on_x else None
            else:
                offset = self._whole_tile(offset, aff)
        text = f"tl.load({ptr} + ({offset})"
        if mask is not None:
            text += f", {mask}" + (", other=0" if e.dtype is not torch.bool else "")
        return _in_compute_dtype(text + self._eviction(e) + ")", e.dtype)

    def _emit_row_tile_load(self, e: Expr, ptr: str) -> str:
        """A load on a row tile: its pointer and mask [YBLOCK, 1] for a value per row, [1, XBLOCK]
        for one per column, the whole tile where it varies along both."""
        offset = self._index(e.arg[1])
        if e.op is Op.GATHER:
            target = self.emit(e.args[0])
            offset += f" + {target}" if e.arg[2] == 1 else f" + {e.arg[2]} * {target}"
        on_y, on_x = self._axes(e)
        mask = {(True, True): "xmask", (True, False): "ymask", (False, True): "cmask", (False, False): None}[(on_y, on_x)]
        text = f"tl.load({ptr} + ({offset})"
        if mask is not None:
            text += f", {mask}" + (", other=0" if e.dtype is not torch.bool else "")
        return _in_compute_dtype(text + ")", e.dtype)

    def _emit_cast(self, e: Expr) -> Optional[str]:
        src_e = e.args[0]
        src = self.emit(src_e)
        if e.dtype is torch.bool:
            return f"{src} != 0"
        if e.dtype in (torch.float16, torch.bfloat16) and src_e.dtype != e.dtype:
            return f"{src}.to({TL_TYPE[e.dtype]}).to(tl.float32)"
        if compute_dtype(src_e.dtype) == compute_dtype(e.dtype):
            return None
        return f"{src}.to({TL_TYPE[compute_dtype(e.dtype)]})"

    def _broadcast(self, name: str, e: Expr, hx: bool, hr: bool) -> str:
        """`name` as a tensor covering the tile ([XBLOCK] or [XBLOCK, RBLOCK] / [XBLOCK, 1])."""
        if self.row_split is not None:       # a row tile's values: as `_axes` says
            on_y, on_x = self._axes(e) if e.op is not Op.CONST else (False, False)
            if on_y and on_x:
                return name
            if e.op is Op.CONST:
                return f"tl.full([YBLOCK, XBLOCK], {name}, {TL_TYPE[compute_dtype(e.dtype)]})"
            if not on_y and not on_x:
                return f"({name} + tl.zeros([YBLOCK, XBLOCK], {TL_TYPE[compute_dtype(e.dtype)]}))"
            return f"tl.broadcast_to({name}, [YBLOCK, XBLOCK])"
        ex, er = self._shape_of(e) if e.op is not Op.CONST else (False, False)
        if ex == hx and er == hr and e.op is not Op.CONST:
            return name
        if self.is_reduction:
            shape = "[XBLOCK, RBLOCK]" if hr else "[XBLOCK, 1]"
        else:
            shape = self._full_shape()
        if e.op is Op.CONST:
            return f"tl.full({shape}, {name}, {TL_TYPE[compute_dtype(e.dtype)]})"
        if not ex and not er:      # (parenthesized: a cast appended applies to the sum)
            return f"({name} + tl.zeros({shape}, {TL_TYPE[compute_dtype(e.dtype)]}))"
        return f"tl.broadcast_to({name}, {shape})"

    # -- kernel assembly ---------------------------------------------------------------------

    def build(self) -> Optional[KernelSource]:
        self._shape_memo: dict[int, tuple[bool, bool, bool]] = {}
        self._approximate_memo: dict[int, bool] = {}
        self._axes_memo: dict[int, tuple[bool, bool]] = {}
        self._row_domain_memo: dict[int, int] = {}
        self._expanded: dict[str, str] = {}           # a row vector's name -> its elements' (emit_elements)
        self._reduced_exprs: list[Expr] = []
        self._picked: dict[tuple, tuple[str, str]] = {}         # see _define_picked
        self._pick_accs: dict[tuple, tuple[str, str]] = {}      # see _pick_accumulators
        self.prepare()
        if not self.stores or self.xnumel * self.rnumel == 0:
            return None
        self.is_reduction = bool(self.reductions or self.scans) and self.rnumel > 0 and bool(self.rsizes)
        if not self.is_reduction and self.rsizes:
            # a group with full members only but reduced dims (cannot happen) - treat as pointwise
            raise AssertionError("reduced dims without a reduction")
        self.inner = self._is_inner()
        self.kind = "poi" if not self.is_reduction else ("per" if self.rnumel <= persistent_limit(self.inner) else "red")
        if self.scans and self.rnumel <= persistent_limit(True):
            self.kind = "per"                   # a scan's row is always held whole (lower_scan's limit)
        if self.scans and self.kind != "per":
            raise AssertionError("a scan along rows too long to hold")
        self._plan_blocks()
        self.ydim = self._transposed_dim()
        self.row_split = self._row_split() if self.ydim is None else None
        if self.ydim is None and self.row_split is None:
            self.row_vectors = self._row_vector_split()
        self.int64 = self._needs_int64()
        body = self._body()
        header = self._header()
        params = ", ".join(self.params[b] for b in self.param_order)
        consts = "XBLOCK: tl.constexpr" + (", RBLOCK: tl.constexpr" if self.is_reduction else "") + \
            (", YBLOCK: tl.constexpr" if self.ydim is not None or self.row_split is not None
             or self.row_vectors is not None else "")
        text = "@triton.jit\ndef KERNEL_NAME(" + params + ", " + consts + "):\n"
        text += "".join(f"    {line}\n" for line in header + body)
        helpers = "".join(dict.fromkeys(HELPERS[k] for k in sorted(self.helpers)))   # (sort, sort_desc: one)
        digest = hashlib.sha256((helpers + text).encode()).hexdigest()[:12]
        ops = sorted(self.ops_used) or ["copy"]
        name = f"triton_{self.kind}_{'_'.join(ops[:6])}_{digest}"
        source = "import triton\nimport triton.language as tl\n\n\n" + helpers + text.replace("KERNEL_NAME", name)
        scalars = tuple(k for k, b in enumerate(self.param_order) if b in self.scalars)
        xnumel, ynumel = self._tile_numels()
        return KernelSource(name, source, list(self.param_order), self.kind, xnumel,
                            self.rnumel if self.is_reduction else 1, self.inner, ops, scalars, ynumel,
                            self.rblock_max, self.row_split is not None,
                            _prod(self.xsizes[self.row_vectors:]) if self.row_vectors is not None else 0)

    def _is_inner(self) -> bool:
        bodies = [b for _, b in self.reductions + self.scans]
        if not bodies or not self.rsizes:
            return True
        last = f"r{len(self.rsizes) - 1}"
        for body in bodies:
            for e in walk([body]):
                if e.op is Op.LOAD and e.arg[1].coeff(last) != 0:
                    return e.arg[1].coeff(last) == 1
        return True

    def _tile_axes(self, offset: str, aff: Affine) -> tuple[bool, bool]:
        """On a 2-D tile: does the access at `offset` (index `aff`) vary along y, along x?"""
        on_y = aff.coeff(f"x{self.ydim}") != 0 or "yindex" in offset
        on_x = "xindex" in offset or any(v.startswith("x") and v != f"x{self.ydim}" for v in aff.vars())
        return on_y, on_x

    def _whole_tile(self, offset: str, aff: Affine) -> str:
        """A 2-D tile's pointer covering both axes (masks are [YBLOCK, XBLOCK]; Triton broadcasts
        a mask to the pointer's shape, not the pointer to the mask's)."""
        on_y, on_x = self._tile_axes(offset, aff)
        if not on_y:
            offset += " + 0 * yindex"
        if not on_x:
            offset += " + 0 * xindex"
        return offset

    def _needs_int64(self) -> bool:
        sizes = {f"x{i}": s for i, s in enumerate(self.xsizes)}
        sizes.update({f"r{i}": s for i, s in enumerate(self.rsizes)})
        limit = 2 ** 31 - 1
        if self.xnumel * max(self.rnumel, 1) >= limit:
            return True
        for aff in self._final_affines():
            hi = aff.const + sum(max(0, c * (sizes[v] - 1)) for v, c in aff.terms)
            if hi >= limit:
                return True
        return False

    def _final_affines(self) -> list[Affine]:
        """Every index, a gather's at its largest target (`base + stride * (size - 1)`)."""
        roots = [b for _, b in self.reductions + self.scans] + [v for _, v, _, _ in self.stores]
        out = affines(roots)
        out += [e.arg[1] + max(0, e.arg[2] * (e.arg[3] - 1)) for e in walk(roots) if e.op is Op.GATHER]
        out += [s + max(0, v.arg[0] * (v.arg[1] - 1)) for _, v, s, _ in self.stores if v.op is Op.SCATTER_ADD]
        return out + [s for _, _, s, _ in self.stores]

    @staticmethod
    def _decompose(names: list[str], sizes: list[int], flat: str) -> list[str]:
        """`names[i] = ` the i-th index of row-major `flat` over `sizes`."""
        lines = []
        for i in range(len(sizes)):
            inner = _prod(sizes[i + 1:])
            text = flat if inner == 1 else f"({flat} // {inner})"
            if i > 0:
                text = f"{text} % {sizes[i]}"
            lines.append(f"{names[i]} = {text}")
        return lines

    def _tile_numels(self) -> tuple[int, int]:
        """(x, y) extents of the tile's grid: y is the 2-D tile's transposed dim, 1 for a 1-D tile."""
        if self.row_split is not None:
            ynumel = _prod(self.xsizes[:self.row_split])
        else:
            ynumel = 1 if self.ydim is None else self.xsizes[self.ydim]
        return self.xnumel // ynumel, ynumel

    def _header(self) -> list[str]:
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        lines = [f"xnumel = {self.xnumel}"]
        if self.is_reduction:
            lines += [f"rnumel = {self.rnumel}",
                      f"xoffset = {pid} * XBLOCK",
                      "xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
                      "xmask = xindex < xnumel",
                      "rbase = tl.arange(0, RBLOCK)[None, :]"]
            if self._r_even:
                lines.append(f"tl.static_assert({self.rnumel} % RBLOCK == 0)")
            for v in sorted(self._block_vars):
                inner = _prod(self.rsizes[int(v[1:]) + 1:])
                lines.append(f"tl.static_assert({inner} % RBLOCK == 0)")
        elif self.row_split is not None:
            k = self.row_split
            lines = self._tile_2d_header(pid) + ["ymask = yindex < ynumel", "cmask = xindex < xnumel",
                                                 "xmask = ymask & cmask"]
            n = len(self.xsizes)
            return (lines + self._decompose([f"x{i}" for i in range(k)], self.xsizes[:k], "yindex")
                    + self._decompose([f"x{i}" for i in range(k, n)], self.xsizes[k:], "xindex"))
        elif self.ydim is not None:
            lines = self._tile_2d_header(pid) + ["ymask = yindex < ynumel", "cmask = xindex < xnumel",
                                                 "xmask = ymask & cmask", f"x{self.ydim} = yindex"]
            others = [k for k in range(len(self.xsizes)) if k != self.ydim]
            return lines + self._decompose([f"x{k}" for k in others], [self.xsizes[k] for k in others], "xindex")
        else:
            lines += [f"xoffset = {pid} * XBLOCK",
                      "xindex = xoffset + tl.arange(0, XBLOCK)",
                      "xmask = xindex < xnumel"]
            if self.row_vectors is not None:        # the rows the block spans (_row_vector_split)
                k = self.row_vectors
                inner = _prod(self.xsizes[k:])
                lines += [f"yoffset = xoffset // {inner}",
                          "yindex = yoffset + tl.arange(0, YBLOCK)",
                          f"ymask = yindex < {_prod(self.xsizes[:k])}",
                          f"ylocal = (xindex // {inner} - yoffset).to(tl.int32)"]
                lines += self._decompose([f"y{i}" for i in range(k)], self.xsizes[:k], "yindex")
        return lines + self._decompose([f"x{i}" for i in range(len(self.xsizes))], self.xsizes, "xindex")

    def _tile_2d_header(self, pid: str) -> list[str]:
        """A 2-D tile's extents and indices: yindex [YBLOCK, 1] on grid axis 1, xindex [1, XBLOCK]."""
        ypid = "tl.program_id(1).to(tl.int64)" if self.int64 else "tl.program_id(1)"
        xnumel, ynumel = self._tile_numels()
        return [f"xnumel = {xnumel}", f"ynumel = {ynumel}",
                f"yoffset = {ypid} * YBLOCK",
                "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
                f"xoffset = {pid} * XBLOCK",
                "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]"]

    def _r_setup(self, offset: Optional[str]) -> list[str]:
        lines = [f"rindex = {offset} + rbase" if offset else "rindex = rbase", "rmask = rindex < rnumel"]
        names = [f"r{i}" for i in range(len(self.rsizes))]
        decomposed = self._decompose(names, self.rsizes, "rindex")
        if self._block_vars:               # one value a block (`_plan_blocks`)
            block = dict(zip(names, self._decompose(names, self.rsizes, "roffset")))
            decomposed = [block[n] if n in self._block_vars else line for n, line in zip(names, decomposed)]
        return lines + decomposed

    def _body(self) -> list[str]:
        if not self.is_reduction:
            self._emit_stores("full")
            self._emit_stores("out")
            return self.lines_outer
        if self.kind == "per":
            self.lines_outer += self._r_setup(None)
            for m, body in self.reductions:
                if m.node.kind in PICKS:
                    self._define_picked(m, body, lambda: self._pick_tiles(m.node.kind, body))
                    continue
                v = self._broadcast(self.emit(body), body, True, True)
                ident = identity(m.node.kind, body.dtype)
                red = self._reduce(m.node.kind, self._in_row(v, ident))
                self._define_reduced(m, body, red)
            for m, body in self.scans:
                self._define_scanned(m, body)
            self._emit_stores("full")
            self._emit_stores("out")
            return self.lines_outer
        # looped: one loop per stage of independent reductions, then one for the full-domain stores
        out: list[str] = []
        stages = self._stages()
        full_values = [v for _, v, _, role in self.stores if role == "full"]
        self._plan_eviction([[b for _, b in stage] for stage in stages] + ([full_values] if full_values else []))
        for stage in stages:
            accs = []
            for m, body in stage:
                if m.node.kind in PICKS:
                    accs.append(self._pick_accumulators(m, body))
                    continue
                acc = f"acc_{m.node.name}"
                ident = identity(m.node.kind, body.dtype)
                shape = "[XBLOCK, 1]" if m.node.name in self.online else "[XBLOCK, RBLOCK]"   # a row's max
                self.lines_outer.append(f"{acc} = tl.full({shape}, {ident}, {TL_TYPE[compute_dtype(body.dtype)]})")
                accs.append(acc)
            self._row_loop(out, lambda loop: self._emit_stage(loop, stage, accs))
            for (m, body), acc in zip(stage, accs):
                if m.node.kind in PICKS:
                    self._define_picked(m, body, lambda: acc)      # the lanes' picks, then the row's
                    continue
                if m.node.name in self.online:
                    self._define_reduced(m, body, acc)              # the row's max already
                    continue
                maximum = next((mx for mx, sm in self.online.items() if sm == m.node.name), None)
                if maximum is None:
                    self._define_reduced(m, body, self._reduce(m.node.kind, acc))
                    continue
                # the lanes' sums are all relative to the row's max; a row of -inf sums exp(nan)
                # in eager
                row_max = self.emit(expr(Op.REDUCED, (), maximum, self._reduced_dtype[maximum]))
                self._define_reduced(m, body, f"tl.where({row_max} == float(\"-inf\"), float(\"nan\"), "
                                              f"tl.sum({acc}, 1)[:, None])")
        if any(role == "full" for _, _, _, role in self.stores):
            self._row_loop(out, lambda loop: self._emit_stores("full"))
        self._emit_stores("out")
        out.extend(self.lines_outer)
        return out

    def _emit_stage(self, loop: list[str], stage: list, accs: list[str]):
        """The loop body updating one stage's accumulators (`accs`) with a block of the row."""
        picks_updated: set[tuple[str, str]] = set()
        for (m, body), acc in zip(stage, accs):
            if m.node.kind in PICKS:
                if acc not in picks_updated:         # (a pair of the same body shares its accumulators)
                    picks_updated.add(acc)
                    value, position = self._pick_tiles(m.node.kind, body)
                    order = PICKS[m.node.kind][0]
                    loop.append(f"{acc[0]}, {acc[1]} = _arg{order}_nan({acc[0]}, {acc[1]}, {value}, {position})")
                continue
            if m.node.name in self.online.values():
                continue                     # updated with its max, below
            partner = self.online.get(m.node.name)
            if partner is None and m.node.kind == "sum" and body.op is Op.MUL \
                    and compute_dtype(body.dtype).is_floating_point:
                # a sum of products (a variance's squares): one FMA a lane (Triton contracts no
                # op's multiply with another's add: settings.compile_options; a sum's rounding
                # is its own, no op's result is observable in it)
                a, b = (self.emit(x) for x in body.args)
                loop.append(f"{acc} = " + self._in_row(f"tl.fma({a}, {b}, {acc})", acc))
                continue
            v = self._broadcast(self.emit(body), body, True, True)
            if partner is None:
                loop.append(f"{acc} = " + self._in_row(COMBINE[m.node.kind](acc, v), acc))
                continue
            # online softmax, a block at a time: the row's running max (one value a row)
            # grows by each block's max, and the lanes' sums of exp(v - max) are rescaled by
            # exp(old max - new max), one exp a row (one pass over the row instead of two,
            # and one exp per element). (A running max per lane, exp(-|v - max|) per element
            # and no reduction across the block in the loop, measured slower on the H200:
            # cross-entropy 8192x32000 bf16 194 vs 168 us, more instructions per element)
            # While a row's max is -inf, 0 stands in for it (exp(-inf - -inf) would be NaN):
            # the row's -inf values then add exp(-inf) = 0, per row, not a test per element.
            sum_acc, block, new, shift = f"acc_{partner}", self._tmp(), self._tmp(), self._tmp()
            masked = self._in_row(v, 'float("-inf")')
            loop.append(f"{block} = {self._reduce('max', masked)}")
            loop.append(f"{new} = {_nan_max(acc, block)}")
            loop.append(f"{shift} = tl.where({new} == float(\"-inf\"), 0.0, {new})")
            exp_v = f"tl.exp2(({v} - {shift}) * {LOG2E})" if EXP2_ONLINE_SUM else f"tl.exp({v} - {shift})"
            loop.append(f"{sum_acc} = tl.fma({sum_acc}, tl.exp({acc} - {shift}), {self._in_row(exp_v, '0.0')})")
            loop.append(f"{acc} = {new}")

    def _stages(self) -> list[list]:
        """Reductions grouped by dependency depth: a stage only reads results of earlier stages,
        except that `sum(exp(b - max(b)))` shares its max's stage (`self.online`: max -> sum)."""
        depth: dict[str, int] = {}
        stages: list[list] = []
        self.online: dict[str, str] = {}
        self._reduced_dtype = {m.node.name: m.node.buffer.dtype for m, _ in self.reductions}
        bodies = {m.node.name: (m, b) for m, b in self.reductions}
        for m, body in self.reductions:
            maximum = _online_softmax_max(m, body, bodies)
            if maximum is not None and maximum not in self.online:
                self.online[maximum] = m.node.name
                d = depth[maximum]
            else:
                used = [e.arg for e in walk([body]) if e.op is Op.REDUCED]
                d = 1 + max((depth[n] for n in used), default=-1)
            depth[m.node.name] = d
            while len(stages) <= d:
                stages.append([])
            stages[d].append((m, body))
        return stages

    def _plan_eviction(self, loops: list[list[Expr]]):
        """Which row loads a later loop of this kernel reads again (`self._last_loop`: (buffer,
        index) -> the last loop reading it). Those are loaded `evict_last` before that loop, so
        the row is still in L2 when it comes back (group norm's normalize, re-reading what its
        statistics loop read, at L2 speed rather than from memory), and `evict_first` in it."""
        seen: dict[tuple, list[int]] = {}
        for k, roots in enumerate(loops):
            for e in walk(roots):
                if e.op is Op.LOAD and any(v.startswith("r") for v in e.arg[1].vars()):
                    where = seen.setdefault((e.arg[0], e.arg[1]), [])
                    if k not in where:
                        where.append(k)
        self._last_loop = {key: where[-1] for key, where in seen.items() if len(where) > 1}
        self._loop_no = -1

    def _eviction(self, e: Expr) -> str:
        last = self._last_loop.get((e.arg[0], e.arg[1]))
        if last is None or self.loop_lines is None:
            return ""
        return ', eviction_policy="evict_last"' if self._loop_no < last else ', eviction_policy="evict_first"'

    def _row_loop(self, out: list[str], emit_body):
        """One loop over the row, its body written by `emit_body(lines)`. Where the blocks may not
        tile the row (`_r_even` false), the body is written twice (`settings.peel_tail`): once for
        the whole blocks, without lane masks, and once for the last, partial block, with them
        (a row of 32000 logits in blocks of 4096: seven blocks unmasked, one masked).
        `_lanes_in_row` says, while a body is written, whether its lanes need no mask."""
        self._loop_no += 1
        if self._r_even or not settings.peel_tail:
            emit_body(self._open_loop())
            out.extend(self.lines_outer)
            out.append(f"for roffset in range(0, {self.rnumel}, RBLOCK):")
            out.extend("    " + line for line in self.loop_lines)
        else:
            self._lanes_in_row = True
            emit_body(self._open_loop())
            whole_blocks = self.loop_lines
            self._lanes_in_row = False
            emit_body(self._open_loop())
            whole = f"({self.rnumel} // RBLOCK) * RBLOCK"
            out.extend(self.lines_outer)
            out.append(f"for roffset in range(0, {whole}, RBLOCK):")
            out.extend("    " + line for line in whole_blocks)
            out.append(f"if {self.rnumel} % RBLOCK != 0:")
            out.append(f"    roffset = {whole}")
            out.extend("    " + line for line in self.loop_lines)
        self.lines_outer = []
        self.loop_lines = None
        self.loop_cse = {}

    def _open_loop(self) -> list[str]:
        self.loop_lines = self._r_setup("roffset")
        self.loop_cse = {}
        return self.loop_lines

    def _reduce(self, kind: str, tile: str) -> str:
        if kind in HELPERS:
            self.helpers.add(kind)
        return REDUCE[kind].format(tile) + "[:, None]"

    def _pick_tiles(self, kind: str, body: Expr) -> tuple[str, str]:
        """The (value, position) tiles a pick reduction (PICKS) combines: the body and each lane's
        position in the row (`_row_position`); lanes past the row's end hold the identity of the
        pick's order and the position `rnumel`, after every element's, so that a row of -inf
        (argmax) still picks its first element."""
        value = self._broadcast(self.emit(body), body, True, True)
        return (self._in_row(value, identity(kind, body.dtype)), self._in_row(self._position_tile(), str(self.rnumel)))

    def _position_tile(self) -> str:
        """Each lane's position in its row (`_row_position`), as a tile."""
        return self._broadcast(self.emit(self.position), self.position, True, True)

    def _pick_accumulators(self, member, body: Expr) -> tuple[str, str]:
        """A looped kernel's (value, position) accumulators of a pick reduction, one pair a lane:
        each lane's pick among the elements it has seen (those of earlier blocks come first in the
        row, so a tie keeps the earlier). Shared by the pair of one body (argmax and its value)."""
        order = PICKS[member.node.kind][0]
        key = (order, id(body))
        if key not in self._pick_accs:
            value, position = f"acc_{member.node.name}", f"acc_{member.node.name}_at"
            ident = identity(order, body.dtype)
            self.lines_outer.append(f"{value} = tl.full([XBLOCK, RBLOCK], {ident}, {TL_TYPE[compute_dtype(body.dtype)]})")
            self.lines_outer.append(f"{position} = tl.full([XBLOCK, RBLOCK], {self.rnumel}, tl.int64)")
            self._pick_accs[key] = (value, position)
        return self._pick_accs[key]

    def _define_picked(self, member, body: Expr, tiles):
        """The result of a pick reduction (PICKS) of `body`: the pick of each row among the
        (value, position) tiles `tiles()` gives, one `tl.reduce` of pairs for the pair of one body
        (max.dim's values and indices), and of that pick its position or value."""
        order, keeps = PICKS[member.node.kind]
        key = (order, id(body))
        if key not in self._picked:
            value, position = tiles()
            self.helpers.add(f"arg{order}")
            self.ops_used.add(f"arg{order}")
            picked_value, picked_position = self._tmp(), self._tmp()
            self.lines_outer.append(f"{picked_value}, {picked_position} = "
                                    f"tl.reduce(({value}, {position}), 1, _arg{order}_nan)")
            self._picked[key] = (f"{picked_value}[:, None]", f"{picked_position}[:, None]")
        value, position = self._picked[key]
        if keeps == "index":
            self._define_reduced(member, body, position, torch.int64)
        else:
            self._define_reduced(member, body, value)

    def _define_reduced(self, member, body: Expr, code: str, code_dtype: Optional[torch.dtype] = None):
        """`code`, of `code_dtype` (default: the body's), as the REDUCED result of `member`."""
        name = self._tmp()
        out_type = compute_dtype(member.node.buffer.dtype)
        if compute_dtype(code_dtype or body.dtype) != out_type:
            code = f"({code}).to({TL_TYPE[out_type]})"
        self.lines_outer.append(f"{name} = {code}")
        red = expr(Op.REDUCED, (), member.node.name, member.node.buffer.dtype)
        self.outer_cse[id(red)] = name
        self._reduced_exprs.append(red)      # keeps the interned expression alive

    def _emit_stores(self, role: str):
        """Every value first, then the stores: a value may load a graph input that another store of
        this kernel overwrites (the old value is meant: graph_lowering._write_back)."""
        stores = [(buf, value, index, r) for buf, value, index, r in self.stores
                  if (r in ("out", "reduction")) == (role == "out")]
        for buf, value, index, _ in stores:
            if value.op is Op.SCATTER_ADD:             # (a scatter's kernel stores nothing else)
                self._emit_scatter_add(buf, value, index)
        stores = [st for st in stores if st[1].op is not Op.SCATTER_ADD]
        values = [self._broadcast(self.emit_elements(value), value, True, self.is_reduction and r in ("full", "scan"))
                  for _, value, _, r in stores]
        for (buf, value, index, r), v in zip(stores, values):
            ptr = self._param(buf.name)
            full = self.is_reduction and r in ("full", "scan")
            v = _as_stored(v, value.dtype, buf.dtype)
            # the pointer covers the whole tile, even where the index ignores some dims
            offset = self._index(index)
            if self.row_split is not None:
                offset = self._pad_to_tile(offset, *self._row_axes(index))
            elif self.ydim is not None:
                offset = self._whole_tile(offset, index)
            elif not any(v_.startswith("x") for v_ in index.vars()) and "xindex" not in offset:
                offset += " + 0 * xindex"
            if full and not any(self._lane_var(v_) for v_ in index.vars()) and "rindex" not in offset:
                offset += " + 0 * rindex"
            mask = "xmask & rmask" if full and not self._lanes_in_row else "xmask"
            keep = self._kept.get(buf.name)
            if keep is not None:                       # a scan's first `keep` positions (topk)
                mask += f" & ({self._position_tile()} < {keep})"
            target = self.loop_lines if (self.loop_lines is not None) else self.lines_outer
            target.append(f"tl.store({ptr} + ({offset}), {v}, {mask})")


    def _emit_scatter_add(self, buf, store: Expr, index: Affine):
        """A ScatterNode's adds (a pointwise kernel over the values): each lane adds its value at
        `index + stride * position` where its mask holds, atomically (positions repeat); or, not
        accumulating, stores it there."""
        value, position, mask = (self._broadcast(self.emit(e), e, True, False) for e in store.args)
        stride = store.arg[0]
        value = _as_stored(value, store.args[0].dtype, buf.dtype)
        offset = self._index(index) + (f" + {position}" if stride == 1 else f" + {stride} * {position}")
        if not store.arg[2]:                 # a scatter without accumulate: any one value of a repeat
            self.ops_used.add("scatter")
            self.lines_outer.append(f"tl.store({self._param(buf.name)} + ({offset}), {value}, xmask & ({mask}))")
            return
        self.ops_used.add("scatter_add")
        self.lines_outer.append(f"tl.atomic_add({self._param(buf.name)} + ({offset}), {value}, "
                                f"xmask & ({mask}), sem=\"relaxed\")")

    def _define_scanned(self, member, body: Expr):
        """The scan of `body` along the tile's rows (the lanes past a row's end hold the identity,
        and come after every element of the row), for the stores and the members reading it.
        A position scan (ir.POSITION_SCANS) scans (value, position) pairs, or sorts packed keys
        (SORT_KEY), and keeps the positions."""
        kind = member.node.kind
        self.ops_used.add(kind if kind in POSITION_SCANS else f"cum{kind}")
        if kind in HELPERS:
            self.helpers.add(kind)
        v = self._broadcast(self.emit(body), body, True, True)
        name = self._tmp()
        if kind in POSITION_SCANS:
            position = self._position_tile()
            if kind in ("sort", "sort_desc"):
                # lanes past the row's end sort after every element; a key's low bits are its
                # position: 16 of an int32 key (values of 16 bits or fewer), 32 of an int64 one
                narrow = body.dtype.itemsize <= 2
                helper, bits = ("_sort_key16", 16) if narrow else ("_sort_key", 32)
                key = f"{helper}({v}, {position}, {SORT_KIND.get(body.dtype, 0)}, {kind == 'sort_desc'})"
                code = f"tl.sort({self._in_row(key, str(2 ** (2 * bits - 1) - 1))}, 1) & {2 ** bits - 1}"
                self.lines_outer.append(f"{name} = ({code}).to(tl.int64)" if narrow else f"{name} = {code}")
            else:
                # lanes past the row's end come after every element: nothing they hold reaches one
                self.lines_outer.append(f"_, {name} = tl.associative_scan(({v}, {position}), 1, _{kind}_nan)")
            scanned = expr(Op.SCANNED, (), member.node.name, torch.int64)
            self.outer_cse[id(scanned)] = name
            self._reduced_exprs.append(scanned)
            return
        self.lines_outer.append(f"{name} = " + SCAN[kind].format(self._in_row(v, identity(kind, body.dtype))))
        scanned = expr(Op.SCANNED, (), member.node.name, body.dtype)
        self.outer_cse[id(scanned)] = name
        self._reduced_exprs.append(scanned)      # keeps the interned expression alive


def _in_compute_dtype(loaded: str, dtype: torch.dtype) -> str:
    """A load of a `dtype` buffer as the kernel computes with it (fp16 / bf16 in fp32)."""
    return loaded if compute_dtype(dtype) == dtype else f"{loaded}.to({TL_TYPE[compute_dtype(dtype)]})"


def _as_stored(v: str, dtype: torch.dtype, buffer_dtype: torch.dtype) -> str:
    """Value `v` (of `dtype`, computed in compute_dtype) as a buffer of `buffer_dtype` holds it."""
    if compute_dtype(buffer_dtype) != buffer_dtype or (dtype != buffer_dtype and buffer_dtype is not torch.bool):
        return f"{v}.to({TL_TYPE[buffer_dtype]})"
    return v


def _online_softmax_max(member, body: Expr, bodies: dict) -> Optional[str]:
    """The max reduction whose result `body` subtracts when `member` is `sum(exp(b - max(b)))`
    over the same `b` (softmax, log_softmax, cross-entropy), or None."""
    if member.node.kind != "sum" or body.op is not Op.EXP or body.args[0].op is not Op.SUB:
        return None
    b, sub = body.args[0].args
    if sub.op is not Op.REDUCED or sub.arg not in bodies or sub.dtype != body.dtype:
        return None
    m, mb = bodies[sub.arg]
    if m.node.kind != "max" or mb is not b or not b.dtype.is_floating_point:
        return None
    return sub.arg


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def generate(group: Group, scalars: frozenset = frozenset()) -> Optional[KernelSource]:
    """The kernel for `group`, or None when it has nothing to store (dead) or no elements.
    `scalars`: the buffers it reads that are passed by value (host scalars)."""
    return KernelBuilder(group, scalars).build()
