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
    """Output `position` is view `index` of `op(<that position's result>, *args, **kwargs)`,
    made with grad mode `grad_enabled` (None: as the call found it) as the graph made it."""
    position: int
    op: Callable
    args: tuple
    kwargs: dict
    index: int
    grad_enabled: Optional[bool] = None

    def make(self, base: torch.Tensor, made: dict) -> torch.Tensor:
        """The view, from views made once per op node and base (`made`: key -> the op's views)."""
        key = (id(base), self.op, self.args, tuple(sorted(self.kwargs.items())), self.grad_enabled)
        views = made.get(key)
        if views is None:
            if self.grad_enabled is None:
                views = self.op(base, *self.args, **self.kwargs)
            else:
                # (under no_grad eager's views do not require grad and say so when written)
                with torch.set_grad_enabled(self.grad_enabled):
                    views = self.op(base, *self.args, **self.kwargs)
            made[key] = views
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
    """(viewed node, ReplayedView fields but the position) where output `node` is
    `getitem(<multi-view op>(viewed, <constant args>), k)`."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem):
        return None
    maker, index = node.args
    op = _multi_view_op(maker)
    if op is None or not isinstance(index, int) or not maker.args or not isinstance(maker.args[0], torch.fx.Node):
        return None
    rest, kwargs = maker.args[1:], dict(maker.kwargs)
    if not (_constant(rest) and all(map(_constant, kwargs.values()))):
        return None
    def frozen(a):                      # (split sizes as a tuple: the key of the views made once)
        return tuple(a) if isinstance(a, list) else a
    return maker.args[0], op, tuple(map(frozen, rest)), {k: frozen(v) for k, v in kwargs.items()}, index


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
    grad_mode, mode = {}, None           # the grad mode each node runs under (None: the call's)
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            mode = bool(node.args[0])
        grad_mode[node] = mode
    graph = torch.fx.Graph()
    remap: dict = {}
    copied = list(graph.graph_copy(gm.graph, remap))
    replays = []
    for i, (viewed, op, args, kwargs, index) in found:
        copied[i] = remap[viewed]
        replays.append(ReplayedView(i, op, args, kwargs, index, grad_mode[outs[i].args[0]]))
    graph.output(type(outs)(copied))
    copy = torch.fx.GraphModule(gm, graph)
    copy.meta.update(getattr(gm, "meta", {}))
    return copy, replays


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
