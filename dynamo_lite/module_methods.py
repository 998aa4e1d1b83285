"""nn.Module methods whose bodies we do not trace but model directly: iteration over children,
parameters and buffers. Every container walked gets a keys guard, so adding or removing a
submodule or parameter triggers recapture."""
from __future__ import annotations

import torch

from .attributes import guard_module_keys, load_attr
from .guards import DictKeysMatch
from .sources import AttrSource
from .values import Const, IteratorValue, ModuleValue, SeqValue


def _guard_table(tracer, mv: ModuleValue, table: str):
    if mv.source is not None:
        entries = mv.module.__dict__[table]
        tracer.add_guard(DictKeysMatch(AttrSource(mv.source, table), type(entries), tuple(entries)))


def _children(frame, mv: ModuleValue):
    guard_module_keys(frame.tracer, mv)
    return [(k, load_attr(frame, mv, k)) for k, m in mv.module._modules.items() if m is not None]


def _walk(frame, mv: ModuleValue, prefix: str, seen: set):
    if id(mv.module) in seen:
        return
    seen.add(id(mv.module))
    yield prefix, mv
    for name, child in _children(frame, mv):
        yield from _walk(frame, child, f"{prefix}.{name}" if prefix else name, seen)


def _tensors(frame, mv: ModuleValue, table: str, recurse: bool):
    found, seen_tensors = [], set()
    modules = _walk(frame, mv, "", set()) if recurse else [("", mv)]
    for prefix, sub in modules:
        _guard_table(frame.tracer, sub, table)
        for name, t in sub.module.__dict__[table].items():
            if t is None or id(t) in seen_tensors:
                continue
            seen_tensors.add(id(t))
            found.append((f"{prefix}.{name}" if prefix else name, load_attr(frame, sub, name)))
    return found


def _pairs(pairs, named: bool):
    if named:
        return IteratorValue([SeqValue([Const(k), v], tuple) for k, v in pairs])
    return IteratorValue([v for _, v in pairs])


def _recurse_arg(args, kwargs) -> bool:
    from .operators import python_value
    if "recurse" in kwargs:
        return bool(python_value(kwargs["recurse"]))
    return bool(python_value(args[0])) if args else True


M = torch.nn.Module
MODULE_METHODS = {
    M.children: lambda f, mv, a, k: _pairs(_children(f, mv), False),
    M.named_children: lambda f, mv, a, k: _pairs(_children(f, mv), True),
    M.modules: lambda f, mv, a, k: _pairs(list(_walk(f, mv, "", set())), False),
    M.named_modules: lambda f, mv, a, k: _pairs(list(_walk(f, mv, "", set())), True),
    M.parameters: lambda f, mv, a, k: _pairs(_tensors(f, mv, "_parameters", _recurse_arg(a, k)), False),
    M.named_parameters: lambda f, mv, a, k: _pairs(_tensors(f, mv, "_parameters", _recurse_arg(a[1:], k)), True),
    M.buffers: lambda f, mv, a, k: _pairs(_tensors(f, mv, "_buffers", _recurse_arg(a, k)), False),
    M.named_buffers: lambda f, mv, a, k: _pairs(_tensors(f, mv, "_buffers", _recurse_arg(a[1:], k)), True),
}
