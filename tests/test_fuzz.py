"""Differential fuzzing in the default test run: a few hundred generated programs, fixed seed.

Each program (tests/fuzz/generator.py) runs eagerly and captured with the eager backend (and
the triton backend where it can run: a GPU, or TRITON_INTERPRET=1), three calls each, in two
worker processes; see tests/fuzz/oracle.py for what is compared. Programs that fail because of
a known, reported bug are listed in KNOWN_BUGS: the main test tolerates exactly those, and one
xfail(strict) test per bug flips to a failure once all of its programs pass. Any other failing
program fails `test_generated_programs_agree`; reproduce and shrink it with

    python bench/fuzz.py --program <number>          # show the program and its verdict
    python bench/fuzz.py --n 300 --seed 7             # the same run, failures shrunk and saved

The full run is `python bench/fuzz.py --n 10000`.

The library style (tests/fuzz/library.py: user classes with dunders, descriptors, dataclasses,
collections, itertools, generators, partials, objects mutated between calls) has its own sample
below; the bugs it found are fixed and kept as regressions (tests/regressions/library_*.py):

    python bench/fuzz.py --style library --n 120 --seed 11
"""
from __future__ import annotations

import pytest

from fuzz import driver
from fuzz.oracle import triton_runnable
from fuzz.worker import Worker

SEED = 7
PROGRAMS = 300
LIBRARY_SEED = 11
LIBRARY_PROGRAMS = 120

#: bug -> the programs of this run that fail because of it (found and shrunk with bench/fuzz.py;
#: tests/regressions/ holds the minimized programs). Bytecode differs per version, and so do the lists.
KNOWN_BUGS: dict[str, list[int]] = {}


def _known_programs() -> set[int]:
    return {p for programs in KNOWN_BUGS.values() for p in programs}


def _describe(summary: driver.Summary, unexpected: list) -> str:
    lines = [summary.report(), "", "unexpected failures (not in KNOWN_BUGS):"]
    for f in unexpected[:5]:
        lines += [f"--- program {f.program} [{f.verdict.category}] "
                  f"(python bench/fuzz.py --program {f.program})", f.verdict.message[:2000], f.source]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def eager_run() -> driver.Summary:
    return driver.run_programs(driver.seeds_for(SEED, PROGRAMS), jobs=2, timeout=120)


def test_generated_programs_agree(eager_run):
    unexpected = [f for f in eager_run.failures if f.program not in _known_programs()]
    assert not unexpected, _describe(eager_run, unexpected)
    assert eager_run.programs == PROGRAMS


def test_generated_programs_exercise_capture(eager_run):
    """The generator is useful only if most programs capture graphs (and some break)."""
    statuses = eager_run.statuses
    assert statuses.get("captured", 0) >= PROGRAMS // 2, statuses
    assert statuses.get("break", 0) >= PROGRAMS // 10, statuses
    raising = sum(n for e, n in eager_run.eager_errors.items() if e)
    assert raising <= PROGRAMS // 4, f"too many programs raise eagerly: {eager_run.eager_errors}"


@pytest.mark.parametrize("bug", [pytest.param(b, marks=pytest.mark.xfail(strict=True, reason=b)) for b in KNOWN_BUGS])
def test_known_bug_still_fails(bug, eager_run):
    failing = {f.program for f in eager_run.failures}
    still = [p for p in KNOWN_BUGS[bug] if p in failing]
    assert not still, f"programs {still} still fail"


@pytest.mark.skipif(not triton_runnable()[0], reason="triton backend needs triton and a GPU (or TRITON_INTERPRET=1)")
def test_generated_programs_agree_with_triton_backend():
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    summary = driver.run_programs(driver.seeds_for(SEED, 60), jobs=2, backend="triton", device=device, timeout=600)
    unexpected = [f for f in summary.failures if f.program not in _known_programs()]
    assert not unexpected, _describe(summary, unexpected)


@pytest.fixture(scope="module")
def library_run() -> driver.Summary:
    return driver.run_programs(driver.seeds_for(LIBRARY_SEED, LIBRARY_PROGRAMS), jobs=2, timeout=120, style="library")


def test_library_programs_agree(library_run):
    assert not library_run.failures, _describe(library_run, library_run.failures)
    assert library_run.programs == LIBRARY_PROGRAMS


def test_library_programs_are_valid_and_exercise_capture(library_run):
    """The library generator itself: its programs load and mostly run without raising, and most
    of them put something into graphs (capture, not only eager fallback)."""
    assert library_run.programs == LIBRARY_PROGRAMS
    assert not library_run.categories.get("harness"), _describe(library_run, [
        f for f in library_run.failures if f.verdict.category == "harness"])
    raising = sum(n for e, n in library_run.eager_errors.items() if e)
    assert raising <= LIBRARY_PROGRAMS // 10, f"too many programs raise eagerly: {library_run.eager_errors}"
    buckets = library_run.graph_buckets()
    assert buckets["0 (ran eagerly)"] <= LIBRARY_PROGRAMS // 4, buckets
    assert library_run.statuses.get("captured", 0) >= LIBRARY_PROGRAMS, library_run.statuses


def test_library_programs_are_deterministic():
    """Same seed, same text; and a program's text does not depend on the generator's process."""
    from fuzz import library
    assert library.generate(3) == library.generate(3)
    assert library.generate(3) != library.generate(4)
    for seed in range(40):
        compile(library.generate(seed), f"<library-{seed}>", "exec")


def test_oracle_compares_library_values():
    """What the library style relies on: objects by state (slots too, their __getattribute__ not run
    but for isinstance's `__class__`),
    sets, deques, dict views, partials, closure cells; identity of returned objects."""
    import collections
    import functools

    from fuzz.compare import Mismatch, assert_same, identity_signature
    from fuzz.oracle import load

    src = ("class S:\n    __slots__ = ('a', 'b')\n    def __init__(self, a):\n        self.a = a\n"
           "    def __getattribute__(self, name):\n        if name != '__class__':\n"
           "            raise RuntimeError('must not run')\n        return object.__getattribute__(self, name)\n"
           "def counter():\n    n = 0\n    def bump():\n        nonlocal n\n        n += 1\n        return n\n    return bump\n")
    one, two = load(src, "<one>"), load(src, "<two>")
    assert_same(one["S"](1), two["S"](1), "s")
    with pytest.raises(Mismatch):
        assert_same(one["S"](1), two["S"](2), "s")
    b1, b2 = one["counter"](), two["counter"]()
    b1()
    with pytest.raises(Mismatch):
        assert_same(b1, b2, "closure")
    b2()
    assert_same(b1, b2, "closure")
    for e, a in [({1, 2}, {1, 3}), (collections.deque([1], maxlen=2), collections.deque([1], maxlen=3)),
                 ({"a": 1}.keys(), {"b": 1}.keys()), (functools.partial(max, 1), functools.partial(max, 2)),
                 (KeyError("a"), KeyError("b"))]:
        assert_same(e, e, "same")
        with pytest.raises(Mismatch):
            assert_same(e, a, "different")
    store, obj = [], one["S"](1)
    store.append(obj)
    eager = identity_signature(obj, ((store,), {}), {})
    copy = identity_signature(two["S"](1), ((store,), {}), {})
    assert eager != copy and eager[0][2] == "in[0][0][0]"


@pytest.mark.parametrize("eager, got, tolerance, same", [
    ("s -2.7271370887756348\n", "s -2.7271366119384766\n", (1e-3, 1e-4), True),   # a sum's last bits
    ("s -2.7271370887756348\n", "s -2.7271366119384766\n", (None, None), False),  # eager backend: exact
    ("s 2.71\n", "s 2.9\n", (1e-3, 1e-4), False),
    ("n 10 of 12\n", "n 11 of 12\n", (1e-3, 1e-4), False),                     # integers exactly
    ("x 1.0 done\n", "x 1.0 done!\n", (1e-3, 1e-4), False),
    # a compiling backend's tensors name its autograd function, a long name wrapping the line
    ("tensor([0.5], grad_fn=<GeluBackward0>)\n", "tensor([0.5],\n       grad_fn=<CompiledFunctionBackward>)\n",
     (1e-3, 1e-4), True),
    ("tensor([0.5], grad_fn=<GeluBackward0>)\n", "tensor([0.5],\n       grad_fn=<CompiledFunctionBackward>)\n",
     (None, None), False),
    ("tensor([0.5], grad_fn=<GeluBackward0>)\n", "tensor([0.6], grad_fn=<CompiledFunctionBackward>)\n",
     (1e-3, 1e-4), False),
])
def test_printed_floats_compare_within_the_backends_tolerance(eager, got, tolerance, same):
    from fuzz.oracle import same_printed
    assert same_printed(eager, got, *tolerance) is same


def test_autograd_errors_compare_modulo_the_compiled_functions_name():
    from fuzz.oracle import same_message
    eager = "Output 0 of Unbind is a view and is being modified inplace. Use clone."
    got = "Output 0 of CompiledFunction is a view and is being modified inplace. Use clone."
    assert same_message(eager, got, 1e-3)
    assert not same_message(eager, got, None)                      # the eager backend: exactly
    assert not same_message(eager, got.replace("Output 0", "Output 1"), 1e-3)


def test_worker_reports_crashes_and_hangs():
    """The harness itself: a program that kills its process is a 'crash', one that never
    returns a 'hang', and the worker carries on afterwards."""
    crash = ("import os, signal\ndef make_target():\n    return lambda: os.kill(os.getpid(), signal.SIGSEGV)\n"
             "def make_inputs(seed, device='cpu'):\n    return (), {}\n")
    hang = ("import time\ndef make_target():\n    return lambda: time.sleep(60)\n"
            "def make_inputs(seed, device='cpu'):\n    return (), {}\n")
    ok = ("import torch\ndef f(x):\n    return x + 1\ndef make_target():\n    return f\n"
          "def make_inputs(seed, device='cpu'):\n    return (torch.ones(2),), {}\n")
    with Worker() as worker:
        assert worker.run(crash).category == "crash"
        assert worker.run(hang, timeout=3).category == "hang"
        assert worker.run(ok).ok


def test_a_saved_regression_replays_with_the_backend_that_failed(tmp_path):
    """A failure found with `--backend triton` is saved with `# backend: triton` (and says so in
    its command line): replayed with the default eager backend it would pass and prove nothing."""
    from fuzz.oracle import Verdict
    failure = driver.Failure(program=7, verdict=Verdict(category="mismatch:value", message="result[0] differs"),
                             source="import torch\n\ndef f(x):\n    return x\n")
    for backend in ("triton", "eager"):
        (tmp_path / backend).mkdir()
        path = driver.save_regression(failure, 11, tmp_path / backend, backend=backend)
        info = driver.header(path.read_text())
        assert info.get("backend", "eager") == backend and "xfail" in info
        assert ("--backend triton" in path.read_text().splitlines()[0]) == (backend == "triton")
        assert driver.strip_header(path.read_text()) == failure.source
