"""Lowerings of elementary functions beyond Triton's own `tl.*` math: log1p, expm1, atan and
atan2 (codegen's fp32 helpers: libdevice does not run under the interpreter), and what is built
from them and from tl's exp / log / sqrt: the inverse trigonometric and (inverse) hyperbolic
functions, round-half-to-even, log10, fmax / fmin, copysign, signbit, heaviside, hypot, sinc,
logaddexp and xlogy. Each keeps eager's special values (a zero's sign, infinities, NaN) and
stays within a few ulp of eager's libm, in fp32 (fp16 / bf16 are computed in fp32): fp64 ones
stay aten calls (`_fp32_math`), except where the formula is exact in any float type.
"""
from __future__ import annotations

import math

import torch

from .ir import Op, const
from .lowerings import NotLowerable, binary, out_meta, pointwise, register, unary, where

aten = torch.ops.aten


def _fp32_math(node) -> None:
    dtype = out_meta(node).dtype
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise NotLowerable(f"{node.target.overloadpacket.__name__} of {dtype}")


def _c(value, like):
    return const(value, like.dtype)


def _signed(x, magnitude):
    """`magnitude` (>= 0) with x's sign; a zero x itself (its sign kept)."""
    zero = _c(0, x)
    return where(binary(Op.EQ, x, zero), x, where(binary(Op.LT, x, zero), unary(Op.NEG, magnitude), magnitude))


@register(aten.log1p, aten.expm1)
def lower_log1p_expm1(lw, node, x):
    """Accurate near 0 from tl arithmetic (codegen's LOG1P_F32, EXPM1_F32): softplus, mish, ELU,
    SELU and CELU decompose into them. fp32 math only (fp16 and bf16 are computed in fp32): fp64
    stays an aten call."""
    _fp32_math(node)
    op = Op.LOG1P if node.target.overloadpacket is aten.log1p else Op.EXPM1
    return pointwise(node, lambda a: unary(op, a), [x])


@register(aten.logaddexp)
def lower_logaddexp(lw, node, a, b):
    """log(exp(a) + exp(b)) as eager's: the larger plus log1p(exp(smaller - larger)), equal
    operands (infinities of one sign too) a + log 2; a NaN propagates."""
    _fp32_math(node)

    def fn(x, y):
        hi, lo = binary(Op.MAX, x, y), binary(Op.MIN, x, y)
        tail = unary(Op.LOG1P, unary(Op.EXP, binary(Op.SUB, lo, hi)))
        return where(binary(Op.EQ, x, y), binary(Op.ADD, x, const(math.log(2), x.dtype)), binary(Op.ADD, hi, tail))
    return pointwise(node, fn, [a, b])


@register(aten.xlogy)
def lower_xlogy(lw, node, a, b):
    """x * log(y), 0 where x is 0 (KL divergence's `target * log(target)`), NaN where y is."""
    _fp32_math(node)

    def fn(x, y):
        product = where(binary(Op.EQ, x, const(0, x.dtype)), const(0, x.dtype), binary(Op.MUL, x, unary(Op.LOG, y)))
        return where(binary(Op.NE, y, y), const(math.nan, x.dtype), product)
    return pointwise(node, fn, [a, b])


@register(aten.round.default, aten.round.decimals)
def lower_round(lw, node, x, *, decimals=0):
    """Half to even, as eager's nearbyint (with `decimals`, eager's scaling by 10^decimals in the
    result's float type, then the rounding, then the scaling back)."""
    if not out_meta(node).dtype.is_floating_point:
        if decimals:
            raise NotLowerable("round of an integer tensor with decimals")
        return pointwise(node, lambda a: a, [x])

    def fn(a):
        if decimals == 0:
            return _nearest_even(a)
        scale = _c(float(10 ** abs(decimals)), a)
        if decimals < 0:
            return binary(Op.MUL, _nearest_even(binary(Op.DIV, a, scale)), scale)
        return binary(Op.DIV, _nearest_even(binary(Op.MUL, a, scale)), scale)
    return pointwise(node, fn, [x])


def _nearest_even(a):
    """floor(a), one up where the fraction a - floor(a) (exact in binary floats) is above a half,
    or exactly a half and the floor odd; a zero result keeps a's sign (round(-0.3) is -0.0)."""
    down = unary(Op.FLOOR, a)
    frac = binary(Op.SUB, a, down)
    half = _c(0.5, a)
    evens = binary(Op.MUL, unary(Op.FLOOR, binary(Op.MUL, down, half)), _c(2, a))
    odd = binary(Op.NE, binary(Op.SUB, down, evens), _c(0, a))
    up = binary(Op.OR, binary(Op.GT, frac, half), binary(Op.AND, binary(Op.EQ, frac, half), odd))
    rounded = where(up, binary(Op.ADD, down, _c(1, a)), down)
    return where(binary(Op.EQ, rounded, _c(0, a)), binary(Op.MUL, a, _c(0, a)), rounded)


@register(aten.log10)
def lower_log10(lw, node, x):
    _fp32_math(node)
    return pointwise(node, lambda a: binary(Op.MUL, unary(Op.LOG2, a), _c(math.log10(2), a)), [x])


@register(aten.sinh)
def lower_sinh(lw, node, x):
    """fdlibm's: (t + t / (t + 1)) / 2 with t = expm1(|x|), which keeps a small x's digits;
    from |x| = 9 on, exp(|x| / 2)^2 / 2 (exp(|x|) alone would overflow before sinh does)."""
    _fp32_math(node)

    def fn(x):
        a = unary(Op.ABS, x)
        t = unary(Op.EXPM1, a)
        small = binary(Op.MUL, _c(0.5, a), binary(Op.ADD, t, binary(Op.DIV, t, binary(Op.ADD, t, _c(1, a)))))
        return _signed(x, where(binary(Op.GT, a, _c(9, a)), _exp_half_squared(a), small))
    return pointwise(node, fn, [x])


def _exp_half_squared(a):
    """exp(a) / 2 for large a, as (exp(a / 2) / 2) * exp(a / 2): finite as far as it is."""
    e = unary(Op.EXP, binary(Op.MUL, a, _c(0.5, a)))
    return binary(Op.MUL, binary(Op.MUL, e, _c(0.5, a)), e)


@register(aten.cosh)
def lower_cosh(lw, node, x):
    """fdlibm's: 1 + t^2 / (2 (1 + t)) with t = expm1(|x|) below ln(2) / 2, exp(|x|) / 2 +
    1 / (2 exp(|x|)) up to 9, then exp(|x| / 2)^2 / 2."""
    _fp32_math(node)

    def fn(x):
        a = unary(Op.ABS, x)
        one, half = _c(1, a), _c(0.5, a)
        t = unary(Op.EXPM1, a)
        tiny = binary(Op.ADD, one, binary(Op.DIV, binary(Op.MUL, t, t),
                                          binary(Op.MUL, _c(2, a), binary(Op.ADD, one, t))))
        e = unary(Op.EXP, a)
        mid = binary(Op.ADD, binary(Op.MUL, half, e), binary(Op.DIV, half, e))
        return where(binary(Op.LT, a, _c(0.34657359027997264, a)), tiny,
                     where(binary(Op.GT, a, _c(9, a)), _exp_half_squared(a), mid))
    return pointwise(node, fn, [x])


@register(aten.tan)
def lower_tan(lw, node, x):
    _fp32_math(node)
    return pointwise(node, lambda a: binary(Op.DIV, unary(Op.SIN, a), unary(Op.COS, a)), [x])


@register(aten.asinh)
def lower_asinh(lw, node, x):
    """fdlibm's three ranges of |x|: log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) up to 2,
    log(2|x| + 1 / (sqrt(x^2 + 1) + |x|)) up to 2^12, log(|x|) + log(2) beyond (x^2 would
    overflow; the dropped term is below an ulp); x's sign put back."""
    _fp32_math(node)

    def fn(x):
        a = unary(Op.ABS, x)
        one = _c(1, a)
        sq = binary(Op.MUL, a, a)
        root = unary(Op.SQRT, binary(Op.ADD, sq, one))
        small = unary(Op.LOG1P, binary(Op.ADD, a, binary(Op.DIV, sq, binary(Op.ADD, one, root))))
        mid = unary(Op.LOG, binary(Op.ADD, binary(Op.MUL, _c(2, a), a), binary(Op.DIV, one, binary(Op.ADD, root, a))))
        big = binary(Op.ADD, unary(Op.LOG, a), _c(math.log(2), a))
        return _signed(x, where(binary(Op.GT, a, _c(4096, a)), big, where(binary(Op.GT, a, _c(2, a)), mid, small)))
    return pointwise(node, fn, [x])


@register(aten.acosh)
def lower_acosh(lw, node, x):
    """fdlibm's ranges: log1p(t + sqrt(2t + t^2)), t = x - 1 (exact), below 2;
    log(2x - 1 / (x + sqrt(x^2 - 1))) up to 2^12; log(x) + log(2) beyond; NaN below 1."""
    _fp32_math(node)

    def fn(x):
        one = _c(1, x)
        t = binary(Op.SUB, x, one)
        small = unary(Op.LOG1P, binary(Op.ADD, t, unary(Op.SQRT, binary(Op.ADD, binary(Op.MUL, _c(2, x), t),
                                                                            binary(Op.MUL, t, t)))))
        root = unary(Op.SQRT, binary(Op.SUB, binary(Op.MUL, x, x), one))
        mid = unary(Op.LOG, binary(Op.SUB, binary(Op.MUL, _c(2, x), x), binary(Op.DIV, one, binary(Op.ADD, x, root))))
        big = binary(Op.ADD, unary(Op.LOG, x), _c(math.log(2), x))
        value = where(binary(Op.GT, x, _c(4096, x)), big, where(binary(Op.GE, x, _c(2, x)), mid, small))
        return where(binary(Op.LT, x, one), _c(math.nan, x), value)
    return pointwise(node, fn, [x])


@register(aten.atanh)
def lower_atanh(lw, node, x):
    """fdlibm's: log1p(2a + 2a^2 / (1 - a)) / 2 below a = |x| = 1/2, log1p(2a / (1 - a)) / 2
    above (+-inf at +-1, NaN beyond); x's sign put back."""
    _fp32_math(node)

    def fn(x):
        a = unary(Op.ABS, x)
        two, half = _c(2, a), _c(0.5, a)
        gap = binary(Op.SUB, _c(1, a), a)
        twice = binary(Op.MUL, two, a)
        lo = unary(Op.LOG1P, binary(Op.ADD, twice, binary(Op.DIV, binary(Op.MUL, twice, a), gap)))
        hi = unary(Op.LOG1P, binary(Op.DIV, twice, gap))
        return _signed(x, binary(Op.MUL, half, where(binary(Op.LT, a, half), lo, hi)))
    return pointwise(node, fn, [x])


@register(aten.atan)
def lower_atan(lw, node, x):
    _fp32_math(node)
    return pointwise(node, lambda a: unary(Op.ATAN, a), [x])


@register(aten.atan2)
def lower_atan2(lw, node, y, x):
    _fp32_math(node)
    return pointwise(node, lambda a, b: binary(Op.ATAN2, a, b), [y, x])


def _cosine_side(x):
    """sqrt((1 - x)(1 + x)): sqrt(1 - x^2) without cancelling near |x| = 1 (1 - x is exact
    there); NaN beyond 1."""
    one = _c(1, x)
    return unary(Op.SQRT, binary(Op.MUL, binary(Op.SUB, one, x), binary(Op.ADD, one, x)))


@register(aten.asin)
def lower_asin(lw, node, x):
    """atan2(x, sqrt(1 - x^2))."""
    _fp32_math(node)
    return pointwise(node, lambda a: binary(Op.ATAN2, a, _cosine_side(a)), [x])


@register(aten.acos)
def lower_acos(lw, node, x):
    """atan2(sqrt(1 - x^2), x)."""
    _fp32_math(node)
    return pointwise(node, lambda a: binary(Op.ATAN2, _cosine_side(a), a), [x])


@register(aten.hypot)
def lower_hypot(lw, node, a, b):
    """The larger magnitude times sqrt(1 + r^2), r the smaller over the larger (no overflow
    or underflow of the squares); +inf where either is infinite, even if the other is NaN."""
    _fp32_math(node)

    def fn(x, y):
        ax, ay = unary(Op.ABS, x), unary(Op.ABS, y)
        hi, lo = binary(Op.MAX, ax, ay), binary(Op.MIN, ax, ay)
        zero, one, inf = _c(0, x), _c(1, x), _c(math.inf, x)
        r = binary(Op.DIV, lo, where(binary(Op.EQ, hi, zero), one, hi))
        h = binary(Op.MUL, hi, unary(Op.SQRT, binary(Op.ADD, one, binary(Op.MUL, r, r))))
        h = where(binary(Op.OR, unary(Op.ISNAN, x), unary(Op.ISNAN, y)), _c(math.nan, x), h)
        return where(binary(Op.OR, binary(Op.EQ, ax, inf), binary(Op.EQ, ay, inf)), inf, h)
    return pointwise(node, fn, [a, b])


@register(aten.fmax, aten.fmin)
def lower_fmax_fmin(lw, node, a, b):
    """The larger (smaller) of the two, a NaN operand ignored (NaN only where both are)."""
    op = Op.MAX if node.target.overloadpacket is aten.fmax else Op.MIN

    def fn(x, y):
        return where(unary(Op.ISNAN, x), y, where(unary(Op.ISNAN, y), x, binary(op, x, y)))
    return pointwise(node, fn, [a, b])


@register(aten.signbit)
def lower_signbit(lw, node, x):
    """The sign bit itself: set for -0.0 (and a negative NaN), as eager's."""
    if not x.dtype.is_floating_point:
        return pointwise(node, lambda a: binary(Op.LT, a, _c(0, a)), [x], compute=x.dtype)
    return pointwise(node, lambda a: unary(Op.SIGNBIT, a, torch.bool), [x], compute=x.dtype)


@register(aten.copysign)
def lower_copysign(lw, node, a, b):
    """|a| with b's sign bit (-0.0's too): exact in every float type."""
    def fn(x, y):
        magnitude = unary(Op.ABS, x)
        return where(unary(Op.SIGNBIT, y, torch.bool), unary(Op.NEG, magnitude), magnitude)
    return pointwise(node, fn, [a, b])


@register(aten.heaviside)
def lower_heaviside(lw, node, x, values):
    """`values` where x is 0, else 1 where x > 0 and 0 elsewhere (NaN included), as eager's."""
    def fn(a, v):
        zero = _c(0, a)
        step = where(binary(Op.GT, a, zero), _c(1, a), zero)
        return where(binary(Op.EQ, a, zero), v, step)
    return pointwise(node, fn, [x, values])


@register(aten.sinc)
def lower_sinc(lw, node, x):
    """sin(pi x) / (pi x) with pi x rounded first (eager's), 1 at 0."""
    _fp32_math(node)

    def fn(a):
        product = binary(Op.MUL, a, _c(math.pi, a))
        return where(binary(Op.EQ, a, _c(0, a)), _c(1, a), binary(Op.DIV, unary(Op.SIN, product), product))
    return pointwise(node, fn, [x])
