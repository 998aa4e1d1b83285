"""Questions about the process that the trace answers once and a guard asks again on every call
(guards.QueryMatch): `os.getenv` with constant arguments, torch.distributed's state. Differential:
each answer changing between calls must recapture, never reuse a graph made for the old answer."""
import os

import pytest
import torch
import torch.distributed as dist

import dynamo_lite as dl
from harness import CountingBackend, call_both, check, reset


def flag_check(cond):
    # transformers' torch_compilable_check starts like this
    if os.getenv("DL_TEST_DISABLE_CHECK", "0") == "1":
        return None
    return cond


def uses_getenv(x):
    y = x + 1
    flag_check(y)
    scale = 2 if os.getenv("DL_TEST_SCALE") else 3
    return y * scale


def test_getenv_is_folded_into_one_graph(monkeypatch):
    monkeypatch.delenv("DL_TEST_SCALE", raising=False)
    check(uses_getenv, torch.randn(3), graphs=1)


def test_a_changed_environment_variable_recaptures(monkeypatch):
    monkeypatch.delenv("DL_TEST_SCALE", raising=False)
    reset()
    backend = CountingBackend()
    captured = dl.capture(uses_getenv, backend=backend)
    x = torch.randn(3)
    call_both(uses_getenv, captured, (x,), {}, "unset")
    monkeypatch.setenv("DL_TEST_SCALE", "1")
    call_both(uses_getenv, captured, (x,), {}, "set: another scale")
    assert backend.count == 2
    monkeypatch.setenv("DL_TEST_DISABLE_CHECK", "1")
    call_both(uses_getenv, captured, (x,), {}, "the check disabled")
    assert backend.count == 3


@pytest.fixture
def single_process_group_later(tmp_path):
    """A function that starts a one-process gloo group (torn down after the test)."""
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")

    def start():
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def two_queries(x):
    from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices
    devices = _get_foreach_kernels_supported_devices()
    if dist.is_initialized():
        return x + len(devices)
    return x - 1


def test_each_query_keeps_its_own_guard(single_process_group_later):
    """Two queries in one trace: both answers are guarded (the second's guard was once dropped as
    a duplicate of the first's, and the graph for `is_initialized() == False` was reused after
    the process group started: a wrong result)."""
    reset()
    backend = CountingBackend()
    captured = dl.capture(two_queries, backend=backend)
    x = torch.zeros(2)
    call_both(two_queries, captured, (x,), {}, "no process group")
    single_process_group_later()
    call_both(two_queries, captured, (x,), {}, "a process group")
    assert backend.count == 2
