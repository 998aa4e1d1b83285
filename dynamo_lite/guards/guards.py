"""Guard kinds. Each renders a Python boolean expression over its Source (`code`) and can explain
why a value fails it (`why_not`), which becomes the recompile reason users read; `expected` and
`shown` word the old and the new value of a recapture alike."""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..compat import HEAPTYPE
from ..runtime import items_left
from ..sources import AttrSource, Scope, Source


class Guard:
    source: Source

    def code(self, scope: Scope, const: Callable[[Any], str]) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        """Readable form, for explain (`L['x'] is a float32 tensor of size [4, 3]`)."""
        return self.code(Scope({}, "G", "fn"), _display_const).replace("___", "")

    def why_not(self, value) -> str:
        return f"{self.describe()} no longer holds"

    def expected(self) -> str:
        """What the guard holds on to, in the words `shown` uses: a recapture's old value."""
        return self.describe()

    def shown(self, value) -> str:
        """A value that failed the guard, worded as `expected` is: a recapture's new value."""
        if getattr(self, "source", None) is None:      # a guard over no one value (shape relations)
            return "no longer holds"
        return short_repr(value)


def short_repr(value, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


try:
    from .._tensorguard import TensorCheck
except ImportError:        # built only where torch's headers were available at install time
    TensorCheck = None

try:
    # address()/distinct(): id() without the "builtins.id" audit event (each id() runs any Python
    # audit hook installed: filelock installs one at import on 3.12+, and Hugging Face and
    # torch.compile import it)
    from .._evalframe import address as _address, distinct as _distinct, no_module_hooks as _no_module_hooks
except ImportError:                                    # an extension built before they existed
    _address = _distinct = _no_module_hooks = None


def _id_of(x: str, scope, const) -> str:
    """Python for `id(x)` in a guard: the extension's address(), or id() where that is missing
    or the guard is shown to a person."""
    return f"{const(_address)}({x})" if _address is not None and not scope.readable else f"id({x})"


def weakref_able(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def _display_const(value) -> str:
    return getattr(value, "__qualname__", None) or repr(value)


@dataclass(frozen=True, eq=False)
class TensorMatch(Guard):
    source: Source
    cls: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool

    @staticmethod
    def of(source: Source, t: torch.Tensor, dynamic_dims=()) -> "TensorMatch":
        """Dimensions in `dynamic_dims` are not checked here (None): ShapeEnvMatch guards them, and
        every stride that depends on them."""
        shape = tuple(None if i in dynamic_dims else s for i, s in enumerate(t.shape))
        stride = tuple(t.stride())
        if dynamic_dims:
            stride = tuple(None if any(d in dynamic_dims for d in range(i + 1, t.dim())) else s
                           for i, s in enumerate(stride))
        return TensorMatch(source, type(t), t.dtype, t.device, shape, stride, t.requires_grad)

    def code(self, scope, const):
        x = scope.expr(self.source)
        if TensorCheck is not None and not scope.readable:     # the C++ check: one call instead of ~6 attribute reads
            check = TensorCheck(self.cls, self.dtype, self.device, self.shape, self.stride, self.requires_grad)
            return f"{const(check)}({x})"
        # (the C++ check tests exactly this; explain shows this form: scope.readable)
        head = f"type({x}) is {const(self.cls)} and {x}.dtype is {const(self.dtype)} and {x}.device == {const(self.device)}"
        tail = f"{x}.requires_grad is {self.requires_grad}"
        if None not in self.shape and None not in self.stride:
            return f"{head} and {x}.shape == {self.shape!r} and {x}.stride() == {self.stride!r} and {tail}"
        parts = [head, f"{x}.dim() == {len(self.shape)}"]
        parts += [f"{x}.size({i}) == {s}" for i, s in enumerate(self.shape) if s is not None]
        parts += [f"{x}.stride({i}) == {s}" for i, s in enumerate(self.stride) if s is not None]
        return " and ".join(parts + [tail])

    def describe(self):
        size = ", ".join("*" if s is None else str(s) for s in self.shape)
        stride = ", ".join("*" if s is None else str(s) for s in self.stride)
        return (f"{self.source.name()} is a {self.cls.__name__}(dtype={self.dtype}, device={self.device}, "
                f"size=[{size}], stride=[{stride}], requires_grad={self.requires_grad})")

    def why_not(self, t):
        name = self.source.name()
        if type(t) is not self.cls:
            return f"{name}: expected {self.cls.__name__}, got {type(t).__name__}"
        if t.dtype != self.dtype:
            return f"tensor {name} dtype: expected {self.dtype}, got {t.dtype}"
        if t.device != self.device:
            return f"tensor {name} device: expected {self.device}, got {t.device}"
        if t.dim() != len(self.shape):
            return f"tensor {name} rank: expected {len(self.shape)}, got {t.dim()}"
        for i, (a, b) in enumerate(zip(self.shape, t.shape)):
            if a is not None and a != b:
                return f"tensor {name} size[{i}]: expected {a}, got {b}"
        for i, (a, b) in enumerate(zip(self.stride, t.stride())):
            if a is not None and a != b:
                return f"tensor {name} stride[{i}]: expected {a}, got {b}"
        if t.requires_grad != self.requires_grad:
            return f"tensor {name} requires_grad: expected {self.requires_grad}, got {t.requires_grad}"
        return super().why_not(t)

    def expected(self):
        return _tensor_words(self.cls, self.dtype, self.device, self.shape, self.stride, self.requires_grad)

    def shown(self, t):
        if not isinstance(t, torch.Tensor):
            return f"a {type(t).__qualname__}: {short_repr(t)}"
        return _tensor_words(type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad)


def _tensor_words(cls, dtype, device, shape, stride, requires_grad) -> str:
    def dims(values):
        return "[" + ", ".join("*" if v is None else str(v) for v in values) + "]"
    return (f"{cls.__name__}({str(dtype).replace('torch.', '')}, {device}, size={dims(shape)}, "
            f"stride={dims(stride)}{', requires_grad' if requires_grad else ''})")


@dataclass(frozen=True, eq=False)
class ShapeEnvMatch(Guard):
    """Relations between symbolic sizes the graph relies on (from ShapeEnv), e.g.
    `x.size()[1] == y.size()[0]` or `2 <= x.size()[0]`, already in guard-function names."""
    exprs: tuple
    source: Source = field(default=None)

    def code(self, scope, const):
        return " and ".join(f"({e})" for e in self.exprs) or "True"

    def describe(self):
        return "dynamic sizes: " + " and ".join(self.exprs)

    def why_not(self, value):
        return f"a dynamic-shape relation no longer holds ({' and '.join(self.exprs)})"


@dataclass(frozen=True, eq=False)
class DistinctMatch(Guard):
    """The graph's tensor inputs are distinct objects, as when captured. Added to graphs that
    mutate an input: a backend that functionalizes the graph would otherwise miss that writing one
    input changes another (`f(a, a)` after capturing `f(a, b)`)."""
    sources: tuple
    source: Source = field(default=None)

    def code(self, scope, const):
        if _distinct is not None and not scope.readable:
            return f"{const(_distinct)}({', '.join(scope.expr(s) for s in self.sources)})"
        ids = ", ".join(f"id({scope.expr(s)})" for s in self.sources)
        return f"len({{{ids}}}) == {len(self.sources)}"

    def describe(self):
        return "distinct objects: " + ", ".join(s.name() for s in self.sources)

    def why_not(self, value):
        return f"inputs that were distinct objects are now the same object ({self.describe()})"


@dataclass(frozen=True, eq=False)
class TypeMatch(Guard):
    source: Source
    cls: type

    def code(self, scope, const):
        return f"type({scope.expr(self.source)}) is {const(self.cls)}"

    def describe(self):
        return f"type({self.source.name()}) is {self.cls.__qualname__}"

    def why_not(self, value):
        return f"type of {self.source.name()}: expected {self.cls.__qualname__}, got {type(value).__qualname__}"

    def expected(self):
        return f"a {self.cls.__qualname__}"

    def shown(self, value):
        return f"a {type(value).__qualname__}"


@dataclass(frozen=True, eq=False)
class IdMatch(Guard):
    """`x is obj`. The check compares ids and holds only a weak reference where it can: the cache
    entry is dropped when the object dies (compile.py), so ids are never confused and the cache
    keeps nothing alive."""
    source: Source
    target: Any        # weakref.ref to the object, or a closure holding it if it cannot be weakly referenced
    obj_id: int
    weak: bool

    @staticmethod
    def of(source: Source, obj) -> "IdMatch":
        if weakref_able(obj):
            return IdMatch(source, weakref.ref(obj), id(obj), True)
        return IdMatch(source, lambda: obj, id(obj), False)

    @property
    def obj(self):
        return self.target()

    def code(self, scope, const):
        if self.weak:
            return f"{_id_of(scope.expr(self.source), scope, const)} == {self.obj_id}"
        return f"{scope.expr(self.source)} is {const(self.obj)}"

    def describe(self):
        obj = self.obj
        what = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        return f"{self.source.name()} is the same object ({what} at {self.obj_id:#x})"

    def why_not(self, value):
        return f"{self.source.name()} is a different object than when captured"

    def expected(self):
        obj = self.obj
        return f"{getattr(obj, '__qualname__', None) or type(obj).__qualname__} at {self.obj_id:#x}"

    def shown(self, value):
        return f"{getattr(value, '__qualname__', None) or type(value).__qualname__} at {id(value):#x}"


@dataclass(frozen=True, eq=False)
class ConstantMatch(Guard):
    source: Source
    value: Any

    def code(self, scope, const):
        x = scope.expr(self.source)
        if self.value is None or isinstance(self.value, bool) or self.value is Ellipsis:
            return f"{x} is {self.value!r}"
        equal = f"{x} == {const(self.value)}"
        if type(self.value).__module__ == "numpy":
            equal = f"bool({equal})"       # numpy's == gives np.True_, and a guard must give True itself
        return f"type({x}) is {const(type(self.value))} and {equal}"

    def describe(self):
        return f"{self.source.name()} == {self.value!r}"

    def why_not(self, value):
        return f"{self.source.name()} changed: {self.value!r} -> {value!r}"

    def expected(self):
        return short_repr(self.value)


@dataclass(frozen=True, eq=False)
class LengthMatch(Guard):
    source: Source
    cls: type
    length: int

    def code(self, scope, const):
        x = scope.expr(self.source)
        return f"type({x}) is {const(self.cls)} and len({x}) == {self.length}"

    def describe(self):
        return f"{self.source.name()} is a {self.cls.__qualname__} of length {self.length}"

    def why_not(self, value):
        if type(value) is not self.cls:
            return f"type of {self.source.name()}: expected {self.cls.__qualname__}, got {type(value).__qualname__}"
        return f"len({self.source.name()}) changed: {self.length} -> {len(value)}"

    def expected(self):
        return f"a {self.cls.__qualname__} of length {self.length}"

    def shown(self, value):
        try:
            return f"a {type(value).__qualname__} of length {len(value)}"
        except TypeError:
            return f"a {type(value).__qualname__}"


ITEMS_LEFT = "___items_left"       # the name every guard function has for runtime.items_left


@dataclass(frozen=True, eq=False)
class RemainingMatch(Guard):
    """An iterator of a list, tuple or range the frame was given has at least (or, where the trace
    ran out, exactly) `key` items left: guarded instead of its position, so that each iteration of
    a loop live across a break passes the same guards (`values/containers.InputIteratorValue`)."""
    source: Source
    key: int
    exact: bool = False

    def code(self, scope, const):
        fn = "items_left" if scope.readable else ITEMS_LEFT
        return f"{fn}({scope.expr(self.source)}) {'==' if self.exact else '>='} {self.key}"

    def describe(self):
        return f"{self.source.name()} has {'exactly' if self.exact else 'at least'} {self.key} items left"

    def why_not(self, value):
        return f"items left in {self.source.name()}: expected {self.expected()}, got {self.shown(value)}"

    def expected(self):
        return f"{'' if self.exact else 'at least '}{self.key}"

    def shown(self, value):
        try:
            return str(items_left(value))
        except Exception:
            return short_repr(value)


@dataclass(frozen=True, eq=False)
class DictKeysMatch(Guard):
    """`x` is a `cls` whose keys (a dict's) or elements (a set's, a deque's) are `keys`, in this
    order."""
    source: Source
    cls: type
    keys: tuple

    def code(self, scope, const):
        x = scope.expr(self.source)
        check = f"type({x}) is {const(self.cls)} and tuple({x}) == {const(self.keys)}"
        if any(isinstance(k, (int, float, complex)) for k in self.keys):
            # 1 == 1.0 == True: an equal key of another type must not pass for this one
            check += f" and tuple(map(type, {x})) == {const(tuple(map(type, self.keys)))}"
        return check

    def describe(self):
        return f"{self.source.name()} has keys {list(self.keys)!r}"

    def why_not(self, value):
        if type(value) is not self.cls:
            return f"type of {self.source.name()}: expected {self.cls.__qualname__}, got {type(value).__qualname__}"
        return f"keys of {self.source.name()} changed: {list(self.keys)!r} -> {list(value)!r}"

    def expected(self):
        return f"a {self.cls.__qualname__} with keys {short_repr(list(self.keys))}"

    def shown(self, value):
        try:
            return f"a {type(value).__qualname__} with keys {short_repr(list(value))}"
        except TypeError:
            return f"a {type(value).__qualname__}"


@dataclass(frozen=True, eq=False)
class KeyInMatch(Guard):
    """`key in d` gave `found`, for an existing dict keyed by objects hashed by identity (an
    optimizer's state keyed by parameters): the key is read from its own source `other`, or is the
    constant `key`. Identity hashes never call a tensor's `==`."""
    source: Source
    other: Any            # Source of the key, or None for a constant key
    key: Any
    found: bool

    def _key(self, scope, const):
        return scope.expr(self.other) if self.other is not None else const(self.key)

    def code(self, scope, const):
        return f"({self._key(scope, const)} in {scope.expr(self.source)}) is {self.found}"

    def describe(self):
        key = self.other.name() if self.other is not None else _display_const(self.key)
        return f"{key} {'in' if self.found else 'not in'} {self.source.name()}"

    def why_not(self, value):
        key = self.other.name() if self.other is not None else _display_const(self.key)
        return f"{key} is {'no longer' if self.found else 'now'} in {self.source.name()}"


@dataclass(frozen=True, eq=False)
class MembershipMatch(Guard):
    """`key in S` gave `found` (S an existing set the traced code only tested membership in)."""
    source: Source
    key: Any
    found: bool

    def code(self, scope, const):
        x = scope.expr(self.source)
        return f"type({x}) in (set, frozenset) and ({const(self.key)} in {x}) is {self.found}"

    def describe(self):
        return f"{_display_const(self.key)} {'in' if self.found else 'not in'} {self.source.name()}"

    def why_not(self, value):
        return f"{_display_const(self.key)} is {'no longer' if self.found else 'now'} in {self.source.name()}"


class _SameSubclasses:
    """`cls.__subclasses__()` is, in order, the classes it was when captured (weak references: a
    class that died is not confused with a new one at the same address)."""
    __slots__ = ("refs",)

    def __init__(self, classes):
        self.refs = tuple(weakref.ref(c) for c in classes)

    def __call__(self, cls) -> bool:
        now = type.__subclasses__(cls) if isinstance(cls, type) else None
        return now is not None and len(now) == len(self.refs) and all(c is r() for c, r in zip(now, self.refs))


@dataclass(frozen=True, eq=False)
class SubclassesMatch(Guard):
    """`cls.__subclasses__()` returned these classes: defining (or dropping) a subclass recaptures."""
    source: Source
    check: _SameSubclasses

    @staticmethod
    def of(source: Source, classes) -> "SubclassesMatch":
        return SubclassesMatch(source, _SameSubclasses(classes))

    def code(self, scope, const):
        return f"{const(self.check)}({scope.expr(self.source)})"

    def describe(self):
        names = ", ".join(getattr(r(), "__qualname__", "?") for r in self.check.refs)
        return f"{self.source.name()}.__subclasses__() is [{names}]"

    def why_not(self, value):
        return f"{self.source.name()} has other subclasses than when captured"


@dataclass(frozen=True, eq=False)
class CachedCallMatch(Guard):
    """`f(*args, **kwargs) is <the object>`: an lru_cache'd function (pure by its author's promise)
    still answers these constant arguments with the object the graph was traced with. Calling it
    is a cache hit, the one the frame's own call would have made (values/callables._cached_call)."""
    source: Source
    fn: Any
    args: tuple
    kwargs: tuple
    key: tuple

    @staticmethod
    def of(source: Source, fn, args, kwargs: dict) -> "CachedCallMatch":
        return CachedCallMatch(source, fn, tuple(args), tuple(kwargs.items()), (id(fn), tuple(args), tuple(kwargs.items())))

    def code(self, scope, const):
        kwargs = "".join(f", {k}={const(v)}" for k, v in self.kwargs)
        args = ", ".join(const(a) for a in self.args)
        return f"{const(self.fn)}({args}{kwargs}) is {scope.expr(self.source)}"

    def describe(self):
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs)])
        return f"{getattr(self.fn, '__qualname__', self.fn)}({call}) is {self.source.name()} (cached)"

    def why_not(self, value):
        return f"{getattr(self.fn, '__qualname__', self.fn)}(...) returns another object than when captured"


_MODE_STACKS = {"function": torch._C._len_torch_function_stack, "dispatch": torch._C._len_torch_dispatch_stack}


@dataclass(frozen=True, eq=False)
class NoModesMatch(Guard):
    """No TorchFunctionMode (`key` "function") / TorchDispatchMode (`key` "dispatch") is active
    when the graph is called: what a folded `has_torch_function(...)` or dispatch-mode query
    answered for the traced code."""
    key: str
    source: Source = field(default=None)

    def code(self, scope, const):
        return f"{const(_MODE_STACKS[self.key])}() == 0"

    def describe(self):
        return f"no torch {self.key} mode is active"

    def why_not(self, value):
        return f"a torch {self.key} mode is active"


def global_state() -> tuple:
    """The torch global state a graph may depend on, in GlobalStateMatch's order."""
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
            torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda"),
            torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype("cuda"), torch._C._len_torch_function_stack())


_STATE_CHECKS = ((torch.is_grad_enabled, (), "torch.is_grad_enabled()"),
                 (torch.get_default_dtype, (), "torch.get_default_dtype()"),
                 (torch.are_deterministic_algorithms_enabled, (), "torch.are_deterministic_algorithms_enabled()"),
                 (torch.is_autocast_enabled, ("cpu",), "torch.is_autocast_enabled('cpu')"),
                 (torch.is_autocast_enabled, ("cuda",), "torch.is_autocast_enabled('cuda')"),
                 (torch.get_autocast_dtype, ("cpu",), "torch.get_autocast_dtype('cpu')"),
                 (torch.get_autocast_dtype, ("cuda",), "torch.get_autocast_dtype('cuda')"),
                 # TorchFunctionModes active when the frame is called: only torch's default-device
                 # mode is ever captured under (convert_frame runs the frame eagerly under others)
                 (torch._C._len_torch_function_stack, (), "the number of active TorchFunctionModes"))


@dataclass(frozen=True, eq=False)
class GlobalStateMatch(Guard):
    """Grad mode, default dtype, deterministic algorithms and autocast, as when captured."""
    state: tuple
    source: Source = field(default=None)

    @staticmethod
    def now() -> "GlobalStateMatch":
        return GlobalStateMatch(global_state())

    def code(self, scope, const):
        parts = []
        for (fn, args, _), expected in zip(_STATE_CHECKS, self.state):
            call = f"{const(fn)}({', '.join(repr(a) for a in args)})"
            if isinstance(expected, bool):
                parts.append(f"{call} is {expected}")
            elif isinstance(expected, int):
                parts.append(f"{call} == {expected}")
            else:
                parts.append(f"{call} is {const(expected)}")
        return " and ".join(parts)

    def describe(self):
        grad, dtype, deterministic, autocast_cpu, autocast_cuda, cast_cpu, cast_cuda, modes = self.state

        def autocast(on, to):
            return f"{str(to).replace('torch.', '')}" if on else "off"
        return (f"torch state: grad {'on' if grad else 'off'}, default dtype {str(dtype).replace('torch.', '')}, "
                f"deterministic {deterministic}, autocast cpu/cuda {autocast(autocast_cpu, cast_cpu)}/"
                f"{autocast(autocast_cuda, cast_cuda)}" + (f", {modes} TorchFunctionMode(s) active" if modes else ""))

    def why_not(self, value):
        now = global_state()
        for (_, _, text), expected, actual in zip(_STATE_CHECKS, self.state, now):
            if expected != actual:
                return f"{text} changed: {expected} -> {actual}"
        return super().why_not(value)

    def expected(self):
        return self.describe()

    def shown(self, value):
        return GlobalStateMatch.now().describe()


@dataclass(frozen=True, eq=False)
class NoHooksMatch(Guard):
    """The module (still) has no forward/backward hooks, so inlining its forward is exact. The
    check reads the hook tables from the module's __dict__ (where nn.Module keeps them), shown as
    attributes."""
    source: Source

    TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")

    @property
    def reads(self) -> Source:
        return AttrSource(self.source, "__dict__")

    def code(self, scope, const):
        if scope.readable:
            m = scope.expr(self.source)
            return f"not ({' or '.join(f'{m}.{table}' for table in self.TABLES)})"
        if _no_module_hooks is not None:              # the same test in C (_evalframe.c)
            return f"{const(_no_module_hooks)}({scope.expr(self.reads)})"
        first, *rest = self.TABLES
        return f"not ((___h := {scope.expr(self.reads)})[{first!r}] or {' or '.join(f'___h[{t!r}]' for t in rest)})"

    def describe(self):
        return f"{self.source.name()} has no hooks"

    def why_not(self, value):
        return f"{self.source.name()} now has hooks"


@dataclass(frozen=True, eq=False)
class AliasMatch(Guard):
    source: Source
    other: Source

    def code(self, scope, const):
        return f"{scope.expr(self.source)} is {scope.expr(self.other)}"

    def describe(self):
        return f"{self.source.name()} is {self.other.name()}"

    def why_not(self, value):
        return f"{self.source.name()} and {self.other.name()} are no longer the same object"


def _has_generic_attr(obj, name: str) -> bool:
    try:
        object.__getattribute__(obj, name)
        return True
    except AttributeError:
        return False


@dataclass(frozen=True, eq=False)
class AttrAbsent(Guard):
    """`source` has no attribute `attr`: the graph took the AttributeError path (getattr's default,
    hasattr() False, an `except AttributeError`). `generic`: looked up with object.__getattribute__
    (from inside a custom __getattribute__)."""
    source: Source
    attr: str
    generic: bool = False

    def code(self, scope, const):
        check = const(_has_generic_attr if self.generic else hasattr)
        return f"not {check}({scope.expr(self.source)}, {self.attr!r})"

    def describe(self):
        return f"{self.source.name()} has no attribute {self.attr!r}"

    def why_not(self, value):
        return f"{self.source.name()} now has an attribute {self.attr!r}"


@dataclass(frozen=True, eq=False)
class FunctionMatch(Guard):
    """`source` is a plain Python function made from this code object in these globals, with
    this many defaults and these keyword-only defaults: guarded by what it is made of, not by
    identity, so a function (closure, lambda) made afresh on each call reuses the graph. Its
    defaults and closure contents are guarded where the trace reads them."""
    source: Source
    code_obj: Any
    globals_id: int
    n_defaults: int
    kwdefault_keys: tuple
    seen: Any = None        # weakref.ref to the function seen while tracing: the usual case is the same one

    def code(self, scope, const):
        x = scope.expr(self.source)
        made_of = (f"type({x}) is {const(types.FunctionType)} and {x}.__code__ is {const(self.code_obj)} "
                   f"and {_id_of(x + '.__globals__', scope, const)} == {self.globals_id} and not {x}.__dict__ "
                   f"and len({x}.__defaults__ or ()) == {self.n_defaults} "
                   f"and tuple({x}.__kwdefaults__ or ()) == {self.kwdefault_keys!r}")
        if self.seen is None:
            return made_of
        return f"({const(self.seen)}() is {x} or ({made_of}))"

    def describe(self):
        return f"{self.source.name()} is a function of {self.code_obj.co_qualname} (line {self.code_obj.co_firstlineno})"

    def why_not(self, value):
        code = getattr(value, "__code__", None)
        if code is not self.code_obj:
            got = getattr(code, "co_qualname", type(value).__name__)
            return f"{self.source.name()}: expected a function of {self.code_obj.co_qualname}, got {got}"
        return f"{self.describe()} with the same defaults and no attributes: no longer holds"


@dataclass(frozen=True, eq=False)
class QueryMatch(Guard):
    """`fn(*args)` still answers `result`: a query of global state (`torch.distributed.
    is_initialized()`, `os.getenv("FLAG", "0")`) whose answer the trace used; `args` are constants."""
    fn: Callable
    result: Any
    source: Source = field(default=None)
    args: tuple = ()

    @property
    def key(self) -> tuple:
        """What tells two queries apart (Tracer.add_guard keeps one guard per key)."""
        return (id(self.fn), self.args)

    def _call(self, const=None) -> str:
        """The query as Python: with the guard code's constant names, or readable (no `const`)."""
        const = const or (lambda v: _display_const(v) if callable(v) else repr(v))
        return f"{const(self.fn)}({', '.join(const(a) for a in self.args)})"

    def code(self, scope, const):
        return f"{self._call(const)} == {const(self.result)}"

    def describe(self):
        return f"{self._call()} == {self.result!r}"

    def why_not(self, value):
        return f"{self._call()} changed: {self.result!r} -> {self.fn(*self.args)!r}"


@dataclass(frozen=True, eq=False)
class ClassAttrsMatch(Guard):
    """Every attribute of the class `key` and of its Python bases is the object it was at capture,
    none added or removed, except those the trace itself writes (`type(self).count += 1`), whose
    values their own guards check. It stands in for ClassVersionMatch on a class the trace writes
    to, whose version tag the replayed write moves on every call: a method replaced between calls
    (`Base.forward = other`) must still be seen, also where the trace looked it up through
    `super()` or an instance it made."""
    key: type
    entries: tuple          # ((class, names the trace writes, ((name, value), ...)), ...)
    source: Source = field(default=None)

    @staticmethod
    def of(key: type, written: dict) -> "ClassAttrsMatch":
        entries = []
        for cls in key.__mro__:
            if cls.__flags__ & HEAPTYPE:
                skip = frozenset(written.get(cls, ()))
                entries.append((cls, skip, tuple((k, v) for k, v in vars(cls).items() if k not in skip)))
        return ClassAttrsMatch(key, tuple(entries))

    def code(self, scope, const):
        return f"{const(class_attrs_unchanged)}({const(self.entries)})"

    def describe(self):
        return f"the attributes of class {self.key.__qualname__} (and its bases) unchanged, but those the code writes"

    def why_not(self, value):
        return f"an attribute of class {self.key.__qualname__} (or of a base class) changed"


def class_attrs_unchanged(entries) -> bool:
    for cls, written, attrs in entries:
        d = cls.__dict__
        if len(d) - sum(1 for name in written if name in d) != len(attrs):
            return False
        for name, value in attrs:
            if d.get(name, _ABSENT) is not value:
                return False
    return True


_ABSENT = object()


@dataclass(frozen=True, eq=False)
class ClassVersionMatch(Guard):
    """No attribute of the class `key` or of its bases changed since capture (methods, properties,
    class attributes, special methods): CPython's version tag of the class is the same. One such
    guard covers every lookup the trace made on the class."""
    key: type
    version: int
    source: Source = field(default=None)

    def code(self, scope, const):
        from .._evalframe import type_version
        if not self.version:                  # the class changed too often to get a tag: never reuse
            return "False"
        return f"{const(type_version)}({const(self.key)}) == {self.version}"

    def describe(self):
        return f"class {self.key.__qualname__} unchanged"

    def why_not(self, value):
        return f"an attribute of class {self.key.__qualname__} (or of a base class) changed"
