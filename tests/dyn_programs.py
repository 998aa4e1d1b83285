"""Helpers for the test files that port TorchDynamo's own test programs (issue 12):
test_python_classes.py, test_python_collections.py, test_python_iteration.py,
test_numpy_on_tensors.py.

`standard(fn, nargs)` is TorchDynamo's `standard_test`: `nargs` fresh 10x10 tensors, then new
ones of the same shape; every call must match eager, the first captures `graphs` graph(s), the
later ones reuse them.

`open_issue(kind, construct)` marks a program dynamo_lite does not handle yet.  Under dynamo_lite
it is a strict xfail, so it fails loudly (XPASS) once the engine learns the construct; in
reference mode (TorchDynamo) it is no mark at all: the expectation itself must hold there.
Kinds (the notes in /work/notes/dynamo_programs.md count them):

* ``wrong``  -- dynamo_lite returns a wrong value or leaves wrong state behind (top priority);
* ``crash``  -- dynamo_lite raises where eager returns (or the reverse);
* ``graphs`` -- more graphs than TorchDynamo (graph breaks);
* ``eager``  -- no graph at all: the frame runs eagerly where TorchDynamo captures it.
"""
from __future__ import annotations

import sys

import pytest
import torch

from harness import REFERENCE, check_calls

KINDS = ("wrong", "crash", "graphs", "eager")


def open_issue(kind: str, construct: str, python: str | None = None):
    """`python="3.11"`: the program fails on that Python version only (bytecode differs)."""
    assert kind in KINDS, kind
    applies = python is None or python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    where = f" (Python {python})" if python else ""
    return pytest.mark.xfail(not REFERENCE and applies, strict=True, reason=f"issue 12 [{kind}]{where}: {construct}")


def std_args(nargs: int, shape=(10, 10)) -> tuple:
    return tuple(torch.randn(shape) for _ in range(nargs))


def standard(fn, nargs: int, *, graphs=1, shape=(10, 10)):
    """TorchDynamo's standard_test: two sets of fresh inputs, compared with eager on every call."""
    return check_calls(fn, std_args(nargs, shape), std_args(nargs, shape), graphs=graphs)
