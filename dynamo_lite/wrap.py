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
from collections import OrderedDict
from typing import Any, Optional

import torch

from .breaks import TENSOR_SUBCLASS, UNSUPPORTED_VALUE, Unsupported
from .fallback.skip import INLINE, call_rule, is_torch_namespace
from .guards import (AliasMatch, ConstantMatch, DictKeysMatch, FunctionMatch, IdMatch, LengthMatch, TensorMatch,
                     TypeMatch)
from .modelled import modelled
from .runtime import AutocastBlock, GradModeBlock
from .sources import AttrSource, ItemSource, Source
from .values.base import Const, MethodValue, Value, is_constant
from .values.callables import CallableValue
from .values.containers import DictValue, SeqValue
from .values.contexts import AutocastValue, GradModeValue
from .values.dict_objects import DictObjectValue, dict_base
from .values.functions import FunctionValue, PartialValue
from .values.modules import ModuleValue
from .values.objects import ObjectValue
from .values.tensors import TensorValue

def wrap(tracer, value: Any, source: Optional[Source]) -> Value:
    key = id(value)
    known = tracer.wrapped.get(key)
    if known is not None and not is_constant(value):
        if source is not None and known.source is not None and known.source != source and _aliasing_matters(value):
            tracer.add_guard(AliasMatch(source, known.source))
        return known
    result = _build(tracer, value, source)
    if not is_constant(value):
        tracer.wrapped[key] = result
        tracer.keepalive.append(value)
    return result


def _aliasing_matters(value) -> bool:
    """Two sources reaching one object matter when the object can change (tensors, containers,
    instances); for modules, functions and classes their own guards already pin them."""
    return not isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType))


def _guard(tracer, guard):
    if guard.source is not None:
        tracer.add_guard(guard)


def _build(tracer, value, source) -> Value:
    if isinstance(value, torch.Tensor):
        return _wrap_tensor(tracer, value, source)
    if is_constant(value):
        if source is not None:
            _guard(tracer, ConstantMatch(source, value) if type(value) in (int, float, bool, str, type(None),
                                                                           bytes, complex) else
                   IdMatch.of(source, value) if isinstance(value, (torch.dtype, enum.Enum)) or value is Ellipsis
                   else _equal_guard(source, value))
        return Const(value, source)
    if type(value) in (tuple, list) or _is_namedtuple(value):
        if source is not None:
            _guard(tracer, LengthMatch(source, type(value), len(value)))
        items = [wrap(tracer, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        return SeqValue(items, type(value), source)
    if type(value) in (dict, OrderedDict) and all(is_constant(k) and type(k) in (str, int) for k in value):
        if source is not None:
            _guard(tracer, DictKeysMatch(source, type(value), tuple(value)))
        items = {k: wrap(tracer, v, ItemSource(source, k) if source is not None else None) for k, v in value.items()}
        return DictValue(items, type(value), source)
    if isinstance(value, torch.nn.Module):
        # Parameters and buffers are graph inputs reloaded from their sources, so the graph does not
        # depend on which instance this is: its type, and every attribute actually read (each with
        # its own guard), are what must match. Instances of one class share the graph.
        if source is not None:
            _guard(tracer, TypeMatch(source, type(value)))
        return ModuleValue(value, source)
    if isinstance(value, types.FunctionType):
        return _wrap_function(tracer, value, source)
    if type(value) is functools.partial:
        return _wrap_partial(tracer, value, source)
    if callable(value) and (isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, type,
                                               types.MethodWrapperType, types.WrapperDescriptorType,
                                               types.MethodDescriptorType, types.ClassMethodDescriptorType))
                            or is_torch_namespace(value) or type(value).__module__ == "functools"):
        if source is not None and not is_torch_namespace(value):
            _guard(tracer, ConstantMatch(source, value) if _classmethod_of_c_type(value) else IdMatch.of(source, value))
        return CallableValue(value, source)
    if isinstance(value, types.ModuleType):
        if source is not None and not is_torch_namespace(value):
            _guard(tracer, IdMatch.of(source, value))
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
    if source is not None and dict_base(type(value)) is not None:
        return DictObjectValue(value, source)
    return ObjectValue(value, source)


def _wrap_function(tracer, fn: types.FunctionType, source) -> FunctionValue:
    """A plain function (no attributes, inlined when called, not modelled) is guarded by its code,
    globals and defaults: a closure or lambda made afresh on each call must not recapture each
    time. Anything else about it is pinned by identity."""
    if source is None or is_torch_namespace(fn):
        return FunctionValue(fn, source)
    identity = IdMatch.of(source, fn)
    if fn.__dict__ or modelled(fn) is not None or call_rule(fn) != INLINE:
        _guard(tracer, identity)
        return FunctionValue(fn, source)
    _guard(tracer, FunctionMatch(source, fn.__code__, id(fn.__globals__), len(fn.__defaults__ or ()),
                                 tuple(fn.__kwdefaults__ or ())))
    tracer.keepalive.append(fn.__globals__)
    return FunctionValue(fn, source, pin=(tracer, identity))


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


def _classmethod_of_c_type(value) -> bool:
    """`itertools.chain.from_iterable`, `dict.fromkeys`: a new bound object on each attribute read,
    equal (same class, same C function) but not identical, so it is guarded by equality."""
    return isinstance(value, types.BuiltinMethodType) and isinstance(getattr(value, "__self__", None), type)


def _attr(source, name):
    return AttrSource(source, name)


def _equal_guard(source, value):
    return ConstantMatch(source, value)


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields") and type(value) is not tuple


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
