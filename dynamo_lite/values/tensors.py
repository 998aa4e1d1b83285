"""Values the graph computes: tensors, symbolic sizes, slices with symbolic bounds; and calls of
torch functions, which become graph nodes.

A `TensorValue` is an fx node plus a FakeTensor example (shape, dtype, device without data); a
`SymValue` is a SymInt/SymFloat/SymBool size under dynamic shapes. Operators and methods on
them add nodes through the frame's graph builder (`frame.tracer.graph.call`), which runs the op
on the examples first. Turning their data into Python (`.item()`, `bool(t)`, `if t:`) is a graph
break of its own kind.
"""
from __future__ import annotations

import operator

import torch

from .. import known_data
from ..breaks import (DATA_DEPENDENT_BRANCH, TENSOR_TO_PYTHON, TORCH_NON_TENSOR_OP, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_VALUE,
                      Unsupported, user_error)
from ..guards import QueryMatch
from ..modelled import call_modelled
from ..pyops import plain
from ..semantics import unpack
from ..sources import AttrSource
from .base import Const, MethodValue, Value, fold, is_constant, is_data, is_numpy_valued, kind_name

_SPECIALIZE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def specialize(example):
    """The Python number a SymInt/SymFloat/SymBool stands for (ShapeEnv records the guard that
    pins it, unless its expression is already a constant)."""
    return _SPECIALIZE[type(example)](example)

TENSOR_CONST_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "is_quantized",
                      "is_meta", "layout", "is_cpu", "is_mps", "is_nested", "itemsize", "nbytes"}
TENSOR_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}
_MISSING = object()


def graph_operand(v: Value) -> Value:
    """An operand a graph op accepts: a graph value or a constant (the real value of a value made
    only of constants)."""
    return v if v.is_graph_value or isinstance(v, Const) else Const(v.as_python())


def _graph_op(frame, fn, a: Value, b: Value) -> Value:
    return frame.tracer.graph.call("call_function", fn, (graph_operand(a), graph_operand(b)), {})


def _operand_ok(v: Value) -> bool:
    return v.is_graph_value or is_data(v)


def mode_dispatch(frame, operation, args: list, kwargs: dict = None, *, call: bool = False):
    """`operation(*args, **kwargs)` handed to the TorchFunctionMode the traced code entered
    (function_modes.py), as torch hands it; NotImplemented when no mode is on the traced stack or
    torch hands the operation to none (`call`: only functions of torch's API are asked about)."""
    if not frame.tracer.graph.function_modes:
        return NotImplemented
    return frame.tracer.dispatch_to_mode(frame, operation, list(args), kwargs or {}, call)


def _attribute(name: str):
    return lambda obj: getattr(obj, name)


def _method(name: str):
    return lambda obj, *args, **kwargs: getattr(obj, name)(*args, **kwargs)


def _iterate(obj):
    return iter(obj)


def _contains(obj, item):
    return item in obj


class GraphValue(Value):
    """What tensors and symbolic sizes share: an fx node and an example value."""
    __slots__ = ("node", "example")
    is_graph_value = True

    def __init__(self, node, example, source=None):
        super().__init__(source)
        self.node = node
        self.example = example

    def identity(self):
        return id(self.example)

    def graph_arg(self):
        return self.node, self.example

    def rebuild(self, em):
        if self.node.op == "placeholder":
            em.load_source(self.source)
        else:
            em.graph_output(self.node)

    def unary(self, frame, fn):
        return frame.tracer.graph.call("call_function", fn, (self,), {})

    def binary(self, frame, fn, other):
        if not _operand_ok(other):
            return NotImplemented
        return _graph_op(frame, fn, self, other)

    def rbinary(self, frame, fn, other):
        if not _operand_ok(other):
            return NotImplemented
        return _graph_op(frame, plain(fn), other, self)   # `n += t` with n a number: n = n + t

    def compare(self, frame, fn, other):
        if _operand_ok(other):
            return _graph_op(frame, fn, self, other)
        if is_numpy_valued(other):
            return NotImplemented              # a numpy array compares elementwise (values/arrays)
        if fn in (operator.eq, operator.ne):   # tensor == module/None-like object: identity-based in eager too
            return Const(fn is operator.ne)
        raise Unsupported(UNSUPPORTED_VALUE, f"comparing a tensor with {kind_name(other)}")


class TensorValue(GraphValue):
    """A tensor in the graph: its fx node and a FakeTensor carrying shape/dtype/device."""
    __slots__ = ()

    def python_type(self):
        real = self.node.meta.get("real_type")
        return real if real is not None else torch.Tensor

    def load_attr(self, frame, name):
        if frame.tracer.graph.function_modes:
            result = mode_dispatch(frame, _attribute(name), [self])
            if result is not NotImplemented:
                return result
        example = self.example
        if name == "shape":
            return frame.tracer.graph.sizes(self)
        if name in TENSOR_CONST_ATTRS:
            return Const(getattr(example, name))
        if name == "is_leaf":
            if self.node.op == "placeholder" and example.requires_grad:
                raise Unsupported(UNSUPPORTED_ATTRIBUTE, "is_leaf of an input that requires grad")
            return Const(example.is_leaf)
        if name == "grad" and self.node.op == "placeholder" and self.source is not None:
            # an input's gradient, as the program finds it (a tensor's .grad is not written in a
            # trace: backward() and assigning .grad are not traced): read and guarded like any attribute
            return frame.wrap(frame.tracer.graph.real_input(self.node).grad, AttrSource(self.source, "grad"))
        if name in TENSOR_VIEW_ATTRS:
            import builtins
            return frame.tracer.graph.call("call_function", builtins.getattr, (self, Const(name)), {})
        attr = getattr(torch.Tensor, name, _MISSING)
        if attr is not _MISSING and callable(attr):
            return MethodValue(self, name)
        if attr is _MISSING:
            raise user_error(AttributeError, f"'Tensor' object has no attribute {name!r}")
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"tensor.{name}")

    def call_method(self, frame, method, args, kwargs):
        name = method if isinstance(method, str) else getattr(method, "__name__", "")
        return tensor_method(frame, self, name, args, kwargs)

    def getitem(self, frame, key):
        result = mode_dispatch(frame, operator.getitem, [self, key])
        if result is not NotImplemented:
            return result
        selects = _symbolic_selects(key)
        if selects is not None:
            result = self
            for dim, index in selects:
                result = frame.tracer.graph.call("call_function", torch.select, (result, dim, index), {})
            return result
        return frame.tracer.graph.call("call_function", operator.getitem, (self, index_operand(key)), {})

    def setitem(self, frame, key, value):
        if mode_dispatch(frame, operator.setitem, [self, key, value]) is not NotImplemented:
            return
        frame.tracer.graph.call("call_function", operator.setitem, (self, index_operand(key), value), {},
                                always_node=True)

    def unpack(self, frame):
        iterator = mode_dispatch(frame, _iterate, [self])
        if iterator is not NotImplemented:
            return unpack(frame, iterator)
        if self.example.dim() == 0:
            raise user_error(TypeError, "iteration over a 0-d tensor")
        # as Tensor.__iter__ does: the rows are unbind's views, which autograd forbids writing into.
        # A symbolic dim 0 is specialized (a shape guard), as TorchDynamo does; no rows: a constant ()
        rows = frame.tracer.graph.call("call_function", torch.unbind, (self, 0), {})
        return list(rows.value) if isinstance(rows, Const) else list(rows.items)

    def length(self, frame):
        result = mode_dispatch(frame, len, [self])
        if result is not NotImplemented:
            return result
        if self.example.dim() == 0:
            raise user_error(TypeError, "len() of a 0-d tensor")
        sizes = frame.tracer.graph.sizes(self)
        return Const(sizes.value[0]) if isinstance(sizes, Const) else sizes.items[0]

    def truthy(self, frame):
        value = known_data.python_value(self, bool)
        if value is not known_data.NOT_KNOWN:
            return value
        raise Unsupported(DATA_DEPENDENT_BRANCH, "branching on a tensor's value")

    def contains(self, frame, item):
        if mode_dispatch(frame, _contains, [self, item]) is not NotImplemented:
            raise Unsupported(TENSOR_TO_PYTHON, "`in` on a tensor (its truth value)")
        raise Unsupported(TENSOR_TO_PYTHON, "`in` on a tensor")

    # operators: handed to a TorchFunctionMode the traced code entered, as eager does
    def unary(self, frame, fn):
        result = mode_dispatch(frame, fn, [self])
        return super().unary(frame, fn) if result is NotImplemented else result

    def binary(self, frame, fn, other):
        result = mode_dispatch(frame, fn, [self, other]) if _operand_ok(other) else NotImplemented
        return super().binary(frame, fn, other) if result is NotImplemented else result

    def rbinary(self, frame, fn, other):
        result = mode_dispatch(frame, fn, [other, self]) if _operand_ok(other) else NotImplemented
        return super().rbinary(frame, fn, other) if result is NotImplemented else result

    def compare(self, frame, fn, other):
        result = mode_dispatch(frame, fn, [self, other]) if _operand_ok(other) else NotImplemented
        return super().compare(frame, fn, other) if result is NotImplemented else result


class SymValue(GraphValue):
    """A symbolic size (SymInt / SymFloat / SymBool) under dynamic shapes: an fx node computing it at
    run time and the symbolic example. Python uses that need a concrete value specialize it, which
    adds a shape guard."""
    __slots__ = ()

    def python_type(self):
        return _SPECIALIZE.get(type(self.example), int)

    def binary(self, frame, fn, other):
        # numbers are immutable: `n += 1` is `n = n + 1` (an fx `operator.iadd` node would print
        # as `n += 1; m = n`, rebinding the name `n` that later nodes and outputs still read)
        return super().binary(frame, plain(fn), other)

    def as_python(self):
        return specialize(self.example)

    def is_python_constant(self):
        return False           # it is one only once specialized, which as_python() does on demand

    def truthy(self, frame):
        return bool(self.as_python())       # branching on a size: guarded by ShapeEnv


class SliceValue(Value):
    """A slice whose bounds are not all constants (e.g. `x[:, :T]` with a symbolic T)."""
    __slots__ = ("start", "stop", "step")

    def __init__(self, start: Value, stop: Value, step: Value, source=None):
        super().__init__(source)
        self.start, self.stop, self.step = start, stop, step

    def python_type(self):
        return slice

    def as_python(self):
        return slice(self.start.as_python(), self.stop.as_python(), self.step.as_python())

    def is_python_constant(self):
        return False

    def children(self):
        return (self.start, self.stop, self.step)

    def graph_arg(self):
        a, b, c = (v.graph_arg() for v in self.children())
        return slice(a[0], b[0], c[0]), slice(a[1], b[1], c[1])

    def rebuild(self, em):
        em.call_const(slice, [lambda v=v: em.value(v) for v in self.children()])


def make_slice(start: Value, stop: Value, step: Value) -> Value:
    """BUILD_SLICE: a constant slice, or a SliceValue when a bound is symbolic. A tensor bound
    whose data the trace knows is its `__index__()`, as slicing takes it in eager."""
    start, stop, step = (_known_index(p) for p in (start, stop, step))
    if any(isinstance(p, SymValue) for p in (start, stop, step)):
        return SliceValue(start, stop, step)
    return Const(slice(start.as_python(), stop.as_python(), step.as_python()))


def _known_index(bound: Value) -> Value:
    if isinstance(bound, TensorValue):
        value = known_data.python_value(bound, operator.index)
        if value is not known_data.NOT_KNOWN:
            return Const(value)
    return bound


def _symbolic_selects(key: Value):
    """`x[i]`, `x[:, i]`, `x[i, j]` where an index is a symbolic int (a loop counter seen
    changing): [(dim, index)] for torch.select, which keeps the index symbolic where indexing
    itself would pin it to its current value. None for any other key."""
    items = getattr(key, "items", None)
    items = items if isinstance(items, list) and key.python_type() is tuple else [key]
    if not any(isinstance(k, SymValue) and k.python_type() is int for k in items):
        return None
    selects, dim = [], 0
    for k in items:
        if isinstance(k, SymValue) and k.python_type() is int or isinstance(k, Const) and type(k.value) is int:
            selects.append((dim, k))
        elif isinstance(k, Const) and k.value == slice(None):
            dim += 1
        else:
            return None
    return selects


def index_operand(key: Value):
    """A tensor index as a graph operand (tuples of indices, slices, tensors, None, Ellipsis)."""
    if key.is_graph_value or isinstance(key, (Const, SliceValue)):
        return key
    items = getattr(key, "items", None)
    if isinstance(items, list) and key.python_type() in (tuple, list):
        return key.python_type()(index_operand(k) for k in items)    # graph_builder splits Python containers
    return Const(key.as_python())


# ============================================================================================
# torch functions and tensor methods
# ============================================================================================

_GLOBAL_STATE_PREFIXES = ("set_", "manual_seed", "seed", "use_deterministic", "save", "load", "_set", "initial_seed",
                          "get_rng_state", "set_rng_state", "compile", "autocast", "backward", "grad")
_CONST_TORCH_FUNCTIONS = {"is_scripting", "is_tracing", "_get_tracing_state", "is_compiling", "is_dynamo_compiling",
                          "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
                          "is_inference_mode_enabled", "is_autocast_enabled",
                          "get_default_dtype", "is_tensor", "is_storage", "is_floating_point", "is_complex",
                          "numel", "result_type", "promote_types", "can_cast", "broadcast_shapes",
                          "is_nonzero", "get_autocast_gpu_dtype", "is_autocast_cpu_enabled", "typename",
                          "_has_torch_function", "_has_torch_function_unary", "_has_torch_function_variadic",
                          "get_fastpath_enabled", "is_available", "is_built", "device_count",
                          "is_current_stream_capturing"}
# Of those, the ones that look at a tensor argument: a graph node (or False for has_torch_function).
_TENSOR_QUERIES = {"is_tensor", "is_floating_point", "is_complex", "numel", "result_type", "is_nonzero",
                   "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
                   "_has_torch_function", "_has_torch_function_unary", "_has_torch_function_variadic"}
_TENSOR_METHODS_TO_PYTHON = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                             "__complex__", "data_ptr", "storage", "untyped_storage", "__array__", "__len__"}
# Of those, the ones answered while tracing for a tensor whose data the trace knows (known_data.py)
_KNOWN_CONVERSIONS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__complex__"}
_TENSOR_METHODS_UNSUPPORTED = {"backward", "register_hook", "retain_grad", "share_memory_", "pin_memory",
                               "record_stream", "set_", "resize_", "__setstate__", "__reduce_ex__", "__deepcopy__",
                               "apply_", "map_", "map2_", "to_sparse"}
# Questions about the process's set-up that libraries ask on every call; folded, and guarded.
# Questions about the process, answered while tracing and asked again by a guard (QueryMatch):
# torch.distributed's state; the devices foreach and fused kernels support (torch.optim asks when
# it picks its implementation: they include the registered privateuse1 backend's name).
_FOREACH_UTILS = getattr(torch.utils, "_foreach_utils", None)
# (tuples, these two: the callable asked about may be unhashable, a torch._C._instancemethod)
_GLOBAL_QUERIES = tuple({torch.distributed.is_available, getattr(torch.distributed, "is_initialized", None),
                         getattr(torch.distributed, "is_torchelastic_launched", None),
                         getattr(_FOREACH_UTILS, "_get_foreach_kernels_supported_devices", None),
                         getattr(_FOREACH_UTILS, "_get_fused_kernels_supported_devices", None)} - {None})
_COMPILING_QUERIES = tuple({torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling,
                            getattr(torch._utils, "is_compiling", None)} - {None})


def _flat(args, kwargs):
    for a in [*args, *kwargs.values()]:
        items = getattr(a, "items", None)
        if isinstance(items, list):
            yield from items
        else:
            yield a


def torch_call(frame, f, args: list, kwargs: dict) -> Value:
    """A function of the torch namespace: a graph node, or folded when it only answers a question
    about the traced state."""
    graph = frame.tracer.graph
    name = getattr(f, "__name__", "")
    module = getattr(f, "__module__", "") or ""
    if isinstance(f, type):        # torch.no_grad, torch.autocast, torch.Size...: constructing a class
        return frame.wrap(f, None).call(frame, args, kwargs)
    if name == "clone" and type(getattr(f, "__self__", None)) in (torch.no_grad, torch.enable_grad) and not args:
        # `@torch.no_grad()` on a function: its wrapper enters `ctx.clone()`, a fresh no_grad()
        return frame.wrap(type(f.__self__), None).call(frame, [], {})
    if f is torch._C._set_grad_enabled:
        frame.tracer.set_grad_enabled(args[0].truthy(frame))
        return Const(None)
    if f is torch.is_grad_enabled:
        return Const(graph.grad_enabled)      # the traced grad mode, not the tracer's
    if f in (torch.is_autocast_enabled, torch.get_autocast_dtype) and len(args) == 1 and not kwargs \
            and isinstance(args[0], Const) and args[0].value in graph.autocast:
        enabled, dtype = graph.autocast[args[0].value]     # the traced autocast state
        return Const(enabled if f is torch.is_autocast_enabled else dtype)
    if f in _COMPILING_QUERIES:
        # Like TorchDynamo: code being captured is code being compiled, so libraries take their
        # compile-friendly paths (no data-dependent checks, no ContextVars). Frames that run
        # eagerly call the real function and see False. (False in a capture again after a
        # compile path raised: convert_frame._capture.)
        frame.tracer.asked_compiling = True
        return Const(frame.tracer.compiling)
    if name in _CONST_TORCH_FUNCTIONS:
        if not any(a.is_graph_value for a in _flat(args, kwargs)):
            return Const(fold(f, *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}))
        if name in _TENSOR_QUERIES:
            if name.startswith(("has_", "_has_")):
                return Const(False)
            return graph.call("call_function", f, tuple(args), kwargs)
    if f in _GLOBAL_QUERIES and not args and not kwargs:
        result = f()
        frame.tracer.add_guard(QueryMatch(f, result))
        return Const(result)
    if name.startswith(_GLOBAL_STATE_PREFIXES) or module.startswith(("torch.cuda", "torch.random", "torch.distributed",
                                                                     "torch.autograd", "torch.utils", "torch.jit",
                                                                     "torch.testing", "torch.hub", "torch.backends")):
        raise Unsupported(TORCH_NON_TENSOR_OP, f"{module}.{name} changes global state or is not a tensor op")
    if module.startswith("torch.nn.modules"):
        raise Unsupported(UNKNOWN_CALL, f"{module}.{name}")
    result = graph.call("call_function", f, tuple(args), kwargs)
    if isinstance(result, Const) and not is_constant(result.value):
        raise Unsupported(UNKNOWN_CALL, f"{module}.{name} returned a {type(result.value).__name__}")
    return result


def tensor_method(frame, obj: TensorValue, name: str, args, kwargs) -> Value:
    result = mode_dispatch(frame, _method(name), [obj, *args], kwargs)
    if result is not NotImplemented:
        return result
    method = getattr(torch.Tensor, name, None)
    if method is not None:      # a method modelled elsewhere (Tensor.numpy: values/numpy_functions)
        result = call_modelled(method, frame, [obj, *args], kwargs)
        if result is not NotImplemented:
            return result
    if name in _TENSOR_METHODS_TO_PYTHON:
        if name in _KNOWN_CONVERSIONS and not args and not kwargs:
            value = known_data.python_value(obj, _method(name))
            if value is not known_data.NOT_KNOWN:
                return frame.wrap(value, None)
        raise Unsupported(TENSOR_TO_PYTHON, f"Tensor.{name}()")
    if name in _TENSOR_METHODS_UNSUPPORTED:
        raise Unsupported(UNKNOWN_CALL, f"Tensor.{name}()")
    if name in ("__enter__", "__exit__"):
        raise Unsupported(UNSUPPORTED_VALUE, "tensor as a context manager")
    if name == "__setitem__":
        obj.setitem(frame, args[0], args[1])
        return Const(None)
    if name == "__getitem__":
        return obj.getitem(frame, args[0])
    if _returns_self(obj, name, args, kwargs):
        return obj
    return frame.tracer.graph.call("call_method", name, (obj, *args), kwargs)


def _returns_self(obj: TensorValue, name, args, kwargs) -> bool:
    """`t.cpu()` / `t.to(device_or_dtype)` that change nothing return `t` itself in eager: no node
    (a graph of only such calls, before a `.numpy()` break, would be an empty graph compiled)."""
    example = obj.example
    if name == "cpu":
        return not args and not kwargs and example.device.type == "cpu"
    if name != "to" or set(kwargs) - {"non_blocking", "copy"} or not args or len(args) > 2:
        return False
    if "copy" in kwargs and kwargs["copy"].as_python() is not False:
        return False
    for a in args:
        value = a.value if isinstance(a, Const) else None
        if isinstance(value, str):
            try:
                value = torch.device(value)
            except RuntimeError:
                return False
        if isinstance(value, torch.device):
            if value.type != example.device.type or value.index not in (None, example.device.index):
                return False
        elif value is not example.dtype:
            return False
    return True

