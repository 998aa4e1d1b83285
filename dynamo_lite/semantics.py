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
import types
from typing import Iterator, Optional

from . import config
from .breaks import INSTRUCTION_LIMIT, TENSOR_TO_PYTHON, UNSUPPORTED_VALUE, TracedException, Unsupported, user_error
from .pyops import SWAPPED_COMPARE
from .modelled import models, models_family, modelled  # noqa: F401  (re-exported: the facade)
from .values.base import (Const, IteratorValue, Value, equal_only_if_identical, fold, is_constant, is_same, kind_name,
                          pinned_real)


# ---- calls and attributes --------------------------------------------------------------------------

def call(frame, fn: Value, args: list, kwargs: dict) -> Value:
    return fn.call(frame, list(args), dict(kwargs))


def load_attr(frame, obj: Value, name: str) -> Value:
    """`obj.name`. Attribute writes this trace made and has not replayed are seen where Python
    would see them: at the instance-dict step of the lookup (objects.pending_instance_attr), after
    a class's own __getattribute__ ran."""
    if name == "__class__":
        return frame.wrap(obj.python_type(), None)
    return obj.load_attr(frame, name)


def store_attr(frame, obj: Value, name: str, value: Value) -> None:
    obj.store_attr(frame, name, value)


def del_attr(frame, obj: Value, name: str) -> None:
    obj.del_attr(frame, name)


# ---- containers ------------------------------------------------------------------------------------

def getitem(frame, obj: Value, key: Value) -> Value:
    if _is_typing_object(obj):          # `Optional[T]`, `List[int]`: typing builds (and caches) them
        real, args = _annotation(obj), _annotation(key)
        if real is not _NOT_AN_ANNOTATION and args is not _NOT_AN_ANNOTATION:
            return frame.wrap(fold(operator.getitem, real, args), None)
    return obj.getitem(frame, key)


def setitem(frame, obj: Value, key: Value, value: Value) -> None:
    obj.setitem(frame, key, value)


def delitem(frame, obj: Value, key: Value) -> None:
    obj.delitem(frame, key)


def unpack(frame, v: Value) -> list:
    """Iterate `v` to the end (unpacking, `list(v)`, a loop the tracer unrolls)."""
    return v.unpack(frame)


def get_iter(frame, v: Value) -> Value:
    """`iter(v)`: the value's own iterator, else one over the items it unpacks to."""
    it = v.get_iter(frame)
    if it is NotImplemented:
        return IteratorValue(v.unpack(frame), cls=_ITERATOR_TYPES.get(v.python_type(), type(iter(()))))
    return it


# The type of eager's iterator over the builtin types whose values unpack to their items.
_ITERATOR_TYPES = {cls: type(iter(cls())) for cls in (list, tuple, dict, set, frozenset, str, bytes)}
_ITERATOR_TYPES[range] = type(iter(range(0)))


def next_item(frame, it: Value) -> Optional[Value]:
    """One step of iteration as FOR_ITER and the C consumers (list(), zip, sum...) take it: the
    iterator's next item, or None when it is exhausted; a StopIteration it raises ends it too.
    Each step counts as an instruction, so draining an infinite iterator stops at the limit."""
    tracer = frame.tracer
    tracer.instruction_count += 1
    if tracer.instruction_count > config.instruction_limit:
        raise Unsupported(INSTRUCTION_LIMIT, f"more than {config.instruction_limit} instructions (an infinite "
                                             f"iterator consumed to the end?)")
    try:
        return it.next(frame)
    except TracedException as e:
        if isinstance(e.exc, StopIteration):
            return None
        raise


def drain(frame, it: Value) -> list:
    """The items an iterator has left, taken one by one."""
    items = []
    while (item := next_item(frame, it)) is not None:
        items.append(item)
    return items


def iterate(frame, v: Value) -> Iterator[Value]:
    """The items of `iter(v)` as the tracer asks for them: the traced code behind an item (a
    generator's body, a map's function) runs only when that item is reached, so a consumer that
    stops early (any(), a break, islice) runs no more of it than eager does."""
    it = get_iter(frame, v)
    while (item := next_item(frame, it)) is not None:
        yield item


def unpack_exactly(frame, v: Value, count: int) -> list:
    """`a, b = v`: exactly `count` items. From an iterator, as CPython takes them: one more than
    `count` at most (an infinite generator unpacks to an error, not a hang)."""
    it = v.get_iter(frame)
    if it is NotImplemented:
        items = v.unpack(frame)
    else:
        items = []
        while len(items) <= count and (item := next_item(frame, it)) is not None:
            items.append(item)
    if len(items) > count:
        raise user_error(ValueError, f"too many values to unpack (expected {count})")
    if len(items) < count:
        raise user_error(ValueError, f"not enough values to unpack (expected {count}, got {len(items)})")
    return items


def equal(frame, a: Value, b: Value) -> bool:
    """`a == b` as `in`, `list.index` and groupby decide it (PyObject_RichCompareBool): identity
    first, then the truth of `==`."""
    if is_same(a, b):
        return True
    return truthy(frame, compare(frame, operator.eq, a, b))


def sort(frame, items: list, key: Optional[Value], reverse: bool, in_place: bool = False) -> list:
    """The items in the order `sorted(items, key=key, reverse=reverse)` gives: each item's key is
    computed once, in order, then the keys are compared with `<` by the real sort (stable). The
    keys must be Python constants, so comparing them runs no code of the program — or tuples
    (lists) whose comparisons are decided by constant items before any other (`(i, tensors)`
    pairs with distinct `i`): see _SequenceKey. `in_place` (list.sort) reorders `items` itself,
    also as far as a sort that fails got, as eager does."""
    keys = items if key is None else [key.call(frame, [item], {}) for item in items]
    real = [_sort_key(frame, k) for k in keys]
    if any(isinstance(k, _SequenceKey) for k in real):
        real = [k if isinstance(k, _SequenceKey) else _SequenceKey.of_constant(k) for k in real]
    order = list(range(len(items)))
    try:
        fold(order.sort, key=real.__getitem__, reverse=reverse)
    finally:
        ordered = [items[i] for i in order]
        if in_place:
            items[:] = ordered
    return ordered


def _sort_key(frame, k: Value):
    if k.is_graph_value and k.python_type() not in (int, float, bool):
        raise Unsupported(TENSOR_TO_PYTHON, "sorting compares tensors by value")
    if k.python_type() in (tuple, list) and not k.is_graph_value:
        try:
            value = k.as_python()
        except Unsupported:
            return _SequenceKey(k.python_type(), unpack(frame, k))
    else:
        value = k.as_python()
    if not is_constant(value):
        raise Unsupported(UNSUPPORTED_VALUE, f"sorting {type(value).__name__} values (their comparisons are not "
                                             f"modelled)")
    return value


class _SequenceKey:
    """A tuple or list sort key holding values that are not constants. CPython compares two
    sequences item by item: items that are the same object are equal, otherwise the first pair
    that is not `==` decides with `<`. Here every item compared must be a constant (a non-NaN one:
    NaN is equal to itself only when it is the same object, which a constant cannot tell), so the
    comparison runs no code of the program and gives eager's answer; any other is not modelled."""
    __slots__ = ("cls", "items")

    def __init__(self, cls, items: list):
        self.cls, self.items = cls, items

    @classmethod
    def of_constant(cls, value):
        if type(value) not in (tuple, list):
            raise Unsupported(UNSUPPORTED_VALUE, f"sorting a {type(value).__name__} among sequences")
        return cls(type(value), [Const(v) for v in value])

    def __lt__(self, other: "_SequenceKey") -> bool:
        if self.cls is not other.cls:
            raise Unsupported(UNSUPPORTED_VALUE, f"sorting a {self.cls.__name__} among {other.cls.__name__}s")
        for a, b in zip(self.items, other.items):
            if a is b:
                continue
            ca, cb = _comparable_constant(a), _comparable_constant(b)
            if ca != cb:
                return ca < cb
        return len(self.items) < len(other.items)


def _comparable_constant(v: Value):
    if v.is_graph_value:
        raise Unsupported(TENSOR_TO_PYTHON, "sorting compares tensors by value")
    try:
        value = v.as_python()
    except Unsupported:
        value = None
    else:
        if is_constant(value) and not _holds_nan(value):
            return value
    raise Unsupported(UNSUPPORTED_VALUE, f"sorting sequences whose order depends on a {kind_name(v)}")


def _holds_nan(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return any(_holds_nan(v) for v in value)
    return isinstance(value, (float, complex)) and value != value


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
    if fn in (operator.eq, operator.ne) and (_is_typing_object(a) or _is_typing_object(b)):
        reals = [_annotation(a), _annotation(b)]
        if _NOT_AN_ANNOTATION not in reals:
            return Const(fold(fn, *reals))
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


_NOT_AN_ANNOTATION = object()


def _is_typing_object(v: Value) -> bool:
    try:
        cls = v.python_type()
    except NotImplementedError:
        return False
    return issubclass(cls, (types.UnionType, types.GenericAlias)) or cls.__module__ == "typing"


def _annotation(v: Value):
    """The real object behind a type annotation — a typing construct (`Optional[T]`, `A | B`,
    `list[int]`), a class or a constant — else _NOT_AN_ANNOTATION. Annotations are immutable and
    compare with typing's own (pure) `__eq__`, so comparing them folds on the real objects."""
    try:
        real = pinned_real(v)
    except Unsupported:
        return _NOT_AN_ANNOTATION
    if is_constant(real) or isinstance(real, (types.UnionType, types.GenericAlias)) \
            or type(real).__module__ == "typing" or isinstance(real, type) and type(real).__eq__ is type.__eq__:
        return real
    return _NOT_AN_ANNOTATION


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
