"""Differential test harness for dynamo_lite.

Every test runs a function (or nn.Module) twice from identical deep copies of its inputs: once
eagerly and once through graph capture with a `CountingBackend`.  `check` then compares

* the return value, recursively (tensors incl. dtype/shape/device/requires_grad, tuples, lists,
  deques, dicts, sets, namedtuples, dataclasses, torch.Size, NumPy arrays, scalars),
* the raised exception (type and message), when there is one,
* what was printed to stdout,
* the inputs after the call (in-place changes to tensors, lists, dicts passed in), and the
  state_dict of a module under test,
* the number of graphs handed to the backend,

and finally calls both a second time with fresh copies: the captured side must reuse its graph(s)
(no new backend call) and still agree with eager.  On failure it prints `dis` of the function and
the code of every captured graph.  `check_calls` does the same over several argument sets
(new input values, as TorchDynamo's `standard_test` does), which catches values baked in at the
first call.

Reference mode: with ``DL_TEST_REFERENCE=torch`` capture is ``torch.compile(fn, backend=...)``
(TorchDynamo) and reset is ``torch._dynamo.reset()``, which lets the suite's expectations be
validated independently of dynamo_lite.  Where TorchDynamo legitimately produces a different
number of graphs (graph breaks), a test passes ``graphs=Graphs(dl=..., torch=..., why=...)``.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import dis
import functools
import io
import math
import os
import sys
import types
import warnings
from typing import Any, Callable

import pytest
import torch
import torch.nn as nn

ENGINE = "torch" if os.environ.get("DL_TEST_REFERENCE", "").strip().lower() == "torch" else "dl"
REFERENCE = ENGINE == "torch"


# --------------------------------------------------------------------------------------------
# engine selection
# --------------------------------------------------------------------------------------------

def _dl():
    import dynamo_lite

    return dynamo_lite


def reset() -> None:
    """Drop every cache of the engine under test."""
    if REFERENCE:
        import torch._dynamo

        torch._dynamo.reset()
    else:
        _dl().reset()


def capture(fn=None, *, backend=None, fullgraph: bool = False):
    """`dl.capture` of the engine under test; also usable as a decorator, bare or with arguments.

    In reference mode a function is wrapped with ``torch.compile``.  A module is shallow-copied
    (same parameter/buffer objects, same class) and given a ``torch.compile``d forward, which
    matches dynamo_lite's contract for modules: a module of the original class whose forward is
    captured.  ``backend=None`` means the engine's default; for TorchDynamo that is "eager"
    here (inductor would need a C compiler and is not what is being tested).
    """
    if fn is None:
        return lambda f: capture(f, backend=backend, fullgraph=fullgraph)
    if REFERENCE:
        be = backend if backend is not None else "eager"
        if isinstance(fn, nn.Module):
            mod = copy.copy(fn)
            bound_forward = type(fn).forward.__get__(mod)

            def forward(*args, **kwargs):
                # a frame in this file, which TorchDynamo does not skip (unlike torch/nn/*): the
                # forward of a built-in layer gets inlined into it and captured
                return bound_forward(*args, **kwargs)

            mod.forward = torch.compile(forward, backend=be, fullgraph=fullgraph)
            return mod
        return torch.compile(fn, backend=be, fullgraph=fullgraph)
    dl = _dl()
    if backend is None:
        return dl.capture(fn, fullgraph=fullgraph)
    return dl.capture(fn, backend=backend, fullgraph=fullgraph)


# --------------------------------------------------------------------------------------------
# backend and expected graph counts
# --------------------------------------------------------------------------------------------

class CountingBackend:
    """A backend with torch.compile's contract that records every graph it is given.

    Each graph is linted (`gm.graph.lint()`) and then run as is (`gm.forward`).
    """

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        assert isinstance(gm, torch.fx.GraphModule), f"backend got {type(gm).__name__}, not a GraphModule"
        gm.graph.lint()
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward

    @property
    def count(self) -> int:
        return len(self.graphs)

    def call_nodes(self, index: int = -1) -> list[torch.fx.Node]:
        """The call_function/call_method/call_module nodes of one captured graph."""
        return [n for n in self.graphs[index].graph.nodes
                if n.op in ("call_function", "call_method", "call_module")]

    def describe(self) -> str:
        if not self.graphs:
            return "(no graphs captured)"
        return "\n".join(f"--- graph {i} ---{gm.code}" for i, gm in enumerate(self.graphs))


@dataclasses.dataclass(frozen=True)
class Graphs:
    """Expected graph counts that differ per engine; `None` means "not checked on that engine".

    `why` must say why the engines legitimately differ.
    """

    dl: int | None
    torch: int | None
    why: str

    def __post_init__(self) -> None:
        assert self.why, "Graphs(...) needs a reason for the per-engine difference"

    def expected(self) -> int | None:
        return self.torch if REFERENCE else self.dl


def graph_break(torch: int, dl: int | None = None, why: str = "") -> Graphs:
    """The expectation for a frame with a graph break (print, .item(), data-dependent branch...).

    The brief's first expectation was 0 graphs on dynamo_lite ("the whole frame runs eagerly
    until issue 4").  Graph breaks with resume have since landed in dynamo_lite, so the frame is
    now split around the break like TorchDynamo does, and the expected counts are the same on
    both engines unless `dl` is given (with `why`).
    """
    if dl is None or dl == torch:
        return Graphs(dl=torch, torch=torch, why="graph break: both engines compile the pieces around the break")
    return Graphs(dl=dl, torch=torch, why=why)


#: dynamo_lite breaks the graph at an instruction that raises and compiles the ops before it.
PREFIX_THEN_RAISE = Graphs(
    dl=1, torch=0,
    why="dynamo_lite compiles the ops before the raising instruction as a graph, then raises as "
        "CPython would; TorchDynamo runs a frame whose traced exception escapes entirely eagerly")


def skip_in_reference(reason: str):
    """Mark a test (or a parametrization) that TorchDynamo cannot serve as a reference for."""
    return pytest.mark.skipif(REFERENCE, reason=f"TorchDynamo reference differs: {reason}")


def _expected_count(graphs: int | Graphs | None) -> int | None:
    if isinstance(graphs, Graphs):
        return graphs.expected()
    return graphs


# --------------------------------------------------------------------------------------------
# recursive comparison
# --------------------------------------------------------------------------------------------

_NOT_PLAIN_OBJECTS = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                      types.ModuleType, functools.partial)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def assert_same(expected: Any, actual: Any, path: str = "result", *,
                rtol: float | None = None, atol: float | None = None) -> None:
    """Assert `actual` equals `expected` recursively; `path` names the location in messages."""
    def same(e, a, p):
        assert_same(e, a, p, rtol=rtol, atol=atol)

    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a Tensor, got {type(actual).__name__}"
        assert type(actual) is type(expected), f"{path}: tensor type {type(actual)} != {type(expected)}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.requires_grad == expected.requires_grad, (
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}")
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{path}: {m}")
        return
    if type(expected).__module__ == "numpy" and hasattr(expected, "dtype"):    # an np.ndarray or numpy scalar
        assert type(actual) is type(expected), f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        def as_tensor(a):           # a copy: numpy's negative strides are no tensor's
            return torch.as_tensor(a.copy() if hasattr(a, "copy") else a)
        torch.testing.assert_close(as_tensor(actual), as_tensor(expected), rtol=rtol, atol=atol,
                                   equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    if isinstance(expected, nn.Module):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        same(expected.state_dict(), actual.state_dict(), f"{path}.state_dict()")
        return
    assert type(actual) is type(expected), (
        f"{path}: type {type(actual).__name__} != {type(expected).__name__} "
        f"(got {actual!r}, expected {expected!r})")
    if _is_namedtuple(expected):
        for field in type(expected)._fields:
            same(getattr(expected, field), getattr(actual, field), f"{path}.{field}")
        return
    if isinstance(expected, collections.deque):
        assert actual.maxlen == expected.maxlen, f"{path}: maxlen {actual.maxlen} != {expected.maxlen}"
        same(list(expected), list(actual), f"{path} (items)")
        return
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            same(e, a, f"{path}[{i}]")
        return
    if isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys()), (
            f"{path}: keys {list(actual.keys())} != {list(expected.keys())}")
        for k in expected:
            same(expected[k], actual[k], f"{path}[{k!r}]")
        return
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for f in dataclasses.fields(expected):
            same(getattr(expected, f.name), getattr(actual, f.name), f"{path}.{f.name}")
        return
    if (type(expected).__eq__ is object.__eq__ and hasattr(expected, "__dict__")
            and not isinstance(expected, _NOT_PLAIN_OBJECTS)):
        # a plain user object (deep-copied per run, so identity means nothing): compare its state
        same(vars(expected), vars(actual), f"{path}.__dict__")
        return
    if isinstance(expected, float):
        if math.isnan(expected):
            assert math.isnan(actual), f"{path}: {actual!r} != nan"
        else:
            assert math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {actual!r} != {expected!r}"
        return
    assert actual == expected, f"{path}: {actual!r} != {expected!r}"


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    value: Any = None
    exc: BaseException | None = None
    stdout: str = ""

    def unwrap(self) -> Any:
        if self.exc is not None:
            raise self.exc
        return self.value


def run(fn: Callable, args: tuple = (), kwargs: dict | None = None) -> Outcome:
    """Call fn, recording its return value or exception and what it printed."""
    out = Outcome()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            out.value = fn(*args, **(kwargs or {}))
        except Exception as e:  # noqa: BLE001 -- compared against eager below
            out.exc = e
    out.stdout = buf.getvalue()
    return out


def assert_same_outcome(expected: Outcome, actual: Outcome, label: str, *,
                        rtol: float | None = None, atol: float | None = None) -> None:
    if expected.exc is not None or actual.exc is not None:
        assert actual.exc is not None, (
            f"{label}: eager raised {type(expected.exc).__name__}: {expected.exc} but captured returned {actual.value!r}")
        assert expected.exc is not None, (
            f"{label}: captured raised {type(actual.exc).__name__}: {actual.exc} but eager returned {expected.value!r}")
        assert type(actual.exc) is type(expected.exc), (
            f"{label}: exception {type(actual.exc).__name__}({actual.exc}) != {type(expected.exc).__name__}({expected.exc})")
        assert str(actual.exc) == str(expected.exc), f"{label}: exception message {str(actual.exc)!r} != {str(expected.exc)!r}"
    else:
        assert_same(expected.value, actual.value, f"{label} result", rtol=rtol, atol=atol)
    assert actual.stdout == expected.stdout, f"{label}: stdout {actual.stdout!r} != {expected.stdout!r}"


def _source_code(fn: Any) -> Any:
    if isinstance(fn, nn.Module):
        return type(fn).forward
    return fn


def print_diagnostics(fn: Any, backend: CountingBackend) -> None:
    """Bytecode of the function under test and the code of every captured graph (to stdout)."""
    target = _source_code(fn)
    print(f"===== dis of {getattr(target, '__qualname__', target)!s} =====")
    try:
        dis.dis(target, file=sys.stdout)
    except TypeError as e:
        print(f"(no bytecode: {e})")
    print(f"===== {backend.count} captured graph(s) =====")
    print(backend.describe())


@contextlib.contextmanager
def diagnostics_on_failure(fn: Any, backend: CountingBackend):
    try:
        yield
    except BaseException:
        print_diagnostics(fn, backend)
        raise


def call_both(eager_fn: Callable, compiled: Callable, args: tuple, kwargs: dict, label: str, *,
              rtol: float | None = None, atol: float | None = None) -> tuple[Outcome, Outcome]:
    """Run eager_fn and compiled on separate deep copies of (args, kwargs) and compare the
    outcomes (value or exception, stdout) and the inputs after the call.  Aliasing between
    arguments survives the copy, since both are copied in one deepcopy."""
    e_args, e_kwargs = copy.deepcopy((args, kwargs))
    c_args, c_kwargs = copy.deepcopy((args, kwargs))
    eager = run(eager_fn, e_args, e_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run(compiled, c_args, c_kwargs)
    ours = [str(w.message) for w in caught if any(m in str(w.message) for m in OUR_FAILURES)]
    assert not ours, f"{label}: the engine hid a failure of its own behind an eager run: {ours[0]}"
    for w in caught:          # the program's own warnings still reach the test's filters
        if not str(w.message).startswith("dynamo_lite"):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    assert_same_outcome(eager, got, label, rtol=rtol, atol=atol)
    assert_same(e_args, c_args, f"{label}: positional inputs after the call", rtol=rtol, atol=atol)
    assert_same(e_kwargs, c_kwargs, f"{label}: keyword inputs after the call", rtol=rtol, atol=atol)
    return eager, got


# Warnings by which dynamo_lite says it hid an error of its own (the frame then ran eagerly).
OUR_FAILURES = ("dynamo_lite: internal error", "where eager did not")


@dataclasses.dataclass
class CheckResult:
    eager: Outcome
    captured: Outcome
    backend: CountingBackend
    compiled: Any


def check(fn: Callable, *args: Any, graphs: int | Graphs | None, rtol: float | None = None,
          atol: float | None = None, **kwargs: Any) -> CheckResult:
    """Differential check of `fn(*args, **kwargs)`: eager vs captured, two calls each.

    `graphs` is the expected number of backend calls after the first call (an int, a `Graphs`
    when the engines differ, or None only where the count is checked elsewhere).  A module may
    be passed as `fn`: eager and captured sides then get their own deep copy of it and their
    state_dicts are compared after every call.
    """
    reset()
    backend = CountingBackend()
    is_module = isinstance(fn, nn.Module)
    eager_fn, captured_src = (copy.deepcopy(fn), copy.deepcopy(fn)) if is_module else (fn, fn)
    expected_count = _expected_count(graphs)
    with diagnostics_on_failure(fn, backend):
        compiled = capture(captured_src, backend=backend)
        assert backend.count == 0, "capture() itself called the backend before any call"
        eager, got = call_both(eager_fn, compiled, args, kwargs, "first call", rtol=rtol, atol=atol)
        if is_module:
            assert_same(eager_fn.state_dict(), compiled.state_dict(), "first call: module state_dict",
                        rtol=rtol, atol=atol)
        if expected_count is not None:
            assert backend.count == expected_count, (
                f"expected {expected_count} graph(s) on {ENGINE}, backend was called {backend.count} time(s)")
        before = backend.count
        call_both(eager_fn, compiled, args, kwargs, "second call", rtol=rtol, atol=atol)
        if is_module:
            assert_same(eager_fn.state_dict(), compiled.state_dict(), "second call: module state_dict",
                        rtol=rtol, atol=atol)
        assert backend.count == before, (
            f"second call with the same shapes/types captured {backend.count - before} new graph(s)")
    return CheckResult(eager=eager, captured=got, backend=backend, compiled=compiled)


def check_recapture(fn: Callable, first: tuple, second: tuple, *, graphs_after_second: int = 2) -> CountingBackend:
    """`fn(*first)` captures one graph; `fn(*second)` (new shape/dtype/value) must recapture.

    Every call is compared with eager; repeating either argument set afterwards must hit a cache.
    """
    reset()
    backend = CountingBackend()
    with diagnostics_on_failure(fn, backend):
        compiled = capture(fn, backend=backend)
        call_both(fn, compiled, first, {}, "first arguments")
        assert backend.count == 1, f"first call: expected 1 graph, got {backend.count}"
        call_both(fn, compiled, first, {}, "first arguments again")
        assert backend.count == 1, "repeating the first arguments recaptured"
        call_both(fn, compiled, second, {}, "second arguments")
        assert backend.count == graphs_after_second, (
            f"second arguments: expected {graphs_after_second} graphs in total, got {backend.count}")
        call_both(fn, compiled, second, {}, "second arguments again")
        call_both(fn, compiled, first, {}, "first arguments after the second")
        assert backend.count == graphs_after_second, "repeating earlier arguments recaptured"
    return backend


def check_state_change(fn: Callable, args: tuple, change: Callable[[], Any], *, args_after: tuple | None = None,
                       max_graphs: int | None = 2) -> CountingBackend:
    """Call captured `fn`, then `change()` state it depends on (a global, a closure's list, an
    attribute, a hook, torch's global state...), then call it again: both calls must match eager.

    The eager and captured sides share that state, so each comparison runs eager and captured
    back to back from copies of the same arguments.  The engine may reuse its graph where the
    change cannot make it stale, or recapture (at most `max_graphs` graphs in all; None: any
    number, for changes after which the frame may run eagerly while the frames it calls are
    captured on their own).
    """
    reset()
    backend = CountingBackend()
    with diagnostics_on_failure(fn, backend):
        compiled = capture(fn, backend=backend)
        call_both(fn, compiled, args, {}, "before the change")
        assert backend.count == 1, f"before the change: expected 1 graph, got {backend.count}"
        change()
        call_both(fn, compiled, args if args_after is None else args_after, {}, "after the change")
        if max_graphs is not None:
            assert backend.count <= max_graphs, f"expected at most {max_graphs} graphs, got {backend.count}"
    return backend


def check_calls(fn: Callable, *arg_sets: tuple, graphs: int | Graphs | None, rtol: float | None = None,
                atol: float | None = None) -> CheckResult:
    """Like `check`, over several argument sets of the same structure (new input *values*, as
    TorchDynamo's `standard_test` does): the first set captures `graphs` graph(s); every later set
    must match eager and reuse the capture (no new backend call); the first set runs once more at
    the end.  This catches values a capture baked in from its first call.  All values are
    compared before the graph counts, so a wrong value is what a failure reports."""
    assert arg_sets and all(isinstance(a, tuple) for a in arg_sets), "check_calls needs tuples of arguments"
    reset()
    backend = CountingBackend()
    expected_count = _expected_count(graphs)
    with diagnostics_on_failure(fn, backend):
        compiled = capture(fn, backend=backend)
        eager, got = call_both(fn, compiled, arg_sets[0], {}, "first call", rtol=rtol, atol=atol)
        after_first = backend.count
        # every call's values first (a value baked in at the first call is the worse failure)...
        for i, args in enumerate(arg_sets[1:] + arg_sets[:1], start=2):
            call_both(fn, compiled, args, {}, f"call {i} (new inputs)", rtol=rtol, atol=atol)
        # ...then the graph counts
        if expected_count is not None:
            assert after_first == expected_count, (
                f"expected {expected_count} graph(s) on {ENGINE}, backend was called {after_first} time(s)")
        assert backend.count == after_first, (
            f"calls with new input values captured {backend.count - after_first} new graph(s)")
    return CheckResult(eager=eager, captured=got, backend=backend, compiled=compiled)
