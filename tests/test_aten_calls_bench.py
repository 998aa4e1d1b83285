"""bench/aten_calls.py in-process on tiny Hugging Face models under the Triton interpreter: a
forward row and a training row come back with their graphs, kernels and library calls counted,
no aten call besides the library's (DistilBERT's forward has none left; GPT-2's training step
only its dropouts' masks, which stay aten calls to draw eager's random numbers), no lowering
error and no recapture on a second identical call; the JSON holds the same rows."""
import json

import pytest

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)
from bench_loader import load_bench


@pytest.mark.parametrize("argv", [["-k", "distilbert"], ["--train", "-k", "GPT2"]])
def test_rows_count_what_the_backend_left(argv, tmp_path, capsys):
    pytest.importorskip("transformers")
    bench = load_bench("aten_calls.py", "aten_calls_bench")
    path = tmp_path / "rows.json"
    assert bench.main(argv + ["--device", DEVICE, "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())
    assert row["graphs"] >= 1 and row["kernels"] > 0 and row["library_calls"] > 0, row
    allowed = {"aten.native_dropout.default"} if "--train" in argv else set()
    assert set(row["aten_calls"]) <= allowed and row["lowering_errors"] == {} and row["fallbacks"] == [], row
    assert row["recaptured"] == (None if "--train" in argv else 0)
    out = capsys.readouterr().out
    assert row["model"] in out and "1 models: 0 failed to run, 0 with lowering errors" in out
