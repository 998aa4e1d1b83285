"""Run many generated programs, count what happened, shrink failures and save them.

Program number i of a run with seed S is `generate(program_seed(S, i))` of the run's style
(`GENERATORS`: "tensor", generator.py, or "library", library.py), so any failure is reproducible
from the style and the two numbers alone. Programs run in `jobs` worker processes
(worker.py). Each failing program is shrunk (shrink.py) and written to `tests/regressions/`,
where `tests/test_fuzz_regressions.py` replays it.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from . import generator, library
from .oracle import Verdict
from .shrink import shrink, signature
from .worker import TESTS_DIR, Worker

REGRESSIONS_DIR = TESTS_DIR / "regressions"
XFAIL_MARK = "# xfail: "

#: program styles: seed -> program text
GENERATORS: dict[str, Callable[[int], str]] = {"tensor": generator.generate, "library": library.generate}


def generate(seed: int, style: str = "tensor") -> str:
    return GENERATORS[style](seed)


def program_seed(seed: int, index: int) -> int:
    return seed * 1_000_000 + index


@dataclasses.dataclass
class Failure:
    program: int                   # the generator seed of the program
    verdict: Verdict
    source: str
    shrunk: Optional[str] = None
    saved: Optional[Path] = None


@dataclasses.dataclass
class Summary:
    programs: int = 0
    seconds: float = 0.0
    categories: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    eager_errors: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    graphs: collections.Counter = dataclasses.field(default_factory=collections.Counter)   # bucket -> programs
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)   # reason -> frames
    break_programs: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # reason -> programs
    failures: list = dataclasses.field(default_factory=list)

    def count(self, prefix: str) -> int:
        return sum(n for c, n in self.categories.items() if c.startswith(prefix))

    @property
    def failed(self) -> int:
        return sum(n for c, n in self.categories.items() if c)

    def graph_buckets(self) -> dict:
        return {b: self.graphs.get(b, 0) for b in ("0 (ran eagerly)", "1", "2+")}

    def coverage(self, top: int = 15) -> str:
        """How much the programs were captured, and the most frequent graph-break reasons."""
        lines = ["top graph-break / fallback reasons (frames, programs):"]
        for reason, n in self.breaks.most_common(top):
            lines.append(f"  {n:6d} {self.break_programs[reason]:6d}  {reason}")
        return "\n".join(lines)

    def report(self) -> str:
        lines = [f"programs:        {self.programs}",
                 f"mismatches:      {self.count('mismatch')}",
                 f"crashes:         {self.count('crash')}",
                 f"hangs:           {self.count('hang')}",
                 f"internal errors: {self.count('internal-error')}",
                 f"harness errors:  {self.count('harness')}",
                 f"seconds:         {self.seconds:.1f}",
                 f"failures by category: {dict(sorted((c, n) for c, n in self.categories.items() if c))}",
                 f"frames (all calls): {dict(sorted(self.statuses.items()))}",
                 f"programs whose eager run raises: {sum(n for e, n in self.eager_errors.items() if e)} "
                 f"{dict(sorted((e, n) for e, n in self.eager_errors.items() if e))}",
                 f"programs by graphs captured (all calls): {self.graph_buckets()}"]
        for f in self.failures:
            lines.append(f"FAIL program {f.program} [{f.verdict.category}] {f.verdict.message.splitlines()[0][:300]}"
                         + (f"\n     saved as {f.saved}" if f.saved else ""))
        return "\n".join(lines)


def run_programs(seeds: list[int], *, jobs: int = 2, backend: str = "eager", device: str = "cpu",
                 timeout: float = 60.0, env: Optional[dict] = None,
                 progress: Optional[Callable[[int, int], None]] = None, style: str = "tensor") -> Summary:
    """Run the programs `generate(s, style) for s in seeds` in `jobs` worker processes."""
    summary = Summary()
    lock = threading.Lock()
    todo = iter(seeds)
    start = time.monotonic()

    def work():
        with Worker(env=env) as worker:
            while True:
                with lock:
                    s = next(todo, None)
                if s is None:
                    return
                try:
                    source = generate(s, style)
                except Exception as e:  # noqa: BLE001 -- a bug of the generator: counted, not fatal
                    source, verdict = "", Verdict("harness", f"generate({s}) failed: {type(e).__name__}: {e}")
                else:
                    verdict = worker.run(source, f"<fuzz-{s}>", backend=backend, device=device, timeout=timeout)
                with lock:
                    summary.programs += 1
                    summary.categories[verdict.category] += 1
                    summary.eager_errors[verdict.eager_error] += 1
                    summary.statuses.update(verdict.statuses)
                    if verdict.category not in ("crash", "hang", "harness"):
                        summary.graphs["0 (ran eagerly)" if not verdict.graphs else "1" if verdict.graphs == 1 else "2+"] += 1
                    summary.breaks.update(verdict.breaks)
                    summary.break_programs.update(verdict.breaks.keys())
                    if not verdict.ok:
                        summary.failures.append(Failure(s, verdict, source))
                    if progress:
                        progress(summary.programs, len(summary.failures))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary.seconds = time.monotonic() - start
    summary.failures.sort(key=lambda f: f.program)
    return summary


def shrink_failure(failure: Failure, worker: Worker, *, backend: str = "eager", device: str = "cpu",
                   timeout: float = 60.0, max_tries: int = 400, max_seconds: float = 240.0,
                   log: Optional[Callable[[str], None]] = None) -> str:
    """The smallest program failing with the same signature as `failure`."""
    want = signature(failure.verdict.category, failure.verdict.message)
    tries = max_tries if failure.verdict.category not in ("crash", "hang") else max_tries // 4

    def still_fails(source: str) -> bool:
        v = worker.run(source, f"<fuzz-{failure.program}-shrink>", backend=backend, device=device,
                       timeout=min(timeout, 20.0))
        return signature(v.category, v.message) == want

    failure.shrunk = shrink(failure.source, still_fails, max_tries=tries, max_seconds=max_seconds, log=log)
    return failure.shrunk


def save_regression(failure: Failure, seed: Optional[int], directory: Path = REGRESSIONS_DIR,
                    style: str = "tensor", backend: str = "eager") -> Optional[Path]:
    """Write the shrunk program as a regression file, unless the same program is saved already;
    a program that failed with another backend than eager replays with it (`# backend:`)."""
    body = failure.shrunk or failure.source
    digest = hashlib.sha1(body.encode()).hexdigest()[:10]
    directory.mkdir(parents=True, exist_ok=True)
    for existing in directory.glob("*.py"):
        if digest in existing.name or strip_header(existing.read_text()) == body:
            return None
    name = failure.verdict.category.replace(":", "_").replace("-", "_") + f"_{digest}.py"
    first_line = failure.verdict.message.strip().splitlines()[0] if failure.verdict.message.strip() else ""
    header = [f"# dynamo_lite fuzz regression: program {failure.program}"
              + (f" of bench/fuzz.py{' --style ' + style if style != 'tensor' else ''}"
                 f"{' --backend ' + backend if backend != 'eager' else ''} --seed {seed}"
                 if seed is not None else "")
              + f", shrunk from {len(failure.source.splitlines())} to {len(body.splitlines())} lines",
              f"# failure: {failure.verdict.category}: {first_line[:300]}",
              f"{XFAIL_MARK}open bug found by fuzzing (delete this line once fixed)"]
    if backend != "eager":
        header.append(f"# backend: {backend}")
    path = directory / name
    path.write_text("\n".join(header) + "\n" + body)
    failure.saved = path
    return path


def strip_header(text: str) -> str:
    """A regression file's program, without the leading comment lines written by save_regression."""
    lines = text.splitlines(True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def header(text: str) -> dict:
    """The `# key: value` lines at the top of a regression file (failure, xfail, backend...)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].partition(":")
        if sep and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def xfail_reason(text: str) -> Optional[str]:
    return header(text).get("xfail")


def distinct(failures: list[Failure]) -> list[Failure]:
    """One failure per signature and first message line shape (for shrinking a manageable set)."""
    seen, out = set(), []
    for f in failures:
        key = signature(f.verdict.category, f.verdict.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out


def seeds_for(seed: int, n: int, start: int = 0) -> list[int]:
    return [program_seed(seed, i) for i in itertools.islice(itertools.count(start), n)]
