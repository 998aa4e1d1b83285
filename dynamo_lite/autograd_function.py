"""Custom `torch.autograd.Function`s: `Fn.apply(*args)` becomes one graph node calling `Fn.apply`.

The node runs the user's real forward at run time and autograd records the user's real backward,
so gradients are eager's by construction. Before emitting it, the forward is traced on the side
(speculatively, with a stand-in ctx) only to check that it does tensor work and nothing else: a
print, a `.item()`, a write to a global or an in-place change of an input makes the call a graph
break, exactly as before. The speculative nodes are then erased; the guards it added stay (they
are conservative).

Where nothing the forward computes requires grad (under `torch.no_grad()`, or inputs and
parameters that do not require grad), autograd records nothing, so `apply` is its forward: the
speculative nodes are kept as the call's result (plain graph ops a backend can fuse; backends
that retrace with functorch's `functionalize` cannot run an `autograd.Function` that lacks
`setup_context`, as BLOOM's GeLU). A forward returning one of its inputs itself keeps the call
node: eager returns a fresh alias of it there.
"""
from __future__ import annotations

import inspect
import types

import torch
from torch.autograd.function import FunctionCtx, _SingleLevelFunction

from . import breaks, function_modes
from .breaks import Unsupported
from .graph_builder import storage_key, written_storages
from .modelled import models
from .values.base import Const, Value
from .values.containers import SeqValue
from .values.functions import FunctionValue
from .values.objects import NewObjectValue

FUNCTION_APPLY = inspect.getattr_static(torch.autograd.Function, "apply").__func__


def is_function_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, torch.autograd.Function) and cls is not torch.autograd.Function


@models(FUNCTION_APPLY)
def _apply(frame, args: list, kwargs: dict):
    """`Fn.apply(*args)`: a classmethod, so the class comes first."""
    cls = args[0].real_object() if args else None
    if not is_function_class(cls):
        return NotImplemented
    return apply(frame, cls, args[1:], kwargs)


def apply(frame, cls: type, args: list, kwargs: dict) -> Value:
    """`cls.apply(*args)` as one graph node, once the forward is known to be plain tensor work;
    its forward's ops where autograd records nothing."""
    function_modes.refuse_under_mode(frame, f"{cls.__name__}.apply")
    if kwargs:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.apply with keyword arguments")
    if not all(_is_graph_arg(a) for a in args):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.apply with a non-tensor, non-constant argument")
    tracer = frame.tracer
    grad_enabled = tracer.graph.grad_enabled
    records = grad_enabled and any(_requires_grad(a) for a in args)
    before = _State.of(tracer)
    try:
        if not records:
            tracer.set_grad_enabled(False)    # eager runs every forward under no_grad
        output = _trace_forward(frame, cls, args)
    finally:
        tracer.set_grad_enabled(grad_enabled)
    new_nodes = before.nodes_since(tracer.graph)
    if not records and not _returns_an_input(output, args):
        return output
    for node in reversed(new_nodes):
        if node.op != "placeholder":          # an input first read by forward stays an (unused) input
            tracer.graph.graph.erase_node(node)
    return tracer.graph.call("call_function", _apply_of(cls), tuple(args), {})


def _requires_grad(v: Value) -> bool:
    """Eager's test for recording a backward: a tensor argument itself (not one inside a list)
    that requires grad, in grad mode."""
    return v.is_graph_value and bool(getattr(v.example, "requires_grad", False))


def _returns_an_input(output: Value, args: list) -> bool:
    returned = output.items if isinstance(output, SeqValue) else [output]
    return any(r is a for r in returned for a in args)


def _apply_of(cls):
    """A plain function calling `cls.apply`: fx would spell the bound classmethod itself as
    `torch.autograd.function.apply` (its __module__), which does not exist."""
    def apply(*args):
        return cls.apply(*args)
    apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
    apply.__module__ = cls.__module__
    return apply


def _is_graph_arg(v: Value) -> bool:
    if isinstance(v, SeqValue):
        return all(_is_graph_arg(i) for i in v.items)
    return v.is_graph_value or isinstance(v, Const)


def _user_static(cls, name):
    fn = inspect.getattr_static(cls, name, None)
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    if not isinstance(fn, types.FunctionType) or fn is inspect.getattr_static(_SingleLevelFunction, name).__func__:
        return None
    return fn


def _trace_forward(frame, cls, args) -> Value:
    """The forward traced into the graph with a stand-in ctx, its result; a graph break where it
    is more than tensor work."""
    forward = _user_static(cls, "forward")
    if forward is None:
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.forward is not a Python staticmethod")
    setup_context = _user_static(cls, "setup_context")
    tracer = frame.tracer
    graph = tracer.graph
    state = _State.of(tracer)
    ctx = NewObjectValue(FunctionCtx, {"needs_input_grad": Const(tuple(_requires_grad(a) for a in args))})
    if setup_context is None:
        output = FunctionValue(forward).call(frame, [ctx, *args], {})
    else:
        output = FunctionValue(forward).call(frame, list(args), {})
        FunctionValue(setup_context).call(frame, [ctx, SeqValue(args, tuple), output], {})
    new_nodes = state.nodes_since(graph)
    if _writes_outside(graph, new_nodes):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.forward changes a tensor in place")
    if not state.unchanged(tracer):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{cls.__name__}.forward has side effects")
    return output


def _writes_outside(graph, new_nodes: list) -> bool:
    """Whether forward writes in place into memory it did not allocate itself (an input, a view of
    one, a tensor from outside): writes into its own intermediates (`out.masked_fill_(...)`) are
    its business, done again by the real forward at run time."""
    made_here = {id(n) for n in new_nodes if n.op != "placeholder"}
    outside = {storage_key(n.meta.get("example_value")) for n in graph.graph.nodes if id(n) not in made_here}
    return any(key is None or key in outside for n in new_nodes for key in written_storages(n))


class _State:
    """What the speculative trace of a forward must leave as it found it."""

    def __init__(self, tracer):
        self.last_node = next(iter(reversed(tracer.graph.graph.nodes)), None)
        self.effects = tracer.effects.snapshot()
        self.grad_enabled = tracer.graph.grad_enabled

    @staticmethod
    def of(tracer) -> "_State":
        return _State(tracer)

    def nodes_since(self, graph) -> list:
        nodes = list(graph.graph.nodes)
        start = nodes.index(self.last_node) + 1 if self.last_node is not None else 0
        return nodes[start:]

    def unchanged(self, tracer) -> bool:
        return tracer.effects.unchanged(self.effects) and tracer.graph.grad_enabled == self.grad_enabled


def _no_op(frame, args, kwargs):
    return Const(None)


def _mark_dirty(frame, args, kwargs):
    raise Unsupported(breaks.UNKNOWN_CALL, "ctx.mark_dirty: an autograd.Function that changes inputs in place")


# Methods of the stand-in ctx while the forward is traced (they only matter to the real backward).
models(FunctionCtx.save_for_backward, FunctionCtx.save_for_forward, FunctionCtx.mark_non_differentiable,
       FunctionCtx.set_materialize_grads)(_no_op)
models(FunctionCtx.mark_dirty)(_mark_dirty)
