"""Replay the minimized failing programs saved by the fuzzer (tests/regressions/*.py).

Each file is a program in the generator's format (make_target, make_inputs) with a comment
header written by `fuzz.driver.save_regression`; it runs through the same oracle as the fuzzer
(eager vs captured, three calls), in a child process so a crash fails only its own test.
A header line `# xfail: <reason>` marks a bug that is still open: the test is then
xfail(strict=True), so it flips to a failure when the bug is fixed. Delete that line then.
`# xfail-python: 3.12` limits the xfail to that Python version, `# xfail-device: cpu` to runs on that
device.
`# backend: triton` runs the program with the triton backend (on CUDA when there is a GPU, else
under Triton's interpreter: triton_env sets TRITON_INTERPRET=1 before anything imports triton),
skipped where that backend cannot run; the default is the eager backend.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import triton_env  # noqa: F401  (first: without a GPU, triton-backend programs run interpreted)
from fuzz.driver import REGRESSIONS_DIR, header, strip_header
from fuzz.oracle import triton_runnable
from fuzz.worker import Worker

FILES = sorted(Path(REGRESSIONS_DIR).glob("*.py"))
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _params():
    out = []
    for path in FILES:
        info = header(path.read_text())
        applies = info.get("xfail-python", PYTHON) == PYTHON and info.get("xfail-device", _device(info)) == _device(info)
        marks = [pytest.mark.xfail(strict=True, reason=info["xfail"])] if "xfail" in info and applies else []
        if info.get("backend", "eager") == "triton":
            marks.append(pytest.mark.skipif(not triton_runnable()[0], reason="needs the triton backend (GPU or TRITON_INTERPRET=1)"))
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


def _device(info: dict) -> str:
    """Where the program runs: a triton-backend program on CUDA when there is a GPU."""
    import torch
    return "cuda" if info.get("backend", "eager") == "triton" and torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def worker():
    with Worker() as w:
        yield w


@pytest.mark.parametrize("path", _params())
def test_regression(path, worker):
    info = header(path.read_text())
    backend, device = info.get("backend", "eager"), _device(info)
    verdict = worker.run(strip_header(path.read_text()), str(path), backend=backend, device=device, timeout=300)
    assert verdict.ok, f"{path.name}: {verdict.category}\n{verdict.message}"


def test_regression_files_are_programs():
    """Every saved file defines what the oracle needs (catches a hand edit gone wrong)."""
    for path in FILES:
        text = path.read_text()
        assert "def make_target" in text and "def make_inputs" in text, path.name
        assert header(text).get("backend", "eager") in ("eager", "triton", "inductor"), path.name
        compile(strip_header(text), str(path), "exec")
