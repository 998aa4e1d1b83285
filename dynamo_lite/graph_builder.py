"""Builds the torch.fx graph of one capture: placeholders from sources, op nodes, the output.

Every node gets `meta['example_value']`, a FakeTensor computed by running the op under
FakeTensorMode, so shapes, dtypes and devices propagate without computing anything. This is
the only place that creates nodes (the STYLE's "one builder").
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import re
from typing import Any, Callable, Optional

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           FakeTensorMode)

from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

from . import breaks, known_data
from .breaks import Unsupported
from .fake_fallbacks import example_from_stand_ins, example_with_placeholders, is_torch_op, refused_dtype
from .runtime import (autocast_devices, check_all_true, check_assertion, enter_autocast, exit_autocast, power,
                      set_autocast_devices)
from .values.base import Const, Value
from .values.containers import SeqValue
from .values.tensors import SymValue, TensorValue, specialize

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)

try:    # numpy scalars folded while tracing are graph constants: fx prints them as `np.float64(1.5)`
    import numpy as _np
    torch.fx.graph._register_custom_builtin("np", "import numpy as np", _np)
except ImportError:
    pass


def keep_saved_tensor(tensor):
    """The identity saved-tensor hook tracing runs under (convert_frame), so the program's own
    hooks never see the example ops' fake tensors."""
    return tensor


@contextlib.contextmanager
def tracing_saved_tensor_hooks_lifted():
    """Lift the identity hooks tracing runs under (keep_saved_tensor) for a while: torch.func's
    autograd transforms refuse to run under any saved-tensor hooks, on example values (a
    func_transform node) or in a backend tracing the graph (inductor). Hooks of the program's
    own stay: under them the transform fails here as it would in eager, and the call runs eagerly."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
    ours = hooks is not None and hooks[0] is keep_saved_tensor
    if ours:
        torch._C._autograd._pop_saved_tensors_default_hooks()
    try:
        yield
    finally:
        if ours:
            torch._C._autograd._push_saved_tensors_default_hooks(*hooks)


def is_symbolic(x) -> bool:
    """A SymInt/SymFloat/SymBool that really depends on a symbol (not a constant in disguise)."""
    return isinstance(x, SYM_TYPES) and bool(getattr(x.node.expr, "free_symbols", None))


# FakeTensorMode's refusal of a real tensor among an op's arguments
_REAL_TENSOR_IN_FAKE_OP = "Please convert all Tensors to FakeTensors"

#: matrix products, whose fake kernels take operands of different dtypes that the real kernels
#: refuse (`lin(x.double())` with a float weight: eager raises; a backend that drops the unused
#: result would not): outside autocast they must agree, else the op breaks the graph and raises
#: as eager does
_SAME_DTYPE_FUNCTIONS = (torch.mm, torch.matmul, torch.bmm, torch.mv, torch.dot, torch.addmm, torch.addmv,
                         torch.baddbmm, torch.addbmm, torch.nn.functional.linear, torch._C._nn.linear,
                         operator.matmul)       # (compared by identity: a target need not hash)
_SAME_DTYPE_METHODS = frozenset({"mm", "matmul", "bmm", "mv", "dot", "addmm", "addmv", "baddbmm", "addbmm",
                                 "__matmul__", "__rmatmul__"})


class ShapeSource(torch._guards.Source):
    """What ShapeEnv calls a tensor: its `name` is the Python expression our guard function uses
    to reach it, so ShapeEnv's guards drop straight into the generated check."""

    def __init__(self, expr: str):
        self._expr = expr

    @property
    def name(self) -> str:   # ShapeEnv reads .name
        return self._expr

    def guard_source(self):
        return torch._guards.GuardSource.LOCAL

    def __hash__(self):
        return hash(self._expr)

    def __eq__(self, other):
        return isinstance(other, ShapeSource) and other._expr == self._expr


def _foreign_python_function(target) -> bool:
    """A Python function put in the graph as one op (torch's own Python functions, functions
    marked allow_in_graph), not one of ours: what it does to its arguments is only seen by
    running it."""
    return inspect.isfunction(target) and not (getattr(target, "__module__", None) or "").startswith("dynamo_lite")


def _tensor_states(obj) -> list:
    """(tensor, its effect state, its version) for each tensor in args/kwargs."""
    return [(t, _effect_state(t), t._version) for t in torch.utils._pytree.tree_leaves(obj)
            if isinstance(t, torch.Tensor)]


#: what a Python graph op must not change about a tensor it is given, in `_effect_state`'s order
_EFFECTS = ("replaces the data of", "changes the .grad of", "changes requires_grad of",
            "changes the shape or strides of")


def _effect_state(t: torch.Tensor) -> tuple:
    try:
        storage = t.untyped_storage()._cdata
    except Exception:                   # noqa: BLE001 -- a tensor without a storage (a subclass)
        storage = None
    try:
        layout = tuple(t.shape), t.stride(), t.storage_offset()
    except Exception:                   # noqa: BLE001 -- (a sparse or nested tensor has no strides)
        layout = tuple(t.shape), None, None
    grad = id(t.grad) if t.is_leaf else 0          # (reading a non-leaf's .grad warns)
    return storage, grad, t.requires_grad, layout


def _check_python_function_effects(target, before: list) -> bool:
    """After a Python function's example run: a tensor it was given whose data was replaced
    (`p.data = ...`, `set_`), whose `.grad`, `requires_grad`, shape or strides it changed, is refused (the graph
    replays none of that: as one op it vanished when it returned None, and a backend that traces
    the graph again runs it on stand-ins); True when it wrote into one in place (its node must stay
    even when it returns nothing: `vector_to_parameters` into parameters)."""
    written = False
    for t, state, version in before:
        for what, old, new in zip(_EFFECTS, state, _effect_state(t)):
            if old != new:
                raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"{_target_name(target)} {what} a tensor it was given")
        written = written or t._version != version
    return written


def _contains_tensor(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, (tuple, list)):
        return any(_contains_tensor(o) for o in obj)
    if isinstance(obj, dict):
        return any(_contains_tensor(o) for o in obj.values())
    return False


def _negative_number(arg) -> bool:
    return isinstance(arg, (int, float)) and not isinstance(arg, bool) and arg < 0


class GraphBuilder:
    def __init__(self):
        self.graph = torch.fx.Graph()
        # Data-dependent sizes and scalars (nonzero, masks, .item()) are graph breaks, not unbacked symbols.
        self.shape_env = ShapeEnv(allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False)
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        self.named_inputs: list[tuple] = []      # (fake tensor, ShapeSource) of inputs ShapeEnv knows by name
        self.has_symbolic_inputs = False
        self.inputs: list[tuple[torch.fx.Node, Any, Any]] = []   # (placeholder, real tensor or float, source)
        self._scalar_inputs: dict = {}            # source -> SymValue of a Python int/float made a graph input
        self.grad_enabled = torch.is_grad_enabled()
        # The traced autocast state per device type, (enabled, dtype), and the cache flag; the
        # real state while tracing stays as it was when the frame started.
        self.autocast = autocast_devices()
        self.autocast_cache = torch.is_autocast_cache_enabled()
        self._real_autocast = dict(self.autocast)
        self._placeholder_names: set[str] = set()
        # fx GraphModules of higher-order ops' functions (torch.cond's branches, a vmap's body),
        # reached by get_attr nodes: they become submodules of the finished GraphModule.
        self.subgraphs: dict[str, torch.fx.GraphModule] = {}
        # TorchFunctionModes the traced code entered and has not left, innermost last
        # (function_modes.py): while one is here, tensor operations go to it, not to the graph.
        self.function_modes: list[Value] = []
        # A check on tensor values (`assert`, torch._check_tensor_all) made while Python side effects
        # were pending: when it fails, the frame must run again eagerly so that they happen before
        # the exception (runtime.FrameRun keeps that possible on every call, not only the first).
        self.checks_after_effects = False

    # ---- inputs -----------------------------------------------------------------------------
    def add_input(self, tensor: torch.Tensor, source, dynamic_dims=(), guard_expr: str = "") -> TensorValue:
        """A graph input. Dimensions in `dynamic_dims` become symbolic (sizes 0 and 1 stay
        specialized); `guard_expr` is how the guard function reaches the tensor."""
        name = self._placeholder_name("l_" + source.name() if source is not None else "input")
        node = self.graph.placeholder(name)
        if guard_expr and tensor.dim() > 0:
            # Named for ShapeEnv even when static: its guards may relate a symbolic size to this
            # tensor's sizes (`4 * x.size()[1] <= w.size()[0]`).
            context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if d in dynamic_dims
                                                              else DimDynamic.STATIC for d in range(tensor.dim())])
            shape_source = ShapeSource(guard_expr)
            example = _fake_of(lambda: self.fake_mode.from_tensor(tensor, symbolic_context=context,
                                                                  source=shape_source))
            self.named_inputs.append((example, shape_source, tuple(dynamic_dims)))
            self.has_symbolic_inputs |= bool(dynamic_dims)
        else:
            # (a 0-d tensor has no size to name; named, FakeTensorMode would give an integer one's
            # value a symbol, and an op reading it (`w[i]`, `x.view(n, -1)`) would specialize the
            # graph to that value where the graph itself reads it on every call)
            example = _fake_of(lambda: self.fake_mode.from_tensor(tensor, static_shapes=True))
        node.meta["example_value"] = example
        node.meta["source"] = source
        node.meta["real_type"] = type(tensor)
        self.inputs.append((node, tensor, source))
        return TensorValue(node, example, source)

    def real_input(self, node: torch.fx.Node):
        """The real object the placeholder `node` stands for on this call."""
        return next(real for (placeholder, real, _) in self.inputs if placeholder is node)

    def add_scalar_input(self, value, source, guard_expr: str):
        """A Python int or float read from `source` as a graph input (a SymInt / SymFloat while
        tracing): seen changing between calls, it is passed to the graph instead of baked in.
        Python uses that need its value (a comparison, a branch) specialize it under a ShapeEnv
        guard."""
        known = self._scalar_inputs.get(source)
        if known is not None:
            return known
        shape_source = ShapeSource(guard_expr)
        symbol = self.shape_env.create_unspecified_symbol(value, source=shape_source, dynamic_dim=DimDynamic.DYNAMIC)
        make = self.shape_env.create_symintnode if type(value) is int else self.shape_env.create_symfloatnode
        example = make(symbol, hint=value, source=shape_source)
        node = self.graph.placeholder(self._placeholder_name("l_" + source.name()))
        node.meta["example_value"] = example
        node.meta["source"] = source
        node.meta["real_type"] = type(value)
        self.named_inputs.append((example, shape_source, ()))
        self.has_symbolic_inputs = True
        self.inputs.append((node, value, source))
        known = self._scalar_inputs[source] = SymValue(node, example, source)
        return known

    def body_input(self, example, name: str) -> Value:
        """A stand-in input of a function being traced into a subgraph (subgraphs.py): a
        placeholder node with `example` that the subgraph's extraction erases again."""
        node = self.graph.placeholder(self._placeholder_name(f"body_{name}"))
        node.meta["example_value"] = example
        node.meta["body_input"] = True
        return self._wrap_result(node, example)

    def subgraph(self, gm: torch.fx.GraphModule, prefix: str) -> "SubgraphArg":
        """Register `gm` as a submodule of the graph; the value passes it to a higher-order op."""
        i = 0
        while f"{prefix}_{i}" in self.subgraphs:
            i += 1
        name = f"{prefix}_{i}"
        self.subgraphs[name] = gm
        node = self.graph.get_attr(name)
        node.meta["example_value"] = gm
        return SubgraphArg(node, gm)

    def module_root(self, graph: torch.fx.Graph) -> torch.nn.Module:
        """A root module holding the subgraphs the get_attr nodes of `graph` read."""
        root = torch.nn.Module()
        for node in graph.nodes:
            if node.op == "get_attr" and node.target in self.subgraphs:
                root.add_module(node.target, self.subgraphs[node.target])
        return root

    def _placeholder_name(self, text: str) -> str:
        base = re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "input"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 1
        while name in self._placeholder_names:
            i += 1
            name = f"{base}_{i}"
        self._placeholder_names.add(name)
        return name

    # ---- ops --------------------------------------------------------------------------------
    def call(self, op: str, target, args: tuple, kwargs: dict, *, always_node: bool = False) -> Value:
        """Record `target(*args, **kwargs)` (op = 'call_function' or 'call_method').

        Runs the op on example values first: if that fails the frame cannot be captured as is.
        A result without tensors (a size, a dtype) becomes a constant and no node is kept,
        unless `always_node` (ops run for their side effect, such as setitem)."""
        if self.function_modes and not _bypasses_modes(target):
            raise Unsupported(breaks.FUNCTION_MODE, f"{_target_name(target)} reached the graph without going to the "
                                                    f"active TorchFunctionMode")
        args, kwargs = known_data.with_known_bounds(target, args, kwargs, Const)
        node_args, fake_args = _split(args)
        node_kwargs, fake_kwargs = _split(kwargs)
        if target in (operator.pow, operator.ipow) and _negative_number(node_args[0]):
            # fx prints operator.pow infix: `-1 ** x` would read as -(1 ** x)
            target = torch.pow if _contains_tensor(fake_args) else power
        python_function = op == "call_function" and _foreign_python_function(target)
        before = _tensor_states((fake_args, fake_kwargs)) if python_function else None
        example = self._run_fake(op, target, fake_args, fake_kwargs)
        if python_function:
            always_node = _check_python_function_effects(target, before) or always_node
        if not always_node and not _contains_tensor(example) and not _contains_symbolic(example):
            return Const(_concrete(example))
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        if example is None and always_node:
            node.meta["example_value"] = None
            return Const(None)
        result = self._wrap_result(node, example)
        if isinstance(result, TensorValue):
            known_data.record(node, op, target, args, kwargs, example)
        return result

    def assertion(self, cond: TensorValue, expected: bool, message: tuple, after_effects: bool):
        """`assert` on a tensor's truth value: a node that raises AssertionError(*message) when
        bool(cond) is not `expected`, in program order (marked side-effectful so it is kept).
        `after_effects`: Python side effects are pending (`checks_after_effects`)."""
        node = self.graph.create_node("call_function", check_assertion, (cond.node, expected, *message), {})
        node.meta["example_value"] = None
        self.checks_after_effects |= after_effects

    def check_all_true(self, cond: TensorValue, error_name: str, after_effects: bool):
        """`torch._check_tensor_all(cond)`: a node raising the builtin exception `error_name` when
        not every element of `cond` is true, in program order (side-effectful, so it is kept)."""
        node = self.graph.create_node("call_function", check_all_true, (cond.node, error_name), {})
        node.meta["example_value"] = None
        self.checks_after_effects |= after_effects

    def check_may_follow_effects(self, effects) -> bool:
        """May a check on tensor values go into the graph with these Python side effects pending?
        When it fails, the frame runs again eagerly, the effects in their place; the graph's writes
        into its inputs before the check could not always be undone first (an input that
        requires grad), so not after such writes."""
        return not effects or not self.writes_into_inputs()

    def _run_fake(self, op, target, args, kwargs):
        fn: Callable = target if op == "call_function" else getattr(type(args[0]), target)

        def run(fn, args, kwargs):
            with self.fake_mode, torch.set_grad_enabled(self.grad_enabled), self._traced_autocast(), \
                    self._symbolic_dispatch():
                return fn(*args, **kwargs)
        try:
            try:
                example = run(fn, args, kwargs)
                self._check_operand_dtypes(op, target, fn, args, kwargs, example)
                return example
            except DataDependentOutputException:
                # a 0-d tensor where the op takes a Scalar: the binding reads it, the kernel never does
                example = example_with_placeholders(op, target, fn, args, kwargs, run)
                if example is None:
                    raise
                return example
            except (DynamicOutputShapeException, Unsupported):
                raise
            except RuntimeError:
                # a fake kernel rejecting a call the real one takes: checked on real stand-ins
                plain = is_torch_op(op, target) and not any(enabled for enabled, _ in self.autocast.values())
                example = example_from_stand_ins(self.fake_mode, fn, args, kwargs, self.grad_enabled) if plain else None
                if example is None:
                    raise
                return example
        except (DataDependentOutputException,) as e:
            raise Unsupported(breaks.TENSOR_TO_PYTHON, f"{_target_name(target)}: {e}") from None
        except DynamicOutputShapeException as e:
            raise Unsupported(breaks.DYNAMIC_OUTPUT_SHAPE, f"{_target_name(target)}: {e}") from None
        except Unsupported:
            raise
        except Exception as e:  # the op itself failed: the eager run will raise the user's error
            if _REAL_TENSOR_IN_FAKE_OP in str(e):      # ...unless a real tensor got in: a bug of ours
                raise RuntimeError(f"a real tensor reached {_target_name(target)} while tracing") from e
            raise Unsupported(breaks.USER_EXCEPTION, f"{_target_name(target)} raised {type(e).__name__}: {e}") from None

    def _check_operand_dtypes(self, op, target, fn, args, kwargs, example):
        """Raise as eager would where the fake kernel lets through dtypes the real one refuses:
        an op on integer or bool tensors whose kernel lacks that dtype (`refused_dtype`: raises
        NotImplementedError, eager's error, past the stand-in retry below), and a matrix
        product of tensors of different dtypes outside autocast (`_SAME_DTYPE_FUNCTIONS`)."""
        refused = refused_dtype(op, target, fn, args, kwargs, example)
        if refused is not None:
            raise NotImplementedError(refused)
        product = any(target is f for f in _SAME_DTYPE_FUNCTIONS) if op == "call_function" else \
            (op == "call_method" and target in _SAME_DTYPE_METHODS)
        if not product or any(enabled for enabled, _ in self.autocast.values()):
            return
        dtypes = [t.dtype for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if len(set(dtypes)) > 1:          # (a kernel taking them after all: its real stand-ins say so)
            raise RuntimeError(f"{_target_name(target)}: operands of dtypes {', '.join(map(str, dtypes))}")

    def _symbolic_dispatch(self):
        """Once the graph has symbolic sizes, ops run through the Python dispatcher, as TorchDynamo's
        tracing does: composite ops' C++ kernels (interpolate's size, ...) demand concrete integers,
        their Python decompositions take symbolic ones."""
        if not self.shape_env.var_to_val:
            return contextlib.nullcontext()
        return enable_python_dispatcher()

    def _traced_autocast(self):
        """Run an example op under the traced autocast state (inside a traced `autocast` block)."""
        if self.autocast == self._real_autocast:
            return contextlib.nullcontext()
        return _AutocastState(self.autocast)

    def set_autocast(self, device: str, enabled: bool, dtype, cache: bool, entering: bool):
        """Enter or leave an autocast block: one graph node doing what torch.autocast does."""
        node = self.graph.create_node("call_function", enter_autocast if entering else exit_autocast,
                                      (device, enabled, dtype, cache), {})
        node.meta["example_value"] = None
        self.autocast = {**self.autocast, device: (enabled, dtype)}
        self.autocast_cache = cache

    def _wrap_result(self, node: torch.fx.Node, example) -> Value:
        node.meta["example_value"] = example
        if isinstance(example, torch.Tensor):
            return TensorValue(node, example)
        if isinstance(example, SYM_TYPES):
            return SymValue(node, example)
        if isinstance(example, (tuple, list)):
            items = []
            for i, item in enumerate(example):
                if _contains_tensor(item) or _contains_symbolic(item):
                    sub = self.graph.create_node("call_function", operator.getitem, (node, i), {})
                    items.append(self._wrap_result(sub, item))
                else:
                    items.append(Const(_concrete(item)))
            cls = type(example) if type(example) in (tuple, list, torch.Size) or hasattr(type(example), "n_fields") \
                or hasattr(type(example), "_fields") else tuple
            return SeqValue(items, cls)
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"op returned {type(example).__name__}")

    # ---- output -----------------------------------------------------------------------------
    def sizes(self, tensor: TensorValue) -> Value:
        """`tensor.shape` as a value: constants for static dims, size nodes for symbolic ones."""
        items = []
        for i, size in enumerate(tensor.example.shape):
            if is_symbolic(size):
                node = self.graph.create_node("call_function", torch.ops.aten.sym_size.int, (tensor.node, i), {})
                node.meta["example_value"] = size
                items.append(SymValue(node, size))
            else:
                items.append(Const(int(size)))
        if all(isinstance(i, Const) for i in items):
            return Const(torch.Size([i.value for i in items]))
        return SeqValue(items, torch.Size)

    def shape_guards(self) -> list[str]:
        """ShapeEnv's guards on the symbolic inputs, as Python over guard-function names."""
        if not self.has_symbolic_inputs and not self.shape_env.var_to_val:
            return []
        # (a symbol no input names makes produce_guards fail: an internal error, the frame eager,
        # never a guard left out)
        fakes, sources, _ = zip(*self.named_inputs)
        guards = list(self.shape_env.produce_guards(list(fakes), list(sources)))
        # A dynamic dim that tracing specialized (`if x.size(0) > 2` seen with 2 gives s0 == 2) ends
        # up static, and produce_guards leaves static sizes to the tensor guard, which does not
        # check dynamic dims: pin such dims here.
        for fake, source, dims in self.named_inputs:
            for d in dims:
                size = fake.size(d)
                if not is_symbolic(size):
                    guards.append(f"{source.name}.size()[{d}] == {int(size)}")
        return guards

    def finish(self, outputs: list[TensorValue]) -> torch.fx.GraphModule:
        self.graph.output(tuple(v.node for v in outputs))
        return torch.fx.GraphModule(self.module_root(self.graph), self.graph)

    def written_inputs(self) -> Optional[list[int]]:
        """Positions of the graph inputs an in-place write lands in (see `written_inputs`)."""
        return written_inputs(self.graph)

    def writes_into_inputs(self) -> bool:
        return self.written_inputs() != []

    @staticmethod
    def writes_in_place(node: torch.fx.Node) -> bool:
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        if node.target in _INPLACE_FUNCTIONS or "out" in node.kwargs or getattr(node.target, "writes_in_place", False):
            return True         # the last: a target that says it writes into its first argument (numpy_runtime)
        if node.op == "call_function" and _inplace_argument(node):
            return True         # F.relu(x, inplace=True), F.dropout(x, p, training, True)
        if getattr(node.target, "__module__", None) in ("_operator", "operator"):
            return False            # operator.and_ / or_ / not_ are not in-place (iand, ior are)
        return name.endswith("_") and not name.endswith("__") and node.op in ("call_method", "call_function")

    def ops(self) -> list[torch.fx.Node]:
        """The graph's op nodes (calls), in order."""
        return [n for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module")]

    def op_count(self) -> int:
        return len(self.ops())


def graph_structure(gm: torch.fx.GraphModule) -> str:
    """The graph's ops and how they connect, without its value names (which come from where the
    inputs were found): equal for two graphs that compute the same thing from the same inputs."""
    index = {node: i for i, node in enumerate(gm.graph.nodes)}

    def ref(arg):
        return torch.fx.node.map_arg(arg, lambda node: f"%{index[node]}")
    return repr([(n.op, "" if n.op == "placeholder" else n.target, ref(n.args), ref(n.kwargs))
                 for n in gm.graph.nodes])


def written_inputs(graph: torch.fx.Graph) -> Optional[list[int]]:
    """Positions of the inputs (placeholders) of `graph` an in-place write lands in, directly or
    through a view, judged by the example values' storages (node.meta["example_value"]); writes
    into the graph's own intermediates do not count. An op given `out=` writes into those tensors
    (not its first argument), a foreach op into each tensor of its first list. None when that cannot be told (a tensor without example value or
    storage)."""
    positions: dict = {}
    for i, node in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        key = storage_key(node.meta.get("example_value"))
        if key is not None:
            positions.setdefault(key, []).append(i)
    written: set = set()
    for node in graph.nodes:
        for key in written_storages(node):
            if key is None:
                return None
            written.update(positions.get(key, ()))
    return sorted(written)


def written_storages(node: torch.fx.Node) -> list:
    """The storages (keys of their example values; None where unknown) an in-place node writes
    into: its `out=` tensors, else its first argument (each tensor of a foreach op's list)."""
    if not GraphBuilder.writes_in_place(node):
        return []
    if "out" in node.kwargs:
        out = node.kwargs["out"]
        targets = list(out) if isinstance(out, (tuple, list)) else [out]
    else:
        first = node.args[0] if node.args else None
        targets = list(first) if isinstance(first, (tuple, list)) else [first]
    return [storage_key(t.meta.get("example_value")) if isinstance(t, torch.fx.Node) else None for t in targets]


def storage_key(value):
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return value.untyped_storage()._cdata
    except Exception:      # no storage to look at (sparse, some subclasses)
        return None


class SubgraphArg(Value):
    """A subgraph (an fx GraphModule registered on the graph) as an argument of a graph op; it
    never reaches the program's own values."""
    __slots__ = ("node", "gm")

    def __init__(self, node: torch.fx.Node, gm: torch.fx.GraphModule):
        super().__init__(None)
        self.node, self.gm = node, gm

    def python_type(self):
        return torch.fx.GraphModule

    def graph_arg(self):
        return self.node, self.gm


class _AutocastState:
    """Switch the real autocast state to `state` for one example op, and back."""

    def __init__(self, state: dict):
        self.state, self.saved = state, {}

    def __enter__(self):
        self.saved = autocast_devices()
        set_autocast_devices(self.state)

    def __exit__(self, *exc):
        set_autocast_devices(self.saved)
        return False


def _inplace_argument(node: torch.fx.Node) -> bool:
    """Is the call's `inplace` argument (torch.nn.functional's activations and dropouts: they
    then write into their first argument) true, by keyword or by position?"""
    if "inplace" in node.kwargs:
        return node.kwargs["inplace"] is True
    position = _inplace_position(node.target)
    return position is not None and len(node.args) > position and node.args[position] is True


@functools.lru_cache(maxsize=None)
def _inplace_position(target) -> Optional[int]:
    """Where `target` takes `inplace` by position, or None (no such parameter, or no signature)."""
    try:
        parameters = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None
    return parameters.index("inplace") if "inplace" in parameters else None


_INPLACE_FUNCTIONS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift, operator.imatmul}


def _bypasses_modes(target) -> bool:
    """Ops the tracer records of its own accord, which eager runs without asking any
    TorchFunctionMode: grad-mode switches, our runtime helpers."""
    return target is torch._C._set_grad_enabled or getattr(target, "__module__", None) == "dynamo_lite.runtime"


def _fake_of(make):
    """A graph input's fake tensor. Torch refuses to read some tensors at all (a view returned by
    unbind whose base was since changed in place): eager raises on their use too, so the frame
    runs eagerly, where the program meets torch's own error."""
    try:
        return make()
    except RuntimeError as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"reading an input tensor raised RuntimeError: {e}") from None


def _concrete(example):
    """A result that is constant after all as a plain Python value: a SymInt/SymFloat/SymBool whose
    expression ShapeEnv has already pinned (by a guard) is the number it stands for, never the
    symbolic object (which rebuilt code would carry into the program)."""
    if isinstance(example, SYM_TYPES):
        return specialize(example)
    if type(example) in (tuple, list):
        return type(example)(_concrete(x) for x in example)
    return example


def _contains_symbolic(obj) -> bool:
    if isinstance(obj, SYM_TYPES):
        return is_symbolic(obj)
    if isinstance(obj, (tuple, list)):
        return any(_contains_symbolic(o) for o in obj)
    return False


def _split(obj):
    """Value structure -> (fx node structure, fake example structure). Python tuples, lists and
    dicts of values (an index tuple, an op's argument tuple) are split item by item."""
    if isinstance(obj, Value):
        return obj.graph_arg()
    if isinstance(obj, (tuple, list)):
        pairs = [_split(i) for i in obj]
        return type(obj)(p[0] for p in pairs), type(obj)(p[1] for p in pairs)
    if isinstance(obj, dict):
        pairs = {k: _split(v) for k, v in obj.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if obj is None or isinstance(obj, (int, float, bool, str, torch.dtype, torch.device)):
        return obj, obj
    raise Unsupported(breaks.UNSUPPORTED_VALUE, f"cannot pass {type(obj).__name__} value {obj!r:.60} to a graph op")


def _target_name(target) -> str:
    return getattr(target, "__name__", None) or str(target)
