"""Training graphs: which forward values are saved for the backward and which are recomputed there.

AOTAutograd traces one joint forward + backward graph and a partition function splits it. Its
default partition saves every forward value the backward reads. For a value made by a chain of
cheap pointwise ops (and views) that the forward never needs in memory (at most one forward
reader, a kernel it fuses into), saving it costs a store in the forward and a load in
the backward of a tensor as large as the value; recomputing it in the backward costs loads of the
chain's inputs, inside the backward kernel that reads it. `partition` starts from the default
partition's saved values and replaces such a value by the inputs of its pointwise chain when they
move fewer bytes (inputs already saved are free; an input in memory anyway, a graph input or a
library call's result, is read once; any other is written and read, as the value would be): the
log-softmax of a language model's loss (an fp32 `[tokens, vocab]` tensor) is recomputed from the
logits (a matmul's result) and two per-row statistics instead of being written and read back.
A chain stops at the forward's outputs: an output the backward reads is saved as itself, never
recomputed from what made it, so a write into it after the call fails the backward as in eager.

Everything else is AOTAutograd's own extraction (`_extract_fwd_bwd_modules`, the function the
default partition ends with); if anything here fails, the default partition is used as it is.
"""
from __future__ import annotations

import logging
import operator
from typing import Optional

import torch
import torch.fx

from .lowerings import lookup

log = logging.getLogger("dynamo_lite.triton")

aten = torch.ops.aten
prims = torch.ops.prims

#: ops in the lowering table whose result is computed outside our kernels (a library call reads
#: its operands from memory): a value they read in the forward is in memory anyway
_LIBRARY_OPS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
                aten.convolution.default}

#: not tagged pointwise, but elementwise casts and copies all the same
_ELEMENTWISE = {aten._to_copy.default, aten.clone.default, prims.convert_element_type.default}

#: the most ops recomputed for one saved value
MAX_CHAIN = 16


def partition(joint_module: torch.fx.GraphModule, joint_inputs, *, num_fwd_outputs: int, **kwargs):
    """A partition function for AOTAutograd (its `partition_fn`)."""
    from torch._functorch import partitioners
    fw, bw = partitioners.default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)
    try:
        plan = recompute_plan(joint_module, fw, bw, num_fwd_outputs)
        if plan is None:
            return fw, bw
        saved, saved_sym = plan
        fw2, bw2 = partitioners._extract_fwd_bwd_modules(joint_module, saved, saved_sym_nodes=saved_sym,
                                                         num_fwd_outputs=num_fwd_outputs)
        for module in (fw2, bw2):
            module.graph.eliminate_dead_code()
            module.recompile()
        return fw2, bw2
    except Exception:                          # noqa: BLE001 -- the default partition is always right
        log.debug("recomputing partition failed; default partition", exc_info=True)
        return fw, bw


def recompute_plan(joint: torch.fx.GraphModule, fw: torch.fx.GraphModule, bw: torch.fx.GraphModule,
                   num_fwd_outputs: int) -> Optional[tuple[list, list]]:
    """(saved tensor nodes, saved symbolic nodes) of the joint graph with cheap pointwise values
    recomputed, or None where the default partition's choice stands."""
    by_name = {n.name: n for n in joint.graph.nodes}
    saved, saved_sym = [], []
    for node in bw.graph.nodes:
        if node.op != "placeholder" or node.name.startswith("tangents"):
            continue
        joint_node = by_name.get(node.name)
        if joint_node is None:
            return None                        # a saved value we cannot place (opaque objects, ...)
        (saved if isinstance(_val(joint_node), torch.Tensor) else saved_sym).append(joint_node)
    forward = {n.name for n in fw.graph.nodes if n.op in ("placeholder", "call_function")}
    output = next(n for n in joint.graph.nodes if n.op == "output")
    forward_outputs = {a for a in output.args[0][:num_fwd_outputs] if isinstance(a, torch.fx.Node)}
    kept = set(saved)
    changed = False
    for value in saved:
        if not _recomputable(value) or value in forward_outputs or _in_memory_in_forward(value, forward):
            continue
        # a chain stops at the forward's outputs: one is saved as itself (it is in memory
        # anyway), so that writing into it after the call is seen by the backward, as eager's
        # check of a saved tensor's version sees it (`y = w.exp()`, `y.detach().mul_(3)`, then
        # backward: eager raises; recomputed from `w`, the backward went on with the old values)
        inputs = _chain_inputs(value, kept | forward_outputs, forward)
        if inputs is None:
            continue
        # what moves through memory: saving `value` writes it in the forward and reads it in the
        # backward; recomputing it reads its inputs in the backward, and writes in the forward
        # those not in memory there anyway (graph inputs, library results and outputs are)
        cost = sum(_bytes(n) * (1 if _in_memory_anyway(n) or n in forward_outputs else 2)
                   for n in inputs if n not in kept)
        if cost < 2 * _bytes(value):
            kept.discard(value)
            kept |= inputs
            changed = True
    if not changed:
        return None
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    return sorted(kept, key=order.__getitem__), saved_sym


def _val(node: torch.fx.Node):
    return node.meta.get("val", node.meta.get("tensor_meta"))


def _bytes(node: torch.fx.Node) -> int:
    val = _val(node)
    if not isinstance(val, torch.Tensor):
        return 0
    return val.numel() * val.element_size()


def _is_view(target) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in target._schema.returns)


def _recomputable(node: torch.fx.Node) -> bool:
    """A cheap op on tensors that draws no random numbers: pointwise, a cast or a view."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if not isinstance(_val(node), torch.Tensor) or target._schema.is_mutable:
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return torch.Tag.pointwise in target.tags or target in _ELEMENTWISE or _is_view(target)


def _in_memory_in_forward(node: torch.fx.Node, forward: set) -> bool:
    """Is the value (likely) in memory in the forward whatever is saved? When a forward reader
    needs it there (a library call, an op we do not lower), or when several read it (the lowering
    may realize it, and a chain dropped there would be recomputed in each reader: residual
    streams stay saved). Then saving it costs nothing more than keeping it."""
    users = _forward_readers(node, forward)
    if len(users) > 1:
        return True
    return any(u.op != "call_function" or u.target in _LIBRARY_OPS or lookup(u.target) is None for u in users)


def _forward_readers(node: torch.fx.Node, forward: set) -> list:
    """The forward ops reading `node`, through views of it (a view reads nothing itself)."""
    readers = []
    for user in node.users:
        if user.name not in forward:
            continue
        if user.op == "call_function" and isinstance(user.target, torch._ops.OpOverload) and _is_view(user.target):
            readers.extend(_forward_readers(user, forward))
        else:
            readers.append(user)
    return readers


def _in_memory_anyway(node: torch.fx.Node) -> bool:
    """A value the forward has in memory whatever is saved: a graph input, the result of a
    library call or of an op we do not lower (an item of one)."""
    if node.op == "placeholder":
        return True
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    return node.target in _LIBRARY_OPS or lookup(node.target) is None


def _chain_inputs(value: torch.fx.Node, kept: set, forward: set) -> Optional[set]:
    """The values the pointwise chain ending at `value` starts from (saved values, graph inputs,
    results of other ops), or None if the chain is too long or reads a non-tensor value."""
    inputs: set = set()
    seen: set = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if len(seen) > MAX_CHAIN:
            return None
        for arg in node.all_input_nodes:
            if not isinstance(_val(arg), torch.Tensor):
                return None                    # symbolic sizes: left to the default partition
            if arg in kept or arg.op != "call_function" or not _recomputable(arg) or arg.name not in forward:
                inputs.add(arg)
            else:
                stack.append(arg)
    return inputs
