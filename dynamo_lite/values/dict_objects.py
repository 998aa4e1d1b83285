"""Instances of dict / OrderedDict subclasses: created while tracing (`NewDictObjectValue`) or
existing ones read (`DictObjectValue`).

transformers' ModelOutput is the case that matters: a @dataclass subclass of OrderedDict whose
own `__setattr__`, `__setitem__` and `__getitem__` keep the dict contents and the attributes in
sync (`out.logits is out["logits"]`). Such an object has an instance __dict__ (`attrs`) and dict
contents, in insertion order.

The class's Python methods are inlined like those of any object. What lives here is the part
the class inherits from C: which classes qualify (`dict_base`), construction, and the C methods
of dict / OrderedDict on the contents (`call_dict_method`), reached through
`super().__setitem__(k, v)`, `self.keys()`, `OrderedDict.__setitem__(self, k, v)` or the
operators (`[]`, `in`, `len`, iteration, truth), where a Python override always wins. A C method
not modelled here is Unsupported. An escaping new instance is rebuilt without running
`__init__` again (runtime.rebuild_object).

An existing instance (e.g. a ModelOutput live across a graph break) is read from its guarded
entries (`contents`); its C mutators are replayed on the real object after the graph.
"""
from __future__ import annotations

import inspect
import types
from collections import OrderedDict
from typing import Optional

from ..breaks import UNKNOWN_CALL, UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE, TracedException, Unsupported, user_error
from ..guards import DictKeysMatch
from ..semantics import load_attr
from ..sources import DictItemSource
from .base import HEAPTYPE, Const, IteratorValue, Value
from .containers import DictValue, DictViewValue, SeqValue
from .functions import FunctionValue
from .objects import NewObjectValue, ObjectValue, python_function

DICT_BASES = (OrderedDict, dict)


def dict_base(cls) -> Optional[type]:
    """OrderedDict or dict when `cls` is a Python subclass of it that we can model (no C class
    in between, no metaclass, no `__new__` of its own); None otherwise."""
    if not isinstance(cls, type) or type(cls) is not type or not issubclass(cls, dict) or cls in DICT_BASES:
        return None
    for klass in cls.__mro__:
        if klass in DICT_BASES:
            break
        if not klass.__flags__ & HEAPTYPE:          # e.g. defaultdict: C behaviour we do not model
            return None
    if cls.__new__ is not dict.__new__:
        return None
    return OrderedDict if issubclass(cls, OrderedDict) else dict


def is_base_method(attr) -> bool:
    """Whether `attr` (found on a class) is a C method of dict or OrderedDict."""
    return isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)) \
        and getattr(attr, "__objclass__", None) in DICT_BASES


class _DictObject:
    """The dict protocols of a dict-subclass instance: the class's Python method if it has one,
    else dict's / OrderedDict's C method on the contents."""
    __slots__ = ()

    def contents(self, frame=None) -> dict:
        raise NotImplementedError

    def _dunder(self, frame, name: str, args: list) -> Value:
        fn = python_function(self.python_type(), name)
        if fn is not None:
            return FunctionValue(fn).call(frame, [self, *args], {})
        attr = inspect.getattr_static(self.python_type(), name, None)
        if is_base_method(attr):
            return call_dict_method(frame, self, attr, args, {})
        raise Unsupported(UNKNOWN_CALL, f"{self.python_type().__name__}.{name} ({type(attr).__name__})")

    def call_method(self, frame, method, args, kwargs):
        if is_base_method(method):
            return call_dict_method(frame, self, method, args, kwargs)
        return super().call_method(frame, method, args, kwargs)

    def getitem(self, frame, key):
        return self._dunder(frame, "__getitem__", [key])

    def setitem(self, frame, key, value):
        self._dunder(frame, "__setitem__", [key, value])

    def delitem(self, frame, key):
        self._dunder(frame, "__delitem__", [key])

    def length(self, frame):
        return self._dunder(frame, "__len__", [])

    def contains(self, frame, item):
        return self._dunder(frame, "__contains__", [item]).truthy(frame)

    def truthy(self, frame):
        if python_function(self.python_type(), "__bool__") is not None:
            return self._dunder(frame, "__bool__", []).truthy(frame)
        return self.length(frame).as_python() > 0

    def unpack(self, frame):
        return self._dunder(frame, "__iter__", []).unpack(frame)

    def as_mapping(self, frame) -> dict:
        """What `dict(obj)` and `{**obj}` copy (CPython's PyDict_Merge): the contents themselves when
        the class keeps dict's own iterator, else `obj.keys()` and `obj[key]` (overrides included)."""
        if inspect.getattr_static(self.python_type(), "__iter__", None) is dict.__iter__:
            return dict(self.contents(frame))
        keys = load_attr(frame, self, "keys").call(frame, [], {}).unpack(frame)
        return {_key(k): self.getitem(frame, k) for k in keys}


class NewDictObjectValue(_DictObject, NewObjectValue):
    """A dict-subclass instance made while tracing: `items` are its dict contents."""
    __slots__ = ("items",)

    def __init__(self, cls: type, attrs=None, items=None, source=None):
        super().__init__(cls, attrs, source=source)
        self.items = dict(items or {})

    def contents(self, frame=None):
        return self.items

    def children(self):
        return (*self.attrs.values(), *self.items.values())


class DictObjectValue(_DictObject, ObjectValue):
    """An existing dict-subclass instance, read through its guarded entries."""
    __slots__ = ()

    def contents(self, frame=None) -> dict:
        tracer = frame.tracer
        known = tracer.dict_contents.get(id(self))
        if known is not None:
            return known
        real = self.obj
        keys = tuple(dict.keys(real))
        if not all(type(k) in (str, int) for k in keys):
            raise Unsupported(UNSUPPORTED_VALUE, f"a {type(real).__name__} with keys that are not str/int")
        tracer.add_guard(DictKeysMatch(self.source, type(real), keys))
        known = tracer.dict_contents[id(self)] = {
            k: frame.wrap(dict.__getitem__(real, k), DictItemSource(self.source, k)) for k in keys}
        return known


def _key(v: Value):
    key = v.as_python()
    try:
        hash(key)
    except TypeError as e:
        raise TracedException(e) from None
    return key


# ============================================================================================
# construction
# ============================================================================================

def construct(frame, cls: type, args: list, kwargs: dict) -> NewDictObjectValue:
    """`cls(*args, **kwargs)` for a class `dict_base` accepts: an empty instance, then its __init__."""
    obj = NewDictObjectValue(cls)
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):                 # the dataclass-generated __init__
        result = FunctionValue(init).call(frame, [obj, *args], kwargs)
        if not (isinstance(result, Const) and result.value is None):
            raise user_error(TypeError, "__init__() should return None")
    elif is_base_method(init):
        call_dict_method(frame, obj, init, args, kwargs)
    else:
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__init__ ({type(init).__name__})")
    return obj


# ============================================================================================
# the C methods of dict / OrderedDict
# ============================================================================================

def call_dict_method(frame, obj: _DictObject, method, args: list, kwargs: dict) -> Value:
    """Run `method`, a C method of dict or OrderedDict, on a dict-subclass instance."""
    name = method.__name__
    base = dict_base(obj.python_type())
    if base is OrderedDict and method.__objclass__ is dict and name in vars(OrderedDict):
        # dict's version bypasses OrderedDict's own bookkeeping: not modelled
        raise Unsupported(UNKNOWN_CALL, f"dict.{name} on an OrderedDict subclass")
    handler = _METHODS.get(name)
    if handler is None:
        raise Unsupported(UNKNOWN_CALL, f"{method.__objclass__.__name__}.{name} on a "
                                        f"{obj.python_type().__name__} (not modelled)")
    if kwargs and name != "__init__":
        raise Unsupported(UNKNOWN_CALL, f"{name}() with keyword arguments")
    existing = isinstance(obj, DictObjectValue)
    if existing and name == "__init__":
        raise Unsupported(UNSUPPORTED_MUTATION, f"{base.__name__}.__init__ on an existing "
                                                f"{obj.python_type().__name__}")
    result = handler(frame, obj, obj.contents(frame), base, args, kwargs)
    if existing and name in _MUTATORS:          # done on the real object after the graph, in order
        frame.tracer.effects.call(method, [obj, *args])
    return result


def _getitem(frame, obj, items, base, args, kwargs):
    key = _key(args[0])
    if key in items:
        return items[key]
    missing = python_function(obj.python_type(), "__missing__")
    if missing is not None:
        return FunctionValue(missing).call(frame, [obj, args[0]], {})
    raise user_error(KeyError, key)


def _setitem(frame, obj, items, base, args, kwargs):
    items[_key(args[0])] = args[1]
    return Const(None)


def _delitem(frame, obj, items, base, args, kwargs):
    key = _key(args[0])
    if key not in items:
        raise user_error(KeyError, key)
    del items[key]
    return Const(None)


def _init(frame, obj, items, base, args, kwargs):
    """dict.__init__ copies straight into the dict; OrderedDict.__init__ goes through
    `self[key] = value`, so a Python __setitem__ of the subclass runs for every pair."""
    if len(args) > 1:
        raise user_error(TypeError, f"expected at most 1 argument, got {len(args)}")
    pairs: list = []
    if args:
        source = args[0]
        if isinstance(source, DictValue):
            pairs = [(Const(k), v) for k, v in source.items.items()]
        elif isinstance(source, (SeqValue, IteratorValue)):
            for pair in source.unpack(frame):
                k, v = pair.unpack(frame)
                pairs.append((k, v))
        else:
            raise Unsupported(UNKNOWN_CALL, f"{base.__name__}.__init__ from a {type(source).__name__}")
    pairs += [(Const(k), v) for k, v in kwargs.items()]
    for k, v in pairs:
        if base is OrderedDict:
            obj.setitem(frame, k, v)
        else:
            items[_key(k)] = v
    return Const(None)


def _get(frame, obj, items, base, args, kwargs):
    return items.get(_key(args[0]), args[1] if len(args) > 1 else Const(None))


def _contains(frame, obj, items, base, args, kwargs):
    return Const(_key(args[0]) in items)


def _len(frame, obj, items, base, args, kwargs):
    return Const(len(items))


def _iter(frame, obj, items, base, args, kwargs):
    return IteratorValue([Const(k) for k in items])


def _view(kind):
    def method(frame, obj, items, base, args, kwargs):
        return DictViewValue(obj, kind, items)
    return method


_keys, _values, _items = _view("keys"), _view("values"), _view("items")


_METHODS = {"__getitem__": _getitem, "__setitem__": _setitem, "__delitem__": _delitem, "__init__": _init,
            "get": _get, "__contains__": _contains, "__len__": _len, "__iter__": _iter, "keys": _keys,
            "values": _values, "items": _items}
_MUTATORS = {"__setitem__", "__delitem__", "__init__"}
