"""The standard library's `collections` as values: `defaultdict` (`DefaultDictValue`), `Counter`
(`CounterValue`), `deque` (`DequeValue`) — `OrderedDict` is a `DictValue` whose real contents are
an OrderedDict — together with the calls that make them (their classes, `dict.fromkeys` on any
a namedtuple's helpers called through the class), registered as modelled callables, and how existing ones read
from the frame become values (`wrap_container`).

Each escaping value is rebuilt as the real class with its contents (a defaultdict with its
factory, a deque with its maxlen); an existing one is guarded (type, keys or length, the factory
or maxlen) and its changes are replayed on it after the graph. Counter's arithmetic, ordering
queries and comparisons run on a real Counter of the counts, which must then be constants.
"""
from __future__ import annotations

import operator
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Mapping

from ..breaks import UNSUPPORTED_VALUE, Unsupported, user_error
from ..guards import ConstantMatch, DictKeysMatch, LengthMatch, TypeMatch
from ..modelled import models, models_family
from ..pyops import plain
from ..runtime import replace_contents
from ..semantics import binary
from ..sources import AttrSource, ItemSource
from .base import Const, IteratorValue, Value, fold, is_const
from .containers import (NAMEDTUPLE_CODES, DictValue, LazyDictValue, LiveIteratorValue, SeqValue, SetValue, ContainerValue,
                         emit_map, hashable_key, is_key_constant, key_error, key_value, mapping_pairs, plain_keys,
                         sequence_contains)


def _is_mapping(v: Value) -> bool:
    """`isinstance(v, collections.abc.Mapping)`, which Counter checks."""
    return issubclass(v.python_type(), Mapping)


def _callable_value(v: Value) -> bool:
    """Whether calling `v` can work (its type defines __call__): what `callable(v)` says."""
    return any("__call__" in vars(k) for k in v.python_type().__mro__)


# ============================================================================================
# defaultdict
# ============================================================================================

class DefaultDictValue(DictValue):
    """A defaultdict: `d[missing]` calls `factory` (a value; Const(None) for none) inside the
    trace and stores its result."""
    __slots__ = ("factory",)

    def __init__(self, items: dict, factory: Value, cls: type = defaultdict, source=None):
        super().__init__(items, cls, source)
        self.factory = factory

    def empty_like(self, items=None):
        return DefaultDictValue(items or {}, self.factory, self.cls)

    def as_python(self):
        return self.cls(self.factory.as_python(), {k: self.items[k].as_python() for k in plain_keys(self.items)})

    def children(self):
        return (*super().children(), self.factory)

    def missing(self, frame, key, k):
        if is_const(self.factory, type(None)):
            raise key_error(k)
        value = self.factory.call(frame, [], {})
        self.setitem(frame, key, value)
        return value

    def load_attr(self, frame, name):
        if name == "default_factory":
            return self.factory
        return super().load_attr(frame, name)

    def store_attr(self, frame, name, value):
        if name != "default_factory":
            return super().store_attr(frame, name, value)
        if not (is_const(value, type(None)) or _callable_value(value)):
            raise user_error(TypeError, "default_factory must be callable or None")
        if self.source is not None:               # an existing defaultdict: replayed after the graph
            frame.tracer.effects.store_attr(self, name, value)
        self.factory = value

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.check_escapes(self)
        em.call_const(self.cls, [lambda: em.value(self.factory), lambda: emit_map(em, self.items)])


@models(defaultdict)
def _defaultdict(frame, args, kwargs):
    factory = args[0] if args else Const(None)
    if not (is_const(factory, type(None)) or _callable_value(factory)):
        raise user_error(TypeError, "first argument must be callable or None")
    d = DefaultDictValue({}, factory)
    _fill(frame, d, args[1:], kwargs, "defaultdict")
    return d


def _fill(frame, d: DictValue, args: list, kwargs: dict, name: str) -> None:
    """`dict.__init__(d, *args, **kwargs)` on a new dict value."""
    if len(args) > 1:
        raise user_error(TypeError, f"{name} expected at most 1 argument, got {len(args)}")
    if args:
        d.items.update(mapping_pairs(frame, args[0]))
    d.items.update(kwargs)


# ============================================================================================
# OrderedDict
# ============================================================================================

@models(OrderedDict)
def _ordered_dict(frame, args, kwargs):
    d = DictValue({}, OrderedDict)
    _fill(frame, d, args, kwargs, "OrderedDict")
    return d


# ============================================================================================
# Counter
# ============================================================================================

class CounterValue(DictValue):
    """A Counter: a missing key counts 0 (and is not stored), `del` of a missing key is no error.
    update / subtract work on any count values; arithmetic, comparisons, most_common, elements
    and total run on a real Counter of the counts (constants)."""
    __slots__ = ()

    def __init__(self, items: dict, cls: type = Counter, source=None):
        super().__init__(items, cls, source)

    def as_python(self):
        real = self.cls()
        dict.update(real, {k: self.items[k].as_python() for k in plain_keys(self.items)})
        return real

    def missing(self, frame, key, k):
        return Const(0)

    def delitem(self, frame, key):
        if hashable_key(key) in self.items:
            super().delitem(frame, key)

    def defines_ror(self):
        return False

    def binary(self, frame, fn, other):
        op = plain(fn)
        if op not in (operator.add, operator.sub, operator.or_, operator.and_):
            return super().binary(frame, fn, other)
        if not (isinstance(other, DictValue) and other.is_python_constant() and self.is_python_constant()):
            if isinstance(other, DictValue):
                raise Unsupported(UNSUPPORTED_VALUE, "Counter arithmetic on counts that are not constants")
            return NotImplemented
        mine = self.as_python()
        result = fold(fn, mine, other.as_python())
        if result is mine:                        # in place: this Counter, changed
            self.sync(frame, result)
            return self
        return counter_value(frame, result)

    def unary(self, frame, fn):
        if fn in (operator.pos, operator.neg):
            return counter_value(frame, fold(fn, self.as_python()))
        return super().unary(frame, fn)

    def compare(self, frame, fn, other):
        if other.is_python_constant() and self.is_python_constant():
            return Const(fold(fn, self.as_python(), other.as_python()))
        return NotImplemented

    def sync(self, frame, real: Counter) -> None:
        """Give this counter the counts of `real` (a changed copy of it), keeping positions: keys
        it lost are deleted, the others set in real's order (new ones appended, as in place)."""
        frame.tracer.mutate(self)
        for k in [k for k in self.items if k not in real]:
            del self.items[k]
        for k, count in real.items():
            self.items[k] = Const(count)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.check_escapes(self)
        em.call_const(self.cls, [lambda: emit_map(em, self.items)])   # Counter(mapping) copies it as is


def counter_value(frame, real):
    """The value of a real Counter (or the plain dict `Counter | dict` gives) of constant counts."""
    if isinstance(real, Counter):
        return CounterValue({k: Const(v) for k, v in real.items()}, type(real))
    return frame.wrap(real, None)


def _count(frame, obj: CounterValue, args, kwargs, sign: int) -> Value:
    """Counter.update (sign 1) / subtract (sign -1), as the Python source does it: a mapping
    adds / subtracts its counts (update into an empty Counter copies them), any other iterable
    counts its elements; keywords are one more mapping."""
    if len(args) > 1:
        raise user_error(TypeError, f"expected at most 1 argument, got {len(args)}")
    sources = [a for a in args if not is_const(a, type(None))]
    if kwargs:
        sources.append(DictValue(kwargs))
    frame.tracer.mutate(obj)
    for source in sources:
        if _is_mapping(source):
            pairs = mapping_pairs(frame, source)
            if sign > 0 and not obj.items:
                obj.items.update(pairs)
                continue
            for k, count in pairs:
                current = obj.items.get(k, Const(0))
                obj.items[k] = binary(frame, operator.add, count, current) if sign > 0 else \
                    binary(frame, operator.sub, current, count)
        else:
            for element in source.unpack(frame):
                k = hashable_key(element)
                obj.items[k] = binary(frame, operator.add if sign > 0 else operator.sub,
                                      obj.items.get(k, Const(0)), Const(1))
    return Const(None)


def _counter_update(frame, obj, args, kwargs):
    return _count(frame, obj, args, kwargs, 1)


def _counter_subtract(frame, obj, args, kwargs):
    return _count(frame, obj, args, kwargs, -1)


def _counter_most_common(frame, obj, args, kwargs):
    pairs = fold(obj.as_python().most_common, *[a.as_python() for a in [*args, *kwargs.values()]])
    return SeqValue([SeqValue([key_value(frame, k), Const(n)], tuple) for k, n in pairs], list)


def _counter_elements(frame, obj, args, kwargs):
    return IteratorValue([key_value(frame, k) for k in obj.as_python().elements()])


def _counter_total(frame, obj, args, kwargs):
    total: Value = Const(0)
    for count in obj.items.values():
        total = binary(frame, operator.add, total, count)
    return total


def _counter_copy(frame, obj, args, kwargs):
    return CounterValue(obj.items, obj.cls)


def _counter_fromkeys(frame, args, kwargs):
    raise user_error(NotImplementedError, "Counter.fromkeys() is undefined.  Use Counter(iterable) instead.")


CounterValue.KEYWORDS = DictValue.KEYWORDS | {"subtract", "most_common"}
CounterValue.METHODS = {
    **DictValue.METHODS, "update": _counter_update, "subtract": _counter_subtract,
    "most_common": _counter_most_common, "elements": _counter_elements, "total": _counter_total,
    "copy": _counter_copy, "fromkeys": lambda frame, obj, args, kwargs: _counter_fromkeys(frame, args, kwargs),
}

models(Counter.fromkeys.__func__)(_counter_fromkeys)


def _unbound_counter_method(name):
    """`Counter.update(c, ...)`: Counter's Python methods called through the class."""
    def handler(frame, args, kwargs):
        if not args or not isinstance(args[0], CounterValue):
            return NotImplemented
        return args[0].call_method(frame, name, args[1:], kwargs)
    return handler


for _name in ("update", "subtract", "most_common", "elements", "total", "copy"):
    models(getattr(Counter, _name))(_unbound_counter_method(_name))


@models(Counter)
def _counter(frame, args, kwargs):
    c = CounterValue({})
    _count(frame, c, args, kwargs, 1)
    return c


# ============================================================================================
# deque
# ============================================================================================

class DequeValue(ContainerValue):
    """A deque: `items` is a real deque of values with the same maxlen, so appends past it drop
    from the other end, rotations and errors are the real deque's."""
    __slots__ = ()

    def __init__(self, items, maxlen=None, source=None):
        super().__init__(source)
        self.items = deque(items, maxlen)
        self.cls = deque

    def as_python(self):
        return deque([v.as_python() for v in self.items], self.items.maxlen)

    def children(self):
        return tuple(self.items)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.call_const(deque, [lambda: em.build_list(list(self.items)), lambda: em.const(self.items.maxlen)])

    def replace_contents(self, em):
        em.call_const(replace_contents, [lambda: em.load_source(self.source),
                                         lambda: em.build_list(list(self.items))])
        em.emit("POP_TOP")

    def load_attr(self, frame, name):
        if name == "maxlen":
            return Const(self.items.maxlen)
        return super().load_attr(frame, name)

    def unpack(self, frame):
        return list(self.items)

    def get_iter(self, frame):
        return LiveIteratorValue(self, iter(self.items), _same)

    def _index(self, key: Value) -> int:
        k = key.as_python()
        if not isinstance(k, int):
            raise user_error(TypeError, f"sequence index must be integer, not '{type(k).__name__}'")
        return k

    def getitem(self, frame, key):
        return fold(operator.getitem, self.items, self._index(key))

    def setitem(self, frame, key, value):
        index = self._index(key)
        fold(operator.getitem, self.items, index)          # the real IndexError first
        frame.tracer.mutate(self)
        self.items[index] = value

    def delitem(self, frame, key):
        index = self._index(key)
        fold(operator.getitem, self.items, index)
        frame.tracer.mutate(self)
        del self.items[index]

    def contains(self, frame, item):
        return sequence_contains(list(self.items), item)

    def binary(self, frame, fn, other):
        op = plain(fn)
        if op is operator.add and isinstance(other, DequeValue):
            if fn is operator.iadd:
                return self._extend(frame, list(other.items))
            return DequeValue([*self.items, *other.items], self.items.maxlen)
        if op is operator.add and fn is operator.iadd:      # deque += any iterable
            return self._extend(frame, other.unpack(frame))
        if op is operator.mul and is_const(other, int) and not is_const(other, bool):
            repeated = list(self.items) * other.value
            if fn is operator.imul:
                frame.tracer.mutate(self)
                self.items.clear()
                self.items.extend(repeated)
                return self
            return DequeValue(repeated, self.items.maxlen)
        if self.is_python_constant() and other.is_python_constant():
            return Const(fold(plain(fn), self.as_python(), other.as_python()))
        return NotImplemented

    def compare(self, frame, fn, other):
        if self.is_python_constant() and other.is_python_constant():
            return Const(fold(fn, self.as_python(), other.as_python()))
        return NotImplemented

    def _extend(self, frame, values: list, left: bool = False):
        frame.tracer.mutate(self)
        (self.items.extendleft if left else self.items.extend)(values)
        return self


def _same(frame, item):
    return item


def _deque_call(name):
    """A deque method that does not compare values: run on the real deque of values."""
    def method(frame, obj, args, kwargs):
        arguments = [a.as_python() for a in args]
        if name in _DEQUE_MUTATORS:
            frame.tracer.mutate(obj)
        result = fold(getattr(obj.items, name), *arguments, **{k: v.as_python() for k, v in kwargs.items()})
        return result if isinstance(result, Value) else Const(result)
    return method


_DEQUE_MUTATORS = {"pop", "popleft", "rotate", "clear", "reverse"}


def _deque_append(left: bool):
    def method(frame, obj, args, kwargs):
        frame.tracer.mutate(obj)
        (obj.items.appendleft if left else obj.items.append)(args[0])
        return Const(None)
    return method


def _deque_extend(left: bool):
    def method(frame, obj, args, kwargs):
        obj._extend(frame, args[0].unpack(frame), left)
        return Const(None)
    return method


def _deque_insert(frame, obj, args, kwargs):
    index = args[0].as_python()
    if obj.items.maxlen is not None and len(obj.items) >= obj.items.maxlen:
        raise user_error(IndexError, "deque already at its maximum size")
    frame.tracer.mutate(obj)
    obj.items.insert(index, args[1])
    return Const(None)


def _matches(obj, item) -> list:
    return [i for i, v in enumerate(obj.items) if sequence_contains([v], item)]


def _deque_count(frame, obj, args, kwargs):
    return Const(len(_matches(obj, args[0])))


def _deque_index(frame, obj, args, kwargs):
    bounds = slice(*[a.as_python() for a in args[1:]] or [None]).indices(len(obj.items))
    for i in _matches(obj, args[0]):
        if bounds[0] <= i < bounds[1]:
            return Const(i)
    shown = repr(args[0].as_python()) if args[0].is_python_constant() else "value"
    raise user_error(ValueError, f"{shown} is not in deque")


def _deque_remove(frame, obj, args, kwargs):
    found = _matches(obj, args[0])
    if not found:
        raise user_error(ValueError, f"{args[0].as_python()!r} is not in deque" if args[0].is_python_constant()
                         else "deque.remove(x): x not in deque")
    frame.tracer.mutate(obj)
    del obj.items[found[0]]
    return Const(None)


def _deque_copy(frame, obj, args, kwargs):
    return DequeValue(obj.items, obj.items.maxlen)


def _deque_reversed(frame, obj, args, kwargs):
    return LiveIteratorValue(obj, reversed(obj.items), _same)


def _deque_getitem(frame, obj, args, kwargs):
    return obj.getitem(frame, args[0])


DequeValue.METHODS = {
    "append": _deque_append(False), "appendleft": _deque_append(True), "extend": _deque_extend(False),
    "extendleft": _deque_extend(True), "pop": _deque_call("pop"), "popleft": _deque_call("popleft"),
    "rotate": _deque_call("rotate"), "clear": _deque_call("clear"), "reverse": _deque_call("reverse"),
    "insert": _deque_insert, "count": _deque_count, "index": _deque_index, "remove": _deque_remove,
    "copy": _deque_copy, "__copy__": _deque_copy, "__reversed__": _deque_reversed, "__getitem__": _deque_getitem,
    "__len__": lambda frame, obj, args, kwargs: Const(len(obj.items)),
    "__iter__": lambda frame, obj, args, kwargs: obj.get_iter(frame),
}


@models(deque)
def _deque(frame, args, kwargs):
    if len(args) > 2:
        raise user_error(TypeError, f"deque() takes at most 2 arguments ({len(args)} given)")
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = (args[1] if len(args) > 1 else kwargs.get("maxlen", Const(None))).as_python()
    if maxlen is not None and not isinstance(maxlen, int):
        raise user_error(TypeError, f"'{type(maxlen).__name__}' object cannot be interpreted as an integer")
    if maxlen is not None and maxlen < 0:
        raise user_error(ValueError, "maxlen must be non-negative")
    return DequeValue(iterable.unpack(frame) if iterable is not None else [], maxlen)


# ============================================================================================
# namedtuple helpers called through the class
# ============================================================================================

def _is_namedtuple_helper(fn) -> bool:
    return getattr(fn, "__code__", None) in NAMEDTUPLE_CODES


def _namedtuple_helper(fn):
    if fn.__name__ == "_make":
        return _namedtuple_make
    def handler(frame, args, kwargs):
        """`Point._replace(p, x=1)`: the helper of an instance, modelled by name."""
        if not args or not isinstance(args[0], SeqValue):
            return NotImplemented
        return args[0].call_method(frame, fn.__name__, args[1:], kwargs)
    return handler


def _namedtuple_make(frame, args, kwargs):
    """`Point._make(iterable)` (a classmethod: the class comes first): tuple.__new__ of the class
    with the items, which must be as many as the fields."""
    cls = args[0].as_python()
    items = args[1].unpack(frame)
    if len(items) != len(cls._fields):
        raise user_error(TypeError, f"Expected {len(cls._fields)} arguments, got {len(items)}")
    return SeqValue(items, cls)


models_family(_is_namedtuple_helper, _namedtuple_helper)


# ============================================================================================
# existing containers read from the frame
# ============================================================================================

CONTAINER_TYPES = (dict, OrderedDict, defaultdict, Counter, set, frozenset, deque)


def wrap_container(value, source, wrap, guard):
    """The value of an existing dict, OrderedDict, defaultdict, Counter, set, frozenset or deque
    (None for anything else, or one whose keys are not key constants). `wrap(obj, source)` wraps
    what it holds; `guard(g)` installs a guard. Dicts are read whole under a guard on their keys
    (in order); sets lazily (SetValue); deques under a guard on their length and maxlen."""
    cls = type(value)
    if cls in (set, frozenset):
        if source is None:
            return SetValue.copy_of(value) if all(is_key_constant(k) for k in value) else None
        guard(TypeMatch(source, cls))
        return SetValue((), cls, source, real=value)
    if cls is deque:
        if source is not None:
            guard(LengthMatch(source, deque, len(value)))
            guard(ConstantMatch(AttrSource(source, "maxlen"), value.maxlen))
        items = [wrap(v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        return DequeValue(items, value.maxlen, source)
    if cls not in (dict, OrderedDict, defaultdict, Counter) or not all(is_key_constant(k) for k in value):
        return None
    if source is not None:
        guard(DictKeysMatch(source, cls, tuple(value)))
        if cls in (dict, OrderedDict):
            return LazyDictValue(value, cls, source, lambda v, k: wrap(v, ItemSource(source, k)))
    items = {k: wrap(v, ItemSource(source, k) if source is not None else None) for k, v in value.items()}
    if cls is defaultdict:
        factory = wrap(value.default_factory, AttrSource(source, "default_factory") if source is not None else None)
        return DefaultDictValue(items, factory, cls, source)
    if cls is Counter:
        return CounterValue(items, cls, source)
    return DictValue(items, cls, source)
