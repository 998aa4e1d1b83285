"""Splitting a graph at DistributedDataParallel's gradient buckets, around any backend.

DDP all-reduces gradients bucket by bucket (buckets of `bucket_cap_mb`, filled in the reverse
order of the parameters' use) while backward still runs. A backend that compiles a whole graph
into one backward (AOTAutograd, as the triton backend does) produces every parameter's gradient
at the end of that one backward, so no all-reduce overlaps it. Cut into pieces along the buckets,
the backward of the last piece finishes first and its bucket's all-reduce starts while the
earlier pieces' backward runs (TorchDynamo's DDPOptimizer does the same).

`ddp_split(backend, ddp_module)` is a backend: it walks the graph's nodes in reverse, adds the
size of each DDP parameter at its last use, starts a new piece once the current one holds
`bucket_cap` bytes (the first piece, the last in forward: DDP's smaller first bucket), cuts the
graph there (`torch.fx.passes.split_module`), compiles each piece with `backend` and runs the
pieces in order. `active_ddp_module()` is how convert_frame finds that a frame is captured inside
a DDP forward (DDP marks itself while it calls the wrapped module).
"""
from __future__ import annotations

import logging
import sys
from typing import Callable, Optional

import torch
from torch.fx.passes.split_module import split_module

log = logging.getLogger("dynamo_lite")

_DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024     # torch.distributed's default first bucket (1 MB)


def active_ddp_module() -> Optional[torch.nn.Module]:
    """The DistributedDataParallel module whose forward is running now, if any (DDP sets this
    class attribute around its call of the wrapped module; read without importing DDP)."""
    distributed = sys.modules.get("torch.nn.parallel.distributed")
    ddp_class = getattr(distributed, "DistributedDataParallel", None)
    return getattr(ddp_class, "_active_ddp_module", None)


def bucket_caps(ddp_module) -> tuple[int, int]:
    """(first bucket's cap, other buckets' cap) in bytes, as the DDP module was configured."""
    cap = int(getattr(ddp_module, "bucket_bytes_cap", 25 * 1024 * 1024))
    config = getattr(ddp_module, "_bucket_config", None)
    first = getattr(config, "first_bucket_bytes_cap", None)
    if first is None:
        first = min(cap, _DEFAULT_FIRST_BUCKET_BYTES)
    return int(first), cap


def ddp_parameters(ddp_module) -> dict[int, int]:
    """{id(parameter): bytes} of the parameters DDP all-reduces (trainable, not ignored)."""
    ignored = getattr(ddp_module, "parameters_to_ignore", set())
    inner = getattr(ddp_module, "module", ddp_module)
    return {id(p): p.numel() * p.element_size() for name, p in inner.named_parameters()
            if p.requires_grad and name not in ignored}


# Nodes that switch global state for the nodes after them: a graph holding one stays whole (a
# compiling backend bakes the state into its piece; the next piece would not see it).
_STATE_SWITCH_NAMES = ("enter_autocast", "exit_autocast", "_set_grad_enabled")


def assign_pieces(gm: torch.fx.GraphModule, example_inputs: list, sizes: dict[int, int],
                  first_cap: int, cap: int) -> dict[torch.fx.Node, int]:
    """Piece number (0 = first in forward) of every node but placeholders and the output.
    Walking backwards, a parameter counts at its last use; a new piece starts before a node
    once the current piece holds its cap."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    param_bytes = {node: sizes[id(value)] for node, value in zip(placeholders, example_inputs)
                   if isinstance(value, torch.Tensor) and id(value) in sizes}
    pieces: list[list[torch.fx.Node]] = [[]]
    filled, seen = 0, set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        limit = first_cap if len(pieces) == 1 else cap
        if filled >= limit and pieces[-1]:
            pieces.append([])
            filled = 0
        pieces[-1].append(node)
        for used in node.all_input_nodes:
            if used in param_bytes and used not in seen:
                seen.add(used)
                filled += param_bytes[used]
    last = len(pieces) - 1
    return {node: last - i for i, piece in enumerate(pieces) for node in piece}


class _Piece(torch.nn.Module):
    """A compiled piece inside the split module: call_module nodes call it like the piece."""

    def __init__(self, compiled: Callable, unwrap: bool):
        super().__init__()
        self.compiled, self.unwrap = compiled, unwrap

    def forward(self, *args):
        out = self.compiled(*args)
        return out[0] if self.unwrap else out


def _returns_tuple(piece: torch.fx.GraphModule) -> bool:
    """Make the piece return a tuple (backends expect graphs that return tuples); False when it
    returned one value, which the caller then unwraps."""
    output = next(n for n in piece.graph.nodes if n.op == "output")
    if isinstance(output.args[0], (tuple, list)):
        return True
    output.args = ((output.args[0],),)
    piece.recompile()
    return False


def _hint(size) -> int:
    """A size as an int: a symbolic one at the value it had when the graph was traced."""
    return int(size.node.hint) if isinstance(size, torch.SymInt) else int(size)


def _example(node: torch.fx.Node, real: dict):
    """An example input for a piece: the graph's own input where the placeholder is one, else a
    zero tensor shaped like the node's example value (sizes of dynamic dims at their hints)."""
    if node in real:
        return real[node]
    value = node.meta.get("example_value")
    if not isinstance(value, torch.Tensor):
        return value
    shape = [_hint(s) for s in value.shape]
    stride = [_hint(s) for s in value.stride()]
    example = torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device).zero_()
    return example.requires_grad_(value.requires_grad) if value.dtype.is_floating_point else example


def _split(gm, example_inputs, sizes, first_cap, cap):
    """(split module, {piece name: (piece graph, its example inputs, whether it returned a
    tuple)}), or (None, None) for a graph that stays whole."""
    if any(getattr(n.target, "__name__", "") in _STATE_SWITCH_NAMES for n in gm.graph.nodes):
        return None, None
    piece_of = assign_pieces(gm, example_inputs, sizes, first_cap, cap)
    if len(set(piece_of.values())) <= 1:
        return None, None
    split = split_module(gm, gm, lambda node: piece_of[node], keep_original_order=True)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    real = dict(zip(placeholders, example_inputs))
    by_name = {n.name: n for n in gm.graph.nodes}
    pieces = {}
    for call in (n for n in split.graph.nodes if n.op == "call_module"):
        piece = getattr(split, call.target)
        inputs = [p for p in piece.graph.nodes if p.op == "placeholder"]
        originals = [by_name[p.name] for p in inputs]      # split_module keeps the names
        for p, original in zip(inputs, originals):
            p.meta.update(original.meta)
        is_tuple = _returns_tuple(piece)
        pieces[call.target] = (piece, [_example(o, real) for o in originals], is_tuple)
    return split, pieces


def ddp_split(backend: Callable, ddp_module) -> Callable:
    """A backend that compiles each bucket-sized piece of a graph with `backend`."""
    first_cap, cap = bucket_caps(ddp_module)
    sizes = ddp_parameters(ddp_module)

    def compile_split(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        try:
            split, pieces = _split(gm, example_inputs, sizes, first_cap, cap)
        except Exception as e:     # noqa: BLE001 -- a graph we cannot cut compiles whole: no overlap, same result
            log.debug("DDP bucket split of a graph failed (%s: %s); compiled whole", type(e).__name__, e)
            split = None
        if split is None:
            return backend(gm, example_inputs)
        for name, (piece, examples, is_tuple) in pieces.items():
            setattr(split, name, _Piece(backend(piece, examples), unwrap=not is_tuple))
        split.ddp_pieces = len(pieces)
        return split.forward

    compile_split.accepts_scalar_inputs = getattr(backend, "accepts_scalar_inputs", True)
    return compile_split
