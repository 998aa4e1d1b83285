"""Graph breaks inside `with` blocks of any context manager resume.

A break inside the `with` block of a context manager the trace cannot hand on (a generator-based
@contextmanager suspended at its yield, an object made in the captured code) moves to the `with`
statement (breaks.WITH_ENTERED_FOR_REAL): the statement runs as Python, and the block's body
resumes in a function handed the real `__exit__`, whose handler takes exceptions like a try
block's. A context manager from outside (an argument, a global lock) is entered for real the same
way. TorchDynamo runs such frames eagerly.

Every test is differential (harness.check: values, exceptions, printed output, mutated inputs —
here the log the context managers write —, graph counts, and a second call capturing nothing new).
"""
import contextlib
import threading

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite import breaks
from dynamo_lite.fallback.records import RECORDS
from harness import Graphs, check

WHY = "dynamo_lite resumes after a break inside any `with` block; TorchDynamo runs the frame eagerly"


@pytest.fixture(autouse=True)
def every_stretch_to_the_backend(monkeypatch):
    monkeypatch.setattr(dl.config, "loop_single_ops_as_is", False)


def graphs(n: int) -> Graphs:
    return Graphs(dl=n, torch=None, why=WHY)


@contextlib.contextmanager
def logged(log, tag, suppress=()):
    log.append(("enter", tag))
    try:
        yield len(log)
    except suppress as e:
        log.append(("suppressed", type(e).__name__))
    finally:
        log.append(("exit", tag))


class Logged:
    def __init__(self, log, suppress=False):
        self.log, self.suppress = log, suppress

    def __enter__(self):
        self.log.append("enter")
        return 3

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind.__name__ if kind else None))
        return self.suppress


@dl.disable
def fails(y):
    """A break (a disabled function) that raises."""
    raise ValueError(f"bad {y.shape[0]}")


def generator_cm(x, log):
    y = x + 1
    with logged(log, "g") as k:
        y = y * k
        print("inside", k)
        y = y - 1
    return y.sin()


def class_cm(x, log):
    y = x + 1
    with Logged(log) as k:
        y = y * k
        print("inside")
        y = y - 1
    return y.cos()


def cm_from_outside(x, cm):
    y = x * 2
    with cm as k:
        y = y + k
        print("outside cm")
        y = y * 3
    return y


_LOCK = threading.Lock()


def global_lock(x):
    with _LOCK:
        y = x * 2
        print("locked", _LOCK.locked())
        y = y + 1
    return y, _LOCK.locked()


def break_raises_and_is_suppressed(x, log):
    y = x + 1
    with logged(log, "s", suppress=ValueError):
        y = y * 2
        fails(y)
        y = y - 100
    return y + 1


def break_raises_through(x, log):
    y = x + 1
    with logged(log, "r"):
        y = y * 2
        fails(y)
    return y


def resumed_code_raises(x, log, n):
    y = x + 1
    with Logged(log, suppress=n > 1):
        y = y * 2
        print("p")
        if n > 0:
            raise KeyError(n)
        y = y - 100
    return y + 1


def loops_inside(x, log, n):
    y = x + 1
    with logged(log, "L"):
        for i in range(n):
            y = y * 2
            print("for", i)
            y = y - 1
        j = 0
        while j < n:
            y = y + 1
            print("while", j)
            j += 1
    return y


def inside_a_loop(x, log, n):
    y = x + 1
    for i in range(n):
        with logged(log, i):
            y = y * 2
            print("it", i)
            y = y - 1
    return y


def grad_mode_around(x, log):
    y = x + 1
    with torch.no_grad():
        with logged(log, "in"):
            y = y * 2
            print("n", torch.is_grad_enabled())
            y = y - 1
        z = y * 2
    return y, z, torch.is_grad_enabled()


def grad_mode_around_raising(x, log):
    with torch.no_grad():
        with logged(log, "in", suppress=ValueError):
            y = x * 2
            fails(y)
        grad = torch.is_grad_enabled()
    return y, grad, torch.is_grad_enabled()


def grad_mode_inside(x, log):
    y = x + 1
    with logged(log, "out"):
        with torch.no_grad():
            y = y * 3
            print("m", torch.is_grad_enabled())
            y = y + 1
    return y, torch.is_grad_enabled()


def nested_generic(x, log):
    y = x + 1
    with logged(log, "a"):
        y = y * 2
        with Logged(log) as k:
            y = y + k
            print("deep")
            y = y * 2
        y = y - 1
    return y


def x4():
    return torch.randn(4, requires_grad=False)


CASES = [
    (generator_cm, lambda: (x4(), []), 4),
    (class_cm, lambda: (x4(), []), 3),
    (cm_from_outside, lambda: (x4(), Logged([])), 3),
    (global_lock, lambda: (x4(),), 2),
    (break_raises_and_is_suppressed, lambda: (x4(), []), 2),
    (break_raises_through, lambda: (x4(), []), 2),
    (resumed_code_raises, lambda: (x4(), [], 0), 3),
    (resumed_code_raises, lambda: (x4(), [], 1), 2),
    (resumed_code_raises, lambda: (x4(), [], 2), 3),
    (loops_inside, lambda: (x4(), [], 3), 8),
    (inside_a_loop, lambda: (x4(), [], 3), 4),
    (grad_mode_around, lambda: (torch.randn(4, requires_grad=True), []), 4),
    (grad_mode_around_raising, lambda: (torch.randn(4, requires_grad=True), []), 2),
    (grad_mode_inside, lambda: (torch.randn(4, requires_grad=True), []), 3),
    (nested_generic, lambda: (x4(), []), 4),
]


@pytest.mark.parametrize("fn, make_args, count", CASES,
                         ids=[f"{fn.__name__}-{i}" for i, (fn, _, _) in enumerate(CASES)])
def test_with_block_shapes(fn, make_args, count):
    check(fn, *make_args(), graphs=graphs(count) if count is not None else None)


@pytest.mark.parametrize("fn, make_args", [(generator_cm, lambda: (x4(), [])), (class_cm, lambda: (x4(), [])),
                                           (loops_inside, lambda: (x4(), [], 3)),
                                           (inside_a_loop, lambda: (x4(), [], 3)),
                                           (grad_mode_around, lambda: (torch.randn(4, requires_grad=True), [])),
                                           (nested_generic, lambda: (x4(), []))])
def test_no_frame_runs_eagerly_and_the_with_statement_is_the_reported_break(fn, make_args):
    dl.reset()
    RECORDS.clear()
    dl.capture(fn)(*make_args())
    assert not [r for r in RECORDS if r.status in ("fallback", "error")], \
        [(r.name, r.kind, r.detail, r.fallback_kind, r.fallback_reason) for r in RECORDS if r.status != "captured"]
    moved = [r for r in RECORDS if r.kind is breaks.WITH_ENTERED_FOR_REAL]
    assert moved and all(r.status == "break" for r in moved)
    assert all("at line" in r.detail for r in moved)       # names the break inside the block


def test_fullgraph_still_raises_at_the_break():
    dl.reset()
    with pytest.raises(dl.GraphBreakError, match="DL005"):
        dl.capture(generator_cm, fullgraph=True)(x4(), [])
