"""Instances of dict / OrderedDict subclasses: created while tracing, or existing ones read.

transformers' ModelOutput is the case that matters: a @dataclass subclass of OrderedDict whose
own `__setattr__`, `__setitem__` and `__getitem__` keep the dict contents and the attributes in
sync (`out.logits is out["logits"]`). Such an object is a NewObjectValue whose `attrs` is its
instance __dict__ and whose `items` is its dict contents, in insertion order.

The class's Python methods are inlined like those of any object. What lives here is the part
the class inherits from C: which classes qualify (`dict_base`), construction, and the C methods
of dict / OrderedDict on `items` (`call_method`), reached through `super().__setitem__(k, v)`,
`self.keys()`, `OrderedDict.__setitem__(self, k, v)` or the operators (`[]`, `in`, `len`,
iteration, truth: `call_dunder`, where a Python override always wins). A C method not modelled
here is Unsupported. Code generation rebuilds an escaping instance without running `__init__`
again (codegen._rebuild_object).

An existing instance (an ObjectValue with a source, e.g. a ModelOutput live across a graph
break) is read the same way, from its guarded entries (`contents`); changing it is Unsupported.
"""
from __future__ import annotations

import inspect
import types
from collections import OrderedDict
from typing import Optional

from . import breaks
from .breaks import Unsupported, user_error
from .operators import python_value
from .guards import DictKeysMatch
from .sources import DictItemSource
from .values import Const, DictValue, FunctionValue, IteratorValue, NewObjectValue, ObjectValue, SeqValue, Value
from .wrap import wrap

DICT_BASES = (OrderedDict, dict)
_HEAPTYPE = 1 << 9            # Py_TPFLAGS_HEAPTYPE: a class written in Python


def dict_base(cls) -> Optional[type]:
    """OrderedDict or dict when `cls` is a Python subclass of it that we can model (no C class
    in between, no metaclass, no `__new__` of its own); None otherwise."""
    if not isinstance(cls, type) or type(cls) is not type or not issubclass(cls, dict) or cls in DICT_BASES:
        return None
    for klass in cls.__mro__:
        if klass in DICT_BASES:
            break
        if not klass.__flags__ & _HEAPTYPE:          # e.g. defaultdict: C behaviour we do not model
            return None
    if cls.__new__ is not dict.__new__:
        return None
    return OrderedDict if issubclass(cls, OrderedDict) else dict


def is_dict_object(v: Value) -> bool:
    """A dict subclass instance whose contents we model: made while tracing, or an existing one
    we can reload (it has a source)."""
    if isinstance(v, NewObjectValue):
        return v.items is not None
    return isinstance(v, ObjectValue) and v.source is not None and dict_base(type(v.obj)) is not None


def is_base_method(attr) -> bool:
    """Whether `attr` (found on a class) is a C method of dict or OrderedDict."""
    return isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)) \
        and getattr(attr, "__objclass__", None) in DICT_BASES


# ============================================================================================
# construction
# ============================================================================================

def construct(frame, cls: type, args: list, kwargs: dict) -> NewObjectValue:
    """`cls(*args, **kwargs)` for a class `dict_base` accepts: an empty instance, then its __init__."""
    from .calls import call
    obj = NewObjectValue(cls, items={})
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):                 # the dataclass-generated __init__
        result = call(frame, FunctionValue(init), [obj, *args], kwargs)
        if not (isinstance(result, Const) and result.value is None):
            raise Unsupported(breaks.USER_EXCEPTION, "TypeError: __init__() should return None")
    elif is_base_method(init):
        call_method(frame, obj, init, args, kwargs)
    else:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__qualname__}.__init__ ({type(init).__name__})")
    return obj


# ============================================================================================
# the C methods of dict / OrderedDict
# ============================================================================================

def contents(frame, obj: Value) -> dict:
    """The dict contents of a dict object: its `items` when it was made while tracing; for an
    existing one (e.g. a ModelOutput returned across a graph break) its entries, read with
    dict.__getitem__ and guarded (its keys, and each value like any input)."""
    if isinstance(obj, NewObjectValue):
        return obj.items
    tracer = frame.tracer
    known = tracer.dict_contents.get(id(obj))
    if known is not None:
        return known
    real = obj.obj
    keys = tuple(dict.keys(real))
    if not all(type(k) in (str, int) for k in keys):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"a {type(real).__name__} with keys that are not str/int")
    tracer.add_guard(DictKeysMatch(obj.source, type(real), keys))
    known = tracer.dict_contents[id(obj)] = {k: wrap(tracer, dict.__getitem__(real, k), DictItemSource(obj.source, k))
                                             for k in keys}
    return known


def call_method(frame, obj: Value, method, args: list, kwargs: dict) -> Value:
    """Run `method`, a C method of dict or OrderedDict, on a dict object (`is_dict_object`)."""
    name = method.__name__
    base = dict_base(obj.python_type())
    if base is OrderedDict and method.__objclass__ is dict and name in vars(OrderedDict):
        # dict's version bypasses OrderedDict's own bookkeeping: not modelled
        raise Unsupported(breaks.UNKNOWN_CALL, f"dict.{name} on an OrderedDict subclass")
    handler = _METHODS.get(name)
    if handler is None:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{method.__objclass__.__name__}.{name} on a "
                                               f"{obj.python_type().__name__} (not modelled)")
    if kwargs and name != "__init__":
        raise Unsupported(breaks.UNKNOWN_CALL, f"{name}() with keyword arguments")
    existing = not isinstance(obj, NewObjectValue)
    if existing and name == "__init__":
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"{base.__name__}.__init__ on an existing "
                                                       f"{obj.python_type().__name__}")
    result = handler(frame, obj, contents(frame, obj), base, args, kwargs)
    if existing and name in _MUTATORS:          # done on the real object after the graph, in order
        frame.tracer.side_effects.append(("call", method, [obj, *args]))
    return result


def call_dunder(frame, obj: Value, name: str, args: list) -> Value:
    """An operator on a dict object: the class's Python override if it has one, else the C method."""
    from .calls import call
    attr = inspect.getattr_static(obj.python_type(), name, None)
    if isinstance(attr, types.FunctionType):
        return call(frame, FunctionValue(attr), [obj, *args], {})
    if is_base_method(attr):
        return call_method(frame, obj, attr, args, {})
    raise Unsupported(breaks.UNKNOWN_CALL, f"{obj.python_type().__name__}.{name} ({type(attr).__name__})")


def mapping_items(frame, obj: Value) -> dict:
    """What `dict(obj)` and `{**obj}` copy (CPython's PyDict_Merge): the contents themselves when
    the class keeps dict's own iterator, else `obj.keys()` and `obj[key]` (overrides included)."""
    from .attributes import load_attr
    from .calls import call, getitem, iterate
    if inspect.getattr_static(obj.python_type(), "__iter__", None) is dict.__iter__:
        return dict(contents(frame, obj))
    keys = iterate(frame, call(frame, load_attr(frame, obj, "keys"), [], {}))
    return {_key(k): getitem(frame, obj, k) for k in keys}


def _key(v: Value):
    key = python_value(v)
    try:
        hash(key)
    except TypeError as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {e}")
    return key


def _getitem(frame, obj, items, base, args, kwargs):
    key = _key(args[0])
    if key in items:
        return items[key]
    missing = inspect.getattr_static(obj.python_type(), "__missing__", None)
    if isinstance(missing, types.FunctionType):
        from .calls import call
        return call(frame, FunctionValue(missing), [obj, args[0]], {})
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
    from .calls import iterate
    if len(args) > 1:
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: expected at most 1 argument, got {len(args)}")
    pairs: list = []
    if args:
        source = args[0]
        if isinstance(source, DictValue):
            pairs = [(Const(k), v) for k, v in source.items.items()]
        elif isinstance(source, (SeqValue, IteratorValue)):
            for pair in iterate(frame, source):
                k, v = iterate(frame, pair)
                pairs.append((k, v))
        else:
            raise Unsupported(breaks.UNKNOWN_CALL, f"{base.__name__}.__init__ from a {type(source).__name__}")
    pairs += [(Const(k), v) for k, v in kwargs.items()]
    for k, v in pairs:
        if base is OrderedDict:
            call_dunder(frame, obj, "__setitem__", [k, v])
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


def _keys(frame, obj, items, base, args, kwargs):
    return SeqValue([Const(k) for k in items], tuple)


def _values(frame, obj, items, base, args, kwargs):
    return SeqValue(list(items.values()), tuple)


def _items(frame, obj, items, base, args, kwargs):
    return SeqValue([SeqValue([Const(k), v], tuple) for k, v in items.items()], tuple)


_METHODS = {"__getitem__": _getitem, "__setitem__": _setitem, "__delitem__": _delitem, "__init__": _init,
            "get": _get, "__contains__": _contains, "__len__": _len, "__iter__": _iter, "keys": _keys,
            "values": _values, "items": _items}
_MUTATORS = {"__setitem__", "__delitem__", "__init__"}
