"""bench/kernel_set.py in its CPU smoke mode: a tiny BERT captured by dynamo_lite, its graph cut at
the library ops, each region between them compiled by the triton backend (under Triton's
interpreter) and compared with eager by the bench itself."""
import json
import os
import subprocess
import sys

import pytest

from bench_loader import bench_path

pytest.importorskip("transformers")
pytest.importorskip("triton")


def test_regions_of_a_real_model_become_workloads_that_match_eager(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(bench_path("kernel_set.py")), "--device", "cpu", "--quick",
                           "-k", "Bert", "--json", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = json.loads(out.read_text())
    assert len(rows) >= 2, proc.stdout
    assert all(r["model"].startswith("hf BertModel") for r in rows)
    assert all(r["correct"] is True and r["status"] == "ok" for r in rows), rows
    assert any("layer_norm" in r["ops"] for r in rows)
    assert "results differing from eager beyond tolerance: none" in proc.stdout
