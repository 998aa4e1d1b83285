"""Instances of Python classes: existing objects read from the program (`ObjectValue`), objects
created while tracing (`NewObjectValue`, rebuilt for real if they escape), exceptions made while
tracing (`NewExceptionValue`) and `super()` (`SuperValue`).

Attribute access follows Python's lookup order: a custom `__getattribute__` first, then data
descriptors on the class, the instance dict, other class attributes (functions become bound
methods, properties run their getter, classmethods bind the class), then `__getattr__`. Reads of
an existing object are guarded one by one (through `frame.wrap` with the attribute's source);
writes are side effects replayed after the graph. Operators, `len`, `in`, truth and indexing run
the class's special methods when they are Python functions.
"""
from __future__ import annotations

import contextvars
import enum
import inspect
import types
import weakref
from typing import Callable

import torch

from ..breaks import (EXTERNAL_ITERATOR, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE,
                      TracedException, Unsupported, user_error)
from ..effects import DELETED
from ..guards import AttrAbsent, LengthMatch, MembershipMatch
from ..pyops import BINARY_DUNDERS, COMPARE_DUNDERS, INPLACE_DUNDERS, INPLACE_TO_PLAIN, UNARY_DUNDERS
from ..modelled import modelled
from ..sources import AttrSource, GenericAttrSource, ItemSource, WeakRefTargetSource
from ..runtime import rebuild_exception, rebuild_object
from ..semantics import drain, equal, next_item
from .base import Const, IteratorValue, MethodValue, Value, fold, missing_attribute
from .containers import DictValue
from .functions import FunctionValue
from .iterators import SequenceIterator

MISSING = object()

# Methods of existing objects of some C types that are modelled by name: {type: (names, handler)},
# handler(frame, obj_value, name, args, kwargs). Filled by the modules that model them (ContextVar).
REAL_TYPE_METHODS: dict[type, tuple[frozenset, Callable]] = {}

# Slots that are the generic lookup (PyObject_GenericGetAttr) under another name
_GENERIC_GETATTRIBUTE = (object.__getattribute__, type.__getattribute__, types.ModuleType.__getattribute__,
                         dict.__getattribute__, list.__getattribute__, tuple.__getattribute__,
                         contextvars.ContextVar.__getattribute__)


def is_plain_getattr(cls) -> bool:
    return cls.__getattribute__ in _GENERIC_GETATTRIBUTE


class _GenericOwner:
    """Marks a source whose attributes must be reloaded with object.__getattribute__."""

    def __init__(self, source):
        self.source = source


def sub_source(source, name):
    if isinstance(source, _GenericOwner):
        return GenericAttrSource(source.source, name)
    return AttrSource(source, name) if source is not None else None


def python_function(cls, name):
    """`cls.name` when it is a Python function found on the class (a special method the user
    wrote), else None."""
    attr = inspect.getattr_static(cls, name, None)
    return attr if isinstance(attr, types.FunctionType) else None


def call_special(frame, obj: Value, name: str, args: list):
    """Run the class's Python special method `name` on obj, or return MISSING."""
    fn = python_function(obj.python_type(), name)
    if fn is None:
        return MISSING
    return FunctionValue(fn).call(frame, [obj, *args], {})


def class_attribute(frame, owner: Value, cls: type, name: str, instance_source):
    """A class-level attribute seen through an instance (methods, properties, constants), or
    MISSING when the class has none."""
    attr = inspect.getattr_static(cls, name, MISSING)
    if attr is MISSING:
        return MISSING
    if isinstance(attr, property):
        if attr.fget is None:
            raise user_error(AttributeError, f"property {name!r} of {cls.__name__!r} object has no getter")
        return FunctionValue(attr.fget).call(frame, [owner], {})
    if isinstance(attr, types.FunctionType):
        return MethodValue(owner, attr)
    if isinstance(attr, staticmethod):
        return frame.wrap(attr.__func__, None)
    if isinstance(attr, classmethod):
        return MethodValue(frame.wrap(cls, None), attr.__func__)
    getter = python_function(type(attr), "__get__")
    if getter is not None:                       # a descriptor written in Python
        return FunctionValue(getter).call(frame, [frame.wrap(attr, None), owner, frame.wrap(cls, None)], {})
    if hasattr(type(attr), "__get__") and not isinstance(attr, (type, types.BuiltinFunctionType)) \
            and not callable(attr):
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"descriptor {type(attr).__name__} for {name}")
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType)):
        return MethodValue(owner, attr)          # a C method: its call decides (call_method)
    return frame.wrap(getattr(cls, name), sub_source(instance_source, name))


# ============================================================================================
# what existing and new objects share: special methods
# ============================================================================================

class _Instance(Value):
    """Operators, truth, len, `in`, iteration and indexing through the class's Python special
    methods; C-level ones fold constants or are not modelled."""
    __slots__ = ()

    def _special(self, frame, name, args):
        return call_special(frame, self, name, args)

    def truthy(self, frame):
        cls = self.python_type()
        for name in ("__bool__", "__len__"):
            result = self._special(frame, name, [])
            if result is not MISSING:
                if name == "__bool__":
                    return bool(result.as_python())
                return result.as_python() > 0
        if hasattr(cls, "__bool__") or hasattr(cls, "__len__"):
            raise Unsupported(UNSUPPORTED_VALUE, f"truth value of a {cls.__name__}")
        return True

    def length(self, frame):
        result = self._special(frame, "__len__", [])
        if result is MISSING:
            raise Unsupported(UNSUPPORTED_VALUE, f"len() of a {self.python_type().__name__}")
        return result

    def contains(self, frame, item):
        result = self._special(frame, "__contains__", [item])
        if result is not MISSING:
            return result.truthy(frame)
        it = NotImplemented
        if inspect.getattr_static(self.python_type(), "__contains__", MISSING) is MISSING:
            it = self.get_iter(frame)          # no __contains__: Python searches the iteration
        if it is NotImplemented:
            raise Unsupported(UNSUPPORTED_VALUE, f"`in` on a {self.python_type().__name__}")
        while (x := next_item(frame, it)) is not None:
            if equal(frame, x, item):
                return True
        return False

    # ---- iteration ------------------------------------------------------------------------------
    def get_iter(self, frame):
        """iter(obj): the class's Python `__iter__` (its result must be an iterator), else the old
        sequence protocol when it has a Python `__getitem__`; NotImplemented for C-level iteration
        (a kind that knows it unpacks)."""
        cls = self.python_type()
        method = inspect.getattr_static(cls, "__iter__", MISSING)
        if isinstance(method, types.FunctionType):
            it = FunctionValue(method).call(frame, [self], {})
            if not hasattr(it.python_type(), "__next__"):
                raise user_error(TypeError, f"iter() returned non-iterator of type '{it.python_type().__name__}'")
            return it
        if method is None:
            raise user_error(TypeError, f"'{cls.__name__}' object is not iterable")
        if method is MISSING and python_function(cls, "__getitem__") is not None:
            return SequenceIterator(self)
        if method is MISSING and not hasattr(cls, "__getitem__"):
            raise user_error(TypeError, f"'{cls.__name__}' object is not iterable")
        if method is not MISSING and hasattr(cls, "__next__") and self.real_object() is not None:
            raise Unsupported(EXTERNAL_ITERATOR, f"iterating a {cls.__name__} made outside the captured code")
        return NotImplemented

    def next(self, frame):
        """next(obj): the class's Python `__next__` (a StopIteration it raises ends a loop)."""
        result = self._special(frame, "__next__", [])
        if result is not MISSING:
            return result
        cls = self.python_type()
        if hasattr(cls, "__next__"):
            kind = EXTERNAL_ITERATOR if self.real_object() is not None else UNSUPPORTED_VALUE
            raise Unsupported(kind, f"next() of a {cls.__name__} (a C iterator)")
        raise user_error(TypeError, f"'{cls.__name__}' object is not an iterator")

    def unpack(self, frame):
        it = self.get_iter(frame)
        if it is NotImplemented:
            return super().unpack(frame)
        return drain(frame, it)

    def getitem(self, frame, key):
        result = self._special(frame, "__getitem__", [key])
        if result is MISSING:
            raise Unsupported(UNSUPPORTED_VALUE, f"indexing a {self.python_type().__name__}")
        return result

    def setitem(self, frame, key, value):
        if self._special(frame, "__setitem__", [key, value]) is MISSING:
            raise Unsupported(UNSUPPORTED_MUTATION, f"item assignment on a {self.python_type().__name__}")

    def delitem(self, frame, key):
        if self._special(frame, "__delitem__", [key]) is MISSING:
            raise Unsupported(UNSUPPORTED_MUTATION, f"del on a {self.python_type().__name__}")

    def unary(self, frame, fn):
        name = UNARY_DUNDERS.get(fn)
        result = self._special(frame, name, []) if name else MISSING
        if result is MISSING:
            return super().unary(frame, fn)
        return result

    def binary(self, frame, fn, other):
        if fn in INPLACE_DUNDERS:
            result = self._special(frame, INPLACE_DUNDERS[fn], [other])
            if result is not MISSING and not _not_implemented(result):
                return result
            fn = INPLACE_TO_PLAIN[fn]
        names = BINARY_DUNDERS.get(fn)
        result = self._special(frame, names[0], [other]) if names else MISSING
        if result is MISSING or _not_implemented(result):
            return _fold_if_stable(fn, self, other)
        return result

    def rbinary(self, frame, fn, other):
        fn = INPLACE_TO_PLAIN.get(fn, fn)
        names = BINARY_DUNDERS.get(fn)
        if names is None or other.python_type() is self.python_type():
            return _fold_if_stable(fn, other, self)     # Python tries the reflected method only for another type
        result = self._special(frame, names[1], [other])
        if result is MISSING or _not_implemented(result):
            return _fold_if_stable(fn, other, self)
        return result

    def compare(self, frame, fn, other):
        result = self._special(frame, COMPARE_DUNDERS[fn], [other])
        if result is MISSING or _not_implemented(result):
            return _fold_if_stable(fn, self, other)
        return result

    def call(self, frame, args, kwargs):
        from ..semantics import load_attr
        return load_attr(frame, self, "__call__").call(frame, args, kwargs)


def _not_implemented(v: Value) -> bool:
    return isinstance(v, Const) and v.value is NotImplemented


def _fold_if_stable(fn, a: Value, b: Value):
    if a.is_python_constant() and b.is_python_constant():
        return Const(fold(fn, a.as_python(), b.as_python()))
    return NotImplemented


# ============================================================================================
# existing objects
# ============================================================================================

class ObjectValue(_Instance):
    """Any other existing Python object; attributes are read one by one (and guarded)."""
    __slots__ = ("obj",)

    def __init__(self, obj, source=None):
        super().__init__(source)
        self.obj = obj

    def python_type(self):
        return type(self.obj)

    def real_object(self):
        return self.obj

    def as_python(self):
        if self.source is not None and value_is_stable(self.obj):
            return self.obj               # compared by identity / equality only
        return super().as_python()

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        else:
            em.const(self.obj)

    # ---- attributes --------------------------------------------------------------------------
    def load_attr(self, frame, name):
        o, src = self.obj, self.source
        if isinstance(o, types.ModuleType) or isinstance(o, type) and is_plain_getattr(type(o)):
            try:
                value = getattr(o, name)
            except AttributeError:
                raise missing_attribute(frame, self, name) from None
            if isinstance(o, type):
                raw = inspect.getattr_static(o, name, None)
                if isinstance(raw, classmethod):
                    return MethodValue(self, raw.__func__)
            return frame.wrap(value, sub_source(src, name))
        cls = type(o)
        if not is_plain_getattr(cls):
            custom = python_function(cls, "__getattribute__")
            if custom is not None:        # e.g. transformers' config attribute aliases
                return FunctionValue(custom).call(frame, [self, Const(name)], {})
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"custom __getattribute__ of {cls.__name__}")
        return self.generic_getattr(frame, name)

    def generic_getattr(self, frame, name: str) -> Value:
        """object.__getattribute__: data descriptors, instance dict, class attributes, then the
        class's __getattr__."""
        o, src = self.obj, self.source
        cls = type(o)
        if src is not None and not is_plain_getattr(cls):
            src = _GenericOwner(src)
        cls_attr = inspect.getattr_static(cls, name, MISSING)
        is_data_descr = cls_attr is not MISSING and hasattr(type(cls_attr), "__set__")
        d = getattr(o, "__dict__", None)
        table = REAL_TYPE_METHODS.get(cls)
        if table is not None and name in table[0]:
            return MethodValue(self, name)
        if name == "__dict__" and d is not None and src is not None:
            view = frame.wrap(d, sub_source(src, name))
            if isinstance(view, DictValue):               # with this trace's own stores on top
                view.items.update(frame.tracer.effects.pending_attrs.get(id(self), {}))
            return view
        if is_data_descr and not isinstance(cls_attr, property) and python_function(type(cls_attr), "__get__") is None:
            try:
                value = getattr(o, name)                  # __slots__ members, getset descriptors
            except AttributeError:
                raise missing_attribute(frame, self, name, generic=not is_plain_getattr(cls)) from None
            return frame.wrap(value, sub_source(src, name))
        if not is_data_descr and d is not None and name in d:
            return frame.wrap(d[name], sub_source(src, name))
        if cls_attr is not MISSING:
            return class_attribute(frame, self, cls, name, src)
        fallback = python_function(cls, "__getattr__")
        if fallback is not None and d is not None:
            if self.source is not None:                    # the attribute must stay missing for it to run
                frame.tracer.add_guard(AttrAbsent(self.source, name, True))
            return FunctionValue(fallback).call(frame, [self, Const(name)], {})
        if d is None or getattr(cls, "__getattr__", None) is not None:
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}")
        raise missing_attribute(frame, self, name, generic=not is_plain_getattr(cls))

    def store_attr(self, frame, name, value):
        real = self.obj
        cls = type(real)
        if self.source is None:
            raise Unsupported(UNSUPPORTED_MUTATION, f"setting attribute {name!r} on a {cls.__name__} without a source")
        if isinstance(real, (type, types.ModuleType)):
            raise Unsupported(UNSUPPORTED_MUTATION, f"setting {name} on {cls.__name__}")
        if cls.__setattr__ is not object.__setattr__:
            setter = python_function(cls, "__setattr__")
            if setter is None:
                raise Unsupported(UNSUPPORTED_MUTATION, f"custom __setattr__ of {cls.__name__}")
            FunctionValue(setter).call(frame, [self, Const(name), value], {})   # e.g. ModelOutput.__setattr__
            return
        self.store_existing_attr(frame, name, value)

    def store_existing_attr(self, frame, name: str, value: Value, bypass_setattr: bool = False):
        """object.__setattr__ on an existing object: seen by later reads in this trace, done for real
        after the graph (with object.__setattr__ itself when it bypassed a custom __setattr__)."""
        real = self.real_object()
        cls = type(real)
        if self.source is None or isinstance(real, (type, types.ModuleType)):
            raise Unsupported(UNSUPPORTED_MUTATION, f"setting {name} on a {cls.__name__}")
        descriptor = inspect.getattr_static(cls, name, None)
        if isinstance(descriptor, property) and descriptor.fset is not None and not bypass_setattr:
            FunctionValue(descriptor.fset).call(frame, [self, value], {})
            return
        if hasattr(type(descriptor), "__set__"):
            raise Unsupported(UNSUPPORTED_MUTATION, f"descriptor/property {cls.__name__}.{name}")
        frame.tracer.effects.store_attr(self, name, value, bypass_setattr)
        instance_dict = frame.tracer.wrapped.get(id(getattr(real, "__dict__", None)))
        if isinstance(instance_dict, DictValue):          # `obj.__dict__` read earlier: keep it in step
            instance_dict.items[name] = value

    def del_attr(self, frame, name):
        real = self.obj
        cls = type(real)
        if self.source is None or isinstance(real, (type, types.ModuleType)) or cls.__delattr__ is not object.__delattr__:
            raise Unsupported(UNSUPPORTED_MUTATION, f"deleting {name!r} of a {cls.__name__}")
        if hasattr(type(inspect.getattr_static(cls, name, None)), "__delete__"):
            raise Unsupported(UNSUPPORTED_MUTATION, f"deleting descriptor {cls.__name__}.{name}")
        d = getattr(real, "__dict__", None)
        pending = frame.tracer.effects.pending_attr(self, name)
        present = (name in d) if pending is None else pending is not DELETED
        if d is None or not present:
            raise missing_attribute(frame, self, name)
        if pending is None and self.source is not None:
            frame.wrap(d[name], sub_source(self.source, name))     # guards that it is there now
        frame.tracer.effects.delete_attr(self, name)

    # ---- calls --------------------------------------------------------------------------------
    def call(self, frame, args, kwargs):
        real = self.obj
        handler = modelled(real)
        if handler is not None:
            result = handler(frame, args, kwargs)
            if result is not NotImplemented:
                return result
        if type(real) is weakref.ref and not args and not kwargs:
            return self._dereference(frame)
        if isinstance(real, type):
            return frame.wrap(real, self.source).call(frame, args, kwargs)
        if isinstance(real, types.ModuleType):
            raise user_error(TypeError, "'module' object is not callable")
        return super().call(frame, args, kwargs)

    def _dereference(self, frame) -> Value:
        """`ref()` of an existing weak reference (nn.RNN keeps its flat weights' refs): the object it
        points to now, read through a source that calls the reference again, so the guards of what it
        returns (an alias of the parameter, or None) are checked on every call."""
        if self.source is None:
            raise Unsupported(UNKNOWN_CALL, "calling a weak reference the tracer cannot reload")
        return frame.wrap(self.obj(), WeakRefTargetSource(self.source))

    def call_method(self, frame, method, args, kwargs):
        table = REAL_TYPE_METHODS.get(type(self.obj))
        if isinstance(method, str) and table is not None:
            return table[1](frame, self, method, args, kwargs)
        if method is object.__getattribute__:            # super().__getattribute__(name) from a custom one
            return self.generic_getattr(frame, args[0].as_python())
        return super().call_method(frame, method, args, kwargs)

    # ---- iteration ---------------------------------------------------------------------------------
    def get_iter(self, frame):
        it = super().get_iter(frame)
        if it is NotImplemented and self.source is not None and _iterates_as_builtin_sequence(type(self.obj)):
            return IteratorValue(self._sequence_items(frame), cls=type(iter(self.obj)))
        return it

    def _sequence_items(self, frame) -> list:
        """The items of an existing list or tuple subclass instance that iterates as its base does
        (transformers' LogitsProcessorList): each read through its index and guarded, and its
        length guarded. Traced code cannot change it meanwhile (its C methods are not modelled)."""
        frame.tracer.add_guard(LengthMatch(self.source, type(self.obj), len(self.obj)))
        return [frame.wrap(item, ItemSource(self.source, i)) for i, item in enumerate(self.obj)]

    # ---- existing sets ---------------------------------------------------------------------------------
    def contains(self, frame, item):
        if python_function(type(self.obj), "__contains__") is None and type(self.obj) in (set, frozenset) \
                and self.source is not None:
            return self._real_set_contains(frame, item)
        return super().contains(frame, item)

    def _real_set_contains(self, frame, item: Value) -> bool:
        """`key in S` for an existing set S (e.g. a registry of classes): decided now, and guarded
        so that adding or removing `key` later recaptures."""
        key = item.as_python()
        try:
            found = key in self.obj
        except TypeError as e:
            raise TracedException(e) from None
        frame.tracer.add_guard(MembershipMatch(self.source, key, found))
        return found

    def getitem(self, frame, key):
        real = self.obj
        if isinstance(real, type):
            if hasattr(real, "__class_getitem__"):
                return frame.wrap(fold(real.__class_getitem__, key.as_python()), None)
            raise user_error(TypeError, f"type '{real.__name__}' is not subscriptable")
        return super().getitem(frame, key)


def _iterates_as_builtin_sequence(cls) -> bool:
    """A list or tuple subclass whose iteration, indexing and length are its base's (C) ones."""
    return issubclass(cls, (list, tuple)) and not any(python_function(cls, name) is not None
                                                      for name in ("__iter__", "__getitem__", "__len__"))


def value_is_stable(obj) -> bool:
    """Whether folding an operation on this existing object is sound under the guards its value
    got: classes, modules and enum members are pinned by identity; objects that use identity
    equality are only compared. Mutable values with value semantics (a numpy array, a user
    container) would be baked into the graph as they are now: never fold those. Nor objects whose
    class defines __eq__ or __hash__ in Python: folding would run that user code while tracing
    (where it may raise, or have effects that never reach the real program)."""
    cls = type(obj)
    if _defined_in_python(cls, "__eq__") or _defined_in_python(cls, "__hash__"):
        return False
    if isinstance(obj, (type, types.ModuleType, enum.Enum, types.FunctionType, types.BuiltinFunctionType,
                        types.MethodType, torch.nn.Module)):
        return True
    return cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__ and not hasattr(cls, "__getitem__") \
        and not hasattr(cls, "__array__")


def _defined_in_python(cls, name: str) -> bool:
    """Does `cls` get this special method from Python code (other than the enum module's own)?"""
    fn = getattr(cls, name, None)
    return isinstance(fn, types.FunctionType) and fn.__module__ != "enum"


# ============================================================================================
# objects made while tracing
# ============================================================================================

class NewObjectValue(_Instance):
    """An instance of a plain Python class created while tracing (e.g. a dataclass to return).
    `attrs` is its instance __dict__ (and its __slots__ values)."""
    __slots__ = ("cls", "attrs")

    def __init__(self, cls: type, attrs=None, source=None):
        super().__init__(source)
        self.cls = cls
        self.attrs = dict(attrs or {})

    def python_type(self):
        return self.cls

    def identity(self):
        return id(self)

    def children(self):
        return tuple(self.attrs.values())

    def contents(self):
        """The dict contents of a dict subclass instance, else None (see dict_objects.py)."""
        return None

    def rebuild(self, em):
        try:                         # rebuild_object must not fail at run time: make an empty one now
            rebuild_object(self.cls, {}, None if self.contents() is None else {})
        except TypeError as e:
            raise Unsupported(UNSUPPORTED_VALUE, f"cannot rebuild a {self.cls.__qualname__} made in captured "
                                                 f"code: {e}") from None
        attrs = DictValue(self.attrs)
        items = Const(None) if self.contents() is None else DictValue(self.contents())
        em.call_const(rebuild_object, [lambda: em.const(self.cls), lambda: em.value(attrs), lambda: em.value(items)])

    # ---- attributes --------------------------------------------------------------------------
    def load_attr(self, frame, name):
        if not is_plain_getattr(self.cls):
            custom = python_function(self.cls, "__getattribute__")
            if custom is None:
                raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"custom __getattribute__ of {self.cls.__name__}")
            return FunctionValue(custom).call(frame, [self, Const(name)], {})
        return self.generic_getattr(frame, name)

    def generic_getattr(self, frame, name: str) -> Value:
        """object.__getattribute__ on an object created while tracing, then the class's __getattr__."""
        if name == "__dict__":
            return self._instance_dict(frame)
        cls_attr = inspect.getattr_static(self.cls, name, MISSING)
        data_descriptor = cls_attr is not MISSING and hasattr(type(cls_attr), "__set__") \
            and not isinstance(cls_attr, types.MemberDescriptorType)
        if name in self.attrs and not data_descriptor:
            return self.attrs[name]
        if isinstance(cls_attr, types.MemberDescriptorType):      # a __slots__ member not set
            raise user_error(AttributeError, f"'{self.cls.__name__}' object has no attribute {name!r}")
        result = class_attribute(frame, self, self.cls, name, None)
        if result is not MISSING:
            return result
        fallback = python_function(self.cls, "__getattr__")
        if fallback is not None:
            return FunctionValue(fallback).call(frame, [self, Const(name)], {})
        if inspect.getattr_static(self.cls, "__getattr__", None) is not None:
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"__getattr__ of {self.cls.__name__}")
        raise user_error(AttributeError, f"'{self.cls.__name__}' object has no attribute {name!r}")

    def _instance_dict(self, frame) -> DictValue:
        """`obj.__dict__`: a dict value that shares the object's attribute table, so reads and writes
        through it are the object's. It must not escape the trace (it would come back as a copy)."""
        view = DictValue({}, dict)
        view.items = self.attrs
        frame.tracer.instance_dicts.append(view)
        return view

    def store_attr(self, frame, name, value):
        setter = inspect.getattr_static(self.cls, "__setattr__")
        if setter is object.__setattr__:
            self.generic_setattr(frame, name, value)
        elif isinstance(setter, types.FunctionType):     # e.g. ModelOutput.__setattr__
            FunctionValue(setter).call(frame, [self, Const(name), value], {})
        else:
            raise Unsupported(UNSUPPORTED_MUTATION, f"custom __setattr__ of {self.cls.__name__}")

    def generic_setattr(self, frame, name: str, value: Value):
        """object.__setattr__ on an object created while tracing: a property's setter, a descriptor's
        __set__, else its __dict__ (or slot)."""
        descriptor = inspect.getattr_static(self.cls, name, None)
        if isinstance(descriptor, property):
            if descriptor.fset is None:
                raise user_error(AttributeError, f"property {name!r} of {self.cls.__name__!r} object has no setter")
            FunctionValue(descriptor.fset).call(frame, [self, value], {})
            return
        setter = python_function(type(descriptor), "__set__")
        if setter is not None:
            FunctionValue(setter).call(frame, [frame.wrap(descriptor, None), self, value], {})
            return
        if hasattr(type(descriptor), "__set__") and not isinstance(descriptor, types.MemberDescriptorType):
            raise Unsupported(UNSUPPORTED_MUTATION, f"descriptor {type(descriptor).__name__} for {name!r}")
        if not isinstance(descriptor, types.MemberDescriptorType) and not _has_instance_dict(self.cls):
            raise user_error(AttributeError, f"'{self.cls.__name__}' object has no attribute {name!r}")
        self.attrs[name] = value

    def del_attr(self, frame, name):
        if inspect.getattr_static(self.cls, "__delattr__") is not object.__delattr__:
            raise Unsupported(UNSUPPORTED_MUTATION, f"custom __delattr__ of {self.cls.__name__}")
        if name not in self.attrs:
            raise user_error(AttributeError, name)
        del self.attrs[name]

    def call_method(self, frame, method, args, kwargs):
        if method is object.__getattribute__:
            return self.generic_getattr(frame, args[0].as_python())
        if method is object.__setattr__:
            self.generic_setattr(frame, args[0].as_python(), args[1])
            return Const(None)
        return super().call_method(frame, method, args, kwargs)

def _has_instance_dict(cls) -> bool:
    return any("__dict__" in vars(k) for k in cls.__mro__ if k is not object) or not all(
        "__slots__" in vars(k) for k in cls.__mro__ if k is not object)


class NewExceptionValue(ObjectValue):
    """An exception object made while tracing (`raise KeyError(k)`, or one an op raised and an
    except block caught). Code that rebuilds it makes a fresh one, as each eager run does."""
    __slots__ = ()

    def __init__(self, exc: BaseException):
        super().__init__(exc)

    def identity(self):
        return id(self.obj)

    def load_attr(self, frame, name):
        """`e.args` and friends of an exception made while tracing (its state is all constants)."""
        from .base import is_constant
        try:
            value = getattr(self.obj, name)
        except AttributeError:
            raise missing_attribute(frame, self, name) from None
        if name in ("args", "__class__") or is_constant(value) and not name.startswith("__"):
            return frame.wrap(value, None)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{type(self.obj).__name__}.{name}")

    def rebuild(self, em):
        em.call_const(rebuild_exception, [lambda: em.const(type(self.obj)), lambda: em.const(self.obj.args)])


class SuperValue(Value):
    """`super()` / `super(cls, obj)`: attribute lookups start after `cls` in `type(obj)`'s MRO."""
    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Value, source=None):
        super().__init__(source)
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super

    def load_attr(self, frame, name):
        mro = self.obj.python_type().__mro__
        if self.cls not in mro:
            raise user_error(TypeError, "super(type, obj): obj must be an instance or subtype of type")
        for klass in mro[mro.index(self.cls) + 1:]:
            if name not in klass.__dict__:
                continue
            attr = klass.__dict__[name]
            if isinstance(attr, types.FunctionType):
                return MethodValue(self.obj, attr)
            if isinstance(attr, property) and attr.fget is not None:
                return FunctionValue(attr.fget).call(frame, [self.obj], {})
            if isinstance(attr, classmethod):
                return MethodValue(frame.wrap(self.obj.python_type(), None), attr.__func__)
            if isinstance(attr, staticmethod):
                return frame.wrap(attr.__func__, None)
            if attr is object.__init__:
                return frame.wrap(object.__init__, None)   # modelled as a no-op (builtins_table)
            if isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                return MethodValue(self.obj, attr)         # a C method called with obj first (call_method)
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"super().{name} ({type(attr).__name__})")
        raise user_error(AttributeError, f"'super' object has no attribute {name!r}")
