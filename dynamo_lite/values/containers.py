"""Python containers whose contents the tracer follows item by item: tuples, lists, namedtuples
and torch.Size (`SeqValue`), dicts and OrderedDicts (`DictValue`), sets and frozensets
(`SetValue`).

Each has its methods as a table of name -> function, indexing, iteration, operators and its
rebuild. A container that exists outside the frame (it has a source) and changes is recorded on
the tracer (`frame.tracer.mutate`): generated code gives the real container its new contents
after the graph ran.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch

from ..breaks import (TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_VALUE,
                      TracedException, Unsupported, user_error)
from ..pyops import plain
from ..semantics import binary, sort
from ..runtime import dict_view
from .base import Const, IteratorValue, MethodValue, Value, equal_only_if_identical, fold, is_const, is_same, kind_name


def _method_name(method) -> str:
    return method if isinstance(method, str) else getattr(method, "__name__", "")


class _Container(Value):
    """What the three share: a class, items, methods from a table, identity of their own."""
    __slots__ = ("items", "cls")
    METHODS: dict[str, Callable] = {}

    def python_type(self):
        return self.cls

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return len(self.items) > 0

    def length(self, frame):
        return Const(len(self.items))

    def load_attr(self, frame, name):
        if name in self.METHODS or callable(getattr(self.cls, name, None)):
            return MethodValue(self, name)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{self.cls.__name__}.{name}")

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        handler = self.METHODS.get(name)
        if handler is None:
            return super().call_method(frame, method, args, kwargs)
        return handler(frame, self, args, kwargs)


# ============================================================================================
# tuple, list, namedtuple, torch.Size
# ============================================================================================

class SeqValue(_Container):
    """tuple, list, namedtuple or torch.Size-like sequence of values. `cls` is the Python type."""
    __slots__ = ()

    def __init__(self, items: list, cls: type = tuple, source=None):
        super().__init__(source)
        self.items = list(items)
        self.cls = cls

    @property
    def is_list(self) -> bool:
        return issubclass(self.cls, list)

    def identity(self):
        if not self.is_list and self.source is None:
            return None             # a tuple made here: its identity is an implementation detail
        return id(self)

    def as_python(self):
        items = [i.as_python() for i in self.items]
        if self.cls in (tuple, list):
            return self.cls(items)
        if hasattr(self.cls, "_make"):
            return self.cls._make(items)
        return self.cls(items)

    def graph_arg(self):
        pairs = [i.graph_arg() for i in self.items]
        kind = list if self.is_list else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)

    def children(self):
        return tuple(self.items)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        elif self.cls is list:
            em.build_list(self.items)
        elif self.cls is tuple:
            em.build_tuple(self.items)
        else:
            make = getattr(self.cls, "_make", None) or self.cls
            em.call_const(make, [lambda: em.build_tuple(self.items)])

    def load_attr(self, frame, name):
        fields = field_names(self.cls)
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields" and fields:
            return Const(fields)
        return super().load_attr(frame, name)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if self.is_list and name in _LIST_METHODS:
            return _LIST_METHODS[name](frame, self, args, kwargs)
        if name == "numel" and self.cls is not torch.Size:
            raise Unsupported(UNKNOWN_CALL, f"{self.cls.__name__}.{name}")
        return super().call_method(frame, method, args, kwargs)

    def unpack(self, frame):
        return list(self.items)

    def get_iter(self, frame):
        # over the live items: a loop sees what is appended to a list while it runs, as in eager
        return IteratorValue.sharing(self.items, type(iter([])) if self.is_list else type(iter(())))

    def getitem(self, frame, key):
        k = key.as_python()
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise Unsupported(UNSUPPORTED_VALUE, f"sequence index of type {type(k).__name__}")
        if isinstance(k, slice):
            return SeqValue(self.items[k], self.cls if self.cls in (list, tuple, torch.Size) else tuple)
        if not -len(self.items) <= k < len(self.items):
            raise user_error(IndexError, f"{self.cls.__name__} index out of range")
        return self.items[k]

    def setitem(self, frame, key, value):
        if not self.is_list:
            return super().setitem(frame, key, value)
        k = key.as_python()
        frame.tracer.mutate(self)
        if isinstance(k, slice):
            self.items[k] = value.unpack(frame)
        else:
            if not isinstance(k, int) or not -len(self.items) <= k < len(self.items):
                raise user_error(IndexError, "list assignment index out of range")
            self.items[k] = value

    def delitem(self, frame, key):
        if not self.is_list:
            return super().delitem(frame, key)
        k = key.as_python()
        if isinstance(k, int) and not -len(self.items) <= k < len(self.items):
            raise user_error(IndexError, "list assignment index out of range")
        frame.tracer.mutate(self)
        del self.items[k]

    def contains(self, frame, item):
        return sequence_contains(self.items, item)

    def binary(self, frame, fn, other):
        op = plain(fn)
        other = _as_sequence(other)
        if op is operator.add and isinstance(other, SeqValue):
            if self.is_list and fn is operator.iadd:
                if not other.is_list and not issubclass(other.cls, tuple):
                    raise Unsupported(UNSUPPORTED_VALUE, "list += non-sequence")
                frame.tracer.mutate(self)
                self.items.extend(other.items)
                return self
            if self.is_list != other.is_list:
                raise user_error(TypeError, "can only concatenate list to list / tuple to tuple")
            return SeqValue(self.items + other.items, list if self.is_list else tuple)
        if self.is_list and fn is operator.iadd:
            frame.tracer.mutate(self)
            self.items.extend(other.unpack(frame))
            return self
        if op is operator.mul and isinstance(other, Const) and isinstance(other.value, int):
            if self.is_list and fn is operator.imul:
                frame.tracer.mutate(self)
                self.items[:] = self.items * other.value
                return self
            return SeqValue(self.items * other.value, list if self.is_list else tuple)
        return _fold_constants(fn, self, other)

    def rbinary(self, frame, fn, other):
        op = plain(fn)
        other = _as_sequence(other)
        if op is operator.add and isinstance(other, SeqValue):
            return other.binary(frame, op, self)
        if op is operator.mul and isinstance(other, Const) and isinstance(other.value, int):
            return SeqValue(self.items * other.value, list if self.is_list else tuple)
        return _fold_constants(fn, other, self)

    def compare(self, frame, fn, other):
        return _fold_constants(fn, self, other)


def field_names(cls) -> tuple:
    return tuple(getattr(cls, "_fields", None) or getattr(cls, "__match_args__", None) or ())


def _as_sequence(v: Value) -> Value:
    """`acc + (x,)` with `acc = ()`: a tuple/list constant next to a sequence value becomes one."""
    if isinstance(v, Const) and type(v.value) in (tuple, list):
        return SeqValue([Const(i) for i in v.value], type(v.value))
    return v


def _fold_constants(fn, a: Value, b: Value):
    if a.is_python_constant() and b.is_python_constant():
        return Const(fold(plain(fn), a.as_python(), b.as_python()))
    return NotImplemented


def sequence_contains(items: list, item: Value) -> bool:
    """`item in items` as Python decides it: identity first, then ==, where == can be decided."""
    for x in items:
        same = is_same(x, item)
        if same:
            return True
        if x.is_graph_value or item.is_graph_value:
            other = item if x.is_graph_value else x
            if same is False and not other.is_graph_value and _never_equals_a_tensor(other):
                continue
            raise Unsupported(TENSOR_TO_PYTHON, "`in` compares tensors by value")
        if x.is_python_constant() and item.is_python_constant():
            if x.as_python() == item.as_python():
                return True
            continue
        if same is None or not equal_only_if_identical(x, item):
            raise Unsupported(UNSUPPORTED_VALUE, f"`in` compares {kind_name(item)} with {kind_name(x)} by __eq__")
    return False


def _never_equals_a_tensor(v: Value) -> bool:
    """Is `tensor == v` False without running code (None, strings, objects with identity
    equality)? Against a number (or an array) it is a tensor, whose truth depends on its data."""
    if isinstance(v, Const):
        return not isinstance(v.value, (int, float, complex))
    cls = v.python_type()
    return cls.__eq__ is object.__eq__ and not hasattr(cls, "__array__")


def _list_append(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.append(args[0])
    return Const(None)


def _list_extend(frame, obj, args, kwargs):
    new = args[0].unpack(frame)
    frame.tracer.mutate(obj)
    obj.items.extend(new)
    return Const(None)


def _list_insert(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.insert(args[0].as_python(), args[1])
    return Const(None)


def _list_pop(frame, obj, args, kwargs):
    if not obj.items:
        raise user_error(IndexError, "pop from empty list")
    index = args[0].as_python() if args else -1
    if not -len(obj.items) <= index < len(obj.items):
        raise user_error(IndexError, "pop index out of range")
    frame.tracer.mutate(obj)
    return obj.items.pop(index)


def _list_clear(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.clear()
    return Const(None)


def _list_reverse(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.reverse()
    return Const(None)


def _list_remove(frame, obj, args, kwargs):
    for i, x in enumerate(obj.items):
        if sequence_contains([x], args[0]):
            frame.tracer.mutate(obj)
            del obj.items[i]
            return Const(None)
    raise user_error(ValueError, "list.remove(x): x not in list")


def _list_sort(frame, obj, args, kwargs):
    if args or set(kwargs) - {"key", "reverse"}:
        fold([].sort, *args, **{k: None for k in kwargs})        # eager's TypeError
    key = kwargs.get("key")
    reverse = kwargs["reverse"].as_python() if "reverse" in kwargs else False
    fold([].sort, reverse=reverse)                              # a reverse that is not an integer
    key = None if key is None or is_const(key, type(None)) else key
    frame.tracer.mutate(obj)
    sort(frame, obj.items, key, bool(reverse), in_place=True)
    return Const(None)


def _seq_copy(frame, obj, args, kwargs):
    return SeqValue(list(obj.items), list)


def _seq_getitem(frame, obj, args, kwargs):
    return obj.getitem(frame, args[0])


def _seq_len(frame, obj, args, kwargs):
    return Const(len(obj.items))


def _size_numel(frame, obj, args, kwargs):
    """numel() of a Size with symbolic entries."""
    total: Value = Const(1)
    for item in obj.items:
        total = binary(frame, operator.mul, total, item)
    return total


def _asdict(frame, obj, args, kwargs):
    return DictValue(dict(zip(obj.cls._fields, obj.items)), dict)


def _replace(frame, obj, args, kwargs):
    fields = list(obj.cls._fields)
    items = list(obj.items)
    for k, v in kwargs.items():
        if k not in fields:
            raise user_error(ValueError, f"Got unexpected field names: {[k]!r}")
        items[fields.index(k)] = v
    return SeqValue(items, obj.cls)


def _seq_index_count(name):
    def method(frame, obj, args, kwargs):
        matches = [i for i, x in enumerate(obj.items) if sequence_contains([x], args[0])]
        if name == "count":
            return Const(len(matches))
        if not matches:
            raise user_error(ValueError, f"{args[0].as_python()!r} is not in {obj.cls.__name__}"
                             if args[0].is_python_constant() else "value is not in list")
        return Const(matches[0])
    return method


SeqValue.METHODS = {
    "__getitem__": _seq_getitem, "__len__": _seq_len, "index": _seq_index_count("index"),
    "count": _seq_index_count("count"), "_asdict": _asdict, "_replace": _replace, "numel": _size_numel,
}
_LIST_METHODS = {
    "append": _list_append, "extend": _list_extend, "insert": _list_insert, "pop": _list_pop, "clear": _list_clear,
    "reverse": _list_reverse, "remove": _list_remove, "sort": _list_sort, "copy": _seq_copy,
}




# ============================================================================================
# dict, OrderedDict
# ============================================================================================

class DictValue(_Container):
    """dict / OrderedDict with constant keys; `items` maps real keys to values."""
    __slots__ = ()

    def __init__(self, items: dict, cls: type = dict, source=None):
        super().__init__(source)
        self.items = dict(items)
        self.cls = cls

    def as_python(self):
        return self.cls((k, v.as_python()) for k, v in self.items.items())

    def graph_arg(self):
        pairs = {k: v.graph_arg() for k, v in self.items.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}

    def children(self):
        return tuple(self.items.values())

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.check_escapes(self)
        em.build_map(self.items)
        if self.cls is not dict:
            em.convert_top(self.cls)

    def unpack(self, frame):
        return [Const(k) for k in self.items]

    def get_iter(self, frame):
        # over the live keys: a dict that changes size while a loop runs over it is an error, as in eager
        return DictIteratorValue(DictViewValue(self, "keys", self.items))

    def as_mapping(self, frame):
        return dict(self.items)

    def getitem(self, frame, key):
        k = _key(key)
        if k not in self.items:
            raise user_error(KeyError, k)
        return self.items[k]

    def setitem(self, frame, key, value):
        k = _key(key)
        frame.tracer.mutate(self)
        self.items[k] = value

    def delitem(self, frame, key):
        k = _key(key)
        if k not in self.items:
            raise user_error(KeyError, k)
        frame.tracer.mutate(self)
        del self.items[k]

    def contains(self, frame, item):
        return _key(item) in self.items

    def binary(self, frame, fn, other):
        if plain(fn) is operator.or_ and isinstance(other, DictValue):
            if fn is operator.ior:
                frame.tracer.mutate(self)
                self.items.update(other.items)
                return self
            return DictValue({**self.items, **other.items}, self.cls)
        return _fold_constants(fn, self, other)

    def compare(self, frame, fn, other):
        return _fold_constants(fn, self, other)


def _key(v: Value):
    key = v.as_python()
    try:
        hash(key)
    except TypeError as e:
        raise TracedException(e) from None
    return key


def _dict_view(kind):
    def method(frame, obj, args, kwargs):
        return DictViewValue(obj, kind, obj.items)
    return method


_dict_keys, _dict_values, _dict_items = _dict_view("keys"), _dict_view("values"), _dict_view("items")


def _dict_get(frame, obj, args, kwargs):
    return obj.items.get(_key(args[0]), args[1] if len(args) > 1 else Const(None))


def _dict_getitem(frame, obj, args, kwargs):
    return obj.getitem(frame, args[0])


def _dict_setitem(frame, obj, args, kwargs):
    obj.setitem(frame, args[0], args[1])
    return Const(None)


def _dict_contains(frame, obj, args, kwargs):
    return Const(obj.contains(frame, args[0]))


def _dict_copy(frame, obj, args, kwargs):
    return DictValue(dict(obj.items), obj.cls)


def _dict_update(frame, obj, args, kwargs):
    new: dict = {}
    if args:
        other = args[0]
        if isinstance(other, DictValue):
            new.update(other.items)
        else:
            for pair in other.unpack(frame):
                k, v = pair.unpack(frame)
                new[_key(k)] = v
    new.update(kwargs)
    frame.tracer.mutate(obj)
    obj.items.update(new)
    return Const(None)


def _dict_setdefault(frame, obj, args, kwargs):
    key = _key(args[0])
    if key not in obj.items:
        frame.tracer.mutate(obj)
        obj.items[key] = args[1] if len(args) > 1 else Const(None)
    return obj.items[key]


def _dict_pop(frame, obj, args, kwargs):
    key = _key(args[0])
    if key in obj.items:
        frame.tracer.mutate(obj)
        return obj.items.pop(key)
    if len(args) > 1:
        return args[1]
    raise user_error(KeyError, key)


def _dict_clear(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.clear()
    return Const(None)


DictValue.METHODS = {
    "keys": _dict_keys, "values": _dict_values, "items": _dict_items, "get": _dict_get, "__getitem__": _dict_getitem,
    "__setitem__": _dict_setitem, "__contains__": _dict_contains, "copy": _dict_copy, "update": _dict_update,
    "setdefault": _dict_setdefault, "pop": _dict_pop, "clear": _dict_clear,
}


class DictViewValue(Value):
    """`d.keys()`, `d.values()`, `d.items()`: live on the dict's contents (`items`, the very dict
    the owner's value changes in place), so changes after the view was taken are seen."""
    __slots__ = ("owner", "kind", "items")

    def __init__(self, owner: Value, kind: str, items: dict, source=None):
        super().__init__(source)
        self.owner, self.kind, self.items = owner, kind, items

    def python_type(self):
        return type(getattr({}, self.kind)())

    def identity(self):
        return id(self)

    def children(self):
        return (self.owner,)

    def elements(self) -> list:
        if self.kind == "keys":
            return [Const(k) for k in self.items]
        if self.kind == "values":
            return list(self.items.values())
        return [SeqValue([Const(k), v], tuple) for k, v in self.items.items()]

    def unpack(self, frame):
        return self.elements()

    def get_iter(self, frame):
        return DictIteratorValue(self)

    def length(self, frame):
        return Const(len(self.items))

    def truthy(self, frame):
        return len(self.items) > 0

    def contains(self, frame, item):
        if self.kind == "keys":
            return _key(item) in self.items
        if self.kind == "items":
            key, value = item.unpack(frame)
            k = _key(key)
            return k in self.items and sequence_contains([self.items[k]], value)
        return sequence_contains(self.elements(), item)

    def as_python(self):
        if self.kind == "values":
            return super().as_python()
        return set(e.as_python() for e in self.elements())

    def binary(self, frame, fn, other):
        if self.kind != "values" and plain(fn) in (operator.and_, operator.or_, operator.sub, operator.xor):
            mine = set(self.as_python())
            theirs = set(other.as_python()) if not isinstance(other, DictViewValue) else other.as_python()
            return SetValue([Const(v) for v in fold(plain(fn), mine, theirs)], set)
        return NotImplemented

    def rbinary(self, frame, fn, other):
        if self.kind != "values" and plain(fn) in (operator.and_, operator.or_, operator.sub, operator.xor):
            return SetValue([Const(v) for v in fold(plain(fn), set(other.as_python()), self.as_python())], set)
        return NotImplemented

    def compare(self, frame, fn, other):
        if self.kind != "values" and other.is_python_constant():
            theirs = other.as_python()
            theirs = set(theirs) if isinstance(theirs, (set, frozenset, type({}.keys()), type({}.items()))) else theirs
            return Const(fold(fn, self.as_python(), theirs))
        return NotImplemented

    def load_attr(self, frame, name):
        if name == "mapping":
            return self.owner
        if name in ("isdisjoint", "__reversed__", "__len__", "__contains__", "__iter__"):
            return MethodValue(self, name)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"dict view.{name}")

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if name == "isdisjoint":
            return Const(not (set(self.as_python()) & set(args[0].as_python())))
        if name == "__reversed__":
            return IteratorValue(list(reversed(self.elements())))
        if name == "__len__":
            return self.length(frame)
        if name == "__contains__":
            return Const(self.contains(frame, args[0]))
        if name == "__iter__":
            return self.get_iter(frame)
        return super().call_method(frame, method, args, kwargs)

    def rebuild(self, em):
        em.call_const(dict_view, [lambda: em.value(self.owner), lambda: em.const(self.kind)])


class DictIteratorValue(Value):
    """An iterator over a dict view, reading the dict as it is now at each step (a dict that
    changes size meanwhile is an error, as in Python)."""
    __slots__ = ("view", "pos", "size")

    def __init__(self, view: DictViewValue, source=None):
        super().__init__(source)
        self.view, self.pos, self.size = view, 0, len(view.items)

    def python_type(self):
        return type(iter({}.keys()))

    def identity(self):
        return id(self)

    def get_iter(self, frame):
        return self

    def next(self, frame):
        if len(self.view.items) != self.size:
            self.size = -1                  # stays broken, as CPython's does
            raise user_error(RuntimeError, "dictionary changed size during iteration")
        elements = self.view.elements()
        if self.pos >= len(elements):
            return None
        self.pos += 1
        return elements[self.pos - 1]

    def unpack(self, frame):
        items = []
        while (item := self.next(frame)) is not None:
            items.append(item)
        return items

    def children(self):
        return (self.view,)

    def rebuild(self, em):
        rest = self.view.elements()[self.pos:]
        em.call_const(iter, [lambda: em.build_tuple(rest)])


# ============================================================================================
# set, frozenset
# ============================================================================================

class SetValue(_Container):
    """set / frozenset of constants."""
    __slots__ = ()

    def __init__(self, items, cls: type = set, source=None):
        super().__init__(source)
        self.items = list(dict.fromkeys(items))
        self.cls = cls

    def as_python(self):
        return self.cls(i.as_python() for i in self.items)

    def children(self):
        return tuple(self.items)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.build_set(self.items)
        if self.cls is frozenset:
            em.convert_top(frozenset)

    def unpack(self, frame):
        return list(self.items)

    def contains(self, frame, item):
        return sequence_contains(self.items, item)

    def binary(self, frame, fn, other):
        op = plain(fn)
        if isinstance(other, SetValue) and op in (operator.or_, operator.and_, operator.sub, operator.xor):
            return SetValue([Const(v) for v in op(set(self.as_python()), set(other.as_python()))], self.cls)
        return _fold_constants(fn, self, other)

    def compare(self, frame, fn, other):
        return _fold_constants(fn, self, other)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        values = [i.as_python() for i in self.items]
        if name in ("add", "update", "discard", "remove", "clear", "pop"):
            if self.cls is frozenset:
                raise user_error(AttributeError, f"'frozenset' object has no attribute {name!r}")
            frame.tracer.mutate(self)
            real = set(values)
            arguments = [set(a.as_python()) if name == "update" else a.as_python() for a in args]
            result = fold(getattr(real, name), *arguments)
            self.items = [Const(v) for v in dict.fromkeys(values) if v in real] + \
                [Const(v) for v in real if v not in values]
            return Const(result)
        if name in ("__len__",):
            return Const(len(self.items))
        result = fold(getattr(self.cls(values), name), *[a.as_python() for a in args])
        if isinstance(result, (set, frozenset)):
            return SetValue([Const(v) for v in result], type(result))
        return Const(result)

