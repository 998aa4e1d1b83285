"""The closed set of symbolic values the tracer pushes on its stack.

Values are plain data: what they are (a constant, a tensor node, a list of values, a module...)
and where they came from (`source`, when they were read from the frame). Behaviour lives in
tables elsewhere (calls.py, attributes.py, operators.py) keyed by value class, not in deep class
hierarchies.
"""
from __future__ import annotations

import types
from typing import Any, Optional

from .sources import Source


class Value:
    __slots__ = ("source",)

    def __init__(self, source: Optional[Source] = None):
        self.source = source

    def python_type(self) -> type:
        raise NotImplementedError

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__ if k != "source")
        return f"{type(self).__name__}({fields})"


class Const(Value):
    """An immutable Python value known while tracing (numbers, str, None, dtype, Size, slices...)."""
    __slots__ = ("value",)

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)


class TensorValue(Value):
    """A tensor in the graph: its fx node and a FakeTensor carrying shape/dtype/device."""
    __slots__ = ("node", "example")

    def __init__(self, node, example, source=None):
        super().__init__(source)
        self.node = node
        self.example = example

    def python_type(self):
        return type(self.example)


class SymValue(Value):
    """A symbolic size (SymInt / SymBool / SymFloat) under dynamic shapes: an fx node computing it at
    run time and the symbolic example. Python uses that need a concrete value specialize it, which
    adds a shape guard."""
    __slots__ = ("node", "example")

    def __init__(self, node, example, source=None):
        super().__init__(source)
        self.node = node
        self.example = example

    def python_type(self):
        import torch
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}.get(type(self.example), int)


class SliceValue(Value):
    """A slice whose bounds are not all constants (e.g. `x[:, :T]` with a symbolic T)."""
    __slots__ = ("start", "stop", "step")

    def __init__(self, start: Value, stop: Value, step: Value, source=None):
        super().__init__(source)
        self.start, self.stop, self.step = start, stop, step

    def python_type(self):
        return slice


class SeqValue(Value):
    """tuple, list, namedtuple or torch.Size-like sequence of values. `cls` is the Python type."""
    __slots__ = ("items", "cls")

    def __init__(self, items: list, cls: type = tuple, source=None):
        super().__init__(source)
        self.items = list(items)
        self.cls = cls

    def python_type(self):
        return self.cls

    @property
    def is_list(self) -> bool:
        return issubclass(self.cls, list)


class DictValue(Value):
    """dict / OrderedDict with constant keys; `items` maps real keys to values."""
    __slots__ = ("items", "cls")

    def __init__(self, items: dict, cls: type = dict, source=None):
        super().__init__(source)
        self.items = dict(items)
        self.cls = cls

    def python_type(self):
        return self.cls


class SetValue(Value):
    """set / frozenset of constants."""
    __slots__ = ("items", "cls")

    def __init__(self, items, cls: type = set, source=None):
        super().__init__(source)
        self.items = list(dict.fromkeys(items))
        self.cls = cls

    def python_type(self):
        return self.cls


class FunctionValue(Value):
    """A real Python function whose body we inline when it is called."""
    __slots__ = ("fn",)

    def __init__(self, fn: types.FunctionType, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self):
        return types.FunctionType


class CellValue(Value):
    """A closure cell created while tracing (or a real cell's contents we track)."""
    __slots__ = ("contents",)

    def __init__(self, contents: Optional[Value] = None, source=None):
        super().__init__(source)
        self.contents = contents

    def python_type(self):
        return types.CellType


class ClosureValue(Value):
    """A function made by MAKE_FUNCTION while tracing."""
    __slots__ = ("code", "globals", "defaults", "kwdefaults", "closure", "qualname", "attrs")

    def __init__(self, code, globals, defaults=(), kwdefaults=None, closure=(), qualname="", source=None):
        super().__init__(source)
        self.code = code
        self.globals = globals
        self.defaults = tuple(defaults)
        self.kwdefaults = dict(kwdefaults or {})
        self.closure = tuple(closure)
        self.qualname = qualname or code.co_name
        self.attrs: dict = {}     # function attributes set while tracing (functools.wraps metadata)

    def python_type(self):
        return types.FunctionType


class CallableValue(Value):
    """A callable we model by table rather than by inlining: builtins, torch functions, classes."""
    __slots__ = ("fn",)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self):
        return type(self.fn)


class ModuleValue(Value):
    """An nn.Module instance from the user's program."""
    __slots__ = ("module",)

    def __init__(self, module, source=None):
        super().__init__(source)
        self.module = module

    def python_type(self):
        return type(self.module)


class NewModuleValue(ModuleValue):
    """A tensor-free module built while tracing (an activation made in forward). It is real, so
    its forward is inlined like any module's; it has no source, and code that would hand it out
    of the trace (return it, store it) cannot: each eager call makes a new one."""
    __slots__ = ()


class ObjectValue(Value):
    """Any other existing Python object; attributes are read one by one (and guarded)."""
    __slots__ = ("obj",)

    def __init__(self, obj, source=None):
        super().__init__(source)
        self.obj = obj

    def python_type(self):
        return type(self.obj)


class NewExceptionValue(ObjectValue):
    """An exception object made while tracing (`raise KeyError(k)`, or one an op raised and an
    except block caught). Code that rebuilds it makes a fresh one, as each eager run does."""
    __slots__ = ()

    def __init__(self, exc: BaseException):
        super().__init__(exc)


class NewObjectValue(Value):
    """An instance of a plain Python class created while tracing (e.g. a dataclass to return).
    `attrs` is its instance __dict__. For a subclass of dict / OrderedDict (transformers'
    ModelOutput) `items` holds its dict contents, in order (dict_subclass.py models them);
    it is None for every other class."""
    __slots__ = ("cls", "attrs", "items")

    def __init__(self, cls: type, attrs: Optional[dict] = None, items: Optional[dict] = None, source=None):
        super().__init__(source)
        self.cls = cls
        self.attrs = dict(attrs or {})
        self.items = None if items is None else dict(items)

    def children(self) -> list:
        """The values this object holds: attribute values, then dict values."""
        return [*self.attrs.values(), *(self.items or {}).values()]

    def python_type(self):
        return self.cls


class MethodValue(Value):
    """`obj.name` looked up as a method: `fn` is a Python function (inlined with obj as self) or
    a method name string for objects whose methods we model by table (tensors, lists, dicts...)."""
    __slots__ = ("obj", "fn")

    def __init__(self, obj: Value, fn, source=None):
        super().__init__(source)
        self.obj = obj
        self.fn = fn

    def python_type(self):
        return types.MethodType


class SuperValue(Value):
    """`super()` / `super(cls, obj)`: attribute lookups start after `cls` in `type(obj)`'s MRO."""
    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Value, source=None):
        super().__init__(source)
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super


class IteratorValue(Value):
    """An iterator over values known while tracing (loops are unrolled)."""
    __slots__ = ("items", "pos")

    def __init__(self, items, source=None):
        super().__init__(source)
        self.items = list(items)
        self.pos = 0

    def python_type(self):
        return type(iter(()))

    def next(self) -> Optional[Value]:
        if self.pos >= len(self.items):
            return None
        self.pos += 1
        return self.items[self.pos - 1]


class GradModeValue(Value):
    """torch.no_grad() / torch.enable_grad() / torch.set_grad_enabled(b) as a context manager
    (`enabled=None`: contextlib.nullcontext(), which does nothing)."""
    __slots__ = ("enabled", "previous")

    def __init__(self, enabled: bool, source=None):
        super().__init__(source)
        self.enabled = enabled
        self.previous: Optional[bool] = None

    def python_type(self):
        return object


class AutocastValue(Value):
    """torch.autocast(...) as a context manager: the state it switches `device` to, and (once
    entered) the traced state it restores on exit."""
    __slots__ = ("device", "enabled", "dtype", "cache", "previous")

    def __init__(self, device: str, enabled: bool, dtype, cache: bool, source=None):
        super().__init__(source)
        self.device, self.enabled, self.dtype, self.cache = device, enabled, dtype, cache
        self.previous: Optional[tuple] = None

    def python_type(self):
        import torch
        return torch.autocast


class NullValue(Value):
    """The NULL CPython pushes before a callable (PUSH_NULL, LOAD_GLOBAL with the low bit set)."""
    __slots__ = ()

    def python_type(self):
        return type(None)


class UndefinedValue(Value):
    """What LOAD_FAST_AND_CLEAR pushes for a local that is not bound."""
    __slots__ = ()

    def python_type(self):
        return type(None)


NULL = NullValue()
UNDEFINED = UndefinedValue()


def is_const(v: Value, *types_) -> bool:
    return isinstance(v, Const) and (not types_ or isinstance(v.value, types_))
