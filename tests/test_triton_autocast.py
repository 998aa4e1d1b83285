"""Mixed-precision graphs through the triton backend, against eager autocast.

Graphs that switch autocast on or off (`runtime.enter_autocast` / `exit_autocast` nodes) are
lowered: tracing to aten runs the switches, so the casts autocast inserts become explicit
`_to_copy` ops of the aten graph (forward, and AOTAutograd's backward). Compared with eager
autocast: outputs (values and dtypes), losses, gradients, parameters and optimizer state after
several steps, and the autocast state after each call; every graph must be lowered
(`fallback_reason is None`). Autocast on the CPU under Triton's interpreter where there is no GPU
(bf16 there: the interpreter rounds bf16 by truncation, hence the tolerances).
"""
import copy

import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; an autouse fixture)

pytest.importorskip("triton")

import torch.nn as nn                                      # noqa: E402
import torch.nn.functional as F                            # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.backends.triton import backend as triton_backend_module   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")

BF16 = torch.bfloat16


def lowered():
    graphs = list(triton_backend_module.recent)
    assert graphs and all(g.fallback_reason is None for g in graphs), [g.fallback_reason for g in graphs]
    return graphs


def autocast_state():
    return torch.is_autocast_enabled(DEVICE), torch.get_autocast_dtype(DEVICE)


def rel_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    return ((got.float() - expected.float()).norm() / expected.float().norm().clamp_min(1e-12)).item()


def assert_close_bf16(got, expected, what):
    assert got.dtype == expected.dtype, f"{what}: {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, what
    assert rel_error(got, expected) < 3e-2, f"{what}: relative error {rel_error(got, expected)}"


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 16), nn.ReLU(),
                         nn.Linear(16, 4)).to(DEVICE)


def test_autocast_block_forward_is_lowered():
    net = model()

    def fn(x):
        with torch.autocast(DEVICE, dtype=BF16):
            h = net(x)
            p = h.softmax(-1)
        return h, p, h.float() * 2 + 1          # the last op runs after the block: fp32

    x = torch.randn(6, 8, device=DEVICE)
    before = autocast_state()
    with torch.no_grad():
        expected = fn(x)
        got = dl.capture(fn, backend="triton")(x)
    assert autocast_state() == before
    for i, (g, e) in enumerate(zip(got, expected)):
        assert_close_bf16(g, e, f"output {i}")
    (graph,) = lowered()
    assert graph.kernel_count > 0
    assert "autocast" not in graph.wrapper_source


def training_step(net, x, y):
    with torch.autocast(DEVICE, dtype=BF16):
        out = net(x)
        loss = F.cross_entropy(out, y)
    loss.backward()
    return loss


def test_autocast_training_step_gradients_match_eager():
    """Forward and backward both lowered. A weight cast to bf16 and transposed for the matmul is
    saved for the backward: the forward must hand it over in eager's strides (the backward graph
    indexes it with those; stored transposed, every gradient before the last layer was wrong)."""
    net = model()
    reference = copy.deepcopy(net)
    x = torch.randn(6, 8, device=DEVICE)
    y = torch.randint(0, 4, (6,), device=DEVICE)
    step = dl.capture(training_step, backend="triton")
    loss = step(net, x, y)
    expected = training_step(reference, x, y)
    assert loss.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(loss, expected, rtol=2e-2, atol=2e-2)
    for (name, p), q in zip(net.named_parameters(), reference.parameters()):
        assert p.grad.dtype == torch.float32
        assert rel_error(p.grad, q.grad) < 5e-2, f"grad of {name}: relative error {rel_error(p.grad, q.grad)}"
    graphs = lowered()
    assert len(graphs) == 3                  # AOTAutograd's forward, backward, and both
    assert "aten._to_copy.default" not in graphs[1].extern_ops   # the casts are kernels


def test_output_of_a_saved_transposed_cast_has_eager_strides():
    """The same hazard on its own: a graph output that is a view of a value an extern call made us
    store (the matmul reads the cast weight transposed) comes back in eager's layout."""
    def fn(w, x):
        wt = w.to(BF16).t()
        return x.to(BF16) @ wt, wt

    w, x = torch.randn(16, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE)
    expected = fn(w, x)
    got = dl.capture(fn, backend="triton")(w, x)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert_close_bf16(g, e, f"output {i}")
        assert g.stride() == e.stride(), f"output {i}: strides {g.stride()} != {e.stride()}"
    lowered()


@pytest.mark.parametrize("opt_class", [torch.optim.AdamW, torch.optim.SGD])
def test_mixed_precision_training_with_an_optimizer_matches_eager(opt_class):
    """The whole step of bench/models_gpu.py's training rows (autocast forward and loss, backward,
    foreach optimizer step), three times: loss, parameters and optimizer state against eager."""
    net = model()
    reference = copy.deepcopy(net)
    options = dict(lr=1e-2, foreach=True) if opt_class is torch.optim.AdamW else dict(lr=1e-2, momentum=0.9,
                                                                                      foreach=True)
    opt, ref_opt = opt_class(net.parameters(), **options), opt_class(reference.parameters(), **options)

    def step(net, opt, x, y):
        opt.zero_grad()
        loss = training_step(net, x, y)
        opt.step()
        return loss

    compiled = dl.capture(step, backend="triton")
    before = autocast_state()
    for i in range(3):
        x = torch.randn(6, 8, device=DEVICE)
        y = torch.randint(0, 4, (6,), device=DEVICE)
        torch.testing.assert_close(compiled(net, opt, x, y), step(reference, ref_opt, x, y), rtol=3e-2, atol=3e-2)
        assert autocast_state() == before
    for (name, p), q in zip(net.named_parameters(), reference.parameters()):
        assert rel_error(p, q) < 2e-2, f"{name} after 3 steps: relative error {rel_error(p, q)}"
        for key, value in ref_opt.state[q].items():
            got = opt.state[p][key]
            if value.dim() == 0:
                assert got.item() == value.item(), f"{name}: state {key}"
            else:
                assert rel_error(got, value) < 5e-2, f"{name}: state {key}: {rel_error(got, value)}"
    lowered()
