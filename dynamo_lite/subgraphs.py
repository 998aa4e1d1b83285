"""Tracing a Python function into an fx subgraph, for higher-order ops that take one.

`torch.cond`'s branches and the functions given to `torch.func.vmap` / `grad` / `jacrev` are
traced by our own tracer, never by running torch's eager implementation (which would compile
them with TorchDynamo, or run them on batched tensors). `trace_body` inlines the function as
usual, on stand-in inputs (placeholders of the parent graph with the example values the op
would hand it), then cuts the nodes it recorded out of the parent graph into a graph of their
own:

* the stand-in inputs become the subgraph's first placeholders, in order;
* every node of the parent graph the body read but did not make (a tensor it closes over, a
  global read for the first time) becomes a further placeholder: a *lifted* input, which the
  op's node passes explicitly (`Body.lifted`), as TorchDynamo lifts free variables;
* the body's result (a tensor or a tuple/list of them, nested) is the subgraph's output.

The body must be pure tensor code, because the op may run it once, twice (cond's two
branches) or under a transform: it may not write to Python state that outlives it (an outer
list, an attribute, a global, a nonlocal), print, change grad mode for good, or write in place
into its inputs or the tensors it closes over; those are refused with HIGHER_ORDER_EFFECT. A
break inside the body (anything the tracer cannot capture) refuses the whole op: the call then
runs eagerly. Guards the body's trace added stay (they are conservative).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.fx

from . import breaks
from .breaks import Unsupported
from .graph_builder import written_inputs
from .values.base import Value
from .values.containers import SeqValue
from .values.functions import CellValue
from .values.tensors import SymValue, TensorValue


@dataclass
class Body:
    """A function traced into a subgraph."""
    gm: torch.fx.GraphModule
    n_inputs: int                 # the stand-in inputs, first
    lifted: list                  # parent graph values passed after them (TensorValue / SymValue)
    output: Value                 # the body's result over the subgraph's nodes (structure only)

    def output_examples(self) -> list:
        return [n.meta["example_value"] for n in _output_nodes(self.gm)]


def trace_body(frame, fn: Value, inputs: list, kwargs: Optional[dict] = None, *, what: str,
               grad_enabled: Optional[bool] = None, flatten: bool = False) -> Body:
    """Trace `fn(*inputs, **kwargs)` into a subgraph. `inputs` are the example values of the
    stand-in inputs (fake tensors) or values passed as they are (constants); `kwargs` are values
    passed as they are. `grad_enabled`: the grad mode the op runs the function in
    (torch.func.grad enables grad). `flatten`: the subgraph returns the result's tensors as one
    flat tuple (torch.cond's convention) instead of the result's own nesting."""
    tracer = frame.tracer
    graph = tracer.graph
    before = set(graph.graph.nodes)
    stand_ins = [graph.body_input(x, f"{what}_{i}") if isinstance(x, torch.Tensor) else x
                 for i, x in enumerate(inputs)]
    outer = OuterState(frame, [fn, *[v for v in stand_ins if isinstance(v, Value)], *(kwargs or {}).values()])
    saved_grad = graph.grad_enabled
    if grad_enabled is not None:
        graph.grad_enabled = grad_enabled
    entered_grad = graph.grad_enabled
    try:
        result = fn.call(frame, list(stand_ins), dict(kwargs or {}))
        grad_changed = graph.grad_enabled != entered_grad
    except Unsupported as e:
        # not even an exception the program catches: the op runs eagerly, and raises there
        raise Unsupported(e.kind, f"in the function given to {what}: {e.detail}") from None
    finally:
        graph.grad_enabled = saved_grad
    if grad_changed:
        raise Unsupported(breaks.HIGHER_ORDER_EFFECT, f"the function given to {what} changes grad mode")
    outer.check(what)
    return _extract(graph, before, [v for v in stand_ins if isinstance(v, (TensorValue, SymValue))
                                    and v.node.meta.get("body_input")], result, what, flatten)


class OuterState:
    """What the body may not change: the values reachable from the frames it runs inside (and
    from the function and its arguments), each with the identities of its children (a list's
    items, an object's attributes, a cell's contents); plus the recorded side effects."""

    def __init__(self, frame, extra: list):
        self.tracer = frame.tracer
        self.effects = self.tracer.effects.snapshot()
        roots = list(extra)
        f = frame
        while f is not None:
            roots += f.stack + [v for v in f.locals.values() if isinstance(v, Value)]
            roots += [c for c in f.cells.values() if isinstance(c, Value)]
            f = f.parent
        self.values: dict[int, tuple] = {}
        self.keep: list = []
        stack = roots
        while stack:
            v = stack.pop()
            if not isinstance(v, Value) or id(v) in self.values:
                continue
            children = _children(v)
            self.values[id(v)] = _fingerprint(v)
            self.keep.append(v)
            stack.extend(children)

    def check(self, what: str) -> None:
        if not self.tracer.effects.unchanged(self.effects):
            raise Unsupported(breaks.HIGHER_ORDER_EFFECT, f"the function given to {what} writes to an attribute, a "
                                                          f"global, a cell or a container that outlives it")
        for v in self.keep:
            if _fingerprint(v) != self.values[id(v)]:
                raise Unsupported(breaks.HIGHER_ORDER_EFFECT, f"the function given to {what} changes a "
                                                              f"{type(v).__name__} made before it was called")


def _fingerprint(v: Value):
    """What changes when `v`'s contents change: its children's identities. A cell's contents read
    from the program are wrapped when first read (a LazyValue becomes a value with the same
    source), which is no change."""
    if isinstance(v, CellValue):
        contents = v.contents
        source = getattr(contents, "source", None)
        return ("source", source) if source is not None else id(contents)
    return tuple(map(id, _children(v)))


def _children(v: Value) -> tuple:
    try:
        return tuple(c for c in v.children() if isinstance(c, Value))
    except Exception:      # noqa: BLE001 -- a value that cannot list its children: no snapshot of it
        return ()


def _extract(graph, before: set, stand_ins: list, result: Value, what: str, flatten: bool) -> Body:
    """Move the nodes the body recorded (those not in `before`) into a GraphModule of their own."""
    stand_in_nodes = [v.node for v in stand_ins]
    recorded = [n for n in graph.graph.nodes if n not in before and n not in stand_in_nodes]
    # placeholders made meanwhile are real inputs of the frame (a global read for the first time): they stay
    region = [n for n in recorded if n.op != "placeholder"]
    inside = set(region) | set(stand_in_nodes)
    lifted: list[torch.fx.Node] = []

    def note_outside(node):
        if isinstance(node, torch.fx.Node) and node not in inside and node not in lifted:
            lifted.append(node)
        return node

    for node in region:
        torch.fx.node.map_arg((node.args, node.kwargs), note_outside)
    outputs = _output_structure(result, what)
    if flatten:
        outputs = tuple(t.node for t in leaves(result))
    torch.fx.node.map_arg(outputs, note_outside)

    sub = torch.fx.Graph()
    env: dict = {}
    for node in [*stand_in_nodes, *lifted]:
        env[node] = sub.placeholder(node.name)
        env[node].meta["example_value"] = node.meta.get("example_value")
    for node in region:
        env[node] = sub.node_copy(node, lambda n: env[n])
    sub.output(torch.fx.node.map_arg(outputs, lambda n: env[n]))
    gm = torch.fx.GraphModule(graph.module_root(sub), sub)

    written = written_inputs(sub)
    if written is None or written:
        raise Unsupported(breaks.HIGHER_ORDER_EFFECT, f"the function given to {what} writes in place into its "
                                                      f"inputs or into a tensor it closes over")
    for node in reversed(region):
        graph.graph.erase_node(node)
    for node in reversed(stand_in_nodes):
        graph.graph.erase_node(node)
    lifted_values = [_value_of(n) for n in lifted]
    return Body(gm, len(stand_in_nodes), lifted_values, result)


def align_lifted(bodies: list) -> list:
    """Give every body the same lifted inputs (the union of theirs, in order of first use), as an
    op running one of several bodies on the same operands needs (torch.cond's branches)."""
    combined: list = []
    for body in bodies:
        for v in body.lifted:
            if not any(v.node is c.node for c in combined):
                combined.append(v)
    for body in bodies:
        own = {v.node: i for i, v in enumerate(body.lifted)}
        old = body.gm.graph
        placeholders = [n for n in old.nodes if n.op == "placeholder"]
        sub = torch.fx.Graph()
        env = {p: sub.placeholder(p.name) for p in placeholders[:body.n_inputs]}
        for c in combined:
            if c.node in own:
                p = placeholders[body.n_inputs + own[c.node]]
                env[p] = new = sub.placeholder(p.name)
            else:
                new = sub.placeholder(f"unused_{c.node.name}")
            new.meta["example_value"] = c.node.meta.get("example_value")
        for p in placeholders[:body.n_inputs]:
            env[p].meta = dict(p.meta)
        for node in old.nodes:
            if node.op != "placeholder":
                env[node] = sub.node_copy(node, lambda n: env[n])
        body.gm = torch.fx.GraphModule(body.gm, sub)
        body.lifted = list(combined)
    return combined


def _output_structure(result: Value, what: str):
    """The body's result as fx nodes in the same nesting (tensor, tuple, list)."""
    if isinstance(result, TensorValue):
        return result.node
    if isinstance(result, SeqValue) and result.cls in (tuple, list):
        return result.cls(_output_structure(item, what) for item in result.items)
    raise Unsupported(breaks.UNKNOWN_CALL, f"the function given to {what} returns a {result.python_type().__name__}, "
                                           f"not a tensor or a tuple/list of tensors")


def _output_nodes(gm: torch.fx.GraphModule) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    nodes: list = []
    torch.fx.node.map_arg(out.args[0], nodes.append)
    return nodes


def _value_of(node: torch.fx.Node) -> Value:
    example = node.meta.get("example_value")
    if isinstance(example, torch.Tensor):
        return TensorValue(node, example)
    return SymValue(node, example)


def leaves(result: Value) -> list:
    """The tensors of a body's result, in order (what a flat subgraph output holds)."""
    if isinstance(result, TensorValue):
        return [result]
    return [t for item in result.items for t in leaves(item)]


def repack(structure: Value, flat: list) -> Value:
    """`flat` values in the nesting of `structure` (a body's result)."""
    it = iter(flat)

    def build(v):
        if isinstance(v, TensorValue):
            return next(it)
        return SeqValue([build(i) for i in v.items], v.cls)
    return build(structure)
