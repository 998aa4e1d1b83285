"""Self-tests of the differential harness: it must notice every kind of divergence it promises to
check.  A fake engine (monkeypatched `harness.capture`) stands in for a buggy capture, so these
tests exercise the harness only and run the same in every mode."""
import collections
import dataclasses

import numpy as np
import pytest
import torch

import harness
from harness import CountingBackend, Graphs, assert_same, check


def fake_engine(monkeypatch, make_captured, graphs_per_capture=1):
    """Replace capture() with one whose first call hands `graphs_per_capture` trivial graphs to
    the backend, and which runs `make_captured(fn)` instead of fn; reset() becomes a no-op."""
    def fake_capture(fn=None, *, backend=None, fullgraph=False):
        impl = make_captured(fn)
        captured = []

        def call(*args, **kwargs):
            if not captured:
                for _ in range(graphs_per_capture):
                    captured.append(backend(torch.fx.symbolic_trace(lambda t: t + 0), [torch.zeros(1)]))
            return impl(*args, **kwargs)

        return call

    monkeypatch.setattr(harness, "capture", fake_capture)
    monkeypatch.setattr(harness, "reset", lambda: None)


def expect_failure(fn, *args, match, **kwargs):
    with pytest.raises(AssertionError, match=match):
        check(fn, *args, **kwargs)


Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Box:
    value: torch.Tensor


@pytest.mark.parametrize("expected, actual, match", [
    (torch.ones(2), torch.ones(2, dtype=torch.float64), "dtype"),
    (torch.ones(2), torch.ones(3), "shape"),
    (torch.ones(2), torch.zeros(2), "Mismatched elements|not close"),
    (torch.ones(2, requires_grad=True), torch.ones(2), "requires_grad"),
    ((1, 2), [1, 2], "type"),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, "keys"),
    (Point(torch.ones(1), 2), Point(torch.ones(1), 3), r"\.y"),
    (Box(torch.ones(1)), Box(torch.zeros(1)), r"\.value"),
    (torch.Size([2, 3]), (2, 3), "type"),
    (np.ones(2), np.ones(2, dtype=np.float32), "dtype"),
    (np.ones(2), np.zeros(2), "Mismatch|Not equal"),
    (1, True, "type"),
    (0.5, 0.5000001, "0.5"),
], ids=["dtype", "shape", "values", "requires_grad", "tuple_vs_list", "dict_order", "namedtuple",
        "dataclass", "size_vs_tuple", "ndarray_dtype", "ndarray_values", "int_vs_bool", "float"])
def test_assert_same_detects(expected, actual, match):
    with pytest.raises(AssertionError, match=match):
        assert_same(expected, actual)


def test_assert_same_accepts_equal_nested_structures():
    value = {"p": Point(torch.arange(3.0), [1, (2.0, "s")]), "b": Box(torch.ones(2)), "n": None}
    assert_same(value, {"p": Point(torch.arange(3.0), [1, (2.0, "s")]), "b": Box(torch.ones(2)), "n": None})


def test_check_detects_wrong_result(monkeypatch):
    fake_engine(monkeypatch, lambda fn: (lambda *a: fn(*a) + 1))
    expect_failure(lambda x: x * 2, torch.ones(2), graphs=1, match="first call")


def test_check_detects_missing_input_mutation(monkeypatch):
    fake_engine(monkeypatch, lambda fn: (lambda x: x.clone().add_(1).sum()))
    expect_failure(lambda x: x.add_(1).sum(), torch.ones(2), graphs=1, match="inputs after the call")


def test_check_detects_missing_list_mutation(monkeypatch):
    fake_engine(monkeypatch, lambda fn: (lambda x, log: x * 2))

    def f(x, log):
        log.append(1)
        return x * 2

    expect_failure(f, torch.ones(2), [], graphs=1, match="inputs after the call")


def test_check_detects_different_stdout(monkeypatch):
    fake_engine(monkeypatch, lambda fn: (lambda x: x + 1))

    def f(x):
        print("hello")
        return x + 1

    expect_failure(f, torch.ones(2), graphs=1, match="stdout")


def test_check_detects_different_exception(monkeypatch):
    def raises_type_error(x):
        raise TypeError("boom")

    fake_engine(monkeypatch, lambda fn: raises_type_error)

    def f(x):
        raise ValueError("boom")

    expect_failure(f, torch.ones(2), graphs=1, match="exception")


def test_check_detects_swallowed_exception(monkeypatch):
    fake_engine(monkeypatch, lambda fn: (lambda x: x))

    def f(x):
        raise ValueError("boom")

    expect_failure(f, torch.ones(2), graphs=1, match="eager raised ValueError")


def test_check_detects_wrong_graph_count(monkeypatch):
    fake_engine(monkeypatch, lambda fn: fn, graphs_per_capture=2)
    expect_failure(lambda x: x + 1, torch.ones(2), graphs=1, match="expected 1 graph")


def test_check_detects_recapture_on_second_call(monkeypatch):
    def recapturing(fn):
        def run(*args):
            backend_holder[0](torch.fx.symbolic_trace(lambda t: t), [torch.zeros(1)])
            return fn(*args)
        return run

    backend_holder = []

    def fake_capture(fn=None, *, backend=None, fullgraph=False):
        backend_holder.append(backend)
        return recapturing(fn)

    monkeypatch.setattr(harness, "capture", fake_capture)
    monkeypatch.setattr(harness, "reset", lambda: None)
    expect_failure(lambda x: x + 1, torch.ones(2), graphs=1, match="second call")


def test_check_detects_module_state_divergence(monkeypatch):
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n += 1
            return x

    monkeypatch.setattr(harness, "capture", lambda fn, backend=None, fullgraph=False: _Stateless(fn))
    monkeypatch.setattr(harness, "reset", lambda: None)
    expect_failure(Counter(), torch.ones(2), graphs=None, match="state_dict")


class _Stateless(torch.nn.Module):
    """A 'captured' module that forgets to update its buffers."""

    def __init__(self, mod):
        super().__init__()
        self.inner = mod

    def forward(self, x):
        return x

    def state_dict(self, *args, **kwargs):
        return self.inner.state_dict(*args, **kwargs)


def test_failure_prints_bytecode_and_graphs(monkeypatch, capsys):
    fake_engine(monkeypatch, lambda fn: (lambda x: x - 1))
    with pytest.raises(AssertionError):
        check(lambda x: x + 1, torch.ones(2), graphs=1)
    out = capsys.readouterr().out
    assert "RETURN_VALUE" in out and "BINARY_OP" in out, "dis output missing"
    assert "def forward" in out, "captured graph code missing"


def test_counting_backend_lints_and_runs_graph():
    backend = CountingBackend()
    gm = torch.fx.symbolic_trace(lambda t: t * 3)
    compiled = backend(gm, [torch.ones(2)])
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 3.0))
    assert backend.count == 1 and len(backend.call_nodes(0)) == 1


def test_graphs_per_engine_needs_a_reason():
    with pytest.raises(AssertionError):
        Graphs(dl=0, torch=2, why="")
    expected = Graphs(dl=0, torch=2, why="graph break").expected()
    assert expected == (2 if harness.REFERENCE else 0)


def test_check_calls_detects_value_baked_in_at_first_call(monkeypatch):
    seen = []

    def baking(fn):
        def run(*args):
            if not seen:
                seen.append(fn(*args))
            return seen[0]
        return run

    fake_engine(monkeypatch, baking)
    harness.check_calls(lambda x: x * 2, (torch.ones(2),), graphs=1)   # one argument set: fine
    seen.clear()
    with pytest.raises(AssertionError, match="call 2"):
        harness.check_calls(lambda x: x * 2, (torch.ones(2),), (torch.zeros(2),), graphs=1)
