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
import functools
import inspect
import types
import weakref
from typing import Callable

import torch

from ..breaks import (EXTERNAL_ITERATOR, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE,
                      TracedException, Unsupported, user_error)
from ..effects import DELETED
from ..fallback.skip import is_torch_namespace
from ..guards import AttrAbsent, IdMatch, LengthMatch, MembershipMatch
from ..pyops import BINARY_DUNDERS, COMPARE_DUNDERS, INPLACE_DUNDERS, INPLACE_TO_PLAIN, UNARY_DUNDERS
from ..modelled import modelled
from ..sources import AttrSource, GenericAttrSource, ItemSource, WeakRefTargetSource
from ..runtime import rebuild_exception, rebuild_object, slot_member  # noqa: F401  (slot_member: re-exported)
from ..semantics import drain, equal, next_item
from .base import HEAPTYPE, Const, IteratorValue, MethodValue, Value, fold, missing_attribute, reaches
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
                         contextvars.ContextVar.__getattribute__, types.SimpleNamespace.__getattribute__)


def is_plain_getattr(cls) -> bool:
    return cls.__getattribute__ in _GENERIC_GETATTRIBUTE


def instance_dict(obj):
    """`obj`'s instance dict, or None, read as object.__getattribute__ does: a class's own
    __getattribute__ (which may count reads, or log) never runs while tracing."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None


class _GenericOwner:
    """Marks a source whose attributes must be reloaded with object.__getattribute__."""

    def __init__(self, source):
        self.source = source


def sub_source(source, name):
    if isinstance(source, _GenericOwner):
        return GenericAttrSource(source.source, name)
    return AttrSource(source, name) if source is not None else None


def is_data_descriptor(attr) -> bool:
    """Whether a class attribute takes precedence over an instance dict entry of its name (its
    type defines __set__ or __delete__: CPython's tp_descr_set)."""
    kind = type(attr)
    return attr is not MISSING and (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))


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


def pending_instance_attr(frame, obj: Value, name: str):
    """What this trace wrote to `obj.name` (an existing object's attribute) and has not replayed,
    or None; an AttributeError when it deleted it."""
    pending = frame.tracer.effects.pending_attr(obj, name)
    if pending is DELETED:         # this trace deleted it: nothing to guard (it is there now)
        raise user_error(AttributeError, f"'{obj.python_type().__name__}' object has no attribute {name!r}")
    return pending


def pending_class_attr(frame, cls: type, name: str):
    """What this trace wrote to `name` on `cls` or a class before it in its MRO and has not
    replayed yet (`type(self).counter += 1`), or None when the real class attribute is current."""
    for klass in cls.__mro__:
        value = frame.tracer.wrapped.get(id(klass))
        pending = frame.tracer.effects.pending_attr(value, name) if value is not None else None
        if pending is DELETED:
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name} after this trace deleted it")
        if pending is not None:
            if hasattr(pending.python_type(), "__get__"):
                raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name} after this trace replaced it "
                                                         f"with a {pending.python_type().__name__}")
            return pending
        if name in klass.__dict__:
            return None
    return None


def version_guarded(cls: type) -> bool:
    """A Python class with no torch class among its bases: wrap guards it whole, with its version
    tag (one ClassVersionMatch covers every attribute the trace reads on it)."""
    return bool(cls.__flags__ & HEAPTYPE) and not any(is_torch_namespace(k) for k in cls.__mro__)


def guard_class_attribute(frame, cls: type, name: str, attr) -> None:
    """A method or property read on a Python class: guarded by itself. A class guarded whole by its
    version tag (version_guarded) loses that guard when the trace writes to it or a base (the
    replayed write moves the tag: convert_frame), so methods keep their own guard too. torch's own
    classes are taken as not monkeypatched."""
    if not cls.__flags__ & HEAPTYPE or is_torch_namespace(cls):
        return
    source = AttrSource(frame.tracer.ref_source(cls), name)
    if isinstance(attr, types.FunctionType):
        frame.wrap(attr, source)                   # FunctionMatch: what `cls.name` is now
    elif isinstance(attr, property):
        frame.tracer.add_guard(IdMatch.of(source, attr))   # `cls.name` of a property is the property


def class_attribute(frame, owner: Value, cls: type, name: str, instance_source):
    """A class-level attribute seen through an instance (methods, properties, constants), or
    MISSING when the class has none. A plain value is read through the instance when it has a
    source, else through the class (guarded either way: a class attribute may change)."""
    pending = pending_class_attr(frame, cls, name)
    if pending is not None:
        return pending
    attr = inspect.getattr_static(cls, name, MISSING)
    if attr is MISSING:
        return MISSING
    guard_class_attribute(frame, cls, name, attr)
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
    if isinstance(attr, functools._lru_cache_wrapper):     # `@lru_cache` on a method: binds as a function does
        return MethodValue(owner, attr)
    if isinstance(attr, functools.cached_property):
        return _cached_property(frame, owner, attr)
    getter = python_function(type(attr), "__get__")
    if getter is not None:                       # a descriptor written in Python
        return FunctionValue(getter).call(frame, [frame.wrap(attr, None), owner, frame.wrap(cls, None)], {})
    if hasattr(type(attr), "__get__") and not isinstance(attr, (type, types.BuiltinFunctionType)) \
            and not callable(attr):
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"descriptor {type(attr).__name__} for {name}")
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType)):
        return MethodValue(owner, attr)          # a C method: its call decides (call_method)
    source = sub_source(instance_source, name) if instance_source is not None \
        else AttrSource(frame.tracer.ref_source(cls), name)
    return frame.wrap(getattr(cls, name), source)


def _cached_property(frame, owner: Value, prop: functools.cached_property) -> Value:
    """`functools.cached_property` not yet in the instance dict (which it does not shadow): its
    function computes the value, stored into the instance dict as its `__get__` does."""
    if prop.attrname is None:
        raise user_error(TypeError, "Cannot use cached_property instance without calling __set_name__ on it.")
    value = FunctionValue(prop.func).call(frame, [owner], {})
    if isinstance(owner, NewObjectValue):
        if not _has_instance_dict(owner.cls):
            raise user_error(TypeError, f"No '__dict__' attribute on {owner.cls.__name__!r} instance to cache "
                                        f"{prop.attrname!r} property.")
        owner.attrs[prop.attrname] = value
    elif isinstance(owner, ObjectValue) and hasattr(owner.real_object(), "__dict__"):
        owner.store_existing_attr(frame, prop.attrname, value, bypass_setattr=True)  # a non-data descriptor: the dict
    else:
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"cached_property {prop.attrname!r} of a {type(owner).__name__}")
    return value


def descriptor_set(frame, owner: Value, cls: type, name: str, value: Value) -> bool:
    """The first step of object.__setattr__: a data descriptor written in Python on the class (a
    property's setter, a descriptor's `__set__`) takes the write; its code is inlined. True when
    one did; False when the write goes to the instance (its dict or a slot)."""
    descriptor = inspect.getattr_static(cls, name, None)
    if isinstance(descriptor, property):
        if descriptor.fset is None:
            raise user_error(AttributeError, f"property {name!r} of {cls.__name__!r} object has no setter")
        FunctionValue(descriptor.fset).call(frame, [owner, value], {})
        return True
    setter = python_function(type(descriptor), "__set__")
    if setter is not None:
        FunctionValue(setter).call(frame, [frame.wrap(descriptor, None), owner, value], {})
        return True
    if hasattr(type(descriptor), "__set__") and not isinstance(descriptor, types.MemberDescriptorType):
        raise Unsupported(UNSUPPORTED_MUTATION, f"setting {cls.__name__}.{name} ({type(descriptor).__name__})")
    return False


def descriptor_delete(frame, owner: Value, cls: type, name: str) -> bool:
    """Likewise for object.__delattr__: a property's deleter or a descriptor's `__delete__`."""
    descriptor = inspect.getattr_static(cls, name, None)
    if isinstance(descriptor, property):
        if descriptor.fdel is None:
            raise user_error(AttributeError, f"property {name!r} of {cls.__name__!r} object has no deleter")
        FunctionValue(descriptor.fdel).call(frame, [owner], {})
        return True
    deleter = python_function(type(descriptor), "__delete__")
    if deleter is not None:
        FunctionValue(deleter).call(frame, [frame.wrap(descriptor, None), owner], {})
        return True
    if hasattr(type(descriptor), "__delete__") and not isinstance(descriptor, types.MemberDescriptorType):
        raise Unsupported(UNSUPPORTED_MUTATION, f"deleting {cls.__name__}.{name} ({type(descriptor).__name__})")
    return False


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
        real = self.real_object()
        if type(real) is types.MappingProxyType and self.source is not None and key.is_python_constant():
            # `cls.__dict__[name]`: the entry read from the frame like any value (its own guards)
            k = key.as_python()
            if k in real:
                return frame.wrap(real[k], ItemSource(self.source, k))
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

    def call_method(self, frame, method, args, kwargs):
        if isinstance(method, functools._lru_cache_wrapper):   # a cached method: the cache with self first
            return frame.wrap(method, None).call(frame, [self, *args], kwargs)
        return super().call_method(frame, method, args, kwargs)


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
    """Any other existing Python object; attributes are read one by one (and guarded). One read
    from the frame is guarded by its type, not its identity; `pin` (the tracer, set by wrap) adds
    the identity guard once the trace depends on *which* object it is (`is`, hashing, folding)."""
    __slots__ = ("obj", "pin")

    def __init__(self, obj, source=None, pin=None):
        super().__init__(source)
        self.obj = obj
        self.pin = pin

    def python_type(self):
        return type(self.obj)

    def real_object(self):
        return self.obj

    def _pinned(self):
        if self.pin is not None and self.source is not None:
            self.pin.add_guard(IdMatch.of(self.source, self.obj))
        return self.obj

    pinned_object = _pinned          # the object itself, for a fold that depends on which one it is
    key_object = _pinned

    def identity(self):
        return id(self._pinned())

    def as_python(self):
        if self.source is not None and value_is_stable(self.obj):
            return self._pinned()         # compared by identity / equality only
        return super().as_python()

    def is_python_constant(self):
        return self.source is not None and value_is_stable(self.obj)       # asking pins nothing

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
        pending = pending_instance_attr(frame, self, name)
        if pending is not None:
            return pending
        o, src = self.obj, self.source
        cls = type(o)
        if src is not None and not is_plain_getattr(cls):
            src = _GenericOwner(src)
        cls_attr = inspect.getattr_static(cls, name, MISSING)
        is_data_descr = is_data_descriptor(cls_attr)
        d = instance_dict(o)
        table = REAL_TYPE_METHODS.get(cls)
        if table is not None and name in table[0]:
            return MethodValue(self, name)
        if name == "__dict__" and d is not None and src is not None:
            return self.instance_dict_value(frame)
        if is_data_descr and not isinstance(cls_attr, property) and python_function(type(cls_attr), "__get__") is None:
            try:
                value = getattr(o, name)                  # __slots__ members, getset descriptors
            except AttributeError:
                raise missing_attribute(frame, self, name, generic=not is_plain_getattr(cls)) from None
            return frame.wrap(value, sub_source(src, name))
        view = self._dict_value(frame)
        if not is_data_descr and view is not None:        # `obj.__dict__` read earlier: the trace's view of it
            if view.has(name):
                return view.entry(name)
        elif not is_data_descr and d is not None and name in d:
            return frame.wrap(d[name], sub_source(src, name))
        result = class_attribute(frame, self, cls, name, src)
        if result is not MISSING:
            return result
        fallback = python_function(cls, "__getattr__")
        if fallback is not None and d is not None:
            if self.source is not None:                    # the attribute must stay missing for it to run
                frame.tracer.add_guard(AttrAbsent(self.source, name, True))
            return FunctionValue(fallback).call(frame, [self, Const(name)], {})
        if d is None or getattr(cls, "__getattr__", None) is not None:
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}")
        raise missing_attribute(frame, self, name, generic=not is_plain_getattr(cls))

    def instance_dict_value(self, frame) -> Value:
        """`obj.__dict__` of an existing object: its guarded entries, with this trace's own writes
        on top; from then on attribute reads and writes of the object go through this view too."""
        if self.source is None or instance_dict(self.obj) is None:
            raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"__dict__ of a {type(self.obj).__name__}")
        plain = is_plain_getattr(type(self.obj))          # else reloaded past the class's own __getattribute__
        view = frame.wrap(self.obj.__dict__, (AttrSource if plain else GenericAttrSource)(self.source, "__dict__"))
        if isinstance(view, DictValue):
            for name, value in frame.tracer.effects.pending_attrs.get(id(self), {}).items():
                if value is DELETED:
                    view.discard(name)
                else:
                    view.put(name, value)
        return view

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
        """object.__setattr__ on an existing object: a data descriptor written in Python takes it,
        else the write is seen by later reads in this trace and done for real after the graph
        (with object.__setattr__ itself when it bypassed a custom __setattr__)."""
        real = self.real_object()
        cls = type(real)
        if self.source is None or isinstance(real, (type, types.ModuleType)):
            raise Unsupported(UNSUPPORTED_MUTATION, f"setting {name} on a {cls.__name__}")
        if descriptor_set(frame, self, cls, name, value):
            return
        frame.tracer.effects.store_attr(self, name, value, bypass_setattr)
        instance_dict = self._dict_value(frame)
        if instance_dict is not None:                     # `obj.__dict__` read earlier: keep it in step
            instance_dict.put(name, value)

    def _dict_value(self, frame):
        """The value of this object's `__dict__` when the trace read it (its items are then what
        the trace sees, its own writes through it included), else None."""
        d = getattr(self.real_object(), "__dict__", None)
        known = frame.tracer.wrapped.get(id(d)) if d is not None else None
        return known if isinstance(known, DictValue) else None

    def del_attr(self, frame, name):
        real = self.obj
        cls = type(real)
        if self.source is None or isinstance(real, (type, types.ModuleType)):
            raise Unsupported(UNSUPPORTED_MUTATION, f"deleting {name!r} of a {cls.__name__}")
        if cls.__delattr__ is not object.__delattr__:
            deleter = python_function(cls, "__delattr__")
            if deleter is None:
                raise Unsupported(UNSUPPORTED_MUTATION, f"custom __delattr__ of {cls.__name__}")
            FunctionValue(deleter).call(frame, [self, Const(name)], {})
            return
        self.delete_existing_attr(frame, name)

    def delete_existing_attr(self, frame, name: str, bypass_delattr: bool = False):
        """object.__delattr__ on an existing object: a property's deleter or a Python descriptor's
        __delete__ runs; else the attribute must be in the instance dict now (guarded) and is
        deleted for real after the graph."""
        real = self.obj
        cls = type(real)
        if self.source is None or isinstance(real, (type, types.ModuleType)):
            raise Unsupported(UNSUPPORTED_MUTATION, f"deleting {name!r} of a {cls.__name__}")
        if descriptor_delete(frame, self, cls, name):
            return
        if isinstance(inspect.getattr_static(cls, name, None), types.MemberDescriptorType):
            raise Unsupported(UNSUPPORTED_MUTATION, f"deleting slot {name!r} of a {cls.__name__}")
        d = instance_dict(real)
        pending = frame.tracer.effects.pending_attr(self, name)
        view = self._dict_value(frame)
        if pending is not None:
            present = pending is not DELETED
        elif view is not None:
            present = view.has(name)                      # its keys are guarded
        else:
            present = d is not None and name in d
        if not present:
            raise user_error(AttributeError, f"'{cls.__name__}' object has no attribute {name!r}") if pending \
                else missing_attribute(frame, self, name)
        if pending is None and view is None:
            owner = self.source if is_plain_getattr(cls) else _GenericOwner(self.source)
            frame.wrap(d[name], sub_source(owner, name))          # guards that it is there now
        frame.tracer.effects.delete_attr(self, name, bypass_delattr)
        if view is not None:
            view.discard(name)

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
        if reaches(self.children(), self):
            raise Unsupported(UNSUPPORTED_VALUE, f"a {self.cls.__qualname__} made in captured code that refers to "
                                                 f"itself leaves it")
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
        if descriptor_set(frame, self, self.cls, name, value):
            return
        descriptor = inspect.getattr_static(self.cls, name, None)
        if not isinstance(descriptor, types.MemberDescriptorType) and not _has_instance_dict(self.cls):
            raise user_error(AttributeError, f"'{self.cls.__name__}' object has no attribute {name!r}")
        self.attrs[name] = value

    def del_attr(self, frame, name):
        deleter = inspect.getattr_static(self.cls, "__delattr__")
        if deleter is object.__delattr__:
            self.generic_delattr(frame, name)
        elif isinstance(deleter, types.FunctionType):
            FunctionValue(deleter).call(frame, [self, Const(name)], {})
        else:
            raise Unsupported(UNSUPPORTED_MUTATION, f"custom __delattr__ of {self.cls.__name__}")

    def generic_delattr(self, frame, name: str):
        """object.__delattr__: a property's deleter, a descriptor's __delete__, else the attribute."""
        if descriptor_delete(frame, self, self.cls, name):
            return
        if name not in self.attrs:
            is_slot = isinstance(inspect.getattr_static(self.cls, name, None), types.MemberDescriptorType)
            raise user_error(AttributeError, name if is_slot else
                             f"'{self.cls.__name__}' object has no attribute {name!r}")
        del self.attrs[name]

    def call_method(self, frame, method, args, kwargs):
        if method is object.__getattribute__:
            return self.generic_getattr(frame, args[0].as_python())
        if method is object.__setattr__:
            self.generic_setattr(frame, args[0].as_python(), args[1])
            return Const(None)
        if method is object.__delattr__:
            self.generic_delattr(frame, args[0].as_python())
            return Const(None)
        return super().call_method(frame, method, args, kwargs)


def _has_instance_dict(cls) -> bool:
    return any("__dict__" in vars(k) for k in cls.__mro__ if k is not object) or not all(
        "__slots__" in vars(k) for k in cls.__mro__ if k is not object)


class NewExceptionValue(ObjectValue):
    """An exception object made while tracing (`raise KeyError(k)`, `raise ShapeError(3, 1)` of a
    class with its own Python `__init__`, or one an op raised and an except block caught).

    `obj` is a real exception of the right class whose `args` are the (constant) ones the trace
    gave it, so `except E`, `e.args` and `str(e)` are decided on it; `attrs` holds the attributes
    its `__init__` (or later code) set, as values (they may be tensors). Code that rebuilds it
    makes a fresh one, as each eager run does, without running `__init__` again."""
    __slots__ = ("attrs",)

    def __init__(self, exc: BaseException, attrs=None):
        super().__init__(exc)
        self.attrs = dict(attrs or {})

    def identity(self):
        return id(self.obj)

    def key_object(self):
        return None                       # a fresh exception each run: keyed by identity in the trace

    def children(self):
        return tuple(self.attrs.values())

    def as_python(self):
        """The real exception, when its state is all constants and no Python code of its class
        would run on it (str(), format())."""
        cls = type(self.obj)
        if any(python_function(cls, name) for name in ("__str__", "__repr__", "__format__")) \
                or not all(v.is_python_constant() for v in self.attrs.values()):
            return Value.as_python(self)
        return self.obj

    def load_attr(self, frame, name):
        """`e.args`, `e.expected` (set by its __init__) and friends; its class's methods and properties."""
        from .base import is_constant
        if name in self.attrs:
            return self.attrs[name]
        cls = type(self.obj)
        if name in ("args", "__class__", "__cause__", "__context__", "__suppress_context__"):
            return frame.wrap(getattr(self.obj, name), None)
        raw = inspect.getattr_static(cls, name, None)
        if isinstance(raw, (types.MemberDescriptorType, types.GetSetDescriptorType)) \
                and not raw.__objclass__.__flags__ & HEAPTYPE and is_constant(getattr(self.obj, name)):
            return Const(getattr(self.obj, name))        # a builtin exception's own field (StopIteration.value)
        if not name.startswith("__") or python_function(cls, name) is not None:
            result = class_attribute(frame, self, cls, name, None)
            if result is not MISSING:
                return result
        try:
            value = getattr(self.obj, name)
        except AttributeError:
            raise user_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}") from None
        if is_constant(value) and not name.startswith("__"):
            return frame.wrap(value, None)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}")

    def store_attr(self, frame, name, value):
        cls = type(self.obj)
        if cls.__setattr__ is not object.__setattr__ and cls.__setattr__ is not BaseException.__setattr__:
            raise Unsupported(UNSUPPORTED_MUTATION, f"custom __setattr__ of {cls.__name__}")
        if descriptor_set(frame, self, cls, name, value):
            return
        if name.startswith("__") or name == "args":        # BaseException's own state (args, __cause__...)
            if not value.is_python_constant():
                raise Unsupported(UNSUPPORTED_MUTATION, f"setting {cls.__name__}.{name} to a traced value")
            fold(setattr, self.obj, name, value.as_python())
            return
        self.attrs[name] = value

    def call_method(self, frame, method, args, kwargs):
        """`super().__init__(message)` from a user exception's __init__: the builtin base's own
        __init__ on the real exception (it sets `args`)."""
        base = getattr(method, "__objclass__", None)
        if getattr(method, "__name__", None) == "__init__" and isinstance(base, type) \
                and issubclass(base, BaseException) and not base.__flags__ & HEAPTYPE:
            if kwargs or not all(a.is_python_constant() for a in args):
                raise Unsupported(UNSUPPORTED_VALUE, f"{base.__name__}.__init__ with traced arguments")
            fold(method, self.obj, *[a.as_python() for a in args])
            return Const(None)
        return super().call_method(frame, method, args, kwargs)

    def rebuild(self, em):
        cls = type(self.obj)
        if not self.attrs and plain_exception_class(cls):
            em.call_const(rebuild_exception, [lambda: em.const(cls), lambda: em.const(self.obj.args)])
            return
        attrs = DictValue(self.attrs)
        em.call_const(rebuild_exception, [lambda: em.const(cls), lambda: em.const(self.obj.args),
                                          lambda: em.value(attrs)])


def plain_exception_class(cls: type) -> bool:
    """An exception class whose construction runs no Python code (builtin or a plain subclass)."""
    return all(not isinstance(getattr(k, attr, None), types.FunctionType)
               for k in cls.__mro__ for attr in ("__init__", "__new__")
               if attr in k.__dict__)


def new_exception(frame, cls: type, args: list, kwargs: dict) -> Value:
    """`cls(*args, **kwargs)` for an exception class: a plain one is made for real from constant
    arguments; one with its own Python `__init__` (and the builtin `__new__`) is made as
    type.__call__ does: the builtin `__new__` gives a real exception whose args are the call's,
    then its `__init__` is inlined on it."""
    if not all(a.is_python_constant() for a in args):
        raise Unsupported(UNSUPPORTED_VALUE, f"{cls.__name__}(...) made from traced values")
    const_args = [a.as_python() for a in args]
    if plain_exception_class(cls):
        if kwargs:
            _raise_new(cls, const_args, kwargs)
        return _remember(frame, NewExceptionValue(fold(cls, *const_args)))
    new = inspect.getattr_static(cls, "__new__")
    if isinstance(new, (staticmethod, types.FunctionType)):
        raise Unsupported(UNKNOWN_CALL, f"{cls.__qualname__}.__new__ written in Python")
    exc = _remember(frame, NewExceptionValue(fold(cls.__new__, cls, *const_args)))
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):
        result = FunctionValue(init).call(frame, [exc, *args], kwargs)
        if not (isinstance(result, Const) and result.value is None):
            raise user_error(TypeError, f"__init__() should return None, not '{result.python_type().__name__}'")
    else:
        fold(init, exc.obj, *const_args, **{k: v.as_python() for k, v in kwargs.items()})
    return exc


def _raise_new(cls, args, kwargs):
    """A plain exception class called with keywords: what eager raises (they take none)."""
    fold(cls, *args, **{k: v.as_python() for k, v in kwargs.items()})
    raise Unsupported(UNKNOWN_CALL, f"{cls.__name__}(...) with keyword arguments")


def _remember(frame, exc: NewExceptionValue) -> NewExceptionValue:
    """One value per exception object, so the one an except block catches is the one raised."""
    frame.tracer.remember(exc.obj, exc)
    return exc


class SuperValue(Value):
    """`super()` / `super(cls, obj)`: attribute lookups start after `cls` in the MRO of `type(obj)`,
    or of `obj` itself when it is a class (`super().__new__(cls)` in `__new__`, `super().make()` in
    a classmethod), binding what is found as Python's super object does."""
    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Value, source=None):
        super().__init__(source)
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super

    def _start(self):
        """(the class whose MRO is walked, whether obj is that class rather than an instance)."""
        real = self.obj.real_object()
        if isinstance(real, type) and issubclass(real, self.cls):
            return real, True
        owner = self.obj.python_type()
        if not issubclass(owner, self.cls):
            raise user_error(TypeError, "super(type, obj): obj must be an instance or subtype of type")
        return owner, False

    def load_attr(self, frame, name):
        owner, of_class = self._start()
        mro = owner.__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                return self._bind(frame, klass, name, owner, of_class)
        raise user_error(AttributeError, f"'super' object has no attribute {name!r}")

    def _bind(self, frame, klass: type, name: str, owner: type, of_class: bool) -> Value:
        """`klass.__dict__[name]` bound as super binds it: to obj, or to the class for the class form."""
        attr = klass.__dict__[name]
        owner_value = self.obj if of_class else frame.wrap(owner, None)
        if isinstance(attr, staticmethod):
            return frame.wrap(attr.__func__, None)
        if isinstance(attr, classmethod):
            return MethodValue(owner_value, attr.__func__)
        if of_class:                                         # functions and properties come back unbound
            if isinstance(attr, (types.FunctionType, property, types.BuiltinFunctionType)) or attr is object.__init__:
                return frame.wrap(attr, None)
            if isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                return frame.wrap(attr, None)
        else:
            if isinstance(attr, types.FunctionType):
                return MethodValue(self.obj, attr)
            if isinstance(attr, property):
                if attr.fget is None:
                    raise user_error(AttributeError, f"property {name!r} of {owner.__name__!r} object has no getter")
                return FunctionValue(attr.fget).call(frame, [self.obj], {})
            if attr is object.__init__:
                return frame.wrap(object.__init__, None)   # modelled as a no-op (builtins_table)
            if isinstance(attr, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                return MethodValue(self.obj, attr)         # a C method called with obj first (call_method)
            if isinstance(attr, types.BuiltinFunctionType):
                return frame.wrap(attr, None)              # object.__new__ and friends: static
        getter = python_function(type(attr), "__get__")
        if getter is not None:                               # a descriptor written in Python
            instance = Const(None) if of_class else self.obj
            return FunctionValue(getter).call(frame, [frame.wrap(attr, None), instance, owner_value], {})
        if not hasattr(type(attr), "__get__"):               # a plain class attribute, read (and guarded) there
            return frame.wrap(attr, AttrSource(frame.tracer.ref_source(klass), name))
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"super().{name} ({type(attr).__name__})")
