"""aten op -> loop IR: the lowering table.

Each entry takes the `GraphLowering` (for realizing values and adding reduction nodes), the fx
node (its `meta['val']` gives the result's dtype, shape and device) and the op's arguments with
fx nodes replaced by `Value`s. It returns a `Value` (or a list/tuple of them). An op that is not
in the table, or whose entry raises `NotLowerable`, runs as an extern aten call instead.

Pointwise ops build lazy values (their `Expr` inlines into whoever reads them); reductions add a
`ReductionNode`; views are index rewrites (values.py).
"""
from __future__ import annotations

import math
import operator
from typing import Callable, Optional, Sequence

import torch

from .ir import Affine, Expr, Op, cast, const, expr
from .values import Value, broadcast_to, lazy, view_by_remap

aten = torch.ops.aten
prims = torch.ops.prims

LOWERINGS: dict = {}


class NotLowerable(Exception):
    """This call cannot be lowered (unsupported arguments): run it as an extern aten call."""


class GraphNotLowerable(Exception):
    """Neither a kernel nor an aten call computes this call right on our buffers (an `as_strided`
    over a storage we cannot lay out as eager does): the whole graph runs as captured."""


def register(*ops):
    def decorator(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return decorator


def lookup(target) -> Optional[Callable]:
    fn = LOWERINGS.get(target)
    if fn is None and isinstance(target, torch._ops.OpOverload):
        fn = LOWERINGS.get(target.overloadpacket)
    return fn


# ---------------------------------------------------------------------------------------------
# expression builders, with constant folding
# ---------------------------------------------------------------------------------------------

_FOLD = {
    Op.NEG: operator.neg, Op.ABS: abs, Op.EXP: math.exp, Op.LOG: math.log, Op.SQRT: math.sqrt,
    Op.ADD: operator.add, Op.SUB: operator.sub, Op.MUL: operator.mul, Op.DIV: operator.truediv,
    Op.MAX: max, Op.MIN: min, Op.EQ: operator.eq, Op.NE: operator.ne, Op.LT: operator.lt,
    Op.LE: operator.le, Op.GT: operator.gt, Op.GE: operator.ge,
    # (two's complement bit by bit: in range for in-range operands, and logical on bools)
    Op.AND: operator.and_, Op.OR: operator.or_, Op.XOR: operator.xor,
}


def unary(op: Op, a: Expr, dtype: Optional[torch.dtype] = None) -> Expr:
    dtype = dtype or (torch.bool if op in (Op.NOT, Op.ISNAN) else a.dtype)
    if a.op is Op.CONST and op in _FOLD:
        try:
            return const(_FOLD[op](a.arg), dtype)
        except (ValueError, OverflowError):
            pass
    return expr(op, (a,), None, dtype)


def binary(op: Op, a: Expr, b: Expr) -> Expr:
    from .ir import COMPARISONS
    dtype = torch.bool if op in COMPARISONS else a.dtype      # (AND, OR, XOR: bools or integers)
    if a.op is Op.CONST and b.op is Op.CONST and op in _FOLD:
        try:
            return const(_FOLD[op](a.arg, b.arg), dtype)
        except (ZeroDivisionError, OverflowError, ValueError):
            pass
    if op is Op.MUL and b.op is Op.CONST and b.arg == 1:
        return a
    if op in (Op.ADD, Op.SUB) and b.op is Op.CONST and b.arg == 0 and b.dtype is not torch.bool:
        return a
    return expr(op, (a, b), None, dtype)


def where(c: Expr, a: Expr, b: Expr) -> Expr:
    if c.op is Op.CONST:
        return a if c.arg else b
    return expr(Op.WHERE, (c, a, b), None, a.dtype)


def from_end(index: Expr, size: int) -> Expr:
    """An int64 index into a dim of `size`, a negative one counting from the end (Python's rule)."""
    index = cast(index, torch.int64)
    return where(binary(Op.LT, index, const(0, torch.int64)), binary(Op.ADD, index, const(size, torch.int64)), index)


def index_expr(i: Affine, dtype=torch.int64) -> Expr:
    if not i.terms:
        return const(i.const, dtype)
    return expr(Op.INDEX, (), i, dtype)


# ---------------------------------------------------------------------------------------------
# pointwise helpers
# ---------------------------------------------------------------------------------------------

def out_meta(node):
    val = node.meta["val"]
    return val


def operand(x, index, dtype) -> Expr:
    if isinstance(x, Value):
        return cast(x.load(index), dtype)
    if isinstance(x, (bool, int, float)):
        return const(x, dtype)
    raise NotLowerable(f"operand {type(x).__name__}")


def pointwise(node, fn: Callable[..., Expr], operands: Sequence, compute: Optional[torch.dtype] = None,
              out_dtype: Optional[torch.dtype] = None, sizes=None, device=None) -> Value:
    """A lazy value computing `fn(*operand_exprs)` per element, operands broadcast and cast to
    `compute` (default: the result dtype), the result cast to the node's dtype."""
    meta = out_meta(node)
    sizes = tuple(meta.shape) if sizes is None else tuple(sizes)
    out_dtype = out_dtype or meta.dtype
    device = device or meta.device
    compute = compute or out_dtype
    if out_dtype.is_complex or compute.is_complex:
        raise NotLowerable("complex")
    ops = []
    for x in operands:
        if isinstance(x, Value):
            if x.device != device or x.dtype.is_complex:
                raise NotLowerable("operand on another device")
            x = broadcast_to(x, sizes)
        ops.append(x)

    def loader(idx):
        return cast(fn(*[operand(x, idx, compute) for x in ops]), out_dtype)
    return lazy(sizes, out_dtype, device, loader)


def compute_dtype_of(node, *args) -> torch.dtype:
    """torch's promoted dtype of the operands (for comparisons, where the result is bool)."""
    vals = [a.meta["val"] if hasattr(a, "meta") else a for a in args]
    vals = [v for v in vals if v is not None]
    return torch.result_type(*vals) if len(vals) >= 2 else vals[0].dtype


def register_unary(op: Op, *targets):
    @register(*targets)
    def lower(lw, node, x, *rest, **kw):
        return pointwise(node, lambda a: unary(op, a), [x])
    return lower


register_unary(Op.EXP, aten.exp)
register_unary(Op.EXP2, aten.exp2)
register_unary(Op.LOG, aten.log)
register_unary(Op.LOG2, aten.log2)
register_unary(Op.SQRT, aten.sqrt)
register_unary(Op.RSQRT, aten.rsqrt)
register_unary(Op.RECIP, aten.reciprocal)
register_unary(Op.SIN, aten.sin)
register_unary(Op.COS, aten.cos)
register_unary(Op.TANH, aten.tanh)
register_unary(Op.SIGMOID, aten.sigmoid)
register_unary(Op.ERF, aten.erf)
register_unary(Op.NEG, aten.neg)
register_unary(Op.ABS, aten.abs)
register_unary(Op.RELU, aten.relu)


@register(aten.floor, aten.ceil, aten.trunc)
def lower_rounding(lw, node, x):
    if not x.dtype.is_floating_point:
        return pointwise(node, lambda a: a, [x])
    op = {"floor": Op.FLOOR, "ceil": Op.CEIL, "trunc": Op.TRUNC}[node.target.overloadpacket.__name__]
    return pointwise(node, lambda a: unary(op, a), [x])


@register(aten.logical_not, aten.bitwise_not)
def lower_not(lw, node, x):
    if node.target.overloadpacket is aten.bitwise_not and x.dtype is not torch.bool:
        raise NotLowerable("integer bitwise_not")
    return pointwise(node, lambda a: unary(Op.NOT, a), [x], compute=torch.bool)


@register(aten.isinf)
def lower_isinf(lw, node, x):
    if not x.dtype.is_floating_point:
        return pointwise(node, lambda a: const(False, torch.bool), [x], compute=x.dtype)
    return pointwise(node, lambda a: binary(Op.EQ, unary(Op.ABS, a), const(math.inf, a.dtype)), [x], compute=x.dtype)


@register(aten.isnan)
def lower_isnan(lw, node, x):
    return pointwise(node, lambda a: binary(Op.NE, a, a), [x], compute=x.dtype)


@register(aten.sign, aten.sgn)
def lower_sign(lw, node, x):
    def fn(a):
        zero, one = const(0, a.dtype), const(1, a.dtype)
        return where(binary(Op.GT, a, zero), one, where(binary(Op.LT, a, zero), unary(Op.NEG, one), zero))
    return pointwise(node, fn, [x])


def _binary_arith(op: Op):
    def lower(lw, node, a, b, *, alpha=1, **kw):
        if alpha != 1:
            return pointwise(node, lambda x, y: binary(op, x, binary(Op.MUL, y, const(alpha, y.dtype))), [a, b])
        return pointwise(node, lambda x, y: binary(op, x, y), [a, b])
    return lower


register(aten.add)(_binary_arith(Op.ADD))
register(aten.sub)(_binary_arith(Op.SUB))
register(aten.mul)(_binary_arith(Op.MUL))
register(aten.maximum)(_binary_arith(Op.MAX))
register(aten.minimum)(_binary_arith(Op.MIN))


@register(aten.div)
def lower_div(lw, node, a, b, *, rounding_mode=None):
    if not out_meta(node).dtype.is_floating_point:
        return _lower_integer_div(node, a, b, rounding_mode)
    if rounding_mode is None:
        return pointwise(node, lambda x, y: binary(Op.DIV, x, y), [a, b])
    if rounding_mode == "floor":
        if out_meta(node).dtype is torch.float64:
            raise NotLowerable("floor division of float64 (its exact remainder needs a wider type)")
        # (a scalar divisor as eager's: 1.0 // 0.1 divides by fp32's 0.1, also where widened)
        return pointwise(node, lambda x, y: floor_divide(eager_scalar(x), eager_scalar(y)), [a, b])
    return pointwise(node, lambda x, y: unary(Op.TRUNC, binary(Op.DIV, x, y)), [a, b])


def floor_divide(a: Expr, b: Expr) -> Expr:
    """Eager's floor division of floats (Python's `//`): the floor of the exact quotient, not of
    the rounded one (1.0 // 0.1 is 9: the quotient 9.99999985 rounds to 10.0). floor(a / b) is
    one too large exactly where the remainder a - floor * b has the other sign than b; in float64
    the product of two float32 values is exact and the difference keeps its sign. Division by 0
    is a / b, as eager's; inf // b is NaN, and a finite a // inf is 0 or -1 (the remainder is a)."""
    quotient = binary(Op.DIV, a, b)
    down = unary(Op.FLOOR, quotient)
    wide = [cast(x, torch.float64) for x in (a, b, down)]
    exact = binary(Op.SUB, wide[0], binary(Op.MUL, wide[2], wide[1]))
    inf = const(float("inf"), b.dtype)
    remainder = where(binary(Op.EQ, unary(Op.ABS, b), inf), wide[0], exact)
    zero, zero64 = const(0, a.dtype), const(0, torch.float64)
    past = binary(Op.AND, binary(Op.NE, remainder, zero64),
                  binary(Op.NE, binary(Op.LT, remainder, zero64), binary(Op.LT, b, zero)))
    fixed = where(past, binary(Op.SUB, down, const(1, a.dtype)), down)
    fixed = where(unary(Op.ISNAN, remainder), const(float("nan"), a.dtype), fixed)
    return where(binary(Op.EQ, b, zero), quotient, fixed)


@register(prims.div)
def lower_prims_div(lw, node, a, b):
    return lower_div(lw, node, a, b)


@register(aten.floor_divide)
def lower_floor_divide(lw, node, a, b):
    return lower_div(lw, node, a, b, rounding_mode="floor")


# ---------------------------------------------------------------------------------------------
# integer division, remainders, bitwise ops and shifts: eager's results bit for bit
# ---------------------------------------------------------------------------------------------

def eager_scalar(e: Expr) -> Expr:
    """A constant operand as eager's kernels see it: converted to the op's dtype first, so an
    integer wraps (`uint8 % -3` divides by 253, `int32 << 2**40` shifts by 0) and a float rounds
    to it (`fp16 % 0.1` divides by fp16's 0.1). Other operands are unchanged."""
    if e.op is not Op.CONST or e.dtype is torch.bool:
        return e
    if e.dtype.is_floating_point:
        return const(torch.tensor(e.arg, dtype=torch.float64).to(e.dtype).item(), e.dtype)
    bits = torch.iinfo(e.dtype).bits
    value = int(e.arg) & ((1 << bits) - 1)
    if e.dtype.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return const(value, e.dtype)


def _integer_operands(node, what: str) -> torch.dtype:
    """The result dtype of an integer-only op, or NotLowerable (eager itself rejects bools and floats
    for most of them)."""
    dtype = out_meta(node).dtype
    if dtype.is_floating_point or dtype.is_complex or dtype is torch.bool:
        raise NotLowerable(f"{what} of {dtype}")
    return dtype


def c_division(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """C's integer `/` and `%` (quotient rounded toward zero, remainder with the dividend's sign),
    made total: Triton's `//` and `%` (LLVM's sdiv/srem) are undefined for a divisor of 0 and for
    MIN / -1, so neither reaches them. `a / -1` is `-a` (wrapping: MIN / -1 is MIN, as eager's
    floor division gives), remainder 0; DIVISION BY ZERO divides by 1: `a / 0` is `a`, `a % 0`
    is 0 (eager raises on the CPU and gives undefined values on CUDA)."""
    by_zero = binary(Op.EQ, b, const(0, b.dtype))
    if not a.dtype.is_signed:
        safe = where(by_zero, const(1, b.dtype), b)
        return binary(Op.IDIV, a, safe), binary(Op.FMOD, a, safe)
    by_minus_one = binary(Op.EQ, b, const(-1, b.dtype))
    safe = where(binary(Op.OR, by_zero, by_minus_one), const(1, b.dtype), b)
    quotient = where(by_minus_one, eager_scalar(unary(Op.NEG, a)), binary(Op.IDIV, a, safe))
    return quotient, binary(Op.FMOD, a, safe)


def _past_floor(remainder: Expr, b: Expr) -> Expr:
    """Where rounding toward zero went past the floor: the remainder is nonzero and has the other
    sign than the divisor (then floor = trunc - 1, and Python's remainder is C's + b)."""
    zero = const(0, remainder.dtype)
    other_sign = binary(Op.NE, binary(Op.LT, remainder, zero), binary(Op.LT, b, const(0, b.dtype)))
    return binary(Op.AND, binary(Op.NE, remainder, zero), other_sign)


def floor_division(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """Python's integer `//` and `%` (eager's floor_divide and remainder): C's, corrected by one
    divisor where they went past the floor. The same total rules as `c_division` (`a // 0` is
    `a`, `a % 0` is 0); unsigned integers have nothing to correct."""
    quotient, remainder = c_division(a, b)
    if not a.dtype.is_signed:
        return quotient, remainder
    past = _past_floor(remainder, b)
    return (where(past, binary(Op.SUB, quotient, const(1, quotient.dtype)), quotient),
            where(past, binary(Op.ADD, remainder, b), remainder))


def _lower_integer_div(node, a, b, rounding_mode):
    if rounding_mode not in ("floor", "trunc"):
        raise NotLowerable(f"integer division with rounding_mode={rounding_mode!r}")
    _integer_operands(node, "division")
    split = floor_division if rounding_mode == "floor" else c_division
    return pointwise(node, lambda x, y: split(eager_scalar(x), eager_scalar(y))[0], [a, b])


def _float_remainder_dtype(node, what: str) -> torch.dtype:
    dtype = out_meta(node).dtype
    if dtype is torch.float64:
        raise NotLowerable(f"{what} of float64 (its exact fmod would need integers wider than 64 bits)")
    return dtype


@register(aten.fmod)
def lower_fmod(lw, node, a, b):
    """C's fmod: the remainder with the dividend's sign, exact for floats (fp16 and bf16 computed
    in fp32 hold it exactly; codegen's `_fmod` helper: Triton's own float `%` on the GPU is
    `a - trunc(a / b) * b`, rounded). fmod(x, 0) and fmod(inf, y) are NaN, fmod(x, inf) is x;
    integers divide by zero as `c_division` does."""
    dtype = _float_remainder_dtype(node, "fmod")
    if dtype.is_floating_point:
        return pointwise(node, lambda x, y: binary(Op.FMOD, eager_scalar(x), eager_scalar(y)), [a, b])
    _integer_operands(node, "fmod")
    return pointwise(node, lambda x, y: c_division(eager_scalar(x), eager_scalar(y))[1], [a, b])


@register(aten.remainder)
def lower_remainder(lw, node, a, b):
    """Python's `%`: the remainder with the divisor's sign. Floats as eager computes them: the exact
    fmod, plus b where it is nonzero with the other sign than b, that sum rounded once (-1e-45 % 1.0
    is 1.0; -1 % inf is inf; x % 0 is NaN). fp16 and bf16 add in fp32 and round once, which gives
    their own rounded sum (24 >= 2 * 11 + 2 bits). Integers: `floor_division`'s remainder."""
    dtype = _float_remainder_dtype(node, "remainder")
    if dtype.is_floating_point:
        def fn(x, y):
            x, y = eager_scalar(x), eager_scalar(y)
            m = binary(Op.FMOD, x, y)
            return where(_past_floor(m, y), binary(Op.ADD, m, y), m)
        return pointwise(node, fn, [a, b])
    _integer_operands(node, "remainder")
    return pointwise(node, lambda x, y: floor_division(eager_scalar(x), eager_scalar(y))[1], [a, b])


def shift(left: bool, x: Expr, amount: Expr) -> Expr:
    """Eager's shifts: by an amount in [0, bits) as C's (a left shift wraps, a right shift is
    arithmetic on signed integers, logical on unsigned); by one out of it (negative too) a left
    shift is 0 and a right shift fills with the sign (x >> (bits - 1) signed, 0 unsigned), where
    LLVM's shifts would be undefined."""
    bits = torch.iinfo(x.dtype).bits
    in_range = binary(Op.AND, binary(Op.GE, amount, const(0, amount.dtype)),
                      binary(Op.LT, amount, const(bits, amount.dtype)))
    if not left and x.dtype.is_signed:
        return binary(Op.SHR, x, where(in_range, amount, const(bits - 1, amount.dtype)))
    shifted = binary(Op.SHL if left else Op.SHR, x, where(in_range, amount, const(0, amount.dtype)))
    return where(in_range, shifted, const(0, x.dtype))


@register(aten.__lshift__, aten.bitwise_left_shift, aten.__rshift__, aten.bitwise_right_shift)
def lower_shift(lw, node, a, b):
    _integer_operands(node, "shift")
    left = node.target.overloadpacket in (aten.__lshift__, aten.bitwise_left_shift)
    return pointwise(node, lambda x, y: shift(left, eager_scalar(x), eager_scalar(y)), [a, b])


@register(aten.pow)
def lower_pow(lw, node, base, exponent):
    if node.target is aten.pow.Scalar and out_meta(node).dtype.is_floating_point \
            and isinstance(base, (int, float)) and base > 0:
        # `beta ** step` (Adam's bias correction with a tensor step): exp2(step * log2(beta))
        return pointwise(node, lambda t: binary(Op.POW, const(base, t.dtype), t), [exponent])
    if node.target is aten.pow.Tensor_Tensor and out_meta(node).dtype in (torch.float32, torch.float16, torch.bfloat16):
        return pointwise(node, _pow_tensors, [base, exponent])
    if node.target is not aten.pow.Tensor_Scalar or not out_meta(node).dtype.is_floating_point:
        raise NotLowerable("pow with a tensor exponent")
    e = float(exponent)

    def fn(x):
        if e == 0.5:
            return unary(Op.SQRT, x)
        if e == -0.5:
            return unary(Op.RSQRT, x)
        if e.is_integer() and abs(e) <= 8:
            n = int(abs(e))
            if n == 0:
                return const(1, x.dtype)
            acc = x                  # (not "the accumulator is still the constant 1": x may be a constant)
            for _ in range(n - 1):
                acc = binary(Op.MUL, acc, x)
            return unary(Op.RECIP, acc) if e < 0 else acc
        if e.is_integer():
            # 2^(e * log2 |x|), negative where x is and e odd ((-2) ** 11); log2 of a negative
            # x would be NaN
            magnitude = binary(Op.POW, unary(Op.ABS, x), const(e, x.dtype))
            if int(e) % 2 == 0:
                return magnitude
            return where(binary(Op.LT, x, const(0, x.dtype)), unary(Op.NEG, magnitude), magnitude)
        return binary(Op.POW, x, const(e, x.dtype))
    return pointwise(node, fn, [base])


def _pow_tensors(x: Expr, y: Expr) -> Expr:
    """x ** y of two float tensors (BLOOM's ALiBi slopes, `base ** powers`) as C's pow: 2^(y log2 |x|),
    negative where x's sign bit is set and y an odd integer, NaN for a finite negative x and a
    y that is not an integer; 1 where y is 0 or x is 1 (a NaN operand too), and (-1) ** +-inf."""
    dt = x.dtype
    zero, one = const(0, dt), const(1, dt)
    magnitude = binary(Op.POW, unary(Op.ABS, x), y)
    integer = binary(Op.EQ, unary(Op.FLOOR, y), y)
    half = binary(Op.MUL, y, const(0.5, dt))
    odd = binary(Op.AND, integer, binary(Op.NE, unary(Op.FLOOR, half), half))
    sign_bit = binary(Op.OR, binary(Op.LT, x, zero),
                      binary(Op.AND, binary(Op.EQ, x, zero), binary(Op.LT, unary(Op.RECIP, x), zero)))
    finite_negative = binary(Op.AND, binary(Op.LT, x, zero), binary(Op.NE, x, const(-math.inf, dt)))
    out = where(binary(Op.AND, sign_bit, odd), unary(Op.NEG, magnitude), magnitude)
    out = where(binary(Op.AND, finite_negative, unary(Op.NOT, integer)), const(math.nan, dt), out)
    unit = binary(Op.OR, binary(Op.OR, binary(Op.EQ, y, zero), binary(Op.EQ, x, one)),
                  binary(Op.AND, binary(Op.EQ, x, const(-1, dt)), binary(Op.EQ, unary(Op.ABS, y), const(math.inf, dt))))
    return where(unit, one, out)


def _comparison(op: Op):
    def lower(lw, node, a, b):
        compute = compute_dtype_of(node, *node.args[:2])
        return pointwise(node, lambda x, y: binary(op, x, y), [a, b], compute=compute)
    return lower


for _op, _target in ((Op.EQ, aten.eq), (Op.NE, aten.ne), (Op.LT, aten.lt), (Op.LE, aten.le),
                     (Op.GT, aten.gt), (Op.GE, aten.ge)):
    register(_target)(_comparison(_op))


def _logical(op: Op):
    def lower(lw, node, a, b):
        if node.target.overloadpacket.__name__.startswith("bitwise") and out_meta(node).dtype is not torch.bool:
            # integers (a bool operand promoted to the other's dtype, as eager): bit by bit
            _integer_operands(node, "bitwise op")
            return pointwise(node, lambda x, y: binary(op, eager_scalar(x), eager_scalar(y)), [a, b])
        return pointwise(node, lambda x, y: binary(op, x, y), [a, b], compute=torch.bool)
    return lower


for _op, _targets in ((Op.AND, (aten.logical_and, aten.bitwise_and)), (Op.OR, (aten.logical_or, aten.bitwise_or)),
                      (Op.XOR, (aten.logical_xor, aten.bitwise_xor))):
    register(*_targets)(_logical(_op))


@register(aten.native_dropout_backward)
def lower_native_dropout_backward(lw, node, grad, mask, scale):
    """A dropout's gradient, `grad * mask * scale`: no random numbers (the forward's mask, an aten
    call drawing eager's, is an input), so a pointwise op fused with its neighbours. In eager's
    order, in fp32 for fp16 / bf16 as eager's kernels compute: `grad * mask` keeps a NaN where
    the mask dropped it (NaN * 0), then one rounding of the product with fp32(scale)."""
    meta = out_meta(node)
    compute = torch.float32 if meta.dtype in (torch.float16, torch.bfloat16) else meta.dtype
    if not meta.dtype.is_floating_point:
        raise NotLowerable("a dropout gradient of integers")
    return pointwise(node, lambda g, m: binary(Op.MUL, binary(Op.MUL, g, m), const(float(scale), compute)),
                     [grad, mask], compute)


@register(aten.where)
def lower_where(lw, node, cond, a, b):
    if node.target is not aten.where.self:
        raise NotLowerable("where(cond) without values")
    return _where(node, cond, a, b)


def _where(node, c, a, b):
    meta = out_meta(node)
    sizes = tuple(meta.shape)
    ops = [broadcast_to(x, sizes) if isinstance(x, Value) else x for x in (c, a, b)]

    def loader(idx):
        return where(operand(ops[0], idx, torch.bool), operand(ops[1], idx, meta.dtype),
                     operand(ops[2], idx, meta.dtype))
    return lazy(sizes, meta.dtype, meta.device, loader)


@register(aten.masked_fill)
def lower_masked_fill(lw, node, x, mask, value):
    return _where(node, mask, value, x)


@register(aten.clamp, aten.clamp_min, aten.clamp_max)
def lower_clamp(lw, node, x, lo=None, hi=None):
    name = node.target.overloadpacket.__name__
    if name == "clamp_max":
        lo, hi = None, lo

    def fn(a, *bounds):
        it = iter(bounds)
        if lo is not None:
            a = binary(Op.MAX, a, next(it))
        if hi is not None:
            a = binary(Op.MIN, a, next(it))
        return a
    return pointwise(node, fn, [x] + [b for b in (lo, hi) if b is not None])


# ---------------------------------------------------------------------------------------------
# dtype conversion, copies, constants
# ---------------------------------------------------------------------------------------------

@register(aten._to_copy, prims.convert_element_type, aten.clone, aten.lift_fresh_copy, aten.copy)
def lower_copy(lw, node, x, *args, **kwargs):
    meta = out_meta(node)
    src = args[0] if node.target is aten.copy.default else x
    if isinstance(src, Value) and src.device != meta.device:
        raise NotLowerable("device copy")
    # a fresh tensor: lazy, so that an output gets its own buffer (never an alias)
    return pointwise(node, lambda a: a, [src])


@register(aten._local_scalar_dense)
def lower_item(lw, node, x):
    """`t.item()` whose number only feeds pointwise tensor ops (torch.optim's single-tensor Adam:
    `p.addcdiv_(m, denom, value=-step_size)` with a tensor step size): the one element itself,
    read by the kernels that use it (a host scalar: as an argument). Run as an extern call, the
    number was nothing a kernel could take, and the whole graph ran as captured."""
    if not isinstance(x, Value) or x.numel() != 1 or not x.dtype.is_floating_point:
        raise NotLowerable("item of this value")
    if not node.users or not all(u.op == "call_function" and isinstance(u.target, torch._ops.OpOverload)
                                 and torch.Tag.pointwise in u.target.tags for u in node.users):
        raise NotLowerable("item used as a number")
    return view_by_remap(x, (), lambda idx: tuple(Affine(0) for _ in x.sizes))


@register(aten.alias, aten.detach)
def lower_alias(lw, node, x):
    return x


@register(aten.full, aten.full_like, aten.scalar_tensor, aten.empty, aten.zeros, aten.ones, aten.fill,
          aten.empty_strided, aten.empty_permuted, aten.new_empty_strided, aten.new_empty)
def lower_full(lw, node, *args, **kwargs):
    # (full_like, which torch does not decompose: `zeros_like` becomes one, as in `_safe_softmax`;
    # its layout is the eager result's, as for any lazy value a graph returns)
    meta = out_meta(node)
    name = node.target.overloadpacket.__name__
    if name in ("full", "full_like"):
        value = args[1]
    elif name == "scalar_tensor":
        value = args[0]
    elif name == "fill":
        value = args[1]
    elif name == "ones":
        value = 1
    else:
        value = 0           # empty: any value is allowed, zeros are deterministic
    if isinstance(value, Value):
        return pointwise(node, lambda a: a, [value])
    return pointwise(node, lambda: const(value, meta.dtype), [])


@register(aten.arange)
def lower_arange(lw, node, *args, **kwargs):
    meta = out_meta(node)
    start, step = 0, 1
    if node.target is aten.arange.start_step:
        start, step = args[0], args[2] if len(args) > 2 else kwargs.get("step", 1)
    elif node.target is aten.arange.start:
        start = args[0]
    elif node.target is not aten.arange.default:
        raise NotLowerable("arange overload")
    n = meta.shape[0]

    def loader(idx):
        if meta.dtype.is_floating_point:
            i = cast(index_expr(idx[0]), meta.dtype)
            return binary(Op.ADD, binary(Op.MUL, i, const(step, meta.dtype)), const(start, meta.dtype))
        return cast(index_expr(idx[0] * int(step) + int(start)), meta.dtype)
    return lazy((n,), meta.dtype, meta.device, loader)



@register(aten.mm.default, aten.bmm.default)
def lower_outer_product(lw, node, a, b):
    """A matmul whose contraction has length 1 is an outer product: a pointwise multiply of the
    broadcast operands, which fuses with what reads it, instead of a library call (rotary
    embeddings' `inv_freq[:, None] @ position_ids[None, :]`). Each element is one product, as in
    the library's result. Longer contractions stay extern calls."""
    meta = out_meta(node)
    if not (isinstance(a, Value) and isinstance(b, Value)) or a.sizes[-1] != 1 or not meta.dtype.is_floating_point:
        raise NotLowerable("a matmul over a contraction longer than 1")
    return pointwise(node, lambda x, y: binary(Op.MUL, x, y), [a, b])


@register(aten.convolution.default)
def lower_convolution_bias(lw, node, x, weight, bias, *rest):
    """A convolution with a bias is the library's convolution without it, then the bias added
    along the channel dim by a lazy value that fuses into whatever reads the result (batch norm,
    an activation, a residual add). Eager's CUDA path adds the bias in a kernel of its own after
    cuDNN's (the same sums: the convolution's result rounded to its dtype, plus the bias), which
    reads and writes the whole result once more. Without a bias the call stays as it is."""
    meta = out_meta(node)
    if not isinstance(bias, Value) or not isinstance(x, Value) or bias.sizes != (meta.shape[1],):
        raise NotLowerable("a convolution without a bias")
    conv = lw.extern_call(node, (x, weight, None) + tuple(rest))
    per_channel = view_by_remap(bias, tuple(meta.shape), lambda idx: (idx[1],))
    return pointwise(node, lambda c, b: binary(Op.ADD, c, b), [conv, per_channel])
