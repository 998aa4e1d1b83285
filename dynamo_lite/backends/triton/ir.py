"""The loop-level IR: affine indices, value expressions, and the nodes a graph lowers to.

A kernel computes, at every point of an iteration domain (a tuple of sizes), one expression.
Three layers:

* `Affine`  - an integer index `const + sum(coeff * var)`. Views, permutes, expands, slices and
  broadcasts only ever rewrite these; they never become kernels.
* `Expr`    - a value expression DAG: `LOAD(buffer, affine)`, `GATHER` (a load whose address also
  depends on a loaded integer: `logp[i, target[i]]`), constants, `INDEX` (the loop
  position itself, for iota/masks), casts and the pointwise ops of `Op`. Exprs are interned, so
  structurally equal expressions are the same object (cheap CSE, identity comparisons).
* nodes     - `PointwiseNode` (one expression over a domain, stored to a buffer),
  `ReductionNode` (an expression over a domain, reduced over some of its dims), `ScanNode` (an
  expression over a domain, scanned along one dim: cumsum), `ScatterNode` (an expression over a
  domain, added at data-dependent positions of a buffer: index_put with accumulate) and
  `ExternNode` (an aten call run by the wrapper, e.g. mm, conv, or anything we cannot lower).

Variable names inside a node are `v0, v1, ...`, one per dim of its domain.
"""
from __future__ import annotations

import dataclasses
import enum
import weakref
from typing import Any, Callable, Iterable, Optional

import torch


# ---------------------------------------------------------------------------------------------
# affine index expressions
# ---------------------------------------------------------------------------------------------

class Affine:
    """`const + sum(coeff * var)` over named integer loop variables; immutable and hashable."""

    __slots__ = ("const", "terms", "_hash")

    def __init__(self, const: int = 0, terms: Iterable[tuple[str, int]] = ()):
        merged: dict[str, int] = {}
        for var, coeff in terms:
            merged[var] = merged.get(var, 0) + coeff
        self.const = int(const)
        self.terms = tuple(sorted((v, c) for v, c in merged.items() if c != 0))
        self._hash = hash((self.const, self.terms))

    @staticmethod
    def var(name: str, coeff: int = 1) -> "Affine":
        return Affine(0, ((name, coeff),))

    def coeff(self, var: str) -> int:
        for v, c in self.terms:
            if v == var:
                return c
        return 0

    def vars(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.terms)

    def __add__(self, other) -> "Affine":
        if isinstance(other, int):
            return Affine(self.const + other, self.terms)
        return Affine(self.const + other.const, self.terms + other.terms)

    __radd__ = __add__

    def __mul__(self, k: int) -> "Affine":
        return Affine(self.const * k, ((v, c * k) for v, c in self.terms))

    __rmul__ = __mul__

    def substitute(self, mapping: dict[str, "Affine"]) -> "Affine":
        """Replace variables by affine expressions (variables missing from `mapping` stay)."""
        out = Affine(self.const)
        for v, c in self.terms:
            out = out + (mapping[v] * c if v in mapping else Affine.var(v, c))
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, Affine) and self.const == other.const and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        parts = [(f"{c}*{v}" if c != 1 else v) for v, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def domain_vars(ndim: int, prefix: str = "v") -> tuple[Affine, ...]:
    return tuple(Affine.var(f"{prefix}{i}") for i in range(ndim))


def strided_index(index: tuple[Affine, ...], strides: tuple[int, ...], offset: int = 0) -> Affine:
    out = Affine(offset)
    for i, s in zip(index, strides):
        out = out + i * s
    return out


def contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


# ---------------------------------------------------------------------------------------------
# value expressions
# ---------------------------------------------------------------------------------------------

class Op(enum.Enum):
    # leaves and structure
    LOAD = "load"          # arg = (buffer name, Affine); args = (mask,) or ()
    GATHER = "gather"      # arg = (buffer name, Affine, stride, size); args = (int index, mask): loads
                           # buffer[Affine + stride * index]; the mask keeps 0 <= index < size
    CONST = "const"        # arg = python scalar
    INDEX = "index"        # arg = Affine: the integer position itself
    CAST = "cast"          # to self.dtype
    REDUCED = "reduced"    # arg = name of a reduction node of the same kernel (its row result)
    SCANNED = "scanned"    # arg = name of a scan node of the same kernel (its value at the position)
    SCATTER_ADD = "scatter_add"  # a ScatterNode's store: args = (value, int position, mask), arg =
                           # (stride, size, accumulate): adds (or, not accumulating, stores) value
                           # at the store index + stride * position
    # unary
    NEG = "neg"; ABS = "abs"; EXP = "exp"; EXP2 = "exp2"; LOG = "log"; LOG2 = "log2"
    SQRT = "sqrt"; RSQRT = "rsqrt"; RECIP = "reciprocal"; SIN = "sin"; COS = "cos"
    TANH = "tanh"; SIGMOID = "sigmoid"; ERF = "erf"; FLOOR = "floor"; CEIL = "ceil"
    TRUNC = "trunc"; NOT = "not"; ISNAN = "isnan"; RELU = "relu"
    LOG1P = "log1p"; EXPM1 = "expm1"   # fp32 only (codegen's LOG1P_F32 / EXPM1_F32 helpers)
    ATAN = "atan"                      # fp32 only (codegen's ATAN_F32)
    SIGNBIT = "signbit"                # floats: the sign bit (of -0.0 and of NaNs too), a bool
    # binary
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; MAX = "maximum"; MIN = "minimum"
    POW = "pow"; EQ = "eq"; NE = "ne"; LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"
    AND = "and"; OR = "or"; XOR = "xor"   # logical on bools, bit by bit on integers
    # integer division and remainders with C's semantics, shifts (lowerings.py builds eager's
    # floor, division-by-zero and shift-range rules from these; a divisor is never 0 or, signed, -1)
    IDIV = "idiv"          # integers: the quotient rounded toward zero (Triton's `//`)
    FMOD = "fmod"          # the remainder with the dividend's sign: C's `%` on integers, exact fmod of floats
    SHL = "shl"; SHR = "shr"   # amount in [0, bits); `>>` is arithmetic on signed, logical on unsigned
    ATAN2 = "atan2"        # fp32 only (codegen's ATAN2_F32): the angle of (x = second, y = first)
    # ternary
    WHERE = "where"


UNARY = frozenset({Op.NEG, Op.ABS, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SQRT, Op.RSQRT, Op.RECIP,
                   Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.ERF, Op.FLOOR, Op.CEIL, Op.TRUNC,
                   Op.NOT, Op.ISNAN, Op.RELU, Op.LOG1P, Op.EXPM1, Op.ATAN, Op.SIGNBIT})
COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})

_INTERNED: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()


class Expr:
    """One node of a value DAG. Build with `expr(...)` so equal expressions are shared."""

    __slots__ = ("op", "args", "arg", "dtype", "_hash", "__weakref__")

    def __init__(self, op: Op, args: tuple["Expr", ...], arg: Any, dtype: torch.dtype):
        self.op, self.args, self.arg, self.dtype = op, args, arg, dtype
        self._hash = hash((op, tuple(id(a) for a in args), _arg_key(arg), dtype))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self.op is Op.LOAD:
            return f"load({self.arg[0]}[{self.arg[1]}])"
        if self.op is Op.GATHER:
            return f"gather({self.arg[0]}[{self.arg[1]} + {self.arg[2]}*{self.args[0]!r}])"
        if self.op in (Op.CONST, Op.INDEX, Op.REDUCED, Op.SCANNED):
            return f"{self.op.value}({self.arg})"
        if self.op is Op.CAST:
            return f"cast({self.args[0]!r}, {self.dtype})"
        return f"{self.op.value}({', '.join(map(repr, self.args))})"


def _arg_key(arg: Any) -> Any:
    # floats: distinguish 0.0/-0.0 and nan; bools from ints
    if isinstance(arg, float):
        return ("f", repr(arg))
    if isinstance(arg, bool):
        return ("b", arg)
    return arg


def expr(op: Op, args: tuple[Expr, ...], arg: Any, dtype: torch.dtype) -> Expr:
    key = (op, tuple(id(a) for a in args), _arg_key(arg), dtype)
    found = _INTERNED.get(key)
    if found is not None:
        return found
    e = Expr(op, tuple(args), arg, dtype)
    _INTERNED[key] = e
    return e


def const(value, dtype: torch.dtype) -> Expr:
    if dtype.is_floating_point:
        value = float(value)
    elif dtype is torch.bool:
        value = bool(value)
    else:
        value = int(value)
    return expr(Op.CONST, (), value, dtype)


def load(buffer: str, index: Affine, dtype: torch.dtype, mask: Optional[Expr] = None) -> Expr:
    return expr(Op.LOAD, (mask,) if mask is not None else (), (buffer, index), dtype)


def cast(e: Expr, dtype: torch.dtype) -> Expr:
    if e.dtype == dtype:
        return e
    if e.op is Op.CONST:
        return const(e.arg, dtype)
    return expr(Op.CAST, (e,), None, dtype)


def walk(roots: Iterable[Expr]) -> list[Expr]:
    """Every expression reachable from `roots`, children before parents, each once."""
    seen: set[int] = set()
    order: list[Expr] = []
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        stack.extend((a, False) for a in reversed(e.args))
    # a node may be appended only after all its children: the post-order above guarantees it
    return order


def rewrite(roots: list[Expr], fn: Callable[[Expr, tuple[Expr, ...]], Optional[Expr]]) -> list[Expr]:
    """Rebuild DAGs bottom-up. `fn(e, new_args)` returns a replacement or None (keep, with new args)."""
    memo: dict[int, Expr] = {}
    for e in walk(roots):
        new_args = tuple(memo[id(a)] for a in e.args)
        replaced = fn(e, new_args)
        if replaced is None:
            replaced = e if new_args == e.args else expr(e.op, new_args, e.arg, e.dtype)
        memo[id(e)] = replaced
    return [memo[id(r)] for r in roots]


def substitute_index(roots: list[Expr], mapping: dict[str, Affine]) -> list[Expr]:
    """Rename/replace loop variables inside every LOAD, GATHER and INDEX."""
    def fn(e: Expr, args: tuple[Expr, ...]) -> Optional[Expr]:
        if e.op in (Op.LOAD, Op.GATHER):
            return expr(e.op, args, (e.arg[0], e.arg[1].substitute(mapping)) + e.arg[2:], e.dtype)
        if e.op is Op.INDEX:
            at = e.arg.substitute(mapping)
            return expr(Op.INDEX, args, at, e.dtype) if at.terms else const(at.const, e.dtype)  # (a size-1 dim)
        return None
    return rewrite(roots, fn)


def gather_var(roots: list[Expr], var: str, size: int, index: Expr, in_range: Expr) -> list[Expr]:
    """Replace the loop variable `var` (of extent `size`) by the integer expression `index`
    (data-dependent: a loaded target class). Every LOAD walking `var` becomes a GATHER masked by
    `in_range` (which must imply `0 <= index < size`), every INDEX walking it adds `index`
    itself. Exact, since indices are affine in `var`."""
    def fn(e: Expr, args: tuple[Expr, ...]) -> Optional[Expr]:
        if e.op is Op.LOAD and e.arg[1].coeff(var):
            aff = e.arg[1]
            mask = in_range if not args else expr(Op.AND, (args[0], in_range), None, torch.bool)
            base = aff.substitute({var: Affine(0)})
            return expr(Op.GATHER, (index, mask), (e.arg[0], base, aff.coeff(var), size), e.dtype)
        if e.op is Op.GATHER and e.arg[1].coeff(var):
            # gathered along another dim already (x[i, j]): one gather at the summed offset
            name, aff, stride, span = e.arg
            c = aff.coeff(var)
            mask = in_range if len(args) < 2 else expr(Op.AND, (args[1], in_range), None, torch.bool)
            offset = expr(Op.ADD, (_times(args[0], stride), _times(index, c)), None, torch.int64)
            highest = max(0, stride * (span - 1)) + max(0, c * (size - 1))
            return expr(Op.GATHER, (offset, mask), (name, aff.substitute({var: Affine(0)}), 1, highest + 1), e.dtype)
        if e.op is Op.INDEX and e.arg.coeff(var):
            c = e.arg.coeff(var)
            scaled = index if c == 1 else expr(Op.MUL, (index, const(c, index.dtype)), None, index.dtype)
            rest = expr(Op.INDEX, (), e.arg.substitute({var: Affine(0)}), e.dtype)
            return expr(Op.ADD, (rest, cast(scaled, e.dtype)), None, e.dtype)
        return None
    return rewrite(roots, fn)


def _times(index: Expr, c: int) -> Expr:
    index = cast(index, torch.int64)
    return index if c == 1 else expr(Op.MUL, (index, const(c, torch.int64)), None, torch.int64)


def loads(roots: Iterable[Expr]) -> list[Expr]:
    """The LOADs and GATHERs (arg[0] is the buffer read) reachable from `roots`."""
    return [e for e in walk(roots) if e.op in (Op.LOAD, Op.GATHER)]


def at_position(ld: Expr, index: Affine) -> bool:
    """Does the load `ld` read exactly element `index` (a plain, unmasked or masked, LOAD)?"""
    return ld.op is Op.LOAD and ld.arg[1] == index


def mask_of(ld: Expr) -> Optional[Expr]:
    if ld.op is Op.GATHER:
        return ld.args[1] if len(ld.args) > 1 else None
    return ld.args[0] if ld.args else None


def with_mask(ld: Expr, mask: Expr) -> Expr:
    """The load `ld` with `mask` and-ed into its own mask."""
    old = mask_of(ld)
    m = mask if old is None else expr(Op.AND, (old, mask), None, torch.bool)
    args = (m,) if ld.op is Op.LOAD else (ld.args[0], m)
    return expr(ld.op, args, ld.arg, ld.dtype)


def affines(roots: Iterable[Expr]) -> list[Affine]:
    return [e.arg[1] if e.op in (Op.LOAD, Op.GATHER) else e.arg for e in walk(roots)
            if e.op in (Op.LOAD, Op.GATHER, Op.INDEX)]


# ---------------------------------------------------------------------------------------------
# buffers and nodes
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Buffer:
    """A materialized tensor: graph input, constant, kernel output or extern result.

    Strides are relative to the tensor's data pointer (what a kernel receives)."""
    name: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    kind: str = "temp"          # "input" | "constant" | "temp" | "extern"

    def __post_init__(self):
        self.sizes = tuple(int(s) for s in self.sizes)
        self.strides = tuple(int(s) for s in self.strides)

    def store_index(self, index: tuple[Affine, ...]) -> Affine:
        return strided_index(index, self.strides)

    def storage_numel(self) -> int:
        if any(s == 0 for s in self.sizes):
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.sizes, self.strides))


class _Computed:
    """What the nodes that compute an expression (`body`) into a buffer of ours share."""
    buffer: Buffer
    body: Expr

    @property
    def name(self) -> str:
        return self.buffer.name

    def reads(self) -> set[str]:
        return buffers_read(self.body)


@dataclasses.dataclass(eq=False)
class PointwiseNode(_Computed):
    """`buffer[v] = body(v)` for every v in `sizes` (the buffer has the same sizes)."""
    buffer: Buffer
    body: Expr

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.buffer.sizes


@dataclasses.dataclass(eq=False)
class ReductionNode(_Computed):
    """`buffer[keepdim position of v] = reduce_{reduced dims} body(v)` over the domain `sizes`.

    The buffer has `sizes` with the reduced dims set to 1. The body is computed in `acc_dtype`.
    The kinds of PICKS pick one element of each row instead of combining them all."""
    buffer: Buffer
    sizes: tuple[int, ...]
    reduced: tuple[int, ...]
    kind: str                   # "sum" | "max" | "min" | a kind of PICKS
    body: Expr


#: reductions that pick one element of each row, as eager's argmax / argmin and max / min over a
#: dim do: the first (lowest position) maximum (minimum), where NaN is above (below) every number,
#: so a row's first NaN is picked. kind -> (the order it picks by, what of the element it keeps):
#: "index" its int64 position, row-major over the reduced dims in the domain's order (argmax over
#: several dims numbers the flattened row), "value" its value (max.dim's values: the same as a
#: "max" but for which zero of a row of +-0 it gives). The codegen computes a pair of the same
#: body with one reduction of (value, position) pairs
PICKS = {"argmax": ("max", "index"), "argmin": ("min", "index"),
         "argmax_value": ("max", "value"), "argmin_value": ("min", "value")}


@dataclasses.dataclass(eq=False)
class ScanNode(_Computed):
    """`buffer[v] = scan along dim `dim` of body` over the domain `sizes` (cumsum, cumprod): the
    buffer has `sizes`; element v combines the body's elements up to v's position along `dim`.
    The body is computed in the accumulation dtype. The POSITION_SCANS give an int64 position
    along `dim` instead: "cummax" / "cummin", where the running max (min) so far lies; "sort",
    the position of the element that comes v-th in ascending order (stable), "sort_desc" in
    descending order (their lowerings gather the values from those positions). `keep`: only
    the first `keep` positions along `dim` are stored (topk's k; the buffer has `keep` there)."""
    buffer: Buffer
    sizes: tuple[int, ...]
    dim: int
    kind: str                   # "sum" | "prod" | "logsumexp" | one of POSITION_SCANS
    body: Expr
    keep: Optional[int] = None


#: the scans whose result is a position along the scanned dim (int64), not a combined value
POSITION_SCANS = frozenset({"cummax", "cummin", "sort", "sort_desc"})


@dataclasses.dataclass(eq=False)
class ScatterNode(_Computed):
    """`buffer = init`, then `buffer[index(v) + stride * position(v)] += body(v)` for every v in
    `sizes` where `mask(v)` (index_put with accumulate=True along one dim, index_add, scatter_add,
    an embedding's backward; `accumulate` False: `=` instead of `+=`, index_put, scatter, index_copy,
    where of repeated positions any one value is kept, as on CUDA).
    `init` is an expression over the buffer's own domain (the tensor added into, or zeros);
    `index` (over the domain's variables) places v in the buffer's other dims, and `position`, a
    loaded integer in [0, size), along the scattered one. The adds are atomic: where positions
    repeat, they add in no fixed order (non-deterministic in the last bits, as eager's CUDA
    kernels for index_add and scatter_add are). Scheduled alone: one kernel stores `init`, a
    second adds (scheduler.scatter_groups)."""
    buffer: Buffer
    init: Expr
    sizes: tuple[int, ...]
    body: Expr
    index: Affine
    stride: int
    size: int
    position: Expr
    mask: Expr
    accumulate: bool = True

    def reads(self) -> set[str]:
        return set().union(*(buffers_read(e) for e in (self.init, self.body, self.position, self.mask)))

    def store_expr(self) -> Expr:
        """The store, as the kernel adding the values sees it (Op.SCATTER_ADD)."""
        return expr(Op.SCATTER_ADD, (self.body, self.position, self.mask), (self.stride, self.size, self.accumulate),
                    self.body.dtype)


#: buffers_read's answers, per expression (expressions are immutable and shared: ir.expr)
_BUFFERS_READ: "weakref.WeakKeyDictionary[Expr, frozenset]" = weakref.WeakKeyDictionary()


def buffers_read(body: Expr) -> set[str]:
    """The buffers `body` loads from (the scheduler asks each node's, many times over: a ViT's
    graph asked ~4,700 times, a second of its lowering)."""
    found = _BUFFERS_READ.get(body)
    if found is None:
        found = _BUFFERS_READ[body] = frozenset(e.arg[0] for e in loads([body]))
    return set(found)


@dataclasses.dataclass(eq=False)
class ExternNode:
    """An aten call the wrapper makes itself. `args`/`kwargs` hold `BufferArg`s where tensors go."""
    name: str
    target: Any
    args: tuple
    kwargs: dict
    outputs: list[Optional[Buffer]]     # one per tensor result (flattened), None where not a tensor
    result_structure: str               # "single" | "tuple"
    mutates: Optional[str] = None       # name of an input buffer written in place (copy_)
    writes_out: bool = False            # the wrapper allocates outputs[0] and passes it as `out=`

    def reads(self) -> set[str]:
        names: set[str] = set()

        def visit(a):
            if isinstance(a, BufferArg):
                names.add(a.buffer.name)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
        visit(self.args)
        visit(tuple(self.kwargs.values()))
        return names


@dataclasses.dataclass(frozen=True)
class BufferArg:
    """A strided view of a buffer passed to an extern call or returned from the graph."""
    buffer: Buffer
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    def is_whole(self) -> bool:
        return self.offset == 0 and self.sizes == self.buffer.sizes and self.strides == self.buffer.strides

