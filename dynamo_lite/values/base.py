"""The protocol every symbolic value follows, and the values every other kind builds on.

A `Value` stands for one Python object of the traced program. Each kind of value is one class
that knows, in one place, everything the tracer does with that kind:

* what it is: `python_type()`, `as_python()` (the real value, when it is made only of
  constants), `real_object()` (the existing object it stands for), `identity()` (what `is`
  compares);
* Python's protocols on it, each taking the interpreter frame that runs the instruction:
  `load_attr`, `store_attr`, `del_attr`, `call`, `call_method`, `getitem`, `setitem`, `delitem`,
  `unpack` (iterate to the end), `get_iter`, `truthy`, `length`, `contains`, `unary`, `binary` /
  `rbinary` (the reflected operand), `compare`;
* how generated code rebuilds it after the graph ran (`rebuild(emitter)`) and which values it
  holds (`children()`, walked to find the tensors and shared objects the rebuild needs).

The defaults here say "not modelled" (an `Unsupported` graph break with a kind from the breaks
registry) or follow Python's generic rules. Opcode handlers do not call these methods
directly: they go through `semantics`, which adds Python's protocol ordering (reflected
operators, `__eq__` fallbacks, pending attribute writes). Values reach what lies above them
(wrapping a real object, inlining a call, the graph) through the frame they are given, so this
package imports nothing above it.
"""
from __future__ import annotations

import enum
import inspect
import operator
import types
from collections import OrderedDict
from typing import Any, Optional

import torch

from .. import config
from ..breaks import (BUILTIN_TYPE_METHOD, C_FUNCTION, INSTRUCTION_LIMIT, NEEDS_REAL_OBJECT, NOT_ITERABLE_MODEL,
                      TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_MUTATION,
                      UNSUPPORTED_VALUE, BreakKind, TracedException, Unsupported, user_error)
from ..compat import HEAPTYPE
from ..fallback import skip
from ..guards import AttrAbsent
from ..modelled import call_modelled
from ..pyops import plain
from ..sources import Source

# Immutable values that become graph constants and are guarded by value.
CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented),
                  torch.dtype, torch.device, torch.layout, torch.memory_format, range, enum.Enum,
                  types.CodeType)


def is_constant(value) -> bool:
    """A value made only of immutable constants (tuples and frozensets of them included, and
    `inspect` signatures whose defaults are constants)."""
    if isinstance(value, CONSTANT_TYPES):
        return True
    if type(value) in (tuple, frozenset, torch.Size):
        return all(is_constant(v) for v in value)
    if type(value) is slice:            # x[a:b] with tensors for bounds is not
        return is_constant(value.start) and is_constant(value.stop) and is_constant(value.step)
    if isinstance(value, inspect.Signature):
        return all(is_constant(p) for p in value.parameters.values())
    if isinstance(value, inspect.Parameter):
        return value.default is inspect.Parameter.empty or is_constant(value.default)
    return False


# What an `inspect.Signature` hands out: its `parameters` (a read-only view of a dict nothing else
# can reach) and that view's own views. Held by a Const only when they come from a constant
# signature, they are as immutable as it is (a mappingproxy in general is not: `cls.__dict__`).
_SIGNATURE_PARTS = (types.MappingProxyType, type(OrderedDict().keys()), type(OrderedDict().values()),
                    type(OrderedDict().items()), type({}.keys()), type({}.values()), type({}.items()))


def reaches(values, target: "Value") -> bool:
    """Is `target` among `values` or what they hold, transitively (a cycle a rebuild could not
    close)?"""
    seen, stack = set(), list(values)
    while stack:
        v = stack.pop()
        if v is target:
            return True
        if id(v) not in seen:
            seen.add(id(v))
            stack.extend(c for c in v.children() if isinstance(c, Value))
    return False


def kind_name(v: "Value") -> str:
    """How messages name the kind of a value: the Python type for constants."""
    if isinstance(v, Const):
        return type(v.value).__name__
    return type(v).__name__.replace("Value", "").lower() or "value"



def _type_name(value: "Value") -> str:
    """The user's name for what a value models (`Cfg`, `dict_items`), not the tracer's class."""
    try:
        return value.python_type().__name__
    except Exception:
        return type(value).__name__


def unknown_call_kind(fn, owner: Optional[type] = None) -> BreakKind:
    """Which registry kind a call the tracer cannot model is: a method of a built-in type (or a
    built-in function), a C function or method of a library, or else (Python code, a callable
    object) an unknown call."""
    if isinstance(fn, types.FunctionType) or isinstance(fn, types.MethodType) \
            and isinstance(fn.__func__, types.FunctionType):
        return UNKNOWN_CALL
    if owner is None:
        bound_to = getattr(fn, "__self__", None)
        owner = getattr(fn, "__objclass__", None) or (
            type(bound_to) if bound_to is not None and not isinstance(bound_to, types.ModuleType) else None)
    if getattr(fn, "__module__", None) == "builtins" or getattr(owner, "__module__", None) == "builtins":
        return BUILTIN_TYPE_METHOD
    if isinstance(fn, _C_CALLABLES):
        return C_FUNCTION
    return UNKNOWN_CALL


_C_CALLABLES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                types.MethodWrapperType, types.ClassMethodDescriptorType)

class Value:
    __slots__ = ("source",)

    def __init__(self, source: Optional[Source] = None):
        self.source = source

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__ if k != "source")
        return f"{type(self).__name__}({fields})"

    # ---- what it is ------------------------------------------------------------------------
    def python_type(self) -> type:
        raise NotImplementedError

    def as_python(self) -> Any:
        """The real Python value, for values made only of constants; Unsupported otherwise."""
        raise Unsupported(NEEDS_REAL_OBJECT, f"needs the Python value of a {_type_name(self)}")

    def real_object(self):
        """The existing object this value stands for (a module, a function, an object read from
        the frame), else None."""
        return None

    def key_object(self):
        """The existing object this value stands for as a dict key or set element, when that object
        hashes and compares by identity (pinned by an identity guard); None when there is none
        (an object made while tracing), so the key is an `IdentityKey`."""
        return None

    def identity(self) -> Optional[int]:
        """What `is` compares, when it is known: the id of the object the value stands for (for a
        value made while tracing with an identity of its own, the id of the value itself)."""
        real = self.real_object()
        return None if real is None else id(real)

    def is_python_constant(self) -> bool:
        try:
            self.as_python()
            return True
        except Unsupported:
            return False

    # A tensor or a symbolic size: a value the graph computes.
    is_graph_value = False

    def graph_arg(self):
        """(fx node structure, example structure) when passed to a graph op: graph values, constants
        and containers of them override this."""
        raise Unsupported(UNSUPPORTED_VALUE, f"cannot pass a {type(self).__name__} to a graph op")

    def children(self) -> tuple:
        """The values this value holds (for walking: tensors to output, objects built twice)."""
        return ()

    # ---- attributes ----------------------------------------------------------------------
    def load_attr(self, frame, name: str) -> "Value":
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{type(self).__name__}.{name}")

    def store_attr(self, frame, name: str, value: "Value") -> None:
        raise Unsupported(UNSUPPORTED_MUTATION, f"setting attribute {name!r} on {type(self).__name__}")

    def del_attr(self, frame, name: str) -> None:
        raise Unsupported(UNSUPPORTED_MUTATION, f"deleting attribute {name!r} of {type(self).__name__}")

    # ---- calls --------------------------------------------------------------------------------
    def call(self, frame, args: list, kwargs: dict) -> "Value":
        raise Unsupported(UNKNOWN_CALL, f"calling a {type(self).__name__}")

    def call_method(self, frame, method, args: list, kwargs: dict) -> "Value":
        """`self.method(*args)`: `method` is a name (for kinds whose methods are a table) or the
        function found on the class (a Python function is inlined with self first)."""
        if not isinstance(method, str):
            result = call_modelled(method, frame, [self, *args], kwargs)
            if result is not NotImplemented:
                return result
        if isinstance(method, types.FunctionType):
            return frame.wrap(method, None).call(frame, [self, *args], kwargs)
        raise Unsupported(unknown_call_kind(method, self.python_type()),
                          f"method {getattr(method, '__name__', method)} of {self.python_type().__name__}")

    # ---- containers -------------------------------------------------------------------------
    def getitem(self, frame, key: "Value") -> "Value":
        raise Unsupported(UNSUPPORTED_VALUE, f"indexing a {type(self).__name__}")

    def setitem(self, frame, key: "Value", value: "Value") -> None:
        raise Unsupported(UNSUPPORTED_MUTATION, f"item assignment on {type(self).__name__}")

    def delitem(self, frame, key: "Value") -> None:
        raise Unsupported(UNSUPPORTED_MUTATION, f"del on {type(self).__name__}")

    def unpack(self, frame) -> list:
        """Iterate to the end: the items, as a list of values."""
        raise Unsupported(NOT_ITERABLE_MODEL, f"iterating over a {_type_name(self)}")

    def get_iter(self, frame):
        """`iter(self)`: an iterator value; NotImplemented means an iterator over `unpack()`."""
        return NotImplemented

    def next(self, frame) -> Optional["Value"]:
        """`next(self)` on an iterator: the next item, or None when it is exhausted."""
        if not hasattr(self.python_type(), "__next__"):
            raise user_error(TypeError, f"'{self.python_type().__name__}' object is not an iterator")
        raise Unsupported(UNSUPPORTED_VALUE, f"next() of a {self.python_type().__name__}")

    def as_mapping(self, frame) -> dict:
        """The key -> value pairs `{**self}` and `dict(self)` copy."""
        raise Unsupported(UNSUPPORTED_VALUE, f"** of {type(self).__name__}")

    def length(self, frame) -> "Value":
        raise Unsupported(UNSUPPORTED_VALUE, f"len() of {type(self).__name__}")

    def contains(self, frame, item: "Value") -> bool:
        raise Unsupported(UNSUPPORTED_VALUE, f"`in` on {kind_name(self)}")

    # ---- truth and operators ------------------------------------------------------------------
    def truthy(self, frame) -> bool:
        cls = self.python_type()
        if hasattr(cls, "__bool__") and cls is not type or hasattr(cls, "__len__") and cls is not type:
            raise Unsupported(UNSUPPORTED_VALUE, f"truth value of a {cls.__name__}")
        return True

    def unary(self, frame, fn) -> "Value":
        raise Unsupported(UNSUPPORTED_VALUE, f"{fn.__name__} of {kind_name(self)}")

    def binary(self, frame, fn, other: "Value"):
        """`self <op> other`; NotImplemented lets the other operand try (`rbinary`)."""
        return NotImplemented

    def rbinary(self, frame, fn, other: "Value"):
        """`other <op> self`, after `other` gave NotImplemented."""
        return NotImplemented

    def compare(self, frame, fn, other: "Value"):
        """`self <cmp> other`; NotImplemented: the generic rules apply (identity for ==)."""
        return NotImplemented

    # ---- generated code -------------------------------------------------------------------------
    def rebuild(self, em) -> None:
        """Emit code that pushes this value (after the graph ran): reload it from where it came
        from, or build it anew."""
        if self.source is not None:
            em.load_source(self.source)
            return
        raise Unsupported(UNSUPPORTED_VALUE, f"cannot return a {type(self).__name__} from captured code")

    def rebuild_method(self, em, method: "MethodValue") -> None:
        """Emit code that pushes `method`, a method of this value looked up by name."""
        em.value(self)
        em.load_attr(method.fn)


class Const(Value):
    """An immutable Python value known while tracing (numbers, str, None, dtype, Size, slices...)."""
    __slots__ = ("value",)

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def as_python(self):
        return self.value

    def identity(self):
        return id(self.value)

    def rebuild(self, em):
        em.const(self.value)

    def graph_arg(self):
        value = self.value
        if type(value).__module__ == "numpy" and hasattr(value, "item") and not hasattr(value, "__len__"):
            value = value.item()       # a numpy scalar: torch takes it as the Python number, which a graph can spell
        return value, value

    def truthy(self, frame):
        return _fold(bool, self.value)

    def load_attr(self, frame, name):
        try:
            value = getattr(self.value, name)
        except Exception as e:
            raise TracedException(e, f"{type(self.value).__name__}.{name}: {type(e).__name__}: {e}")
        if isinstance(value, (types.BuiltinMethodType, types.MethodType)) or callable(value) \
                and not isinstance(value, type) \
                and not isinstance(inspect.getattr_static(type(self.value), name, None), property):
            return MethodValue(self, name)         # (a property's value is data: `Parameter.annotation`)
        if isinstance(self.value, inspect.Signature) and isinstance(value, _SIGNATURE_PARTS):
            return Const(value)                       # `sig.parameters`
        return frame.wrap(value, None)

    def call_method(self, frame, method, args, kwargs):
        name = getattr(method, "__name__", method)
        if not isinstance(self.value, PURE_CONSTANT_TYPES):
            raise Unsupported(UNKNOWN_CALL, f"{type(self.value).__name__}.{name}")
        args = [consumed(frame, a) for a in args]
        if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            method_fn = inspect.getattr_static(type(self.value), name, None)
            if isinstance(method_fn, types.FunctionType) and skip.call_rule(method_fn) == skip.INLINE:
                # a Python method the skip rules trace (Signature.bind): its code runs on the values
                return frame.wrap(method_fn, None).call(frame, [self, *args], kwargs)
            raise Unsupported(TENSOR_TO_PYTHON if any(v.is_graph_value for v in [*args, *kwargs.values()])
                              else UNSUPPORTED_VALUE, f"{type(self.value).__name__}.{name}() of a traced value")
        bound = getattr(self.value, name)
        result = _fold(bound, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})
        if isinstance(self.value, _SIGNATURE_PARTS) and isinstance(result, _SIGNATURE_PARTS):
            return Const(result)                      # `sig.parameters.items()`
        return frame.wrap(result, None)

    def call(self, frame, args, kwargs):
        raise user_error(TypeError, f"'{type(self.value).__name__}' object is not callable")

    def getitem(self, frame, key):
        return Const(_fold(operator.getitem, self.value, key.as_python()))

    def unpack(self, frame):
        value = self.value
        if isinstance(value, range) and len(value) > config.instruction_limit:
            raise Unsupported(INSTRUCTION_LIMIT, f"range of {len(value)}")
        if isinstance(value, (range, tuple, str, bytes, torch.Size, frozenset, *_SIGNATURE_PARTS)):
            return [Const(x) for x in value]
        raise user_error(TypeError, f"'{type(value).__name__}' object is not iterable")

    def length(self, frame):
        return Const(_fold(len, self.value))

    def contains(self, frame, item):
        return _fold(operator.contains, self.value, item.as_python())

    def unary(self, frame, fn):
        return Const(_fold(fn, self.value))

    def binary(self, frame, fn, other):
        if is_data(other):
            return Const(_fold(plain(fn), self.value, other.as_python()))
        return NotImplemented       # `2 * array`: the array's own operator (a new array, not a constant)

    def rbinary(self, frame, fn, other):
        if is_data(other):
            return Const(_fold(plain(fn), other.as_python(), self.value))
        return NotImplemented

    def compare(self, frame, fn, other):
        if other.is_python_constant() and not is_numpy_valued(other):
            return Const(_fold(fn, self.value, other.as_python()))
        return NotImplemented


def is_data(v: "Value") -> bool:
    """A value made only of constants that an operator may fold with: not an existing object,
    whose class's reflected operator (user code) must run in the trace, not on the real object."""
    return isinstance(v, Const) or v.real_object() is None and not is_numpy_valued(v) and v.is_python_constant()


# Immutable values whose methods are pure: calling one on constants is folded.
PURE_CONSTANT_TYPES = (str, bytes, int, float, complex, bool, tuple, frozenset, range, slice, torch.Size, torch.dtype,
                       torch.device, type(None), inspect.Signature, inspect.Parameter, *_SIGNATURE_PARTS)


def _fold(fn, *args, **kwargs):
    """fn(*args) on real values while tracing; an exception is the program's (it may catch it)."""
    try:
        return fn(*args, **kwargs)
    except Unsupported:
        raise
    except Exception as e:
        raise TracedException(e, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}")


fold = _fold


def consumed(frame, v: "Value") -> "Value":
    """An argument that a C function iterates (`"-".join(gen)`, `math.fsum(gen)`): an iterator's
    items are taken now, as the call takes them, into an iterator over known items (whose real
    value is then an iterator of constants); other values as they are."""
    if isinstance(v, Const) or not hasattr(v.python_type(), "__next__"):
        return v
    return IteratorValue(v.unpack(frame))


class MethodValue(Value):
    """`obj.name` looked up as a method: `fn` is the function found on the class (a Python
    function is inlined with obj as self, a C method called with obj first) or a method name for
    kinds whose methods are a table (tensors, lists, dicts...). Calling it is `obj.call_method`."""
    __slots__ = ("obj", "fn")

    def __init__(self, obj: Value, fn, source=None):
        super().__init__(source)
        self.obj = obj
        self.fn = fn

    def python_type(self):
        return types.MethodType

    def children(self):
        return (self.obj,)

    def identity(self):
        return None if self.source is None else super().identity()

    def call(self, frame, args, kwargs):
        return self.obj.call_method(frame, self.fn, args, kwargs)

    def load_attr(self, frame, name):
        if name == "__self__":
            return self.obj
        if name == "__func__" and isinstance(self.fn, types.FunctionType):
            return frame.wrap(self.fn, None)
        if name in ("__name__", "__qualname__") and not isinstance(self.fn, str):
            return Const(getattr(self.fn, name))
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"method.{name}")

    def truthy(self, frame):
        return True

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        elif isinstance(self.fn, str):
            self.obj.rebuild_method(em, self)
        elif isinstance(self.fn, types.FunctionType):
            em.call_const(types.MethodType, [lambda: em.const(self.fn), lambda: em.value(self.obj)])
        elif hasattr(self.fn, "__get__"):          # a slot such as object.__getattribute__
            em.call_const(self.fn.__get__, [lambda: em.value(self.obj)])
        else:
            super().rebuild(em)


class SelfIterator(Value):
    """What every iterator value shares: its own identity, always true, `iter(it)` is `it`, and
    iterating to the end is taking `next()` until it runs out."""
    __slots__ = ()

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return True

    def get_iter(self, frame):
        return self

    def unpack(self, frame):
        items = []
        while (item := self.next(frame)) is not None:
            items.append(item)
        return items


class IteratorValue(SelfIterator):
    """An iterator over items known while tracing (loops are unrolled): a list's, a tuple's, a
    range's, a tensor's rows. `items` may be the very list a list value changes in place
    (`sharing`), so items appended while the loop runs are seen, as a list_iterator sees them.
    `cls` is the type eager's iterator has."""
    __slots__ = ("items", "pos", "cls")

    def __init__(self, items, source=None, cls: type = type(iter(()))):
        super().__init__(source)
        self.items = list(items)
        self.pos = 0
        self.cls = cls

    @classmethod
    def sharing(cls, items: list, python_type: type) -> "IteratorValue":
        """An iterator over `items` as they are when each step is taken (not a copy)."""
        it = cls((), cls=python_type)
        it.items = items
        return it

    def python_type(self):
        return self.cls

    def next(self, frame) -> Optional[Value]:
        """The next item, or None when exhausted (for good: a list that grows later is not seen)."""
        if self.pos >= len(self.items):
            self.items, self.pos = [], 0
            return None
        self.pos += 1
        return self.items[self.pos - 1]

    def unpack(self, frame):
        items = self.items[self.pos:]
        self.items, self.pos = [], 0
        return items

    def length(self, frame):
        raise user_error(TypeError, f"object of type '{self.cls.__name__}' has no len()")

    def load_attr(self, frame, name):
        if name in ("__next__", "__iter__"):
            return MethodValue(self, name)
        return super().load_attr(frame, name)

    def call_method(self, frame, method, args, kwargs):
        if method == "__iter__":
            return self
        if method == "__next__":
            item = self.next(frame)
            if item is None:
                raise user_error(StopIteration)
            return item
        return super().call_method(frame, method, args, kwargs)

    def as_python(self):
        return iter([x.as_python() for x in self.items[self.pos:]])

    def children(self):
        return tuple(self.items[self.pos:])

    def truthy(self, frame):
        return True

    def rebuild(self, em):
        rest = self.items[self.pos:]
        if self.cls is type(iter([])):
            em.call_const(iter, [lambda: em.build_list(rest)])
        else:
            em.call_const(iter, [lambda: em.build_tuple(rest)])


class NullValue(Value):
    """The NULL CPython pushes before a callable (PUSH_NULL, LOAD_GLOBAL with the low bit set)."""
    __slots__ = ()

    def python_type(self):
        return type(None)

    def rebuild(self, em):
        em.emit("PUSH_NULL")


class UndefinedValue(NullValue):
    """What LOAD_FAST_AND_CLEAR pushes for a local that is not bound: a NULL on CPython's stack too
    (an inlined comprehension saves an unbound variable so; a break inside the comprehension
    rebuilds it as a NULL, which resume functions push back like any NULL)."""
    __slots__ = ()

    def python_type(self):
        return type(None)


def pinned_real(v: "Value"):
    """The real object a fold on `v` depends on: an existing object (its identity guarded where
    that matters), else the value of a constant; Unsupported when there is neither."""
    real = v.key_object()
    if real is None:
        real = v.real_object()
    return real if real is not None else v.as_python()


class LazyValue:
    """A root-frame argument or closure value not yet wrapped: wrapping (and guarding) happens on
    first use, so unused inputs add no guards. Not a Value: it never reaches the stack."""
    __slots__ = ("value", "source")

    def __init__(self, value, source):
        self.value = value
        self.source = source


NULL = NullValue()
UNDEFINED = UndefinedValue()


def is_same(a: Value, b: Value) -> Optional[bool]:
    """`a is b`, when it can be decided (None when it cannot: a tuple made while tracing)."""
    if a is b:
        return True
    for x, y in ((a, b), (b, a)):     # `v is None` is decided without v's identity (nothing pinned)
        if isinstance(x, Const) and x.value is None:
            return isinstance(y, Const) and y.value is None   # a value that is not a constant is never None
    ia, ib = a.identity(), b.identity()
    if ia is not None and ib is not None:
        return ia == ib
    return None


_SCALARS = (int, float, bool, str, bytes, complex, type(None))


def equal_only_if_identical(a: Value, b: Value) -> bool:
    """Is `a == b` decided by identity? Yes when one side compares by identity (object.__eq__)
    and the other does too or is a builtin scalar (whose __eq__ gives NotImplemented)."""
    try:
        types_ = (a.python_type(), b.python_type())
    except NotImplementedError:
        return False
    by_identity = [t.__eq__ is object.__eq__ for t in types_]
    return any(by_identity) and all(i or t in _SCALARS for i, t in zip(by_identity, types_))


def missing_attribute(frame, obj: Value, name: str, generic: bool = False) -> TracedException:
    """The AttributeError eager Python raises for `obj.name`, with a guard that the attribute is
    still missing when the graph is reused (the code may catch it: getattr's default, hasattr)."""
    if obj.source is not None:
        frame.tracer.add_guard(AttrAbsent(obj.source, name, generic))
    real = obj.real_object()
    what = f"type object '{real.__name__}'" if isinstance(real, type) else f"'{obj.python_type().__name__}' object"
    return user_error(AttributeError, f"{what} has no attribute {name!r}")




def attribute_not_modelled(v: Value, name: str) -> Unsupported:
    """The error for `v.name` where the value's kind has no model for `name` (for kinds whose
    `python_type()` is exactly the type of the object they stand for): the AttributeError eager
    raises when that is a C type whose instances have no __dict__ and which has no such attribute
    (what such an object has cannot change, so nothing needs a guard: `hasattr(d, n)` on a
    dict), else a graph break."""
    try:
        cls = v.python_type()
    except NotImplementedError:
        cls = None
    if isinstance(cls, type) and not cls.__flags__ & HEAPTYPE and not cls.__dictoffset__ \
            and type(cls) is type and not hasattr(cls, name):
        return user_error(AttributeError, f"'{cls.__name__}' object has no attribute {name!r}")
    return Unsupported(UNSUPPORTED_ATTRIBUTE, f"{type(v).__name__}.{name}" if cls is None else f"{cls.__name__}.{name}")


def is_numpy_valued(v: Value) -> bool:
    """A numpy array or scalar (values/arrays): its own operators decide what `2 * a` or `t == a` is."""
    return getattr(v.python_type(), "__module__", None) == "numpy"


def is_const(v: Value, *types_) -> bool:
    return isinstance(v, Const) and (not types_ or isinstance(v.value, types_))
