"""Compile a guard set into one fast check function.

The check is generated Python, `def ___guard(___fn, <frame args>)` with one `if not (g): return
False` per guard in order, its source kept; a path several guards go through (a big model's
submodules and parameters share a few: `self._modules['layer1']._modules['0']`) is read once into
a local before the first guard whose subject it leads to (`_check_lines`). The C hook calls it
with the frame's function and arguments as positional arguments (no dict is built).
`first_failure` evaluates the guards one by one to name the first that fails: that is the
recompile reason; `old_and_new` words what that guard held on
to and what it met. `readable` renders the same guards as the function a user reads, with the
frame's own names (`x`, `self.weight`) and constants by name (`torch.float32`).
"""
from __future__ import annotations

import keyword
import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ..code_facts import STACK_ARG_PREFIX, shown_local
from ..runtime import items_left, iterator_ahead
from ..sources import ITERATOR_AHEAD, Scope, is_literal
from .guards import ITEMS_LEFT, Guard, short_repr


@dataclass
class CompiledGuards:
    guards: list[Guard]
    check: Callable[..., bool]
    source_code: str
    # makes one function per guard, taking what the check takes: made at the first failure (for
    # its reason) or explain, not at capture (a ViT's 1,262 guards compiled one by one cost ~1 s)
    _make_exprs: Callable[[], list[Callable]]
    arg_names: tuple = field(default=())       # the frame's arguments, as the check takes them
    _made_exprs: Optional[list] = field(default=None, repr=False)

    @property
    def _exprs(self) -> list[Callable]:
        if self._made_exprs is None:
            self._made_exprs = self._make_exprs()
        return self._made_exprs

    def first_failure(self, fn, args: tuple) -> Optional[str]:
        """The reason the first failing guard gives, or None if all pass."""
        return self.failure(fn, args)[1]

    def failure(self, fn, args: tuple) -> tuple[int, Optional[str]]:
        """(how many guards passed, reason of the first that failed) — (len, None) if all pass."""
        for i, (guard, expr) in enumerate(zip(self.guards, self._exprs)):
            try:
                ok = expr(fn, *args)
            except Exception as e:  # a guard that raises fails
                return i, f"{guard.describe()} could not be checked ({type(e).__name__}: {e})"
            if not ok:
                return i, _reason(guard, fn, args, self)
        return len(self.guards), None

    def old_and_new(self, guard: Guard, fn, args: tuple) -> tuple[str, str]:
        """What `guard` held on to and the value it met now, worded alike (a recapture's history)."""
        try:
            value = _resolve(guard, fn, args, self)
        except Exception:
            value = None
        try:
            return guard.expected(), guard.shown(value)
        except Exception:
            return guard.describe(), "could not be read"

    def readable(self, name: str = "") -> tuple[str, dict]:
        """The check as the Python function a user reads: one guard per line, the frame's own names
        (`x`, `self.weight`, a global by its name), the C++ tensor check as the Python it tests, and
        constants by name (`torch.float32`, `float`, the user's class `M`); a constant without one
        is `const_N`, shown in a comment. Returns (source, {name: object} of the names it uses
        besides torch, math and the frame's globals): running that source gives the check's answers."""
        params, namer, scope = self._readable_scope()
        lines = [f"({_wrapped(g.code(scope, namer))})" for g in self.guards] or ["True"]
        head = [f"def {_identifier(name)}({', '.join(params.values())}):"]
        stack = [p for a, p in params.items() if a.startswith(STACK_ARG_PREFIX)]
        if stack:
            head.append(f"    # {', '.join(stack)}: what the code before the graph break left on its stack")
        head += [f"    # {const} = {short_repr(obj)}" for const, obj in namer.unnamed()]
        body = "\n        and ".join(lines)
        return "\n".join(head) + f"\n    return (\n        {body}\n    )\n", namer.namespace()


    def readable_guard(self, guard: Guard) -> str:
        """One guard as `readable` spells it (`type(n) is int and n == 2`)."""
        _, namer, scope = self._readable_scope()
        try:
            return guard.code(scope, namer)
        except Exception:
            return guard.describe()

    def _readable_scope(self):
        params = readable_arg_names(self.arg_names)
        namer = _ConstNamer(taken=set(params.values()))
        return params, namer, Scope(params, fn_name="fn", const=namer, readable=True)


def _wrapped(expr: str, width: int = 90) -> str:
    """A long guard split at its top-level `and`s, one part a line (inside the guard's parentheses)."""
    if len(expr) <= width:
        return expr
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(" and ", i):
            parts.append(expr[start:i])
            start = i + 5
            i += 4
        i += 1
    parts.append(expr[start:])
    return "\n             and ".join(parts)


def readable_arg_names(arg_names) -> dict[str, str]:
    """The frame's argument names as the user knows them: a resume function's stack items
    (`___stack0`) become `stack0`, names that are no identifiers `argN`."""
    names: dict[str, str] = {}
    for i, arg in enumerate(arg_names):
        shown = shown_local(arg)
        if not shown.isidentifier() or keyword.iskeyword(shown):
            shown = f"arg{i}"
        while shown in names.values():
            shown += "_"
        names[arg] = shown
    return names


def _identifier(text: str) -> str:
    """`forward.<resume at line 8>` -> `guard_forward_resume_at_line_8`."""
    words = "".join(c if c.isalnum() else " " for c in text).split()
    return "guard_" + "_".join(words) if words else "guard"


class _ConstNamer:
    """Names constants for `readable`: literals as themselves, torch objects by their path under
    `torch`, builtins and the user's classes and functions by name, the rest `const_N`."""

    def __init__(self, taken: set):
        self._taken = set(taken)
        self._by_id: dict[int, str] = {}
        self._objects: dict[str, object] = {}
        self._unnamed: list[str] = []

    def __call__(self, value) -> str:
        if is_literal(value):
            return repr(value)
        if id(value) not in self._by_id:
            self._by_id[id(value)] = self._name(value)
        return self._by_id[id(value)]

    def _name(self, value) -> str:
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            return f"torch.device({str(value)!r})"
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)) and module and qualname:
            if module == "builtins" and qualname.isidentifier():
                return qualname
            if module.split(".")[0] == "torch":       # the shortest path that reaches it: torch.nn.Parameter
                parts = module.split(".")
                for path in (".".join(parts[:n] + [qualname]) for n in range(1, len(parts) + 1)):
                    if _resolves(path, value):
                        return path
            if qualname.isidentifier() and qualname not in self._taken and                     self._objects.get(qualname, value) is value:
                self._objects[qualname] = value
                return qualname
        name = f"const_{len(self._unnamed)}"
        self._unnamed.append(name)
        self._objects[name] = value
        return name

    def unnamed(self) -> list:
        return [(name, self._objects[name]) for name in self._unnamed]

    def namespace(self) -> dict:
        return dict(self._objects)


def _resolves(path: str, value) -> bool:
    obj = torch
    try:
        for part in path.split(".")[1:]:
            obj = getattr(obj, part)
    except AttributeError:
        return False
    return obj is value


def _reason(guard, fn, args, compiled) -> str:
    """The guard's own explanation; explaining must never fail (a value of an unexpected type can
    break a guard's why_not), so a generic one is the fallback."""
    try:
        value = _resolve(guard, fn, args, compiled)
    except Exception:
        value = None
    try:
        return guard.why_not(value)
    except Exception:
        try:
            return f"{guard.describe()} no longer holds"
        except Exception:
            return f"a {type(guard).__name__} guard failed"


def _resolve(guard, fn, args, compiled):
    source = getattr(guard, "source", None)
    if source is None:
        return None
    return compiled._value_of(source, fn, args)


# Modules ShapeEnv's guard expressions call into (`not math.isnan(L['lr'])` for a float input).
_GUARD_MODULES = {"math": math, ITERATOR_AHEAD: iterator_ahead, ITEMS_LEFT: items_left}


def guard_local_names(arg_names: list[str]) -> dict[str, str]:
    names = {}
    for i, name in enumerate(arg_names):
        ok = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("___")
        names[name] = name if ok else f"___arg{i}"
    return names


def _owners(source, scope: Scope) -> list:
    """`source` and the sources its fast expression is reached through, outermost first (`self`,
    `self.__dict__`, `self.__dict__['_modules']`, ...), up to and without the frame's own variable."""
    chain = []
    while source is not None:
        read_through = getattr(source, "read_through", None)
        through = read_through(scope) if read_through is not None else None
        if through is None:
            break
        chain.append(source)
        source = through
    return chain[::-1]


def _subject(guard):
    """The source a guard's check reads first (NoHooksMatch reads its module's __dict__)."""
    return getattr(guard, "reads", None) or getattr(guard, "source", None)


def _check_lines(guards: list[Guard], scope: Scope, const) -> list[str]:
    """The check's statements: each guard an `if not (...): return False`, in order. A path that
    more than one guard goes through (`self._modules['layer1']._modules['0']`: a big model's
    parameters and submodules share a few) is read once into a local, right before the first guard
    whose subject it leads to — which reads it then anyway: a guard evaluates its subject first,
    so the reads happen where and in the order they did inline, only not again."""
    uses: dict = {}
    for guard in guards:
        subjects = [_subject(guard), *getattr(guard, "sources", ())]   # (DistinctMatch: many)
        for subject in subjects:
            for source in _owners(subject, scope):
                try:
                    uses[source] = uses.get(source, 0) + 1
                except TypeError:        # an unhashable key in the path: spelt out each time
                    break
    lines = []
    for guard in guards:
        for source in _owners(_subject(guard), scope):
            try:
                shared = uses.get(source, 0) > 1 and source not in scope.cached
            except TypeError:
                break
            if shared:
                name = f"___s{len(scope.cached)}"
                lines.append(f"{name} = {scope.expr(source)}")
                scope.cached[source] = name
        lines.append(f"if not ({guard.code(scope, const)}): return False")
    scope.cached.clear()              # (the scope also spells the guards one by one, without locals)
    return lines


def compile_guards(guards: list[Guard], arg_names: list[str], globals_dict: dict, name: str = "",
                   instance_attrs: frozenset = frozenset()) -> CompiledGuards:
    """`instance_attrs`: sources the trace read from their owner's instance __dict__ (Scope)."""
    local_names = guard_local_names(arg_names)
    consts: dict[str, Any] = {}
    by_id: dict[int, str] = {}

    def const(value) -> str:
        key = id(value)
        if key not in by_id:
            by_id[key] = f"___c{len(by_id)}"
            consts[by_id[key]] = value
        return by_id[key]

    scope = Scope(local_names, globals_name="___G", fn_name="___fn", const=const, instance_attrs=instance_attrs)

    params = ", ".join(["___fn", *local_names.values()])
    lines = _check_lines(guards, scope, const)
    if any("___G[" in line for line in lines):      # (a global's source reads ___G[...])
        lines.insert(0, "if not (___fn.__globals__ is ___G): return False")
    body = "".join(f"    {line}\n" for line in lines)
    src = f"def ___guard({params}):\n{body}    return True\n"
    namespace = {"___G": globals_dict, **_GUARD_MODULES, **consts}
    exec(compile(src, f"<dynamo_lite guards for {name}>", "exec"), namespace)
    check = namespace["___guard"]

    def singles() -> list[Callable]:
        """One small function per guard, for first_failure: all in one module, compiled once."""
        text = "".join(f"def ___one{i}({params}):\n    return {g.code(scope, const)}\n"
                       for i, g in enumerate(guards))
        ns = {"___G": globals_dict, **_GUARD_MODULES, **consts}     # (after the text: it adds constants)
        exec(compile(text, "<dynamo_lite guard>", "exec"), ns)
        return [ns[f"___one{i}"] for i in range(len(guards))]

    compiled = CompiledGuards(guards, check, src, singles, tuple(arg_names))

    def value_of(source, fn, args):
        ns = {"___G": globals_dict, **_GUARD_MODULES, **consts}
        code = f"def ___v({params}):\n    return {source.expr(scope)}\n"
        exec(compile(code, "<dynamo_lite guard value>", "exec"), ns)
        return ns["___v"](fn, *args)

    compiled._value_of = value_of
    return compiled
