"""Code run in child processes, so a crash or a hang is a result, not the end of the run.

A `Worker` owns one child Python process that imports torch and dynamo_lite once and then
serves requests, one JSON line each on its stdin, answered by one JSON line on a private copy of
its stdout (fd 1 itself goes to /dev/null, so nothing the code under test or a library writes
there can garble the protocol). Two requests:

    worker.run(source)              a generated program through oracle.check_source -> Verdict
    worker.call(path, "test_name")  a function of a test module, imported in the child -> Verdict
                                    (category "" when it returned, "failed" with the traceback)

When the child dies the verdict is "crash" (with the signal and the tail of its stderr); when it
answers nothing within the timeout it is killed and the verdict is "hang". Either way the next
request starts a fresh child.
"""
from __future__ import annotations

import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from .oracle import Verdict

TESTS_DIR = Path(__file__).resolve().parents[1]
# The repository's own dynamo_lite comes first (not an installed copy of another checkout).
_BOOT = ("import sys; sys.path[:0] = [{tests!r}, {repo!r}]; from fuzz.worker import serve; serve()")


class Worker:
    """One child process running programs through oracle.check_source."""

    def __init__(self, *, env: Optional[dict] = None, python: str = sys.executable, recycle_after: int = 2000):
        self.env = dict(os.environ if env is None else env)
        self.python = python
        self.recycle_after = recycle_after
        self.proc: Optional[subprocess.Popen] = None
        self.served = 0
        self._buffer = b""

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.close()
        self._stderr = tempfile.TemporaryFile()
        self._buffer = b""
        self.served = 0
        self.proc = subprocess.Popen([self.python, "-c", _BOOT.format(tests=str(TESTS_DIR), repo=str(TESTS_DIR.parent))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=self.env, cwd=str(TESTS_DIR))

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self._stderr.close()
            self.proc = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- one program ----------------------------------------------------------------------
    def run(self, source: str, filename: str = "<fuzz>", *, backend: str = "eager", device: str = "cpu",
            timeout: float = 60.0) -> Verdict:
        return self._request({"op": "program", "source": source, "filename": filename, "backend": backend,
                              "device": device}, timeout)

    def call(self, path: str, function: str, *, timeout: float = 120.0) -> Verdict:
        """Import the module at `path` in the child (once) and call its `function()`."""
        return self._request({"op": "call", "path": str(Path(path).resolve()), "function": function}, timeout)

    def _request(self, request: dict, timeout: float) -> Verdict:
        if self.proc is None or self.proc.poll() is not None or self.served >= self.recycle_after:
            self.start()
        self.served += 1
        request = json.dumps(request)
        try:
            self.proc.stdin.write(request.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._crashed()
        line = self._readline(timeout)
        if line is None:
            self.close()
            return Verdict("hang", f"no answer within {timeout:.0f} s (the child was killed)")
        if not line:
            return self._crashed()
        verdict = Verdict(**json.loads(line))
        if "CUDA error" in verdict.message:
            self.close()     # a device-side assert poisons the child's CUDA context for every later program
        return verdict

    def _readline(self, timeout: float) -> Optional[bytes]:
        """The next line from the child; b"" when it died, None on timeout."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b""
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _crashed(self) -> Verdict:
        code = self.proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-1500:]
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        self.close()
        return Verdict("crash", f"the worker process died ({how}); stderr tail:\n{tail}")


def serve() -> None:
    """The child's main loop (started by Worker.start)."""
    results = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    import torch
    torch.set_num_threads(1)
    from .oracle import check_source
    modules: dict = {}
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "program":
            verdict = check_source(request["source"], request["filename"], backend=request["backend"],
                                   device=request["device"])
        else:
            verdict = _call(modules, request["path"], request["function"])
        results.write(json.dumps(dataclasses.asdict(verdict)) + "\n")
        results.flush()


def _call(modules: dict, path: str, function: str) -> Verdict:
    import importlib.util
    import traceback
    try:
        if path not in modules:
            spec = importlib.util.spec_from_file_location(f"_isolated_{len(modules)}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[path] = module
        getattr(modules[path], function)()
        return Verdict()
    except BaseException as e:  # noqa: BLE001 -- reported to the parent, which fails the test
        return Verdict("failed", "".join(traceback.format_exception(e)))


def isolated_cases(namespace: dict, known_bugs: dict) -> list:
    """pytest parameters for the `case_*` functions of a test module run in a Worker child:
    one per case, marked xfail(strict) with the reason where `known_bugs` names it."""
    import pytest
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=known_bugs[name]))
            if name in known_bugs else name
            for name in sorted(n for n in namespace if n.startswith("case_"))]
