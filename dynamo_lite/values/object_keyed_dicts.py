"""Existing dicts keyed by tensors (hashed by identity), read one key at a time.

An optimizer's `state` is a `defaultdict(dict)` keyed by the parameters. Guarding its keys as a
whole (DictKeysMatch) would compare tensors with `==`; reading it as a whole would make every key
a graph input, reloaded through `list(d)[i]`. Instead, as an existing set only tested with `in`
is, the dict is read lazily: each lookup `d[key]` of a key that has a source of its own (the
parameter read from `param_groups`) is guarded on the answer (`KeyInMatch`: `key in d`), and the
entry found is read through `d[key]` (`KeyedItemSource`), guarded like any value. A key made
while tracing is absent from the real dict by identity. Writes (`d[key] = v`, and what a
defaultdict's factory makes for a missing key) are kept in the value, so later reads in the
trace see them, and replayed on the real dict after the graph.

Dicts holding keys with a `__hash__`/`__eq__` of their own are not read this way (a guard would
run that code). Iterating such a dict, or asking for its keys, is refused: the order of its keys is the order of
objects that the trace has no sources for.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict

import torch

from ..breaks import UNSUPPORTED_VALUE, Unsupported
from ..guards import KeyInMatch, LengthMatch, TypeMatch
from ..sources import AttrSource, KeyedItemSource
from .base import Const, MethodValue, Value
from .containers import IdentityKey, hashable_key, is_key_constant, key_error

DICT_TYPES = (dict, OrderedDict, defaultdict)


def keyed_by_tensors(real: dict) -> bool:
    """A dict whose keys are key constants or tensors hashed by identity (never an object with a
    `__hash__`/`__eq__` of its own: a guard would run its code)."""
    return type(real) in DICT_TYPES and all(
        is_key_constant(k) or isinstance(k, torch.Tensor) and type(k).__hash__ is torch.Tensor.__hash__ for k in real)


class ObjectKeyedDictValue(Value):
    """An existing dict (with a source) holding keys hashed by identity: `entries` are the keys
    this trace looked up or wrote (hashable_key -> value, None for a key found absent), `written`
    the writes to replay, in order."""
    __slots__ = ("real", "entries", "written", "added", "factory")

    def __init__(self, real: dict, source):
        super().__init__(source)
        self.real = real
        self.entries: dict = {}
        self.written: list = []           # (key value, value), in program order
        self.added = 0                    # keys written that the real dict did not hold
        self.factory = None               # a defaultdict's default_factory, once read

    @staticmethod
    def of(real: dict, source, guard) -> "ObjectKeyedDictValue":
        guard(TypeMatch(source, type(real)))
        return ObjectKeyedDictValue(real, source)

    def python_type(self):
        return type(self.real)

    def real_object(self):
        return self.real

    def children(self):
        keys = [k.value for k in self.entries if isinstance(k, IdentityKey)]
        return (*keys, *[v for _, v in self.written], *([self.factory] if self.factory is not None else []))

    # ---- one key at a time ----------------------------------------------------------------------
    def _lookup(self, frame, key: Value):
        """The entry for `key` (a value), None when absent, reading the real dict under a guard."""
        k = hashable_key(key)
        if k in self.entries:
            return self.entries[k]
        real_key, key_source = self._real_key(frame, key, k)
        found = real_key is not _FRESH and real_key in self.real
        if real_key is not _FRESH:
            frame.tracer.add_guard(KeyInMatch(self.source, key_source, None if key_source else real_key, found))
        value = frame.wrap(self.real[real_key], KeyedItemSource(self.source, key_source, real_key if key_source is None
                                                                else None)) if found else None
        self.entries[k] = value
        return value

    def _real_key(self, frame, key: Value, k):
        """(the real key object, the source guards reach it by); _FRESH for an object made while
        tracing, which no existing dict holds."""
        if not isinstance(k, IdentityKey):
            if not is_key_constant(k):
                raise Unsupported(UNSUPPORTED_VALUE, "a dict keyed by objects, indexed by a key without a source")
            return k, None
        if key.source is None:
            if getattr(key, "node", None) is not None and key.node.op != "placeholder":
                return _FRESH, None           # a tensor the graph computes
            raise Unsupported(UNSUPPORTED_VALUE, "a dict keyed by objects, indexed by a key without a source")
        node = getattr(key, "node", None)
        real = frame.tracer.graph.real_input(node) if node is not None else key.real_object()
        if real is None:
            raise Unsupported(UNSUPPORTED_VALUE, "a dict keyed by objects, indexed by a key without a source")
        return real, key.source

    def getitem(self, frame, key):
        value = self._lookup(frame, key)
        if value is not None:
            return value
        factory = self._factory(frame)
        if factory is None:
            raise key_error(hashable_key(key))
        value = factory.call(frame, [], {})
        self.setitem(frame, key, value)
        return value

    def _factory(self, frame):
        if type(self.real) is not defaultdict or self.real.default_factory is None:
            return None
        if self.factory is None:
            self.factory = frame.wrap(self.real.default_factory, AttrSource(self.source, "default_factory"))
        return self.factory

    def setitem(self, frame, key, value):
        if self._lookup(frame, key) is None:
            self.added += 1
        self.entries[hashable_key(key)] = value
        self.written.append((key, value))
        frame.tracer.mutate(self)

    def contains(self, frame, item):
        return self._lookup(frame, item) is not None

    def length(self, frame):
        frame.tracer.add_guard(LengthMatch(self.source, type(self.real), len(self.real)))
        return Const(len(self.real) + self.added)

    def truthy(self, frame):
        return self.length(frame).value > 0

    # ---- methods ----------------------------------------------------------------------------------
    def load_attr(self, frame, name):
        if name in _METHODS:
            return MethodValue(self, name)
        if name == "default_factory" and type(self.real) is defaultdict:
            return self._factory(frame) or Const(None)
        raise Unsupported(UNSUPPORTED_VALUE, f"{type(self.real).__name__}.{name} of a dict keyed by objects")

    def call_method(self, frame, method, args, kwargs):
        name = method if isinstance(method, str) else getattr(method, "__name__", "")
        handler = _METHODS.get(name)
        if handler is None or kwargs:
            raise Unsupported(UNSUPPORTED_VALUE, f"{type(self.real).__name__}.{name} of a dict keyed by objects")
        return handler(frame, self, *args)

    def replace_contents(self, em) -> None:
        """Give the real dict the entries this trace wrote, in order."""
        setitem = type(self.real).__setitem__
        for key, value in self.written:
            em.call_const(setitem, [lambda: em.load_source(self.source), lambda k=key: em.value(k),
                                    lambda v=value: em.value(v)])
            em.emit("POP_TOP")


class _Fresh:
    def __repr__(self):
        return "<made while tracing>"


_FRESH = _Fresh()


def _get(frame, d, key, default=None):
    value = d._lookup(frame, key)
    return value if value is not None else (default if default is not None else Const(None))


def _setitem(frame, d, key, value):
    d.setitem(frame, key, value)
    return Const(None)


_METHODS = {
    "__getitem__": lambda frame, d, key: d.getitem(frame, key),
    "__setitem__": _setitem,
    "__contains__": lambda frame, d, key: Const(d.contains(frame, key)),
    "get": _get,
}
