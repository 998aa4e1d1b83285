"""Turn a real Python object read from the frame into a symbolic Value, installing the guards
that make reusing the graph safe (the "variable builder").

One function, `wrap`, with a table of kinds in order. Objects reached through the same source
twice, or the same object through two sources, map to one Value (with an alias guard), so
aliasing in the user's program is preserved in the graph.
"""
from __future__ import annotations

import enum
import functools
import types
import weakref
from typing import Any, Optional

import torch

from .breaks import EXTERNAL_ITERATOR, TENSOR_SUBCLASS, UNSUPPORTED_VALUE, Unsupported
from .fallback.skip import INLINE, call_rule, is_torch_namespace
from ._evalframe import type_version
from .guards import (AliasMatch, ClassVersionMatch, ConstantMatch, DictKeysMatch, FunctionMatch, IdMatch, LengthMatch, RemainingMatch, TensorMatch,
                     TypeMatch)
from .modelled import modelled
from .runtime import AutocastBlock, GradModeBlock, items_left, iterator_ahead, reads_ahead, sequences_under
from .sources import AttrSource, FromNumpySource, GenericAttrSource, GlobalSource, ItemSource, IteratorAheadSource, Source
from .values.arrays import is_numpy_constant
from .values.numpy_functions import frame_array, shareable_tensor
from .values.base import Const, MethodValue, Value, is_constant
from .values.callables import CallableValue
from .values.containers import InputIteratorValue, LazyListValue, SeqValue, is_plain_list_subclass
from .values.contexts import AutocastValue, GradModeValue
from .values.stdlib_collections import CONTAINER_TYPES, wrap_container
from .values.dict_objects import DictObjectValue, dict_base
from .values.functions import FunctionValue, PartialValue
from .values.modules import ModuleValue
from .values.objects import ObjectValue, version_guarded
from .values.object_keyed_dicts import ObjectKeyedDictValue, keyed_by_tensors
from .values.tensors import SliceValue, TensorValue

def wrap(tracer, value: Any, source: Optional[Source]) -> Value:
    key = id(value)
    known = tracer.wrapped.get(key)
    if known is not None and known.source is None and source is not None and isinstance(value, type):
        known = None           # a class first met without a source: from now on, the one that can be written
    if known is not None and not is_constant(value):
        if source is not None and known.source != source:
            _guard_second_source(tracer, value, source, known)
        return known
    result = _build(tracer, value, source)
    if not is_constant(value):
        tracer.wrapped[key] = result
        tracer.keepalive.append(value)
    return result


def _guard_second_source(tracer, value, source: Source, known: Value) -> None:
    """`value`, already wrapped as `known`, read again through another `source`: the graph treats
    both reads as one object, so the new source must reach it on later calls too. An object
    that can change (a tensor, a container, an instance) is guarded to be the first source's
    object still; a module, function or class as well (the first source's guard pins that one,
    not what the second source holds: `f(x, g)` called with `g = h` and then `g = k`, where `f`
    also calls the global `h`), unless the new source reads one of torch's own by name."""
    if known.source is not None:
        if _aliasing_matters(value) or not _torch_by_name(tracer, value, source):
            tracer.add_guard(AliasMatch(source, known.source))
            _note_pinned_torch(tracer, value, source)
    elif not _aliasing_matters(value) and not _torch_by_name(tracer, value, source):
        tracer.add_guard(IdMatch.of(source, value))
        _note_pinned_torch(tracer, value, source)


def _aliasing_matters(value) -> bool:
    """Whether an object's identity is all that two sources reaching it share: not for modules,
    functions and classes, whose guards pin the object itself (`_guard_second_source`)."""
    return not isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType))


def _torch_by_name(tracer, value, source: Source) -> bool:
    """torch's own modules, classes and callables are assumed not to be monkeypatched, so where
    they are read by name (a global module name such as `torch` or `F`, or an attribute of one of
    torch's modules or classes read so) they are not guarded. Read from anywhere else (an argument,
    a closure cell, a default, an object's attribute) they are values like any other, guarded by
    identity: `f(x, act)` called with `act=torch.relu` and then `torch.sigmoid`."""
    if not is_torch_namespace(value):
        return False
    by_name = (isinstance(source, GlobalSource) and isinstance(value, types.ModuleType)
               or isinstance(source, (AttrSource, GenericAttrSource)) and source.owner in tracer.torch_by_name)
    if by_name:
        tracer.torch_by_name.add(source)
    return by_name


def _note_pinned_torch(tracer, value, source: Source) -> None:
    """A torch module or class guarded by identity at `source`: its attributes are read by name."""
    if is_torch_namespace(value) and isinstance(value, (types.ModuleType, type)):
        tracer.torch_by_name.add(source)


def _guard(tracer, guard):
    if guard.source is not None:
        tracer.add_guard(guard)


def _build(tracer, value, source) -> Value:
    if isinstance(value, torch.Tensor):
        return _wrap_tensor(tracer, value, source)
    if type(value) in (int, float) and source is not None:
        guard_expr = tracer.dynamic_scalar(source, type(value))
        if guard_expr:              # seen changing: a graph input, still an int/float (ShapeEnv guards its uses)
            _guard(tracer, TypeMatch(source, type(value)))
            return tracer.graph.add_scalar_input(value, source, guard_expr)
    if is_constant(value) and not (type(value) is tuple and tracer.has_dynamic_items(source)):
        if source is not None:
            _guard(tracer, ConstantMatch(source, value) if type(value) in (int, float, bool, str, type(None),
                                                                           bytes, complex) else
                   IdMatch.of(source, value) if isinstance(value, (torch.dtype, enum.Enum)) or value is Ellipsis
                   else _equal_guard(source, value))
        return Const(value, source)
    if type(value) is slice:           # bounds that are not constants (tensors): each from its own source
        if source is not None:
            _guard(tracer, TypeMatch(source, slice))
        parts = [wrap(tracer, getattr(value, name), None if source is None else _attr(source, name))
                 for name in ("start", "stop", "step")]
        return SliceValue(*parts, source=source)
    if is_numpy_constant(value):       # np.int64(8), np.dtype('float32'): immutable, compared by value
        if source is not None:
            _guard(tracer, ConstantMatch(source, value))
        return Const(value, source)
    if source is not None and reads_ahead(value):
        _guard(tracer, TypeMatch(source, type(value)))
        return InputIteratorValue(value, source, lambda j: _iterator_item(tracer, value, source, j))
    if type(value) is list and source is not None:      # read (and guarded) only if the trace reads it
        return LazyListValue(source, lambda: _sequence_items(tracer, value, source))
    if type(value) in (tuple, list) or _is_namedtuple(value) or _plain_list_instance(value):
        return SeqValue(_sequence_items(tracer, value, source), type(value), source)
    if type(value) in CONTAINER_TYPES:
        container = wrap_container(value, source, lambda v, s: wrap(tracer, v, s), lambda g: _guard(tracer, g))
        if container is not None:
            return container
        if source is not None and keyed_by_tensors(value):     # read a key at a time
            return ObjectKeyedDictValue.of(value, source, lambda g: _guard(tracer, g))
    if isinstance(value, torch.nn.Module):
        # Parameters and buffers are graph inputs reloaded from their sources, so the graph does not
        # depend on which instance this is: its type, and every attribute actually read (each with
        # its own guard), are what must match. Instances of one class share the graph.
        if source is not None:
            _guard(tracer, TypeMatch(source, type(value)))
            _guard_class(tracer, type(value))
        return ModuleValue(value, source, pin=tracer)
    if isinstance(value, types.FunctionType):
        return _wrap_function(tracer, value, source)
    if type(value) is functools.partial:
        return _wrap_partial(tracer, value, source)
    if _bound_to_a_value(value):
        return _wrap_bound_builtin(tracer, value, source)
    if callable(value) and (isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, type,
                                               types.MethodWrapperType, types.WrapperDescriptorType,
                                               types.MethodDescriptorType, types.ClassMethodDescriptorType))
                            or is_torch_namespace(value) and not _traced_method(value) and not _called_object(value)
                            or type(value).__module__ == "functools"):
        if source is not None and isinstance(value, types.MethodType) and not _torch_by_name(tracer, value, source):
            # a method of one of torch's objects, bound afresh with each object (a stack slot
            # holding `no_grad().__exit__` across a break): the same function, bound to the same type
            _guard(tracer, TypeMatch(source, types.MethodType))
            _guard(tracer, IdMatch.of(_attr(source, "__func__"), value.__func__))
            _guard(tracer, TypeMatch(_attr(source, "__self__"), type(value.__self__)))
        elif source is not None and not _torch_by_name(tracer, value, source):
            _guard(tracer, _bound_builtin_guard(source, value) or IdMatch.of(source, value))
            _note_pinned_torch(tracer, value, source)
            if isinstance(value, type):
                _guard_class(tracer, value)
        return CallableValue(value, source)
    if isinstance(value, types.ModuleType):
        if source is not None and not _torch_by_name(tracer, value, source):
            _guard(tracer, IdMatch.of(source, value))
            _note_pinned_torch(tracer, value, source)
        return ObjectValue(value, source)
    if isinstance(value, types.MethodType) and type(value.__self__) in (GradModeBlock, AutocastBlock):
        return _interrupted_block(tracer, value.__self__, source)
    if isinstance(value, types.MethodType):
        if source is not None:       # the function too: another one may be bound there next time
            _guard(tracer, TypeMatch(source, types.MethodType))
            wrap(tracer, value.__func__, _attr(source, "__func__"))
        return MethodValue(wrap(tracer, value.__self__, None if source is None else _attr(source, "__self__")),
                           value.__func__, source)
    if source is not None:
        _guard(tracer, TypeMatch(source, type(value)))
        _guard_class(tracer, type(value))
    shared = shareable_tensor(value) if source is not None else None
    if shared is not None:
        return _wrap_array(tracer, value, shared, source)
    if source is not None and dict_base(type(value)) is not None:
        return DictObjectValue(value, source, pin=tracer)
    return ObjectValue(value, source, pin=tracer)


def _traced_method(value) -> bool:
    """A bound method of torch Python code that is traced like user code (an optimizer's `step`
    bound by hand): a method of its object, not one opaque graph op."""
    return isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType) \
        and call_rule(value.__func__) == INLINE


def _iterator_item(tracer, it, source, j: int) -> Optional[Value]:
    """The item an iterator the frame was given yields after the next `j` (InputIteratorValue),
    wrapped from a source relative to the iterator; None, guarded, where it has no more."""
    if any(type(seq) is list and id(seq) in tracer.wrapped for seq in sequences_under(it)):
        # the trace also reaches the list itself, and may change it before reading on: the items
        # ahead are then not the list's items as they were when the frame was called
        raise Unsupported(EXTERNAL_ITERATOR, f"next() of a {type(it).__name__} over a list the captured code "
                                             "also uses")
    if items_left(it) <= j:
        _guard(tracer, RemainingMatch(source, j, exact=True))
        return None
    _guard(tracer, RemainingMatch(source, j + 1))
    return wrap(tracer, iterator_ahead(it, j), IteratorAheadSource(source, j))


def _sequence_items(tracer, value, source) -> list:
    """A tuple's, list's or namedtuple's items as values, each wrapped from its own source, with
    the guards that make them so: its length, a subclass's class, no attributes of its own."""
    if source is not None:
        _guard(tracer, LengthMatch(source, type(value), len(value)))
        if type(value) not in (tuple, list):
            _guard_class(tracer, type(value))
        if hasattr(value, "__dict__"):      # a list subclass's instance: still no attributes of its own
            _guard(tracer, DictKeysMatch(GenericAttrSource(source, "__dict__"), dict, ()))
    return [wrap(tracer, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]


def _called_object(value) -> bool:
    """An instance of a torch Python class whose __call__ is Python code (the WeightNorm pre-hook
    of torch.nn.utils.weight_norm): an object whose call is traced, not a torch function. Operator
    objects (torch.ops.aten.add, higher-order operators) are torch functions."""
    return not isinstance(value, (types.FunctionType, types.MethodType, type, torch._ops.OperatorBase,
                                  torch._ops.OpOverloadPacket)) \
        and isinstance(getattr(type(value), "__call__", None), types.FunctionType)


def _plain_list_instance(value) -> bool:
    """An instance of a list subclass modelled as a list of its class: one with no attributes."""
    return is_plain_list_subclass(type(value)) and not getattr(value, "__dict__", None)


def _wrap_function(tracer, fn: types.FunctionType, source) -> FunctionValue:
    """A plain function (no attributes, inlined when called, not modelled) is guarded by its code,
    globals and defaults: a closure or lambda made afresh on each call must not recapture each
    time. Anything else about it is pinned by identity."""
    if source is None or _torch_by_name(tracer, fn, source):
        return FunctionValue(fn, source)
    identity = IdMatch.of(source, fn)
    if fn.__dict__ or modelled(fn) is not None or call_rule(fn) != INLINE:
        _guard(tracer, identity)
        return FunctionValue(fn, source)
    _guard(tracer, FunctionMatch(source, fn.__code__, id(fn.__globals__), len(fn.__defaults__ or ()),
                                 tuple(fn.__kwdefaults__ or ()), weakref.ref(fn)))
    tracer.keepalive.append(fn.__globals__)
    return FunctionValue(fn, source, pin=(tracer, identity))


def _guard_class(tracer, cls: type) -> None:
    """What the trace looks up on a Python class (methods, properties, class attributes, special
    methods) is read from the class as it is now: one guard that the class, bases included, has
    not changed since. Not for subclasses of torch's classes (nn.Module): torch's own classes are
    touched at run time by tools (triton's interpreter) without change, which would move the tag
    of every model class; their attributes are guarded one by one where read
    (objects.guard_class_attribute)."""
    if version_guarded(cls):
        tracer.add_guard(ClassVersionMatch(cls, type_version(cls)))


def _bound_to_a_value(value) -> bool:
    """A C method bound to a tensor or a container (`t.to`, `xs.append`), as a resume function
    receives one that was on the stack at a break: modelled as the method of its object."""
    return type(value) in (types.BuiltinMethodType, types.MethodWrapperType) \
        and isinstance(getattr(value, "__self__", None), (torch.Tensor, list, dict, set, tuple))


def _wrap_bound_builtin(tracer, method, source) -> MethodValue:
    owner = None
    if source is not None:
        _guard(tracer, TypeMatch(source, type(method)))
        _guard(tracer, ConstantMatch(_attr(source, "__name__"), method.__name__))
        owner = _attr(source, "__self__")
    return MethodValue(wrap(tracer, method.__self__, owner), method.__name__, source)


def _wrap_partial(tracer, p: functools.partial, source) -> PartialValue:
    """A partial is what it is made of: its function, arguments and keywords, each guarded."""
    if source is None:
        return PartialValue(wrap(tracer, p.func, None), [wrap(tracer, a, None) for a in p.args],
                            {k: wrap(tracer, v, None) for k, v in p.keywords.items()})
    _guard(tracer, TypeMatch(source, functools.partial))
    args_source, keywords_source = _attr(source, "args"), _attr(source, "keywords")
    _guard(tracer, LengthMatch(args_source, tuple, len(p.args)))
    _guard(tracer, DictKeysMatch(keywords_source, dict, tuple(p.keywords)))
    return PartialValue(wrap(tracer, p.func, _attr(source, "func")),
                        [wrap(tracer, a, ItemSource(args_source, i)) for i, a in enumerate(p.args)],
                        {k: wrap(tracer, v, ItemSource(keywords_source, k)) for k, v in p.keywords.items()}, source)


def _interrupted_block(tracer, block, source):
    """`__exit__` of a grad-mode or autocast `with` block a graph break interrupted
    (resume.GradModeBlock / AutocastBlock), as a resume function gets it on its stack: the
    block's value, left by the traced code as usual. Its fields are guarded like attributes."""
    owner = _attr(source, "__self__") if source is not None else None
    if owner is not None:
        _guard(tracer, TypeMatch(owner, type(block)))

    def field(name):
        return wrap(tracer, getattr(block, name), _attr(owner, name) if owner is not None else None)
    if isinstance(block, GradModeBlock):
        field("enabled"), field("previous")
        mode = GradModeValue(block.enabled)
    else:
        for name in ("device", "enabled", "dtype", "cache", "previous"):
            field(name)
        mode = AutocastValue(block.device, block.enabled, block.dtype, block.cache)
    mode.previous = block.previous
    return MethodValue(mode, "__exit__", source)


def _bound_builtin_guard(source, value):
    """A C method bound to a class or an object (`OrderedDict.fromkeys`) is made afresh on each
    attribute read: it is guarded by equality (same function, same `__self__`), not identity."""
    if isinstance(value, types.BuiltinMethodType) and not isinstance(value.__self__, (types.ModuleType, type(None))):
        return ConstantMatch(source, value)
    return None


def _attr(source, name):
    return AttrSource(source, name)


def _equal_guard(source, value):
    if type(value) is frozenset:       # equal frozensets can iterate in different orders
        return DictKeysMatch(source, frozenset, tuple(value))
    return ConstantMatch(source, value)


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields") and type(value) is not tuple


def _wrap_array(tracer, array, shared: torch.Tensor, source) -> Value:
    """An np.ndarray numpy code may trace on: its data is the graph input `shared`, reloaded as
    `torch.from_numpy(array)` (sharing the array's memory) and guarded like a tensor, after the
    type guard."""
    return frame_array(wrap(tracer, shared, FromNumpySource(source)), array, source)


def _wrap_tensor(tracer, value: torch.Tensor, source) -> TensorValue:
    if type(value) not in (torch.Tensor, torch.nn.Parameter) and not isinstance(value, torch.nn.parameter.Buffer):
        if source is not None:   # the eager fallback entry must not catch plain tensors later
            tracer.add_guard(TypeMatch(source, type(value)))
        raise Unsupported(TENSOR_SUBCLASS, type(value).__name__)
    if source is None:
        raise Unsupported(UNSUPPORTED_VALUE, "a tensor the tracer cannot reload (no source)")
    if value.is_sparse or value.layout != torch.strided:
        raise Unsupported(UNSUPPORTED_VALUE, f"tensor with layout {value.layout}")
    dims, expr = tracer.dynamic_dims(source, value)
    tracer.add_guard(TensorMatch.of(source, value, dims))
    return tracer.graph.add_input(value, source, dims, expr)
