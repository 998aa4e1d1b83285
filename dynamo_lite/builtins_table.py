"""Python builtins (and a few library functions) the tracer models, one small handler each,
registered with `@models(builtin)` (modelled.py).

A handler takes `(frame, args, kwargs)` — symbolic values — and returns a value; it works through
the values' own protocol (`length`, `truthy`, `unpack`, `load_attr`...) and the semantics
facade, so it needs to know little about the kinds of values it gets.
"""
from __future__ import annotations

import abc
import builtins
import collections
import dataclasses
import functools
import inspect
import operator
import os
import sys
import types
import typing
from typing import Optional

import torch

import torch.utils._foreach_utils
import torch.utils._python_dispatch
import torch.utils._pytree

from . import semantics
from .breaks import (PRINT_OR_LOG, TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_VALUE, TracedException, Unsupported,
                     user_error)
from .guards import NoModesMatch, QueryMatch
from .code_facts import STACK_ARG_PREFIX
from .fallback import skip
from .modelled import models
from .pyops import BINARY_OPS, COMPARE_OPS
from .values import itertools_values  # noqa: F401  (registers the itertools as modelled callables)
from .values.callables import CallableValue
from .values.base import Const, IteratorValue, MethodValue, Value, fold, is_const, is_constant, pinned_real
from .values.containers import (ContainerValue, DictValue, DictViewValue, SeqValue, SetValue, mapping_pairs,
                                real_operand)
from .values.dict_objects import NewDictObjectValue, dict_base
from .values.functions import ClosureValue, FunctionValue, OperatorGetterValue, PartialValue
from .values.iterators import (CallIterator, LazyIterator, ReversedSequenceIterator, make_enumerate, make_filter,
                               make_map, make_zip)
from .values.objects import NewObjectValue, ObjectValue, SuperValue, python_function
from .values.tensors import SymValue, TensorValue


def real_class_arg(v: Value):
    """The class (or tuple of classes) passed to isinstance/issubclass."""
    real = v.real_object()
    if isinstance(real, (type, types.UnionType)):
        return real
    if isinstance(v, SeqValue):
        return tuple(real_class_arg(i) for i in v.items)
    if isinstance(v, Const) and isinstance(v.value, (type, tuple)):
        return v.value
    raise Unsupported(UNSUPPORTED_VALUE, "isinstance with a non-class argument")


def _fold_args(fn, args, kwargs):
    return fold(fn, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})


# ---- attributes and types ----------------------------------------------------------------------

@models(len)
def _len(frame, args, kwargs):
    return semantics.length(frame, args[0])


@models(isinstance)
def _isinstance(frame, args, kwargs):
    return Const(_is_instance(frame, args[0], real_class_arg(args[1])))


def _is_instance(frame, obj: Value, cls) -> bool:
    """isinstance(obj, cls): a metaclass's own __instancecheck__ written in Python runs on the
    object; otherwise the object's class decides (ABCMeta's check is its __subclasscheck__)."""
    if isinstance(cls, tuple):
        return any(_is_instance(frame, obj, c) for c in cls)
    check = python_function(type(cls), "__instancecheck__")
    if check is not None and check is not abc.ABCMeta.__instancecheck__:   # ABCMeta's: its subclass check
        if skip.call_rule(check) != skip.INLINE:
            # a library's metaclass check (typing's TypedDict and Protocol classes): run for real
            # on an object that is a constant (it may read the object), else not modelled
            real = _constant_or_missing(obj)
            if real is not _MISSING:
                return fold(isinstance, real, cls)
        return FunctionValue(check).call(frame, [frame.wrap(cls, None), obj], {}).truthy(frame)
    return fold(issubclass, obj.python_type(), cls)


_MISSING = object()


def _constant_or_missing(v: Value):
    """The real value of a constant, or of a dict / list of constants made in the trace (a copy:
    nothing can change it behind the fold); _MISSING otherwise."""
    try:
        real = v.as_python()
    except Unsupported:
        return _MISSING
    return real if is_constant(real) or type(real) in (dict, list) and v.source is None else _MISSING


@models(issubclass)
def _issubclass(frame, args, kwargs):
    return Const(fold(issubclass, real_class_arg(args[0]), real_class_arg(args[1])))


def _is_attribute_error(e: Unsupported) -> bool:
    return isinstance(e, TracedException) and isinstance(e.exc, AttributeError)


@models(getattr)
def _getattr(frame, args, kwargs):
    try:
        return semantics.load_attr(frame, args[0], args[1].as_python())
    except Unsupported as e:
        if len(args) > 2 and _is_attribute_error(e):
            return args[2]
        raise


@models(hasattr)
def _hasattr(frame, args, kwargs):
    try:
        semantics.load_attr(frame, args[0], args[1].as_python())
        return Const(True)
    except Unsupported as e:
        if _is_attribute_error(e):
            return Const(False)
        raise


@models(setattr)
def _setattr(frame, args, kwargs):
    semantics.store_attr(frame, args[0], args[1].as_python(), args[2])
    return Const(None)


@models(delattr)
def _delattr(frame, args, kwargs):
    semantics.del_attr(frame, args[0], args[1].as_python())
    return Const(None)


@models(type)
def _type(frame, args, kwargs):
    if len(args) != 1:
        raise Unsupported(UNKNOWN_CALL, "type() with 3 arguments")
    cls = args[0].python_type()
    # Read through a reference to the class itself, so its attributes are guarded like any
    # object's: `type(self).counter` must not be baked in as the value it had while tracing; and
    # the one value of the class in this trace, so a write to it is seen by later reads.
    return frame.wrap(cls, frame.tracer.ref_source(cls))


@models(callable)
def _callable(frame, args, kwargs):
    """callable(v): whether v's type has a __call__ slot (its class, not v, is looked at: a class
    object is callable through its metaclass, an instance only if its class defines __call__)."""
    return Const(any("__call__" in vars(k) for k in args[0].python_type().__mro__))


@models(id)
def _id(frame, args, kwargs):
    """id() of an existing object: its identity, pinned by a guard. Objects made in the trace have
    no id yet."""
    v = args[0]
    if isinstance(v, ObjectValue) or isinstance(v, CallableValue):
        return Const(id(pinned_real(v)))
    raise Unsupported(UNKNOWN_CALL, "id() of a value made in the captured code")


@models(vars)
def _vars(frame, args, kwargs):
    if not args and not kwargs:
        return _locals(frame, args, kwargs)
    if len(args) != 1 or kwargs:
        raise user_error(TypeError, f"vars expected at most 1 argument, got {len(args)}")
    return semantics.load_attr(frame, args[0], "__dict__")


@models(types.SimpleNamespace)
def _simple_namespace(frame, args, kwargs):
    """types.SimpleNamespace(**kwargs) (and a mapping first, on 3.13): an object made in the trace."""
    if len(args) > 1:
        raise user_error(TypeError, f"SimpleNamespace expected at most 1 positional argument, got {len(args)}")
    attrs = {}
    if args:
        attrs.update({str(k): v for k, v in mapping_pairs(frame, args[0])})
    attrs.update(kwargs)
    return NewObjectValue(types.SimpleNamespace, attrs)


def _fold_on_real(fn):
    def handler(frame, args, kwargs):
        return frame.wrap(fold(fn, *[pinned_real(a) for a in args], **{k: pinned_real(v) for k, v in kwargs.items()}),
                          None)
    return handler


# typing's introspection of annotations (huggingface_hub's strict dataclasses check field types)
models(typing.get_origin)(_fold_on_real(typing.get_origin))
models(typing.get_args)(_fold_on_real(typing.get_args))


@models(typing.cast, torch.jit.annotate)
def _cast(frame, args, kwargs):
    """cast(type, value) and TorchScript's annotate(type, value): the value itself."""
    return args[1] if len(args) == 2 and not kwargs else NotImplemented


def _getenv_arguments(key, default=None):
    return key, default


@models(os.getenv)
def _getenv(frame, args, kwargs):
    """`os.getenv(key, default)` with constant arguments: the environment as it is now, asked again
    by a guard (QueryMatch) on every call. Libraries read a flag this way on hot paths
    (transformers' `torch_compilable_check`: TRANSFORMERS_DISABLE_TORCH_CHECK)."""
    if not all(is_const(v) for v in [*args, *kwargs.values()]):
        return NotImplemented
    try:
        key, default = _getenv_arguments(*[a.as_python() for a in args],
                                         **{k: v.as_python() for k, v in kwargs.items()})
    except TypeError:
        return NotImplemented
    if not isinstance(key, str) or not (default is None or isinstance(default, (str, int, float, bool))):
        return NotImplemented
    result = os.getenv(key, default)
    frame.tracer.add_guard(QueryMatch(os.getenv, result, args=(key, default)))
    return Const(result)


def _check_tensor_all_arguments(cond, message=None):
    return cond, message


def _check_tensor_all_with_arguments(error_type, cond, message=None):
    return error_type, cond, message


@models(torch._check_tensor_all)
def _check_tensor_all(frame, args, kwargs):
    """`torch._check_tensor_all(cond)` (transformers' `torch_compilable_check` while compiling)."""
    try:
        cond, message = _check_tensor_all_arguments(*args, **kwargs)
    except TypeError:
        return NotImplemented
    return _check_all_true(frame, RuntimeError, cond, message)


@models(torch._check_tensor_all_with)
def _check_tensor_all_with(frame, args, kwargs):
    try:
        error_type, cond, message = _check_tensor_all_with_arguments(*args, **kwargs)
    except TypeError:
        return NotImplemented
    try:
        error = error_type.as_python()          # a class (CallableValue of a builtin, a Const)
    except Exception:                           # noqa: BLE001 -- no real object: traced as Python
        return NotImplemented
    return _check_all_true(frame, error, cond, message)


def _check_all_true(frame, error, cond, message):
    """A bool tensor checked without a message: a graph node that raises eager's exception when an
    element is false, rather than a break at the `.item()` torch's Python code reads it with.
    Traced as Python otherwise (a message callable; another dtype: its TypeError), and where
    Python side effects are pending after writes into the graph's inputs (they are replayed after
    the graph, and must come first: `check_may_follow_effects`)."""
    if not (isinstance(cond, TensorValue) and cond.example.dtype is torch.bool
            and (message is None or is_const(message, type(None)))
            and isinstance(error, type) and getattr(builtins, error.__name__, None) is error
            and issubclass(error, Exception) and not issubclass(error, Warning)) \
            or not frame.tracer.graph.check_may_follow_effects(frame.tracer.effects):
        return NotImplemented
    frame.tracer.graph.check_all_true(cond, error.__name__, bool(frame.tracer.effects))
    return Const(None)


@models(print)
def _print(frame, args, kwargs):
    raise Unsupported(PRINT_OR_LOG, "print()")


# ---- iteration -----------------------------------------------------------------------------------
# Consumers take items one at a time (semantics.iterate), so they stop where eager stops (any() at
# the first true item); the lazy builtins are iterator values (values/iterators.py) whose items
# are computed when they are asked for. A call with a wrong signature raises eager's TypeError,
# got from the real builtin called with stand-in arguments.

def _signature_error(fn, args, kwargs, stand_in=()):
    """Raise the TypeError eager raises for this call's shape of arguments (fn(*stand-ins))."""
    fold(fn, *[stand_in] * len(args), **{k: stand_in for k in kwargs})
    raise Unsupported(UNKNOWN_CALL, f"{fn.__name__}() with these arguments")


def _key_function(kwargs) -> Optional[Value]:
    key = kwargs.get("key")
    return None if key is None or is_const(key, type(None)) else key


def _minmax(fn, better, symbolic):
    """min()/max() as CPython runs them: each item's key, compared with `<` / `>` against the best
    so far (a tensor comparison is a data-dependent branch, as bool(tensor) is in eager). Of
    integers some of which are symbolic sizes, the result stays symbolic (torch.sym_max), as
    under TorchDynamo: the same integer, without specializing the sizes."""
    def handler(frame, args, kwargs):
        if set(kwargs) - {"key", "default"} or not args or len(args) > 1 and "default" in kwargs:
            _signature_error(fn, args, kwargs, 0)
        key = _key_function(kwargs)
        values = args if len(args) > 1 else args[0].items if isinstance(args[0], SeqValue) else []
        if key is None and values and _symbolic_ints(values):
            return functools.reduce(lambda a, b: frame.tracer.graph.call("call_function", symbolic, (a, b), {}), values)
        items = semantics.iterate(frame, args[0]) if len(args) == 1 else iter(args)
        best = best_key = None
        for item in items:
            k = item if key is None else key.call(frame, [item], {})
            if best is None or semantics.truthy(frame, semantics.compare(frame, better, k, best_key)):
                best, best_key = item, k
        if best is None:
            if "default" in kwargs:
                return kwargs["default"]
            fold(fn, [])                    # eager's ValueError for an empty iterable
        return best
    return handler


def _symbolic_ints(values) -> bool:
    """Integers (not bools), at least one of them a symbolic size."""
    return any(isinstance(v, SymValue) for v in values) and all(
        isinstance(v, SymValue) and v.python_type() is int or is_const(v, int) and not is_const(v, bool) for v in values)


models(min)(_minmax(min, operator.lt, torch.sym_min))
models(max)(_minmax(max, operator.gt, torch.sym_max))


@models(abs)
def _abs(frame, args, kwargs):
    return semantics.unary(frame, operator.abs, args[0])


@models(sum)
def _sum(frame, args, kwargs):
    """sum(iterable, start): CPython adds a leading run of numbers with its own fast paths (3.12
    compensates float rounding), the rest with `+` one by one."""
    if not 1 <= len(args) <= 2 or set(kwargs) - {"start"} or len(args) == 2 and kwargs:
        _signature_error(sum, args, kwargs, [])
    total = args[1] if len(args) > 1 else kwargs.get("start", Const(0))
    if is_const(total, str, bytes, bytearray):
        fold(sum, [], total.value)          # eager's TypeError: use ''.join
    numbers, generic = [], False
    for item in semantics.iterate(frame, args[0]):
        if not generic and is_const(total, int, float, complex) and is_const(item, int, float, complex):
            numbers.append(item.value)
            continue
        if numbers:
            total, numbers = Const(fold(sum, numbers, total.value)), []
        generic = True
        total = semantics.binary(frame, operator.add, total, item)
    return Const(fold(sum, numbers, total.value)) if numbers else total


@models(any)
def _any(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        _signature_error(any, args, kwargs)
    return Const(any(semantics.truthy(frame, item) for item in semantics.iterate(frame, args[0])))


@models(all)
def _all(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        _signature_error(all, args, kwargs)
    return Const(all(semantics.truthy(frame, item) for item in semantics.iterate(frame, args[0])))


@models(range)
def _range(frame, args, kwargs):
    return Const(_fold_args(range, args, {}))


models(enumerate)(make_enumerate)
models(zip)(make_zip)
models(map)(make_map)
models(filter)(make_filter)


@models(iter)
def _iter(frame, args, kwargs):
    if kwargs or not 1 <= len(args) <= 2:
        _signature_error(iter, args, kwargs)
    if len(args) == 1:
        return semantics.get_iter(frame, args[0])
    if not _callable(frame, args[:1], {}).value:
        raise user_error(TypeError, "iter(v, w): v must be callable")
    return CallIterator(args[0], args[1])


@models(next)
def _next(frame, args, kwargs):
    if kwargs or not 1 <= len(args) <= 2:
        _signature_error(next, args, kwargs)
    it = args[0]
    try:
        item = it.next(frame)
    except TracedException as e:
        if len(args) > 1 and isinstance(e.exc, StopIteration):
            return args[1]
        raise
    if item is None:
        if len(args) > 1:
            return args[1]
        raise TracedException(it.stop_iteration() if isinstance(it, LazyIterator) else StopIteration())
    return item


# What eager's reversed() returns for the builtin types whose values unpack to their items.
_REVERSED_TYPES = {cls: type(reversed(cls())) for cls in (list, tuple, str, bytes, dict)}
_REVERSED_TYPES[range] = type(reversed(range(0)))


@models(reversed)
def _reversed(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        _signature_error(reversed, args, kwargs)
    v = args[0]
    cls = v.python_type()
    method = inspect.getattr_static(cls, "__reversed__", None)
    if isinstance(v, TensorValue):             # Tensor.__reversed__: the tensor flipped, not an iterator
        return v if v.example.dim() == 0 else frame.tracer.graph.call("call_method", "flip", (v, Const(0)), {})
    if isinstance(method, types.FunctionType):
        return FunctionValue(method).call(frame, [v], {})
    if method is None and python_function(cls, "__getitem__") is not None \
            and python_function(cls, "__len__") is not None:
        return ReversedSequenceIterator(v, semantics.length(frame, v).as_python())
    if isinstance(v, (Const, SeqValue, DictValue)) and (cls in _REVERSED_TYPES or issubclass(cls, tuple)):
        return IteratorValue(list(reversed(semantics.unpack(frame, v))), cls=_REVERSED_TYPES.get(cls, reversed))
    if isinstance(v, DictViewValue):
        return v.call_method(frame, "__reversed__", [], {})
    if isinstance(v, ContainerValue) and method is not None:       # deque, OrderedDict: their own
        return semantics.load_attr(frame, v, "__reversed__").call(frame, [], {})
    if method is None and not hasattr(cls, "__getitem__"):
        raise user_error(TypeError, f"'{cls.__name__}' object is not reversible")
    raise Unsupported(UNSUPPORTED_VALUE, f"reversed() of a {cls.__name__}")


@models(sorted)
def _sorted(frame, args, kwargs):
    if len(args) != 1 or set(kwargs) - {"key", "reverse"}:
        _signature_error(sorted, args, kwargs, [])
    items = list(semantics.iterate(frame, args[0]))
    reverse = kwargs["reverse"].as_python() if "reverse" in kwargs else False
    fold(sorted, [], reverse=reverse)          # a reverse that is not an integer: eager's TypeError
    return SeqValue(semantics.sort(frame, items, _key_function(kwargs), bool(reverse)), list)


@models(tuple)
def _tuple(frame, args, kwargs):
    return SeqValue(semantics.unpack(frame, args[0]) if args else [], tuple)


@models(list)
def _list(frame, args, kwargs):
    return SeqValue(semantics.unpack(frame, args[0]) if args else [], list)


def _set(cls):
    def handler(frame, args, kwargs):
        if kwargs:
            raise user_error(TypeError, f"{cls.__name__}() takes no keyword arguments")
        if len(args) > 1:
            raise user_error(TypeError, f"{cls.__name__} expected at most 1 argument, got {len(args)}")
        # built from the real operand, as CPython builds it (a set or dict argument presizes the
        # table): the new set iterates in eager's order
        return SetValue.of_keys(fold(cls, real_operand(frame, args[0])) if args else cls(), operands=args)
    return handler


models(set)(_set(set))
models(frozenset)(_set(frozenset))


@models(locals)
def _locals(frame, args, kwargs):
    """locals() (and vars() without an argument) in a traced function: a new dict of its bound
    locals and set cells in CPython's order, as the snapshot CPython makes for a function frame.
    (Run at a graph break it would see the replacement code's variables instead.)"""
    if args or kwargs:
        return NotImplemented
    code = frame.code
    names = [*code.co_varnames, *(c for c in code.co_cellvars if c not in code.co_varnames), *code.co_freevars]
    items = {}
    for name in names:
        if name.startswith(STACK_ARG_PREFIX):      # a resume function's stack arguments are not the program's
            continue
        if name in frame.locals:
            items[name] = frame.read_local(name)
        elif name in frame.cells and frame.cells[name].contents is not None:
            items[name] = frame.cell_contents(name)
    return DictValue(items, dict)


@models(dict)
def _dict(frame, args, kwargs):
    if len(args) > 1:
        raise user_error(TypeError, f"dict expected at most 1 argument, got {len(args)}")
    items = dict(mapping_pairs(frame, args[0])) if args else {}
    items.update(kwargs)
    return DictValue(items, dict)


# ---- numbers and strings --------------------------------------------------------------------------

_TENSOR_DUNDERS = {round: "__round__", pow: "__pow__", divmod: "__divmod__"}


def _fold_builtin(fn):
    def handler(frame, args, kwargs):
        if any(isinstance(a, TensorValue) for a in args):
            if fn in _TENSOR_DUNDERS:
                return frame.tracer.graph.call("call_method", _TENSOR_DUNDERS[fn], tuple(args), kwargs)
            raise Unsupported(TENSOR_TO_PYTHON, f"{fn.__name__}(tensor)")
        return Const(_fold_args(fn, args, kwargs))
    return handler


for _fn in (round, divmod, pow, format, chr, ord):
    models(_fn)(_fold_builtin(_fn))


def _special_or_fold(fn, name: str, check):
    """`fn(v)` (repr, hash) for a value whose class defines the special method `name` in Python:
    the method inlined and its result checked as CPython checks it; otherwise folded on the value."""
    fold_it = _fold_builtin(fn)

    def handler(frame, args, kwargs):
        if len(args) == 1 and not kwargs and not isinstance(args[0], (Const, TensorValue)):
            method = python_function(args[0].python_type(), name)
            if method is not None and skip.call_rule(method) == skip.INLINE:
                return check(FunctionValue(method).call(frame, [args[0]], {}))
        return fold_it(frame, args, kwargs)
    return handler


def _repr_result(result: Value) -> Value:
    if not issubclass(result.python_type(), str):
        raise user_error(TypeError, f"__repr__ returned non-string (type {result.python_type().__name__})")
    return result


def _hash_result(result: Value) -> Value:
    """hash() of what __hash__ returned, as CPython's slot makes it: the int itself when it fits
    a Py_ssize_t (-1 read as -2), else that int's hash."""
    value = result.as_python() if result.is_python_constant() else None
    if not isinstance(value, int):
        if result.is_graph_value:
            raise Unsupported(TENSOR_TO_PYTHON, "__hash__ returned a traced integer")
        raise user_error(TypeError, "__hash__ method should return an integer")
    if not -(1 << 63) <= value < (1 << 63):        # beyond Py_ssize_t: the int's own hash
        return Const(hash(value))
    return Const(-2 if value == -1 else value)


models(repr)(_special_or_fold(repr, "__repr__", _repr_result))
models(hash)(_special_or_fold(hash, "__hash__", _hash_result))


# ---- the operator module -----------------------------------------------------------------------

def _operator_binary(fn):
    def handler(frame, args, kwargs):
        return semantics.binary(frame, fn, args[0], args[1])
    return handler


def _operator_compare(fn):
    def handler(frame, args, kwargs):
        return semantics.compare(frame, fn, args[0], args[1])
    return handler


def _operator_unary(fn):
    def handler(frame, args, kwargs):
        return semantics.unary(frame, fn, args[0])
    return handler


for _fn in BINARY_OPS.values():
    models(_fn)(_operator_binary(_fn))
for _fn in COMPARE_OPS.values():
    models(_fn)(_operator_compare(_fn))
for _fn in (operator.neg, operator.pos, operator.invert):
    models(_fn)(_operator_unary(_fn))


@models(operator.getitem)
def _operator_getitem(frame, args, kwargs):
    return semantics.getitem(frame, args[0], args[1])


@models(operator.setitem)
def _operator_setitem(frame, args, kwargs):
    semantics.setitem(frame, args[0], args[1], args[2])
    return Const(None)


@models(operator.not_)
def _operator_not(frame, args, kwargs):
    return Const(not args[0].truthy(frame))


@models(operator.truth)
def _operator_truth(frame, args, kwargs):
    return Const(args[0].truthy(frame))


# ---- object model ----------------------------------------------------------------------------------

@models(object.__setattr__)
def _object_setattr(frame, args, kwargs):
    target, name, value = args
    if isinstance(target, NewObjectValue):
        target.generic_setattr(frame, name.as_python(), value)
    elif isinstance(target, ObjectValue):
        target.store_existing_attr(frame, name.as_python(), value, bypass_setattr=True)
    else:
        raise Unsupported(UNKNOWN_CALL, f"object.__setattr__ on a {type(target).__name__}")
    return Const(None)


@models(object.__delattr__)
def _object_delattr(frame, args, kwargs):
    target, name = args
    if isinstance(target, NewObjectValue):
        target.generic_delattr(frame, name.as_python())
    elif isinstance(target, ObjectValue):
        target.delete_existing_attr(frame, name.as_python(), bypass_delattr=True)
    else:
        raise Unsupported(UNKNOWN_CALL, f"object.__delattr__ on a {type(target).__name__}")
    return Const(None)


def _check_new(base_new, cls):
    """`base_new(cls)` must work as in eager (object.__new__ refuses e.g. dict subclasses); making
    an instance without running __init__ has no side effects."""
    try:
        base_new(cls)
    except TypeError as e:
        raise TracedException(e) from None


@models(object.__new__)
def _object_new(frame, args, kwargs):
    cls = real_class_arg(args[0])
    _check_new(object.__new__, cls)
    return NewObjectValue(cls)


@models(dict.__new__)
def _dict_new(frame, args, kwargs):
    cls = real_class_arg(args[0])
    if dict_base(cls) is None:
        raise Unsupported(UNKNOWN_CALL, f"dict.__new__({getattr(cls, '__qualname__', cls)})")
    return NewDictObjectValue(cls)


@models(tuple.__new__)
def _tuple_new(frame, args, kwargs):
    cls = real_class_arg(args[0])
    return SeqValue(semantics.unpack(frame, args[1]) if len(args) > 1 else [], cls)


@models(object.__init__)
def _object_init(frame, args, kwargs):
    return Const(None)


@models(super)
def _super(frame, args, kwargs):
    if args:
        return SuperValue(real_class_arg(args[0]), args[1])
    code = frame.code                       # zero-argument form: __class__ cell and first argument
    if "__class__" not in frame.cells or not code.co_argcount:
        raise user_error(RuntimeError, "super(): no arguments")
    cls = real_class_arg(frame.cell_contents("__class__"))
    return SuperValue(cls, frame.read_local(code.co_varnames[0]))


# ---- functools, dataclasses, inspect ----------------------------------------------------------------

@models(functools.partial)
def _partial(frame, args, kwargs):
    if not args:
        raise user_error(TypeError, "type 'partial' takes at least one argument")
    func = args[0]
    if isinstance(func, PartialValue):          # partial(partial(f, a), b) is partial(f, a, b)
        return PartialValue(func.func, [*func.args, *args[1:]], {**func.keywords, **kwargs})
    return PartialValue(func, args[1:], kwargs)


def _operator_getter(cls):
    def handler(frame, args, kwargs):
        if cls is operator.methodcaller:
            if not args or not isinstance(args[0], Const) or not isinstance(args[0].value, str):
                raise user_error(TypeError, "method name must be a string")
            return OperatorGetterValue(cls, args[:1], args[1:], kwargs)
        if kwargs:
            raise user_error(TypeError, f"{cls.__name__}() takes no keyword arguments")
        if not args:
            raise user_error(TypeError, f"{cls.__name__} expected 1 argument, got 0")
        if cls is operator.attrgetter and not all(isinstance(a, Const) and isinstance(a.value, str) for a in args):
            raise user_error(TypeError, "attribute name must be a string")
        return OperatorGetterValue(cls, args)
    return handler


for _getter in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
    models(_getter)(_operator_getter(_getter))


@models(functools.reduce)
def _reduce(frame, args, kwargs):
    """functools.reduce(fn, iterable[, initial]): fn applied item by item, as the items come."""
    if kwargs or not 2 <= len(args) <= 3:
        _signature_error(functools.reduce, args, kwargs, [])
    fn = args[0]
    try:
        it = semantics.get_iter(frame, args[1])
    except TracedException as e:
        if isinstance(e.exc, TypeError):
            fold(functools.reduce, None, 0)          # eager's "must support iteration" TypeError
        raise
    result = args[2] if len(args) > 2 else None
    while (item := semantics.next_item(frame, it)) is not None:
        result = item if result is None else fn.call(frame, [result, item], {})
    if result is None:
        fold(functools.reduce, None, [])             # eager's "empty iterable" TypeError
    return result


@models(functools.wraps)
def _wraps(frame, args, kwargs):
    """functools.wraps(wrapped) -> a decorator that copies wrapped's metadata onto a traced closure."""
    return PartialValue(frame.wrap(_apply_wraps, None), [args[0]], {})


def _apply_wraps(wrapped, wrapper):
    raise AssertionError("only called symbolically")


@models(_apply_wraps)
def _apply_wraps_handler(frame, args, kwargs):
    wrapped, wrapper = args
    if not isinstance(wrapper, ClosureValue):
        raise Unsupported(UNKNOWN_CALL, "functools.wraps on a function that exists outside the frame")
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            wrapper.attrs[name] = semantics.load_attr(frame, wrapped, name)
        except Unsupported:
            pass
    wrapper.attrs["__wrapped__"] = wrapped
    return wrapper


def _class_or_value(v: Value):
    """What a pure library function may inspect: the class of a new object, or the real value."""
    if isinstance(v, NewObjectValue):
        return v.cls
    real = v.real_object()
    return real if real is not None else v.as_python()


def _dataclass_query(fn):
    def handler(frame, args, kwargs):
        return frame.wrap(fold(fn, *[_class_or_value(a) for a in args]), None)
    return handler


models(dataclasses.fields)(_dataclass_query(dataclasses.fields))
models(dataclasses.is_dataclass)(_dataclass_query(dataclasses.is_dataclass))


def _is_dataclass_instance(v: Value) -> bool:
    return hasattr(v.python_type(), dataclasses._FIELDS)


def _dataclass_inner(frame, v: Value, factory: Value, as_dict: bool) -> Value:
    """dataclasses' _asdict_inner / _astuple_inner: dataclass instances become the factory's
    result, namedtuples, lists, tuples and dicts are rebuilt as their type with converted items,
    anything else is `copy.deepcopy`'d (modelled for immutable constants only)."""
    def inner(x):
        return _dataclass_inner(frame, x, factory, as_dict)
    cls = v.python_type()
    if _is_dataclass_instance(v):
        values = [(f.name, inner(semantics.load_attr(frame, v, f.name))) for f in dataclasses.fields(cls)]
        items = [SeqValue([Const(name), value], tuple) for name, value in values] if as_dict else \
            [value for _, value in values]
        return factory.call(frame, [SeqValue(items, list)], {})
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return frame.wrap(cls, None).call(frame, [inner(x) for x in semantics.unpack(frame, v)], {})
    if issubclass(cls, (list, tuple)):
        return frame.wrap(cls, None).call(frame, [IteratorValue([inner(x) for x in semantics.unpack(frame, v)])], {})
    if issubclass(cls, dict):
        pairs = [semantics.unpack(frame, pair) for pair in
                 semantics.unpack(frame, semantics.load_attr(frame, v, "items").call(frame, [], {}))]
        converted = [SeqValue([inner(k), inner(x)], tuple) for k, x in pairs]
        if hasattr(cls, "default_factory") and sys.version_info >= (3, 12):   # 3.12 keeps a defaultdict's factory
            factory = semantics.load_attr(frame, v, "default_factory")
            return frame.wrap(cls, None).call(frame, [factory, SeqValue(converted, list)], {})
        return frame.wrap(cls, None).call(frame, [IteratorValue(converted)], {})
    if v.is_python_constant() and is_constant(v.as_python()) or cls in (int, float, bool):
        return v                   # deepcopy of an immutable constant (or a number, dynamic too) is itself
    raise Unsupported(UNSUPPORTED_VALUE, f"copy.deepcopy of a {cls.__name__} in dataclasses.as{'dict' if as_dict else 'tuple'}")


def _dataclass_convert(as_dict: bool):
    name, factory_name, default = ("asdict", "dict_factory", dict) if as_dict else ("astuple", "tuple_factory", tuple)

    def handler(frame, args, kwargs):
        if len(args) != 1 or set(kwargs) - {factory_name}:
            return NotImplemented
        if not _is_dataclass_instance(args[0]):
            raise user_error(TypeError, f"{name}() should be called on dataclass instances")
        factory = kwargs.get(factory_name) or frame.wrap(default, None)
        return _dataclass_inner(frame, args[0], factory, as_dict)
    return handler


models(dataclasses.asdict)(_dataclass_convert(True))
models(dataclasses.astuple)(_dataclass_convert(False))


@models(dataclasses.replace)
def _dataclass_replace(frame, args, kwargs):
    """dataclasses.replace(obj, **changes): the class called with every init field, changed or read
    from obj (as the Python source does, errors included)."""
    if len(args) != 1:
        return NotImplemented
    obj = args[0]
    if not _is_dataclass_instance(obj):
        raise user_error(TypeError, "replace() should be called on dataclass instances")
    changes = dict(kwargs)
    for f in getattr(obj.python_type(), dataclasses._FIELDS).values():
        if f._field_type is dataclasses._FIELD_CLASSVAR:
            continue
        if not f.init:
            if f.name in changes:
                raise user_error(ValueError, f"field {f.name} is declared with init=False, it cannot be specified "
                                             f"with replace()")
            continue
        if f.name not in changes:
            if f._field_type is dataclasses._FIELD_INITVAR and f.default is dataclasses.MISSING:
                raise user_error(ValueError, f"InitVar {f.name!r} must be specified with replace()")
            changes[f.name] = semantics.load_attr(frame, obj, f.name)
    return semantics.load_attr(frame, obj, "__class__").call(frame, [], changes)


@models(inspect.signature)
def _signature(frame, args, kwargs):
    """`inspect.signature(fn)` of a function, bound method or class the guards pin: an immutable
    answer (when its defaults are constants), so a constant, whose `parameters` are iterated,
    tested with `in` and read (`.default`, `.kind`) by folding. transformers' apply_chunking_to_forward
    counts a forward function's parameters this way; libraries filter keyword arguments with it."""
    if len(args) != 1 or kwargs:
        return NotImplemented
    sig = fold(inspect.signature, _signature_target(frame, args[0]))
    if not is_constant(sig):
        raise Unsupported(UNSUPPORTED_VALUE, "inspect.signature of a function with a mutable default value")
    return Const(sig)


def _signature_target(frame, v: Value):
    """A real callable with the signature of `v`: the object itself when it exists (its identity
    guarded), a stand-in for a function or bound method made while tracing."""
    if isinstance(v, MethodValue) and isinstance(v.fn, types.FunctionType):
        return types.MethodType(v.fn, _SELF)                  # bound: inspect drops the first parameter
    if isinstance(v, ClosureValue):
        if "__wrapped__" in v.attrs:                          # functools.wraps: inspect follows it
            return _signature_target(frame, v.attrs["__wrapped__"])
        if not all(d.is_python_constant() for d in [*v.defaults, *v.kwdefaults.values()]):
            raise Unsupported(UNSUPPORTED_VALUE, "inspect.signature of a function with traced default values")
        stub = types.FunctionType(v.code, {}, v.code.co_name, tuple(d.as_python() for d in v.defaults) or None,
                                  tuple(types.CellType() for _ in v.code.co_freevars) or None)
        stub.__kwdefaults__ = {k: d.as_python() for k, d in v.kwdefaults.items()} or None
        return stub
    real = v.real_object()
    if isinstance(real, (types.FunctionType, type, types.BuiltinFunctionType)) or \
            isinstance(real, types.MethodType) and isinstance(real.__func__, types.FunctionType):
        return real
    raise Unsupported(UNKNOWN_CALL, f"inspect.signature of a {type(v).__name__}")


_SELF = object()          # what a stand-in bound method is bound to (inspect only drops it)


# ---- torch's override and dispatch-mode queries ---------------------------------------------------
# Library code asks them to pick a path (nn.MultiheadAttention's fast path checks
# `has_torch_function(tensor_args)` and whether make_fx is tracing). While the graph runs the
# answer is what it is now, as long as no mode is active then either: a guard says so.

def _no_modes(frame, key: str) -> None:
    if torch._C._len_torch_function_stack() if key == "function" else torch._C._len_torch_dispatch_stack():
        raise Unsupported(UNKNOWN_CALL, f"a torch {key} mode is active while capturing")
    frame.tracer.add_guard(NoModesMatch(key))


def _overrides_torch_function(v: Value) -> bool:
    """Would torch's check find a `__torch_function__` on this value (plain tensors, parameters and
    Python's basic types have none that counts)?"""
    if v.is_graph_value:
        return False
    cls = v.python_type()
    found = getattr(cls, "__torch_function__", None)
    return found is not None and found is not torch._C._disabled_torch_function_impl \
        and cls not in (torch.Tensor, torch.nn.Parameter)


def _has_torch_function_of(items):
    def handler(frame, args, kwargs):
        values = items(frame, args)
        if any(_overrides_torch_function(v) for v in values):
            raise Unsupported(UNKNOWN_CALL, "has_torch_function of an object with its own __torch_function__")
        _no_modes(frame, "function")
        return Const(bool(frame.tracer.graph.function_modes))   # a mode the traced code entered (function_modes.py)
    return handler


models(torch._C._has_torch_function)(_has_torch_function_of(lambda frame, args: semantics.unpack(frame, args[0])))
models(torch._C._has_torch_function_unary)(_has_torch_function_of(lambda frame, args: list(args[:1])))
models(torch._C._has_torch_function_variadic)(_has_torch_function_of(lambda frame, args: list(args)))


class _NotFlattened(Exception):
    pass


@models(torch.utils._pytree.tree_leaves)
def _tree_leaves(frame, args, kwargs):
    """`torch.utils._pytree.tree_leaves(tree)` over the containers pytree flattens by default
    (tuples, lists, namedtuples, dicts, OrderedDicts, in their order); None and all else are
    leaves. A tree holding another registered node type (a library's dataclass) is not modelled."""
    is_leaf = kwargs.get("is_leaf", Const(None))
    if len(args) != 1 or set(kwargs) - {"is_leaf"} or not (isinstance(is_leaf, Const) and is_leaf.value is None):
        return NotImplemented
    leaves = []

    def walk(v: Value):
        cls = v.python_type()
        if cls in (tuple, list) or issubclass(cls, tuple) and hasattr(cls, "_fields"):
            for item in semantics.unpack(frame, v):
                walk(item)
        elif cls in (dict, collections.OrderedDict) and isinstance(v, DictValue):
            for item in v.items.values():
                walk(item)
        elif cls in torch.utils._pytree.SUPPORTED_NODES or issubclass(cls, tuple):
            raise _NotFlattened
        else:
            leaves.append(v)
    try:
        walk(args[0])
    except _NotFlattened:
        return NotImplemented
    return SeqValue(leaves, list)


def _group_by_device_and_dtype(frame, args, kwargs):
    """`_group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False)` (clip_grad_norm_,
    foreach optimizers): where the first list's tensors share one device and dtype, the one group
    eager makes, `{(device, dtype): (the lists, indices)}`, indices `[0, ..., n-1]` when asked
    for, else `[]` (what the C function returns). Several groups are not modelled: their order is
    that of a C++ hash map."""
    bound = dict(zip(("tensorlistlist", "with_indices"), args), **kwargs)
    with_indices = bound.get("with_indices", Const(False))
    if set(bound) - {"tensorlistlist", "with_indices"} or "tensorlistlist" not in bound or not is_const(with_indices):
        return NotImplemented
    lists = [semantics.unpack(frame, v) for v in semantics.unpack(frame, bound["tensorlistlist"])]
    if not lists or not lists[0] or not all(isinstance(t, TensorValue) for t in lists[0]) or \
            any(len(other) != len(lists[0]) for other in lists):
        return NotImplemented
    kinds = {(t.example.device, t.example.dtype) for t in lists[0]}
    if len(kinds) != 1:
        return NotImplemented
    indices = [Const(i) for i in range(len(lists[0]))] if with_indices.value else []
    group = SeqValue([SeqValue([SeqValue(list(items), list) for items in lists], list), SeqValue(indices, list)], tuple)
    return DictValue({next(iter(kinds)): group})


if hasattr(torch.utils._foreach_utils, "_group_tensors_by_device_and_dtype"):      # (a private helper)
    models(torch.utils._foreach_utils._group_tensors_by_device_and_dtype)(_group_by_device_and_dtype)


@models(torch.utils._python_dispatch._get_current_dispatch_mode_stack)
def _dispatch_mode_stack(frame, args, kwargs):
    _no_modes(frame, "dispatch")
    return SeqValue([], list)


@models(torch._C._len_torch_dispatch_stack)
def _dispatch_stack_length(frame, args, kwargs):
    _no_modes(frame, "dispatch")
    return Const(0)


@models(torch._C._len_torch_function_stack)
def _function_stack_length(frame, args, kwargs):
    _no_modes(frame, "function")
    return Const(len(frame.tracer.graph.function_modes))


@models(torch._C._is_torch_function_mode_enabled)
def _function_mode_enabled(frame, args, kwargs):
    _no_modes(frame, "function")
    return Const(bool(frame.tracer.graph.function_modes))
