"""bench/compile_latency.py in its CPU smoke mode (Triton's interpreter, a tiny GPT-2): each
measurement is a fresh process with empty caches (a second run reads nothing from the kernel cache
the first wrote), the rows come back checked against eager, and the table prints them."""
import json

import pytest

import triton_env  # noqa: F401  (first: TRITON_INTERPRET must be set before triton is first imported)
from bench_loader import load_bench

pytest.importorskip("transformers")
pytest.importorskip("triton")


def test_cold_processes_with_empty_caches(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "1")       # the children's smoke mode, also on a GPU machine
    bench = load_bench("compile_latency.py", "compile_latency_bench")
    out = tmp_path / "rows.json"
    code = bench.main(["--device", "cpu", "--quick", "--models", "gpt2", "--engines", "capture,ours-w0",
                       "--repeat", "2", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert code == 0, rows
    assert [r["engine"] for r in rows] == ["capture", "ours-w0"]
    capture, ours = rows
    assert all(r["status"] == "ok" and r["correct"] and r["first_call_s"] > 0 for r in rows)
    assert capture["kernels"] == 0 and ours["kernels"] > 0 and len(ours["runs"]) == 2
    assert ours["workers"] == 0 and ours["pool"]["submitted"] == 0
    assert ours["kernel_cache"]["writes"] > 0 and ours["kernel_cache"]["disk_hits"] == 0
    table = capsys.readouterr().out
    assert "gpt2" in table and "ours-w0" in table and "workers 0" in table
