"""`torch.autocast` blocks inside captured code: entering and leaving them are graph nodes, the
ops inside are traced (and run) under the block's state, and the state after a call is what
eager leaves, also when the graph raises inside a block. Compared with eager: values, dtypes,
and the autocast state afterwards."""
import contextlib

import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl

from dynamo_lite.runtime import autocast_nesting
from harness import CountingBackend, Graphs, assert_same, capture, check, reset

_LINEAR = nn.Linear(4, 4)


def autocast_state():
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_autocast_cache_enabled(),
            autocast_nesting())


def bf16_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _LINEAR(x)                         # bfloat16 inside the block
        inside = torch.is_autocast_enabled("cpu")
    return y, y.float() + 1, inside


def disabled_inside_outer(x):
    """transformers' maybe_autocast(enabled=False) inside a model run under autocast."""
    with torch.autocast("cpu", enabled=False):
        y = x.float() @ x.float().t()          # float32 even under the caller's autocast
    return y, _LINEAR(x)


def nested_blocks(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = _LINEAR(x)
        with torch.autocast("cpu", enabled=False):
            b = _LINEAR(x)
        c = _LINEAR(x)
    return a, b, c


def amp_namespace(x):
    with torch.amp.autocast(device_type="cpu", dtype=torch.bfloat16, cache_enabled=False):
        return _LINEAR(x) * 2


@pytest.mark.parametrize("fn", [bf16_block, nested_blocks, amp_namespace])
def test_autocast_block_is_one_graph(fn):
    before = autocast_state()
    check(fn, torch.randn(3, 4), graphs=1, atol=1e-2, rtol=1e-2)
    assert autocast_state() == before


def test_autocast_disabled_inside_a_callers_autocast():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = autocast_state()
        check(disabled_inside_outer, torch.randn(3, 4), graphs=1, atol=1e-2, rtol=1e-2)
        assert autocast_state() == before


def test_autocast_dtype_of_the_caller_is_guarded():
    reset()
    backend = CountingBackend()
    compiled = capture(disabled_inside_outer, backend=backend)
    x = torch.randn(3, 4)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            expected, got = disabled_inside_outer(x), compiled(x)
        assert_same(expected, got, atol=1e-2, rtol=1e-2)
        assert got[1].dtype == dtype
    assert backend.count == 2


def fails_inside_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _LINEAR(x)
        return torch.full((2, 3), 2) @ y           # int64 @ bfloat16: raises on real data only


def test_graph_failing_inside_an_autocast_block_restores_the_state():
    before = autocast_state()
    reset()
    for run in (fails_inside_block, capture(fails_inside_block, backend=CountingBackend())):
        with pytest.raises(RuntimeError):
            run(torch.randn(3, 4))
        assert autocast_state() == before


def caught_inside(x, d):
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = _LINEAR(x)
            y = y + d["missing"]               # KeyError leaves the block through its __exit__
    except KeyError:
        y = _LINEAR(x)
    return y, torch.is_autocast_enabled("cpu")


def test_exception_leaving_an_autocast_block_is_caught_in_one_graph():
    before = autocast_state()
    check(caught_inside, torch.randn(3, 4), {}, graphs=Graphs(dl=1, torch=None, why="TorchDynamo breaks on the try"))
    assert autocast_state() == before


def print_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _LINEAR(x)
        print("dtype", y.dtype)
    return y


def item_inside_nested(x):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = _LINEAR(x)
            scale = y.float().abs().max().item()      # a break two blocks deep
            z = _LINEAR(x) * scale
        w = _LINEAR(x)
    return y, z, w


def _fail(y):
    raise ValueError("inside the block")


def raises_at_break_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _LINEAR(x)
        dl.disable(_fail)(y)                    # the break's own call raises: the block must be left
    return y


@pytest.mark.parametrize("fn", [print_inside, item_inside_nested])
def test_break_inside_an_autocast_block_resumes_inside_it(fn):
    before = autocast_state()
    with contextlib.redirect_stdout(None):
        check(fn, torch.randn(3, 4), graphs=2, atol=1e-2, rtol=1e-2)
    assert autocast_state() == before


def test_exception_at_a_break_inside_an_autocast_block_leaves_the_block():
    before = autocast_state()
    reset()
    for run in (raises_at_break_inside, capture(raises_at_break_inside, backend=CountingBackend())):
        with pytest.raises(ValueError, match="inside the block"):
            run(torch.randn(3, 4))
        assert autocast_state() == before
        assert torch.is_grad_enabled()


def test_hf_llama_under_autocast_is_one_graph():
    pytest.importorskip("transformers")
    from dynamo_lite.report.registry import get, load_all
    load_all()
    example = get("hf_llama").build()
    with torch.autocast("cpu", dtype=torch.bfloat16), contextlib.redirect_stdout(None):
        result = check(example.model, *example.args, graphs=1, atol=5e-2, rtol=5e-2, **example.kwargs)
    assert result.backend.count == 1


def retracing_backend(gm, example_inputs):
    """What a compiling backend (inductor) does first: retrace the graph to aten ops with make_fx.
    The autocast casts are baked in, and the enter/exit switches run at compile time only."""
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(gm)(*example_inputs).forward


@pytest.mark.parametrize("fn", [bf16_block, print_inside])
def test_autocast_state_is_right_under_a_backend_that_compiles_the_switches_away(fn):
    before = autocast_state()
    x = torch.randn(3, 4)
    with contextlib.redirect_stdout(None):
        expected = fn(x)
        reset()
        got = capture(fn, backend=retracing_backend)(x)
        assert autocast_state() == before
        again = capture(fn, backend=retracing_backend)(x)
    for value in (got, again):
        assert_same(expected, value, atol=1e-2, rtol=1e-2)
    assert autocast_state() == before
