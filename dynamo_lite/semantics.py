"""The one facade of Python semantics the opcode handlers use.

`call`, `load_attr`, `store_attr`, `getitem`, `get_iter`, `binary`, `compare`, `contains`,
`truthy`... each takes the interpreter frame running the instruction and the symbolic values it
works on, and asks the values themselves (their protocol is in `values/base.py`). What lives
here is what no single value decides: Python's protocol ordering (the reflected operand of a
binary operator, `==` falling back to identity), attribute writes this trace made and has not
replayed yet, and the registry of *modelled callables* — builtins, library functions and torch
higher-order ops whose effect the tracer knows without running or inlining them.

The registry itself lives in `modelled.py`. This module imports only the values' base, so every
value may use it.
"""
from __future__ import annotations

import operator

from .breaks import UNSUPPORTED_VALUE, Unsupported, user_error
from .pyops import SWAPPED_COMPARE
from .effects import DELETED
from .modelled import models, models_family, modelled  # noqa: F401  (re-exported: the facade)
from .values.base import Const, IteratorValue, Value, equal_only_if_identical, is_same, kind_name


# ---- calls and attributes --------------------------------------------------------------------------

def call(frame, fn: Value, args: list, kwargs: dict) -> Value:
    return fn.call(frame, list(args), dict(kwargs))


def load_attr(frame, obj: Value, name: str) -> Value:
    pending = frame.tracer.effects.pending_attr(obj, name)
    if pending is DELETED:         # this trace deleted it: nothing to guard (it is there now)
        raise user_error(AttributeError, f"'{obj.python_type().__name__}' object has no attribute {name!r}")
    if pending is not None:
        return pending
    if name == "__class__":
        return frame.wrap(obj.python_type(), None)
    return obj.load_attr(frame, name)


def store_attr(frame, obj: Value, name: str, value: Value) -> None:
    obj.store_attr(frame, name, value)


def del_attr(frame, obj: Value, name: str) -> None:
    obj.del_attr(frame, name)


# ---- containers ------------------------------------------------------------------------------------

def getitem(frame, obj: Value, key: Value) -> Value:
    return obj.getitem(frame, key)


def setitem(frame, obj: Value, key: Value, value: Value) -> None:
    obj.setitem(frame, key, value)


def delitem(frame, obj: Value, key: Value) -> None:
    obj.delitem(frame, key)


def unpack(frame, v: Value) -> list:
    """Iterate `v` to the end (unpacking, `list(v)`, a loop the tracer unrolls)."""
    return v.unpack(frame)


def get_iter(frame, v: Value) -> Value:
    it = v.get_iter(frame)
    return IteratorValue(v.unpack(frame)) if it is NotImplemented else it


def length(frame, v: Value) -> Value:
    return v.length(frame)


def contains(frame, container: Value, item: Value) -> bool:
    return container.contains(frame, item)


def truthy(frame, v: Value) -> bool:
    return v.truthy(frame)


# ---- operators -------------------------------------------------------------------------------------

def unary(frame, fn, v: Value) -> Value:
    return v.unary(frame, fn)


def binary(frame, fn, a: Value, b: Value) -> Value:
    """`a <op> b`: the left operand first, then the reflected method of the right one."""
    result = a.binary(frame, fn, b)
    if result is NotImplemented:
        result = b.rbinary(frame, fn, a)
    if result is NotImplemented:
        raise Unsupported(UNSUPPORTED_VALUE, f"{fn.__name__} of {kind_name(a)} and {kind_name(b)}")
    return result


def compare(frame, fn, a: Value, b: Value) -> Value:
    """`a <cmp> b`: each side's comparison (operands swapped for the right one), then for `==` and
    `!=` the identity default, where it decides."""
    result = a.compare(frame, fn, b)
    if result is NotImplemented:
        result = b.compare(frame, SWAPPED_COMPARE[fn], a)
    if result is not NotImplemented:
        return result
    if fn in (operator.eq, operator.ne):
        same = is_same(a, b)
        if same is not None and (same or _default_eq(a) and _default_eq(b) or equal_only_if_identical(a, b)):
            return Const(same if fn is operator.eq else not same)
    raise Unsupported(UNSUPPORTED_VALUE, f"{fn.__name__} of {kind_name(a)} and {kind_name(b)}")


def _default_eq(v: Value) -> bool:
    return v.python_type().__eq__ is object.__eq__ or v.real_object() is not None and callable(v.real_object())


def is_op(a: Value, b: Value) -> bool:
    same = is_same(a, b)
    if same is None:
        raise Unsupported(UNSUPPORTED_VALUE, f"`is` between {kind_name(a)} and {kind_name(b)}")
    return same


# ---- real values -------------------------------------------------------------------------------------

def python_value(v: Value):
    """The real Python value of a value made only of constants; Unsupported otherwise."""
    return v.as_python()


def is_python_constant(v: Value) -> bool:
    return v.is_python_constant()
