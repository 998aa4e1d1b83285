"""Outputs made by a view op that returns several views (`unbind`, `split`, `chunk`, ...), for
backends that retrace the graph (triton, inductor): such a view remembers how it was made, and
eager refuses to write into it in place while it requires grad ("Output 0 of Unbind is a view and
is being modified inplace"). A compiled graph returns a view it remade itself (AOTAutograd's
regenerated alias, our `as_strided`), which takes the write: after a graph break at `for row in
x: row *= 2`, eager raised and the compiled program computed on (a fuzzed program).

So the compiled graph returns the op's input in those positions instead, and the op runs again
on it right after the call (`with_views_replayed`): the views are the op's own, with its
autograd node and its restrictions, and they share the memory of the value they view as in eager.
"""
from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.fx

#: torch functions and Tensor methods that return several views of their input
_MULTI_VIEW_FUNCTIONS = {torch.unbind, torch.split, torch.chunk, torch.tensor_split, torch.hsplit,
                         torch.vsplit, torch.dsplit, torch.functional.split}
_MULTI_VIEW_METHODS = {"unbind", "split", "chunk", "tensor_split", "split_with_sizes", "hsplit", "vsplit",
                       "dsplit"}


@dataclass(frozen=True)
class ReplayedView:
    """Output `position` is view `index` of `op(<that position's result>, *args, **kwargs)`, the
    op node `maker` (its place in the graph: outputs of one node share one call, as in eager)
    made with grad mode `grad_enabled` (None: as the call found it)."""
    position: int
    maker: int
    op: Callable
    args: tuple
    kwargs: tuple                       # (name, value) pairs
    index: int
    grad_enabled: Optional[bool] = None

    def make(self, base: torch.Tensor, made: dict) -> torch.Tensor:
        """The view, from the op's views made once per op node (`made`: maker -> its views)."""
        views = made.get(self.maker)
        if views is None:
            # (under no_grad eager's views do not require grad and say so when written)
            with contextlib.nullcontext() if self.grad_enabled is None else torch.set_grad_enabled(self.grad_enabled):
                views = made[self.maker] = self.op(base, *self.args, **dict(self.kwargs))
        return views[self.index]


def _multi_view_op(node) -> Optional[Callable]:
    """The callable that, given the viewed tensor first, makes `node`'s views; None for other nodes."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_function" and node.target in _MULTI_VIEW_FUNCTIONS:
        return node.target
    if node.op == "call_method" and node.target in _MULTI_VIEW_METHODS:
        return getattr(torch.Tensor, node.target)
    return None


def _constant(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(map(_constant, value))
    return value is None or isinstance(value, (bool, int))


def _replayed(node) -> Optional[tuple]:
    """(op node, op, its other arguments, its keyword arguments, k) where output `node` is
    `getitem(<multi-view op>(viewed, <constant args>), k)`."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem):
        return None
    maker, index = node.args
    op = _multi_view_op(maker)
    if op is None or not isinstance(index, int) or not maker.args or not isinstance(maker.args[0], torch.fx.Node):
        return None
    rest, kwargs = maker.args[1:], maker.kwargs
    if not (_constant(rest) and all(map(_constant, kwargs.values()))):
        return None
    return maker, op, tuple(rest), tuple(kwargs.items()), index


def views_replayed(gm: torch.fx.GraphModule):
    """(a copy of `gm` returning the viewed values where it returned their views, [ReplayedView]);
    (gm, []) where no output is such a view."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = output.args[0]
    if not isinstance(outs, (tuple, list)):
        return gm, []
    found = [(i, _replayed(o)) for i, o in enumerate(outs)]
    found = [(i, r) for i, r in found if r is not None]
    if not found:
        return gm, []
    place, grad_mode, mode = {}, {}, None     # the grad mode each node runs under (None: the call's)
    for k, node in enumerate(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            mode = bool(node.args[0])
        place[node], grad_mode[node] = k, mode
    replays = [ReplayedView(i, place[maker], op, args, kwargs, index, grad_mode[maker])
               for i, (maker, op, args, kwargs, index) in found]

    def returning_viewed(copied: list, remap: dict) -> tuple:
        for i, (maker, *_) in found:
            copied[i] = remap[maker.args[0]]
        return type(outs)(copied)
    return copy_returning(gm, returning_viewed), replays


def copy_returning(gm: torch.fx.GraphModule, outputs: Callable[[list, dict], object]) -> torch.fx.GraphModule:
    """A copy of `gm` returning `outputs(its own outputs as copied, {node: copied node})`."""
    graph = torch.fx.Graph()
    remap: dict = {}
    copied = graph.graph_copy(gm.graph, remap)
    graph.output(outputs(list(copied) if isinstance(copied, (tuple, list)) else copied, remap))
    copy = torch.fx.GraphModule(gm, graph)
    copy.meta.update(getattr(gm, "meta", {}))
    return copy


def with_views_replayed(call: Callable, replays: list) -> Callable:
    """`call` (the compiled graph of `views_replayed`) followed by the views it left to remake."""
    if not replays:
        return call

    def run(*args):
        result = call(*args)
        out = list(result)
        made: dict = {}
        for r in replays:
            out[r.position] = r.make(result[r.position], made)
        return type(result)(out) if isinstance(result, tuple) else out
    if hasattr(call, "compiled_graph"):                     # what the backend made, for inspection
        run.compiled_graph = call.compiled_graph
    return run
