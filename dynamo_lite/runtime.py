"""What generated code and compiled graphs call at run time.

Everything here runs in the user's program, after capture: the wrappers around a compiled
graph (grad mode and autocast restored when it raises, `RerunOnFailure`), the graph nodes that
switch autocast or check an `assert`, the `__exit__`s of `with` blocks a graph break
interrupted, and the helpers that rebuild Python objects made while tracing. Backends may import
this module; it imports nothing of the engine but the C hook.

**RerunOnFailure.** A captured frame's replacement code calls the graph first and replays the
recorded side effects (list/dict contents, attribute, global and cell writes) after it. If the
graph raises (a shape or dtype error the example values did not show, overlapping memory in an
in-place op), the replay never happens, yet in eager the mutations the program made before the
failing op are visible; and with ops inside a try block, the user's except/finally must see the
error. So for such frames the graph is called through `RerunOnFailure`: when the graph raises,
nothing the user can observe has happened yet (everything before the graph call only loads
values) except what the graph wrote into its inputs. Those inputs are copied before the call and
put back after a failure, and running the frame's code eagerly from its start then gives exactly
eager's state, exception and traceback. Where the writes cannot be undone (unknown targets, an
input that requires grad), a graph that wrote before failing lets its error propagate as it is.
A graph that draws random numbers (dropout, randn) has the generators' states saved before the
call and put back after a failure, so the eager run draws the numbers eager would have. The
eager run has the frame hook off (DisabledCall), so it cannot come back to the same graph.
"""
from __future__ import annotations

import types
from collections import OrderedDict
from typing import Optional

import torch
import torch.fx

from . import _evalframe

DisabledCall = _evalframe.DisabledCall
_VARARGS, _VARKEYWORDS = 0x04, 0x08


# ============================================================================================
# calling a compiled graph
# ============================================================================================


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


def restoring_grad_mode(fn):
    """A graph that switches grad mode and then raises must not leave the mode switched."""
    def run(*args):
        prior = torch.is_grad_enabled()
        try:
            return fn(*args)
        except BaseException:
            torch._C._set_grad_enabled(prior)
            raise
    return run


def autocast_as_traced(fn, final: dict, cache: bool, delta: int):
    """A graph that enters or leaves autocast blocks: after it, the autocast state is the one
    traced at its end (nesting moved by `delta`), also under a backend that compiled the enter
    and exit nodes away (their casts are baked in, the switch itself would not happen); when it
    raises, the state it started from."""
    def run(*args):
        before = autocast_snapshot()
        try:
            out = fn(*args)
        except BaseException:
            restore_autocast(before)
            raise
        restore_autocast((final, cache, before[2] + delta))
        return out
    return run


# ============================================================================================
# graph nodes with an effect: autocast switches, assertions
# ============================================================================================

AUTOCAST_DEVICES = ("cpu", "cuda")


@torch.fx.node.has_side_effect
def enter_autocast(device, enabled, dtype, cache):
    """torch.autocast(device, dtype, enabled, cache).__enter__(), as a graph node."""
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache)


@torch.fx.node.has_side_effect
def exit_autocast(device, enabled, dtype, cache):
    """Its __exit__: back to the state (enabled, dtype, cache) it entered from."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)


def autocast_devices() -> dict:
    """The real autocast state per device type: {device: (enabled, dtype)}."""
    return {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES}


def set_autocast_devices(state: dict) -> None:
    for device, (enabled, dtype) in state.items():
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)


def autocast_nesting() -> int:
    depth = torch.autocast_increment_nesting() - 1      # torch has no getter
    torch.autocast_decrement_nesting()
    return depth


def autocast_snapshot() -> tuple:
    """Everything autocast's enter and exit change: (devices, cache flag, nesting)."""
    return autocast_devices(), torch.is_autocast_cache_enabled(), autocast_nesting()


def restore_autocast(snapshot: tuple) -> None:
    devices, cache, nesting = snapshot
    set_autocast_devices(devices)
    torch.set_autocast_cache_enabled(cache)
    now = autocast_nesting()
    for _ in range(now - nesting):
        torch.autocast_decrement_nesting()
    for _ in range(nesting - now):
        torch.autocast_increment_nesting()


@torch.fx.node.has_side_effect
def check_assertion(cond, expected, *message):
    if bool(cond) is not expected:
        raise AssertionError(*message)


# ============================================================================================
# `with` blocks a graph break interrupted
# ============================================================================================

class GradModeBlock:
    """A grad-mode `with` block (no_grad, enable_grad, set_grad_enabled) that a graph break
    interrupted. At the break the block is in force already (the graph before it switched the
    mode, or an earlier frame did); the break's code pushes `GradModeBlock(...).__exit__` where
    the block's own `__exit__` was on the stack, so the resume function leaves (or unwinds) the
    block as the original code would. `enabled=None` is a contextlib.nullcontext()."""
    __slots__ = ("enabled", "previous")

    def __init__(self, enabled, previous):
        self.enabled, self.previous = enabled, previous
        if enabled is not None:       # in force already with our backends; a backend that folded the
            torch._C._set_grad_enabled(enabled)      # graph's mode switches away may not have left it set

    def __exit__(self, *exc_info):
        if self.enabled is not None:
            torch._C._set_grad_enabled(self.previous)
        return False


def grad_mode_exit(enabled, previous):
    return GradModeBlock(enabled, previous).__exit__


class AutocastBlock:
    """Likewise for a `torch.autocast` block: `state` is what it switches to (device, enabled,
    dtype, cache), `previous` what its exit restores (enabled, dtype, cache). Entering changes
    autocast's nesting count, so a block is entered exactly once: the graph before the break
    leaves the blocks its trace entered (convert_frame), and the break's code enters them here;
    a block entered by an earlier frame is passed on as it is."""
    __slots__ = ("device", "enabled", "dtype", "cache", "previous")

    def __init__(self, state: tuple, previous: tuple):
        self.device, self.enabled, self.dtype, self.cache = state
        self.previous = previous
        enter_autocast(*state)

    def __exit__(self, *exc_info):
        exit_autocast(self.device, *self.previous)
        return False


def enter_autocast_block(state, previous):
    return AutocastBlock(state, previous).__exit__



# ============================================================================================
# rebuilding values made while tracing
# ============================================================================================

def rebuild_object(cls, attrs, items=None):
    """An object created while tracing, made for real without running its __init__ again: its
    dict contents first (dict / OrderedDict subclasses, through the base's own __setitem__, so
    the order is kept), then its attributes, bypassing any custom __setattr__."""
    if items is None:
        obj = object.__new__(cls)
    else:
        base = OrderedDict if issubclass(cls, OrderedDict) else dict
        obj = base.__new__(cls)
        for key, value in items.items():
            base.__setitem__(obj, key, value)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


def rebuild_exception(cls, args):
    return cls(*args)


def replace_contents(target, new):
    """A dict, set or deque that exists outside the frame gets the contents the trace left it with."""
    target.clear()
    if hasattr(target, "update"):
        target.update(new)
    else:
        target.extend(new)


def dict_view(mapping, kind: str):
    """`mapping.keys()` / `.values()` / `.items()`: a view made while tracing, live on the mapping."""
    return getattr(mapping, kind)()


def dereference(ref):
    return ref()


def fresh_array_copy(array):
    """A numpy array made while tracing, rebuilt for one call (no call sees another's writes)."""
    return array.copy()
