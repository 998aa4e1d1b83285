"""bench/training.py on a few of its cases: in-process on a one-process gloo group, and in two
spawned gloo processes. Its rows compare each engine with an eager run of the same case (losses,
parameters, gradients), so a dynamo_lite row must come back correct, and the bench must turn an
engine's exception into that engine's row."""
import json
import os
import subprocess
import sys

import pytest
import torch

from bench_loader import bench_path, load_bench

_PATH = bench_path("training.py")


@pytest.fixture(scope="module")
def bench():
    return load_bench("training.py", "training_bench")


def _rows(rows, engine):
    return {r.case: r for r in rows if r.engine == engine}


def test_cases_in_process_are_correct_under_dynamo_lite(bench, single_process_group):
    rows = bench.run_cases(bench.select(names=["plain_mlp_sgd", "ddp_small_buckets", "lr_scheduler"]), steps=3)
    ours = _rows(rows, "dynamo_lite")
    assert set(ours) == {"plain_mlp_sgd", "ddp_small_buckets", "lr_scheduler"}
    for row in ours.values():
        assert row.status == "ok" and row.correct, (row.case, row.status, row.detail)
        assert row.graphs >= 1
    assert ours["ddp_small_buckets"].graphs == 3, "one graph per DDP gradient bucket"
    assert {r.case for r in rows if r.engine == "torchdynamo"} == set(ours)
    assert "plain_mlp_sgd" in bench.table(rows)


def test_an_engine_that_raises_is_its_row(bench, single_process_group, monkeypatch):
    monkeypatch.setattr(bench, "Counting", lambda: _Raising())
    rows = bench.run_cases(bench.select(names=["plain_mlp_sgd"]), steps=2)
    torch_row = _rows(rows, "torchdynamo")["plain_mlp_sgd"]
    assert torch_row.status != "ok" and not torch_row.correct
    ours = _rows(rows, "dynamo_lite")["plain_mlp_sgd"]
    assert ours.correct, "a failing backend: dynamo_lite runs the frames eagerly, still correct"


class _Raising:
    graphs = 0

    def __call__(self, gm, example_inputs):
        raise RuntimeError("this backend always fails")


def test_two_gloo_processes(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(_PATH)),
                                                                     os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, _PATH, "-k", "ddp_small", "--steps", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = [r for r in json.loads(out.read_text()) if r["engine"] == "dynamo_lite"]
    assert len(ours) == 1 and ours[0]["status"] == "ok" and ours[0]["correct"], ours
    assert ours[0]["graphs"] == 3
    assert "ddp_small_buckets" in done.stdout


def test_correct_means_as_close_to_float64_as_eager_is(bench):
    # eager float32 (ref) and an engine's float32 result (res), both approximating the float64 run
    torch.manual_seed(0)
    fp64 = torch.randn(2000, dtype=torch.float64)
    noise = lambda scale: (fp64 + scale * torch.randn(2000, dtype=torch.float64)).float()
    ref = noise(1e-3)
    assert bench._close(ref, ref.clone(), fp64, tol=1e-5)
    assert bench._close(ref, noise(1e-3), fp64, tol=1e-5), "a different rounding, as far from float64 as eager"
    assert not torch.allclose(ref, noise(1e-3), rtol=1e-5, atol=1e-5), "(beyond a fixed tolerance)"
    assert not bench._close(ref, noise(1e-2), fp64, tol=1e-5), "ten times eager's error"
    assert not bench._close(ref, torch.full_like(ref, float("nan")), fp64, tol=1e-5)
    assert not bench._close(ref, noise(1e-3), None, tol=1e-5), "no float64 run: allclose only"
    assert not bench._close(ref, ref.double(), fp64, tol=1e-5), "another dtype"


def test_adamw_on_a_zero_gradient_is_correct_against_float64(bench, single_process_group):
    # block_adamw: AdamW's m / sqrt(v) of a gradient that is zero in truth (the key third of the
    # qkv bias) amplifies float32 rounding noise to ~1e-3 in the parameters, in eager as in a
    # captured step; measured against the float64 run, the captured step is as good as eager.
    row = _rows(bench.run_cases(bench.select(names=["block_adamw"]), steps=5), "dynamo_lite")["block_adamw"]
    assert row.status == "ok" and row.correct, (row.status, row.detail)
    assert row.max_diff > 1e-4, "the case still differs from eager beyond its fixed tolerance"
