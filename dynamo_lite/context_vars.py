"""contextvars.ContextVar inside captured code: `set`, `get` and `reset` of a variable that the
same trace sets and resets again (transformers' output collector: `token = var.set(collector)`,
run the model, `var.reset(token)`).

While tracing, a set is recorded on the tracer (`ContextVarSets`) and not performed; `get`
returns what the trace set; `reset(token)` restores what was there before that set. A variable
the trace sets and resets leaves nothing to replay. A reset with a token from outside (its set
ran eagerly before this graph) is done for real after the graph, in order with the other side
effects. Everything else breaks the graph: a `get` of a variable this trace did not set (its
value lives in the caller's context), a set still in force when the graph ends (codegen refuses
it), a token made in the trace that escapes (it cannot be rebuilt).
"""
from __future__ import annotations

import contextvars

from . import breaks
from .breaks import Unsupported
from .values.base import Const, Value
from .values.objects import REAL_TYPE_METHODS, NewObjectValue, ObjectValue

_NOT_SET = object()       # the variable had no value set by this trace before


class ContextVarSets:
    """The ContextVar sets of one trace that are still in force, and the tokens they returned."""

    def __init__(self):
        self.current: dict[int, tuple] = {}      # id(var) -> (var, value)
        self.tokens: dict[int, tuple] = {}       # id(token value) -> (var, what reset restores)

    @property
    def pending(self) -> bool:
        return bool(self.current)

    def set(self, var, value: Value) -> Value:
        token = NewObjectValue(contextvars.Token)
        self.tokens[id(token)] = (var, self.current.get(id(var), _NOT_SET), token)
        self.current[id(var)] = (var, value)
        return token

    def get(self, var):
        entry = self.current.get(id(var))
        if entry is None:
            raise Unsupported(breaks.UNKNOWN_CALL, f"ContextVar {var.name!r}.get(): its value is set outside "
                                                   f"the captured code")
        return entry[1]

    def reset(self, var, token: Value):
        entry = self.tokens.pop(id(token), None)
        if entry is None:
            raise Unsupported(breaks.UNKNOWN_CALL, "ContextVar.reset() with a token not made by this trace "
                                                   "(or used twice)")
        token_var, previous, _ = entry
        if token_var is not var:
            raise Unsupported(breaks.USER_EXCEPTION, "ValueError: Token was created by a different ContextVar")
        if previous is _NOT_SET:
            self.current.pop(id(var), None)
        else:
            self.current[id(var)] = previous


def call_method(frame, obj: ObjectValue, name: str, args: list, kwargs: dict) -> Value:
    """`var.set(value)`, `var.get([default])`, `var.reset(token)` on an existing ContextVar."""
    var, state = obj.obj, frame.tracer.context_vars
    if kwargs:
        raise Unsupported(breaks.UNKNOWN_CALL, f"ContextVar.{name}() with keyword arguments")
    if name == "set" and len(args) == 1:
        return state.set(var, args[0])
    if name == "get" and len(args) <= 1:          # a default only matters for a variable never set
        return state.get(var)
    if name == "reset" and len(args) == 1 and isinstance(args[0], ObjectValue) and args[0].source is not None:
        # a token from outside (the set ran eagerly before this graph): reset for real, in order
        state.current.pop(id(var), None)
        frame.tracer.effects.call(contextvars.ContextVar.reset, [obj, args[0]])
        return Const(None)
    if name == "reset" and len(args) == 1:
        state.reset(var, args[0])
        return Const(None)
    raise Unsupported(breaks.UNKNOWN_CALL, f"ContextVar.{name}")


REAL_TYPE_METHODS[contextvars.ContextVar] = (frozenset({"set", "get", "reset"}), call_method)
