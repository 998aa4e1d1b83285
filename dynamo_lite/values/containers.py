"""Python containers whose contents the tracer follows item by item: tuples, lists, namedtuples
and torch.Size (`SeqValue`), dicts and OrderedDicts (`DictValue`, with their views), sets and
frozensets (`SetValue`), and the iterators over them.

Each has its methods as a table of name -> function, indexing, iteration, operators and its
rebuild. A container that exists outside the frame (it has a source) and changes is recorded on
the tracer (`frame.tracer.mutate`): generated code gives the real container its new contents
after the graph ran (`replace_contents`).

Dict keys and set elements are the real hashable objects (constants, classes, functions, tuples
of them), kept in a real dict / set that goes through the same operations as the program's: its
order, and the errors of its iterators when it changes size, are CPython's own. Values that hash
by identity (tensors, objects) are not modelled as keys or elements (Unsupported).
"""
from __future__ import annotations

import functools
import inspect
import operator
import sys
import types
from collections import OrderedDict, deque, namedtuple
from typing import Callable

import torch

from ..breaks import (TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_VALUE,
                      TracedException, Unsupported, user_error)
from ..guards import DictKeysMatch, MembershipMatch
from ..modelled import models_family
from ..pyops import plain
from ..runtime import dict_view, replace_contents
from ..semantics import binary, load_attr, setitem, sort
from ..sources import ObjectRefSource
from .base import (HEAPTYPE, Const, IteratorValue, MethodValue, SelfIterator, Value, attribute_not_modelled,
                   equal_only_if_identical, fold, is_const, is_constant, is_same, kind_name)


def _method_name(method) -> str:
    return method if isinstance(method, str) else getattr(method, "__name__", "")


class ContainerValue(Value):
    """What containers share: a class, items, methods from a table (a Python method of a subclass
    is inlined instead), identity of their own."""
    __slots__ = ("items", "cls")
    METHODS: dict[str, Callable] = {}
    KEYWORDS: frozenset = frozenset()          # the methods of the table that take keyword arguments

    def python_type(self):
        return self.cls

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return len(self.items) > 0

    def length(self, frame):
        return Const(len(self.items))

    def load_attr(self, frame, name):
        if not hasattr(self.cls, name):         # the class is guarded: so is its missing attribute
            raise user_error(AttributeError, f"'{self.cls.__name__}' object has no attribute {name!r}")
        if name in self.METHODS or callable(getattr(self.cls, name)):
            return MethodValue(self, name)
        raise attribute_not_modelled(self, name)

    def call_method(self, frame, method, args, kwargs):
        if isinstance(method, types.FunctionType):
            return super().call_method(frame, method, args, kwargs)
        owner = getattr(method, "__objclass__", None)
        if owner is not None and not issubclass(self.python_type(), owner):
            raise Unsupported(UNKNOWN_CALL, f"{owner.__name__}.{method.__name__} on a {self.python_type().__name__}")
        handler = self.METHODS.get(_method_name(method))
        if handler is None:
            return super().call_method(frame, method, args, kwargs)
        self.check_keywords(_method_name(method), kwargs)
        return handler(frame, self, args, kwargs)

    def check_keywords(self, name: str, kwargs: dict) -> None:
        if kwargs and name not in self.KEYWORDS:
            raise user_error(TypeError, f"{self.cls.__name__}.{name}() takes no keyword arguments")

    def replace_contents(self, em) -> None:
        """Emit code giving the real container (it has a source) the contents the trace left it with."""
        raise Unsupported(UNSUPPORTED_VALUE, f"replaying changes to a {self.cls.__name__}")


# ============================================================================================
# tuple, list, namedtuple, torch.Size
# ============================================================================================

class SeqValue(ContainerValue):
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

    def replace_contents(self, em):
        if not self.is_list:
            return super().replace_contents(em)
        em.build_list(self.items)
        em.load_source(self.source)
        em.const(slice(None))
        em.emit("STORE_SUBSCR")

    def append_item(self, value: Value) -> None:
        """`lst.append(value)` / LIST_APPEND: the caller records the change (tracer.mutate)."""
        self.items.append(value)

    def extend_items(self, values: list) -> None:
        self.items.extend(values)

    def load_attr(self, frame, name):
        fields = field_names(self.cls)
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields" and fields:
            return Const(fields)
        if self.cls in (tuple, list, torch.Size):
            return super().load_attr(frame, name)
        return self._class_attribute(frame, name)

    def _class_attribute(self, frame, name):
        """An attribute a namedtuple (sub)class defines: its methods and properties run as written
        (the helpers namedtuple generates are modelled by name), other attributes are read from
        the class, guarded."""
        attr = inspect.getattr_static(self.cls, name, None)
        if isinstance(attr, types.FunctionType) and attr.__code__ not in NAMEDTUPLE_CODES:
            return MethodValue(self, attr)
        if isinstance(attr, property) and attr.fget is not None:
            return frame.wrap(attr.fget, None).call(frame, [self], {})
        if isinstance(attr, (classmethod, staticmethod)) or not callable(attr) and attr is not None:
            return frame.wrap(self.cls, ObjectRefSource(self.cls)).load_attr(frame, name)
        return super().load_attr(frame, name)

    def get_iter(self, frame):
        return ListIteratorValue(self) if self.is_list else NotImplemented

    def call(self, frame, args, kwargs):
        method = inspect.getattr_static(self.cls, "__call__", None)
        if isinstance(method, types.FunctionType):                # a subclass's own __call__
            return MethodValue(self, method).call(frame, args, kwargs)
        return super().call(frame, args, kwargs)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if self.is_list and name in _LIST_METHODS and not isinstance(method, types.FunctionType):
            self.check_keywords(name, kwargs)
            return _LIST_METHODS[name](frame, self, args, kwargs)
        if name == "numel" and self.cls is not torch.Size:
            raise Unsupported(UNKNOWN_CALL, f"{self.cls.__name__}.{name}")
        return super().call_method(frame, method, args, kwargs)

    def unpack(self, frame):
        return list(self.items)

    def getitem(self, frame, key):
        k = key.as_python()
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise Unsupported(UNSUPPORTED_VALUE, f"sequence index of type {type(k).__name__}")
        if isinstance(k, slice):
            return SeqValue(self.items[k], self.cls if self.cls in (list, tuple, torch.Size) else
                            list if self.is_list else tuple)
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


class LazyListValue(SeqValue):
    """A list from the program (it has a source) whose contents this trace has not read: code that
    only appends to it -- a comprehension's list arriving at the resume function of a break inside
    the comprehension, a loop's accumulator (`outs.append(y)`) -- neither guards its length nor
    reads its items, so the next iteration's stretch reuses the graph; the appends are replayed
    with `extend`. The first read makes it an ordinary list value: `materialize()` installs the
    guards and wraps the items exactly as `wrap` does for any list, and the appends follow them."""
    __slots__ = ("_contents", "_materialize", "_appended")

    def __init__(self, source, materialize: Callable[[], list]):
        Value.__init__(self, source)
        self.cls = list
        self._contents = None
        self._materialize = materialize
        self._appended = []

    @property
    def items(self) -> list:
        if self._contents is None:
            self._contents = self._materialize() + self._appended
            self._appended = None
        return self._contents

    @items.setter
    def items(self, values) -> None:
        self._contents = list(values)

    @property
    def read(self) -> bool:
        return self._contents is not None

    def append_item(self, value: Value) -> None:
        if self.read:
            self._contents.append(value)
        else:
            self._appended.append(value)

    def extend_items(self, values: list) -> None:
        if self.read:
            self._contents.extend(values)
        else:
            self._appended.extend(values)

    def children(self):
        return tuple(self.items) if self.read else tuple(self._appended)

    def replace_contents(self, em):
        if self.read:
            return super().replace_contents(em)
        em.call_const(list.extend, [lambda: em.load_source(self.source), lambda: em.build_list(self._appended)])
        em.emit("POP_TOP")


# What a class body holds besides its attributes (never an override of list's behaviour).
_CLASS_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                                "__annotations__", "__firstlineno__", "__static_attributes__", "__orig_bases__",
                                "__parameters__"})


def is_plain_list_subclass(cls) -> bool:
    """A Python subclass of list that adds methods and properties but overrides nothing list does
    (no __init__, __getitem__, append..., no slots, no metaclass): its instances behave as lists in
    every list operation, so they are modelled as lists of that class (transformers'
    LogitsProcessorList: a list with a __call__)."""
    if not isinstance(cls, type) or type(cls) is not type or not issubclass(cls, list) or cls is list:
        return False
    for klass in cls.__mro__[:cls.__mro__.index(list)]:
        if not klass.__flags__ & HEAPTYPE or klass.__dict__.get("__slots__"):
            return False
        if (set(vars(klass)) - _CLASS_BOOKKEEPING) & set(vars(list)):
            return False
    return True


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
    obj.append_item(args[0])
    return Const(None)


def _list_extend(frame, obj, args, kwargs):
    new = args[0].unpack(frame)
    frame.tracer.mutate(obj)
    obj.extend_items(new)
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


def _seq_reversed(frame, obj, args, kwargs):
    return IteratorValue(list(reversed(obj.items)))


SeqValue.KEYWORDS = frozenset({"sort", "_replace"})
SeqValue.METHODS = {
    "__getitem__": _seq_getitem, "__len__": _seq_len, "index": _seq_index_count("index"),
    "count": _seq_index_count("count"), "_asdict": _asdict, "_replace": _replace, "numel": _size_numel,
    "__reversed__": _seq_reversed,
}

# The code of the methods namedtuple() generates (the same code object for every class): they are
# modelled by name (SeqValue.METHODS, stdlib_collections), not inlined.
_SAMPLE = namedtuple("_Sample", "a")
NAMEDTUPLE_CODES = frozenset(f.__code__ for f in (_SAMPLE._make.__func__, _SAMPLE._replace, _SAMPLE._asdict,
                                                  _SAMPLE.__repr__, _SAMPLE.__getnewargs__))
_LIST_METHODS = {
    "append": _list_append, "extend": _list_extend, "insert": _list_insert, "pop": _list_pop, "clear": _list_clear,
    "reverse": _list_reverse, "remove": _list_remove, "sort": _list_sort, "copy": _seq_copy,
}


# ============================================================================================
# keys: the real hashable objects dicts and sets hold
# ============================================================================================

def hashable_key(v: Value):
    """The real object a value stands for as a dict key or set element: a constant, a class, a
    function, or a tuple / frozenset of them (Python's TypeError for an unhashable one); an
    existing object hashed by identity is itself (pinned), so it finds its entry in a real dict;
    a tensor or an object made while tracing is an `IdentityKey`."""
    try:
        key = v.as_python()
    except Unsupported:
        if not _hashes_by_identity(v):
            raise
        real = v.key_object()
        return IdentityKey(v) if real is None else real
    try:
        hash(key)
    except TypeError as e:
        raise TracedException(e) from None
    return key


class IdentityKey:
    """Stands for a tensor or an object hashed and compared by identity (nn.Module, a plain
    instance) in a real dict or set: equal only to itself. Dicts keep such keys in insertion
    order, as in eager; a set's order depends on addresses, so iterating a set of them is refused.
    It never leaves the tracer: real values of containers holding one are Unsupported."""
    __slots__ = ("value", "ident")

    def __init__(self, value: Value):
        self.value, self.ident = value, value.identity()

    def __hash__(self):
        return hash(self.ident)

    def __eq__(self, other):
        return isinstance(other, IdentityKey) and other.ident == self.ident

    def __repr__(self):
        return f"<{kind_name(self.value)} key>"


def _hashes_by_identity(v: Value) -> bool:
    cls = v.python_type()
    if v.identity() is None:
        return False
    if issubclass(cls, torch.Tensor):
        return cls.__hash__ is torch.Tensor.__hash__        # id(self): distinct tensors never compare
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


def plain_keys(keys):
    """`keys` when they are all real Python objects (no IdentityKey), for a container's real value."""
    if any(isinstance(k, IdentityKey) for k in keys):
        raise Unsupported(UNSUPPORTED_VALUE, "the Python value of a container keyed by tensors or objects")
    return keys


def key_error(key) -> Unsupported:
    """The KeyError eager raises for a missing key (Unsupported for a tensor or object key, whose
    real object the message would hold)."""
    if isinstance(key, IdentityKey):
        return Unsupported(UNSUPPORTED_VALUE, "KeyError for a key hashed by identity")
    return user_error(KeyError, key)


def emit_key(em, key) -> None:
    """Push a key or element in generated code."""
    if isinstance(key, IdentityKey):
        em.value(key.value)
    else:
        em.const(key)


def emit_map(em, items: dict) -> None:
    """Push a new plain dict with these keys and values."""
    for k, v in items.items():
        emit_key(em, k)
        em.value(v)
    em.emit("BUILD_MAP", len(items))


_key = hashable_key


def is_key_constant(key) -> bool:
    """A key or element the tracer keeps as the real object: a constant, a class or function, an
    object hashed by identity (compared by identity), or a tuple / frozenset of them."""
    if is_constant(key):
        return True
    if isinstance(key, type):               # unless its metaclass compares classes otherwise
        return type(key).__eq__ is object.__eq__ and type(key).__hash__ is object.__hash__
    if isinstance(key, (types.FunctionType, types.BuiltinFunctionType)):
        return True
    if _singleton_like(key):
        return True
    return type(key) in (tuple, frozenset) and all(is_key_constant(k) for k in key)


def _singleton_like(key) -> bool:
    """An object compared and hashed by identity that is no tensor (typing.Union, sentinels,
    registry markers, modules): as a key, guarding the keys compares identities and runs no user
    code; the dict holding it keeps it alive anyway."""
    cls = type(key)
    return cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__ and not isinstance(key, torch.Tensor)


def guarded_keys(frame, source, real) -> tuple:
    """The keys of an existing dict / elements of an existing set, read under a guard on them (and
    their order); Unsupported when one is not a key constant."""
    keys = tuple(real)
    if not all(is_key_constant(k) for k in keys):
        raise Unsupported(UNSUPPORTED_VALUE, f"a {type(real).__name__} holding objects hashed by identity")
    frame.tracer.add_guard(DictKeysMatch(source, type(real), keys))
    return keys


def key_value(frame, key) -> Value:
    """The value of a key read back out of a dict or set (a class key is a class value again).
    Without a frame (rebuilding after the graph) a Const, which rebuilds any key as a constant."""
    if isinstance(key, IdentityKey):
        return key.value
    if frame is None or is_constant(key):
        return Const(key)
    return frame.wrap(key, None)


def real_operand(frame, v: Value):
    """The real object a set operation or a dict view operation gets for `v`: the key set of a
    set value, a real view, a dict of the same keys, or the real value; a sequence of values
    becomes the list of their keys."""
    if isinstance(v, SetValue):
        return v.keys(frame)
    if isinstance(v, DictViewValue):
        return v.real_view()
    if isinstance(v, DictValue):
        return dict.fromkeys(v.items)
    try:
        return v.as_python()
    except Unsupported:
        return [hashable_key(x) for x in v.unpack(frame)]


# ============================================================================================
# live iterators
# ============================================================================================

class LiveIteratorValue(SelfIterator):
    """`iter()` of a dict, dict view, set or deque the trace follows: a real iterator over the
    container's own contents (its real dict / set / deque of values), so it sees changes made
    meanwhile and raises CPython's own RuntimeError when the container changes size under it.
    `convert(frame, item)` turns what the real iterator yields into a value."""
    __slots__ = ("owner", "it", "convert")

    def __init__(self, owner: Value, it, convert: Callable, source=None):
        super().__init__(source)
        self.owner, self.it, self.convert = owner, it, convert

    def python_type(self):
        return type(iter(set())) if isinstance(self.it, _SnapshotSetIterator) else type(self.it)

    def next(self, frame):
        try:
            item = next(self.it)
        except StopIteration:
            return None
        except RuntimeError as e:          # "dictionary changed size during iteration" and the like
            raise TracedException(e) from None
        return self.convert(frame, item)

    def remaining(self) -> list:
        """What is left to iterate, without advancing (the real iterator's __reduce__ copies it)."""
        try:
            state = self.it.__reduce__()[1]
        except RuntimeError:
            raise Unsupported(UNSUPPORTED_VALUE, "an iterator over a container that changed size") from None
        if isinstance(state[0], deque):                 # deque iterators reduce to (deque, consumed)
            order = reversed(state[0]) if type(self.it) is _DEQUE_REVERSE_ITERATOR else state[0]
            return list(order)[state[1]:]
        return list(state[0])

    def children(self):
        return (self.owner, *[self.convert(None, x) for x in self.remaining()])

    def rebuild(self, em):
        rest = [self.convert(None, x) for x in self.remaining()]
        em.call_const(iter, [lambda: em.build_tuple(rest)])


_DEQUE_REVERSE_ITERATOR = type(reversed(deque()))


class ListIteratorValue(SelfIterator):
    """`iter(list)`: reads the list as it is at each step (items appended while looping are
    seen, as in Python)."""
    __slots__ = ("seq", "pos")

    def __init__(self, seq: SeqValue, source=None):
        super().__init__(source)
        self.seq, self.pos = seq, 0

    def python_type(self):
        return type(iter([]))

    def next(self, frame):
        if self.pos >= len(self.seq.items):
            self.pos = sys.maxsize            # exhausted for good, as CPython's
            return None
        self.pos += 1
        return self.seq.items[self.pos - 1]

    def children(self):
        return (self.seq,)

    def rebuild(self, em):
        pos = min(self.pos, sys.maxsize)
        em.call_const(list_iterator_at, [lambda: em.value(self.seq), lambda: em.const(pos)])
        if self.seq.source is not None and pos:
            # The list may be one the trace filled: its contents are replayed after this rebuild,
            # and an iterator's position cannot pass its list's end (__setstate__ clamps it).
            held = em.temporary()
            em.emit("COPY", 1)
            em.emit("STORE_FAST", held)

            def move_again():
                em.call_const(list_iterator_at, [lambda: em.emit("LOAD_FAST", held), lambda: em.const(pos)])
                em.emit("POP_TOP")
            em.after_effects(move_again)


class InputIteratorValue(SelfIterator):
    """An iterator over a list, tuple or range (or an enumerate / zip of such) that the frame was
    given (`runtime.reads_ahead`): a loop live across a graph
    break hands its iterator to the resume function, which would otherwise stop at the loop's
    next FOR_ITER. `ahead(j)` (wrap.py) wraps the item after the next j, read relative to where
    the iterator stands when the frame is called, and guards how many items are left only as far
    as the trace looked -- at least j + 1, or exactly j where it ran out -- never the position, so
    each iteration's stretch passes the same guards and reuses the graph. The real iterator is
    moved on by as many items as the trace took (`effects.IteratorMove`, replayed last)."""
    __slots__ = ("obj", "taken", "done", "ahead")

    def __init__(self, obj, source, ahead: Callable[[int], "Value | None"]):
        super().__init__(source)
        self.obj, self.taken, self.done, self.ahead = obj, 0, False, ahead

    def python_type(self):
        return type(self.obj)

    def real_object(self):
        return self.obj

    def next(self, frame):
        if self.done:
            return None
        item = self.ahead(self.taken)
        if item is None:
            self.done = True
            frame.tracer.effects.move_iterator(self, exhaust=True)
            return None
        self.taken += 1
        frame.tracer.effects.move_iterator(self)
        return item


def list_iterator_at(it_or_list, pos: int):
    """Run time: an iterator over a list that has consumed `pos` items (a loop live across a break);
    given the iterator itself, moves it there (once the list it runs over has its contents)."""
    it = iter(it_or_list)
    it.__setstate__(pos)
    return it


# ============================================================================================
# dict (and the kinds built on it in stdlib_collections: OrderedDict, defaultdict, Counter)
# ============================================================================================

def _dict_of(cls: type, items) -> dict:
    """The real dict a DictValue of class `cls` keeps its items in (an OrderedDict for OrderedDicts)."""
    return OrderedDict(items) if issubclass(cls, OrderedDict) else dict(items)


class DictValue(ContainerValue):
    """dict / OrderedDict with hashable constant keys (classes, tuples, enums... included).
    `items` maps the real keys to values; it is a real dict (an OrderedDict for OrderedDicts)
    that goes through the same operations as the program's, so its order, and its iterators'
    errors when it changes size, are CPython's."""
    __slots__ = ()

    def __init__(self, items: dict, cls: type = dict, source=None):
        super().__init__(source)
        self.items = _dict_of(cls, items)
        self.cls = cls

    def as_python(self):
        return self.cls((k, self.items[k].as_python()) for k in plain_keys(self.items))

    def graph_arg(self):
        pairs = {k: v.graph_arg() for k, v in self.items.items() if k in plain_keys(self.items)}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}

    def children(self):
        return (*self.items.values(), *[k.value for k in self.items if isinstance(k, IdentityKey)])

    def empty_like(self, items: dict = None) -> "DictValue":
        """A new dict of this kind (same class, same default factory) with `items`."""
        return type(self)(items or {}, self.cls)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.check_escapes(self)
        emit_map(em, self.items)
        if self.cls is not dict:
            em.convert_top(self.cls)

    def replace_contents(self, em):
        """Give the real dict (with a source) the contents the trace left it with."""
        em.call_const(replace_contents, [lambda: em.load_source(self.source), lambda: emit_map(em, self.items)])
        em.emit("POP_TOP")

    def unpack(self, frame):
        return [key_value(frame, k) for k in self.items]

    def get_iter(self, frame):
        return self.view("keys").get_iter(frame)

    def view(self, kind: str) -> "DictViewValue":
        return DictViewValue(self, kind, self.items)

    def as_mapping(self, frame):
        return dict(self.items)

    def missing(self, frame, key: Value, k):
        """`self[key]` for a key it does not hold (`__missing__`: a KeyError here)."""
        raise key_error(k)

    def has(self, k) -> bool:
        """Whether real key `k` is in the dict (LazyDictValue answers without wrapping its values)."""
        return k in self.items

    def entry(self, k) -> Value:
        """The value at real key `k`, which is in the dict."""
        return self.items[k]

    def size(self) -> int:
        return len(self.items)

    def put(self, k, value: Value) -> None:
        """`self[k] = value` in the trace's view (no mutation recorded: the caller records it)."""
        self.items[k] = value

    def discard(self, k) -> None:
        self.items.pop(k, None)

    def truthy(self, frame):
        return self.size() > 0

    def length(self, frame):
        return Const(self.size())

    def getitem(self, frame, key):
        k = hashable_key(key)
        if not self.has(k):
            return self.missing(frame, key, k)
        return self.entry(k)

    def setitem(self, frame, key, value):
        k = hashable_key(key)
        frame.tracer.mutate(self)
        self.items[k] = value

    def delitem(self, frame, key):
        k = hashable_key(key)
        if k not in self.items:
            raise key_error(k)
        frame.tracer.mutate(self)
        del self.items[k]

    def contains(self, frame, item):
        return self.has(hashable_key(item))

    def update_from(self, frame, other: Value) -> None:
        """`self.update(other)` for one positional argument: a dict value, anything with `keys()`
        (read through keys() and [] as CPython does), or an iterable of pairs."""
        new = mapping_pairs(frame, other)
        frame.tracer.mutate(self)
        for k, v in new:
            self.items[k] = v

    def binary(self, frame, fn, other):
        if plain(fn) is not operator.or_:
            return _fold_constants(fn, self, other)
        if fn is operator.ior:                            # dict.__ior__: update with any argument
            self.update_from(frame, other)
            return self
        if not isinstance(other, DictValue):
            return NotImplemented if not other.is_python_constant() else _fold_constants(fn, self, other)
        if other.cls is not self.cls and issubclass(other.cls, self.cls) and other.defines_ror():
            return other.ror(frame, self)                  # a subclass's reflected method goes first
        return self.or_(frame, other)

    def rbinary(self, frame, fn, other):
        if plain(fn) is operator.or_ and isinstance(other, DictValue) and self.defines_ror():
            return self.ror(frame, other)
        return NotImplemented

    def defines_ror(self) -> bool:
        """Whether the class has a `__ror__` of its own (OrderedDict, defaultdict) rather than
        dict's slot."""
        return self.cls is not dict and "__ror__" in vars(self.cls)

    def or_(self, frame, other: "DictValue") -> Value:
        """`self | other`, both dicts: dict's own is a plain dict (PyDict_Copy), OrderedDict's and
        defaultdict's a copy of the left operand's kind."""
        result = self.empty_like(self.items) if self.defines_ror() else DictValue(self.items, dict)
        result.items.update(other.items)
        return result

    def ror(self, frame, other: "DictValue") -> Value:
        """`other | self` by this class's `__ror__`: this kind, from other, updated with self."""
        result = self.empty_like(other.items)
        result.items.update(self.items)
        return result

    def compare(self, frame, fn, other):
        return _fold_constants(fn, self, other)


class LazyDictValue(DictValue):
    """A dict or OrderedDict from the program (it has a source) whose values are wrapped, and
    guarded, one by one as the trace reads them: its keys are guarded when it is wrapped (in
    order), so `len`, `in` and a read by key need nothing more, and code that reads one entry of
    a large dict (a config's `__dict__`, a class's table of aliases) guards that entry only. Any
    other use -- iterating, copying, writing, returning it -- reads `items`, which wraps the
    values not yet read, in the dict's order, exactly as `wrap` does for any dict."""
    __slots__ = ("_real", "_read", "_wrap_item")

    def __init__(self, real: dict, cls: type, source, wrap_item: Callable):
        Value.__init__(self, source)
        self.cls = cls
        self._real = dict(real)         # the contents its key guard describes
        self._read = {}                 # key -> value, the entries wrapped so far
        self._wrap_item = wrap_item     # (real value, key) -> its value, guarded at its item source

    @property
    def items(self) -> dict:
        if self._real is not None:
            read = self._read
            self._read = _dict_of(self.cls, {k: read[k] if k in read else self._wrap_item(v, k)
                                             for k, v in self._real.items()})
            self._real = None
        return self._read

    @items.setter
    def items(self, values) -> None:
        self._real = None
        self._read = _dict_of(self.cls, values)

    def has(self, k) -> bool:
        return k in self._real if self._real is not None else k in self._read

    def entry(self, k):
        if self._real is None:
            return self._read[k]
        if k not in self._read:
            self._read[k] = self._wrap_item(self._real[k], k)
        return self._read[k]

    def size(self) -> int:
        return len(self._real if self._real is not None else self._read)

    def empty_like(self, items: dict = None) -> DictValue:
        return DictValue(items or {}, self.cls)

    def put(self, k, value: Value) -> None:
        self._read[k] = value
        if self._real is not None:
            self._real.setdefault(k, None)    # a new key goes last, as in the real dict

    def discard(self, k) -> None:
        if self._real is not None:
            self._real.pop(k, None)
        self._read.pop(k, None)

    def children(self):
        return tuple(self._read.values()) if self._real is not None else super().children()


def mapping_pairs(frame, other: Value) -> list:
    """The (real key, value) pairs `dict.update(other)` / `dict(other)` copy, with CPython's
    errors for a bad sequence of pairs."""
    if isinstance(other, DictValue):
        return list(other.items.items())
    if hasattr(other.python_type(), "keys"):         # a mapping: its keys() and [] (PyDict_Merge)
        try:
            return list(other.as_mapping(frame).items())
        except Unsupported:
            keys = load_attr(frame, other, "keys").call(frame, [], {}).unpack(frame)
            return [(hashable_key(k), other.getitem(frame, k)) for k in keys]
    pairs = []
    for i, element in enumerate(other.unpack(frame)):
        try:
            kv = element.unpack(frame)
        except TracedException as e:
            if isinstance(e.exc, TypeError):
                raise user_error(TypeError, f"cannot convert dictionary update sequence element #{i} to a "
                                            f"sequence") from None
            raise
        if len(kv) != 2:
            raise user_error(ValueError, f"dictionary update sequence element #{i} has length {len(kv)}; "
                                         f"2 is required")
        pairs.append((hashable_key(kv[0]), kv[1]))
    return pairs


def _dict_view(kind):
    def method(frame, obj, args, kwargs):
        return obj.view(kind)
    return method


def _dict_get(frame, obj, args, kwargs):
    k = hashable_key(args[0])
    return obj.entry(k) if obj.has(k) else args[1] if len(args) > 1 else Const(None)


def _dict_getitem(frame, obj, args, kwargs):
    return obj.getitem(frame, args[0])


def _dict_setitem(frame, obj, args, kwargs):
    obj.setitem(frame, args[0], args[1])
    return Const(None)


def _dict_delitem(frame, obj, args, kwargs):
    obj.delitem(frame, args[0])
    return Const(None)


def _dict_contains(frame, obj, args, kwargs):
    return Const(obj.contains(frame, args[0]))


def _dict_len(frame, obj, args, kwargs):
    return Const(obj.size())


def _dict_iter(frame, obj, args, kwargs):
    return obj.get_iter(frame)


def _dict_reversed(frame, obj, args, kwargs):
    return obj.view("keys").reversed(frame)


def _dict_copy(frame, obj, args, kwargs):
    return obj.empty_like(obj.items)


def _dict_update(frame, obj, args, kwargs):
    if len(args) > 1:
        raise user_error(TypeError, f"update expected at most 1 argument, got {len(args)}")
    if args:
        obj.update_from(frame, args[0])
    if kwargs:
        frame.tracer.mutate(obj)
        obj.items.update(kwargs)
    return Const(None)


def _dict_setdefault(frame, obj, args, kwargs):
    key = hashable_key(args[0])
    if key not in obj.items:
        frame.tracer.mutate(obj)
        obj.items[key] = args[1] if len(args) > 1 else Const(None)
    return obj.items[key]


def _dict_pop(frame, obj, args, kwargs):
    key = hashable_key(args[0])
    if key in obj.items:
        frame.tracer.mutate(obj)
        return obj.items.pop(key)
    if len(args) > 1:
        return args[1]
    raise key_error(key)


def _dict_popitem(frame, obj, args, kwargs):
    """dict.popitem() (the last pair); OrderedDict.popitem(last=True) either end."""
    arguments = [a.as_python() for a in [*args, *kwargs.values()]]
    if kwargs and not isinstance(obj.items, OrderedDict):
        raise user_error(TypeError, "dict.popitem() takes no keyword arguments")
    if arguments and not isinstance(obj.items, OrderedDict):
        raise user_error(TypeError, f"dict.popitem() takes no arguments ({len(arguments)} given)")
    if obj.items:
        frame.tracer.mutate(obj)
    k, v = fold(obj.items.popitem, *arguments)     # the real one's KeyError when empty
    return SeqValue([key_value(frame, k), v], tuple)


def _odict_move_to_end(frame, obj, args, kwargs):
    key = hashable_key(args[0])
    last = (args[1] if len(args) > 1 else kwargs.get("last", Const(True))).truthy(frame)
    if key not in obj.items:
        raise key_error(key)
    frame.tracer.mutate(obj)
    obj.items.move_to_end(key, last)
    return Const(None)


def _dict_clear(frame, obj, args, kwargs):
    frame.tracer.mutate(obj)
    obj.items.clear()
    return Const(None)


# ============================================================================================
# dict.fromkeys on any dict class
# ============================================================================================

def _is_fromkeys(fn) -> bool:
    return isinstance(fn, types.BuiltinMethodType) and fn.__name__ == "fromkeys" and isinstance(fn.__self__, type) \
        and issubclass(fn.__self__, dict)


def _fromkeys(cls: type, frame, args, kwargs):
    """`cls.fromkeys(iterable, value=None)`: `cls()`, then `d[key] = value` for each key, as
    CPython's dict_fromkeys does (a subclass's own __setitem__ included)."""
    if kwargs:
        raise user_error(TypeError, "fromkeys() takes no keyword arguments")
    if not args:
        raise user_error(TypeError, "fromkeys expected at least 1 argument, got 0")
    if len(args) > 2:
        raise user_error(TypeError, f"fromkeys expected at most 2 arguments, got {len(args)}")
    value = args[1] if len(args) > 1 else Const(None)
    d = frame.wrap(cls, None).call(frame, [], {})
    for key in args[0].unpack(frame):
        setitem(frame, d, key, value)
    return d


models_family(_is_fromkeys, lambda fn: functools.partial(_fromkeys, fn.__self__))


def _dict_fromkeys_method(frame, obj, args, kwargs):
    """`d.fromkeys(...)` through an instance: the classmethod of its class."""
    return frame.wrap(obj.cls, None).load_attr(frame, "fromkeys").call(frame, args, kwargs)


DictValue.KEYWORDS = frozenset({"update", "popitem", "move_to_end"})
DictValue.METHODS = {
    "keys": _dict_view("keys"), "values": _dict_view("values"), "items": _dict_view("items"), "get": _dict_get,
    "__getitem__": _dict_getitem, "__setitem__": _dict_setitem, "__delitem__": _dict_delitem,
    "__contains__": _dict_contains, "__len__": _dict_len, "__iter__": _dict_iter, "__reversed__": _dict_reversed,
    "copy": _dict_copy, "update": _dict_update, "setdefault": _dict_setdefault, "pop": _dict_pop,
    "popitem": _dict_popitem, "clear": _dict_clear, "move_to_end": _odict_move_to_end,
    "fromkeys": _dict_fromkeys_method,
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

    def _convert(self, frame, item):
        if self.kind == "keys":
            return key_value(frame, item)
        if self.kind == "values":
            return item
        return SeqValue([key_value(frame, item[0]), item[1]], tuple)

    def elements(self, frame=None) -> list:
        return [self._convert(frame, x) for x in getattr(self.items, self.kind)()]

    def unpack(self, frame):
        return self.elements(frame)

    def get_iter(self, frame):
        return LiveIteratorValue(self, iter(getattr(self.items, self.kind)()), self._convert)

    def reversed(self, frame):
        return LiveIteratorValue(self, reversed(getattr(self.items, self.kind)()), self._convert)

    def length(self, frame):
        return Const(len(self.items))

    def truthy(self, frame):
        return len(self.items) > 0

    def contains(self, frame, item):
        if self.kind == "keys":
            return hashable_key(item) in self.items
        if self.kind == "items":
            if item.python_type() is not tuple or len(item.unpack(frame)) != 2:
                return False                  # only a pair can be an item
            key, value = item.unpack(frame)
            k = hashable_key(key)
            return k in self.items and sequence_contains([self.items[k]], value)
        return sequence_contains(self.elements(frame), item)

    def real_view(self):
        """A real view of the same kind over a dict with the same keys (and, for items views, the
        values' Python values): set operations on it are CPython's own."""
        if self.kind == "keys":
            return dict.fromkeys(self.items).keys()
        if self.kind == "items":
            return {k: self.items[k].as_python() for k in plain_keys(self.items)}.items()
        raise Unsupported(UNSUPPORTED_VALUE, "set operations on dict.values()")

    def as_python(self):
        if self.kind == "values":
            return super().as_python()
        return dict.fromkeys(plain_keys(self.items)).keys() if self.kind == "keys" else self.real_view()

    def binary(self, frame, fn, other):
        if self.kind != "values" and plain(fn) in _SET_OPERATORS:
            return SetValue.of_keys(fold(plain(fn), self.real_view(), real_operand(frame, other)), operands=(other,))
        return NotImplemented

    def rbinary(self, frame, fn, other):
        if self.kind != "values" and plain(fn) in _SET_OPERATORS:
            return SetValue.of_keys(fold(plain(fn), real_operand(frame, other), self.real_view()), operands=(other,))
        return NotImplemented

    def compare(self, frame, fn, other):
        if self.kind != "values":
            return Const(fold(fn, self.real_view(), real_operand(frame, other)))
        return NotImplemented

    def load_attr(self, frame, name):
        if name == "mapping":
            return self.owner
        if name in ("isdisjoint", "__reversed__", "__len__", "__contains__", "__iter__"):
            return MethodValue(self, name)
        raise attribute_not_modelled(self, name)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if name == "isdisjoint":
            return Const(fold(self.real_view().isdisjoint, real_operand(frame, args[0])))
        if name == "__reversed__":
            return self.reversed(frame)
        if name == "__len__":
            return self.length(frame)
        if name == "__contains__":
            return Const(self.contains(frame, args[0]))
        if name == "__iter__":
            return self.get_iter(frame)
        return super().call_method(frame, method, args, kwargs)

    def rebuild(self, em):
        em.call_const(dict_view, [lambda: em.value(self.owner), lambda: em.const(self.kind)])


_SET_OPERATORS = (operator.and_, operator.or_, operator.sub, operator.xor)


# ============================================================================================
# set, frozenset
# ============================================================================================

class SetValue(ContainerValue):
    """set / frozenset of hashable constants (classes, tuples, enums... included). `items` is a
    real set of the real elements that goes through the same operations as the program's, so
    iterating it gives CPython's order for the same history, and its iterators' errors. Tensors
    and objects hashed by identity are elements too (IdentityKey): membership, adding, removing
    and set algebra work; what depends on their order (iterating, pop) is refused, since in eager
    it depends on addresses.

    An existing set read from the frame (it has a source) is loaded lazily: `x in S` alone is
    decided by a membership guard (a registry of classes need not be guarded whole); anything
    else reads all of it under a guard on its contents and order (`keys()`). A copy of a set can
    have a table of another size (another order) than the original: then `order` holds the
    original's guarded order while the trace has not changed it, and False (unknown: what
    depends on it is refused) once changed, and for the sets computed from it."""
    __slots__ = ("real", "order")

    def __init__(self, items=(), cls: type = set, source=None, real=None):
        super().__init__(source)
        self.cls = cls
        self.real = real                      # the existing set, until its contents are read
        self.items = None if real is not None else cls(hashable_key(v) for v in items)
        self.order = None                     # None: the real set's own order is eager's

    @classmethod
    def of_keys(cls_, keys, operands=()) -> "SetValue":
        """A set value holding exactly this real set or frozenset, computed from `operands` (values)."""
        value = cls_((), type(keys))
        value.items = keys
        if not all(order_known(o) for o in operands):
            value.order = False
        return value

    @classmethod
    def copy_of(cls_, real) -> "SetValue":
        """A set value with the contents of an existing set, which the trace must not change: a
        frozenset itself, a set copied (with the original's order while unchanged if the copy
        iterates otherwise)."""
        value = cls_((), type(real))
        value.load(real)
        return value

    def load(self, real) -> None:
        if type(real) is frozenset:
            self.items = real
            return
        copy = set(real)
        same_table = tuple(copy) == tuple(real) and sys.getsizeof(copy) == sys.getsizeof(real)
        self.items, self.order = copy, None if same_table else tuple(real)

    def keys(self, frame) -> set:
        """The real set of elements (read and guarded now, for an existing set)."""
        if self.items is None:
            guarded_keys(frame, self.source, self.real)
            real, self.real = self.real, None
            self.load(real)
        return self.items

    def changed(self, frame) -> None:
        """Record a change of the contents (before making it)."""
        frame.tracer.mutate(self)
        if self.order is not None:
            self.order = False

    def ordered(self, frame):
        """A real iterator over the elements in eager's order, for what depends on it."""
        keys = self.keys(frame)
        if len(keys) > 1 and any(isinstance(k, IdentityKey) for k in keys):
            raise Unsupported(UNSUPPORTED_VALUE, "the order of a set of tensors or objects (their addresses)")
        if self.order is False and len(keys) > 1:
            raise Unsupported(UNSUPPORTED_VALUE, "the order of a set computed from an existing set whose copy "
                                                 "iterates in another order")
        return _SnapshotSetIterator(self.order, keys) if self.order else iter(keys)

    def as_python(self):
        if self.items is None:
            raise Unsupported(UNSUPPORTED_VALUE, "an existing set whose contents were not read")
        return self.cls(plain_keys(self.items))

    def children(self):
        return tuple(k.value for k in self.items or () if isinstance(k, IdentityKey))

    def length(self, frame):
        return Const(len(self.keys(frame)))

    def truthy(self, frame):
        return len(self.keys(frame)) > 0

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.call_const(self.cls, [lambda: self._emit_contents(em)])

    def replace_contents(self, em):
        em.call_const(replace_contents, [lambda: em.load_source(self.source), lambda: self._emit_contents(em)])
        em.emit("POP_TOP")

    def _emit_contents(self, em) -> None:
        """Push what a new real set is filled from (`set(x)`, or `clear(); update(x)` on an existing
        one) so that it iterates in the order the trace computed, eager's: the elements in that
        order, or a dict of them (a presized table), whichever CPython turns into that order.
        Elements hashed by identity have an order by address in eager too: their own."""
        order = tuple(self.items)
        if any(isinstance(k, IdentityKey) for k in order):
            for k in order:
                emit_key(em, k)
            em.emit("BUILD_TUPLE", len(order))
            return
        if len(order) > 1 and self.order is not None:
            raise Unsupported(UNSUPPORTED_VALUE, "a set whose order in eager is unknown leaves the graph")
        for contents in (order, dict.fromkeys(order)):
            probe = set()
            probe.update(contents)
            if tuple(probe) == order:
                em.const(contents)
                return
        raise Unsupported(UNSUPPORTED_VALUE, "a set whose order no new set reproduces leaves the graph")

    def unpack(self, frame):
        return [key_value(frame, k) for k in self.ordered(frame)]

    def get_iter(self, frame):
        return LiveIteratorValue(self, self.ordered(frame), key_value)

    def contains(self, frame, item):
        if self.items is None and item.is_python_constant():   # an existing set only tested: guard this answer
            key = item.as_python()
            found = fold(operator.contains, self.real, key)
            frame.tracer.add_guard(MembershipMatch(self.source, key, found))
            return found
        return fold(operator.contains, self.keys(frame), set_lookup_key(frame, item))

    def add(self, frame, item: Value) -> None:
        """`s.add(item)` (also SET_ADD of a set display or comprehension)."""
        key = hashable_key(item)
        self.keys(frame)
        self.changed(frame)
        self.items.add(key)

    def binary(self, frame, fn, other):
        op = plain(fn)
        if op not in _SET_OPERATORS:
            return _fold_constants(fn, self, other)
        theirs = _real_set(frame, other)
        if theirs is None:
            return NotImplemented
        mine = self.keys(frame)
        if fn is not op and self.cls is set:              # in place: the same set, changed
            self.changed(frame)
            fold(fn, mine, theirs)
            if not order_known(other):
                self.order = False
            return self
        return SetValue.of_keys(fold(op, mine, theirs), operands=(self, other))

    def compare(self, frame, fn, other):
        theirs = _real_set(frame, other)
        if theirs is not None:
            return Const(fold(fn, self.keys(frame), theirs))
        if isinstance(other, DictViewValue):
            return NotImplemented
        return _fold_constants(fn, self, other)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if name not in _SET_METHODS:
            return super().call_method(frame, method, args, kwargs)
        if kwargs:
            raise user_error(TypeError, f"{self.cls.__name__}.{name}() takes no keyword arguments")
        mine = self.keys(frame)
        if name in ("add", "discard", "remove", "__contains__"):
            arguments = [set_lookup_key(frame, a) for a in args]
        else:
            arguments = [real_operand(frame, a) for a in args]
        if name == "pop" and len(mine) > 1:
            self.ordered(frame)
            if self.source is not None:     # where pop() starts depends on the real set's earlier pops
                raise Unsupported(UNSUPPORTED_VALUE, "set.pop() of an existing set")
        if name == "remove" and arguments and arguments[0] not in mine:
            raise key_error(arguments[0])
        if name in _SET_MUTATORS:
            if self.cls is frozenset:
                raise user_error(AttributeError, f"'frozenset' object has no attribute {name!r}")
            self.changed(frame)
            if not all(order_known(a) for a in args):
                self.order = False
        result = fold(getattr(mine, name), *arguments)
        if isinstance(result, (set, frozenset)):
            return SetValue.of_keys(result, operands=(self, *args))
        if name == "pop":
            return key_value(frame, result)
        return Const(result)


def set_lookup_key(frame, v: Value):
    """The key `x in s`, `s.discard(x)`, `s.remove(x)` look up: a set argument is looked up as a
    frozenset (as CPython does), anything else as its own key."""
    if isinstance(v, SetValue):
        return frozenset(v.keys(frame))
    return hashable_key(v)


def order_known(v: Value) -> bool:
    """Whether the real set behind `v` (if it is a set value) iterates in eager's order."""
    return not isinstance(v, SetValue) or v.order is None


class _SnapshotSetIterator:
    """Iterates an existing set in its guarded order (`order`) while `live`, the trace's copy of
    it, holds the same elements: a change of size raises as CPython's set iterator does; another
    change cannot be followed (Unsupported)."""

    def __init__(self, order: tuple, live: set):
        self.rest, self.live, self.size, self.elements = iter(order), live, len(live), set(live)

    def __iter__(self):
        return self

    def __next__(self):
        if len(self.live) != self.size:
            self.size = -1
            raise RuntimeError("Set changed size during iteration")
        if self.live != self.elements:
            raise Unsupported(UNSUPPORTED_VALUE, "an existing set changed while iterating over it")
        return next(self.rest)

    def __reduce__(self):
        rest = list(self.rest)
        self.rest = iter(rest)
        return iter, (rest,)


def _real_set(frame, v: Value):
    """The real set or frozenset `v` stands for (a set value, a constant frozenset), else None."""
    if isinstance(v, SetValue):
        return v.keys(frame)
    if isinstance(v, Const) and isinstance(v.value, (set, frozenset)):
        return v.value
    return None


_SET_MUTATORS = {"add", "discard", "remove", "pop", "clear", "update", "intersection_update", "difference_update",
                 "symmetric_difference_update"}
_SET_METHODS = _SET_MUTATORS | {"copy", "union", "intersection", "difference", "symmetric_difference", "issubset",
                                "issuperset", "isdisjoint", "__contains__", "__len__"}
