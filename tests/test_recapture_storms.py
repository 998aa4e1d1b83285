"""Guards on what matters: a value built afresh on each call (a partial, a closure, a lambda, a
bound method, a copied config) is guarded by what it is made of, never by identity, so calling
with a new one reuses the graph; and a code object that keeps recapturing for the same reason
gets one warning naming it and the guard that keeps failing."""
from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch

import dynamo_lite as dl
from harness import CountingBackend


@pytest.fixture(autouse=True)
def fresh():
    dl.reset()
    yield
    dl.reset()


def apply(x, fn):
    return fn(x) * 2


def run_calls(make_fn, calls=20):
    """Call `apply` captured with a fresh `fn` each time; compare with eager; return the backend."""
    backend = CountingBackend()
    captured = dl.capture(apply, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(calls):
            x = torch.randn(4)
            fn = make_fn()
            torch.testing.assert_close(captured(x, fn), apply(x, fn))
    assert not [w for w in caught if "dynamo_lite" in str(w.message)]
    return backend


def scale(t, factor, *, shift=0.0):
    return t * factor + shift


def test_a_fresh_partial_per_call_is_captured_once():
    assert run_calls(lambda: functools.partial(scale, factor=3.0, shift=1.0)).count == 1


def test_a_fresh_partial_of_a_torch_function_per_call_is_captured_once():
    assert run_calls(lambda: functools.partial(torch.clamp, min=-0.5, max=0.5)).count == 1


def _make_closure(k):
    def inner(t):
        return t * k + 1
    return inner


def test_a_fresh_closure_per_call_is_captured_once():
    assert run_calls(lambda: _make_closure(2.0)).count == 1


def test_a_fresh_lambda_per_call_is_captured_once():
    assert run_calls(lambda: (lambda t: torch.sin(t) + 1)).count == 1


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, t):
        return t * self.factor

    def scaled(self, t):
        return t * self.factor + 1


def test_a_fresh_bound_method_per_call_is_captured_once():
    assert run_calls(lambda: Scaler(3.0).scaled).count == 1


def test_a_copied_config_per_call_is_captured_once():
    config = Scaler(2.0)
    assert run_calls(lambda: copy.deepcopy(config)).count == 1


def test_what_the_function_is_made_of_is_still_guarded():
    """A closure over another value, a partial with other arguments: recaptured, never reused."""
    backend = CountingBackend()
    captured = dl.capture(apply, backend=backend)
    x = torch.randn(4)
    for k in (2.0, 3.0):
        torch.testing.assert_close(captured(x, _make_closure(k)), apply(x, _make_closure(k)))
    for factor in (2.0, 5.0):
        fn = functools.partial(scale, factor=factor)
        torch.testing.assert_close(captured(x, fn), apply(x, fn))
    other = lambda t: torch.cos(t)       # noqa: E731  another code object
    torch.testing.assert_close(captured(x, other), apply(x, other))
    assert backend.count == 5


class _Cache:
    """A fresh state object per call (transformers' DynamicCache is built by each generate())."""
    def __init__(self):
        self.layers = []


def _update(x, cache=None):
    if cache is None:
        cache = _Cache()
    if cache is not None and len(cache.layers) == 0:
        cache.layers.append(x)
    return x * len(cache.layers), cache is not None


def test_a_fresh_object_tested_with_is_none_is_captured_once():
    """`cache is None` is decided by the value's guarded type: testing it pins no identity."""
    backend = CountingBackend()
    captured = dl.capture(_update, backend=backend)
    for _ in range(20):
        x = torch.randn(4)
        got, expected = captured(x, _Cache()), _update(x, _Cache())
        torch.testing.assert_close(got, expected)
    assert backend.count == 1
    torch.testing.assert_close(captured(x), _update(x))          # None itself: another graph
    assert backend.count == 2


def test_a_function_with_attributes_is_guarded_by_identity():
    def tagged():
        def fn(t):
            return t + 1
        fn.tag = "x"
        return fn
    assert run_calls(tagged, calls=3).count == 3


def test_a_recapture_storm_warns_once_naming_the_guard():
    def f(x, n):
        return x * len(n)       # a str is guarded by value (an int would become a graph input)

    captured = dl.capture(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(7):
            captured(torch.randn(3), "a" * n)
    storms = [str(w.message) for w in caught if "keeps being recaptured" in str(w.message)]
    assert len(storms) == 1, storms
    assert "n changed: 'a" in storms[0] and "test_recapture_storms.py" in storms[0]


def _decorate(fn):
    """A decorator whose wrapper code is shared by every function it wraps (transformers' output
    decorators on each model class's forward): the wrapper's closure is a different object each."""
    def wrapper(x):
        return fn(x) + 1
    return wrapper


def test_one_wrapper_code_serving_several_live_functions_is_no_storm():
    backend = CountingBackend()
    def scaled(k):
        def forward(x):
            return x * k
        forward.tag = k                   # (a function with attributes is guarded by identity)
        return forward
    fns = [_decorate(scaled(k)) for k in range(5)]     # all alive while called
    captured = [dl.capture(f, backend=backend) for f in fns]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for f, c in zip(fns, captured):
                x = torch.randn(3)
                torch.testing.assert_close(c(x), f(x))
    assert not [str(w.message) for w in caught if "keeps being recaptured" in str(w.message)]
    assert backend.count == 5                                    # a graph per function, reused the second time
