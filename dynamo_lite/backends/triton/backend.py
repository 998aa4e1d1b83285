"""`triton_backend(gm, example_inputs) -> callable`: the pipeline, end to end.

    captured fx graph --decompose.to_aten--> functional aten graph --GraphLowering--> IR nodes
      --schedule--> fused groups + extern calls --codegen--> Triton kernels
      --WrapperCodegen--> `call(arg0, ...)`, returned with `.compiled_graph` for inspection

(Training: AOTAutograd traces the captured graph with the same decomposition table; its forward
and backward parts enter at `decompose.from_aten`, not traced again.)

Static shapes are specialized: sizes and strides are constants in the kernels. A graph captured
with symbolic sizes (dynamic capture, `torch.compile(dynamic=True)`) is compiled once per distinct
concrete input shape at run time, unless most of its ops have static shapes (a `generate()`
decode step, dynamic only in the KV cache's length): then its static parts are compiled once and
the ops that see a symbolic size run as captured (dynamic_split.py). What cannot be compiled runs eagerly, never fails: single
unknown ops become extern aten calls inside the wrapper, and so do ops on CPU values in a graph
whose kernels run on a GPU (a kernel reads a CPU scalar as an argument, as Inductor does: the
optimizer's step sizes); graphs on devices Triton cannot reach, or
that make tracing fail, run as the captured graph itself (with the reason on
`.compiled_graph.fallback_reason`). Graphs that write into their inputs (optimizer steps,
batch-norm running statistics, `x[:, 1:] += 1`) are lowered: the write-backs are kernel stores
into the inputs (graph_lowering._write_back); they run as captured only where writing in place
is unsafe (`_unsafe_write`): a written input whose elements share memory, or that overlaps
another input, at compile time or (checked on each call, `_unless_overlapping`) at run time, and
where eager refuses the write for its result type (`int_tensor.mul_(1.5)`: the functionalized
kernels would cast silently). An output eager makes as a view of another output is remade as that
view of the compiled result (`_output_views`: not computed, the other output's buffer viewed), so the two
share memory as in eager.
Checks on tensor values in the graph run right after it (`backends/graph_checks.py`). Graphs that need autograd (inputs that require grad, grad
mode on) go through AOTAutograd, which hands us a forward and a backward graph to compile.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import operator
import time
import warnings
from typing import Callable, Optional

import torch
import torch.fx

from ..graph_checks import checking_after, checks_hoisted
from ..replayed_views import copy_returning, views_replayed, with_views_replayed
from . import availability, dynamic_split, precompile, settings
from .codegen import KernelSource, generate
from .cudagraphs import Recorded, static_positions, why_not_recordable
from .decompose import from_aten, grad_mode_after, to_aten
from .graph_lowering import GraphLowering, graph_outputs
from .ir import ExternNode, ScatterNode
from .lowerings import GraphNotLowerable
from .scheduler import schedule, scatter_groups
from .wrapper import KernelCall, WrapperCodegen

log = logging.getLogger("dynamo_lite.triton")

#: the most recently compiled graphs (for debugging and tests)
recent: "collections.deque[CompiledGraph]" = collections.deque(maxlen=16)


@dataclasses.dataclass
class CompiledGraph:
    """What was made of one graph (attached to the returned callable as `.compiled_graph`)."""
    wrapper_source: str = ""
    kernels: list[KernelSource] = dataclasses.field(default_factory=list)
    extern_ops: dict = dataclasses.field(default_factory=dict)      # aten calls the wrapper makes, per op
    host_ops: dict = dataclasses.field(default_factory=dict)        # ops on host scalars computed as Python
    # op -> the error its lowering raised (a bug of ours, warned once): it ran as an aten call
    lowering_errors: dict = dataclasses.field(default_factory=dict)
    fallback_reason: Optional[str] = None
    compile_seconds: float = 0.0
    launchers: list = dataclasses.field(default_factory=list)
    specializations: dict = dataclasses.field(default_factory=dict)   # dynamic graphs: per shape
    mutated_inputs: list = dataclasses.field(default_factory=list)   # input positions written in place
    # a dynamic graph split into static parts compiled once and symbolic ones run as captured
    # (dynamic_split.py): how many of each; its kernels and aten calls are its compiled parts'
    split_parts: Optional[tuple[int, int]] = None
    # per output: strides it comes out with where they are not eager's (saved activations of a
    # training forward, e.g. channels-last), else None
    output_strides: list = dataclasses.field(default_factory=list)
    wrapper_call: Optional[Callable] = None     # the generated `call` itself (bench/models_profile.py times its lines)
    # the CUDA-graph mode (cudagraphs.py): None where not asked for, else "recorded" or why not;
    # and how many calls replayed the recording or ran as compiled (a parameter had moved)
    cuda_graph: Optional[str] = None
    cuda_graph_calls: dict = dataclasses.field(default_factory=lambda: {"replayed": 0, "compiled": 0})

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def source(self) -> str:
        """The wrapper followed by every kernel: the whole compiled artifact as one file."""
        parts = [self.wrapper_source] + [k.source for k in self.kernels]
        return "\n\n".join(parts)


def triton_backend(gm: torch.fx.GraphModule, example_inputs: list, **options) -> Callable:
    """torch.compile-style backend: compile `gm` into Triton kernels plus a Python wrapper.
    `cudagraphs=True` (default: settings.cudagraphs) records inference graphs into CUDA graphs
    (cudagraphs.py). Outputs that `unbind`, `split` and the like return are made by those ops
    again after the call (replayed_views.py)."""
    availability.require()
    gm, replays = views_replayed(gm)
    return with_views_replayed(_compiled(gm, example_inputs, **options), replays)


def _compiled(gm: torch.fx.GraphModule, example_inputs: list, **options) -> Callable:
    precompile.start_early()
    devices = {t.device for t in example_inputs if isinstance(t, torch.Tensor)} | _devices_of_values(gm.graph)
    # Values on the CPU next to GPU values (torch.optim's step counters and step sizes beside CUDA
    # parameters) stay there: ops on them are aten calls, kernels read them as scalar arguments
    # (GraphLowering.on_host). The kernels themselves run on one device.
    kernel_devices = {d for d in devices if d.type != "cpu"} or devices
    if len(kernel_devices) > 1:
        return _eager(gm, f"the graph computes on several GPUs ({', '.join(sorted(map(str, kernel_devices)))})")
    if not all(availability.can_run_on(d) for d in kernel_devices):
        return _eager(gm, f"tensors on {sorted(map(str, devices))}: Triton runs on CUDA (or on the CPU "
                          "with TRITON_INTERPRET=1)")
    if any(isinstance(v, (float, torch.SymFloat)) for v in example_inputs):
        # A float input would be baked into the kernels as the example's value: wrong results on
        # the next value (sizes, ints, are specialized per value below). Such graphs run as captured.
        return _eager(gm, "a Python float as a graph input is not lowered yet")
    view_of_written = _returns_view_of_written_input(gm.graph)
    if view_of_written is not None:
        # eager's output shares the input's memory; ours would be a copy (aliasing differs)
        return _eager(gm, f"output {view_of_written} is a view of an input the graph writes in place")
    cast = _in_place_result_it_cannot_hold(gm.graph)
    if cast is not None:
        # eager raises ("result type Float can't be cast to the desired output type Long");
        # functionalized, the write would be a silent cast. Run as captured: it raises too.
        return _eager(gm, f"an in-place {cast} whose result type the written tensor cannot hold")
    if _writes_overlapping_memory(gm.graph):
        # Eager raises ("more than one element of the written-to tensor refers to a single
        # memory location"); lowered kernels would just compute. Run as captured: it raises too.
        return _eager(gm, "an in-place write into memory that overlaps itself or an operand (eager may refuse it)")
    autograd = _needs_autograd(example_inputs)
    grad_values = _grad_values_not_from_inputs(gm, autograd)
    if grad_values is not None:
        # an inference compile would drop their requires_grad (and AOTAutograd makes no new leaves)
        return _eager(gm, grad_values)
    dynamic = _dynamic_positions(gm, example_inputs)
    if dynamic:
        parts = None if autograd else \
            dynamic_split.plan(gm, writes_in_place=any(True for _ in _in_place_writes(gm.graph)))
        if parts is not None:
            return _split(gm, parts)
        return _specializing(gm, example_inputs, dynamic)
    if autograd:
        return _with_autograd(gm, example_inputs)
    recorded = options.get("cudagraphs", settings.cudagraphs)
    return compile_graph(gm, example_inputs, cuda_graph_static=static_positions(gm, example_inputs) if recorded else None)


def triton_cudagraphs_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `triton_cudagraphs` backend: `triton` with inference graphs recorded into CUDA graphs."""
    return triton_backend(gm, example_inputs, cudagraphs=True)


# Python ints seen changing are graph inputs (convert_frame reads this): a graph taking one is
# dynamic, split (dynamic_split.py) or compiled per value, instead of captured again for every
# value (a sliding-window KV cache's token counter: a recapture per generated token, until the
# cache limit ran the frame eagerly). Python floats stay constants in its graphs: a float input
# would make the graph run as captured (it is not lowered yet).
triton_backend.accepts_scalar_inputs = (int,)
triton_cudagraphs_backend.accepts_scalar_inputs = (int,)

def _devices_of_values(graph: torch.fx.Graph) -> set:
    """The devices of the tensors the graph's nodes compute (their traced example values)."""
    from torch.utils import _pytree as pytree
    examples = [node.meta.get("example_value", node.meta.get("val")) for node in graph.nodes]
    return {v.device for v in pytree.tree_leaves(examples) if isinstance(v, torch.Tensor)}


def _in_place_writes(graph: torch.fx.Graph):
    """(node, the example of the tensor it writes) for each in-place op writing a tensor."""
    from ...graph_builder import GraphBuilder
    for node in graph.nodes:
        target = node.args[0] if node.args else None
        if GraphBuilder.writes_in_place(node) and isinstance(target, torch.fx.Node):
            written = target.meta.get("example_value")
            if isinstance(written, torch.Tensor):
                yield node, written


def _in_place_result_it_cannot_hold(graph: torch.fx.Graph) -> Optional[str]:
    """The first in-place op whose operands promote to a type the written tensor cannot be cast
    to (`int_tensor.mul_(1.5)`), which eager refuses; None if there is none."""
    for node, written in _in_place_writes(graph):
        operands = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a for a in node.args[1:]]
        if not operands or not all(isinstance(o, (torch.Tensor, bool, int, float, complex)) for o in operands):
            continue
        try:
            results = [torch.result_type(written, o) for o in operands]
        except Exception:              # noqa: BLE001 -- operands result_type does not take: not this check
            continue
        if not all(torch.can_cast(r, written.dtype) for r in results):
            return str(node.target if isinstance(node.target, str) else getattr(node.target, "__name__", node.target))
    return None


def _writes_overlapping_memory(graph: torch.fx.Graph) -> bool:
    """An in-place write eager may refuse, or whose result depends on eager's write order: into
    a tensor whose elements share memory (`_shares_memory_within`), or from an operand that is
    another view of the written memory (`v *= v[1:]`)."""
    from ...graph_builder import storage_key
    for node, written in _in_place_writes(graph):
        if _shares_memory_within(written):
            return True
        key = storage_key(written)
        operands = [*node.args[1:], *node.kwargs.values()]
        if node.target is operator.setitem and len(node.args) == 3:
            # `y[:, 1] += 1` ends in `y[:, 1] = <that same view>`: what is written is y[:, 1]
            written, operands = _setitem_destination(written, node.args[1]), [node.args[2]]
            if written is None:
                continue                   # a tensor index: the value is gathered into a copy first
        for arg in operands:
            other = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
            if isinstance(other, torch.Tensor) and other is not written and storage_key(other) == key \
                    and key is not None and not _same_view(other, written) and _ranges_overlap(other, written):
                return True
    return False


def _shares_memory_within(t: torch.Tensor) -> bool:
    """May two elements of `t` be one memory location? Where torch knows they are (an expand),
    and where its strides, sorted, do not each step past every position the smaller ones reach
    (overlapping `as_strided` windows: torch cannot tell, so eager writes them in its own order).
    Conservative, and exact for the layouts views of a dense tensor have."""
    if torch._debug_has_internal_overlap(t) == 1:
        return True
    if t.numel() == 0:
        return False
    reach = 0
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def _setitem_destination(written: torch.Tensor, index) -> Optional[torch.Tensor]:
    """The view `written[index]` a `setitem` writes, for an index of ints, slices, None and
    Ellipsis; None for any other index (tensors: advanced indexing)."""
    parts = index if isinstance(index, tuple) else (index,)
    if not all(p is None or p is Ellipsis or type(p) in (int, slice) for p in parts) or any(
            isinstance(b, torch.fx.Node) for p in parts if type(p) is slice for b in (p.start, p.stop, p.step)):
        return None
    try:
        return written[index]
    except Exception:                      # noqa: BLE001 -- eager raises it too, at run time
        return None


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.storage_offset() == b.storage_offset() and a.shape == b.shape and a.stride() == b.stride()


def _ranges_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do two views of one storage span common bytes (`x[0]` and `x[1]` do not)?"""
    start_a, start_b = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    return start_a < start_b + _extent(b) and start_b < start_a + _extent(a)


class _Refused(Exception):
    """A graph the backend deliberately runs as captured (the message is the reason)."""


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, free_outputs: frozenset = frozenset(),
                  cuda_graph_static: Optional[frozenset] = None, aten: bool = False) -> Callable:
    """Compile for exactly these input shapes; on an internal error, run `gm` eagerly instead.
    `aten`: `gm` is already a functional aten graph over our decomposition table (a part that
    AOTAutograd traced with it), not traced again (decompose.from_aten).
    `free_outputs`: output positions that may come out in a layout of ours (the compiled
    callable's `compiled_graph.output_strides` says which did). `cuda_graph_static`: record the
    graph into a CUDA graph where it can be (cudagraphs.py), these input positions in place."""
    start = time.perf_counter()
    try:
        checked, checks = checks_hoisted(gm)
        if checked is None:
            raise _Refused(checks)
        call, info = _compile(checked, example_inputs, free_outputs, recording=cuda_graph_static is not None,
                              aten=aten)
    except (_Refused, GraphNotLowerable) as e:
        return _eager(gm, str(e))
    except Exception as e:
        if settings.strict:
            raise
        reason = f"{type(e).__name__}: {e}"
        warnings.warn(f"dynamo_lite triton backend: graph runs eagerly ({reason})", stacklevel=2)
        log.debug("compile failure", exc_info=True)
        return _eager(gm, reason)
    info.compile_seconds = time.perf_counter() - start
    precompile.submit_graph(info.launchers)
    call = _eager_if_first_call_fails(call, checked, info)
    if cuda_graph_static is not None:
        if checks and info.cuda_graph is None:
            info.cuda_graph = "not recorded: it checks tensor values on the host"
        if info.cuda_graph is None:
            info.cuda_graph = "not recorded yet"
            call = Recorded(call, info, cuda_graph_static)
    if checks:
        call = checking_after(call, checks)
    call.compiled_graph = info
    recent.append(info)
    return call


def _eager_if_first_call_fails(call, gm, info: CompiledGraph) -> Callable:
    """Triton compiles each kernel at its first launch: a kernel it rejects fails the first call.
    Then run the captured graph instead, on the inputs as they were (the first call copies the
    inputs the graph writes, to put them back); if that fails too, the error is the user's and
    propagates as in eager. With `settings.strict` (tests) a first call that fails where eager
    runs raises."""
    chosen: list = []

    def run(*args):
        if chosen:
            return chosen[0](*args)
        saved = [(args[i], args[i].clone()) for i in info.mutated_inputs]
        try:
            out = call(*args)
        except Exception as e:
            with torch.no_grad():
                for arg, before in saved:
                    arg.copy_(before)
            def eager(*args):
                return _in_layouts(gm(*args), info.output_strides)
            result = eager(*args)
            info.fallback_reason = f"first call failed: {type(e).__name__}: {e}"
            if settings.strict:                  # eager ran: the failure was ours
                raise RuntimeError(f"triton backend: {info.fallback_reason}") from e
            warnings.warn(f"dynamo_lite triton backend: graph runs eagerly ({info.fallback_reason})", stacklevel=2)
            chosen.append(eager)
            return result
        chosen.append(call)
        return out
    return run


def _in_layouts(result, strides: list):
    """Eager's results with the outputs listed in `strides` copied into those layouts (what the
    compiled graph promised its backward)."""
    if not any(strides):
        return result
    out = list(result)
    for i, st in enumerate(strides):
        if st is not None:
            out[i] = torch.empty_strided(out[i].shape, st, dtype=out[i].dtype, device=out[i].device).copy_(out[i])
    return type(result)(out)


def _compile(gm, example_inputs, free_outputs: frozenset = frozenset(), recording: bool = False,
             aten: bool = False):
    # (an output whose layout is ours, an activation saved for the backward, is never remade as a
    # view: the backward was compiled for the strides the lowering reports for it; an aten graph,
    # AOTAutograd's, keeps its outputs: no hidden base is added to it)
    views, owners = _output_views(gm)
    original, returned = gm, len(graph_outputs(gm))
    if owners and aten:
        views = [v for v in views if v[1] < returned]
    elif owners:
        gm = _returning_also(gm, owners)           # (what the wrapper returns; callers see `original`'s)
    views = [v for v in views if v[0] not in free_outputs and v[1] not in free_outputs]
    aten_gm = from_aten(gm, example_inputs) if aten else to_aten(gm, example_inputs)
    lowering = GraphLowering(aten_gm, example_inputs, free_outputs, {v[0]: v[1] for v in views}).run()
    keep = {o.layout[0].name for o in lowering.outputs if getattr(o, "layout", None) is not None}
    items = []
    kernels = []
    for scheduled in schedule(lowering.nodes, keep):
        if isinstance(scheduled, ExternNode):
            items.append(scheduled)
            continue
        for item in scatter_groups(scheduled) if isinstance(scheduled, ScatterNode) else [scheduled]:
            ks = generate(item, frozenset(lowering.scalar_args))
            if ks is not None:
                kernels.append(ks)
                items.append(KernelCall(ks, item))
            elif item.stores:                     # zero elements: outputs still need a buffer
                items.append(KernelCall(None, item))
    wrapper = WrapperCodegen(lowering, items, grad_mode_after(gm))
    source = wrapper.generate()
    namespace = dict(wrapper.globals)
    exec(compile(source, f"<dynamo_lite triton wrapper {id(gm):x}>", "exec"), namespace)
    info = CompiledGraph(source, kernels, wrapper.host.aten_calls(lowering.extern_ops), launchers=wrapper.launchers,
                         host_ops=wrapper.host.python_ops(), wrapper_call=namespace["call"])
    if settings.debug:
        print(info.source)
    call = _outputs_viewing_outputs(_fresh_views(namespace["call"], gm, wrapper.outputs_passing_inputs), views,
                                    original, returned)
    info.mutated_inputs = lowering.mutated_inputs
    info.lowering_errors = dict(lowering.lowering_errors)
    info.output_strides = lowering.output_strides()[:returned]
    if recording:
        why = why_not_recordable(aten_gm, example_inputs, info.mutated_inputs, info.host_ops)
        info.cuda_graph = None if why is None else f"not recorded: {why}"
    if info.mutated_inputs:
        call = _unless_overlapping(call, original, info, example_inputs)
    return call, info


def _fresh_views(call, gm, passing: set) -> Callable:
    """A view that changes nothing (`x.t()` of a 0-d x) lowers to the input buffer itself, but
    eager returns a new tensor object sharing the memory: give outputs that are input objects a
    fresh alias, unless the graph really returns the input (its output is a placeholder, an
    in-place op on one: `x += 1; return x`, or was the input object when captured). `passing`:
    the output positions the wrapper returns an argument at (none: `call` as it is)."""
    if not passing:
        return call
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    inputs = {id(n.meta["example_value"]) for n in gm.graph.nodes
              if n.op == "placeholder" and n.meta.get("example_value") is not None}
    returns_input = {i for i, o in enumerate(outs) if _is_input_itself(o) or (
        isinstance(o, torch.fx.Node) and id(o.meta.get("example_value")) in inputs)}   # 1-d x.flatten() is x
    # the positions to alias are known when compiling (AOTAutograd's forward passes dozens of
    # inputs through as saved tensors: those are the inputs themselves, and nothing is done per call)
    fresh = sorted(passing - returns_input)
    if not outs or not fresh:
        return call

    def run(*args):
        result = call(*args)
        if not isinstance(result, (tuple, list)):
            return result
        aliased = list(result)
        for i in fresh:
            aliased[i] = torch.ops.aten.alias(aliased[i])
        return type(result)(aliased)
    return run


def _output_views(gm) -> tuple[list[tuple], list]:
    """The outputs eager makes as views of other outputs (`m = x > 0; return m.unsqueeze(0), m`;
    BERT's `h[:, 0]` beside `h`), by their example values (which, and where in its memory), as
    (view position, base position, size, stride, offset from the base's, whether eager returns
    the base object itself there: an in-place op's result). The lowering gives such a view the
    base's buffer instead of computing it (`GraphLowering._output`); `_outputs_viewing_outputs`
    remakes it as the view. Outputs that share the memory of a value the graph does not return,
    none of them holding all of it (`s = x - y; return s[::2], s[2]`), are views of that value
    (the storage's owner), which the graph then also returns, hidden (`_returning_also`): base
    positions past the graph's outputs are the second list's nodes, in order. Static shapes only
    (a symbolic one: left as it is)."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (tuple, list)) else None
    if not outs:
        return [], []
    examples = [_example(o) if isinstance(o, torch.fx.Node) else None for o in outs]
    from ...graph_builder import storage_key
    inputs = {storage_key(_example(n)) for n in gm.graph.nodes if n.op == "placeholder"}
    keys = [storage_key(ev) if _static_tensor(ev) else None for ev in examples]
    # (an aten graph's values do not say which are views: AOTAutograd's forward returns a linear's
    # 1-d `view(addmm)` beside `addmm`, and the view op's result is the one that views the other)
    by_view_op = [isinstance(o, torch.fx.Node) and getattr(o.target, "is_view", False) for o in outs]
    bases = {key: _base_output([i for i, k in enumerate(keys) if k == key], examples, by_view_op)
             for key in set(keys) - inputs - {None}}
    owners: list = []
    for key, b in list(bases.items()):
        if b is None and keys.count(key) > 1:
            owner = _storage_owner_node(gm, key)
            if owner is not None:
                bases[key] = len(outs) + len(owners)
                owners.append(owner)
                examples.append(_example(owner))
    views = []
    for i, (key, ev) in enumerate(zip(keys, examples)):
        b = bases.get(key)
        if b is not None and b != i:
            base = examples[b]
            views.append((i, b, tuple(ev.shape), ev.stride(), ev.storage_offset() - base.storage_offset(),
                          ev is base))
    return views, owners


def _storage_owner_node(gm, key) -> Optional[torch.fx.Node]:
    """The node whose value owns the storage `key` (no view of another: what made the memory),
    where it is a static tensor; else None."""
    from ...graph_builder import storage_key
    for node in gm.graph.nodes:
        value = _example(node) if node.op == "call_function" else None
        if _static_tensor(value) and storage_key(value) == key and not value._is_view():
            return node
    return None


def _returning_also(gm, nodes: list) -> torch.fx.GraphModule:
    """A copy of `gm` that returns `nodes`' values after its own outputs."""
    return copy_returning(gm, lambda outs, remap: tuple(outs) + tuple(remap[n] for n in nodes))


def _outputs_viewing_outputs(call, views: list[tuple], gm, returned: int) -> Callable:
    """An output that eager makes as a view of another output (`_output_views`) comes out of the
    kernels as that output's buffer (or, where the lowering did compute it, a buffer of its
    own): remake it as the view of the other output's result, so that the two share memory as
    in eager. Results past `returned` are hidden bases (`_returning_also`): dropped."""
    if not views:
        return call
    output = next(n for n in gm.graph.nodes if n.op == "output")
    structure = type(output.args[0])              # a tuple or a list (`_output_views`)

    def run(*args):
        result = list(call(*args))
        for i, b, size, stride, offset, same_object in views:
            # the base's result itself where eager returns the base object (an in-place op's
            # result), else its view as eager makes it: whatever the kernels returned there (a
            # buffer of its own, the base's buffer object, or that buffer in the base's shape:
            # `x.min().flatten()` beside `x.min()`)
            base = result[b]
            result[i] = base if same_object else base.as_strided(size, stride, base.storage_offset() + offset)
        return structure(result[:returned])
    return run


def _example(node: torch.fx.Node):
    """A node's fake value: our capture's `example_value`, or an aten graph's `val` (AOTAutograd's
    forward and backward graphs)."""
    value = node.meta.get("example_value")
    return node.meta.get("val") if value is None else value


def _base_output(positions: list[int], examples: list, by_view_op: list) -> Optional[int]:
    """Of outputs sharing memory, the one whose buffer holds all the memory the others reach: an
    output that is no view, else (all views of a tensor the graph does not return: `t =
    torch.tensor(0.25).unsqueeze(0); return t, t[0]`) a dense one spanning the others' ranges,
    else the first where all are the same view (`v = x[:, 1:]; return v.reshape(3, -1), v`).
    `by_view_op`: per output, whether a view op made it; of the outputs that are no view, one
    that no view op made. Either way one whose memory holds the others': an aten graph's values
    do not say which are views (AOTAutograd's forward returning `unbind`'s three rows: none is, and
    the first row was taken for the others' base). None where there is none."""
    def span(t) -> tuple[int, int]:                 # the elements of storage it reaches
        return t.storage_offset(), t.storage_offset() + _extent(t) // t.element_size()

    def holds_the_others(i: int) -> bool:
        lo, hi = span(examples[i])
        return all(lo <= span(examples[j])[0] and span(examples[j])[1] <= hi for j in positions)
    owners = sorted((i for i in positions if not examples[i]._is_view() and holds_the_others(i)),
                    key=lambda i: by_view_op[i])
    if owners:
        return owners[0]
    for i in sorted(positions, key=lambda k: span(examples[k])[0] - span(examples[k])[1]):
        if span(examples[i])[1] - span(examples[i])[0] == examples[i].numel() and holds_the_others(i):
            return i
    layouts = {(tuple(examples[i].shape), examples[i].stride(), examples[i].storage_offset()) for i in positions}
    return positions[0] if len(layouts) == 1 else None


def _static_tensor(t) -> bool:
    return isinstance(t, torch.Tensor) and not t.is_sparse and \
        not any(isinstance(x, torch.SymInt) for x in (*t.shape, *t.stride(), t.storage_offset()))


def _returns_view_of_written_input(graph: torch.fx.Graph) -> Optional[int]:
    """The position of an output sharing memory with an input the graph writes (by the example
    values), other than that input itself, or None."""
    from ...graph_builder import storage_key, written_inputs
    written = written_inputs(graph) or []
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    keys = {storage_key(placeholders[i].meta.get("example_value")) for i in written} - {None}
    output = next(n for n in graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    for i, o in enumerate(outs):
        if isinstance(o, torch.fx.Node) and not _is_input_itself(o) \
                and storage_key(o.meta.get("example_value")) in keys:
            return i
    return None


def _is_input_itself(node) -> bool:
    """Is `node` a placeholder, or an in-place op returning its first argument, one in turn?"""
    return _input_itself(node) is not None


def _input_itself(node) -> Optional[torch.fx.Node]:
    """The placeholder `node` is (itself, or through in-place ops returning their first
    argument), or None."""
    from ...graph_builder import GraphBuilder
    while isinstance(node, torch.fx.Node) and node.op != "placeholder":
        if not (GraphBuilder.writes_in_place(node) and node.args and "out" not in node.kwargs):
            return None
        node = node.args[0]
    return node if isinstance(node, torch.fx.Node) else None


# ---------------------------------------------------------------------------------------------
# writes into inputs: when they are unsafe
# ---------------------------------------------------------------------------------------------

def _extent(t: torch.Tensor) -> int:
    """Bytes from `t.data_ptr()` to the end of its last element (strides are never negative)."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) * t.element_size()


def _overlapping_write(addresses: list[int], tensors: list[int], extents: list[int],
                       written: set[int]) -> Optional[tuple[int, int]]:
    """(a written input, another input) whose memory ranges overlap, or None; `addresses[k]`
    and `extents[k]` are where input `tensors[k]` starts and how many bytes it spans. Ranges are
    compared in address order; a run of ranges that overlap one after the other counts as one."""
    spans = sorted(span for span in zip(addresses, extents, tensors) if span[1])
    run: list[int] = []
    end = -1
    for start, extent, i in spans:
        if start >= end:
            run = []
        run.append(i)
        end = max(end, start + extent)
        if len(run) > 1 and any(k in written for k in run):
            w = next(k for k in run if k in written)
            return w, next(k for k in run if k != w)
    return None


def _unsafe_write(example_inputs, written: list[int]) -> Optional[str]:
    """Why writing these inputs in place would differ from eager, or None (it would not)."""
    for i in written:
        if _shares_memory_within(example_inputs[i]):
            return (f"input {i} is written in place but its elements share memory (an expanded tensor, "
                    "overlapping windows): eager refuses the write or makes it in its own order")
    tensors = [i for i, t in enumerate(example_inputs) if isinstance(t, torch.Tensor)]
    if any(_is_fake(example_inputs[i]) for i in tensors):
        return None                        # no addresses to compare (AOTAutograd's parts): checked per call
    pair = _overlapping_write([example_inputs[i].data_ptr() for i in tensors], tensors,
                              [_extent(example_inputs[i]) for i in tensors], set(written))
    if pair is not None:
        return (f"input {pair[0]} is written in place and overlaps input {pair[1]} in memory (views of one "
                "tensor passed as two inputs)")
    return None


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor) or t.device.type == "meta"


def _unless_overlapping(call, gm, info: CompiledGraph, example_inputs) -> Callable:
    """The kernels assume a written input shares memory with no other input (as functionalization
    does): refuse at compile time when the example inputs overlap, and on each call run the graph
    as captured when the caller's inputs do (views of one tensor passed as two arguments)."""
    reason = _unsafe_write(example_inputs, info.mutated_inputs)
    if reason is not None:
        raise _Refused(reason)
    tensors = [i for i, t in enumerate(example_inputs) if isinstance(t, torch.Tensor)]
    extents = [_extent(example_inputs[i]) for i in tensors]
    written = set(info.mutated_inputs)

    checked: list = [None]            # the addresses of the latest call found not to overlap

    def run(*args):
        # a graph called again on the same tensors (the same addresses) needs no new check
        addresses = [args[i].data_ptr() for i in tensors]
        if addresses != checked[0]:
            if _overlapping_write(addresses, tensors, extents, written) is not None:
                return gm(*args)
            checked[0] = addresses
        return call(*args)
    return run


def _with_autograd(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Training: AOTAutograd splits the graph into a forward and a backward aten graph (with
    the values autograd saves in between; cheap pointwise ones recomputed instead: partition.py)
    and we compile both; on failure, run eagerly."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import default_partition
    from .decompose import decomposition_table
    from . import partition
    info = CompiledGraph()

    layouts = _SavedLayouts(partition.partition if settings.recompute else default_partition)

    def compile_part(part: torch.fx.GraphModule, part_inputs: list, forward: bool = False):
        free = layouts.free_outputs(part) if forward else frozenset()
        if not forward:
            part_inputs = layouts.backward_inputs(part, list(part_inputs))
        compiled = compile_graph(part, list(part_inputs), free, aten=True)
        latest = compiled.compiled_graph
        if forward:
            layouts.note(part, latest.output_strides)
        info.kernels = info.kernels + latest.kernels
        info.wrapper_source += latest.wrapper_source
        for counts, more in ((info.extern_ops, latest.extern_ops), (info.host_ops, latest.host_ops)):
            for op, n in more.items():
                counts[op] = counts.get(op, 0) + n
        info.fallback_reason = info.fallback_reason or latest.fallback_reason
        info.lowering_errors.update(latest.lowering_errors)
        info.compile_seconds += latest.compile_seconds
        info.launchers.extend(latest.launchers)      # counted (first-call phases), not submitted again

        def boxed(args):                      # AOTAutograd passes one list it may clear
            return compiled(*args)
        boxed._boxed_call = True
        return boxed
    # AOTAutograd traces the backward under anomaly mode: a backward that fails there (eager's
    # would too, when called: a saved tensor written in place) warns "Error detected in ..."
    # with torch's traceback before it raises. That failure is the fallback reason recorded
    # below; its warning is not shown. Warnings of a trace that succeeds are.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # keep writes into inputs that need no grad (batch-norm running statistics) in the
            # forward graph, where they become kernel stores, instead of copies after it
            run = aot_module_simplified(gm, example_inputs, fw_compiler=lambda p, i: compile_part(p, i, forward=True),
                                        bw_compiler=lambda part, inputs: compile_part(_without_dead_calls(part), inputs),
                                        partition_fn=layouts.partition, decompositions=decomposition_table(),
                                        keep_inference_input_mutations=not _gives_an_input_grad(gm, example_inputs))
            failure = None
        except Exception as e:
            if settings.strict:
                raise
            failure = e
    if failure is not None:
        return _eager(gm, f"autograd: {type(failure).__name__}: {failure}")
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    run = _inputs_returned_as_themselves(run, gm)
    run.compiled_graph = info
    recent.append(info)
    return run


def _inputs_returned_as_themselves(call, gm) -> Callable:
    """Where eager returns an input object itself (`x += y; return x`), give back that object:
    AOTAutograd writes a mutated input back with `copy_` and returns the new value as a tensor of
    its own (a fuzzed program: `out is x` held in eager, not in ours). The input holds the value,
    and its autograd history (the copy's) leads into the compiled function: the same gradients."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (tuple, list)) else None
    if not outs:
        return call
    position = {n: k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    pairs = [(i, position[p]) for i, p in enumerate(map(_input_itself, outs)) if p is not None]
    if not pairs:
        return call

    def run(*args):
        result = call(*args)
        if all(result[i] is args[k] for i, k in pairs):
            return result
        out = list(result)
        for i, k in pairs:
            out[i] = args[k]
        return type(result)(out) if isinstance(result, tuple) else out
    return run


def _gives_an_input_grad(gm: torch.fx.GraphModule, example_inputs: list) -> bool:
    """Does the graph write, in place, a value that requires grad into a graph input that does
    not (`buf.sub_(linear(x, w))`: the input requires grad afterwards)? AOTAutograd returns such
    an input from the forward graph, and with `keep_inference_input_mutations` (other writes kept
    in the graph) it then hands back the wrong tensor for a later output (torch 2.11-2.13; a
    fuzzed program, tests/test_triton_training.py): those graphs write their inputs after the
    graph instead."""
    from ...graph_builder import storage_key
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    plain = {storage_key(n.meta.get("example_value")) for n, real in zip(placeholders, example_inputs)
             if isinstance(real, torch.Tensor) and not real.requires_grad} - {None}
    for node, written in _in_place_writes(gm.graph):
        operands = [a.meta.get("example_value") for a in [*node.args[1:], *node.kwargs.values()]
                    if isinstance(a, torch.fx.Node)]
        if storage_key(written) in plain and any(isinstance(o, torch.Tensor) and o.requires_grad for o in operands):
            return True
    return False


class _SavedLayouts:
    """The activations a training forward saves for its backward get a layout of ours (a
    convolution's output stays channels-last), and the backward is compiled for them as they
    come: the partition's backward graph names each saved value as the forward graph does, so
    the forward's outputs of those names are free (GraphLowering's `free_outputs`) and the
    backward's example inputs of those names are restrided to what the forward made (what
    Inductor tells AOTAutograd through the tracing context; we have none)."""

    def __init__(self, partition_fn):
        self.partition_fn = partition_fn
        self.saved: set[str] = set()
        self.strides: dict[str, tuple] = {}

    def partition(self, joint, inputs, **kwargs):
        fw, bw = self.partition_fn(joint, inputs, **kwargs)
        self.saved = {n.name for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")}
        return fw, bw

    def free_outputs(self, fw: torch.fx.GraphModule) -> frozenset:
        outs = graph_outputs(fw)
        names = [o.name if isinstance(o, torch.fx.Node) else None for o in outs]
        return frozenset(i for i, n in enumerate(names) if n in self.saved and names.count(n) == 1)

    def note(self, fw: torch.fx.GraphModule, strides: list) -> None:
        for node, st in zip(graph_outputs(fw), strides):
            if st is not None:
                self.strides[node.name] = st

    def backward_inputs(self, bw: torch.fx.GraphModule, inputs: list) -> list:
        placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
        return [_restrided(x, self.strides[n.name]) if n.name in self.strides else x
                for n, x in zip(placeholders, inputs)]


def _restrided(x: torch.Tensor, strides: tuple) -> torch.Tensor:
    """An example input like `x` with `strides` (a fresh one: padded rows need more memory than
    x's storage has)."""
    mode = getattr(x, "fake_mode", None)
    with mode if mode is not None else contextlib.nullcontext():
        return torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device)


def _without_dead_calls(part: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """AOTAutograd's default partition can leave a copy of a forward op in the backward graph
    with no user (the attention forward next to its backward op, which reads the saved
    outputs instead). fx's dead-code pass keeps ops that draw random numbers (they are impure),
    so each such copy ran once more per backward. In a backward graph a forward op is a
    recomputation that eager never runs: dropped when dead, random or not (ops that write
    into their arguments stay)."""
    def impure(node: torch.fx.Node) -> bool:
        try:
            return node.is_impure(impure_random=False)
        except TypeError:                      # a torch whose is_impure takes no such flag
            return node.is_impure()
    dead = 0
    for node in reversed(list(part.graph.nodes)):           # users before what they read
        if node.op == "call_function" and not node.users and not impure(node):
            part.graph.erase_node(node)
            dead += 1
    if dead:
        part.recompile()
    return part


def _eager(gm: torch.fx.GraphModule, reason: str) -> Callable:
    def run(*args):
        return gm(*args)
    run.compiled_graph = CompiledGraph(fallback_reason=reason)
    recent.append(run.compiled_graph)
    log.info("triton backend runs a graph eagerly: %s", reason)
    return run


def _grad_values_not_from_inputs(gm: torch.fx.GraphModule, autograd: bool) -> Optional[str]:
    """Why the graph makes tensors that require grad where its compiled form would not (None if
    it does not): a tensor made with `requires_grad=True` (a new leaf: neither an inference
    compile nor AOTAutograd gives it one), or, in a graph entered with grad off or with no input
    that requires it (compiled for inference), any result that requires grad (grad switched on
    inside: a graph break in a `torch.no_grad()` block resumes in it, and the block's end is in
    the graph). The values are the trace's examples; an input's memory (what an in-place op on a
    parameter returns, under an optimizer's no_grad) is the input's, not a new value. And an
    input's own `requires_grad_` (a gradient penalty's `x.requires_grad_()` before the model):
    neither compiled form sets it on the caller's tensor, nor connects the results to it."""
    from ...graph_builder import storage_key
    inputs, made = set(), []
    for node in gm.graph.nodes:
        value = _example(node)
        if node.op in ("placeholder", "get_attr"):
            if isinstance(value, torch.Tensor):
                inputs.add(storage_key(value))
        else:
            made.append((node, value))
    for node, value in made:
        if _sets_requires_grad(node) and _input_itself(node.args[0]) is not None:
            return f"{node.name} sets requires_grad of an input"
        for t in value if isinstance(value, (tuple, list)) else (value,):
            if not isinstance(t, torch.Tensor) or not t.requires_grad or storage_key(t) in inputs:
                continue
            if t.grad_fn is None:
                return f"{node.name} is a new tensor that requires grad"
            if not autograd:
                return f"{node.name} requires grad (grad is switched on inside the graph)"
    return None


def _sets_requires_grad(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "requires_grad_") or \
        (node.op == "call_function" and node.target is torch.Tensor.requires_grad_)


def _needs_autograd(example_inputs) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in example_inputs)


# ---------------------------------------------------------------------------------------------
# symbolic sizes: one specialization per concrete shape
# ---------------------------------------------------------------------------------------------

def _is_symbolic(val) -> bool:
    if isinstance(val, torch.SymInt):
        return True
    if isinstance(val, torch.Tensor):
        sizes = list(val.shape) + list(val.stride()) + [val.storage_offset()]
        return any(isinstance(s, torch.SymInt) for s in sizes)
    return False


def _dynamic_positions(gm, example_inputs) -> tuple[int, ...]:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    for i, (node, example) in enumerate(zip(placeholders, example_inputs)):
        val = node.meta.get("example_value", node.meta.get("val"))
        if _is_symbolic(val) or isinstance(example, torch.SymInt):
            out.append(i)
    return tuple(out)


def _shape_key(args, positions) -> tuple:
    key = []
    for i in positions:
        a = args[i]
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.stride(), a.dtype, a.device))
        else:
            key.append(a)
    return tuple(key)


def _split(gm, parts: dict) -> Callable:
    """A mostly static dynamic graph (dynamic_split.py): its static parts compiled once each at
    their first call (as any graph: per shape, and theirs do not change), the rest as captured."""
    info = CompiledGraph()

    class CompiledPart(torch.nn.Module):
        def __init__(self, part: torch.fx.GraphModule):
            super().__init__()
            self.part = part
            self.compiled: dict = {}
            self.checked: Optional[tuple] = None      # inputs to check each call (None: all)

        def forward(self, *args):
            key = _shape_key(args, range(len(args)) if self.checked is None else self.checked)
            fn = self.compiled.get(key)
            if fn is None:
                fn = self.compiled[key] = triton_backend(self.part, list(args))
                made = fn.compiled_graph
                recent.remove(made)                   # (reported as part of the whole graph)
                info.kernels += made.kernels
                info.wrapper_source += made.wrapper_source + "\n"
                for op, count in made.extern_ops.items():
                    info.extern_ops[op] = info.extern_ops.get(op, 0) + count
                info.fallback_reason = info.fallback_reason or made.fallback_reason
            return fn(*args)

    split_gm, static = dynamic_split.split(gm, parts, CompiledPart)
    # (GPT-2's decode step: 9 static parts of ~15 inputs each, their weights among them; a shape
    # key of every input was ~1 us a tensor)
    for name, positions in dynamic_split.checked_inputs(split_gm, static).items():
        getattr(split_gm, name).checked = positions
    split_gm = dynamic_split.flatten(split_gm, static)
    info.split_parts = (len(static), len(set(parts.values())) - len(static))

    def run(*args):
        return split_gm(*args)
    run.compiled_graph = info
    recent.append(info)
    return run


def _specializing(gm, example_inputs, positions) -> Callable:
    info = CompiledGraph()
    compiled: dict[tuple, Callable] = info.specializations

    def run(*args):
        autograd = _needs_autograd(args)
        key = (_shape_key(args, positions), autograd)
        fn = compiled.get(key)
        if fn is None:
            # a training graph's specialization goes through AOTAutograd too: compiled as a plain
            # forward, its outputs would have no grad_fn (backward() would raise)
            fn = (_with_autograd if autograd else compile_graph)(gm, list(args))
            compiled[key] = fn
            latest = fn.compiled_graph
            info.kernels, info.wrapper_source = latest.kernels, latest.wrapper_source
            info.extern_ops, info.fallback_reason = latest.extern_ops, latest.fallback_reason
            info.host_ops = latest.host_ops
        return fn(*args)
    run.compiled_graph = info
    recent.append(info)
    return run
