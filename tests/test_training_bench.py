"""bench/training.py on a few of its cases: in-process on a one-process gloo group, and in two
spawned gloo processes. Its rows compare each engine with an eager run of the same case (losses,
parameters, gradients), so a dynamo_lite row must come back correct, and the bench must turn an
engine's exception into that engine's row."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "training.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("training_bench", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


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
