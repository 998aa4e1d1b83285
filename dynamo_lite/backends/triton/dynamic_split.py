"""Dynamic graphs whose sizes are mostly static: compiled once, not once per shape.

The kernels have static sizes, so a graph with symbolic sizes is compiled per concrete shape
(`backend._specializing`). In a `generate()` decode step only the KV cache's length changes: a
few ops see it (the cache concatenations, the attention mask, attention itself), every other op
works on the one new token's static shapes, yet each new length compiled the whole graph again
(a 4-layer GPT-2: 8 of its 18 kernels new at each step). Here such a graph is split, in program
order, into runs of ops with static shapes and runs of ops that see a symbolic size (its own
result's, or an input's; `torch.fx.passes.split_module`): the static runs are compiled by the
triton backend once (per input shape, which does not change), the symbolic runs run as the
captured ops (aten calls, which take any size); the split module is flattened back into one graph
calling the compiled parts (`flatten`), and each part's call checks only the inputs an aten call
made (`checked_inputs`). Used for inference graphs in which the static ops are at least
STATIC_SHARE of the tensor ops and that neither switch grad or autocast modes
(a switch compiled into one part would not reach the others) nor write into tensors in place;
other dynamic graphs are still compiled per shape.
"""
from __future__ import annotations

import operator
from typing import Callable, Optional

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

#: the least share of the tensor ops with static shapes for a split (below it, per-shape compiles
#: keep most ops fused)
STATIC_SHARE = 0.5


def _symbolic(value) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride(), value.storage_offset()))
    if isinstance(value, (list, tuple)):
        return any(_symbolic(v) for v in value)
    return False


def _value(node: torch.fx.Node):
    return node.meta.get("example_value", node.meta.get("val"))


def _sees_symbolic_sizes(node: torch.fx.Node) -> bool:
    return _symbolic(_value(node)) or any(_symbolic(_value(a)) for a in node.all_input_nodes)


def _switches_state(node: torch.fx.Node) -> bool:
    return node.target is torch._C._set_grad_enabled or getattr(node.target, "__module__", None) == "dynamo_lite.runtime"


def plan(gm: torch.fx.GraphModule, writes_in_place: bool) -> Optional[dict]:
    """{call node: part number} (consecutive runs of static / symbolic ops, in program order), or
    None where the graph is better compiled per shape (see the module docstring)."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if writes_in_place or any(_switches_state(n) for n in calls):
        return None
    symbolic = {n: _sees_symbolic_sizes(n) for n in calls}
    tensor_ops = [n for n in calls if isinstance(_value(n), torch.Tensor)]
    static = [n for n in tensor_ops if not symbolic[n]]
    if not tensor_ops or len(static) < STATIC_SHARE * len(tensor_ops) or len(static) == len(tensor_ops):
        return None
    parts, part, last = {}, 0, None
    for n in calls:
        if last is not None and symbolic[n] != last:
            part += 1
        parts[n], last = part, symbolic[n]
    return parts


def split(gm: torch.fx.GraphModule, parts: dict, compile_part: Callable) -> tuple[torch.fx.GraphModule, list[str]]:
    """`gm` as a graph of parts: each static part replaced by `compile_part(part_module)`'s
    module (compiled at its first call), symbolic parts left as they are. (module, the static
    parts' names)."""
    # split_module binds each size symbol it meets in a node's example to a node that defines
    # it, which sizes read off tensors (ours) are not: the examples are set aside meanwhile and
    # put back on the parts' nodes (same names) afterwards
    examples = {n.name: n.meta for n in gm.graph.nodes}
    for n in gm.graph.nodes:
        n.meta = {}
    try:
        split_gm = split_module(gm, gm, lambda n: parts[n], keep_original_order=True, keep_original_node_name=True)
    finally:
        for n in gm.graph.nodes:
            n.meta = examples[n.name]
    symbolic_parts = {parts[n] for n in parts if _sees_symbolic_sizes(n)}
    static_names = []
    for node in split_gm.graph.nodes:
        if node.op != "call_module":
            continue
        sub = getattr(split_gm, node.target)
        for n in sub.graph.nodes:
            if n.name in examples:
                n.meta = dict(examples[n.name])
        if int(node.target.rsplit("_", 1)[1]) not in symbolic_parts:
            setattr(split_gm, node.target, compile_part(sub))
            static_names.append(node.target)
    split_gm.recompile()
    return split_gm, static_names


def checked_inputs(split_gm: torch.fx.GraphModule, static_names: list[str]) -> dict[str, tuple[int, ...]]:
    """{static part: positions of its inputs whose layout a call must check}: those a symbolic
    part computes (aten calls whose strides the meta functions predicted, which a kernel may not
    follow). The rest need no check on each call: the graph's inputs are guarded (sizes and
    strides) before the graph runs, and a static part's results come from our own kernels, laid
    out as when they were compiled."""
    static = set(static_names)

    def producer(a):
        while isinstance(a, torch.fx.Node) and a.op == "call_function" and a.target is operator.getitem:
            a = a.args[0]
        return a

    out = {}
    for node in split_gm.graph.nodes:
        if node.op != "call_module" or node.target not in static:
            continue
        positions = []
        for i, a in enumerate(node.args):
            made = producer(a)
            if isinstance(made, torch.fx.Node) and made.op != "placeholder" \
                    and not (made.op == "call_module" and made.target in static):
                positions.append(i)
        out[node.target] = tuple(positions)
    return out


def flatten(split_gm: torch.fx.GraphModule, static_names: list[str]) -> torch.fx.GraphModule:
    """`split_gm` with no module call left to make (each costs a few us of nn.Module machinery,
    and a decode step makes ~20): a static part is called through its compiled module's
    `forward`, a symbolic part's ops are put back in place of its call (one that reads attributes
    of its own, or whose results are not all read by index, stays a module call)."""
    static = set(static_names)
    graph = split_gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        sub = getattr(split_gm, node.target)
        if node.target in static:
            with graph.inserting_before(node):
                call = graph.call_function(_forward_of(sub), tuple(node.args), dict(node.kwargs))
            call.meta = dict(node.meta)
            node.replace_all_uses_with(call)
            graph.erase_node(node)
        elif _inlinable(node, sub):
            placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
            with graph.inserting_before(node):
                result = graph.graph_copy(sub.graph, dict(zip(placeholders, node.args)))
            if isinstance(result, (tuple, list)):
                for user in list(node.users):              # each a getitem (_inlinable)
                    user.replace_all_uses_with(result[user.args[1]])
                    graph.erase_node(user)
            else:
                node.replace_all_uses_with(result)
            graph.erase_node(node)
            split_gm.delete_submodule(node.target)
    split_gm.recompile()
    return split_gm


def _forward_of(module: torch.nn.Module) -> Callable:
    """A function calling `module.forward` (fx names a call's target after its function: a bound
    `forward` of a generated class has no module to be named after)."""
    forward = module.forward

    def static_part(*args, **kwargs):
        return forward(*args, **kwargs)
    return static_part


def _inlinable(node: torch.fx.Node, sub) -> bool:
    """Can a symbolic part's call be replaced by its ops? Its graph has only function and method
    calls, takes the call's arguments positionally, and its results are read one by one (or it
    returns one)."""
    if not isinstance(sub, torch.fx.GraphModule) or node.kwargs:
        return False
    nodes = list(sub.graph.nodes)
    if not all(n.op in ("placeholder", "call_function", "call_method", "output") for n in nodes):
        return False
    if sum(n.op == "placeholder" for n in nodes) != len(node.args):
        return False
    returned = next(n for n in nodes if n.op == "output").args[0]
    if not isinstance(returned, (tuple, list)):
        return True
    return all(u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
               for u in node.users)
