"""Random "library-style" Python programs over a few tensors, written as source text.

The second generator family (`bench/fuzz.py --style library`; generator.py is the tensor style).
`generate(seed)` returns a module in the same format (`make_target()`, `make_inputs(seed,
device)`), plus `FUZZ_CALLS` (the seeds of the oracle's calls: some give inputs of other shapes)
and `between_calls(i)` (run on both sides before call i: it mutates the program's globals, so the
captured side's guards must notice).

A program is one function `f(x, ...)` whose body is a chain of *pieces*; each piece takes the
current tensor `t` (shape (rows, C)), works on it through library-style Python, and leaves a new
`t` of the same shape, maybe with Python values to return. Pieces:

    vec          a user class with arithmetic and container dunders (__add__/__radd__/__mul__/
                 __matmul__/__neg__/__eq__/__hash__/__len__/__getitem__/__iter__/__contains__/
                 __call__/__bool__), maybe __slots__, a class attribute read by a dunder
    dataclass    a (frozen) dataclass config with __post_init__, replace/asdict/fields, a global
                 instance or one passed in, mutated between calls
    attrs        @property getter/setter, a data descriptor class, __getattr__ fallbacks,
                 __getattribute__ / __setattr__ overrides, hasattr/getattr/setattr/delattr
    hierarchy    inheritance with super(), classmethods, staticmethods, class-level counters,
                 __new__ (interning), __init_subclass__, isinstance, type(x).__name__,
                 x.__class__, __subclasses__(), dicts keyed by classes, monkeypatched methods
    dicts        dict methods (fromkeys, setdefault, popitem, |, |=, ...), views taken before the
                 dict changes and read after, tuple/type keys, a passed-in dict mutated
    sets         set/frozenset methods and operators of small ints (and sorted str sets)
    odict, defaultdict, counter, deque, namedtuple, enum   the collections and enum
    iterators    user iterators (__iter__/__next__, the __getitem__ protocol), generators with
                 yield from, send, early break, partially consumed
    itertools    product, chain(.from_iterable), combinations, permutations, islice, count,
                 repeat, accumulate, groupby, zip_longest, starmap, pairwise, compress, ...
    builtins     enumerate/zip/map/filter/sorted(key=)/reversed/min/max(key=) over objects,
                 iterating tensors
    functools    partial (made in the function, called, stored, returned), reduce, lru_cache,
                 cache, wraps-decorated closures; operator.itemgetter/attrgetter
    closures     closures and lambdas made per call, nonlocal counters, late binding
    copies       copy.copy / copy.deepcopy of objects and containers
    exceptions   KeyError, AttributeError through __getattr__, ValueError from unpacking,
                 TypeError, StopIteration, custom exceptions; try/except/else/finally
    config       global dicts, flags, objects and class attributes read by the function and
                 changed by between_calls; globals rebound inside the function
    escape       objects made in the function, stored into passed-in containers and a global
                 registry, and returned (the oracle checks they stay one object)

Pieces are placed directly in `f`, in a module-level helper (inlined), in a nested closure,
in a `for` loop or a try block; graph breaks (print, .item(), a tensor branch, graph_break())
are sometimes put between or inside them, so objects live across resume functions.

Determinism: values come from the seed; hashes of user objects are ints; sets of strings are only
read through sorted()/len()/in; nothing prints an id().
"""
from __future__ import annotations

import random
from typing import Callable, Optional


class Piece:
    """Lines of one piece (relative indentation 0, working on `t`), the names of Python values
    it wants returned, and the parameters of `f` it uses."""

    def __init__(self, lines: list, outs: Optional[list] = None, uses: Optional[set] = None,
                 loopable: bool = True, breakable: bool = True):
        self.lines = list(lines)
        self.outs = list(outs or [])
        self.uses = set(uses or ())
        self.loopable = loopable
        self.breakable = breakable


class Ctx:
    """The program being generated: module-level definitions, parameters, between-call mutations."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.C = rng.choice([3, 4, 5])
        self.R = rng.choice([2, 3, 4])
        self.R2 = self.R + rng.choice([1, 2]) if rng.random() < 0.3 else self.R    # rows of seed-2 calls
        self.defs: list[str] = []
        self.mut: list[str] = []              # between_calls(i) body
        self.mut_globals: set[str] = set()
        self.params: dict[str, str] = {}      # name -> expression in make_inputs
        self.n = 0

    def sid(self) -> str:
        self.n += 1
        return str(self.n)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq):
        return self.rng.choice(list(seq))

    def sample(self, seq, k: int) -> list:
        seq = list(seq)
        return self.rng.sample(seq, min(k, len(seq)))

    def num(self) -> str:
        return self.pick(["0.5", "1.5", "2.0", "0.25", "-1.0", "3.0", "0.75"])

    def small(self) -> int:
        return self.rng.randint(1, 3)

    def define(self, *lines: str) -> None:
        self.defs.extend(lines)
        self.defs.append("")

    def mutate(self, *lines: str, rebinds: tuple = ()) -> None:
        self.mut.extend(lines)
        self.mut_globals.update(rebinds)

    def param(self, name: str, make: str) -> str:
        self.params.setdefault(name, make)
        return name


def ops(c: Ctx, table: list, lo: int = 2, hi: int = 4) -> list:
    """A random selection (in a random order) of the op generators in `table`, called."""
    out = []
    for fn in c.sample(table, c.rng.randint(lo, hi)):
        got = fn()
        if got:
            out.extend(got if isinstance(got, list) else [got])
    return out


# =============================================================================================
# pieces
# =============================================================================================

def p_vec(c: Ctx) -> Piece:
    s = c.sid()
    V = f"Vec{s}"
    have = {"add", "repr"} | set(c.sample(["radd", "mul", "matmul", "neg", "eq", "len", "getitem", "iter",
                                           "contains", "call", "bool"], c.rng.randint(4, 11)))
    if "eq" in have:
        have.add("hash")
    cls = [f"class {V}:"]
    if c.chance(0.35):
        cls.append("    __slots__ = ('t', 'tag')")
    cls += [f"    factor = {c.num()}", "",
            "    def __init__(self, t, tag='v'):", "        self.t = t", "        self.tag = tag", "",
            "    def __add__(self, other):",
            f"        if isinstance(other, {V}):",
            f"            return {V}(self.t + other.t, self.tag + '+' + other.tag)",
            "        if isinstance(other, (int, float)):",
            f"            return {V}(self.t + other, self.tag)",
            "        return NotImplemented", ""]
    if "radd" in have:
        cls += ["    def __radd__(self, other):", "        return self.__add__(other)", ""]
    if "mul" in have:
        cls += ["    def __mul__(self, k):", f"        if isinstance(k, {V}):",
                f"            return {V}(self.t * k.t, self.tag + '*' + k.tag)",
                f"        return {V}(self.t * k * type(self).factor, self.tag)", "",
                "    __rmul__ = __mul__", ""]
    if "matmul" in have:
        cls += ["    def __matmul__(self, w):", f"        return {V}(self.t @ w, self.tag + '@')", ""]
    if "neg" in have:
        cls += ["    def __neg__(self):", f"        return {V}(-self.t, '-' + self.tag)", ""]
    if "eq" in have:
        cls += ["    def __eq__(self, other):", f"        return isinstance(other, {V}) and self.tag == other.tag", "",
                "    def __hash__(self):", "        return len(self.tag)", ""]
    if "len" in have:
        cls += ["    def __len__(self):", "        return self.t.shape[0]", ""]
    if "getitem" in have:
        cls += ["    def __getitem__(self, i):", "        return self.t[i]", ""]
    if "iter" in have:
        cls += (["    def __iter__(self):", "        return iter(self.t)", ""] if c.chance(0.5) else
                ["    def __iter__(self):", "        for i in range(self.t.shape[0]):", "            yield self.t[i]", ""])
    if "contains" in have:
        cls += ["    def __contains__(self, tag):", "        return tag in self.tag", ""]
    if "call" in have:
        cls += ["    def __call__(self, k=1.0):", "        return self.t * k", ""]
    if "bool" in have:
        cls += ["    def __bool__(self):", "        return self.tag != ''", ""]
    cls += ["    def __repr__(self):", f"        return '{V}(' + self.tag + ')'"]
    c.define(*cls)
    if "matmul" in have:
        c.define(f"W{s} = torch.eye({c.C}) * {c.num()}")

    def vexpr(depth: int) -> str:
        if depth <= 0 or c.chance(0.25):
            return c.pick(["a", "b", "b", "a"])
        forms = ["({} + {})", "({} + {})", "({} + {num})"]
        if "radd" in have:
            forms += ["({num} + {})", "sum([{}, {}])"]
        if "mul" in have:
            forms += ["({} * {num})", "({num} * {})", "({} * {})"]
        if "neg" in have:
            forms += ["(-{})"]
        if "matmul" in have:
            forms += ["({} @ W" + s + ")"]
        form = c.pick(forms)
        n_args = form.count("{}")
        return form.format(*[vexpr(depth - 1) for _ in range(n_args)], num=c.num())

    lines = [f"a = {V}(t, 'a')", f"b = {V}({c.pick(['t.sin()', 't * 2', 't.cos()', 't - 1'])}, 'b')",
             f"e = {vexpr(3)}"]
    outs = ["e.tag"]
    finish = ["t = e.t"]
    if "call" in have:
        finish.append(f"t = e({c.num()})")
    if "iter" in have:
        finish.append("t = torch.stack([r for r in e])")
        finish.append("t = torch.stack(list(e)) * 0.5")
    if "getitem" in have:
        finish.append("t = e.t + e[0]")
        finish.append("t = e.t - e[-1]")
    lines.append(c.pick(finish))
    extra = []
    if "len" in have:
        extra.append(["n_e = len(e)", "t = t * n_e"])
    if "contains" in have:
        extra.append(["if 'a' in e:", "    t = t + 1", "else:", "    t = t - 1"])
        extra.append(["has_b = 'b' in e", "t = t + has_b"])
    if "bool" in have:
        extra.append(["if e:", "    t = t * 1.5"])
        extra.append([f"t = t * (2.0 if {V}(t, '') else 0.5)"])
    if "eq" in have:
        extra.append([f"lookup = {{a: 1.0, b: 2.0}}", f"t = t * lookup[{V}(x, 'b')]"])
        extra.append([f"same = a == {V}(t, 'a')", "t = t + same"])
        extra.append([f"uniq = sorted({{a, b, {V}(t, 'a')}}, key=repr)", "t = t * len(uniq)"])
        extra.append(["t = t * e.__eq__(e)"])
    extra.append(["t = t + (0.5 if isinstance(e, " + V + ") else 0.0)"])
    extra.append([f"parts = [{V}(t, 'p'), b]", "acc = a", "for p in parts:", "    acc = acc + p", "t = acc.t"])
    extra.append([f"t = t * {V}.factor"])
    for chunk in c.sample(extra, c.rng.randint(1, 3)):
        lines += chunk
    if c.chance(0.35):
        outs.append("e")                     # an escaping user object (compared by state)
    if c.chance(0.3):
        outs.append("repr(e)")
    if c.chance(0.3):
        c.mutate(f"{V}.factor = {V}.factor + 0.5 * i")
    return Piece(lines, outs, uses={"x"})


def p_dataclass(c: Ctx) -> Piece:
    s = c.sid()
    D = f"Cfg{s}"
    frozen = c.chance(0.4)
    order = c.chance(0.2)
    head = "@dataclasses.dataclass" + (f"(frozen={frozen}" + (", order=True" if order else "") + ")"
                                       if frozen or order else "")
    cls = [head, f"class {D}:", f"    scale: float = {c.num()}", f"    shift: int = {c.small()}"]
    if frozen:
        cls += ["    tags: tuple = ('a',)"]
    else:
        cls += ["    tags: list = dataclasses.field(default_factory=list)"]
    cls += ["    gain: typing.ClassVar[float] = 1.0", "",
            "    def __post_init__(self):"]
    if frozen:
        cls += ["        object.__setattr__(self, 'total', self.scale * self.shift)"]
    else:
        cls += ["        self.total = self.scale * self.shift"]
    cls += ["", "    @property", "    def ratio(self):", "        return self.scale / (self.shift + 1)", "",
            "    def apply(self, t):", "        return t * self.scale * type(self).gain + self.shift"]
    c.define(*cls)
    where = c.pick(["global", "param", "local"])
    uses = set()
    if where == "global":
        name = f"CFG{s}"
        c.define(f"{name} = {D}(scale={c.num()})")
        if frozen:
            c.mutate(f"if i % 2:", f"    {name} = {D}(scale={c.num()}, shift={c.small()})", rebinds=(name,))
        else:
            c.mutate(f"{name}.scale = {name}.scale + 0.5 * i", *([f"{name}.shift = i"] if c.chance(0.5) else []))
    elif where == "param":
        name = c.param(f"cfg{s}", f"{D}(scale={c.num()}, shift=seed % 3)")
        uses.add(name)
    else:
        name = f"cfg{s}"
    lines = [] if where != "local" else [f"{name} = {D}({c.num()}, {c.small()})"]
    lines.append(c.pick([f"t = t * {name}.scale + {name}.shift", f"t = {name}.apply(t)", f"t = t + {name}.total",
                         f"t = t * {name}.ratio"]))
    outs = []
    table = [
        lambda: [f"c2 = dataclasses.replace({name}, shift={name}.shift + 1)", "t = t + c2.total"] +
                (["eq = c2 == " + name, "t = t * (1.0 + eq)"] if c.chance(0.5) else []),
        lambda: [f"d = dataclasses.asdict({name})", "t = t * d['scale']"] + (outs.append("d") or []),
        lambda: [f"names = [fl.name for fl in dataclasses.fields({name})]", "t = t * len(names)"] + (outs.append("names") or []),
        lambda: [f"t = t * {D}.gain"],
        lambda: [f"made = {D}(scale=t.shape[0] * 0.5)", "t = made.apply(t)"] + (outs.append("made") or []),
        lambda: [f"tup = dataclasses.astuple({name})", "t = t + tup[1]"],
        lambda: [f"t = t + dataclasses.is_dataclass({name})"],
    ]
    if not frozen:
        table += [lambda: [f"{name}.tags.append(len({name}.tags))", f"t = t + len({name}.tags)"],
                  lambda: [f"{name}.scale = {name}.scale * 1.0", f"{name}.extra = t.shape[-1]"]]
    else:
        table += [lambda: ["try:", f"    {name}.scale = 9.0", "except dataclasses.FrozenInstanceError as err:",
                           "    msg = str(err)", "    t = t + 1"] + (outs.append("msg") or []),
                  lambda: [f"h = hash({name}) == hash({D}({name}.scale, {name}.shift))", "t = t + h"]]
    if order:
        table.append(lambda: [f"lt = {D}(0.0, 0) < {D}(1.0, 0)", "t = t + lt"])
    lines += ops(c, table, 1, 3)
    if c.chance(0.3) and where != "global":
        outs.append(name)
    if c.chance(0.3):
        c.mutate(f"{D}.gain = 1.0 + 0.25 * i")
    return Piece(lines, outs, uses)


def p_attrs(c: Ctx) -> Piece:
    s = c.sid()
    S, P = f"Scaler{s}", f"Positive{s}"
    use_descr = c.chance(0.6)
    use_getattr = c.chance(0.6)
    use_getattribute = c.chance(0.3)
    use_setattr = c.chance(0.3)
    if use_descr:
        c.define(f"class {P}:",
                 "    def __set_name__(self, owner, name):", "        self.name = '_' + name", "",
                 "    def __get__(self, obj, objtype=None):", "        if obj is None:", "            return self",
                 "        return getattr(obj, self.name)", "",
                 "    def __set__(self, obj, value):", "        if value < 0:",
                 "            raise ValueError(f'{self.name[1:]} must be >= 0, got {value}')",
                 "        setattr(obj, self.name, value)")
    cls = [f"class {S}:", "    reads = 0"]
    if use_descr:
        cls.append(f"    gain = {P}()")
    cls += ["", "    def __init__(self, gain, bias):", "        self.gain = gain", "        self._bias = bias",
            "        self.history = []", "",
            "    @property", "    def bias(self):", "        return self._bias", "",
            "    @bias.setter", "    def bias(self, value):", "        self.history.append(value)", "        self._bias = value", "",
            "    @property", "    def doubled(self):", "        return self.gain * 2", "",
            "    def apply(self, t):", "        return t * self.gain + self.bias"]
    if use_getattr:
        cls += ["", "    def __getattr__(self, name):", "        if name.startswith('opt_'):",
                f"            return {c.num()}",
                "        raise AttributeError(f'{type(self).__name__} has no attribute {name!r}')"]
    if use_getattribute:
        cls += ["", "    def __getattribute__(self, name):", "        if not name.startswith('_'):",
                f"            type(self).reads += 1" if c.chance(0.5) else f"            {S}.reads += 1",
                "        return object.__getattribute__(self, name)"]
    if use_setattr:
        cls += ["", "    def __setattr__(self, name, value):",
                "        if name == 'gain' and isinstance(value, int):", "            value = float(value)",
                "        super().__setattr__(name, value)" if c.chance(0.5) else "        object.__setattr__(self, name, value)"]
    c.define(*cls)
    where = c.pick(["local", "local", "global", "param"])
    uses = set()
    if where == "global":
        o = f"SC{s}"
        c.define(f"{o} = {S}({c.num().lstrip('-')}, {c.num()})")
        c.mutate(c.pick([f"{o}.bias = 0.5 * i", f"{o}.gain = 1.0 + i", f"{o}.opt_shift = i" if use_getattr else f"{o}.bias = -1.0",
                         f"{o}.history.clear()"]))
    elif where == "param":
        o = c.param(f"sc{s}", f"{S}(1.0 + seed, -0.5)")
        uses.add(o)
    else:
        o = f"sc{s}"
    lines = [] if where != "local" else [f"{o} = {S}({c.num().lstrip('-')}, {c.num()})"]
    lines.append(f"t = {o}.apply(t)")
    outs = []
    table = [
        lambda: [f"{o}.bias = {c.num()}", f"t = t + {o}.bias"],
        lambda: [f"{o}.gain = {c.pick(['2', '0.5', '3.0', 't.shape[0]'])}", f"t = t * {o}.doubled"],
        lambda: [f"t = t + len({o}.history)"],
        lambda: [f"ok = hasattr({o}, 'missing{s}')", "t = t + ok"],
        lambda: [f"v = getattr({o}, 'nothing', {c.num()})", "t = t * v"],
        lambda: [f"setattr({o}, 'extra', t.shape[-1])", f"t = t + {o}.extra"],
        lambda: [f"t = t * ({o}.__class__.__name__ == '{S}')"],
        lambda: [f"kind = type({o}).__name__", "t = t + len(kind)"] + (outs.append("kind") or []),
        lambda: [f"{o}.tmp = 1.0", f"delattr({o}, 'tmp')", f"t = t + hasattr({o}, 'tmp')"],
        lambda: ["try:", f"    {o}.undefined_attr{s}", "except AttributeError as err:", "    msg = str(err)",
                 "    t = t - 1"] + (outs.append("msg") or []),
        lambda: [f"t = t * {S}.reads" if use_getattribute else f"t = t + vars({o})['_bias']"],
    ]
    if use_descr:
        table += [lambda: ["try:", f"    {o}.gain = -1.0", "except ValueError as err:", "    msg_d = str(err)",
                           "    t = t * 0.5"] + (outs.append("msg_d") or []),
                  lambda: [f"t = t + {o}._gain", f"kind_d = type({S}.__dict__['gain']).__name__"]]
    if use_getattr:
        table += [lambda: [f"t = t + {o}.opt_shift"],
                  lambda: [f"v2 = getattr({o}, 'opt_scale', 9.0)", "t = t * v2"],
                  lambda: [f"del {o}._bias", f"has = hasattr({o}, 'bias')", "t = t + has",
                           f"{o}._bias = 0.0"]]
    lines += ops(c, table, 2, 4)
    if c.chance(0.3):
        outs.append(f"{o}.history")
    if c.chance(0.3) and where != "global":
        outs.append(o)
    return Piece(lines, outs, uses)


def p_hierarchy(c: Ctx) -> Piece:
    s = c.sid()
    B, K, G = f"Base{s}", f"Child{s}", f"Grand{s}"
    use_subclass_hook = c.chance(0.3)
    base = [f"class {B}:", "    count = 0", "    registry = []", ""]
    if use_subclass_hook:
        base += ["    def __init_subclass__(cls, **kwargs):", "        super().__init_subclass__(**kwargs)",
                 f"        {B}.registry.append(cls.__name__)", ""]
    base += ["    def __init__(self, w):",
             f"        {c.pick([B + '.count += 1', 'type(self).count += 1'])}",
             "        self.w = w", "",
             "    @classmethod", "    def create(cls, w):", "        return cls(w)", "",
             "    @staticmethod", "    def combine(a, b):", "        return a + b", "",
             "    def forward(self, t):", "        return t * self.w", "",
             "    def name(self):", "        return type(self).__name__"]
    c.define(*base)
    c.define(f"class {K}({B}):", f"    bonus = {c.num()}", "",
             "    def __init__(self, w, extra=1.0):", "        super().__init__(w)", "        self.extra = extra", "",
             "    def forward(self, t):", "        return super().forward(t) + self.extra * self.bonus")
    deep = c.chance(0.5)
    if deep:
        c.define(f"class {G}({K}):", "    def forward(self, t):",
                 f"        return {c.pick(['super().forward(t).relu()', f'super({G}, self).forward(t) * 0.5', 'torch.tanh(super().forward(t))'])}")
    classes = [B, K] + ([G] if deep else [])
    objs = []
    for i in range(c.rng.randint(2, 3)):
        k = c.pick(classes)
        objs.append(c.pick([f"{k}({c.num()})", f"{k}.create({c.num()})"]))
    lines = [f"objs = [{', '.join(objs)}]", "for o in objs:", "    t = o.forward(t)"]
    outs = []
    table = [
        lambda: ["names = [o.name() for o in objs]", "t = t + len(names[0])"] + (outs.append("names") or []),
        lambda: [f"t = {B}.combine(t, t * 0.5)"],
        lambda: [f"t = t * (1 + {B}.count % 3)"],
        lambda: [f"subs = sorted(k.__name__ for k in {B}.__subclasses__())", "t = t + len(subs)"] + (outs.append("subs") or []),
        lambda: [f"n_child = sum(isinstance(o, {K}) for o in objs)", "t = t + n_child"],
        lambda: [f"t = t * (1.0 + (objs[0].__class__ is {B}))"],
        lambda: [f"t = t + issubclass({K}, {B})"],
        lambda: [f"scales = {{{B}: 1.0, {K}: 2.0{', ' + G + ': 3.0' if deep else ''}}}",
                 "for o in objs:", "    t = t + scales[type(o)]"],
        lambda: [f"t = t * {K}.bonus"],
        lambda: ["t = t + objs[-1].w"],
        lambda: [f"mro = [k.__name__ for k in type(objs[0]).__mro__]"] + (outs.append("mro") or []),
    ]
    if use_subclass_hook:
        table.append(lambda: [f"t = t + len({B}.registry)"])
    lines += ops(c, table, 1, 3)
    if c.chance(0.4):
        I = f"Interned{s}"
        c.define(f"class {I}:", "    _cache = {}", "",
                 "    def __new__(cls, key):", "        if key in cls._cache:", "            return cls._cache[key]",
                 "        obj = super().__new__(cls)", "        obj.key = key", "        obj.hits = 0",
                 "        cls._cache[key] = obj", "        return obj", "",
                 "    def __init__(self, key):", "        self.hits += 1")
        lines += [f"i1 = {I}('k')", f"i2 = {I}('k')", f"i3 = {I}('j')", "t = t + i1.hits + (i1 is i2) + 2 * (i1 is i3)"]
        if c.chance(0.4):
            c.mutate(f"if i == 2:", f"    {I}._cache.clear()")
    if c.chance(0.35):
        c.define(f"def _alt_forward{s}(self, t):", "    return t * self.w - 1")
        c.mutate(f"if i == 2:", f"    {B}.forward = _alt_forward{s}")
    elif c.chance(0.3):
        c.mutate(f"{K}.bonus = {K}.bonus + i")
    if c.chance(0.3):
        outs.append("objs")
    return Piece(lines, outs)


def p_dicts(c: Ctx) -> Piece:
    keys = ["a", "b"]
    pool = [k for k in "cdefgh"]
    start = c.pick(["d = {'a': t, 'b': t * 2}", "d = dict(a=t, b=t + 1)", "d = dict(zip(['a', 'b'], [t, t * 0.5]))",
                    "d = {k: t * i for i, k in enumerate('ab')}", "d = dict([('a', t), ('b', t - 1)])"])
    lines = [start]
    views = c.sample(["kv = d.keys()", "vv = d.values()", "iv = d.items()"], c.rng.randint(0, 2))
    lines += views
    outs = []

    def new_key():
        return pool.pop(0) if pool else None

    def op_set():
        k = new_key()
        if k is None:
            return None
        keys.append(k)
        return [f"d['{k}'] = t + {c.small()}"]

    def op_setdefault():
        if c.chance(0.5):
            return [f"t = t + d.setdefault('{c.pick(keys)}', t * 0)"]
        k = new_key()
        if k is None:
            return None
        keys.append(k)
        return [f"d.setdefault('{k}', t * 3)"]

    def op_pop():
        if len(keys) < 2:
            return None
        k = c.pick(keys)
        keys.remove(k)
        return [f"t = t + d.pop('{k}')", "missing = d.pop('nope', None)"]

    def op_popitem():
        if len(keys) < 2:
            return None
        keys.pop()
        return ["k_last, v_last = d.popitem()", "t = t + v_last * len(k_last)"]

    def op_del():
        if len(keys) < 2:
            return None
        k = c.pick(keys)
        keys.remove(k)
        return [f"del d['{k}']"]

    def op_update():
        k = new_key()
        if k is None:
            return None
        keys.append(k)
        return [c.pick([f"d.update({{'{k}': t * 0.5}})", f"d.update({k}=t * 0.5)", f"d.update([('{k}', t)])"])]

    def op_merge():
        k = new_key()
        if k is None:
            return None
        keys.append(k)
        return [c.pick([f"d = d | {{'{k}': t}}", f"d |= {{'{k}': t + 1}}", f"d = {{**d, '{k}': t}}"])]

    def op_get():
        return [c.pick([f"t = t + d.get('zz', t * 0)", f"t = t + d.get('{c.pick(keys)}')",
                        f"t = t * ('{c.pick(keys + ['q'])}' in d)", "t = t + len(d)"])]

    def op_comp():
        return ["d = {k: v * 2 for k, v in d.items() if k != 'zz'}"]

    def op_order():
        outs.append("order")
        return [c.pick(["order = list(reversed(d))", "order = sorted(d)", "order = list(d)",
                        "order = [k for k, _ in d.items()]", "order = sorted(d.keys() & {'a', 'c', 'q'})",
                        "order = sorted(d.keys() - {'a'})"])]

    def op_items():
        return ["for k, v in d.items():", "    t = t + v * len(k)"]

    def op_fromkeys():
        outs.append("z")
        return [c.pick(["z = dict.fromkeys(['p', 'q'], 0)", "z = dict.fromkeys('pq')", "z = {}.fromkeys(range(3), 1.5)"]),
                "z['p'] = len(z)", "t = t * len(z)"]

    def op_copy():
        return ["d2 = d.copy()", "d2['copied'] = t", "t = t + len(d2) - len(d)"] + \
            (["d2.clear()", "t = t + len(d2)"] if c.chance(0.4) else [])

    def op_tuple_keys():
        outs.append("sorted(grid)")
        return ["grid = {(i, j): i * j + 0.5 for i in range(2) for j in range(3)}", "t = t * grid[(1, 2)]",
                "t = t + grid.get((5, 5), 0.0)"]

    def op_type_keys():
        return ["by_type = {int: 1.0, float: 2.0, str: 3.0, tuple: 4.0}",
                f"t = t * by_type[type({c.pick(['1', '1.5', repr('s'), '(1,)', 't.shape[0]'])})]"]

    def op_reg():
        reg = c.param("reg", "{'count': seed}")
        return [f"{reg}['count'] = {reg}.get('count', 0) + 1", f"{reg}.setdefault('seen', []).append(len(d))",
                f"t = t + {reg}['count']"]

    table = [op_set, op_set, op_setdefault, op_pop, op_popitem, op_del, op_update, op_merge, op_get, op_get,
             op_comp, op_order, op_items, op_fromkeys, op_copy, op_tuple_keys, op_type_keys, op_reg]
    lines += ops(c, table, 2, 6)
    uses = {"reg"} if "reg" in c.params and any("reg" in ln for ln in lines) else set()
    for v in views:
        name = v.split(" = ")[0]
        form = {"kv": c.pick(["list(kv)", "len(kv)", "'a' in kv", "sorted(kv)"]),
                "vv": c.pick(["len(vv)", "sum(vv)"]),
                "iv": c.pick(["[k for k, _ in iv]", "len(iv)"])}[name]
        if form == "sum(vv)":
            lines.append("t = t + sum(vv)")
        else:
            lines.append(f"view_{name} = {form}")
            outs.append(f"view_{name}")
    lines.append(c.pick(["t = t + sum(d.values()) / len(d)", "t = t + d[sorted(d)[0]]", "t = t + list(d.values())[-1]"]))
    if c.chance(0.2):
        outs.append("d")
    return Piece(lines, outs, uses)


def p_sets(c: Ctx) -> Piece:
    def ints(k):
        return "{" + ", ".join(str(v) for v in sorted(c.sample(range(8), k))) + "}"
    lines = [f"s1 = {ints(c.rng.randint(2, 5))}", f"s2 = {c.pick(['set(range(2, 6))', ints(3), 'set([1, 1, 2, 5, 5])'])}",
             f"fs = frozenset({ints(3)})"]
    outs = []
    names = ["s1", "s2"]

    def binop():
        a, b = c.pick(names), c.pick(names + ["fs"])
        n = f"u{len(names)}"
        names.append(n)
        return [f"{n} = " + c.pick([f"{a} | {b}", f"{a} & {b}", f"{a} - {b}", f"{a} ^ {b}", f"{a}.union({b}, [9])",
                                    f"{a}.intersection({b})", f"{a}.difference({b}, {{0}})", f"{a}.symmetric_difference({b})",
                                    f"{{v % 3 for v in {a}}}", f"{a}.copy()", f"set({b})"])]

    def pred():
        a, b = c.pick(names + ["fs"]), c.pick(names + ["fs"])
        p = c.pick([f"{a}.issubset({b})", f"{a}.issuperset({b})", f"{a}.isdisjoint({b})", f"{a} <= {b}", f"{a} < {b}",
                    f"{a} >= {b}", f"{a} == {b}", f"{c.rng.randint(0, 7)} in {a}", f"{a} != {b}"])
        return [f"t = t + 0.5 * ({p})"]

    def mutate():
        a = c.pick(names)
        return [c.pick([f"{a}.add({c.rng.randint(0, 9)})", f"{a}.discard({c.rng.randint(0, 9)})",
                        f"{a}.update([7, 8], {{9}})", f"{a}.intersection_update(range(4))",
                        f"{a}.difference_update({{1, 2}})", f"{a}.symmetric_difference_update({{0, 3}})",
                        f"{a} |= {{6}}", f"{a} &= set(range(5))", f"{a} -= {{4}}", f"{a} ^= {{2, 9}}"])]

    def remove():
        a = c.pick(names)
        outs.append("removed")
        return ["removed = True", "try:", f"    {a}.remove({c.rng.randint(0, 9)})", "except KeyError as err:",
                "    removed = str(err)"]

    def pop():
        a = c.pick(names)
        return [f"if {a}:", f"    t = t + {a}.pop()"]

    def tensor_use():
        a = c.pick(names + ["fs"])
        return [c.pick([f"t = t * (len({a}) + 1) / 4", f"t = t + sum({a})", f"t = t + max({a} | {{0}})",
                        f"t = t + min({a}, default=-1)"])]

    def index_use():
        a = c.pick(names)
        return [f"idx = sorted(v for v in {a} if v < {c.C})", "if idx:",
                "    t = t + t[:, idx].sum(-1, keepdim=True)"]

    def frozen_key():
        return ["fk = {frozenset({1, 2}): 0.5, frozenset(): 2.0}", "t = t * fk[frozenset([2, 1])] + fk.get(frozenset(), 0)"]

    def strs():
        outs.append("sorted(tags)")
        return ["tags = {'x', 'y'}", "tags.add('z')", "tags.discard('x')", "t = t + len(tags) + ('y' in tags)"]

    def order():
        a = c.pick(names)
        outs.append(f"list({a})")
        return []

    def iterate():                   # the result depends on the set's iteration order
        a = c.pick(names + ["fs"])
        return ["acc = 0.0", f"for v in {a}:", "    acc = acc * 0.5 + v", "t = t + acc"]

    table = [binop, binop, pred, pred, mutate, mutate, remove, pop, tensor_use, tensor_use, index_use, frozen_key,
             strs, order, iterate]
    lines += ops(c, table, 3, 6)
    if c.chance(0.4):
        outs.append(c.pick(names))
    return Piece(lines, outs)


def p_odict(c: Ctx) -> Piece:
    keys = ["a", "b", "c"]
    lines = [c.pick(["od = collections.OrderedDict([('a', t), ('b', t * 2), ('c', t + 1)])",
                     "od = collections.OrderedDict(a=t, b=t * 2, c=t + 1)"])]
    outs = []

    def move():
        k = c.pick(keys)
        keys.remove(k)
        if c.chance(0.5):
            keys.append(k)
            return [f"od.move_to_end('{k}')"]
        keys.insert(0, k)
        return [f"od.move_to_end('{k}', last=False)"]

    def popitem():
        if len(keys) < 2:
            return None
        if c.chance(0.5):
            keys.pop(0)
            return ["k0, v0 = od.popitem(last=False)", "t = t + v0"]
        keys.pop()
        return ["k0, v0 = od.popitem()", "t = t - v0"]

    def add():
        k = "d" if "d" not in keys else "e"
        if k in keys:
            return None
        keys.append(k)
        return [f"od['{k}'] = t * 0.5"]

    def order():
        outs.append("order")
        return [c.pick(["order = list(od)", "order = list(reversed(od))", "order = list(od.keys())"])]

    def eq():
        return ["oi = collections.OrderedDict.fromkeys('xyz', 0)", "oi.move_to_end('x')",
                "same = oi == collections.OrderedDict.fromkeys('yzx', 0)",
                "same2 = dict(oi) == dict.fromkeys('xyz', 0)", "t = t + same + same2"]

    table = [move, move, popitem, add, order, eq]
    lines += ops(c, table, 2, 4)
    lines.append(c.pick(["t = t + od[next(iter(od))]", "t = sum(od.values()) / len(od)", f"t = t + od['{keys[-1]}']"]))
    return Piece(lines, outs)


def p_defaultdict(c: Ctx) -> Piece:
    kind = c.pick(["list", "int", "lambda", "float"])
    outs = []
    if kind == "list":
        lines = ["groups = collections.defaultdict(list)", "for i, row in enumerate(t):", "    groups[i % 2].append(row)",
                 "t = t + torch.stack([torch.stack(v).sum(0) for k, v in sorted(groups.items())]).sum(0)"]
        outs.append("len(groups)")
    elif kind == "int":
        word = "".join(c.pick("abc") for _ in range(c.rng.randint(3, 7)))
        lines = ["counts = collections.defaultdict(int)", f"for ch in '{word}':", "    counts[ch] += 1",
                 "t = t * counts['a'] + counts['zz']"]
        outs.append("counts")
    elif kind == "float":
        lines = ["acc = collections.defaultdict(float)", "for i in range(3):", "    acc[i % 2] += 0.5 * i",
                 "t = t + acc[1] - acc[7]", "keys = sorted(acc)"]
        outs.append("keys")
    else:
        lines = ["lazy = collections.defaultdict(lambda: t * 0)", "lazy['a'] = lazy['a'] + t", "lazy['b'] += 1",
                 "t = lazy['a'] + lazy['b'] + len(lazy)"]
    if c.chance(0.3):
        lines += ["plain = dict(" + lines[0].split(" = ")[0] + ")", "t = t + len(plain)"]
    return Piece(lines, outs)


def p_counter(c: Ctx) -> Piece:
    src = c.pick(["'abracadabra'", "[1, 2, 2, 3, 3, 3]", "'mississippi'", "{'x': 2, 'y': 5}"])
    lines = [f"cnt = collections.Counter({src})"]
    outs = []
    table = [
        lambda: [c.pick(["cnt.update('aab')", "cnt.update({'z': 2})", "cnt.subtract({'x': 1})", "cnt['new'] += 2"])],
        lambda: [f"top = cnt.most_common({c.rng.randint(1, 2)})", "t = t * top[0][1]"] + (outs.append("top") or []),
        lambda: ["t = t + cnt['missing']"],
        lambda: [f"merged = cnt + collections.Counter({src})", "t = t + len(merged)"] + (outs.append("merged") or []),
        lambda: ["diff = cnt - collections.Counter(list(cnt)[:1])", "t = t + sum(diff.values())"],
        lambda: ["both = (cnt & collections.Counter(list(cnt))) | collections.Counter('q')", "t = t + len(both)"],
        lambda: ["t = t + cnt.total()"],
        lambda: ["elems = sorted(map(str, cnt.elements()))", "t = t + len(elems)"],
    ]
    lines += ops(c, table, 2, 4)
    if c.chance(0.3):
        outs.append("cnt")
    return Piece(lines, outs)


def p_deque(c: Ctx) -> Piece:
    maxlen = c.pick([None, 2, 3, 4])
    ml = "" if maxlen is None else f", maxlen={maxlen}"
    lines = [f"win = collections.deque([t, t * 2]{ml})"]
    size = min(2, maxlen or 2)
    outs = []
    for _ in range(c.rng.randint(2, 5)):
        op = c.pick(["append", "appendleft", "extend", "rotate", "pop", "popleft", "extendleft"])
        if op in ("pop", "popleft"):
            if size < 2:
                continue
            size -= 1
            lines.append(f"t = t + win.{op}()")
            continue
        if op == "rotate":
            lines.append(f"win.rotate({c.pick([1, -1, 2])})")
            continue
        add = 2 if op in ("extend", "extendleft") else 1
        size = min(size + add, maxlen or 99)
        lines.append({"append": "win.append(t + 1)", "appendleft": "win.appendleft(t * 0.5)",
                      "extend": "win.extend([t, t - 1])", "extendleft": "win.extendleft((t * 3, t))"}[op])
    lines.append(c.pick(["t = sum(win) / len(win)", "t = win[0] + win[-1]", "t = torch.stack(list(win)).mean(0)"]))
    if c.chance(0.5):
        lines += ["ring = collections.deque(range(5), maxlen=4)", f"ring.rotate({c.pick([-2, 1, 3])})",
                  "ring.appendleft(9)", "t = t + ring[0] + ring.count(3)"]
        outs += ["list(ring)", "ring.maxlen"]
    if c.chance(0.35):
        h = f"HIST{c.sid()}"
        c.define(f"{h} = collections.deque(maxlen=3)")
        lines += [f"{h}.append(t.shape[0] + len(win))", f"t = t + len({h})"]
        if c.chance(0.5):
            c.mutate(f"{h}.appendleft(-i)")
    return Piece(lines, outs)


def p_namedtuple(c: Ctx) -> Piece:
    s = c.sid()
    Pn, Qn = f"Pair{s}", f"Spec{s}"
    c.define(f"{Pn} = collections.namedtuple('{Pn}', ['w', 'b', 'tag'], defaults=['p'])")
    typed = c.chance(0.5)
    if typed:
        c.define(f"class {Qn}(typing.NamedTuple):", "    w: torch.Tensor", f"    k: float = {c.num()}", "",
                 "    def scaled(self):", "        return self.w * self.k")
    lines = [f"p = {Pn}(t, {c.num()})"]
    outs = []
    table = [
        lambda: [f"p = p._replace(b={c.num()})", "t = p.w * p.b"],
        lambda: ["w, b, tag = p", "t = w + b + len(tag)"],
        lambda: ["t = p[0] * p[1] + len(p)"],
        lambda: [f"fields = {Pn}._fields", "t = t + len(fields)"] + (outs.append("fields") or []),
        lambda: ["pd = p._asdict()", "t = t + pd['b']"] + (outs.append("sorted(pd)") or []),
        lambda: [f"p2 = {Pn}._make([t, 1.0, 'z'])", "t = t + p2.b"] + (outs.append("p2.tag") or []),
        lambda: ["t = t + isinstance(p, tuple)"],
        lambda: [f"defaults = {Pn}._field_defaults", "t = t + len(defaults)"],
    ]
    if typed:
        table += [lambda: [f"q = {Qn}(t)", "t = q.scaled()"] + (outs.append("q.k") or []),
                  lambda: [f"q = {Qn}(t, k=2.0)", "q = q._replace(k=q.k + 1)", "t = q.scaled() - q.w"]]
    lines += ops(c, table, 2, 4)
    if c.chance(0.4):
        outs.append("p")
    return Piece(lines, outs)


def p_enum(c: Ctx) -> Piece:
    s = c.sid()
    M, L = f"Mode{s}", f"Level{s}"
    c.define(f"class {M}(enum.Enum):", "    A = 1", "    B = 2", "    C = 3")
    c.define(f"class {L}(enum.IntEnum):", "    LOW = 1", "    HIGH = 3")
    c.define(f"WEIGHTS{s} = {{{M}.A: 0.5, {M}.B: 2.0, {M}.C: 1.0}}")
    lines = [f"m = {c.pick([f'{M}(2)', f'{M}[{chr(39)}C{chr(39)}]', f'{M}.A'])}", f"t = t * WEIGHTS{s}[m]"]
    outs = []
    table = [
        lambda: ["t = t + m.value"] + (outs.append("m.name") or []),
        lambda: [f"names = [e.name for e in {M}]", "t = t + len(names)"],
        lambda: [f"t = t * {L}.HIGH + ({L}.LOW < {L}.HIGH)"],
        lambda: [f"if m is {M}.B:", "    t = t + 1", f"elif m in ({M}.A, {M}.C):", "    t = t - 1"],
        lambda: [f"t = t + len({M})"],
        lambda: [f"lvl = {L}(3)", "t = t * int(lvl) + lvl"],
    ]
    if c.chance(0.5):
        g = f"MODE{s}"
        c.define(f"{g} = {M}.A")
        table.append(lambda: [f"t = t * WEIGHTS{s}[{g}]"])
        c.mutate(f"{g} = {M}(1 + i % 3)", rebinds=(g,))
    lines += ops(c, table, 1, 3)
    if c.chance(0.3):
        outs.append("m")
    return Piece(lines, outs)


def p_iterators(c: Ctx) -> Piece:
    s = c.sid()
    CD, RW, SQ = f"Countdown{s}", f"Rows{s}", f"Seq{s}"
    c.define(f"class {CD}:", "    def __init__(self, n):", "        self.n = n", "",
             "    def __iter__(self):", "        return self", "",
             "    def __next__(self):", "        if self.n <= 0:", "            raise StopIteration",
             "        self.n -= 1", "        return self.n")
    c.define(f"class {RW}:", "    def __init__(self, t):", "        self.t = t", "",
             "    def __iter__(self):", "        for i in range(self.t.shape[0]):", "            yield self.t[i]", "",
             "    def __len__(self):", "        return self.t.shape[0]")
    c.define(f"class {SQ}:", "    def __getitem__(self, i):", "        if i >= 3:", "            raise IndexError(i)",
             "        return i * 0.5")
    outs = []
    table = [
        lambda: [f"for k in {CD}({c.small() + 1}):", "    t = t + k * 0.25"],
        lambda: [f"rows = list({RW}(t))", "t = torch.stack(rows) * 0.5"],
        lambda: [f"t = t + sum({SQ}())"] + (outs.append(f"list({SQ}())") or []),
        lambda: [f"it = iter({CD}(3))", "first = next(it)", "rest = list(it)", "t = t + first + len(rest)",
                 "t = t + next(it, -1)"] + (outs.append("rest") or []),
        lambda: [f"t = t + sum({CD}(4)) + max({CD}(3))"],
        lambda: [f"t = t * (2 in {CD}(4))"],
        lambda: [f"for i, (k, row) in enumerate(zip({CD}(5), {RW}(t))):", "    t = t + row * k * 0.1"],
        lambda: [f"order = sorted({CD}(3))"] + (outs.append("order") or []),
        lambda: [f"t = t * len({RW}(t))"],
        lambda: [f"for v in {SQ}():", "    t = t + v"],
    ]
    return Piece(ops(c, table, 2, 4), outs)


def p_generators(c: Ctx) -> Piece:
    s = c.sid()
    g, cg, ag, sub = f"gen{s}", f"chain_gen{s}", f"acc_gen{s}", f"sub_gen{s}"
    if c.chance(0.5):                 # a generator with side effects: they must happen only as far as it is consumed
        c.define(f"GEN_LOG{s} = []")
        c.define(f"def {g}(t, k):", "    for i in range(k):", f"        GEN_LOG{s}.append(i)", "        yield t * (i + 1)",
                 f"    GEN_LOG{s}.append('done')")
        if c.chance(0.3):
            c.mutate(f"GEN_LOG{s}.clear()")
    else:
        c.define(f"def {g}(t, k):", "    for i in range(k):", "        yield t * (i + 1)")
    c.define(f"def {sub}(t):", "    yield t - 1", "    return 0.5")
    c.define(f"def {cg}(t):", "    yield t", f"    yield from {g}(t, 2)", f"    r = yield from {sub}(t)",
             "    yield t * r")
    c.define(f"def {ag}():", "    total = 0.0", "    while True:", "        v = yield total", "        if v is None:",
             "            return", "        total += v")
    outs = []
    table = [
        lambda: [f"for v in {g}(t, {c.small()}):", "    t = t + v * 0.1"],
        lambda: ["out = []", f"for v in {cg}(t):", "    out.append(v)", f"    if len(out) >= {c.rng.randint(2, 4)}:",
                 "        break", "t = sum(out) / len(out)"],
        lambda: [f"it = {g}(t, 3)", "a1 = next(it)", "a2 = next(it)", "t = (a1 + a2) * 0.5"],
        lambda: [f"acc = {ag}()", "next(acc)", f"acc.send({c.num()})", "total = acc.send(2.0)", "acc.close()",
                 "t = t * total"] + (outs.append("total") or []),
        lambda: [f"vals = list({g}(t, 2))", "t = sum(vals) - t"],
        lambda: [f"t = sum((v * 0.5 for v in {g}(t, 2)), t * 0)"],
        lambda: ["sq = (i * i for i in range(4))", "t = t + sum(sq)"],
        lambda: [f"pairs = list(zip({g}(t, 3), 'ab'))", "t = pairs[-1][0] + len(pairs)"],
        lambda: [f"t = torch.stack(list({cg}(t))).mean(0)"],
        lambda: [f"t = next({g}(t, 1), t)"],
    ]
    return Piece(ops(c, table, 1, 3), outs)


def p_itertools(c: Ctx) -> Piece:
    outs = []
    table = [
        lambda: ["for i, j in itertools.product(range(2), repeat=2):", "    t = t + (i - j) * 0.5"],
        lambda: ["for u, v in itertools.product([0.5, 1.5], 'ab'):", "    t = t + u * len(v)"],
        lambda: ["parts = list(itertools.chain([t], [t * 2], (t + 1,)))", "t = sum(parts) / len(parts)"],
        lambda: ["flat = list(itertools.chain.from_iterable([[1, 2], [3], []]))", "t = t * len(flat)"] + (outs.append("flat") or []),
        lambda: ["for a_, b_ in itertools.combinations([t, t.sin(), t.cos()], 2):", "    t = t + a_ * b_ * 0.1"],
        lambda: ["perms = list(itertools.permutations('abc', 2))", "t = t + len(perms)"] + (outs.append("perms[:3]") or []),
        lambda: ["head = list(itertools.islice(itertools.count(1, 2), 3))", "t = t * head[-1]"] + (outs.append("head") or []),
        lambda: ["mid = list(itertools.islice(range(10), 2, 8, 2))", "t = t + sum(mid)"],
        lambda: ["reps = list(itertools.repeat(0.5, 3))", "t = t * sum(reps)"],
        lambda: ["run = list(itertools.accumulate([1, 2, 3, 4]))", "t = t + run[-1]"] + (outs.append("run") or []),
        lambda: ["t = list(itertools.accumulate([t, t, t]))[-1]"],
        lambda: ["prods = list(itertools.accumulate([1, 2, 3], operator.mul, initial=2))", "t = t + prods[-1]"],
        lambda: ["groups = [(k, len(list(g))) for k, g in itertools.groupby('aabccc')]", "t = t + len(groups)"] + (outs.append("groups") or []),
        lambda: ["odd = [(k, list(g)) for k, g in itertools.groupby(sorted([3, 1, 4, 1, 5]), key=lambda v: v % 2)]",
                 "t = t + len(odd)"] + (outs.append("odd") or []),
        lambda: ["zl = list(itertools.zip_longest([1, 2, 3], 'ab', fillvalue='-'))", "t = t + len(zl)"] + (outs.append("zl") or []),
        lambda: ["sm = list(itertools.starmap(operator.mul, [(2, 3), (4, 5)]))", "t = t + sm[0]"],
        lambda: ["t = sum(itertools.starmap(torch.add, [(t, 1.0), (t, 2.0)]))"],
        lambda: ["for a_, b_ in itertools.pairwise([t, t * 2, t * 3]):", "    t = t + (b_ - a_) * 0.1"],
        lambda: ["picked = list(itertools.compress('abcd', [1, 0, 1, 0]))", "t = t + len(picked)"],
        lambda: ["tw = list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1]))", "t = t + sum(tw)"],
        lambda: ["dw = list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1]))", "t = t + sum(dw)"],
        lambda: ["cyc = list(itertools.islice(itertools.cycle([t, t * 0.5]), 3))", "t = sum(cyc)"],
        lambda: ["ff = list(itertools.filterfalse(lambda v: v % 2, range(6)))", "t = t + len(ff)"],
        lambda: ["i1, i2 = itertools.tee(iter([1, 2, 3]))", "t = t + sum(i1) - next(i2)"],
    ]
    return Piece(ops(c, table, 2, 4), outs)


def p_builtins(c: Ctx) -> Piece:
    s = c.sid()
    It = f"Item{s}"
    c.define(f"class {It}:", "    def __init__(self, w, name):", "        self.w = w", "        self.name = name", "",
             "    def __repr__(self):", f"        return '{It}(' + self.name + ')'")
    lines = [f"items = [{It}({c.num()}, 'p'), {It}({c.num()}, 'q'), {It}({c.num()}, 'r')]"]
    outs = []
    table = [
        lambda: ["acc = t * 0", "for i, row in enumerate(t, start=1):", "    acc = acc + row * i", "t = t + acc"],
        lambda: ["for r1, r2 in zip(t, t.flip(0)):", "    t = t + (r1 - r2) * 0.1"],
        lambda: ["dbl = list(map(lambda v: v * 2, [1, 2, 3]))", "t = t + dbl[1]"],
        lambda: ["t = sum(map(torch.sin, [t, t * 2]))"],
        lambda: ["added = list(map(operator.add, [1, 2], [3, 4]))", "t = t + added[0]"],
        lambda: ["nz = list(filter(None, [0, 1, 2, 0]))", "t = t * len(nz)"],
        lambda: ["odd = list(filter(lambda v: v % 2, range(5)))", "t = t + sum(odd)"],
        lambda: ["ranked = sorted(items, key=lambda o: o.w, reverse=True)", "t = t * ranked[0].w"] + (outs.append("[o.name for o in ranked]") or []),
        lambda: ["lo = min(items, key=operator.attrgetter('w'))", "t = t + lo.w"] + (outs.append("lo.name") or []),
        lambda: ["hi = max(items, key=lambda o: (o.w, o.name))", "t = t + hi.w"],
        lambda: ["rev = list(reversed([1, 2, 3]))", "t = t + rev[0] + sum(reversed(range(3)))"],
        lambda: ["t = t + all(o.w != 0 for o in items) + any(o.name == 'q' for o in items)"],
        lambda: ["rows = [r for r in t]", "t = torch.stack(rows[::-1])"],
        lambda: ["nums, letters = zip(*[(1, 'a'), (2, 'b')])", "t = t + sum(nums)"] + (outs.append("letters") or []),
        lambda: ["em = dict(enumerate('ab'))", "t = t + len(em)"],
        lambda: ["byname = sorted(items, key=operator.attrgetter('name'))", "t = t + byname[-1].w"],
        lambda: ["ws = [o.w for o in items]", "ws.sort(reverse=True)", "t = t * ws[0]"],
        lambda: ["getter = operator.itemgetter(1, 0)", "pair = getter([t, t * 2])", "t = pair[0] - pair[1]"],
        lambda: ["t = t + round(sum(o.w for o in items), 2)"],
    ]
    lines += ops(c, table, 2, 4)
    if c.chance(0.3):
        outs.append("items")
    return Piece(lines, outs)


def p_functools(c: Ctx) -> Piece:
    s = c.sid()
    af, dec, stp, cc, fib, lg = f"affine{s}", f"traced{s}", f"step{s}", f"coeffs{s}", f"fib{s}", f"LOG{s}"
    c.define(f"def {af}(t, w, b=0.0, *, scale=1.0):", "    return (t * w + b) * scale")
    outs = []
    uses = set()

    def partials():
        form = c.pick([f"p = functools.partial({af}, w={c.num()})", f"p = functools.partial({af}, t, {c.num()})",
                       f"p = functools.partial(functools.partial({af}, scale=2.0), w=0.5)"])
        call = "t = p(scale=0.5)" if ", t, " in form else c.pick(["t = p(t)", f"t = p(t, b={c.num()})", "t = p(t, scale=1.5)"])
        out = [form, call]
        if c.chance(0.4):
            out += ["pname = p.func.__name__", "t = t + len(p.keywords) + len(p.args)"]
            outs.append("pname")
        if c.chance(0.3):
            store = c.param("store", "[seed]")
            uses.add(store)
            out.append(f"{store}.append(p)")
        if c.chance(0.3):
            outs.append("p")
        return out

    def reduce_():
        return [c.pick(["t = functools.reduce(operator.add, [t, t * 2, t * 3])",
                        "t = t * functools.reduce(lambda a, b: a * b, [1, 2, 3], 1)",
                        "t = functools.reduce(lambda acc, k: acc + k * 0.5, range(3), t)"])]

    def cached():
        counted = c.chance(0.5)
        body = [f"@functools.lru_cache(maxsize={c.pick(['None', '2', '8'])})", f"def {cc}(k):"]
        if counted:
            c.define(f"MISSES{s} = [0]")
            body.append(f"    MISSES{s}[0] += 1")
        body.append("    return tuple(0.5 * i for i in range(k))")
        c.define(*body)
        return [f"t = t * {cc}(3)[2] + len({cc}({c.rng.randint(1, 4)}))"]

    def cache_fib():
        c.define("@functools.cache", f"def {fib}(n):", "    return n if n < 2 else " + f"{fib}(n - 1) + {fib}(n - 2)")
        return [f"t = t + {fib}({c.rng.randint(3, 8)})"]

    def wraps():
        c.define(f"{lg} = []")
        c.define(f"def {dec}(fn):", "    @functools.wraps(fn)", "    def wrapper(*args, **kwargs):",
                 f"        {lg}.append(fn.__name__)", "        return fn(*args, **kwargs)", "    return wrapper")
        c.define(f"@{dec}", f"def {stp}(t, k=2.0):", "    \"\"\"Scale t.\"\"\"", "    return t * k")
        if c.chance(0.3):
            c.mutate(f"{lg}.clear()")
        out = [f"t = {stp}(t)", f"t = {stp}(t, k={c.num()})"]
        if c.chance(0.5):
            out += [f"info = ({stp}.__name__, {stp}.__doc__)", f"t = t + {stp}.__wrapped__(t, 0.5)"]
            outs.append("info")
        return out

    def local_wraps():
        return ["def deco(fn):", "    @functools.wraps(fn)", "    def inner(v):", "        return fn(v) + 1",
                "    return inner", "@deco", "def bump(v):", "    return v * 2", "t = bump(t)"] + \
            (outs.append("bump.__name__") or [])

    def getters():
        return [c.pick(["t = operator.itemgetter(0)([t, t * 2]) + operator.itemgetter(1)((0, 1.5))",
                        "t = operator.methodcaller('mul', 2.0)(t)", "t = operator.neg(t) + operator.mul(t, 2)"])]

    table = [partials, partials, reduce_, cached, cache_fib, wraps, local_wraps, getters]
    return Piece(ops(c, table, 1, 3), outs, uses)


def p_closures(c: Ctx) -> Piece:
    s = c.sid()
    ms, mc = f"make_scaler{s}", f"make_counter{s}"
    c.define(f"def {ms}(k):", "    def scale(v):", "        return v * k", "    return scale")
    c.define(f"def {mc}():", "    count = 0", "    def bump(v):", "        nonlocal count", "        count += 1",
             "        return v + count", "    return bump")
    outs = []
    table = [
        lambda: [f"sc = {ms}({c.num()})", "t = sc(t)"],
        lambda: [f"bump = {mc}()", "t = bump(t)", "t = bump(t)"],
        lambda: ["fs = [lambda v, i=i: v * (i + 1) for i in range(3)]", "t = fs[2](t) - fs[0](t)"],
        lambda: ["late = [lambda v: v * i for i in range(2)]", "t = late[0](t)"],
        lambda: [f"k_ = {c.num()}", "add = lambda v: v + k_", f"k_ = {c.num()}", "t = add(t)"],
        lambda: ["hits = 0", "def inner(v):", "    nonlocal hits", "    hits += 1", "    return v * 0.5",
                 "t = inner(inner(t))", "t = t + hits"] + (outs.append("hits") or []),
        lambda: ["compose = lambda f, g: lambda v: f(g(v))", f"h = compose(torch.sin, {ms}(2.0))", "t = h(t)"],
        lambda: [f"t = (lambda v, *, k=2: v * k)(t, k={c.small()})"],
    ]
    if c.chance(0.4):
        g = f"BUMP{s}"
        c.define(f"{g} = {mc}()")
        table.append(lambda: [f"t = {g}(t)"])
    return Piece(ops(c, table, 1, 3), outs)


def p_copies(c: Ctx) -> Piece:
    s = c.sid()
    Bg = f"Bag{s}"
    custom = c.chance(0.3)
    cls = [f"class {Bg}:", "    def __init__(self, t, items):", "        self.t = t", "        self.items = items",
           "        self.meta = {'n': len(items)}"]
    if custom:
        cls += ["", "    def __copy__(self):", f"        new = {Bg}(self.t, list(self.items))", "        new.meta['copied'] = True",
                "        return new"]
    c.define(*cls)
    lines = [f"bag = {Bg}(t, [1, 2])"]
    outs = []
    table = [
        lambda: ["bag2 = copy.copy(bag)", "bag2.items.append(3)", "bag2.t = bag2.t * 2", "t = bag2.t + len(bag.items)"]
        + (outs.append("bag2") or []),
        lambda: ["bag3 = copy.deepcopy(bag)", "bag3.items.append(4)", "bag3.meta['n'] = 9",
                 "t = t + bag3.meta['n'] - bag.meta['n']"],
        lambda: ["lst = [t, [1, 2]]", "lst2 = copy.copy(lst)", "lst2[1].append(3)", "t = lst2[0] + len(lst[1])"],
        lambda: ["nested = {'a': [1, [2]]}", "deep = copy.deepcopy(nested)", "deep['a'][1].append(5)",
                 "t = t + len(nested['a'][1]) + len(deep['a'][1])"] + (outs.append("deep") or []),
        lambda: ["tl = copy.copy([t, t * 2])", "t = tl[1] - tl[0] * 0.5"],
        lambda: ["shared = [bag, bag]", "dup = copy.deepcopy(shared)", "t = t + (dup[0] is dup[1])"],
    ]
    lines += ops(c, table, 1, 3)
    if c.chance(0.4):
        outs.append("bag")
    return Piece(lines, outs, loopable=not custom)


def p_exceptions(c: Ctx) -> Piece:
    s = c.sid()
    E, O = f"AppError{s}", f"Opt{s}"
    c.define(f"class {E}(Exception):", "    def __init__(self, code, msg='bad'):",
             "        super().__init__(f'{msg} ({code})')", "        self.code = code")
    c.define(f"class {O}:", "    def __init__(self):", "        self.gain = 2.0", "",
             "    def __getattr__(self, name):", "        if name.startswith('opt_'):", "            return 0.5",
             "        raise AttributeError(name)")
    outs = []

    def finally_tail():
        out = []
        if c.chance(0.5):
            out += ["else:", "    t = t - 0.5"]
        if c.chance(0.5):
            out += ["finally:", "    t = t * 0.5"]
        return out

    def key_error():
        outs.append("msg_k")
        return ["table = {'a': 1.0}", "msg_k = ''", "try:", f"    v = table['{c.pick(['a', 'missing'])}']",
                "except KeyError as err:", "    msg_k = repr(err)", "    v = 2.0"] + finally_tail() + ["t = t * v"]

    def attr_error():
        outs.append("msg_a")
        return [f"o = {O}()", "t = t * getattr(o, 'gain', 1.0) + getattr(o, 'bias', 0.25) + o.opt_x", "msg_a = ''",
                "try:", "    t = t + o.missing", "except AttributeError as err:", "    msg_a = str(err)"] + finally_tail()

    def unpack():
        outs.append("msg_u")
        return ["msg_u = ''", "try:", f"    a_, b_ = {c.pick(['[1, 2, 3]', '[1]', '(1, 2)', 'range(4)'])}",
                "except ValueError as err:", "    msg_u = str(err)", "else:", "    t = t + a_ + b_"]

    def type_error():
        outs.append("msg_t")
        return ["msg_t = ''", "try:", f"    n_bad = {c.pick(['len(5)', '1 + None', 'int([1])', '(lambda: 0)(1)', 'sorted([1, (2,)])'])}",
                "except TypeError as err:", "    msg_t = str(err)", "    t = t + 1"]

    def stop():
        return [f"it = iter({c.pick(['[]', '[1]', '()'])})", "try:", "    t = t + next(it)", "except StopIteration:",
                "    t = t - 2"] + finally_tail()

    def custom():
        outs.append("code")
        return ["code = 0", "try:", f"    raise {E}({c.small()})", f"except {c.pick([E, 'Exception'])} as err:",
                "    code = err.code", "    t = t * code", "    msg_c = str(err)"] + finally_tail()

    def chained():
        outs.append("ctx")
        return ["ctx = None", "try:", "    try:", "        {}['k']", "    except KeyError:",
                "        raise ValueError('wrapped')", "except ValueError as err:",
                "    ctx = type(err.__context__).__name__", "    t = t + 1"]

    def misc():
        outs.append("msg_m")
        bad = c.pick(["1 / 0", "int('abc')", "[1][5]", "{}.pop(1)"])
        return ["msg_m = ''", "try:", f"    bad = {bad}",
                "except (ZeroDivisionError, ValueError, IndexError, KeyError) as err:",
                "    msg_m = type(err).__name__ + ': ' + str(err)"] + finally_tail()

    table = [key_error, attr_error, unpack, type_error, stop, custom, chained, misc]
    return Piece(ops(c, table, 1, 3), outs)


def p_config(c: Ctx) -> Piece:
    s = c.sid()
    st, sd, sc_, hi, fl = f"State{s}", f"SETTINGS{s}", f"SCALE{s}", f"HISTORY{s}", f"ENABLED{s}"
    c.define(f"class {st}:", "    level = 1", "", "    def __init__(self):", "        self.calls = 0",
             f"        self.gain = {c.num()}", "        self.enabled = True")
    c.define(f"STATE{s} = {st}()", f"{sd} = {{'scale': {c.num()}, 'mode': 'add', 'steps': 2}}",
             f"{sc_} = {c.num()}", f"{hi} = []", f"{fl} = True")
    lines = []
    table = [
        lambda: [f"t = t * {sd}['scale']"],
        lambda: [f"if {sd}['mode'] == 'add':", "    t = t + 1", "else:", "    t = t - 1"],
        lambda: [f"for _ in range({sd}['steps']):", "    t = t * 0.9"],
        lambda: [f"if STATE{s}.enabled:", f"    t = t * STATE{s}.gain"],
        lambda: [f"STATE{s}.calls += 1", f"t = t + STATE{s}.calls"],
        lambda: [f"{hi}.append(len({hi}))", f"t = t + len({hi}) * 0.1"],
        lambda: [f"t = t * {sc_}"],
        lambda: [f"if {fl}:", "    t = t.relu()"],
        lambda: [f"t = t + {st}.level"],
        lambda: [f"global {sc_}", f"{sc_} = {sc_} + 0.5", f"t = t + {sc_}"],
        lambda: [f"t = t + getattr(STATE{s}, 'extra', 0.0)"],
    ]
    lines += ops(c, table, 2, 4)
    lines = [ln for ln in lines if ln.startswith("global ")] + [ln for ln in lines if not ln.startswith("global ")]
    muts = [[f"{sd}['scale'] = 1.0 + 0.5 * i"], ["if i == 2:", f"    {sd}['mode'] = 'sub'"],
            [f"{sd}['steps'] = i % 3"], [f"STATE{s}.enabled = not STATE{s}.enabled"], [f"STATE{s}.gain = {c.num()}"],
            [f"{hi}.clear()"], [f"{hi}.append(-i)"], [f"{fl} = not {fl}"], [f"{sc_} = 0.5 * i"],
            [f"{st}.level = i"], ["if i == 1:", f"    STATE{s}.extra = 2.0", "elif i == 3:", f"    del STATE{s}.extra"]]
    for m in c.sample(muts, c.rng.randint(1, 3)):
        c.mutate(*m, rebinds=tuple(n for n in (fl, sc_) if n in m[0] and " = " in m[0] and m[0].startswith(n)))
    if c.chance(0.15):
        E = f"Limit{s}"
        c.define(f"class {E}(RuntimeError):", "    pass")
        lines += [f"if STATE{s}.calls > 3:", f"    raise {E}(f'too many calls: {{STATE{s}.calls}}')"]
        if f"STATE{s}.calls += 1" not in "\n".join(lines):
            lines += [f"STATE{s}.calls += 1"]
    return Piece(lines, [], breakable=not any(ln.startswith("global") for ln in lines))


def p_escape(c: Ctx) -> Piece:
    s = c.sid()
    Rc, reg = f"Record{s}", f"REGISTRY{s}"
    slots = c.chance(0.4)
    cls = [f"class {Rc}:"]
    if slots:
        cls.append("    __slots__ = ('value', 'name', 'notes')")
    cls += ["    def __init__(self, value, name):", "        self.value = value", "        self.name = name",
            "        self.notes = []"]
    c.define(*cls)
    c.define(f"{reg} = []")
    lines = [f"rec = {Rc}(t.sum(0), 'r{s}')"]
    outs = ["rec"]
    uses = set()
    where = c.sample(["store", "reg", "global", "none"], c.rng.randint(1, 2))
    if "store" in where:
        store = c.param("store", "[seed]")
        uses.add(store)
        lines.append(f"{store}.append(rec)")
    if "reg" in where:
        reg_p = c.param("reg", "{'count': seed}")
        uses.add(reg_p)
        lines.append(f"{reg_p}['last{s}'] = rec")
    if "global" in where:
        lines.append(f"{reg}.append(rec)")
        if c.chance(0.5):
            c.mutate(f"if len({reg}) > 2:", f"    {reg}.pop(0)")
    lines += ops(c, [
        lambda: ["rec.value = rec.value * 2", "rec.notes.append(t.shape[0])"],
        lambda: ["t = t + rec.value"],
        lambda: ["rec.name = rec.name.upper()"],
        lambda: [f"other = {Rc}(t.mean(), 'o')", "rec.notes.append(other)"] + (outs.append("other") or []),
        lambda: ["pair = (rec, rec)"] + (outs.append("pair") or []),
    ], 1, 3)
    return Piece(lines, outs, uses, loopable=False)


PIECES: list[tuple[Callable[[Ctx], Piece], float]] = [
    (p_vec, 3), (p_dataclass, 2), (p_attrs, 2.5), (p_hierarchy, 2), (p_dicts, 2.5), (p_sets, 1.5), (p_odict, 1),
    (p_defaultdict, 1), (p_counter, 1), (p_deque, 1), (p_namedtuple, 1.5), (p_enum, 1), (p_iterators, 1.5),
    (p_generators, 1.5), (p_itertools, 1.5), (p_builtins, 1.5), (p_functools, 2), (p_closures, 1.5), (p_copies, 1),
    (p_exceptions, 1.5), (p_config, 2), (p_escape, 1.5),
]


# =============================================================================================
# assembling the program
# =============================================================================================

BREAKS = [
    ["print('checkpoint', t.shape)"],
    ["dl.graph_break()"],
    ["if t.sum() > 0:", "    t = t + 0.25", "else:", "    t = t - 0.25"],
    ["scalar = t.abs().mean().item()", "t = t / (1.0 + scalar)"],
]


def _indent(lines: list, n: int = 1) -> list:
    return [("    " * n + ln) if ln else ln for ln in lines]


def _top_level_positions(lines: list) -> list:
    """Indices of lines that start a statement at indentation 0 (where a break may go before)."""
    return [i for i, ln in enumerate(lines) if i and ln and not ln[0].isspace()
            and not ln.startswith(("else", "elif", "except", "finally", "@"))
            and not lines[i - 1].startswith("@")]


def _place(c: Ctx, piece: Piece, k: int) -> tuple[list, list]:
    """The piece's lines as they go into f's body, and its outputs as expressions there."""
    lines = piece.lines
    if piece.breakable and c.chance(0.12):
        spots = _top_level_positions(lines)
        if spots:
            i = c.pick(spots)
            lines = lines[:i] + c.pick(BREAKS) + lines[i:]
    has_global = any(ln.startswith("global ") for ln in lines)
    how = c.rng.choices(["main", "helper", "closure", "loop", "try"], [10, 2.5, 1, 1, 1])[0]
    if has_global and how in ("closure",):
        how = "main"
    if how == "loop" and not piece.loopable:
        how = "main"
    outs = []
    for j, expr in enumerate(piece.outs):      # the value at the end of the piece, under a name of its own
        lines = lines + [f"out{k}_{j} = {expr}"]
        outs.append(f"out{k}_{j}")
    if how == "main":
        return lines, outs
    if how == "loop":
        return [f"for rep{k} in range(2):"] + _indent(lines), outs
    if how == "try":
        handler = c.pick([["except ZeroDivisionError:", "    t = t * 0"],
                          ["except (KeyError, IndexError) as err:", "    t = t * 0", "    print('caught', type(err).__name__)"]])
        tail = c.pick([[], ["else:", "    t = t + 0.125"], ["finally:", "    t = t * 1.0"]])
        return ["try:"] + _indent(lines) + handler + tail, outs
    uses = sorted(piece.uses)
    args = ", ".join(["t"] + uses)
    ret = f"    return t, [{', '.join(outs)}]"
    if how == "helper":
        c.define(f"def part{k}({args}):", *_indent(lines), ret)
        return [f"t, res{k} = part{k}({args})"], [f"res{k}[{i}]" for i in range(len(outs))]
    body = [f"def part{k}(t):"] + _indent(lines) + [ret]
    return body + [f"t, res{k} = part{k}(t)"], [f"res{k}[{i}]" for i in range(len(outs))]


def generate(seed: int) -> str:
    """The source text of library-style program number `seed`."""
    rng = random.Random(seed)
    c = Ctx(rng)
    fns, weights = zip(*PIECES)
    body = [c.pick(["t = x", "t = x * 1.0", "t = x.clone()", "t = x + 0"])]
    outs_all: list[str] = []
    n_pieces = rng.choice([1, 2, 2, 3, 3, 4])
    for k in range(n_pieces):
        piece = rng.choices(fns, weights)[0](c)
        lines, outs = _place(c, piece, k)
        if k and rng.random() < 0.15:
            body += rng.choice(BREAKS)
        body += lines
        outs_all += outs
    if "y" in c.params or rng.random() < 0.25:
        c.param("y", f"torch.randn({c.C}, generator=g).to(device)")
        body.append(rng.choice(["t = t + y", "t = t * y.sigmoid()", "t = torch.where(t > 0, t, y)"]))
    if rng.random() < 0.25:
        c.param("n", "2 + seed % 2")
        body += [rng.choice(["for _ in range(n):", "for j in range(n - 1):"]), "    t = t * 0.5 + 1"]
    keep = [o for o in outs_all if rng.random() < 0.8]
    form = rng.choice(["tuple", "tuple", "dict", "list"])
    if form == "dict":
        ret = "{" + ", ".join([f"'t': t"] + [f"'o{i}': {o}" for i, o in enumerate(keep)]) + "}"
    elif form == "list":
        ret = "[" + ", ".join(["t"] + keep) + "]"
    else:
        ret = "(" + ", ".join(["t"] + keep) + ",)"
    body.append(f"return {ret}")

    params = ["x"] + [p for p in ("y", "n", "store", "reg") if p in c.params] + \
        sorted(p for p in c.params if p not in ("y", "n", "store", "reg"))
    calls = [0, 0, 1]
    if c.R2 != c.R:
        calls.append(2)
    calls += rng.sample([0, 1, 3], rng.randint(0, 2))
    out = [f'"""Generated by tests/fuzz/library.py (seed {seed})."""',
           "import collections", "import copy", "import dataclasses", "import enum", "import functools",
           "import itertools", "import operator", "import typing", "", "import torch", "", "import dynamo_lite as dl",
           "", ""]
    out += c.defs
    out += ["", f"def f({', '.join(params)}):"] + _indent(body) + ["", "",
            "def make_target():", "    return f", "", "",
            f"FUZZ_CALLS = {tuple(calls)!r}", "", "",
            "def between_calls(i):"]
    if c.mut_globals:
        out.append(f"    global {', '.join(sorted(c.mut_globals))}")
    out += _indent(c.mut or ["pass"])
    out += ["", "", "def make_inputs(seed, device='cpu'):", "    g = torch.Generator().manual_seed(seed)",
            f"    rows = {c.R2} if seed == 2 else {c.R}" if c.R2 != c.R else f"    rows = {c.R}", f"    x = torch.randn(rows, {c.C}, generator=g).to(device)"]
    for p in params[1:]:
        out.append(f"    {p} = {c.params[p]}")
    out.append(f"    return ({', '.join(params)},), {{}}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
