"""Tensors whose data the trace knows: made from Python constants in the captured code itself.

`n = torch.IntTensor([hidden_size])[0]` (VITS), `torch.tensor([0, 1])[i]`, `torch.tensor(k)`: the
graph makes such a tensor from constants on every call, so its data is the same every time the
guards pass. When the program then needs its Python value — a slice bound (`x[:, :n]`, which
calls `n.__index__()`), `.item()`, `int(n)`, `if n:` — eager reads what the graph will compute; we
read it too, from a real CPU copy computed while tracing, instead of breaking the graph there.

Only operations whose result is the same on every device and every call are followed: factories
from Python data (`torch.tensor`, `arange`, `full`, `x.new_tensor(...)`), ops that move data
without arithmetic (indexing, views, copies, casts, `cat`), and the arithmetic IEEE rounds the
same everywhere (`+`, `-`, `*`, negation; `//`, `%`, sums and products on integers). funnel's relative positions:
`pos = torch.arange(0, seq_len)`, then `pooled_pos[0] - pos[-1]` as the bound of another
`torch.arange` — whose Scalar bounds, given as 0-d tensors with known data, are those numbers
(`with_known_bounds`), as eager reads them. A tensor written in place after it was made (its
version counter moved, through it or a view of it) is no longer known. Small tensors only
(`MAX_ELEMENTS`): this is about numbers the program reads back, not about folding computations.
"""
from __future__ import annotations

import operator
import types
from typing import Optional

import torch

MAX_ELEMENTS = 64

# Factories whose data is their Python arguments.
_FACTORIES = {torch.tensor, torch.as_tensor, torch.scalar_tensor, torch.arange, torch.zeros, torch.ones, torch.full}
_FACTORY_METHODS = {"new_tensor", "new_zeros", "new_ones", "new_full"}     # self gives only dtype and device
_LIKE_FACTORIES = {torch.zeros_like, torch.ones_like, torch.full_like}      # the first gives only its shape too
# Functions and methods that move data without arithmetic: exact on any device.
_MOVES = {operator.getitem, torch.select, torch.squeeze, torch.unsqueeze, torch.flatten, torch.reshape,
          torch.clone, torch.narrow, torch.t, torch.transpose, torch.permute, torch.movedim, torch.cat,
          torch.concat, torch.stack}
_MOVING_METHODS = {"__getitem__", "select", "view", "reshape", "squeeze", "unsqueeze", "flatten", "clone",
                   "contiguous", "narrow", "t", "transpose", "permute", "to", "type", "int", "long", "short",
                   "bool", "float", "double", "half", "bfloat16", "cpu", "cuda", "detach", "expand", "repeat",
                   "view_as", "reshape_as", "expand_as", "flip", "roll"}
# Arithmetic that rounds the same on every device (IEEE's correctly rounded +, -, *), without
# `alpha=` (which a kernel may fuse into one rounding).
_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.neg, torch.add, torch.sub, torch.mul, torch.neg}
_ARITHMETIC_METHODS = {"add", "sub", "mul", "neg", "__add__", "__sub__", "__mul__", "__neg__", "__radd__",
                       "__rsub__", "__rmul__"}
# On integers only (floats would round by the order a kernel adds in): //, %, sums and products.
_INTEGER_ARITHMETIC = {operator.floordiv, operator.mod, torch.sum, torch.prod}
_INTEGER_METHODS = {"__floordiv__", "__mod__", "sum", "prod"}
# Ops that read their bounds as Scalars (a 0-d tensor's number): the result's size depends on them.
_BOUNDED_BY_SCALARS = {torch.arange, torch.range}

_META_KEY = "known_data"


def record(node: torch.fx.Node, op: str, target, args: tuple, kwargs: dict, example) -> None:
    """Remember the data of the tensor `node` makes, when the trace knows it (see the module's
    docstring); `args`/`kwargs` are the op's Values."""
    if not _followed(op, target, kwargs) or not isinstance(example, torch.Tensor) or example.is_sparse:
        return
    if any(isinstance(n, torch.SymInt) for n in example.shape) or example.numel() > MAX_ELEMENTS:
        return                             # (a symbolic size is never compared: that would add a guard)
    inexact = example.is_floating_point() or example.is_complex()
    if inexact and (target in _INTEGER_ARITHMETIC or target in _INTEGER_METHODS):
        return
    if inexact and target is torch.arange and example.device.type != "cpu":
        return                             # (a float arange accumulates in float32 on CUDA, in double here)
    shape_only = target in _FACTORY_METHODS or target in _LIKE_FACTORIES
    try:
        real_args = _real(args[1:]) if shape_only else _real(args)
        real_kwargs = {k: _real(v) for k, v in kwargs.items()}
    except _Unknown:
        return
    if shape_only:                         # only the dtype (and shape) of the first matters, not its data
        first = args[0].example
        if any(isinstance(n, torch.SymInt) for n in first.shape):
            return
        real_args = (torch.empty(tuple(first.shape), dtype=first.dtype), *real_args)
    if "device" in real_kwargs:
        real_kwargs["device"] = "cpu"
    try:
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch(), torch.no_grad():
            fn = target if op == "call_function" else getattr(torch.Tensor, target)
            if op == "call_method" and target in ("to", "cuda", "cpu", "type"):
                fn, real_args = _on_cpu(target, real_args, real_kwargs)
                real_kwargs = {k: v for k, v in real_kwargs.items() if k == "dtype"}
            data = fn(*real_args, **real_kwargs)
    except Exception:                     # noqa: BLE001 -- whatever eager would say, the graph says it
        return
    if not isinstance(data, torch.Tensor) or data.dtype != example.dtype or tuple(data.shape) != tuple(example.shape):
        return
    version = _version(example)
    if version is not None:                # (an inference tensor has no version counter: not followed)
        node.meta[_META_KEY] = (data.detach().clone(), version)


def _version(tensor) -> Optional[int]:
    try:
        return tensor._version
    except (AttributeError, RuntimeError):  # inference tensors do not track writes
        return None


def _followed(op: str, target, kwargs: dict) -> bool:
    if "out" in kwargs:
        return False                       # (would write into the data of another tensor)
    if op == "call_method":
        return target in _MOVING_METHODS or target in _FACTORY_METHODS or target in _INTEGER_METHODS or \
            target in _ARITHMETIC_METHODS and "alpha" not in kwargs
    try:
        return target in _FACTORIES or target in _LIKE_FACTORIES or target in _MOVES or \
            target in _INTEGER_ARITHMETIC or target in _ARITHMETIC and "alpha" not in kwargs
    except TypeError:                      # an unhashable callable
        return False


def with_known_bounds(target, args: tuple, kwargs: dict, const) -> tuple:
    """`torch.arange(start, end, step)` with bounds given as 0-d tensors whose data is known: the
    bounds as the numbers eager reads from them (`const` makes the Value of one), so the result's
    size is known while tracing. Other calls: `args` and `kwargs` as they are."""
    if not isinstance(target, types.BuiltinFunctionType) or target not in _BOUNDED_BY_SCALARS:
        return args, kwargs

    def bound(v):
        if isinstance(getattr(v, "example", None), torch.Tensor) and v.example.dim() == 0:
            data = data_of(v)
            if data is not None:
                return const(data.item())
        return v
    return tuple(bound(a) for a in args), {k: bound(v) for k, v in kwargs.items()}


def data_of(value) -> Optional[torch.Tensor]:
    """The known data of a traced tensor, or None (not known, or written in place since)."""
    node = getattr(value, "node", None)
    known = node.meta.get(_META_KEY) if isinstance(node, torch.fx.Node) else None
    if known is None or _version(value.example) != known[1]:
        return None
    return known[0]


def python_value(value, convert):
    """`convert(data)` (operator.index, int, float, bool, Tensor.item, ...) of a traced tensor
    whose data is known, computed as eager computes it; `NOT_KNOWN` when the data is not known
    or the conversion raises (the caller then does what it does for any tensor)."""
    data = data_of(value)
    if data is None:
        return NOT_KNOWN
    try:
        return convert(data)
    except Exception:                     # noqa: BLE001 -- eager raises there: the caller's usual path
        return NOT_KNOWN


NOT_KNOWN = object()


class _Unknown(Exception):
    pass


def _real(v):
    """The real data of an argument: a constant, a known tensor, or a container of those."""
    if isinstance(v, (list, tuple)):
        return type(v)(_real(x) for x in v)
    if getattr(v, "is_graph_value", False):
        data = data_of(v)
        if data is None:
            raise _Unknown
        return data
    items = getattr(v, "items", None)
    if isinstance(items, list) and v.python_type() in (list, tuple):
        return v.python_type()(_real(x) for x in items)
    try:
        value = v.as_python()
    except Exception:                     # noqa: BLE001 -- not a constant: the data is not known
        raise _Unknown from None
    if not _plain(value):
        raise _Unknown                     # an object's data could change between calls unguarded
    return value


_PLAIN = (int, float, bool, complex, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.memory_format)


def _plain(value) -> bool:
    """Numbers and the like, and tuples, lists and slices of them: what torch.tensor's data and
    an index are made of, each fixed by the guards of where it came from."""
    if isinstance(value, _PLAIN):
        return True
    if type(value) in (tuple, list, torch.Size):
        return all(_plain(x) for x in value)
    if type(value) is slice:
        return _plain(value.start) and _plain(value.stop) and _plain(value.step)
    return False


def _on_cpu(name: str, args: list, kwargs: dict):
    """`t.to(...)`, `t.cuda()`, `t.type(...)` on the CPU copy: only the dtype part counts."""
    tensor, rest = args[0], args[1:]
    dtypes = [a for a in rest if isinstance(a, torch.dtype)]
    if name == "type" and rest and not dtypes:
        raise _Unknown                     # a type name string: not followed
    if any(isinstance(a, torch.Tensor) for a in rest):
        dtypes = [a.dtype for a in rest if isinstance(a, torch.Tensor)]
    return torch.Tensor.to, [tensor, *dtypes[:1]]
