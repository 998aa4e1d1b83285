"""`copy.copy` and `copy.deepcopy` as modelled callables (transformers deep-copies configs).

What the `copy` module does is reproduced on symbolic values, step for step where user code could
observe it:

* values of the types `copy` treats as atomic (numbers, strings, tuples for a shallow copy,
  classes, functions...) are their own copy; other immutable constants (torch.Size, a device)
  are copied for real (nothing of the user's runs);
* lists, tuples, dicts (OrderedDicts too), sets and namedtuples are copied as `copy` does: a new
  container, its items shared (shallow) or copied recursively with a memo (deep), so two
  references to one object stay two references to one copy;
* an instance of a Python class (made while tracing, or an existing one read from the frame)
  whose class leaves the copy protocol to `object` (no `__deepcopy__`, `__reduce__`,
  `__reduce_ex__`, `__getstate__` or `__getnewargs__` of its own, the plain instance layout) is
  copied by `object.__reduce_ex__(4)`'s recipe: `cls.__new__(cls)`, then its instance dict
  copied into the new one and its slots set with `setattr`. The attribute lookups `copy` makes on
  the instance (`__deepcopy__`, `__reduce_ex__`, `__getstate__`, `__setstate__`...) are made
  symbolically, so a class's own `__getattr__` / `__getattribute__` runs as in eager. A Python
  `__copy__` on the class is inlined.

Refused (DL019 copy-not-modelled): tensors (eager's deepcopy makes a new leaf on a copy of the
whole storage, keeping requires_grad and .grad, which a graph op cannot; copy.copy shares the
storage), modules, a class with its own copy protocol (`__deepcopy__` would need the memo, keyed
by ids the trace does not have), a memo passed in, and anything else not listed above.
"""
from __future__ import annotations

import copy
import copyreg
import types
from typing import Optional

from . import semantics
from .breaks import COPY_NOT_MODELLED, TracedException, Unsupported
from .compat import HEAPTYPE
from .modelled import models
from .values.base import Const, MethodValue, Value, fold
from .values.containers import DictValue, SeqValue, SetValue
from .values.functions import FunctionValue
from .values.objects import MISSING, NewObjectValue, ObjectValue, slot_member

_SHALLOW_ATOMIC = frozenset(t for t, f in copy._copy_dispatch.items() if f is copy._copy_immutable)
_DEEP_ATOMIC = frozenset(t for t, f in copy._deepcopy_dispatch.items() if f is copy._deepcopy_atomic)
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)      # Python 3.11+


@models(copy.copy)
def _copy(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        return NotImplemented
    return shallow_copy(frame, args[0])


@models(copy.deepcopy)
def _deepcopy(frame, args, kwargs):
    memo = args[1] if len(args) > 1 else kwargs.get("memo", Const(None))
    if len(args) + len(kwargs) > 2 or not (isinstance(memo, Const) and memo.value is None):
        raise Unsupported(COPY_NOT_MODELLED, "copy.deepcopy with a memo passed in")
    return DeepCopy(frame).copy(args[0])


# ============================================================================================
# copy.copy
# ============================================================================================

def shallow_copy(frame, v: Value) -> Value:
    """`copy.copy(v)`."""
    cls = v.python_type()
    if cls in _SHALLOW_ATOMIC or issubclass(cls, type):
        return v
    if isinstance(v, Const):
        return Const(fold(copy.copy, v.value))
    if isinstance(v, SeqValue) and (cls is list or _is_namedtuple(cls)):
        return SeqValue(list(v.items), cls)
    if isinstance(v, DictValue):
        return DictValue(dict(v.items), v.cls)
    if isinstance(v, SetValue) and cls is set:
        return SetValue(list(v.items), cls)
    if _is_plain_instance(v):
        copier = getattr(cls, "__copy__", None)        # looked up on the class, as copy.copy does
        if isinstance(copier, types.FunctionType):
            return FunctionValue(copier).call(frame, [v], {})
        if copier is not None:
            raise _refused(v, f"its class defines __copy__ ({type(copier).__name__})")
        dict_state, slot_state = reduce_instance(frame, v)
        return reconstruct(frame, cls, dict_state, slot_state)
    raise _refused(v)


# ============================================================================================
# copy.deepcopy
# ============================================================================================

class DeepCopy:
    """One `copy.deepcopy` call: the memo maps what a value stands for (its identity) to its copy,
    so shared references stay shared in the copy, as with the real memo."""

    def __init__(self, frame):
        self.frame = frame
        self.memo: dict = {}

    def copy(self, v: Value) -> Value:
        cls = v.python_type()
        if cls in _DEEP_ATOMIC or issubclass(cls, type):
            return v
        key = _memo_key(v)
        if key in self.memo:
            return self.memo[key]
        result = self._copy(v, cls, key)
        if result is not v:
            self.memo[key] = result
        return result

    def _copy(self, v: Value, cls: type, key) -> Value:
        if isinstance(v, Const):
            return Const(fold(copy.deepcopy, v.value))
        if isinstance(v, SeqValue) and cls is list:
            result = self.memo[key] = SeqValue([], list)       # memoized first: it may contain itself
            result.items = [self.copy(item) for item in v.items]
            return result
        if isinstance(v, SeqValue) and cls is tuple:
            items = [self.copy(item) for item in v.items]
            if key in self.memo:                               # a list inside held the tuple itself
                return self.memo[key]
            return v if all(a is b for a, b in zip(items, v.items)) else SeqValue(items, tuple)
        if isinstance(v, SeqValue) and _is_namedtuple(cls):
            return SeqValue([self.copy(item) for item in v.items], cls)
        if isinstance(v, DictValue):
            result = self.memo[key] = DictValue({}, v.cls)
            result.items = {k: self.copy(item) for k, item in v.items.items()}
            return result
        if isinstance(v, SetValue):
            return SetValue([self.copy(item) for item in v.items], cls)
        if isinstance(v, MethodValue) and isinstance(v.fn, types.FunctionType):
            return MethodValue(self.copy(v.obj), v.fn)
        if _is_plain_instance(v):
            if _lookup(self.frame, v, "__deepcopy__") is not MISSING:
                raise _refused(v, "its class defines __deepcopy__")
            dict_state, slot_state = reduce_instance(self.frame, v)
            result = self.memo[key] = _new_instance(cls)
            dict_state = None if dict_state is None else {name: self.copy(value) for name, value in dict_state.items()}
            slot_state = {name: self.copy(value) for name, value in slot_state.items()}
            return reconstruct(self.frame, cls, dict_state, slot_state, result)
        raise _refused(v)


def _memo_key(v: Value):
    """What the real memo's `id(x)` is: the value itself, since a trace has one value per object it
    reads (wrap.py) — without pinning which object that is, so the graph serves any object with
    the same structure."""
    return id(v)


# ============================================================================================
# object.__reduce_ex__(4) and copy._reconstruct for instances of Python classes
# ============================================================================================

def _is_plain_instance(v: Value) -> bool:
    """An instance of a Python class with the plain layout: made while tracing (not a dict
    subclass), or an existing one read from the frame (not a module, class, function...)."""
    if type(v) is NewObjectValue:
        return v.contents() is None
    if type(v) is ObjectValue and v.source is not None:
        real = v.real_object()
        return not isinstance(real, (type, types.ModuleType, types.FunctionType, types.MethodType, BaseException)) \
            and _plain_layout(type(real))
    return False


def _plain_layout(cls: type) -> bool:
    """Instances are made by object.__new__ with nothing of a C class's layout: every class in the
    MRO is written in Python (or is object)."""
    return cls.__new__ is object.__new__ and all(k is object or k.__flags__ & HEAPTYPE for k in cls.__mro__)


def reduce_instance(frame, v: Value) -> tuple[Optional[dict], dict]:
    """What `copy` gets from `v.__reduce_ex__(4)` when the class leaves it to object: the instance
    dict (None when empty) and the slots that are set. The lookups object's code makes on the
    instance are made here too (a class's `__getattr__` sees them); anything of the class's own
    in the protocol is refused."""
    cls = v.python_type()
    if cls in copyreg.dispatch_table:
        raise _refused(v, "copyreg has a reducer for its class")
    if not _plain_layout(cls):
        raise _refused(v, "its class is not made by object.__new__")
    if not _is_bound(_lookup(frame, v, "__reduce_ex__"), object.__reduce_ex__):
        raise _refused(v, "its class defines __reduce_ex__")
    _lookup(frame, v, "__reduce__")
    if getattr(cls, "__reduce__", None) is not object.__reduce__:
        raise _refused(v, "its class defines __reduce__")
    for name in ("__getnewargs_ex__", "__getnewargs__"):
        if _lookup(frame, v, name) is not MISSING:
            raise _refused(v, f"its class defines {name}")
    if _OBJECT_GETSTATE is not None and not _is_bound(_lookup(frame, v, "__getstate__"), _OBJECT_GETSTATE):
        raise _refused(v, "its class defines __getstate__")
    dict_state = _dict_state(frame, v)
    slot_state = {}
    for name in copyreg._slotnames(cls):
        value = _lookup(frame, v, name)
        if value is not MISSING:
            slot_state[name] = value
    return dict_state, slot_state


def _dict_state(frame, v: Value) -> Optional[dict]:
    if isinstance(v, NewObjectValue):
        state = {k: value for k, value in v.attrs.items() if slot_member(v.cls, k) is None}
    else:
        view = v.instance_dict_value(frame) if hasattr(v.real_object(), "__dict__") else None
        if view is not None and not isinstance(view, DictValue):
            raise _refused(v, "its instance dict holds values the tracer cannot read")
        state = {} if view is None else dict(view.items)
    return state or None


def _new_instance(cls: type) -> NewObjectValue:
    return NewObjectValue(cls)             # copyreg.__newobj__: cls.__new__(cls), object's (checked)


def reconstruct(frame, cls: type, dict_state: Optional[dict], slot_state: dict,
                result: Optional[NewObjectValue] = None) -> NewObjectValue:
    """copy._reconstruct: a new instance, its dict updated directly, its slots set with setattr
    (the class's own __setattr__ included); a `__setstate__` found on it is not modelled."""
    result = result if result is not None else _new_instance(cls)
    if dict_state is None and not slot_state:
        return result
    if _lookup(frame, result, "__setstate__") is not MISSING:
        raise Unsupported(COPY_NOT_MODELLED, f"copy of a {cls.__qualname__}: its class defines __setstate__")
    if dict_state is not None:
        result.attrs.update(dict_state)
    for name, value in slot_state.items():
        semantics.store_attr(frame, result, name, value)
    return result


def _lookup(frame, v: Value, name: str):
    """`getattr(v, name, MISSING)`, symbolically."""
    try:
        return semantics.load_attr(frame, v, name)
    except TracedException as e:
        if isinstance(e.exc, AttributeError):
            return MISSING
        raise


def _is_bound(found, fn) -> bool:
    return isinstance(found, MethodValue) and found.fn is fn


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields") and "__dict__" not in dir(cls) and all(
        name not in k.__dict__ for k in cls.__mro__[:-2] for name in ("__copy__", "__deepcopy__", "__reduce__",
                                                                      "__reduce_ex__", "__getstate__"))


def _refused(v: Value, why: str = "") -> Unsupported:
    try:
        what = v.python_type().__qualname__
    except NotImplementedError:
        what = type(v).__name__
    return Unsupported(COPY_NOT_MODELLED, f"copy of a {what}" + (f": {why}" if why else ""))
