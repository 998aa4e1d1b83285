"""bench/ddp_overlap.py in its CPU smoke mode: two spawned gloo processes, a tiny GPT-2 wrapped in
DistributedDataParallel, eager vs dynamo_lite with the graph cut at DDP's buckets and whole. Each
captured engine's losses must match eager's on every step (the bench compares them)."""
import json
import subprocess
import sys

import pytest

from bench_loader import bench_path

pytest.importorskip("transformers")


def test_ddp_overlap_smoke_mode_runs_and_matches_eager(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(bench_path("ddp_overlap.py")), "--device", "cpu", "--quick",
                           "--steps", "3", "--engines", "eager,ours_split,ours_whole", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = {r["engine"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"eager", "ours_split", "ours_whole"}
    for engine in ("ours_split", "ours_whole"):
        assert rows[engine]["status"] == "ok" and rows[engine]["correct"] is True, rows[engine]
        assert len(rows[engine]["losses"]) == 3 and rows[engine]["graphs"] >= 1
    assert "ours_split" in proc.stdout
