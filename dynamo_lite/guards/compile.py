"""Compile a guard set into one fast check function.

The check is generated Python: `def ___guard(___fn, <frame args>): return g1 and g2 and ...`, with
its source kept for explain. The C hook calls it with the frame's function and arguments as
positional arguments (no dict is built). `first_failure` evaluates the guards one by one to name
the first that fails: that is the recompile reason.
"""
from __future__ import annotations

import keyword
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..sources import GlobalSource, Scope
from .guards import Guard


@dataclass
class CompiledGuards:
    guards: list[Guard]
    check: Callable[..., bool]
    source_code: str
    _exprs: list[Callable]

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
_GUARD_MODULES = {"math": math}


def guard_local_names(arg_names: list[str]) -> dict[str, str]:
    names = {}
    for i, name in enumerate(arg_names):
        ok = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("___")
        names[name] = name if ok else f"___arg{i}"
    return names


def compile_guards(guards: list[Guard], arg_names: list[str], globals_dict: dict, name: str = "") -> CompiledGuards:
    local_names = guard_local_names(arg_names)
    consts: dict[str, Any] = {}
    by_id: dict[int, str] = {}

    def const(value) -> str:
        key = id(value)
        if key not in by_id:
            by_id[key] = f"___c{len(by_id)}"
            consts[by_id[key]] = value
        return by_id[key]

    scope = Scope(local_names, globals_name="___G", fn_name="___fn", const=const)

    exprs = [g.code(scope, const) for g in guards]
    if any(isinstance(getattr(g, "source", None), GlobalSource) or "___G[" in e for g, e in zip(guards, exprs)):
        exprs.insert(0, "___fn.__globals__ is ___G")
    params = ", ".join(["___fn", *local_names.values()])
    body = "\n        and ".join(f"({e})" for e in exprs) or "True"
    src = f"def ___guard({params}):\n    return (\n        {body}\n    )\n"
    namespace = {"___G": globals_dict, **_GUARD_MODULES, **consts}
    exec(compile(src, f"<dynamo_lite guards for {name}>", "exec"), namespace)
    check = namespace["___guard"]
    # One small function per guard, for first_failure.
    singles = []
    for g in guards:
        one = f"def ___one({params}):\n    return {g.code(scope, const)}\n"
        ns = {"___G": globals_dict, **_GUARD_MODULES, **consts}
        exec(compile(one, "<dynamo_lite guard>", "exec"), ns)
        singles.append(ns["___one"])
    compiled = CompiledGuards(guards, check, src, singles)

    def value_of(source, fn, args):
        ns = {"___G": globals_dict, **_GUARD_MODULES, **consts}
        code = f"def ___v({params}):\n    return {source.expr(scope)}\n"
        exec(compile(code, "<dynamo_lite guard value>", "exec"), ns)
        return ns["___v"](fn, *args)

    compiled._value_of = value_of
    return compiled
