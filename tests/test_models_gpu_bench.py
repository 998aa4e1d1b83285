"""bench/models_gpu.py in its CPU smoke mode, in-process, on one tiny Hugging Face model: the forward
row and the training row come back with eager and dynamo_lite timed, counted and checked against
eager (a wrong result from either engine would make `correct` False), an engine that raises becomes
that engine's status, and a library that is not installed skips its row."""
import math

import pytest
import torch

from bench_loader import load_bench

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def bench():
    return load_bench("models_gpu.py", "models_gpu_bench")


def _gpt2(bench):
    return [s for s in bench.SPECS if s.build is bench.hf_gpt2]


def test_smoke_rows_are_produced_and_correct(bench):
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend="eager")
    assert [r.mode for r in rows] == ["forward", "train"]
    for row in rows:
        assert row.status == "ok", row.status
        for engine in (row.inductor, row.ours):
            assert engine.status == "ok", engine.status
            assert engine.correct is True, (row.name, engine)
            assert engine.graphs >= 1 and engine.ms > 0 and engine.first_call_s > 0
            assert engine.max_diff is not None and math.isfinite(engine.max_diff)
        assert row.eager.ms > 0 and row.ratio > 0
    lines = bench.summary(rows)
    assert any("forward" in line for line in lines) and any("train" in line for line in lines)
    assert lines[-1].endswith("none")
    assert all(r.name in bench.format_row(r) for r in rows)


def test_a_wrong_engine_is_reported_not_correct(bench):
    ref = torch.ones(4)
    assert bench.compare_outputs({"logits": ref.clone()}, {"logits": ref}, 1e-3) == (0.0, True)
    diff, ok = bench.compare_outputs({"logits": ref + 0.1}, {"logits": ref}, 1e-3)
    assert not ok and diff == pytest.approx(0.1)
    assert not bench.compare_outputs({"logits": ref * float("nan")}, {"logits": ref}, 1e-3)[1]
    g = [torch.ones(3)]
    assert bench.compare_training(((1.0, 0.9), g), ((1.0, 0.9), g), 1e-3)[1]
    assert not bench.compare_training(((1.0, 0.9), [torch.ones(3) * 1.1]), ((1.0, 0.9), g), 1e-3)[1]
    assert not bench.compare_training(((1.0, 0.95), g), ((1.0, 0.9), g), 1e-3)[1]


def test_a_failing_backend_still_gives_a_correct_row(bench, monkeypatch):
    monkeypatch.setattr(bench.CountingBackend, "__call__", lambda self, gm, ex: 1 / 0)
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend=None, only="forward")
    (row,) = rows
    assert row.status == "ok" and row.inductor.status == "skipped"
    # a backend that fails: dynamo_lite runs the frame eagerly, so the row is still measured and correct
    assert row.ours.status == "ok" and row.ours.correct is True, row.ours


def test_missing_library_skips_its_row(bench):
    spec = bench.Spec("not installed", "no_such_library_xyz", bench.hf_gpt2, "adamw")
    rows = bench.run_models(device="cpu", quick=True, specs=[spec], inductor_backend=None)
    assert [r.status for r in rows] == ["skipped: no_such_library_xyz is not installed"] * 2


def test_an_engine_that_raises_is_that_engines_status(bench, monkeypatch):
    def raising(*args, **kwargs):
        raise RuntimeError("this engine always fails")
    monkeypatch.setattr(bench.dl, "capture", raising)
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend="eager")
    assert [r.status for r in rows] == ["ok", "ok"]
    for row in rows:
        assert row.ours.status == "RuntimeError: this engine always fails" and row.ours.ms is None
        assert row.inductor.correct is True and row.ratio is None
        assert "ours: RuntimeError" in bench.format_row(row)
