"""What Python operators do to symbolic values: arithmetic, comparison, identity, membership,
truthiness. Constants fold, tensors become graph nodes, containers follow Python semantics."""
from __future__ import annotations

import dis
import enum
import operator
import types
from typing import Any

import torch

from . import breaks, numpy_values
from .breaks import TracedException, Unsupported, user_error
from .values import (CallableValue, Const, DictValue, FunctionValue, ModuleValue, NewObjectValue, ObjectValue,
                     SeqValue, SetValue, SymValue, TensorValue, Value, ClosureValue, MethodValue)

GRAPH_VALUES = (TensorValue, SymValue)
_SPECIALIZE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}

BINARY_OPS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift, "@": operator.matmul,
    "*": operator.mul, "%": operator.mod, "|": operator.or_, "**": operator.pow, ">>": operator.rshift,
    "-": operator.sub, "/": operator.truediv, "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior, "**=": operator.ipow,
    ">>=": operator.irshift, "-=": operator.isub, "/=": operator.itruediv, "^=": operator.ixor,
}
BINARY_OP_BY_ARG = {i: BINARY_OPS[symbol] for i, (_, symbol) in enumerate(dis._nb_ops)}
INPLACE_TO_PLAIN = {operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
                    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imul: operator.mul,
                    operator.imod: operator.mod, operator.ior: operator.or_, operator.ipow: operator.pow,
                    operator.irshift: operator.rshift, operator.isub: operator.sub,
                    operator.itruediv: operator.truediv, operator.ixor: operator.xor}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}


def python_value(v: Value) -> Any:
    """The real Python value of a value made only of constants; raises Unsupported otherwise."""
    if isinstance(v, Const):
        return v.value
    if isinstance(v, SymValue):   # a Python use of a symbolic size: specialize it (ShapeEnv adds a guard)
        return _SPECIALIZE[type(v.example)](v.example)
    if isinstance(v, SeqValue):
        items = [python_value(i) for i in v.items]
        if v.cls in (tuple, list):
            return v.cls(items)
        if hasattr(v.cls, "_make"):
            return v.cls._make(items)
        return v.cls(items)
    if isinstance(v, SetValue):
        return v.cls(python_value(i) for i in v.items)
    if isinstance(v, DictValue):
        return v.cls((k, python_value(x)) for k, x in v.items.items())
    real = real_object(v)
    if real is not None and (isinstance(v, (FunctionValue, CallableValue)) or v.source is not None
                             and _value_is_stable(real)):
        return real               # compared by identity / equality only
    from .values import IteratorValue
    if isinstance(v, IteratorValue):
        return iter([python_value(x) for x in v.items[v.pos:]])
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"needs the Python value of a {type(v).__name__}")


def _value_is_stable(obj) -> bool:
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


def is_python_constant(v: Value) -> bool:
    try:
        python_value(v)
        return True
    except Unsupported:
        return False


def _fold(fn, *args):
    try:
        return Const(fn(*args))
    except Exception as e:
        raise TracedException(e, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}")


def binary(tracer, fn, a: Value, b: Value) -> Value:
    if isinstance(a, GRAPH_VALUES) or isinstance(b, GRAPH_VALUES):
        if not all(isinstance(x, (TensorValue, SymValue, Const)) or is_python_constant(x) for x in (a, b)):
            raise Unsupported(breaks.UNSUPPORTED_VALUE, f"{fn.__name__} of a tensor and {_kind(a if isinstance(b, TensorValue) else b)}")
        if not isinstance(a, TensorValue):
            fn = INPLACE_TO_PLAIN.get(fn, fn)     # `n += t` with n a number: numbers are immutable, n = n + t
        return tracer.graph.call("call_function", fn, (_as_arg(a), _as_arg(b)), {})
    plain = INPLACE_TO_PLAIN.get(fn, fn)
    if fn is not plain and isinstance(a, Const) and numpy_values.is_array(a.value):
        return numpy_values.fold(tracer.current_frame, fn, [a, b], {})    # `a += 1` changes the array itself
    a, b = _as_sequence_if_paired(a, b), _as_sequence_if_paired(b, a)
    if isinstance(a, SeqValue) and isinstance(b, SeqValue) and plain is operator.add:
        if a.is_list and fn is operator.iadd:
            if not b.is_list and not issubclass(b.cls, tuple):
                raise Unsupported(breaks.UNSUPPORTED_VALUE, "list += non-sequence")
            tracer.mutate(a)
            a.items.extend(b.items)
            return a
        if (a.is_list) != (b.is_list):
            raise Unsupported(breaks.USER_EXCEPTION, "can only concatenate list to list / tuple to tuple")
        return SeqValue(a.items + b.items, list if a.is_list else tuple)
    if isinstance(a, SeqValue) and isinstance(b, Const) and plain is operator.mul and isinstance(b.value, int):
        return SeqValue(a.items * b.value, list if a.is_list else tuple)
    if isinstance(b, SeqValue) and isinstance(a, Const) and plain is operator.mul and isinstance(a.value, int):
        return SeqValue(b.items * a.value, list if b.is_list else tuple)
    if isinstance(a, DictValue) and isinstance(b, DictValue) and plain is operator.or_:
        if fn is operator.ior:
            tracer.mutate(a)
            a.items.update(b.items)
            return a
        return DictValue({**a.items, **b.items}, a.cls)
    if isinstance(a, SetValue) and isinstance(b, SetValue) and plain in (operator.or_, operator.and_, operator.sub,
                                                                           operator.xor):
        return SetValue([Const(v) for v in plain(set(python_value(a)), set(python_value(b)))], a.cls)
    if is_python_constant(a) and is_python_constant(b) and not isinstance(a, SeqValue) or \
            (isinstance(a, Const) and is_python_constant(b)):
        return _fold(plain, python_value(a), python_value(b))
    if is_python_constant(a) and is_python_constant(b):
        return _fold(plain, python_value(a), python_value(b))
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"{fn.__name__} of {_kind(a)} and {_kind(b)}")


def _as_sequence_if_paired(v: Value, other: Value) -> Value:
    """`acc + (x,)` with `acc = ()`: a tuple/list constant next to a sequence value becomes one."""
    if isinstance(other, SeqValue) and isinstance(v, Const) and type(v.value) in (tuple, list):
        return SeqValue([Const(i) for i in v.value], type(v.value))
    return v


def _as_arg(v: Value) -> Value:
    return v if isinstance(v, (TensorValue, SymValue, Const)) else Const(python_value(v))


def _kind(v: Value) -> str:
    if isinstance(v, Const):
        return type(v.value).__name__
    return type(v).__name__.replace("Value", "").lower() or "value"


def unary(tracer, fn, v: Value) -> Value:
    if isinstance(v, GRAPH_VALUES):
        return tracer.graph.call("call_function", fn, (v,), {})
    if isinstance(v, Const):
        return _fold(fn, v.value)
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"{fn.__name__} of {_kind(v)}")


def compare(tracer, fn, a: Value, b: Value) -> Value:
    if isinstance(a, GRAPH_VALUES) or isinstance(b, GRAPH_VALUES):
        other = b if isinstance(a, GRAPH_VALUES) else a
        if isinstance(other, (TensorValue, SymValue, Const)) or is_python_constant(other):
            return tracer.graph.call("call_function", fn, (_as_arg(a), _as_arg(b)), {})
        if fn in (operator.eq, operator.ne):   # tensor == module/None-like object: identity-based in eager too
            return Const((fn is operator.ne))
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"comparing a tensor with {_kind(other)}")
    if is_python_constant(a) and is_python_constant(b):
        return _fold(fn, python_value(a), python_value(b))
    if fn in (operator.eq, operator.ne):
        same = identical(a, b)
        if same is not None and (same or _default_eq(a) and _default_eq(b)):
            return Const(same if fn is operator.eq else not same)
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"{fn.__name__} of {_kind(a)} and {_kind(b)}")


def _default_eq(v: Value) -> bool:
    cls = v.python_type()
    return cls.__eq__ is object.__eq__ or isinstance(v, (FunctionValue, ClosureValue, ModuleValue, CallableValue))


def real_object(v: Value):
    """The real object behind a value that stands for an existing object, else None."""
    if isinstance(v, ModuleValue):
        return v.module
    if isinstance(v, ObjectValue):
        return v.obj
    if isinstance(v, (FunctionValue, CallableValue)):
        return v.fn
    return None


def identical(a: Value, b: Value):
    """`a is b`, when it can be decided (None when it cannot)."""
    if a is b:
        return True
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a.example is b.example
    ra, rb = real_object(a), real_object(b)
    if ra is not None and rb is not None:
        return ra is rb
    if isinstance(a, Const) and isinstance(b, Const):
        return a.value is b.value
    if isinstance(a, Const) and a.value is None or isinstance(b, Const) and b.value is None:
        return False   # a non-constant value is never None
    if type(a) is not type(b) and not (ra is not None or rb is not None):
        return False
    if isinstance(a, (SeqValue, DictValue, NewObjectValue, TensorValue, SetValue, MethodValue)) and \
            isinstance(b, (SeqValue, DictValue, NewObjectValue, TensorValue, SetValue, MethodValue)):
        if isinstance(a, SeqValue) and isinstance(b, SeqValue) and not a.is_list and a.source is None:
            return None   # tuples: identity is an implementation detail
        return False
    if ra is not None or rb is not None:
        return False
    return None


_SCALARS = (int, float, bool, str, bytes, complex, type(None))


def _equal_only_if_identical(a: Value, b: Value) -> bool:
    """Is `a == b` decided by identity? Yes when one side compares by identity (object.__eq__)
    and the other does too or is a builtin scalar (whose __eq__ gives NotImplemented)."""
    try:
        types_ = (a.python_type(), b.python_type())
    except NotImplementedError:
        return False
    by_identity = [t.__eq__ is object.__eq__ for t in types_]
    return any(by_identity) and all(i or t in _SCALARS for i, t in zip(by_identity, types_))


def is_op(a: Value, b: Value) -> bool:
    same = identical(a, b)
    if same is None:
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"`is` between {_kind(a)} and {_kind(b)}")
    return same


def truthy(tracer, v: Value) -> bool:
    if isinstance(v, Const):
        try:
            return bool(v.value)
        except Exception as e:
            raise TracedException(e, f"bool() raised {type(e).__name__}: {e}")
    if isinstance(v, TensorValue):
        raise Unsupported(breaks.DATA_DEPENDENT_BRANCH, "branching on a tensor's value")
    if isinstance(v, SymValue):
        return bool(python_value(v))      # branching on a size: guarded by ShapeEnv
    if isinstance(v, (SeqValue, DictValue, SetValue)):
        return len(v.items) > 0
    if isinstance(v, ModuleValue):
        if hasattr(type(v.module), "__len__") or hasattr(type(v.module), "__bool__"):
            from .calls import builtin_len
            return builtin_len(tracer, v) > 0
        return True
    from .dict_subclass import call_dunder, is_dict_object
    if is_dict_object(v):
        if hasattr(v.python_type(), "__bool__"):
            return truthy(tracer, call_dunder(tracer.current_frame, v, "__bool__", []))
        return python_value(call_dunder(tracer.current_frame, v, "__len__", [])) > 0
    if isinstance(v, NewObjectValue):
        if hasattr(v.cls, "__bool__") or hasattr(v.cls, "__len__"):
            raise Unsupported(breaks.UNSUPPORTED_VALUE, f"truth value of a {v.cls.__name__}")
        return True
    cls = v.python_type()
    if hasattr(cls, "__bool__") and cls not in (type, ) or hasattr(cls, "__len__") and cls is not type:
        if isinstance(v, (FunctionValue, ClosureValue, CallableValue, MethodValue)):
            return True
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"truth value of a {cls.__name__}")
    return True


def _real_set_contains(tracer, container: ObjectValue, item: Value) -> bool:
    """`key in S` for an existing set S (e.g. a registry of classes): decided now, and guarded
    so that adding or removing `key` later recaptures."""
    from .guards import MembershipMatch
    key = python_value(item)
    try:
        found = key in container.obj
    except TypeError as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: {e}")
    tracer.add_guard(MembershipMatch(container.source, key, found))
    return found


def contains(tracer, container: Value, item: Value) -> bool:
    if isinstance(container, TensorValue):
        raise Unsupported(breaks.TENSOR_TO_PYTHON, "`in` on a tensor")
    if isinstance(container, DictValue):
        return python_value(item) in container.items
    if isinstance(container, ModuleValue) and isinstance(container.module, torch.nn.ModuleDict):
        from .attributes import guard_module_keys
        guard_module_keys(tracer, container)
        return python_value(item) in container.module._modules
    if isinstance(container, (SeqValue, SetValue)):
        for x in container.items:
            same = identical(x, item)
            if same:
                return True
            if isinstance(x, TensorValue) or isinstance(item, TensorValue):
                if same is False and (isinstance(x, TensorValue) != isinstance(item, TensorValue)):
                    continue
                raise Unsupported(breaks.TENSOR_TO_PYTHON, "`in` compares tensors by value")
            if is_python_constant(x) and is_python_constant(item):
                if python_value(x) == python_value(item):
                    return True
                continue
            if same is None or not _equal_only_if_identical(x, item):
                raise Unsupported(breaks.UNSUPPORTED_VALUE, f"`in` compares {_kind(item)} with {_kind(x)} by __eq__")
        return False
    if isinstance(container, (ObjectValue, NewObjectValue)):
        import inspect
        import types as _types
        cls = container.python_type()
        method = inspect.getattr_static(cls, "__contains__", None)
        if isinstance(method, _types.FunctionType):
            from .calls import call
            return truthy(tracer, call(tracer.current_frame, FunctionValue(method), [container, item], {}))
        from .dict_subclass import call_dunder, is_dict_object
        if is_dict_object(container):
            return truthy(tracer, call_dunder(tracer.current_frame, container, "__contains__", [item]))
        if isinstance(container, ObjectValue) and type(container.obj) in (set, frozenset) \
                and container.source is not None:
            return _real_set_contains(tracer, container, item)
    if isinstance(container, Const):
        try:
            return python_value(item) in container.value
        except Unsupported:
            raise
        except Exception as e:
            raise TracedException(e, f"`in` raised {type(e).__name__}: {e}")
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"`in` on {_kind(container)}")
