"""torch.nn modules: existing ones from the program (`ModuleValue`) and tensor-free ones built while
tracing (`NewModuleValue`).

A module is an object (objects.py) with nn.Module's attribute tables: an attribute read looks in
the instance dict, then `_parameters`, `_buffers`, `_modules` (reloaded through those dicts,
bypassing nn.Module.__getattr__). Calling a module inlines its forward when it has no hooks
(guarded). The torch.nn containers are iterated, indexed and measured from their `_modules`
keys, which are guarded; other modules use their own special methods. nn.Module's iteration
methods (children, parameters, named_modules...) are modelled rather than inlined.
"""
from __future__ import annotations

import inspect
import types

import torch

from ..breaks import UNKNOWN_CALL, UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE, USER_EXCEPTION, Unsupported, user_error
from ..guards import DictKeysMatch, NoHooksMatch
from ..modelled import models
from ..runtime import sequential_of
from ..sources import AttrSource, ItemSource, ModuleDictSource
from .base import Const, IteratorValue, Value, missing_attribute
from .containers import DictValue, SeqValue
from .functions import FunctionValue
from .objects import (MISSING, ObjectValue, class_attribute, guard_class_attribute, is_data_descriptor,
                      is_plain_getattr, pending_instance_attr, python_function, sub_source)

_TABLES = ("_parameters", "_buffers", "_modules")
_SEQUENCES = (torch.nn.Sequential, torch.nn.ModuleList)
_CONTAINERS = (*_SEQUENCES, torch.nn.ModuleDict, torch.nn.ParameterList, torch.nn.ParameterDict)


class ModuleValue(ObjectValue):
    """An nn.Module instance from the user's program."""
    __slots__ = ()

    @property
    def module(self) -> torch.nn.Module:
        return self.obj

    def load_attr(self, frame, name):
        pending = pending_instance_attr(frame, self, name)
        if pending is not None:
            return pending
        m, src = self.obj, self.source
        d = m.__dict__
        if name == "__dict__" and src is not None:
            return self.instance_dict_value(frame)
        view = self._dict_value(frame)               # `self.__dict__` read earlier: the trace's view of it
        cls_attr = inspect.getattr_static(type(m), name, MISSING)
        in_dict = name in d if view is None else view.has(name)
        if is_data_descriptor(cls_attr) or not in_dict and cls_attr is not MISSING:
            result = class_attribute(frame, self, type(m), name, src)
            if result is not MISSING:
                return result
        if in_dict:
            if view is not None:
                return view.entry(name)
            return frame.wrap(d[name], self._instance_attr(frame, name, cls_attr))
        found = self.table_entry(frame, name)
        if found is not None:
            return found
        custom = python_function(type(m), "__getattr__")
        if custom is not None and custom is not torch.nn.Module.__getattr__:
            return FunctionValue(custom).call(frame, [self, Const(name)], {})
        raise missing_attribute(frame, self, name)

    def _instance_attr(self, frame, name: str, cls_attr=MISSING):
        """The source of `name`, found in the module's __dict__: noted as read there (guards read it
        there: a dict lookup instead of an attribute read that nn.Module's __getattr__ keeps slow)
        unless the class could come between (a custom __getattribute__, a data descriptor)."""
        source = sub_source(self.source, name)
        if type(source) is AttrSource and is_plain_getattr(type(self.obj)) and not is_data_descriptor(cls_attr):
            frame.tracer.instance_attrs.add(source)
        return source

    def table_entry(self, frame, name: str):
        """`name` from the module's parameters, buffers or submodules, or None."""
        d = self.obj.__dict__
        for table in _TABLES:
            entries = d.get(table)
            if entries is not None and name in entries:
                source = ModuleDictSource(self.source, table, name) if self.source is not None else None
                return frame.wrap(entries[name], source)
        return None

    def store_attr(self, frame, name, value):
        real = self.obj
        cls = type(real)
        if self.source is None:
            raise Unsupported(UNSUPPORTED_MUTATION, f"setting attribute {name!r} on a {cls.__name__} without a source")
        if cls.__setattr__ is not torch.nn.Module.__setattr__:
            setter = python_function(cls, "__setattr__")
            if setter is None:
                raise Unsupported(UNSUPPORTED_MUTATION, f"custom __setattr__ of {cls.__name__}")
            FunctionValue(setter).call(frame, [self, Const(name), value], {})
            return
        if isinstance(value, ModuleValue) and real.__dict__.get("_modules", {}).get(name) is value.obj:
            self.guard_keys(frame)
            return              # `self.sub = self.sub.to(dtype)` where `to` changed nothing: the same module back
        for table in ("_parameters", "_modules"):
            if name in real.__dict__.get(table, {}):
                raise Unsupported(UNSUPPORTED_MUTATION, f"assigning module {table[1:-1]} {name!r}")
        if name in real.__dict__.get("_buffers", {}):
            if not isinstance(value, Value) or not value.is_graph_value:
                raise Unsupported(UNSUPPORTED_MUTATION, f"assigning a non-tensor to buffer {name!r}")
            current = self.load_attr(frame, name)
            if current.is_graph_value and current.example is value.example:
                return   # `self.buf += 1`: the in-place op already changed the buffer
        if isinstance(value, ModuleValue):
            raise Unsupported(UNSUPPORTED_MUTATION, f"assigning a submodule to {name!r}")
        self.store_existing_attr(frame, name, value)

    def del_attr(self, frame, name):
        """`del module.attr`: Module.__delattr__ on a plain instance attribute is object's delete;
        deleting a parameter, buffer or submodule (its tables) is not modelled."""
        cls = type(self.obj)
        if cls.__delattr__ is not torch.nn.Module.__delattr__:
            return super().del_attr(frame, name)
        for table in ("_parameters", "_buffers", "_modules"):
            if name in self.obj.__dict__.get(table, {}):
                raise Unsupported(UNSUPPORTED_MUTATION, f"deleting module {table[1:-1]} {name!r}")
        self.delete_existing_attr(frame, name)

    # ---- calling -----------------------------------------------------------------------------
    def call(self, frame, args, kwargs):
        """`module(*args, **kwargs)` as Module._call_impl does it: forward pre-hooks, forward, forward
        hooks (each hook traced like any Python function; the hook tables guarded by their keys)."""
        m = self.obj
        for hooks in ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks_always_called"):
            if getattr(m, hooks, None):
                raise Unsupported(UNKNOWN_CALL, f"module {type(m).__name__} has {hooks[1:]}")
        from torch.nn.modules import module as module_mod
        if any(getattr(module_mod, name, None) for name in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                            "_global_backward_hooks", "_global_backward_pre_hooks")):
            raise Unsupported(UNKNOWN_CALL, "global module hooks are registered")
        if not (getattr(m, "_forward_hooks", None) or getattr(m, "_forward_pre_hooks", None)):
            if self.source is not None:
                frame.tracer.add_guard(NoHooksMatch(self.source))
            return self._call_forward(frame, args, kwargs)
        for table in _HOOK_TABLES:
            self.guard_keys(frame, table)
        for hook_id, hook in self._hooks(frame, "_forward_pre_hooks"):
            if hook_id in m._forward_pre_hooks_with_kwargs:
                result = hook.call(frame, [self, SeqValue(list(args), tuple), DictValue(dict(kwargs), dict)], {})
                if not _is_none(result):
                    pair = result.unpack(frame) if result.python_type() is tuple else None
                    if pair is None or len(pair) != 2:
                        raise user_error(RuntimeError, "forward pre-hook must return None or a tuple of "
                                                       f"(new_args, new_kwargs), but got {result.python_type()}.")
                    args, kwargs = pair[0].unpack(frame), _str_keyed(frame, pair[1])
            else:
                result = hook.call(frame, [self, SeqValue(list(args), tuple)], {})
                if not _is_none(result):
                    args = result.unpack(frame) if result.python_type() is tuple else [result]
        result = self._call_forward(frame, args, kwargs)
        for hook_id, hook in self._hooks(frame, "_forward_hooks"):
            inputs = SeqValue(list(args), tuple)
            hook_args = ([self, inputs, DictValue(dict(kwargs), dict), result] if hook_id in m._forward_hooks_with_kwargs
                         else [self, inputs, result])
            hook_result = hook.call(frame, hook_args, {})
            if not _is_none(hook_result):
                result = hook_result
        return result

    def _hooks(self, frame, table: str) -> list:
        """(id, hook value) of one of the module's hook tables, in calling order."""
        hooks = self.obj.__dict__[table]
        table_source = self._instance_attr(frame, table)
        return [(hook_id, frame.wrap(hook, ItemSource(table_source, hook_id)
                                     if self.source is not None else None)) for hook_id, hook in hooks.items()]

    def _call_forward(self, frame, args, kwargs):
        m = self.obj
        if "forward" in m.__dict__:
            forward = frame.wrap(m.__dict__["forward"], AttrSource(self.source, "forward")
                                 if self.source is not None else None)
            return forward.call(frame, args, kwargs)
        forward = type(m).forward
        guard_class_attribute(frame, type(m), "forward", forward)
        if not isinstance(forward, types.FunctionType):
            raise Unsupported(UNKNOWN_CALL, f"{type(m).__name__}.forward is not a Python function")
        if forward is torch.nn.Module.forward:
            raise Unsupported(USER_EXCEPTION, f"{type(m).__name__} has no forward")
        return FunctionValue(forward).call(frame, [self, *args], kwargs)

    # ---- the torch.nn containers --------------------------------------------------------------
    def guard_keys(self, frame, table: str = "_modules") -> None:
        """Iterating or measuring a container module depends on its table's keys."""
        if self.source is not None:
            entries = self.obj.__dict__[table]
            frame.tracer.add_guard(DictKeysMatch(self._instance_attr(frame, table), type(entries), tuple(entries)))

    def get_iter(self, frame):
        if isinstance(self.obj, _CONTAINERS):
            return NotImplemented      # their own iteration (unpack), from their guarded keys
        return super().get_iter(frame)

    def unpack(self, frame):
        m = self.obj
        if isinstance(m, _SEQUENCES):
            self.guard_keys(frame)
            return [self.load_attr(frame, k) for k in m._modules]
        if isinstance(m, torch.nn.ModuleDict):
            self.guard_keys(frame)
            return [Const(k) for k in m._modules]
        if isinstance(m, torch.nn.ParameterList):
            return [self.load_attr(frame, k) for k in m._parameters]
        if isinstance(m, torch.nn.ParameterDict):
            return [Const(k) for k in m._parameters]
        return super().unpack(frame)

    def getitem(self, frame, key):
        m = self.obj
        if isinstance(m, _SEQUENCES):
            k = key.as_python()
            self.guard_keys(frame)
            keys = list(m._modules)
            if isinstance(k, slice):
                if type(m) is torch.nn.Sequential:
                    return SequentialSliceValue(keys[k], [self.load_attr(frame, name) for name in keys[k]])
                if type(m) is not torch.nn.ModuleList:
                    raise Unsupported(UNSUPPORTED_VALUE, "slicing a module container")
                # `self.layers[:n]`: the modules themselves; rebuilt as a ModuleList if it escapes
                return SeqValue([self.load_attr(frame, name) for name in keys[k]], torch.nn.ModuleList)
            if not isinstance(k, int) or not -len(keys) <= k < len(keys):
                raise user_error(IndexError, f"index {k} is out of range")
            return self.load_attr(frame, keys[k])
        if isinstance(m, torch.nn.ModuleDict):
            self.guard_keys(frame)
            return self.load_attr(frame, key.as_python())
        if isinstance(m, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            return self.load_attr(frame, str(key.as_python()))
        return super().getitem(frame, key)

    def length(self, frame):
        m = self.obj
        if isinstance(m, (*_SEQUENCES, torch.nn.ModuleDict)):
            self.guard_keys(frame)
            return Const(len(m._modules))
        if isinstance(m, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            return Const(len(m._parameters))
        return super().length(frame)

    def contains(self, frame, item):
        if isinstance(self.obj, torch.nn.ModuleDict):
            self.guard_keys(frame)
            return item.as_python() in self.obj._modules
        return super().contains(frame, item)

    def truthy(self, frame):
        if isinstance(self.obj, (*_SEQUENCES, torch.nn.ModuleDict, torch.nn.ParameterList, torch.nn.ParameterDict)):
            return self.length(frame).as_python() > 0
        return super().truthy(frame)


class NewModuleValue(ModuleValue):
    """A tensor-free module built while tracing (an activation made in forward). It is real, so
    its forward is inlined like any module's; it has no source. Handed out of the trace (returned,
    stored, live at a break: big_bird assigns `self.dropout = nn.Dropout(p)` in forward), it is
    built anew by the same constructor call, as each eager call makes a new one — unless the trace
    changed it since."""
    __slots__ = ("made_with",)

    def __init__(self, obj, made_with: tuple):
        super().__init__(obj, None)
        self.made_with = made_with          # (cls, args, kwargs): constants

    def rebuild(self, em):
        cls, args, kwargs = self.made_with
        if vars(cls(*args, **kwargs)) != vars(self.obj):
            raise Unsupported(UNSUPPORTED_VALUE, f"a {type(self.obj).__name__} made and changed in captured code "
                                                 f"escapes it")
        em.call_const(construct_module, [lambda: em.const(cls), lambda: em.const(tuple(args)),
                                         lambda: em.const(dict(kwargs))])


def construct_module(cls, args: tuple, kwargs: dict) -> torch.nn.Module:
    return cls(*args, **kwargs)


# ============================================================================================
# nn.Module's methods that are modelled
# ============================================================================================

def _module_arg(args) -> bool:
    return bool(args) and isinstance(args[0], ModuleValue)


@models(torch.nn.Module.__call__, getattr(torch.nn.Module, "_call_impl", None))
def _module_call(frame, args, kwargs):
    if not _module_arg(args):
        return NotImplemented
    return args[0].call(frame, args[1:], kwargs)


@models(torch.nn.Module.__getattr__)
def _module_getattr(frame, args, kwargs):
    """nn.Module.__getattr__(self, name), reached from a subclass's own __getattr__."""
    if not _module_arg(args) or len(args) != 2 or kwargs:
        return NotImplemented
    module, name = args[0], args[1].as_python()
    found = module.table_entry(frame, name)
    if found is not None:
        return found
    raise missing_attribute(frame, module, name)


def _guard_table(frame, mv: ModuleValue, table: str):
    if mv.source is not None:
        mv.guard_keys(frame, table)


def _children(frame, mv: ModuleValue):
    mv.guard_keys(frame)
    return [(k, mv.load_attr(frame, k)) for k, m in mv.obj._modules.items() if m is not None]


def _walk(frame, mv: ModuleValue, prefix: str, seen: set):
    if id(mv.obj) in seen:
        return
    seen.add(id(mv.obj))
    yield prefix, mv
    for name, child in _children(frame, mv):
        yield from _walk(frame, child, f"{prefix}.{name}" if prefix else name, seen)


def _tensors(frame, mv: ModuleValue, table: str, recurse: bool):
    found, seen_tensors = [], set()
    modules = _walk(frame, mv, "", set()) if recurse else [("", mv)]
    for prefix, sub in modules:
        _guard_table(frame, sub, table)
        for name, t in sub.obj.__dict__[table].items():
            if t is None or id(t) in seen_tensors:
                continue
            seen_tensors.add(id(t))
            found.append((f"{prefix}.{name}" if prefix else name, sub.load_attr(frame, name)))
    return found


def _pairs(pairs, named: bool):
    if named:
        return IteratorValue([SeqValue([Const(k), v], tuple) for k, v in pairs])
    return IteratorValue([v for _, v in pairs])


def _recurse_arg(args, kwargs) -> bool:
    if "recurse" in kwargs:
        return bool(kwargs["recurse"].as_python())
    return bool(args[0].as_python()) if args else True


def _module_method(walk):
    def handler(frame, args, kwargs):
        if not _module_arg(args):
            return NotImplemented
        return walk(frame, args[0], args[1:], kwargs)
    return handler


M = torch.nn.Module
models(M.children)(_module_method(lambda f, mv, a, k: _pairs(_children(f, mv), False)))
models(M.named_children)(_module_method(lambda f, mv, a, k: _pairs(_children(f, mv), True)))
models(M.modules)(_module_method(lambda f, mv, a, k: _pairs(list(_walk(f, mv, "", set())), False)))
models(M.named_modules)(_module_method(lambda f, mv, a, k: _pairs(list(_walk(f, mv, "", set())), True)))
models(M.parameters)(_module_method(lambda f, mv, a, k: _pairs(_tensors(f, mv, "_parameters",
                                                                       _recurse_arg(a, k)), False)))
models(M.named_parameters)(_module_method(lambda f, mv, a, k: _pairs(_tensors(f, mv, "_parameters",
                                                                             _recurse_arg(a[1:], k)), True)))
models(M.buffers)(_module_method(lambda f, mv, a, k: _pairs(_tensors(f, mv, "_buffers", _recurse_arg(a, k)), False)))
models(M.named_buffers)(_module_method(lambda f, mv, a, k: _pairs(_tensors(f, mv, "_buffers",
                                                                          _recurse_arg(a[1:], k)), True)))


@models(M.to)
def _module_to(frame, args, kwargs):
    """`module.to(dtype / device)` where every parameter and buffer already is there: the module
    itself, unchanged (transformers' routers call `self.classifier.to(self.dtype)` per forward). The
    tensors are read, so their guards (dtype, device) make a later call where one differs recapture;
    a real conversion is not modelled."""
    if not _module_arg(args) or args[0].source is None:
        return NotImplemented
    try:
        target = [a.as_python() for a in args[1:]]
        named = {k: v.as_python() for k, v in kwargs.items()}
        device, dtype, _, memory_format = torch._C._nn._parse_to(*target, **named)
    except Exception:          # not constants, or not what `to` takes: as if unmodelled
        return NotImplemented
    if memory_format is not None:
        return NotImplemented
    for table in ("_parameters", "_buffers"):
        for _, tensor in _tensors(frame, args[0], table, True):
            example = getattr(tensor, "example", None)
            if not isinstance(example, torch.Tensor) or device is not None and example.device != device \
                    or dtype is not None and (example.is_floating_point() or example.is_complex()) \
                    and example.dtype != dtype:
                return NotImplemented
    return args[0]


# The tables Module._call_impl reads to call hooks: which hooks run, and which take kwargs.
_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                "_backward_hooks", "_backward_pre_hooks")


def _is_none(value: Value) -> bool:
    return isinstance(value, Const) and value.value is None


def _str_keyed(frame, mapping: Value) -> dict:
    """A hook's new kwargs (a dict value) as the {name: value} a call takes."""
    if not isinstance(mapping, DictValue):
        raise Unsupported(UNSUPPORTED_VALUE, f"forward pre-hook returned kwargs of type {mapping.python_type().__name__}")
    return dict(mapping.items)


class SequentialSliceValue(SeqValue):
    """`seq[a:b]` of an nn.Sequential: eager makes a new Sequential of the same modules under their
    keys. Here the modules themselves (each with its own source), called as Sequential.forward
    does; rebuilt as a new Sequential, with the keys, only if it escapes the trace."""
    __slots__ = ("keys",)

    def __init__(self, keys: list, modules: list):
        super().__init__(modules, torch.nn.Sequential)
        self.keys = list(keys)

    def as_python(self):
        return sequential_of(tuple(self.keys), tuple(m.as_python() for m in self.items))

    def rebuild(self, em):
        em.call_const(sequential_of, [lambda: em.const(tuple(self.keys)), lambda: em.build_tuple(self.items)])

    def call(self, frame, args, kwargs):
        return FunctionValue(torch.nn.Sequential.forward).call(frame, [self, *args], kwargs)
