"""Example results for ops whose run on fake tensors fails where the real op would not.

Every graph op first runs on FakeTensors (graph_builder.GraphBuilder._run_fake). Two kinds of
calls fail there although eager runs them, and torch.optim's compile path makes both:

* **0-d tensors passed where the op takes a Scalar** (`param.addcdiv_(exp_avg, denom,
  value=-step_size)` with `step_size` a 0-d tensor). torch's Python binding accepts a 0-d tensor
  that does not require grad for a `Scalar` parameter and reads it with `.item()` before the op
  runs; a fake tensor has no value to read (a data-dependent error). The graph keeps the call as
  written (at run time the binding reads the real tensor); `example_with_placeholders` runs the
  example with numbers of the tensors' kinds in their place. Only for arguments that every
  schema of the op able to take the call binds to a `Scalar` (so the binding reads them, never
  the kernel), and only when two trials with different numbers (different for each argument too)
  give the same result metadata: an op whose output depends on the numbers (`torch.arange(end)`,
  `torch.arange(start, end)`) stays a tensor-to-Python break.
* **fake kernels that reject a call the real kernel takes** (the meta kernel of
  `torch._foreach_addcdiv_(params, exp_avgs, denoms, scalars)` checks that `scalars` is on the
  CPU, and under the fake mode it sees the meta device). `example_from_stand_ins` does what
  FakeTensorMode does for ops without a fake kernel: run the real op on zero-filled stand-ins of
  the fake tensors (same sizes, strides, dtypes, devices) and map the results back (an input
  stand-in is its fake, a new tensor becomes a fake of it). Only for static shapes, outside
  autocast, with no tensor that requires grad unless grad mode is off, and never for a result
  that is a view into an input: what it cannot describe exactly, it refuses.

And the other way round: a fake kernel that takes operands whose dtype the real kernel refuses
(`torch.softmax` of an integer tensor: its meta function keeps the dtype, eager raises
"not implemented for 'Long'"). `refused_dtype` asks the real kernel on small zero stand-ins
when every tensor operand is an integer or bool tensor; the capture then breaks at the op and
eager raises its own error there, where a compiling backend would have computed a value.
"""
from __future__ import annotations

import types
from typing import Callable, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree
from torch.utils._mode_utils import no_dispatch

_SCALAR_TYPES = ("number", "Optional[number]")
_TENSOR_TYPES = ("Tensor", "Optional[Tensor]") + _SCALAR_TYPES


# factories whose Scalars say how many elements they make: never an example with numbers in place
_SIZED_BY_SCALARS = {"arange", "range", "linspace", "logspace"}


def _op_name(op: str, target) -> Optional[str]:
    """The aten name of a Tensor method or torch builtin; None for a Python function (its `.item()`
    happens inside, not in the binding)."""
    if op == "call_method" and isinstance(target, str):
        return target
    if isinstance(target, types.BuiltinFunctionType) and (getattr(target, "__module__", "") or "").startswith("torch"):
        return target.__name__
    return None


def _schemas(op: str, target) -> list:
    name = _op_name(op, target)
    if name is None:
        return []
    try:
        return list(torch._C._jit_get_schemas_for_operator(f"aten::{name}"))
    except Exception:        # noqa: BLE001 -- no such operator
        return []


def _bind(schema, args: tuple, kwargs: dict) -> Optional[dict]:
    """{argument position or keyword: schema type} when `schema` can take this call, else None."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(positional):
        return None
    by_name = {a.name: a for a in schema.arguments}
    if any(k not in by_name for k in kwargs):
        return None
    given = {a.name for a in positional[:len(args)]} | set(kwargs)
    if any(not a.has_default_value() and a.name not in given for a in schema.arguments):
        return None
    bound = {i: str(a.type) for i, a in enumerate(positional[:len(args)])}
    bound.update({k: str(by_name[k].type) for k in kwargs})
    values = {**dict(enumerate(args)), **kwargs}
    if any(isinstance(values[k], torch.Tensor) and t not in _TENSOR_TYPES for k, t in bound.items()):
        return None
    return bound


def _taken_as_scalars(op: str, target, args: tuple, kwargs: dict) -> list:
    """Positions / keywords of the 0-d tensors the binding turns into numbers for this call."""
    values = {**dict(enumerate(args)), **kwargs}
    candidates = [k for k, v in values.items()
                  if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.requires_grad]
    if not candidates or "out" in kwargs or _op_name(op, target) in _SIZED_BY_SCALARS:
        return []
    bindings = [b for b in (_bind(s, args, kwargs) for s in _schemas(op, target)) if b is not None]
    if not bindings:
        return []
    return [k for k in candidates if all(b.get(k) in _SCALAR_TYPES for b in bindings)]


def _placeholder(tensor: torch.Tensor, which: int, position: int):
    """A number standing for the 0-d tensor at `position` among those replaced, in trial `which`:
    different for each position and, by a different step, in each trial, so an op whose result
    depends on the numbers (`torch.arange(start, end)`, `end - start` elements) shows it."""
    if tensor.dtype is torch.bool:
        return bool(which)
    number = (2 + which) * (position + 1) + position          # 2, 5, 8, ... then 3, 7, 11, ...
    if tensor.dtype.is_complex:
        return complex(number + 0.5, 1.0)
    if tensor.dtype.is_floating_point:
        return number + 0.5
    return number


def _metadata(result):
    return [(tuple(x.shape), tuple(x.stride()), x.dtype, x.device, x.requires_grad) if isinstance(x, torch.Tensor)
            else x for x in pytree.tree_leaves(result)]


def is_torch_op(op: str, target) -> bool:
    """A call of one of torch's C operators (a Tensor method by name, or a builtin of torch's)."""
    return bool(_schemas(op, target))


def example_with_placeholders(op: str, target, fn: Callable, args: tuple, kwargs: dict, run: Callable):
    """The example result of `fn(*args, **kwargs)` with the 0-d tensors the binding reads replaced
    by numbers (`run(fn, args, kwargs)` runs it under the fake mode); None when that does not apply."""
    keys = _taken_as_scalars(op, target, args, kwargs)
    if not keys:
        return None
    results = []
    for which in (0, 1):
        new_args = tuple(_placeholder(a, which, keys.index(i)) if i in keys else a for i, a in enumerate(args))
        new_kwargs = {k: _placeholder(v, which, keys.index(k)) if k in keys else v for k, v in kwargs.items()}
        results.append(run(fn, new_args, new_kwargs))
    if _metadata(results[0]) != _metadata(results[1]):
        return None
    return results[0]


def example_from_stand_ins(fake_mode, fn: Callable, args: tuple, kwargs: dict, grad_enabled: bool):
    """The example result of `fn(*args, **kwargs)` computed on real zero-filled stand-ins of the
    fake tensors, in grad mode `grad_enabled` (autocast off); None when that does not apply or the
    real op fails too."""
    fakes = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    if not fakes or not all(isinstance(t, FakeTensor) and _static(t) for t in fakes):
        return None
    if grad_enabled and any(t.requires_grad for t in fakes):
        return None                  # the stand-ins do not require grad: autograd's view would differ
    stand_ins: dict[int, FakeTensor] = {}

    def real(a):
        if not isinstance(a, FakeTensor):
            return a
        t = torch.zeros_like(a, device=a.fake_device)    # as FakeTensorMode's fallback kernels do
        stand_ins[id(t)] = a
        return t
    try:
        with no_dispatch(), torch.set_grad_enabled(grad_enabled):
            real_args, real_kwargs = pytree.tree_map(real, (args, kwargs))
            result = fn(*real_args, **real_kwargs)
    except Exception:                # noqa: BLE001 -- the real op rejects the call too: the break stands
        return None
    storages = {t.untyped_storage().data_ptr() for t in pytree.tree_leaves((real_args, real_kwargs))
                if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes()}
    leaves = [x for x in pytree.tree_leaves(result) if isinstance(x, torch.Tensor)]
    if any(id(x) not in stand_ins and x.untyped_storage().nbytes() and x.untyped_storage().data_ptr() in storages
           for x in leaves):
        return None                  # a view into an input: its aliasing could not be told

    def back(x):
        if not isinstance(x, torch.Tensor):
            return x
        return stand_ins[id(x)] if id(x) in stand_ins else fake_mode.from_tensor(x, static_shapes=True)
    return pytree.tree_map(back, result)


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in (*t.shape, *t.stride()))


_REFUSED_DTYPE = "not implemented for '"    # torch's dispatch error for a dtype a kernel lacks
_STAND_IN_MAX_NUMEL = 1 << 16               # refused_dtype keeps sizes of operands and results up to this


def refused_dtype(op: str, target, fn: Callable, args: tuple, kwargs: dict, example=None) -> Optional[str]:
    """The error eager's kernel raises for the dtypes of these (fake) operands, when every tensor
    operand is an integer or bool tensor and the call is one of torch's C operators; None when it
    takes them, or this cannot tell. Asked on zero stand-ins of the same dtypes and devices (of
    the same sizes where those and the fake result `example` are static and small, as position
    ids and masks are; else of one element a dim), with the random number generators' states
    kept (a random op on them must not move the user's stream); any other error of the
    stand-ins (a shape they do not fit) is not an answer."""
    tensors = _integral_tensors((*args, *kwargs.values()))
    if not tensors or not is_torch_op(op, target):
        return None
    devices = sorted({t.fake_device for t in tensors if t.fake_device.type == "cuda"}, key=str)
    # (a shape error raised by torch costs ~1 ms, its C++ stack trace: sizes are kept where cheap)
    results = [t for t in pytree.tree_leaves(example) if isinstance(t, torch.Tensor)]
    keep_sizes = all(_static(t) and t.numel() <= _STAND_IN_MAX_NUMEL for t in tensors + results)

    def stand_in(a):
        if not isinstance(a, FakeTensor):
            return a
        return torch.zeros(tuple(a.shape) if keep_sizes else (1,) * a.dim(), dtype=a.dtype, device=a.fake_device)
    try:
        with no_dispatch(), torch.no_grad(), torch.random.fork_rng(devices=devices):
            real_args, real_kwargs = pytree.tree_map(stand_in, (args, kwargs))
            fn(*real_args, **real_kwargs)
    except Exception as e:            # noqa: BLE001 -- only the dispatch error is an answer
        return str(e) if _REFUSED_DTYPE in str(e) else None
    return None


def _integral_tensors(operands) -> Optional[list]:
    """The fake tensors among `operands` (and in lists and tuples among them), or None when there
    are none or one of them is not an integer or bool fake tensor (this runs for every op traced:
    most leave at their first operand)."""
    found = []
    for a in operands:
        if isinstance(a, (list, tuple)):
            inner = _integral_tensors(a) if any(isinstance(x, torch.Tensor) for x in a) else []
            if inner is None:
                return None
            found += inner
        elif isinstance(a, torch.Tensor):
            if a.is_floating_point() or a.is_complex() or not isinstance(a, FakeTensor):
                return None
            found.append(a)
    return found or None
