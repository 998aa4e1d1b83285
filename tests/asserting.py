"""Functions with `assert` statements on tensor values, for test_capture_library_modules.

They live outside the test modules because pytest rewrites the `assert`s of test modules into
other bytecode; these keep CPython's own `assert` code, which is what the tracer sees in users'
programs."""
import torch


def assert_not(x, t):
    assert not torch.isnan(x).any(), "NaN in input"
    return x * 2


def assert_and(x, t):
    assert (t >= 0).all() and (t < 3).all()
    return x + t


def assert_or(x, t):
    assert (t < 0).all() or (t < 3).all(), ("tuple", "message")
    return x - t


def assert_ambiguous(x, t):
    assert x > 0                             # more than one element: bool() raises, as in eager
    return x


def assert_positive(x):
    assert (x > 0).all()
    return x + 1
