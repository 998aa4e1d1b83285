"""Threads: captured code called concurrently gives the right results and never crashes, and
capture switched on in one thread does not intercept frames of another.

The hook's callback is per thread (a TSS slot in _evalframe.c); the per-code cache in co_extra
and the Python-side records are shared. Each `case_*` runs in a child process (see
test_crash_safety.py), so a crash fails one test. Threads switch often (sys.setswitchinterval)
to interleave guard checks, captures, cache-entry removal and reset() as much as possible.
"""
from __future__ import annotations

import contextlib
import linecache
import sys
import threading
import time
import warnings

import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite import _evalframe
from dynamo_lite.convert_frame import TOUCHED_CODES
from dynamo_lite.fallback import records

from fuzz.oracle import INTERNAL_ERROR
from fuzz.worker import Worker, isolated_cases

THREADS = 8


@contextlib.contextmanager
def _busy_switching():
    """Switch threads every few microseconds; no internal errors may be hidden meanwhile."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    dl.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            sys.setswitchinterval(old)
    internal = [str(w.message) for w in caught if str(w.message).startswith(INTERNAL_ERROR)]
    internal += [r.detail for r in records.RECORDS if r.status == "error"]
    assert not internal, internal[0]
    assert _evalframe.stats()["active_threads"] == 0, "the hook stayed installed after all threads ended"


def _run_threads(work, n: int = THREADS) -> None:
    """Run work(thread_index) in n threads started together; re-raise the first failure."""
    errors: list = []
    barrier = threading.Barrier(n)

    def target(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a thread did not finish within 300 s (deadlock?)"
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------------------------------
# functions under test
# ---------------------------------------------------------------------------------------------

def _loop_fn(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    return y.sum(0), n


def _breaking_fn(x, scale):
    y = torch.tanh(x) * scale
    if y.sum() > 0:                       # data-dependent: a graph break
        y = y - y.mean().item()
    return y


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        return torch.relu(self.lin(x)) + 1


def _applies(x, fn):
    return fn(x) + 1


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------

def case_same_inputs_from_8_threads():
    captured = dl.capture(_loop_fn)
    x = torch.randn(3, 4)
    expected = _loop_fn(x, 3)

    def work(i):
        for _ in range(100):
            got = captured(x, 3)
            torch.testing.assert_close(got[0], expected[0])
            assert got[1] == 3

    with _busy_switching():
        _run_threads(work)


def case_racing_recaptures_from_8_threads():
    """Different shapes and ints per thread: captures race each other and the cache limit."""
    captured = dl.capture(_loop_fn)

    def work(i):
        for k in range(60):
            n = (i + k) % 5
            x = torch.randn(2 + (i + k) % 3, 4)
            got = captured(x, n)
            exp = _loop_fn(x, n)
            torch.testing.assert_close(got[0], exp[0])
            assert got[1] == n

    with _busy_switching():
        _run_threads(work)


def case_graph_breaks_from_8_threads():
    captured = dl.capture(_breaking_fn)

    def work(i):
        for k in range(40):
            x = torch.randn(5) + (i - 4)
            torch.testing.assert_close(captured(x, 0.5 + k % 2), _breaking_fn(x, 0.5 + k % 2))

    with _busy_switching():
        _run_threads(work)


def case_shared_module_from_8_threads():
    net = _Net()
    captured = dl.capture(net)

    def work(i):
        for _ in range(40):
            x = torch.randn(2 + i % 2, 4)
            with torch.no_grad():
                torch.testing.assert_close(captured(x), net.__class__.forward(net, x))

    with _busy_switching():
        _run_threads(work)


def case_dying_guarded_objects_from_8_threads():
    """Fresh closures each call: identity guards whose objects die (entries removed) while
    other threads look entries up."""
    captured = dl.capture(_applies)

    def make(k):
        def scale(t):
            return t * k
        return scale

    def work(i):
        for k in range(60):
            fn = make(k % 3)
            torch.testing.assert_close(captured(torch.ones(2), fn), torch.ones(2) * (k % 3) + 1)
            del fn

    with _busy_switching():
        _run_threads(work)


def case_reset_while_other_threads_call():
    """dl.reset() in a loop in one thread while the others call (and so recapture)."""
    captured = dl.capture(_breaking_fn)
    stop = threading.Event()

    def work(i):
        if i == 0:
            while not stop.is_set():
                dl.reset()
                time.sleep(0.001)
            return
        try:
            for k in range(40):
                x = torch.randn(3 + k % 2)
                torch.testing.assert_close(captured(x, 2.0), _breaking_fn(x, 2.0))
        finally:
            if i == 1:
                stop.set()

    with _busy_switching():
        _run_threads(work)


def case_reset_paused_mid_walk_while_another_thread_captures():
    """A thread switch inside reset(), at the worst moment, made deterministic: reset() in
    thread A is paused (by a trace function of A's own) while it walks the set of touched code
    objects; thread B captures a new function meanwhile; then A resumes. reset() must not fail."""
    def first(x):
        return x + 1

    dl.capture(first)(torch.ones(2))                       # something for reset() to walk
    paused, resume = threading.Event(), threading.Event()
    errors = []

    def pause_inside_the_walk(frame, event, arg):
        if frame.f_code.co_name != "__iter__" or not frame.f_code.co_filename.endswith("_weakrefset.py"):
            return None

        def local(frame, event, arg):
            if event == "line" and "itemref()" in linecache.getline(frame.f_code.co_filename, frame.f_lineno) \
                    and not paused.is_set():
                paused.set()
                resume.wait(30)
            return local
        return local

    def thread_a():
        sys.settrace(pause_inside_the_walk)
        try:
            dl.reset()
        except Exception as e:  # noqa: BLE001 -- the failure under test
            errors.append(e)
        finally:
            sys.settrace(None)

    def thread_b():
        assert paused.wait(30), "reset() never walked the touched code objects"

        def second(x):
            return x * 2
        try:
            torch.testing.assert_close(dl.capture(second)(torch.ones(2)), torch.full((2,), 2.0))
        finally:
            resume.set()

    a, b = threading.Thread(target=thread_a), threading.Thread(target=thread_b)
    a.start()
    b.start()
    a.join(60)
    b.join(60)
    if errors:
        raise errors[0]


def _plain(x):
    return x * 3 - 1


def case_capture_in_one_thread_does_not_intercept_another():
    """Thread A sits inside a captured function; meanwhile thread B's frames run untouched."""
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def wait_inside():
        inside.set()
        assert release.wait(60)

    def captured_body(x):
        y = x + 1
        wait_inside()                      # runs while A's capture is switched on
        return y * 2

    def thread_a():
        seen["a"] = dl.capture(captured_body)(torch.ones(2))

    def thread_b():
        assert inside.wait(60)
        seen["b_callback"] = _evalframe.get_callback()
        seen["b"] = _plain(torch.ones(2))
        release.set()

    dl.reset()
    a, b = threading.Thread(target=thread_a), threading.Thread(target=thread_b)
    a.start()
    b.start()
    a.join(60)
    b.join(60)
    torch.testing.assert_close(seen["a"], torch.full((2,), 4.0))
    torch.testing.assert_close(seen["b"], torch.full((2,), 2.0))
    assert seen["b_callback"] is None, "thread B sees thread A's capture callback"
    assert _plain.__code__ not in TOUCHED_CODES, "a frame of thread B was handed to the capture callback"
    assert all(r.name != "_plain" for r in records.RECORDS)
    assert captured_body.__code__ in TOUCHED_CODES


def _own_functions(counts: list):
    """work(i) for _run_threads: thread i captures its own closure (one code object shared by
    all threads, a different closure cell `i`) with its own counting backend."""
    def work(i):
        def backend(gm, example_inputs):
            counts[i] += 1
            return gm.forward

        def own(x):
            return x * i + torch.sin(x)

        captured = dl.capture(own, backend=backend)
        for _ in range(30):
            x = torch.randn(3)
            torch.testing.assert_close(captured(x), own(x))
    return work


def case_each_thread_captures_its_own_closure():
    with _busy_switching():
        _run_threads(_own_functions([0] * THREADS))


def case_concurrent_first_captures_keep_every_cache_entry():
    """Eight first captures of one code object at once: each thread's graph is compiled once
    (the backend contract), i.e. no capture overwrites another's cache entries."""
    for _ in range(3):
        counts = [0] * THREADS
        with _busy_switching():
            _run_threads(_own_functions(counts))
        assert all(c == 1 for c in counts), f"backend calls per thread: {counts} (each thread's graph is captured once)"


KNOWN_BUGS: dict[str, str] = {}


@pytest.fixture(scope="module")
def child():
    with Worker() as worker:
        yield worker


@pytest.mark.parametrize("case", isolated_cases(dict(globals()), KNOWN_BUGS))
def test_threads(case, child):
    verdict = child.call(__file__, case, timeout=300)
    assert verdict.ok, f"{case}: {verdict.category}\n{verdict.message}"
