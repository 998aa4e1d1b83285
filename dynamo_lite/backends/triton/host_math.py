"""Host arithmetic: the wrapper computes ops on tiny CPU values as Python numbers, not aten calls.

In a graph whose kernels run on a GPU, ops on host values (`GraphLowering.on_host`: torch.optim's
0-dim CPU step counters and the step sizes computed from them, next to CUDA parameters) are
extern calls. Each costs microseconds of dispatch on a 0-dim tensor; a foreach AdamW step over 52
parameters made ~780 of them, more CPU time than the step's GPU work. `HostMath` plans, for the
wrapper, which of those externs become Python instead:

- arithmetic on 0-dim float values (`ARITHMETIC`): one line per value, `h_buf7 = _pow(0.9, h_buf1)`;
- structure (`STRUCTURE`): unsqueeze / cat / stack / select of scalars are Python lists at compile
  time, no code at all (`step_size[i]` is the i-th scalar itself);
- a host input or aten result such a line reads is read once, `h_arg5 = arg5.item()`;
- a kernel's by-value argument is the Python float itself (no `.item()`), and a write into a host
  state tensor (`step += 1`, the functional graph's `copy_`) stays a real write, `arg5.fill_(h_buf1)`,
  at the position the scheduler gave the `copy_` (after every reader of the old value).

Every line is emitted at the position of the extern it replaces, so reads of a host tensor stay
before writes into it; only values a kernel or a host write needs are computed, and the same op
over the same operands (values, not tensors that may hold equal values) is computed once.

Precision: every value is a Python float, an IEEE double, whatever the tensor's float dtype.
Eager torch.optim computes these step sizes as Python floats too (`_get_value(step)` is
`step.item()` outside a compiler), so double arithmetic is at least as close to eager as float32
tensor math; a kernel receives the double rounded to its float32 argument, a host write rounds it
to the tensor's dtype. (So a float32 intermediate is not rounded between ops: one past float32's
range, 3.4e38, stays finite here where a float32 tensor holds inf.) Where Python raises or goes complex and IEEE does not (`1 / 0.0`,
`(-8.0) ** 0.5`, overflow in `**`), the helpers (`RUNTIME`) compute that one value with torch in
float64 instead. An op that could change more than rounding stays an aten call: comparisons (a
double compares differently than a float32 at the boundary), integer and low-precision results,
ops on anything but 0-dim/1-d float values, and every value some aten call, kernel pointer or the
graph's caller needs as a tensor (then its operands too, `_plan`).
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Callable, Optional, Union

import torch

from . import settings
from .ir import BufferArg, ExternNode

aten = torch.ops.aten

#: result dtypes computed as Python floats (doubles hold every value of both exactly)
FLOAT_DTYPES = (torch.float32, torch.float64)

#: operand dtypes read as Python floats (each is exact as a double; a bool is read as 0.0 / 1.0,
#: as float arithmetic promotes it, and is a condition as it is)
READ_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool)


# -- what the generated lines call ------------------------------------------------------------

def _in_float64(op, *xs) -> float:
    """`op` on doubles with IEEE results (inf, nan) where Python raises: the rare exceptional case."""
    return op(*(torch.tensor(x, dtype=torch.float64) for x in xs)).item()


def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        return _in_float64(torch.div, a, b)


def _pow(a: float, b: float) -> float:
    try:
        r = a ** b
    except (ZeroDivisionError, OverflowError):
        return _in_float64(torch.pow, a, b)
    return r if type(r) is float else _in_float64(torch.pow, a, b)     # complex: a negative base


def _sqrt(a: float) -> float:
    try:
        return math.sqrt(a)
    except ValueError:
        return math.nan


#: names the generated lines use, for the wrapper's globals
RUNTIME = {"_div": _div, "_pow": _pow, "_sqrt": _sqrt}


# -- values ------------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class Scalar:
    """One host number, computed by the line `{var} = {code}` at item `item` of the wrapper."""
    var: str
    code: str
    operands: tuple = ()            # the Scalars `code` reads
    item: int = 0
    needed: bool = False


@dataclasses.dataclass(frozen=True)
class Literal:
    """A constant host number (`full([], 0.5)`), as its source text."""
    code: str


#: a 0-dim value (Scalar or Literal), or a 1-d one: a list of those
HostValue = Union[Scalar, Literal, list]


class NotHere(Exception):
    """This extern stays an aten call."""


def _literal(x) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise NotHere(f"argument {x!r}")
    x = float(x)
    if x != x or x in (math.inf, -math.inf):
        return f"float('{x}')"
    return repr(x) if x >= 0 else f"({x!r})"


def _scaled(x: str, alpha) -> str:
    return x if alpha == 1 else f"{_literal(alpha)} * {x}"


def _binary(template: str) -> Callable:
    def rule(a, b):
        return template.format(a=a, b=b)
    return rule


#: aten op -> code over its operands' atoms (variables and literals), as torch computes it on floats
ARITHMETIC: dict = {
    aten.add.Tensor: lambda a, b, alpha=1: f"{a} + {_scaled(b, alpha)}",
    aten.add.Scalar: lambda a, b, alpha=1: f"{a} + {_scaled(b, alpha)}",
    aten.sub.Tensor: lambda a, b, alpha=1: f"{a} - {_scaled(b, alpha)}",
    aten.sub.Scalar: lambda a, b, alpha=1: f"{a} - {_scaled(b, alpha)}",
    aten.rsub.Tensor: lambda a, b, alpha=1: f"{b} - {_scaled(a, alpha)}",
    aten.rsub.Scalar: lambda a, b, alpha=1: f"{b} - {_scaled(a, alpha)}",
    aten.mul.Tensor: _binary("{a} * {b}"),
    aten.mul.Scalar: _binary("{a} * {b}"),
    aten.div.Tensor: _binary("_div({a}, {b})"),
    aten.div.Scalar: _binary("_div({a}, {b})"),
    aten.pow.Tensor_Scalar: _binary("_pow({a}, {b})"),
    aten.pow.Tensor_Tensor: _binary("_pow({a}, {b})"),
    aten.pow.Scalar: _binary("_pow({a}, {b})"),
    aten.neg.default: lambda a: f"-{a}",
    aten.reciprocal.default: lambda a: f"_div(1.0, {a})",
    aten.sqrt.default: lambda a: f"_sqrt({a})",
    aten.rsqrt.default: lambda a: f"_div(1.0, _sqrt({a}))",
    aten.abs.default: lambda a: f"abs({a})",
    aten.where.self: lambda c, a, b: f"{a} if {c} else {b}",
}


def _dim0(dim, ndim: int):
    if dim not in (0, -ndim):
        raise NotHere(f"dim {dim}")


def _unsqueeze(x, dim):
    _dim0(dim, 1)
    return [_scalar(x)]


def _select(x, dim, index):
    _dim0(dim, 1)
    return _elements(x)[index]


def _cat(xs, dim=0):
    _dim0(dim, 1)
    return [e for x in xs for e in _elements(x)]


def _stack(xs, dim=0):
    _dim0(dim, 1)
    return [_scalar(x) for x in xs]


def _same(x, **kwargs):
    if set(kwargs) - {"memory_format", "dtype", "layout", "device", "pin_memory", "non_blocking"}:
        raise NotHere(f"arguments {sorted(kwargs)}")
    return x


def _constant(size, value, **kwargs):
    if list(size) != []:
        raise NotHere("not 0-dim")
    return Literal(_literal(value))


#: aten op -> its host value from its operands' host values (no code: lists and forwarding)
STRUCTURE: dict = {
    aten.unsqueeze.default: _unsqueeze,
    aten.select.int: _select,
    aten.cat.default: _cat,
    aten.stack.default: _stack,
    aten.clone.default: _same,
    aten.alias.default: _same,
    aten.lift_fresh_copy.default: _same,
    aten._to_copy.default: _same,           # between float dtypes (the result's is checked): a double
    aten.full.default: _constant,
    aten.scalar_tensor.default: lambda value, **kwargs: Literal(_literal(value)),
}


def _elements(x) -> list:
    if not isinstance(x, list):
        raise NotHere("not 1-d")
    return x


def _scalar(x):
    if not isinstance(x, (Scalar, Literal)):
        raise NotHere("not a 0-dim value")
    return x


def _apply(rule, args, kwargs):
    """A table rule on an op's arguments; one refusing them (an unexpected keyword, a dim other
    than 0, an index out of range) leaves the op an aten call."""
    try:
        return rule(*args, **kwargs)
    except (TypeError, IndexError) as e:
        raise NotHere(str(e)) from None


def _code_atom(x) -> str:
    """An arithmetic operand as code: a Scalar's variable, a literal; 1-d values are refused."""
    if isinstance(x, (Scalar, Literal)):
        return _atom(x)
    return _literal(x)


def _atom(x) -> str:
    return x.var if isinstance(x, Scalar) else x.code


def _scalars_in(x) -> list:
    if isinstance(x, list):
        return [s for e in x for s in _scalars_in(e)]
    return [x] if isinstance(x, Scalar) else []


# -- the plan ----------------------------------------------------------------------------------

class HostMath:
    """Which of the wrapper's externs are Python arithmetic, and the lines that replace them.

    `items` are the wrapper's items in order (kernel calls and `ExternNode`s). The wrapper asks,
    per item index: `lines(i)` (emit before the item), `replaces(i)` (skip the aten call);
    per kernel by-value argument: `scalar_arg(name)`; per buffer: `holds_tensor(name)`."""

    def __init__(self, lowering, items: list):
        self.lw = lowering
        self.items = items
        aten_only: set[int] = set()        # item indices that must stay aten calls
        while True:
            self._translate_all(aten_only)
            more = self._needed_as_tensors() - aten_only
            if not more:
                break
            aten_only |= more
        self._mark_needed()

    # -- translation --------------------------------------------------------------------------

    def _translate_all(self, aten_only: set):
        self.values: dict[str, HostValue] = {}      # buffer name -> its value, where no tensor holds it
        self.producer: dict[str, int] = {}          # buffer name -> item index of its translated extern
        self.writes: dict[int, tuple[str, HostValue]] = {}    # item index -> (host input, value)
        self.replaced: dict[int, ExternNode] = {}
        self.created: list[Scalar] = []
        self._cse: dict[tuple, Scalar] = {}
        self._names: set[str] = set()
        for i, item in enumerate(self.items):
            if settings.host_math and isinstance(item, ExternNode) and i not in aten_only and self._is_host_op(item):
                try:
                    self._translate(i, item)
                except NotHere:
                    continue
                self.replaced[i] = item

    def _is_host_op(self, node: ExternNode) -> bool:
        if node.writes_out or node.result_structure != "single" or len(node.outputs) != 1:
            return False
        out = node.outputs[0]
        if node.mutates is not None:
            return out is None
        return out is not None and self.lw.on_host(out) and out.dtype in FLOAT_DTYPES and len(out.sizes) <= 1

    def _translate(self, i: int, node: ExternNode):
        if node.mutates is not None:
            self._translate_write(i, node)
            return
        out = node.outputs[0]
        args = [self._operand(i, a) for a in node.args]
        kwargs = {k: self._operand(i, v) for k, v in node.kwargs.items()}
        if node.target in ARITHMETIC:
            if out.sizes != ():
                raise NotHere("not 0-dim")
            code = _apply(ARITHMETIC[node.target], [_code_atom(a) for a in args], kwargs)
            value: HostValue = self._scalar_of(i, code, [a for a in args if isinstance(a, Scalar)], out.name,
                                               key=("op", code))
        elif node.target in STRUCTURE:
            value = _apply(STRUCTURE[node.target], args, kwargs)
            if not _fits(value, out.sizes):
                raise NotHere("result does not fit")
        else:
            raise NotHere(str(node.target))
        self.values[out.name] = value
        self.producer[out.name] = i

    def _translate_write(self, i: int, node: ExternNode):
        """`copy_(host input, value computed here)`: `input.fill_(value)`."""
        if node.target is not aten.copy_.default or node.kwargs or len(node.args) != 2:
            raise NotHere("not a plain copy_")
        dst, src = node.args
        if not (isinstance(dst, BufferArg) and dst.is_whole() and dst.sizes == ()
                and dst.buffer.dtype in FLOAT_DTYPES and self.lw.on_host(dst.buffer)):
            raise NotHere("not a 0-dim float host destination")
        if not (isinstance(src, BufferArg) and src.is_whole() and src.buffer.name in self.values):
            raise NotHere("the value is a tensor already: copy_ it")
        self.writes[i] = (dst.buffer.name, _scalar(self.values[src.buffer.name]))
        # later reads of the input see the new value: read it afresh
        self._cse.pop(("read", dst.buffer.name), None)

    def _operand(self, i: int, a):
        """An extern's argument as a host value: a translated buffer's value, a 0-dim float host
        tensor read once (`.item()`), lists element-wise; anything else (numbers, dtypes) as is."""
        if isinstance(a, (list, tuple)):
            return [self._operand(i, x) for x in a]
        if not isinstance(a, BufferArg):
            return a
        buf = a.buffer
        if not a.is_whole():
            raise NotHere("a view")
        if buf.name in self.values:
            return self.values[buf.name]
        if buf.sizes != () or buf.dtype not in READ_DTYPES or not self.lw.on_host(buf):
            raise NotHere(f"reads {buf.name} as a tensor")
        code = f"{buf.name}.item()" if buf.dtype.is_floating_point else f"float({buf.name}.item())"
        return self._scalar_of(i, code, [], buf.name, key=("read", buf.name))

    def _scalar_of(self, i: int, code: str, operands: list, hint: str, key: tuple) -> Scalar:
        found = self._cse.get(key)
        if found is None:
            found = Scalar(self._new_name(hint), code, tuple(operands), i)
            self._cse[key] = found
            self.created.append(found)
        return found

    def _new_name(self, hint: str) -> str:
        name, k = f"h_{hint}", 1
        while name in self._names:
            name, k = f"h_{hint}_{k}", k + 1
        self._names.add(name)
        return name

    # -- what is needed ------------------------------------------------------------------------

    def _needed_as_tensors(self) -> set[int]:
        """Item indices of translated externs whose result something needs as a tensor: an aten
        call, a kernel reading it through a pointer, the graph's caller."""
        names = {o.layout[0].name for o in self.lw.outputs if getattr(o, "layout", None) is not None}
        for i, item in enumerate(self.items):
            if i in self.replaced:
                continue
            if isinstance(item, ExternNode):
                names |= item.reads()
            elif item.kernel is not None:
                by_value = {item.kernel.args[k] for k in item.kernel.scalars}
                names |= set(item.kernel.args) - {n for n in by_value if self._scalar_or_none(n) is not None}
        return {self.producer[n] for n in names if n in self.producer}

    def _mark_needed(self):
        roots = [value for _, value in self.writes.values()]
        for item in self.items:
            if not isinstance(item, ExternNode) and item.kernel is not None:
                roots += [self._scalar_or_none(item.kernel.args[k]) for k in item.kernel.scalars]
        stack = [s for r in roots for s in _scalars_in(r)]
        while stack:
            s = stack.pop()
            if not s.needed:
                s.needed = True
                stack.extend(s.operands)
        self.lines_at: dict[int, list[str]] = collections.defaultdict(list)
        for s in self.created:
            if s.needed:
                self.lines_at[s.item].append(f"{s.var} = {s.code}")
        for i, (dst, value) in self.writes.items():
            self.lines_at[i].append(f"{dst}.fill_({_atom(value)})")

    def _scalar_or_none(self, name: str) -> Optional[HostValue]:
        value = self.values.get(name)
        if isinstance(value, list):
            value = value[0] if len(value) == 1 else None
        return value

    # -- what the wrapper asks -----------------------------------------------------------------

    def lines(self, i: int) -> list[str]:
        """Python lines to emit at item `i` (before it, or instead of it where `replaces(i)`)."""
        return self.lines_at.get(i, [])

    def replaces(self, i: int) -> bool:
        return i in self.replaced

    def scalar_arg(self, name: str) -> Optional[str]:
        """A kernel's by-value argument `name` as Python (a variable or literal), if computed here."""
        value = self._scalar_or_none(name)
        return None if value is None else _atom(value)

    def holds_tensor(self, name: str) -> bool:
        """Is there a tensor named `name` in the wrapper (not a value computed here)?"""
        return name not in self.values

    def aten_calls(self, extern_ops: dict) -> dict:
        """`extern_ops` (the lowering's count per op) less the ops computed here; a write is `fill_`."""
        counts = collections.Counter(extern_ops)
        for i, node in self.replaced.items():
            counts[str(node.target)] -= 1
            if i in self.writes:
                counts[str(aten.fill_.Scalar)] += 1
        return {op: n for op, n in counts.items() if n > 0}

    def python_ops(self) -> dict:
        """How many externs of each op became Python (writes: `fill_`s, counted above)."""
        return dict(collections.Counter(str(node.target) for i, node in self.replaced.items()
                                        if i not in self.writes))


def _fits(value, sizes: tuple) -> bool:
    if isinstance(value, list):
        return len(sizes) == 1 and sizes[0] == len(value) and not any(isinstance(e, list) for e in value)
    return sizes == () and isinstance(value, (Scalar, Literal))
