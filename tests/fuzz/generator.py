"""Random Python programs over tensors, written as source text.

`generate(seed)` returns the text of a self-contained module that defines

    make_target()                      the function, or nn.Module, under test
    make_inputs(seed, device="cpu")    -> (args, kwargs) for one call

Everything about the program (its text, shapes, Python values) follows from the generator's
seed; `make_inputs(s)` draws tensor values (and Python floats) from `s`, so make_inputs(0) and
make_inputs(1) give inputs of the same shapes and types with different values.

The programs cover arithmetic and torch ops with broadcasting, reductions, views and reshapes,
matmul, cat/stack/where; Python control flow (if/elif/else, for over range/lists/enumerate/zip/
dict items/tensor rows, while, break/continue, conditional expressions); module-level helpers
(with defaults, keyword and star calls, recursion, generators, `@dl.disable`), closures with
`nonlocal`, lambdas, small user classes; tuples, lists and dicts (build, index, unpack, star
unpack, comprehensions, mutation of inputs); a small nn.Module (submodules, ModuleList, buffers,
plain attributes, attribute mutation); in-place ops and aliasing (views of inputs, `x.add_()`,
index assignment, augmented assignment); graph-break triggers (print, .item(), .tolist(),
data-dependent branches, dl.graph_break()); globals mutated by the program; and, rarely, code
that raises on purpose (shape errors, IndexError, KeyError, assert, raise).

The generator tracks the type of every name (tensor shape and dtype, known int values, list
lengths, dict keys), so most programs run without error and loops stay short.
"""
from __future__ import annotations

import contextlib
import dataclasses
import random
from typing import Callable, Optional

# ---------------------------------------------------------------------------------------------
# types of generated names
# ---------------------------------------------------------------------------------------------

Shape = tuple


@dataclasses.dataclass(frozen=True)
class T:
    """A tensor of known shape; dtype "float" (float32/float64) or "long"."""
    shape: Shape
    dtype: str = "float"


@dataclasses.dataclass(frozen=True)
class I:
    """A Python int; `value` when the generator knows it (loop bounds need that)."""
    value: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class F:
    """A Python float."""


@dataclasses.dataclass(frozen=True)
class B:
    """A Python bool."""


@dataclasses.dataclass(frozen=True)
class L:
    """A list of float tensors of one shape; `length` None once it is unknown."""
    shape: Shape
    length: Optional[int]


@dataclasses.dataclass(frozen=True)
class Tup:
    """A tuple of tensors."""
    items: tuple


@dataclasses.dataclass(frozen=True)
class D:
    """A dict str -> float tensor of one shape."""
    keys: tuple
    shape: Shape


@dataclasses.dataclass(frozen=True)
class Obj:
    """An instance of the program's small user class `Box` (attributes t: tensor, k: int)."""
    shape: Shape


def broadcast(a: Shape, b: Shape) -> Optional[Shape]:
    """The broadcast shape of a and b, or None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and 1 not in (da, db):
            return None
        out.append(db if da == 1 else da)
    return tuple(reversed(out))


def fits_into(target: Shape, other: Shape) -> bool:
    """Can a tensor of shape `other` be written into (in-place op) one of shape `target`?"""
    return broadcast(target, other) == tuple(target)


def shape_src(shape: Shape) -> str:
    """A shape as a Python tuple literal: (), (4,), (2, 3)."""
    return repr(tuple(shape))


# ---------------------------------------------------------------------------------------------
# program-level context
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Helper:
    """A module-level function the program may call."""
    name: str
    params: list            # [(name, type)]
    ret: T
    kind: str = "plain"     # plain | recursive | disabled | generator


class Program:
    """What the whole generated module has: shapes, globals, helpers, the module class."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.rows = rng.choice([2, 3])
        self.feat = rng.choice([3, 4, 5])
        self.main = (self.rows, self.feat)
        self.shapes = [self.main, (self.feat,), (self.rows, 1), (), (1, self.feat)]
        if rng.random() < 0.15:
            self.shapes.append((2, self.rows, self.feat))
        self.helpers: list[Helper] = []
        self.uses_module = rng.random() < 0.45
        self.module_grad = rng.random() < 0.4
        self.target_is_module = self.uses_module and rng.random() < 0.4
        self.uses_box = rng.random() < 0.15
        self.global_counter = rng.random() < 0.15
        self.global_history = rng.random() < 0.15
        self.n_closures = 0


# ---------------------------------------------------------------------------------------------
# one function body
# ---------------------------------------------------------------------------------------------

class Body:
    """Generates the statements of one function: main function, helper, closure or forward."""

    def __init__(self, prog: Program, scope: dict, *, kind: str, indent: int, budget: int,
                 mod: Optional[str] = None):
        self.prog, self.rng = prog, prog.rng
        self.scope = dict(scope)
        self.kind = kind                      # main | helper | closure | forward
        self.lines: list[str] = []
        self.indent = indent
        self.budget = budget
        self.mod = mod                        # how code refers to the program's module, or None
        self.protected: set[str] = set()      # loop counters: never reassigned
        self.loop_depth = 0
        self.block_depth = 0
        self.in_while = 0
        self.names = 0

    # ---- small utilities --------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}_{self.kind[0]}{self.indent}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq):
        return self.rng.choice(list(seq))

    def names_of(self, pred: Callable) -> list[str]:
        return [n for n, t in self.scope.items() if pred(t)]

    def tensors(self, pred: Callable = lambda t: True) -> list[str]:
        return self.names_of(lambda t: isinstance(t, T) and pred(t))

    def any_device(self) -> str:
        names = self.tensors()
        return f"{names[0]}.device" if names else "'cpu'"

    def float_const(self) -> str:
        return self.pick(["0.5", "2.0", "-1.5", "3", "0.25", "1e-3", "-2"])

    @contextlib.contextmanager
    def block(self, loop: bool = False):
        """An indented block: names created inside are forgotten after it, ints and list
        lengths changed inside become unknown."""
        saved = dict(self.scope)
        self.indent += 1
        self.block_depth += 1
        self.loop_depth += loop
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.emit("pass")
            self.indent -= 1
            self.block_depth -= 1
            self.loop_depth -= loop
            merged = {}
            for name, before in saved.items():
                after = self.scope.get(name)
                if after == before:
                    merged[name] = before
                elif isinstance(before, I):
                    merged[name] = I(None)
                elif isinstance(before, L) and isinstance(after, L):
                    merged[name] = L(before.shape, None)
                elif isinstance(before, D):
                    merged[name] = before
                elif type(after) is type(before):
                    merged[name] = before if not isinstance(before, T) else after
            self.scope = merged

    # ---- Python-value expressions -----------------------------------------------------------
    def int_expr(self) -> tuple[str, I]:
        """An int-valued expression; its value when it is known here."""
        opts: list[tuple[str, I]] = []
        for name, t in self.scope.items():
            if isinstance(t, I):
                opts.append((name, t))
                if t.value is not None:
                    opts.append((f"{name} + 1", I(t.value + 1)))
                    opts.append((f"{name} % 3", I(t.value % 3)))
                    opts.append((f"max({name}, 1)", I(max(t.value, 1))))
                    opts.append((f"min({name}, 2)", I(min(t.value, 2))))
                else:
                    opts.append((f"abs({name}) % 4", I(None)))
            elif isinstance(t, T) and t.shape:
                d = self.rng.randrange(len(t.shape))
                opts.append((f"{name}.shape[{d}]", I(t.shape[d])))
                opts.append((f"{name}.size({d - len(t.shape)})", I(t.shape[d])))
            elif isinstance(t, T):
                opts.append((f"{name}.dim()", I(0)))
            elif isinstance(t, L):
                opts.append((f"len({name})", I(t.length)))
        if self.prog.global_counter:
            opts.append(("CALLS % 3", I(None)))
        opts.append(("K", I(2)))
        opts.append((str(self.rng.randint(0, 3)), None))
        code, t = self.pick(opts)
        if t is None:
            t = I(int(code))
        return code, t

    def condition(self) -> str:
        """A condition on Python values (decided while tracing, guarded)."""
        opts = []
        code, t = self.int_expr()
        opts.append(f"{code} {self.pick(['>', '<', '==', '!=', '>=', '<='])} {self.rng.randint(0, 3)}")
        for name, t in self.scope.items():
            if isinstance(t, B):
                opts.append(self.pick([name, f"not {name}"]))
            elif isinstance(t, F):
                opts.append(f"{name} > {self.pick(['0.5', '0', '-0.25'])}")
            elif isinstance(t, T):
                opts.append(self.pick([f"{name}.dim() == {len(t.shape)}", f"{name}.is_contiguous()",
                                       f"{name}.dtype == torch.float32", f"{name}.requires_grad",
                                       f"{name}.numel() > 4"]))
            elif isinstance(t, D):
                opts.append(f"'{self.pick(['a', 'b', 'zz'])}' in {name}")
            elif isinstance(t, L):
                opts.append(f"len({name}) >= 2")
        if self.mod:
            opts.append(f"{self.mod}.use_act")
            opts.append(f"{self.mod}.training")
        if self.chance(0.15):
            a, b = self.pick(opts), self.pick(opts)
            return f"{a} {self.pick(['and', 'or'])} {b}"
        return self.pick(opts)

    def data_condition(self) -> Optional[str]:
        """A condition on tensor data: a graph break (data-dependent branch or .item())."""
        names = self.tensors(lambda t: t.dtype == "float")
        if not names:
            return None
        v = self.pick(names)
        return self.pick([f"{v}.sum() > 0", f"({v} > 0).any()", f"{v}.mean().item() > 0",
                          f"bool({v}.max() < 1)", f"{v}.abs().sum() > {self.float_const()}"])

    # ---- tensor expressions -----------------------------------------------------------------
    def tensor_expr(self, depth: int = 2, want: Optional[Callable] = None) -> Optional[tuple[str, T]]:
        """A tensor expression (code, type); `want` filters acceptable types."""
        for _ in range(12):
            got = self._tensor_expr(depth)
            if got is not None and (want is None or want(got[1])):
                return got
        return None

    def _tensor_expr(self, depth: int) -> Optional[tuple[str, T]]:
        if depth <= 0 or self.chance(0.25):
            return self._leaf()
        producer = self.rng.choices(
            [self._binary, self._scalar_op, self._unary, self._reduce, self._reshape, self._index,
             self._matmul, self._cat_stack, self._where, self._module_call, self._helper_call,
             self._container_expr, self._ternary],
            weights=[6, 3, 5, 3, 3, 2, 2, 1.5, 1.5, 2.5, 2.5, 1.5, 0.7])[0]
        return producer(depth - 1)

    def _leaf(self) -> Optional[tuple[str, T]]:
        names = self.tensors()
        if names and not self.chance(0.12):
            n = self.pick(names)
            return n, self.scope[n]
        shape = self.pick(self.prog.shapes)
        dev = self.any_device()
        return self.pick([
            (f"torch.ones({shape_src(shape)}, device={dev})", T(shape)),
            (f"torch.full({shape_src(shape)}, {self.float_const()}, device={dev})", T(shape)),
            (f"torch.arange({self.prog.feat}, device={dev}).float()", T((self.prog.feat,))),
            (f"torch.linspace(-1, 1, {self.prog.feat}, device={dev})", T((self.prog.feat,))),
            (f"torch.tensor({self.float_const()}, device={dev})", T(())),
        ])

    def _binary(self, depth):
        a = self.tensor_expr(depth)
        if a is None:
            return None
        code, t = a
        b = self.tensor_expr(depth - 1, want=lambda u: broadcast(t.shape, u.shape) is not None)
        if b is None:
            return None
        op = self.pick(["+", "-", "*", "/", "+", "*"])
        dtype = "float" if "float" in (t.dtype, b[1].dtype) or op == "/" else "long"
        fn = self.pick([None, None, None, "torch.add", "torch.mul", "torch.maximum", "torch.sub", "floor", "trunc"])
        shape = broadcast(t.shape, b[1].shape)
        if fn in ("floor", "trunc"):         # rounded float division: exact quotients, 1.0 // 0.1 == 9
            return f"torch.div({code}.float(), {b[0]}, rounding_mode='{fn}')", T(shape, "float")
        if fn:
            return f"{fn}({code}, {b[0]})", T(shape, dtype)
        return f"({code} {op} {b[0]})", T(shape, dtype)

    def _scalar_op(self, depth):
        a = self.tensor_expr(depth)
        if a is None:
            return None
        code, t = a
        scalars = [self.float_const()] + self.names_of(lambda u: isinstance(u, (I, F)))
        if self.mod:
            scalars.append(f"{self.mod}.scale")
        s = self.pick(scalars)
        form = self.pick(["{a} * {s}", "{a} + {s}", "{s} - {a}", "{a} / 2", "{a} ** 2", "{s} * {a}"])
        dtype = t.dtype if form in ("{a} ** 2",) else "float"
        return "(" + form.format(a=code, s=s) + ")", T(t.shape, dtype)

    def _unary(self, depth):
        a = self.tensor_expr(depth)
        if a is None:
            return None
        code, t = a
        if t.dtype == "long":
            return self.pick([(f"{code}.float()", T(t.shape)), (f"({code} * 2)", t), (f"(-{code})", t),
                              (f"{code}.abs()", t)])
        fns = ["torch.relu({})", "{}.sigmoid()", "torch.tanh({})", "{}.sin()", "{}.cos()", "{}.abs()",
               "(-{})", "{}.exp()", "torch.clamp({}, -1.0, 1.0)", "{}.clamp(min=0.0)", "{}.square()",
               "torch.sqrt({}.abs() + 1)", "{}.log1p()", "torch.nn.functional.gelu({})", "{}.neg()",
               "{}.round()", "torch.sign({})", "{}.clone()", "{}.contiguous()", "{}.detach()",
               "{}.double()", "{}.float()", "torch.nn.functional.leaky_relu({}, 0.1)", "{}.expm1()",
               "torch.nn.functional.softplus({})", "torch.nn.functional.elu({})", "torch.logaddexp({0}, {0} * 0.5)",
               "torch.xlogy({0}.abs(), {0})", "torch.atan2({0}, {0} * 0.5 - 1)", "{}.atan()", "torch.asinh({})",
               "torch.hypot({0}, {0} + 1)", "{}.sinh()", "torch.copysign({0}, -{0})", "torch.round({}, decimals=1)",
               "torch.fmax({0}, {0}.log())"]
        if t.shape:
            fns += ["{}.softmax(dim=-1)", "{}.cumsum(0)", "torch.flip({}, [0])", "{}.roll(1, 0)"]
        return self.pick(fns).format(code), t

    def _reduce(self, depth):
        a = self.tensor_expr(depth, want=lambda t: t.dtype == "float")
        if a is None:
            return None
        code, t = a
        if not t.shape or self.chance(0.3):
            fn = self.pick(["sum", "mean", "amax", "norm", "max", "min"])
            return f"{code}.{fn}()", T(())
        d = self.rng.randrange(len(t.shape))
        keep = self.chance(0.4)
        shape = tuple(1 if i == d else s for i, s in enumerate(t.shape)) if keep else \
            tuple(s for i, s in enumerate(t.shape) if i != d)
        fn = self.pick(["sum", "mean", "amax", "prod", "logsumexp"])
        dim = self.pick([d, d - len(t.shape)])
        return f"{code}.{fn}(dim={dim}, keepdim={keep})", T(shape)

    def _reshape(self, depth):
        a = self.tensor_expr(depth)
        if a is None:
            return None
        code, t = a
        s = t.shape
        numel = 1
        for d in s:
            numel *= d
        opts = [(f"{code}.reshape(-1)", T((numel,), t.dtype)), (f"{code}.unsqueeze(0)", T((1,) + s, t.dtype)),
                (f"{code}.flatten()", T((numel,), t.dtype)), (f"{code}[None]", T((1,) + s, t.dtype))]
        if len(s) >= 2 and s[0] > 0:
            perm = tuple(reversed(s))
            opts += [(f"{code}.t()" if len(s) == 2 else f"{code}.permute({', '.join(str(i) for i in reversed(range(len(s))))})",
                      T(perm, t.dtype)),
                     (f"{code}.transpose(0, -1)", T((s[-1],) + s[1:-1] + (s[0],), t.dtype)),
                     (f"{code}.reshape({s[0]}, -1)", T((s[0], numel // s[0]), t.dtype))]
        if 1 in s:
            opts.append((f"{code}.squeeze()", T(tuple(d for d in s if d != 1), t.dtype)))
            i = s.index(1)
            full = tuple(self.prog.feat if j == i and len(s) - 1 == j else (self.prog.rows if j == i else d)
                         for j, d in enumerate(s))
            opts.append((f"{code}.expand({', '.join(map(str, full))})", T(full, t.dtype)))
        if len(s) == 1:
            opts.append((f"{code}.unsqueeze(-1)", T(s + (1,), t.dtype)))
        if s and s[0] >= 2 and all(s):
            # windows of 2 rows overlapping by one, from the tensor's own strides (Longformer's
            # chunks): as_strided addresses the storage, which eager lays out per op
            rest = "".join(f", {d}" for d in s[1:])
            opts.append((f"(lambda v: v.as_strided(({s[0] - 1}, 2{rest}), (v.stride(0),) + v.stride()))({code})",
                         T((s[0] - 1, 2) + s[1:], t.dtype)))
        if 3 <= len(s) <= 5 and t.dtype == "float" and all(s):
            mode = self.pick(["nearest", "nearest-exact", ("linear", "bilinear", "trilinear")[len(s) - 3]])
            opts.append((f"torch.nn.functional.interpolate({code}, scale_factor=2, mode={mode!r})",
                         T(s[:2] + tuple(2 * d for d in s[2:]), t.dtype)))
        return self.pick(opts)

    def _index(self, depth):
        a = self.tensor_expr(depth, want=lambda t: len(t.shape) >= 1)
        if a is None:
            return None
        code, t = a
        s = t.shape
        opts = [(f"{code}[0]", T(s[1:], t.dtype)), (f"{code}[-1]", T(s[1:], t.dtype)),
                (f"{code}[1:]", T((s[0] - 1,) + s[1:], t.dtype)), (f"{code}[::2]", T(((s[0] + 1) // 2,) + s[1:], t.dtype)),
                (f"{code}[..., :1]", T(s[:-1] + (1,), t.dtype))]
        if len(s) >= 2:
            opts += [(f"{code}[:, 0]", T((s[0],) + s[2:], t.dtype)), (f"{code}[:, 1:]", T((s[0], s[1] - 1) + s[2:], t.dtype)),
                     (f"{code}[0, :2]", T((min(2, s[1]),) + s[2:], t.dtype))]
        idx = self.tensors(lambda u: u.dtype == "long" and len(u.shape) == 1)
        if idx and s[0] == self.prog.rows:
            i = self.pick(idx)
            opts.append((f"{code}[{i}]", T(self.scope[i].shape + s[1:], t.dtype)))
            opts.append((f"{code}.index_select(0, {i})", T(self.scope[i].shape + s[1:], t.dtype)))
        return self.pick(opts)

    def _matmul(self, depth):
        a = self.tensor_expr(depth, want=lambda t: len(t.shape) == 2 and t.dtype == "float")
        if a is None:
            return None
        code, t = a
        m, n = t.shape
        rhs = self.tensors(lambda u: u.dtype == "float" and len(u.shape) in (1, 2) and u.shape[0] == n)
        opts = [(f"({code} @ {code}.t())", T((m, m))), (f"({code}.t() @ {code})", T((n, n))),
                (f"torch.mm({code}, {code}.t())", T((m, m)))]
        for r in rhs:
            rs = self.scope[r].shape
            opts.append((f"({code} @ {r})", T((m,) + rs[1:])))
        return self.pick(opts)

    def _cat_stack(self, depth):
        a = self.tensor_expr(depth, want=lambda t: len(t.shape) >= 1)
        if a is None:
            return None
        code, t = a
        other = self.pick([f"{code} * 2", f"{code}.sin()", "torch.zeros_like(" + code + ")"])
        d = self.rng.randrange(len(t.shape))
        cat_shape = tuple(s * 2 if i == d else s for i, s in enumerate(t.shape))
        return self.pick([(f"torch.cat([{code}, {other}], dim={d})", T(cat_shape, t.dtype)),
                          (f"torch.stack(({code}, {other}))", T((2,) + t.shape, t.dtype)),
                          (f"torch.stack([{code}, {other}], dim=-1)", T(t.shape + (2,), t.dtype))])

    def _where(self, depth):
        a = self.tensor_expr(depth, want=lambda t: t.dtype == "float")
        if a is None:
            return None
        code, t = a
        b = self.tensor_expr(depth - 1, want=lambda u: u.dtype == "float" and broadcast(t.shape, u.shape) is not None)
        if b is None:
            return None
        shape = broadcast(t.shape, b[1].shape)
        return self.pick([(f"torch.where({code} > 0, {code}, {b[0]})", T(shape)),
                          (f"{code}.masked_fill({code} < 0, {self.float_const()})", t),
                          (f"torch.maximum({code}, {b[0]})", T(shape)),
                          (f"(({code} > {b[0]}).float() * 2)", T(shape))])

    def _module_call(self, depth):
        if not self.mod:
            return None
        feat = self.prog.feat
        a = self.tensor_expr(depth, want=lambda t: t.dtype == "float" and len(t.shape) >= 1 and t.shape[-1] == feat)
        if a is None:
            return None
        code, t = a
        mod = self.mod
        opts = [(f"{mod}.lin({code})", t), (f"{mod}.layers[0]({code})", t), (f"({code} + {mod}.buf)", t),
                (f"({code} * {mod}.scale)", t), (f"torch.nn.functional.linear({code}, {mod}.lin.weight)", t),
                (f"({code} @ {mod}.lin.weight.t() + {mod}.lin.bias)", t)]
        if t.shape == self.prog.main and self.kind != "forward":
            opts.append((f"{mod}({code})", t))
        return self.pick(opts)

    def _helper_call(self, depth):
        helpers = [h for h in self.prog.helpers if h.kind != "generator"]
        if self.kind == "closure" or not helpers:
            return self._closure_call(depth)
        h = self.pick(helpers)
        args = []
        for pname, ptype in h.params:
            if isinstance(ptype, T):
                got = self.tensor_expr(depth, want=lambda t, p=ptype: t == p)
                if got is None:
                    return None
                args.append(got[0])
            else:
                args.append(str(self.rng.randint(0, 2)))
        if h.kind == "plain" and len(args) >= 2 and self.chance(0.3):
            return f"{h.name}({args[0]}, {h.params[1][0]}={args[1]})", h.ret
        if h.kind == "plain" and self.chance(0.15):
            return f"{h.name}(*({', '.join(args)},))", h.ret
        return f"{h.name}({', '.join(args)})", h.ret

    def _closure_call(self, depth):
        closures = self.names_of(lambda t: isinstance(t, tuple) and t[0] == "closure")
        if not closures:
            return None
        c = self.pick(closures)
        _, param, ret = self.scope[c]
        got = self.tensor_expr(depth, want=lambda t: t == param)
        return None if got is None else (f"{c}({got[0]})", ret)

    def _container_expr(self, depth):
        opts = []
        for name, t in self.scope.items():
            if isinstance(t, L) and t.length:
                i = self.rng.randrange(-t.length, t.length)
                opts.append((f"{name}[{i}]", T(t.shape)))
                opts.append((f"sum({name})", T(t.shape)))
                opts.append((f"torch.stack({name}).mean(0)", T(t.shape)))
            elif isinstance(t, L):
                opts.append((f"sum(e * 0.5 for e in {name})", T(t.shape)))
            elif isinstance(t, D) and t.keys:
                opts.append((f"{name}['{self.pick(t.keys)}']", T(t.shape)))
                opts.append((f"{name}.get('{self.pick(t.keys)}')", T(t.shape)))
            elif isinstance(t, Tup) and t.items:
                i = self.rng.randrange(len(t.items))
                opts.append((f"{name}[{i}]", t.items[i]))
            elif isinstance(t, Obj):
                opts.append((f"{name}.t", T(t.shape)))
                opts.append((f"{name}.scaled()", T(t.shape)))
        return self.pick(opts) if opts else None

    def _ternary(self, depth):
        a = self.tensor_expr(depth)
        if a is None:
            return None
        b = self.tensor_expr(depth - 1, want=lambda t: t == a[1])
        if b is None:
            return None
        return f"({a[0]} if {self.condition()} else {b[0]})", a[1]

    # ---- statements -------------------------------------------------------------------------
    def statements(self, n: int) -> None:
        """Up to n statements; a block always gets at least one."""
        for i in range(n):
            if self.budget <= 0 and (i > 0 or not self.block_depth):
                return
            self.statement()

    def statement(self) -> None:
        self.budget -= 1
        table = [(self.s_assign, 10), (self.s_augassign, 3), (self.s_inplace, 4), (self.s_setitem, 2.5),
                 (self.s_view, 2.5), (self.s_int, 2), (self.s_if, 3), (self.s_for, 3), (self.s_while, 1),
                 (self.s_list, 2), (self.s_list_mutation, 2), (self.s_tuple, 1.5), (self.s_dict, 1.5),
                 (self.s_module, 2 if self.mod else 0), (self.s_closure, 1.2 if self.kind == "main" else 0),
                 (self.s_break_trigger, 2.5), (self.s_global, 0.7), (self.s_with, 0.8), (self.s_assert, 0.5),
                 (self.s_del, 0.4), (self.s_box, 1 if self.prog.uses_box else 0),
                 (self.s_generator_use, 0.8), (self.s_error, 0.35), (self.s_try, 0.3)]
        funcs, weights = zip(*table)
        for _ in range(6):
            if self.rng.choices(funcs, weights)[0]():
                return

    def assignable(self, name: str) -> bool:
        return name not in self.protected and not (self.loop_depth and isinstance(self.scope.get(name), I))

    def s_assign(self) -> bool:
        got = self.tensor_expr(self.pick([1, 2, 2, 3]))
        if got is None:
            return False
        code, t = got
        same = [n for n in self.tensors(lambda u: u == t) if self.assignable(n)]
        name = self.pick(same) if same and self.chance(0.35) else self.fresh("v")
        if self.block_depth and name not in self.scope:
            pass
        self.emit(f"{name} = {code}")
        self.scope[name] = t
        return True

    def s_augassign(self) -> bool:
        targets = [n for n in self.tensors(lambda t: t.dtype == "float") if self.assignable(n)]
        if not targets:
            return False
        v = self.pick(targets)
        t = self.scope[v]
        got = self.tensor_expr(1, want=lambda u: fits_into(t.shape, u.shape))
        if got is None:
            return False
        self.emit(f"{v} {self.pick(['+=', '-=', '*='])} {got[0]}")
        return True

    def inplace_targets(self) -> list[tuple[str, T]]:
        """Tensors that may be written in place: names, list/dict elements, the module buffer."""
        out = [(n, self.scope[n]) for n in self.tensors(lambda t: t.dtype == "float")]
        for name, t in self.scope.items():
            if isinstance(t, L) and t.length:
                out.append((f"{name}[0]", T(t.shape)))
            elif isinstance(t, D) and t.keys:
                out.append((f"{name}['{t.keys[0]}']", T(t.shape)))
        if self.mod:
            out.append((f"{self.mod}.buf", T((self.prog.feat,))))
        return out

    def s_inplace(self) -> bool:
        targets = self.inplace_targets()
        if not targets:
            return False
        v, t = self.pick(targets)
        got = self.tensor_expr(1, want=lambda u: fits_into(t.shape, u.shape) and u.dtype == "float")
        opts = [f"{v}.mul_({self.float_const()})", f"{v}.clamp_(min=-0.5)", f"{v}.relu_()", f"{v}.neg_()",
                f"{v}.masked_fill_({v} > 0.5, 0.0)", f"{v}.fill_({self.float_const()})", f"{v}.zero_()",
                f"{v}.div_(2)", f"torch.add({v}, 1, out={v})"]
        if got:
            other = got[0]
            opts += [f"{v}.add_({other})", f"{v}.sub_({other}, alpha=2)", f"{v}.copy_({other})",
                     f"{v}.addcmul_({other}, {other}, value=0.5)", f"{v}.add_({other})"]
        self.emit(self.pick(opts))
        return True

    def s_setitem(self) -> bool:
        targets = [(v, t) for v, t in self.inplace_targets() if t.shape]
        if not targets:
            return False
        v, t = self.pick(targets)
        s = t.shape
        sub = self.pick(["[0]", "[-1]", "[1:]", "[..., 0]"] + (["[:, 0]", "[:, 1:]", "[0, 0]"] if len(s) >= 2 else []))
        shapes = {"[0]": s[1:], "[-1]": s[1:], "[1:]": (s[0] - 1,) + s[1:], "[..., 0]": s[:-1]}
        if len(s) >= 2:
            shapes.update({"[:, 0]": (s[0],) + s[2:], "[:, 1:]": (s[0], s[1] - 1) + s[2:], "[0, 0]": s[2:]})
        sub_shape = shapes[sub]
        if self.chance(0.15):
            self.emit(f"{v}[{v} > 0] = {self.float_const()}")
            return True
        got = self.tensor_expr(1, want=lambda u: fits_into(sub_shape, u.shape))
        rhs = got[0] if got and self.chance(0.7) else self.float_const()
        self.emit(f"{v}{sub} {self.pick(['=', '=', '+='])} {rhs}")
        return True

    def s_view(self) -> bool:
        """A view of a tensor (often an input), so later in-place ops on it write through."""
        targets = [(v, t) for v, t in self.inplace_targets() if t.shape]
        if not targets:
            return False
        v, t = self.pick(targets)
        s = t.shape
        numel = 1
        for d in s:
            numel *= d
        opts = [(f"{v}[0]", T(s[1:])), (f"{v}.view(-1)", T((numel,))), (f"{v}.unsqueeze(0)", T((1,) + s)),
                (f"{v}[1:]", T((s[0] - 1,) + s[1:])), (f"{v}.narrow(0, 0, 1)", T((1,) + s[1:]))]
        if len(s) == 2:
            opts += [(f"{v}.t()", T((s[1], s[0]))), (f"{v}[:, -1]", T((s[0],))), (f"{v}.diagonal()", T((min(s),)))]
        code, vt = self.pick(opts)
        name = self.fresh("w")
        self.emit(f"{name} = {code}")
        self.scope[name] = vt
        return True

    def s_int(self) -> bool:
        code, t = self.int_expr()
        ints = [n for n in self.names_of(lambda u: isinstance(u, I)) if self.assignable(n)]
        name = self.pick(ints) if ints and self.chance(0.3) else self.fresh("k")
        if name in self.scope and self.chance(0.5):
            self.emit(f"{name} += {code}")
            old = self.scope[name].value
            t = I(old + t.value if old is not None and t.value is not None else None)
        else:
            self.emit(f"{name} = {code}")
        self.scope[name] = I(t.value if (t.value is not None and abs(t.value) < 50) else None)
        return True

    def s_if(self) -> bool:
        if self.block_depth >= 2:
            return False
        data = self.chance(0.2)
        cond = self.data_condition() if data else self.condition()
        if cond is None:
            return False
        self.emit(f"if {cond}:")
        with self.block():
            self.statements(self.rng.randint(1, 3))
        if self.chance(0.25):
            self.emit(f"elif {self.condition()}:")
            with self.block():
                self.statements(self.rng.randint(1, 2))
        if self.chance(0.5):
            self.emit("else:")
            with self.block():
                self.statements(self.rng.randint(1, 2))
        return True

    def loop_body(self, loop_vars: dict, iterated: tuple = ()) -> None:
        """The body of a for loop; `loop_vars` exist only inside it (a loop over nothing
        leaves them unbound)."""
        fresh = [n for n in iterated if n not in self.protected]
        self.protected.update(fresh)          # no appends to what is being iterated
        with self.block(loop=True):
            self.scope.update(loop_vars)
            self.protected.update(n for n, t in loop_vars.items() if isinstance(t, I))
            if self.chance(0.15) and not self.in_while:
                self.emit(f"if {self.condition()}:")
                with self.block():
                    self.emit(self.pick(["continue", "break"]))
            self.statements(self.rng.randint(1, 3))
        self.protected.difference_update(fresh)

    def s_for(self) -> bool:
        if self.block_depth >= 2:
            return False
        kind = self.pick(["range", "range", "list", "enumerate", "zip", "items", "rows"])
        i = self.fresh("i")
        iterated, loop_vars = (), {}
        if kind == "range":
            bounds = [n for n, t in self.scope.items() if isinstance(t, I) and t.value is not None and 0 <= t.value <= 4]
            bound = self.pick(bounds) if bounds and self.chance(0.6) else str(self.rng.randint(0, 3))
            self.emit(f"for {i} in range({bound}):")
            loop_vars[i] = I(None)
        elif kind in ("list", "enumerate", "zip"):
            lists = self.names_of(lambda t: isinstance(t, L))
            if not lists:
                return False
            lst = self.pick(lists)
            e = self.fresh("e")
            if kind == "list":
                self.emit(f"for {e} in {lst}:")
            elif kind == "enumerate":
                self.emit(f"for {i}, {e} in enumerate({lst}):")
                loop_vars[i] = I(None)
            else:
                other = self.pick(lists)
                e2 = self.fresh("e")
                self.emit(f"for {e}, {e2} in zip({lst}, {other}):")
                loop_vars[e2] = T(self.scope[other].shape)
            loop_vars[e] = T(self.scope[lst].shape)
            iterated = (lst, other) if kind == "zip" else (lst,)
        elif kind == "items":
            dicts = self.names_of(lambda t: isinstance(t, D))
            if not dicts:
                return False
            d = self.pick(dicts)
            key, val = self.fresh("key"), self.fresh("val")
            self.emit(f"for {key}, {val} in {d}.items():")
            loop_vars[val] = T(self.scope[d].shape)
            iterated = (d,)
        else:
            rows = self.tensors(lambda t: len(t.shape) >= 1 and t.shape[0] <= 4)
            if not rows:
                return False
            v = self.pick(rows)
            row = self.fresh("row")
            self.emit(f"for {row} in {v}:")
            loop_vars[row] = T(self.scope[v].shape[1:], self.scope[v].dtype)
        self.loop_body(loop_vars, iterated)
        return True

    def s_while(self) -> bool:
        if self.block_depth >= 2:
            return False
        j = self.fresh("j")
        self.emit(f"{j} = 0")
        self.emit(f"while {j} < {self.rng.randint(1, 3)}:")
        self.scope[j] = I(None)
        self.protected.add(j)
        self.in_while += 1
        with self.block(loop=True):
            self.emit(f"{j} += 1")
            self.statements(self.rng.randint(1, 2))
        self.in_while -= 1
        return True

    def s_list(self) -> bool:
        lists = self.names_of(lambda t: isinstance(t, L))
        name = self.fresh("lst")
        if lists and self.chance(0.5):
            src = self.pick(lists)
            t = self.scope[src]
            form = self.pick(["[e * 2 for e in {}]", "list({})", "{}[:]", "[e.sin() for e in {} if e.dim() >= 0]",
                              "{} + {}", "list(reversed({}))"])
            length = t.length * 2 if (form == "{} + {}" and t.length) else t.length
            self.emit(f"{name} = {form.format(src, src)}")
            self.scope[name] = L(t.shape, length)
            return True
        a = self.tensor_expr(1, want=lambda t: t.dtype == "float")
        if a is None:
            return False
        b = self.tensor_expr(1, want=lambda t: t == a[1])
        items = [a[0]] + ([b[0]] if b else [])
        self.emit(f"{name} = [{', '.join(items)}]")
        self.scope[name] = L(a[1].shape, len(items))
        return True

    def s_list_mutation(self) -> bool:
        lists = [n for n in self.names_of(lambda t: isinstance(t, L)) if n not in self.protected]
        if not lists:
            return False
        name = self.pick(lists)
        t = self.scope[name]
        got = self.tensor_expr(1, want=lambda u: u == T(t.shape))
        if got is None:
            return False
        e = got[0]
        ops = [("append", 1), ("insert", 1), ("extend", 1)]
        if t.length:
            ops.append(("setitem", 0))
        if t.length and t.length >= 2 and not self.loop_depth:
            ops += [("pop", -1), ("del", -1)]
        op, delta = self.pick(ops)
        self.emit({"append": f"{name}.append({e})", "insert": f"{name}.insert(0, {e})",
                   "extend": f"{name}.extend([{e}])", "setitem": f"{name}[0] = {e}", "pop": f"{name}.pop()",
                   "del": f"del {name}[0]"}[op])
        length = None if (t.length is None or self.loop_depth) else t.length + delta
        self.scope[name] = L(t.shape, length)
        return True

    def s_tuple(self) -> bool:
        a = self.tensor_expr(1)
        b = self.tensor_expr(1)
        if a is None or b is None:
            return False
        name = self.fresh("tp")
        self.emit(f"{name} = ({a[0]}, {b[0]})")
        self.scope[name] = Tup((a[1], b[1]))
        if self.chance(0.6):
            p, q = self.fresh("p"), self.fresh("q")
            self.emit(self.pick([f"{p}, {q} = {name}", f"{q}, {p} = {name}[1], {name}[0]"]))
            self.scope[p], self.scope[q] = a[1], b[1]
        lists = [n for n, t in self.scope.items() if isinstance(t, L) and t.length and t.length >= 2]
        if lists and self.chance(0.4):
            lst = self.pick(lists)
            first, rest = self.fresh("first"), self.fresh("rest")
            self.emit(f"{first}, *{rest} = {lst}")
            self.scope[first] = T(self.scope[lst].shape)
            self.scope[rest] = L(self.scope[lst].shape, self.scope[lst].length - 1)
        return True

    def s_dict(self) -> bool:
        dicts = [n for n in self.names_of(lambda t: isinstance(t, D)) if n not in self.protected]
        if dicts and self.chance(0.6):
            d = self.pick(dicts)
            t = self.scope[d]
            got = self.tensor_expr(1, want=lambda u: u == T(t.shape))
            if got is None:
                return False
            key = self.pick(["a", "b", "c", "z"])
            form = self.pick([f"{d}['{key}'] = {got[0]}", f"{d}.update({{'{key}': {got[0]}}})",
                              f"{d}.setdefault('{key}', {got[0]})"])
            self.emit(form)
            if key not in t.keys and not self.block_depth:
                self.scope[d] = D(t.keys + (key,), t.shape)
            return True
        a = self.tensor_expr(1, want=lambda u: u.dtype == "float")
        if a is None:
            return False
        name = self.fresh("dd")
        if dicts and self.chance(0.4):
            src = self.pick(dicts)
            self.emit(f"{name} = {{k: v * 2 for k, v in {src}.items()}}")
            self.scope[name] = self.scope[src]
            return True
        self.emit(f"{name} = {{'a': {a[0]}, 'b': {a[0]} + 1}}")
        self.scope[name] = D(("a", "b"), a[1].shape)
        return True

    def s_module(self) -> bool:
        mod, feat = self.mod, self.prog.feat
        kind = self.pick(["count", "layers", "buf", "attr_read", "sub"])
        if kind == "count":
            self.emit(f"{mod}.count += 1" if self.chance(0.7) else f"{mod}.count = {mod}.count * 2")
            return True
        vs = [n for n in self.tensors(lambda t: t.dtype == "float" and t.shape and t.shape[-1] == feat) if self.assignable(n)]
        if not vs:
            return False
        v = self.pick(vs)
        if kind == "layers":
            layer = self.fresh("layer")
            self.emit(f"for {layer} in {mod}.layers:")  # the module's ModuleList is never empty
            with self.block(loop=True):
                self.emit(f"{v} = {layer}({v})")
        elif kind == "buf":
            self.emit(f"{mod}.buf.add_({v}.reshape(-1, {feat}).mean(0))" if not self.prog.module_grad
                      else f"{v} = {v} + {mod}.buf")
        elif kind == "attr_read":
            self.emit(f"if {mod}.use_act:")
            with self.block():
                self.emit(f"{v} = {v} * {mod}.scale")
        else:
            self.emit(f"{v} = {mod}.lin({v}) + {mod}.lin.bias")
        return True

    def s_closure(self) -> bool:
        """A nested function reading the enclosing scope (and maybe a nonlocal counter)."""
        if self.block_depth or self.prog.n_closures >= 2:
            return False
        self.prog.n_closures += 1
        params = self.tensors(lambda t: t.dtype == "float")
        if not params:
            return False
        param_type = self.scope[self.pick(params)]
        name = self.fresh("inner")
        counter = None
        if self.chance(0.4):
            counter = self.fresh("calls")
            self.emit(f"{counter} = 0")
            self.scope[counter] = I(None)
            self.protected.add(counter)
        self.emit(f"def {name}(t):")
        scope = {n: t for n, t in self.scope.items() if isinstance(t, (T, I, F, B))}
        scope["t"] = param_type
        inner = Body(self.prog, scope, kind="closure", indent=self.indent + 1, budget=self.rng.randint(1, 3), mod=self.mod)
        inner.protected = set(self.scope) | {"t"}      # assignments to outer names would make them local
        if counter:
            inner.emit(f"nonlocal {counter}")
            inner.emit(f"{counter} += 1")
        inner.statements(inner.budget)
        ret = inner.tensor_expr(2, want=lambda t: t.dtype == "float")
        ret = ret or ("t", param_type)
        inner.emit(f"return {ret[0]}")
        self.lines += inner.lines
        self.scope[name] = ("closure", param_type, ret[1])
        if self.chance(0.3):
            lam = self.fresh("lam")
            self.emit(f"{lam} = lambda t, s=2: {name}(t) * s")
            self.scope[lam] = ("closure", param_type, ret[1])
        return True

    def s_break_trigger(self) -> bool:
        kind = self.pick(["print", "print", "item", "tolist", "graph_break", "data_if", "disabled", "int_of"])
        floats = self.tensors(lambda t: t.dtype == "float")
        if kind == "print":
            args = [f"'{self.fresh('p')}'"]
            pool = list(self.names_of(lambda t: isinstance(t, (I, F, B, T))))
            for _ in range(self.rng.randint(0, 2)):
                if pool:
                    args.append(self.pick(pool))
            self.emit(self.pick([f"print({', '.join(args)})", f"print(f'{{{args[-1]}}}')" if len(args) > 1 else "print()"]))
            return True
        if kind == "graph_break":
            self.emit("dl.graph_break()")
            return True
        if kind == "data_if":
            return self.s_if_data()
        if not floats:
            return False
        v = self.pick(floats)
        if kind == "item":
            name = self.fresh("val")
            self.emit(f"{name} = {v}.sum().item()" if self.chance(0.6) else f"{name} = float({v}.mean())")
            self.scope[name] = F()
            if self.chance(0.5):
                self.emit(f"{v} = {v} * {name}" if self.assignable(v) else f"print({name} > 0)")
            return True
        if kind == "tolist":
            name = self.fresh("vals")
            self.emit(f"{name} = {v}.flatten().tolist()")
            self.emit(f"{self.fresh('tot')} = round(sum({name}), 3)")
            return True
        if kind == "int_of":
            name = self.fresh("kk")
            self.emit(f"{name} = int({v}.argmax())")
            self.scope[name] = I(None)
            return True
        disabled = [h for h in self.prog.helpers if h.kind == "disabled"]
        if not disabled:
            return False
        h = disabled[0]
        got = self.tensor_expr(1, want=lambda t: t == h.params[0][1])
        if got is None:
            return False
        name = self.fresh("v")
        self.emit(f"{name} = {h.name}({got[0]})")
        self.scope[name] = h.ret
        return True

    def s_if_data(self) -> bool:
        if self.block_depth >= 2:
            return False
        cond = self.data_condition()
        if cond is None:
            return False
        self.emit(f"if {cond}:")
        with self.block():
            self.statements(self.rng.randint(1, 2))
        self.emit("else:")
        with self.block():
            self.statements(1)
        return True

    def s_global(self) -> bool:
        if self.prog.global_history:
            code, _ = self.int_expr()
            self.emit(f"HISTORY.append({code})")
            return True
        if self.prog.global_counter and self.kind == "main":
            self.emit("CALLS += 1")
            return True
        return False

    def s_with(self) -> bool:
        if self.block_depth >= 2:
            return False
        self.emit(self.pick(["with torch.no_grad():", "with torch.enable_grad():", "with torch.set_grad_enabled(False):",
                             "with logged_block(K):", "with LoggedBlock(K):"]))
        with self.block():
            self.statements(self.rng.randint(1, 2))
        return True

    def s_assert(self) -> bool:
        names = self.tensors()
        if not names:
            return False
        v = self.pick(names)
        self.emit(self.pick([f"assert {v}.shape == {self.scope[v].shape!r}",
                             f"assert {v}.dim() == {len(self.scope[v].shape)}, 'rank changed'",
                             f"assert isinstance({v}, torch.Tensor)"]))
        return True

    def s_del(self) -> bool:
        names = [n for n, t in self.scope.items() if isinstance(t, T) and n.startswith("v") and self.assignable(n)]
        if not names or self.block_depth or self.prog.n_closures:
            return False
        v = self.pick(names)
        self.emit(f"del {v}")
        del self.scope[v]
        return True

    def s_box(self) -> bool:
        got = self.tensor_expr(1, want=lambda t: t.dtype == "float")
        if got is None:
            return False
        name = self.fresh("box")
        self.emit(f"{name} = Box({got[0]}, {self.int_expr()[0]})")
        self.scope[name] = Obj(got[1].shape)
        if self.chance(0.5):
            self.emit(f"{name}.t = {name}.scaled()")
        return True

    def s_generator_use(self) -> bool:
        gens = [h for h in self.prog.helpers if h.kind == "generator"]
        lists = self.names_of(lambda t: isinstance(t, L) and t.length)
        if not gens or not lists:
            return False
        lst = self.pick(lists)
        name = self.fresh("lst")
        self.emit(f"{name} = list({gens[0].name}({lst}))")
        self.scope[name] = L(self.scope[lst].shape, self.scope[lst].length)
        return True

    def s_error(self) -> bool:
        """Code that raises on purpose: the captured program must raise the same error."""
        names = self.tensors()
        lists = self.names_of(lambda t: isinstance(t, L))
        dicts = self.names_of(lambda t: isinstance(t, D))
        opts = ["raise ValueError(f'bad value {K}')", "assert K < 0, 'K must be negative'", "K // 0",
                f"raise FuzzError({self.int_expr()[0]})"]
        if names:
            v = self.pick(names)
            opts += [f"{v} + torch.ones(7, device={v}.device)", f"{v}.view(7, 11)", f"{v}.expand(9, 9, 9)",
                     f"{v}.new_ones(2) @ torch.ones(3, device={v}.device)"]
        if lists:
            opts.append(f"{self.pick(lists)}[99]")
        if dicts:
            opts.append(f"{self.pick(dicts)}['missing']")
        stmt = self.pick(opts)
        self.emit(stmt if stmt.startswith(("raise", "assert")) else f"{self.fresh('bad')} = {stmt}")
        return True

    def s_try(self) -> bool:
        if self.block_depth >= 2:
            return False
        self.emit("try:")
        with self.block():
            self.statements(1)
            if self.chance(0.5):
                lists = self.names_of(lambda t: isinstance(t, L))
                if lists:
                    self.emit(f"{self.fresh('bad')} = {self.pick(lists)}[42]")
        self.emit(f"except {self.pick(['IndexError', 'RuntimeError', '(KeyError, IndexError)'])}:")
        with self.block():
            self.statements(1)
        return True

    # ---- the return statement ---------------------------------------------------------------
    def return_stmt(self) -> None:
        pool = [n for n, t in self.scope.items() if isinstance(t, (T, I, F, B, L, D, Tup))]
        tensors = self.tensors()
        if not pool:
            self.emit("return None")
            return
        picks = [self.pick(tensors)] if tensors else []
        for _ in range(self.rng.randint(0, 3)):
            picks.append(self.pick(pool))
        form = self.pick(["tuple", "tuple", "single", "dict", "list"])
        if form == "single":
            self.emit(f"return {picks[0] if picks else self.pick(pool)}")
        elif form == "dict":
            self.emit("return {" + ", ".join(f"'{p}{i}': {p}" for i, p in enumerate(picks)) + "}")
        elif form == "list":
            self.emit(f"return [{', '.join(picks)}]")
        else:
            self.emit(f"return ({', '.join(picks)},)")


# ---------------------------------------------------------------------------------------------
# module-level pieces
# ---------------------------------------------------------------------------------------------

def _helpers(prog: Program) -> list[str]:
    """Module-level helper functions (plain, with a default, recursive, disabled, generator)."""
    rng, lines = prog.rng, []
    for i in range(rng.choice([0, 1, 1, 2, 3])):
        kind = rng.choices(["plain", "recursive", "disabled", "generator"], [6, 1, 1, 1])[0]
        name = f"helper{i}"
        a_shape = rng.choice(prog.shapes[:4])
        if kind == "generator":
            lines += [f"def {name}(items):", "    for e in items:", f"        yield e * {rng.choice(['2', '0.5', '-1'])}", ""]
            prog.helpers.append(Helper(name, [("items", None)], None, kind))
            continue
        if kind == "recursive":
            lines += [f"def {name}(a, depth):", "    if depth <= 0:", "        return a",
                      f"    return {name}(a * 0.5 + 1, depth - 1)", ""]
            prog.helpers.append(Helper(name, [("a", T(a_shape)), ("depth", I(None))], T(a_shape), kind))
            continue
        b_shape = rng.choice([s for s in prog.shapes if broadcast(a_shape, s) is not None])
        params = [("a", T(a_shape)), ("b", T(b_shape))]
        body = Body(prog, dict(params) | {"k": I(None)}, kind="helper", indent=1, budget=rng.randint(1, 4))
        body.protected = {"a", "b", "k"}
        if kind == "disabled":
            params = params[:1]
            body = Body(prog, {"a": T(a_shape)}, kind="helper", indent=1, budget=2)
            body.protected = {"a"}
            lines.append("@dl.disable")
            lines.append(f"def {name}(a):")
        else:
            lines.append(f"def {name}(a, b, k={rng.randint(0, 2)}):")
        body.statements(body.budget)
        ret = body.tensor_expr(2, want=lambda t: t.dtype == "float") or ("a", T(a_shape))
        body.emit(f"return {ret[0]}")
        lines += body.lines + [""]
        prog.helpers.append(Helper(name, params, ret[1], kind))
    return lines


def _module_class(prog: Program) -> list[str]:
    feat = prog.feat
    lines = ["class Mod(torch.nn.Module):",
             "    def __init__(self):",
             "        super().__init__()",
             f"        self.lin = torch.nn.Linear({feat}, {feat})",
             f"        self.layers = torch.nn.ModuleList([torch.nn.Linear({feat}, {feat}), torch.nn.{prog.rng.choice(['Tanh', 'ReLU', 'GELU'])}()])",
             f"        self.register_buffer('buf', torch.zeros({feat}))",
             f"        self.scale = {prog.rng.choice(['0.5', '2.0', '-1.0'])}",
             "        self.count = 0",
             f"        self.use_act = {prog.rng.choice(['True', 'False'])}",
             "",
             "    def forward(self, t):"]
    body = Body(prog, {"t": T(prog.main)}, kind="forward", indent=2, budget=prog.rng.randint(1, 3), mod="self")
    body.protected = {"t"}
    body.statements(body.budget)
    ret = body.tensor_expr(2, want=lambda t: t == T(prog.main)) or ("self.lin(t)", T(prog.main))
    body.emit(f"return {ret[0]}")
    return lines + body.lines + [""]


def _box_class(rng: random.Random) -> list[str]:
    """A small user class; sometimes built through a base class and zero-argument super()."""
    if rng.random() < 0.5:
        return ["class Box:",
                "    def __init__(self, t, k):",
                "        self.t = t",
                "        self.k = k",
                "",
                "    def scaled(self):",
                "        return self.t * (self.k + 1)",
                ""]
    return ["class BoxBase:",
            "    def __init__(self, t):",
            "        self.t = t",
            "",
            "    def scaled(self):",
            "        return self.t * (self.k + 1)",
            "",
            "class Box(BoxBase):",
            "    def __init__(self, t, k):",
            "        super().__init__(t)",
            "        self.k = k",
            ""]


#: raised on purpose by some programs: an exception class with its own __init__ and super()
FUZZ_ERROR = ["class FuzzError(ValueError):",
              "    def __init__(self, k):",
              "        super().__init__(f'fuzz error {k}')",
              "        self.k = k",
              ""]


@dataclasses.dataclass
class Param:
    name: str
    type: object
    make: str              # expression building the value in make_inputs
    keyword: bool = False


def _params(prog: Program) -> list[Param]:
    rng, A, Fd = prog.rng, prog.rows, prog.feat
    makes = [f"rand({A}, {Fd})", f"rand({A}, {Fd})", f"rand({Fd}, {A}).t()", f"rand({A}, {2 * Fd})[:, ::2]"]
    if not prog.uses_module:          # float64 into the float32 module's Linear would only raise
        makes.append(f"rand({A}, {Fd}).double()")
    main_make = rng.choice(makes)
    params = [Param("x", T(prog.main), main_make)]
    pool = [
        Param("y", T(s := rng.choice(prog.shapes)), f"rand({', '.join(map(str, s))})"),
        Param("n", I(v := rng.randint(0, 3)), str(v)),
        Param("lst", L((Fd,), ln := rng.randint(1, 3)), f"[rand({Fd}) for _ in range({ln})]"),
        Param("d", D(("a", "b"), (A, 1)), f"{{'a': rand({A}, 1), 'b': rand({A}, 1)}}"),
        Param("flag", B(), rng.choice(["True", "False"])),
        Param("s", F(), "float(torch.rand((), generator=g))"),
        Param("idx", T((A,), "long"), f"torch.randint(0, {A}, ({A},), generator=g).to(device)"),
    ]
    if len(prog.shapes) > 5:
        pool.append(Param("z", T(prog.shapes[5]), f"rand({', '.join(map(str, prog.shapes[5]))})"))
    for p in pool:
        if rng.random() < 0.45:
            params.append(p)
    if prog.uses_module and not prog.target_is_module:
        params.append(Param("m", "module", "Mod().to(device)"))
    if rng.random() < 0.2:
        for p in params[1:]:
            if p.name not in ("m",) and rng.random() < 0.5:
                p.keyword = True
    # keyword-only parameters come last
    return [p for p in params if not p.keyword] + [p for p in params if p.keyword]


# `with` blocks on context managers of the program (a break inside one moves to its `with`
# statement: convert_frame._split_at_with); they print, so the order of enter, body and exit is
# compared with eager's.
USER_BLOCKS = ["import contextlib", "", "",
               "@contextlib.contextmanager",
               "def logged_block(tag):",
               "    print('enter', tag)",
               "    try:",
               "        yield tag",
               "    finally:",
               "        print('exit', tag)",
               "", "",
               "class LoggedBlock:",
               "    def __init__(self, tag):",
               "        self.tag = tag",
               "",
               "    def __enter__(self):",
               "        return self.tag",
               "",
               "    def __exit__(self, kind, value, tb):",
               "        print('exit', self.tag, kind.__name__ if kind else None)",
               "        return False",
               "", ""]


def generate(seed: int) -> str:
    """The source text of random program number `seed`."""
    rng = random.Random(seed)
    prog = Program(rng)
    out = ['"""Generated by tests/fuzz/generator.py (seed %d)."""' % seed, "import torch", "import dynamo_lite as dl", "",
           "K = 2"]
    if prog.global_counter:
        out.append("CALLS = 0")
    if prog.global_history:
        out.append("HISTORY = []")
    out.append("")
    out += FUZZ_ERROR + USER_BLOCKS
    if prog.uses_box:
        out += _box_class(rng)
    out += _helpers(prog)
    if prog.uses_module:
        out += _module_class(prog)

    params = _params(prog)
    positional = [p.name for p in params if not p.keyword]
    keyword = [p for p in params if p.keyword]
    sig = ", ".join(positional)
    if keyword:
        sig += (", " if sig else "") + "*, " + ", ".join(f"{p.name}={p.make if p.make in ('True', 'False') or p.make.isdigit() else 'None'}"
                                                       for p in keyword)
    scope = {p.name: p.type for p in params if p.type != "module"}
    mod = None
    if prog.target_is_module:
        mod = "self.mod"
    elif prog.uses_module:
        mod = "m"
    indent = 2 if prog.target_is_module else 1
    body = Body(prog, scope, kind="main", indent=indent, budget=rng.randint(4, 14), mod=mod)
    body.protected = {"m"}
    if prog.global_counter:
        body.emit("global CALLS")
    body.statements(body.budget)
    body.return_stmt()

    if prog.target_is_module:
        out += ["class Model(torch.nn.Module):",
                "    def __init__(self):",
                "        super().__init__()",
                "        self.mod = Mod()",
                "",
                f"    def forward(self{', ' if sig else ''}{sig}):"]
        no_grad = [] if prog.module_grad else ["    model.requires_grad_(False)"]
        out += body.lines + ["", "", "def make_target():", "    torch.manual_seed(0)", "    model = Model()"] + no_grad + \
            ["    return model", ""]
    else:
        out += [f"def f({sig}):"] + body.lines + ["", "", "def make_target():", "    return f", ""]

    out += ["def make_inputs(seed, device='cpu'):",
            "    g = torch.Generator().manual_seed(seed)",
            "",
            "    def rand(*shape):",
            "        return torch.randn(shape, generator=g).to(device)",
            "",
            "    torch.manual_seed(0)"]
    for p in params:
        out.append(f"    {p.name} = {p.make}")
    if prog.uses_module and not prog.module_grad:
        for p in params:
            if p.name == "m":
                out.append("    m.requires_grad_(False)")
    args = ", ".join(p.name for p in params if not p.keyword)
    kwargs = ", ".join(f"'{p.name}': {p.name}" for p in params if p.keyword)
    out.append(f"    return ({args}{',' if args else ''}), {{{kwargs}}}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
