"""Never our exception: an error raised inside dynamo_lite's own code at any stage — a guard
check, a recapture reason, tracing, code generation, the call of the compiled graph, rebuilding
Python values after it — makes the frame run eagerly (the user gets eager's result), is recorded
and warned about once; `fullgraph=True` raises instead, naming the reason.

Each test injects a failure at one stage (monkeypatching our own code) and compares the captured
function's results with eager's over several calls. One exception, by design: a graph that writes
into its inputs is copied for undo only until it has run once (runtime.FrameRun).
"""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite import convert_frame
from dynamo_lite.fallback.records import RECORDS
from dynamo_lite.guards import TensorMatch
from dynamo_lite.guards import compile as guard_compile
from dynamo_lite.handlers import HANDLERS
from dynamo_lite.values import objects as object_values


class Injected(RuntimeError):
    """The failure we inject; it must never reach the caller."""


@pytest.fixture(autouse=True)
def fresh():
    dl.reset()
    yield
    dl.reset()


def fn(x, y):
    return torch.relu(x @ y + 1).sum(dim=-1)


def inputs(n=3):
    torch.manual_seed(n)
    return torch.randn(n, 4), torch.randn(4, 5)


def agree_with_eager(captured, calls=((3,), (3,), (4,), (5,))):
    """Run the captured function on several inputs (a shape change makes it recapture) and
    compare each result with eager's; return the warnings it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for (n,) in calls:
            x, y = inputs(n)
            torch.testing.assert_close(captured(x, y), fn(x, y))
    return [str(w.message) for w in caught if "dynamo_lite" in str(w.message)]


def errors():
    return [r for r in RECORDS if r.status == "error"]


def test_a_guard_check_that_raises_is_a_miss(monkeypatch):
    real = guard_compile.compile_guards

    def raising_guards(*args, **kwargs):
        compiled = real(*args, **kwargs)

        def check(*a):
            raise Injected("guard check")
        return dataclasses.replace(compiled, check=check)
    monkeypatch.setattr(convert_frame, "compile_guards", raising_guards)
    agree_with_eager(dl.capture(fn))


def test_a_recapture_reason_that_raises(monkeypatch):
    def why_not(self, value):
        raise Injected("why_not")
    monkeypatch.setattr(TensorMatch, "why_not", why_not)
    captured = dl.capture(fn)
    assert agree_with_eager(captured) == []
    reasons = [r.recompile_reason for r in RECORDS if r.recompile_reason]
    assert reasons and all("no longer holds" in r for r in reasons), reasons


def test_computing_recapture_reasons_that_fails_runs_eagerly(monkeypatch):
    def failure(self, fn, args):
        raise Injected("failure")
    monkeypatch.setattr(guard_compile.CompiledGuards, "failure", failure)
    messages = agree_with_eager(dl.capture(fn))
    assert len(messages) == 1 and "internal error" in messages[0], messages
    assert any("Injected" in r.detail for r in errors())


def test_a_handler_that_raises_runs_the_frame_eagerly(monkeypatch):
    def binary_op(frame, inst):
        raise Injected("handler")
    monkeypatch.setitem(HANDLERS, "BINARY_OP", binary_op)
    messages = agree_with_eager(dl.capture(fn))
    assert len(messages) == 1 and "internal error" in messages[0] and "Injected" in messages[0]


def test_code_generation_that_raises_runs_the_frame_eagerly(monkeypatch):
    def make_code(*args, **kwargs):
        raise Injected("codegen")
    monkeypatch.setattr(convert_frame, "make_code", make_code)
    messages = agree_with_eager(dl.capture(fn))
    assert len(messages) == 1 and "internal error" in messages[0]


def test_with_fullgraph_an_internal_error_raises_with_its_reason(monkeypatch):
    def make_code(*args, **kwargs):
        raise Injected("codegen")
    monkeypatch.setattr(convert_frame, "make_code", make_code)
    with pytest.raises(Injected, match="codegen"):
        dl.capture(fn, fullgraph=True)(*inputs())


def _failing_at_run_time(gm, example_inputs):
    calls = []

    def compiled(*args):
        calls.append(1)
        if len(calls) == 2:
            raise Injected("graph call")
        return gm.forward(*args)
    return compiled


def test_a_compiled_graph_that_raises_at_run_time_runs_the_frame_eagerly():
    messages = agree_with_eager(dl.capture(fn, backend=_failing_at_run_time))
    assert len(messages) == 1 and "raised Injected" in messages[0] and "where eager did not" in messages[0]
    assert any("failed at run time" in r.detail for r in errors())


def _writes_then_fails(gm, example_inputs):
    def compiled(*args):
        gm.forward(*args)                # the graph's in-place write into its input happened
        raise Injected("after the write")
    return compiled


def test_a_graph_failing_after_writing_into_its_input_is_undone_then_run_eagerly():
    def f(x):
        x.mul_(2)
        return x + 1

    x_eager, x_captured = torch.ones(3), torch.ones(3)
    expected = f(x_eager)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = dl.capture(f, backend=_writes_then_fails)(x_captured)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x_captured, x_eager)          # written once, not twice


def _writes_then_fails_on_the_second_call(gm, example_inputs):
    calls = []

    def compiled(*args):
        calls.append(1)
        out = gm.forward(*args)
        if len(calls) == 2:
            raise Injected("second call, after the write")
        return out
    return compiled


def test_a_writing_graph_is_copied_for_undo_until_it_has_run_once():
    # an optimizer step must not copy p, m and v on every call: once the graph has run to the end,
    # a later failure propagates (as TorchDynamo's do) instead of being undone and rerun eagerly
    def f(x):
        x.mul_(2)
        return x + 1

    captured = dl.capture(f, backend=_writes_then_fails_on_the_second_call)
    x = torch.ones(3)
    torch.testing.assert_close(captured(x), torch.full((3,), 3.0))
    with pytest.raises(Injected):
        captured(x)


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


def make_pair(x):
    return Pair(x + 1, x * 2)


def test_rebuilding_an_output_that_raises_runs_the_frame_eagerly(monkeypatch):
    real = object_values.rebuild_object

    def rebuild_object(cls, attrs, items=None):
        if attrs:                    # the check while tracing makes an empty one: let it pass
            raise Injected("rebuild")
        return real(cls, attrs, items)
    monkeypatch.setattr(object_values, "rebuild_object", rebuild_object)
    captured = dl.capture(make_pair)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 2, 3):
            x = torch.randn(n)
            got, expected = captured(x), make_pair(x)
            assert type(got) is Pair
            torch.testing.assert_close((got.a, got.b), (expected.a, expected.b))
    assert sum("dynamo_lite" in str(w.message) for w in caught) == 1


def test_side_effects_happen_once_when_a_rebuild_fails(monkeypatch):
    """A rebuild failure is caught before any side effect is replayed: the eager rerun does
    them, exactly once."""
    real = object_values.rebuild_object

    def rebuild_object(cls, attrs, items=None):
        if attrs:
            raise Injected("rebuild")
        return real(cls, attrs, items)
    monkeypatch.setattr(object_values, "rebuild_object", rebuild_object)
    log = []

    def f(x):
        log.append(1)
        return make_pair(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dl.capture(f)(torch.randn(2))
    assert log == [1]


def test_a_graph_error_the_program_also_raises_reaches_it_unchanged():
    """Not ours: eager raises too, so the user sees eager's exception and nothing is recorded."""
    def f(x, i):
        return x.index_select(0, i)

    captured = dl.capture(f)
    captured(torch.randn(4), torch.tensor([1]))
    with pytest.raises(IndexError) as eager_error:
        f(torch.randn(4), torch.tensor([9]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(IndexError) as captured_error:
            captured(torch.randn(4), torch.tensor([9]))
    assert str(captured_error.value) == str(eager_error.value)
    assert not [w for w in caught if "dynamo_lite" in str(w.message)]
    assert not errors()

