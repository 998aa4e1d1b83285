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
from . import values as V
from .values import Value, broadcast_to, lazy

aten = torch.ops.aten
prims = torch.ops.prims

LOWERINGS: dict = {}


class NotLowerable(Exception):
    """This call cannot be lowered (unsupported arguments): run it as an extern aten call."""


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
    dtype = torch.bool if op in COMPARISONS or op in (Op.AND, Op.OR, Op.XOR) else a.dtype
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
        raise NotLowerable("integer division")
    if rounding_mode is None:
        return pointwise(node, lambda x, y: binary(Op.DIV, x, y), [a, b])
    op = {"floor": Op.FLOOR, "trunc": Op.TRUNC}[rounding_mode]
    return pointwise(node, lambda x, y: unary(op, binary(Op.DIV, x, y)), [a, b])


@register(prims.div)
def lower_prims_div(lw, node, a, b):
    return lower_div(lw, node, a, b)


@register(aten.pow)
def lower_pow(lw, node, base, exponent):
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
            acc = const(1, x.dtype)
            for _ in range(n):
                acc = x if acc.op is Op.CONST else binary(Op.MUL, acc, x)
            return unary(Op.RECIP, acc) if e < 0 else acc
        return binary(Op.POW, x, const(e, x.dtype))
    return pointwise(node, fn, [base])


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
            raise NotLowerable("integer bitwise op")
        return pointwise(node, lambda x, y: binary(op, x, y), [a, b], compute=torch.bool)
    return lower


for _op, _targets in ((Op.AND, (aten.logical_and, aten.bitwise_and)), (Op.OR, (aten.logical_or, aten.bitwise_or)),
                      (Op.XOR, (aten.logical_xor, aten.bitwise_xor))):
    register(*_targets)(_logical(_op))


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


@register(aten.alias, aten.detach)
def lower_alias(lw, node, x):
    return x


@register(aten.full, aten.scalar_tensor, aten.empty, aten.zeros, aten.ones, aten.fill, aten.empty_strided)
def lower_full(lw, node, *args, **kwargs):
    meta = out_meta(node)
    name = node.target.overloadpacket.__name__
    if name == "full":
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
        start, step = args[0], args[2]
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


# ---------------------------------------------------------------------------------------------
# views
# ---------------------------------------------------------------------------------------------

def _sizes(node):
    return tuple(int(s) for s in out_meta(node).shape)


@register(aten.view, aten._unsafe_view, aten.reshape)
def lower_view(lw, node, x, size):
    return V.reshape(x, _sizes(node), lw.realize_dense)


@register(prims.broadcast_in_dim)
def lower_broadcast_in_dim(lw, node, x, shape, broadcast_dims):
    sizes = _sizes(node)
    expanded = [1] * len(sizes)
    for src_dim, dst_dim in enumerate(broadcast_dims):
        expanded[dst_dim] = x.sizes[src_dim]
    return broadcast_to(V.reshape(x, expanded, lw.realize_dense), sizes)


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


def _masked(value: Value, idx, mask: Expr, dtype) -> Expr:
    """value[idx] where `mask` holds; loads are masked so out-of-range lanes read nothing."""
    from .ir import rewrite, load
    e = cast(value.load(idx), dtype)

    def add_mask(x, args):
        if x.op is Op.LOAD:
            m = mask if not args else binary(Op.AND, args[0], mask)
            return load(x.arg[0], x.arg[1], x.dtype, m)
        return None
    return rewrite([e], add_mask)[0]


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
            value = _masked(t, local, cond, meta.dtype)
            result = value if result is None else where(cond, value, result)
        return result
    return lazy(sizes, meta.dtype, meta.device, loader)


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
    if step != 1:
        raise NotLowerable("slice_scatter with a step")
    size = x.sizes[dim]
    lo = V._clamp_index(start, size, 0)
    hi = lo + src.sizes[dim]

    def loader(idx):
        cond = _in_range(idx[dim], lo, hi)
        local = idx[:dim] + (idx[dim] + (-lo),) + idx[dim + 1:]
        return where(cond, _masked(src, local, cond, meta.dtype), cast(x.load(idx), meta.dtype))
    return lazy(x.sizes, meta.dtype, meta.device, loader)


@register(aten.constant_pad_nd)
def lower_constant_pad(lw, node, x, pad, value=0):
    meta = out_meta(node)
    sizes = tuple(meta.shape)
    if any(p < 0 for p in pad):
        raise NotLowerable("negative padding")
    lows = [0] * len(sizes)
    for k in range(len(pad) // 2):
        lows[len(sizes) - 1 - k] = pad[2 * k]

    def loader(idx):
        cond = None
        local = []
        for d in range(len(sizes)):
            local.append(idx[d] + (-lows[d]))
            if sizes[d] != x.sizes[d]:
                c = _in_range(idx[d], lows[d], lows[d] + x.sizes[d])
                cond = c if cond is None else binary(Op.AND, cond, c)
        if cond is None:
            return cast(x.load(tuple(local)), meta.dtype)
        return where(cond, _masked(x, tuple(local), cond, meta.dtype), const(value, meta.dtype))
    return lazy(sizes, meta.dtype, meta.device, loader)


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
        result = lw.add_reduction(x, dims, kind, acc, buffer_dtype)
    if not keepdim:
        result = V.squeeze(result, dims)
    return result


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
        raise NotLowerable("max/min with indices or of two tensors")
    kind = "max" if name in ("amax", "max") else "min"
    meta = out_meta(node)
    if x.dtype is torch.bool:
        raise NotLowerable("bool max")
    return reduce(lw, x, _reduce_dims(x, dims), kind, keepdim, meta.dtype)


@register(aten.any, aten.all)
def lower_any(lw, node, x, dims=None, keepdim=False):
    kind = "max" if node.target.overloadpacket is aten.any else "min"
    meta = out_meta(node)
    flag = pointwise(node, lambda a: binary(Op.NE, a, const(0, a.dtype)), [x], compute=x.dtype,
                     out_dtype=torch.int32, sizes=x.sizes)
    r = reduce(lw, flag, _reduce_dims(x, dims), kind, keepdim, torch.int32)
    return pointwise(node, lambda a: binary(Op.NE, a, const(0, a.dtype)), [r], compute=torch.int32)


def _var_mean(lw, x: Value, dims, correction, keepdim, out_dtype):
    dims = _reduce_dims(x, dims)
    n = math.prod(x.sizes[d] for d in dims)
    acc = acc_dtype(out_dtype)
    total = reduce(lw, x, dims, "sum", True, acc)
    mean = lazy(total.sizes, acc, x.device,
                lambda idx: binary(Op.MUL, total.load(idx), const(1.0 / n, acc)))
    mean_b = broadcast_to(mean, x.sizes)

    def centered_sq(idx):
        d = binary(Op.SUB, cast(x.load(idx), acc), mean_b.load(idx))
        return binary(Op.MUL, d, d)
    sq = lazy(x.sizes, acc, x.device, centered_sq)
    m2 = reduce(lw, sq, dims, "sum", True, acc)
    denom = max(n - (1 if correction is None else correction), 0)
    var = lazy(m2.sizes, out_dtype, x.device,
               lambda idx: cast(binary(Op.DIV, m2.load(idx), const(denom, acc)), out_dtype))
    mean_out = lazy(mean.sizes, out_dtype, x.device, lambda idx: cast(mean.load(idx), out_dtype))
    if not keepdim:
        var, mean_out = V.squeeze(var, dims), V.squeeze(mean_out, dims)
    return var, mean_out


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
