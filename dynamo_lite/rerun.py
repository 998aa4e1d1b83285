"""When a compiled graph raises at run time, run the frame eagerly instead.

A captured frame's replacement code calls the graph first and replays the recorded side effects
(list/dict contents, attribute, global and cell writes) after it. If the graph raises (a shape
or dtype error the example values did not show, overlapping memory in an in-place op), the
replay never happens, yet in eager the mutations the program made before the failing op are
visible; and with ops inside a try block, the user's except/finally must see the error. So for
such frames the graph is called through `RerunOnFailure`: when the graph raises, nothing the user
can observe has happened yet (everything before the graph call only loads values) except what
the graph wrote into its inputs. Those inputs are copied before the call and put back after a
failure, and running the frame's code eagerly from its start then gives exactly eager's state,
exception and traceback. Where the writes cannot be undone (unknown targets, an input that
requires grad), a graph that wrote before failing lets its error propagate as it is. A graph
that draws random numbers (dropout, randn) has the generators' states saved before the call and
put back after a failure, so the eager run draws the numbers eager would have.

The eager run has the frame hook off (DisabledCall), so it cannot come back to the same graph.
"""
from __future__ import annotations

import types
from typing import Optional

import torch

from . import _evalframe

_VARARGS, _VARKEYWORDS = 0x04, 0x08


class EagerResult:
    """What the frame returned when it ran eagerly after its graph raised."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class RerunOnFailure:
    """Call `graph(*inputs)`; if it raises, put back what it wrote into its inputs, run `code`
    eagerly on the frame's arguments and hand back its result as an EagerResult.

    `written`: positions of the inputs the graph writes into (graph_builder.written_inputs), or
    None when unknown. Those inputs are copied before each call, so a graph that fails halfway
    can be undone; an input that requires grad cannot be restored faithfully (its autograd
    history changed too), and neither can unknown writes: then the graph's error propagates as
    it is, as when no rerun is possible."""

    def __init__(self, graph, code: types.CodeType, globals_: dict, written: Optional[list], random: bool = False):
        self.graph = graph
        self.code = code
        self.globals = globals_
        self.written = written
        self.random = random

    def __call__(self, closure, frame_args: tuple, *inputs):
        saved, versions = self._snapshot(inputs)
        rng = _rng_states() if self.random else None
        try:
            return self.graph(*inputs)
        except Exception:
            if versions is not None and versions != _versions(inputs):
                if saved is None:
                    raise
                with torch.no_grad():
                    for i, copy in saved:
                        inputs[i].copy_(copy)
            if rng is not None:
                _restore_rng_states(rng)
        fn = types.FunctionType(self.code, self.globals, self.code.co_name, None, closure)
        args, kwargs = call_arguments(self.code, frame_args)
        return EagerResult(_evalframe.DisabledCall(fn)(*args, **kwargs))

    def _snapshot(self, inputs):
        if self.written == []:
            return None, None
        versions = _versions(inputs)
        if self.written is None:
            return None, versions
        written = [inputs[i] for i in self.written]
        if any(not isinstance(t, torch.Tensor) or t.requires_grad for t in written):
            return None, versions
        return [(i, inputs[i].clone()) for i in self.written], versions


def _rng_states():
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.random.get_rng_state(), cuda


def _restore_rng_states(states) -> None:
    cpu, cuda = states
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


# Graph ops that draw from a random number generator (functional and in-place forms).
RANDOM_OPS = frozenset({
    "dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
    "native_dropout", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "normal_", "uniform_", "bernoulli", "bernoulli_", "multinomial", "exponential_", "geometric_", "cauchy_",
    "log_normal_", "random_", "poisson", "rrelu", "rrelu_", "rrelu_with_noise", "gumbel_softmax"})


def draws_random_numbers(graph: torch.fx.Graph) -> bool:
    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            if name in RANDOM_OPS:
                return True
    return False


def _versions(inputs) -> list:
    return [t._version for t in inputs if isinstance(t, torch.Tensor)]


def call_arguments(code: types.CodeType, values: tuple) -> tuple[list, dict]:
    """The frame's argument values (in co_varnames order) as a call's positional and keyword arguments."""
    nargs, nkw = code.co_argcount, code.co_kwonlyargcount
    args = list(values[:nargs])
    kwargs = dict(zip(code.co_varnames[nargs:nargs + nkw], values[nargs:nargs + nkw]))
    i = nargs + nkw
    if code.co_flags & _VARARGS:
        args.extend(values[i])
        i += 1
    if code.co_flags & _VARKEYWORDS:
        kwargs.update(values[i])
    return args, kwargs
