"""Graphs that write into their inputs, through the triton backend, against eager.

Optimizer steps written in torch ops in place (SGD with momentum, Adam, AdamW, the `_foreach_`
forms), writes into views of inputs, swaps and shifts (a written value that reads another
written input or its own input elsewhere), batch-norm running statistics in training mode, and
the cases that must run as captured: a written input whose memory overlaps another input (at
compile time, or only on a later call) or whose elements share memory. Every test compares the
values of the outputs and of every input after several calls with eager on copies, and asserts
whether the graph was lowered. Runs under Triton's interpreter where there is no GPU.
"""
import copy

import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; an autouse fixture)

pytest.importorskip("triton")

import torch.fx                                            # noqa: E402
import torch.nn as nn                                      # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.backends.triton import backend as triton_backend_module, triton_backend   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")


def graphs():
    return list(triton_backend_module.recent)


def t(*shape):
    return torch.randn(*shape, device=DEVICE)


def clone_tree(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone_tree(v) for v in x)
    return x


def assert_same(got, expected, what):
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, msg=lambda m: f"{what}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{what}[{i}]")
    else:
        assert got == expected, what


def run_steps(fn, *args, steps=3):
    """Call eager `fn` on copies and `dl.capture(fn, backend="triton")` on `args` `steps` times;
    compare results and every input after each call. Returns the compiled graphs."""
    eager_args = clone_tree(args)
    compiled = dl.capture(fn, backend="triton")
    for step in range(steps):
        expected = fn(*eager_args)
        got = compiled(*args)
        assert_same(got, expected, f"step {step}: result")
        assert_same(args, eager_args, f"step {step}: inputs")
    return graphs()


def lowered(gs):
    assert gs and all(g.fallback_reason is None for g in gs), [g.fallback_reason for g in gs]
    return gs


# -- optimizer updates written in torch ops ------------------------------------------------------

def sgd_momentum(params, grads, bufs, lr=0.1, momentum=0.9, weight_decay=1e-2):
    for p, g, b in zip(params, grads, bufs):
        d = g.add(p, alpha=weight_decay)
        b.mul_(momentum).add_(d)
        p.add_(b, alpha=-lr)


def adam(params, grads, exp_avgs, exp_avg_sqs, step, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8,
         weight_decay=0.0, decoupled=False):
    """torch.optim.Adam(W)'s update (capturable form: `step` is a tensor)."""
    step += 1
    bias1 = 1 - beta1 ** step
    bias2 = 1 - beta2 ** step
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if decoupled:
            p.mul_(1 - lr * weight_decay)
        elif weight_decay:
            g = g.add(p, alpha=weight_decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / bias2.sqrt()).add_(eps)
        p.sub_(lr * (m / bias1) / denom)         # addcdiv_(value=-lr / bias1): a tensor as a Scalar


def param_set():
    shapes = [(8, 6), (6,), (8, 6), (6,), (3, 4, 2)]
    return [t(*s) for s in shapes]


def test_sgd_momentum_over_several_params_is_few_kernels():
    params = param_set()
    grads = [torch.randn_like(p) for p in params]
    bufs = [torch.zeros_like(p) for p in params]
    (graph,) = lowered(run_steps(sgd_momentum, params, grads, bufs))
    assert sorted(graph.mutated_inputs) == list(range(len(params))) + list(range(2 * len(params), 3 * len(params)))
    assert graph.kernel_count == 3              # one per distinct shape: (8, 6), (6,), (3, 4, 2)
    assert not graph.extern_ops


@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
def test_adam_update_in_place(decoupled):
    params = param_set()
    grads = [torch.randn_like(p) for p in params]
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    step = torch.zeros((), device=DEVICE)

    def fn(params, grads, ms, vs, step):
        adam(params, grads, ms, vs, step, weight_decay=1e-2, decoupled=decoupled)
    (graph,) = lowered(run_steps(fn, params, grads, ms, vs, step))
    assert len(graph.mutated_inputs) == 3 * len(params) + 1
    # the step counter, then one kernel per distinct shape (p, m and v of every same-shaped param)
    assert graph.kernel_count == 4
    assert not graph.extern_ops
    assert step.item() == 3


def test_adam_matches_torch_optim():
    """The same update as torch.optim.Adam (foreach=False), applied by our kernels."""
    torch.manual_seed(0)
    params = param_set()
    reference = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.Adam(reference, lr=1e-2, foreach=False)
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    step = torch.zeros((), device=DEVICE)
    compiled = dl.capture(adam, backend="triton")
    for _ in range(3):
        grads = [torch.randn_like(p) for p in params]
        for r, g in zip(reference, grads):
            r.grad = g.clone()
        opt.step()
        compiled(params, grads, ms, vs, step)
    for p, r in zip(params, reference):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)
    assert all(g.fallback_reason is None for g in graphs())


@pytest.mark.parametrize("opt_class", [torch.optim.AdamW, torch.optim.Adam])
def test_a_torch_optim_foreach_step_matches_eager(opt_class):
    """torch.optim's foreach Adam/AdamW stack their step sizes into a CPU tensor under a compiler
    and hand it to `_foreach_addcdiv_(params, m, denom, step_sizes)`. On a GPU the step sizes must
    stay on the CPU (once computed on the GPU, the step raised "Expected scalars to be on CPU").
    Whatever is lowered, the step must match eager."""
    torch.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(DEVICE)
    model = copy.deepcopy(eager_model)
    eager_opt = opt_class(eager_model.parameters(), lr=1e-2, foreach=True)
    opt = opt_class(model.parameters(), lr=1e-2, foreach=True)

    def train_step(model, opt, x):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    compiled = dl.capture(train_step, backend="triton")
    for _ in range(3):
        x = t(5, 8)
        train_step(eager_model, eager_opt, x)
        compiled(model, opt, x)
    for p, r in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)


def test_foreach_ops_are_lowered():
    def fn(params, grads, ms):
        torch._foreach_mul_(ms, 0.9)
        torch._foreach_add_(ms, grads, alpha=0.1)
        torch._foreach_addcmul_(params, ms, grads, value=-0.01)
        torch._foreach_lerp_(grads, ms, 0.5)
    params = param_set()
    grads = [torch.randn_like(p) for p in params]
    ms = [torch.randn_like(p) for p in params]
    (graph,) = lowered(run_steps(fn, params, grads, ms))
    assert graph.kernel_count == 3 and not graph.extern_ops, (graph.kernel_count, graph.extern_ops)


# -- writes into views, swaps, shifts -------------------------------------------------------------

def test_write_into_a_view_of_an_input():
    def fn(x, y):
        x[:, 1:].add_(1)
        y.t()[0].mul_(2)
        return x * y
    (graph,) = lowered(run_steps(fn, t(4, 5), t(4, 5)))
    assert graph.mutated_inputs == [0, 1]


def test_swap_and_rotate_inputs():
    def fn(a, b, c):
        tmp = a.clone()
        a.copy_(b)
        b.copy_(c)
        c.copy_(tmp)
    lowered(run_steps(fn, t(6), t(6), t(6)))


def test_written_value_reads_another_written_input():
    def fn(x, y, idx):
        y -= idx
        x += y
        return x.sum()
    lowered(run_steps(fn, t(7), t(7), torch.randint(3, (7,), device=DEVICE)))


def test_shift_within_an_input():
    """The value written at i reads the input at i - 1: computed into a temporary first."""
    def fn(x):
        x[1:] = x[:-1].clone() * 2
        return x
    (graph,) = lowered(run_steps(fn, t(9)))
    assert graph.kernel_count == 2


def test_old_value_returned_after_the_write():
    def fn(x):
        old = x.clone()
        view = x.detach()
        x.mul_(3)
        return old, view + 1
    lowered(run_steps(fn, t(4, 5)))


def test_non_overlapping_views_of_one_tensor_are_lowered():
    """Two halves of one buffer passed as two inputs: they share a storage but no memory."""
    def fn(a, b):
        a.add_(b)
        return a * 2
    base = t(2, 6)
    lowered(run_steps(fn, base[0], base[1]))


# -- when writing in place is unsafe: run as captured, with the reason -------------------------------

def test_overlapping_inputs_run_as_captured():
    def fn(a, b):
        a.mul_(2)                               # b, read after the write, sees it
        return b * 2
    base = t(10)
    eager_base = base.clone()
    compiled = dl.capture(fn, backend="triton")
    for step in range(3):
        expected = fn(eager_base[:6], eager_base[4:])
        got = compiled(base[:6], base[4:])
        assert_same(got, expected, f"step {step}: result")
        assert_same(base, eager_base, f"step {step}: input")
    gs = graphs()
    assert gs and all("input 0 is written in place and overlaps input 1" in (g.fallback_reason or "") for g in gs), \
        [g.fallback_reason for g in gs]


def test_inputs_that_overlap_only_on_a_later_call():
    """Compiled for separate tensors, then called with views of one: that call runs as captured."""
    def fn(a, b):
        a.mul_(2)
        return a + b
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [t(6), t(6)])
    assert compiled.compiled_graph.fallback_reason is None
    for args in [(t(6), t(6)), (lambda base: (base[:6], base[2:8]))(t(8))]:
        base_eager = clone_tree(args[0]._base if args[0]._base is not None else args)
        if args[0]._base is not None:
            expected = fn(base_eager[:6], base_eager[2:8])
            got = compiled(*args)
            assert_same(args[0]._base, base_eager, "base")
        else:
            expected = fn(*base_eager)
            got = compiled(*args)
            assert_same(args, base_eager, "inputs")
        assert_same(got, expected, "result")


def test_expanded_input_written_in_place_raises_as_in_eager():
    def fn(x):
        x.add_(1)
        return x
    gm = torch.fx.symbolic_trace(fn)
    x = t(1, 4).expand(3, 4)
    compiled = triton_backend(gm, [x])
    assert "share memory" in compiled.compiled_graph.fallback_reason
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with pytest.raises(RuntimeError) as captured:
        compiled(x)
    assert str(captured.value) == str(eager.value)


# -- batch norm in training mode ----------------------------------------------------------------------

@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no_grad"])
def test_batch_norm_training_running_stats(grad):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).to(DEVICE).train()
    reference = copy.deepcopy(model)
    compiled = dl.capture(model, backend="triton")
    with torch.set_grad_enabled(grad):
        for _ in range(3):
            x = t(2, 3, 6, 6)
            torch.testing.assert_close(compiled(x), reference(x), rtol=1e-4, atol=1e-4)
    bn, ref = model[1], reference[1]
    torch.testing.assert_close(bn.running_mean, ref.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn.running_var, ref.running_var, rtol=1e-5, atol=1e-6)
    assert bn.num_batches_tracked.item() == ref.num_batches_tracked.item() == 3
    gs = lowered(graphs())
    assert any(len(g.mutated_inputs) == 3 for g in gs)   # running mean, var, batch count: kernel stores


# -- CPU scalars next to GPU tensors: torch.optim's foreach steps (capturable=False) -----------------

def _foreach_optimizer_step(opt_class, steps=3, out_features=4, **options):
    """torch.optim's foreach step in a captured training step against eager: parameters and every
    state tensor after each step; returns the compiled graphs (test_triton_host_math.py uses it
    too, with every parameter larger than its stand-in host values: out_features=8)."""
    torch.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, out_features)).to(DEVICE)
    model = copy.deepcopy(eager_model)
    eager_opt = opt_class(eager_model.parameters(), lr=1e-2, foreach=True, **options)
    opt = opt_class(model.parameters(), lr=1e-2, foreach=True, **options)

    def train_step(model, opt, x):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    compiled = dl.capture(train_step, backend="triton")
    for step in range(steps):
        x = t(5, 8)
        train_step(eager_model, eager_opt, x)
        compiled(model, opt, x)
        for p, r in zip(model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6, msg=lambda m: f"step {step}: {m}")
            for key, value in eager_opt.state[r].items():
                got = opt.state[p][key]
                assert got.device == value.device and got.dtype == value.dtype and got.shape == value.shape, key
                torch.testing.assert_close(got, value, rtol=1e-5, atol=1e-6, msg=lambda m: f"step {step}: {key}: {m}")
    return graphs()


@pytest.mark.parametrize("opt_class", [torch.optim.AdamW, torch.optim.Adam])
def test_foreach_step_with_host_scalars_is_lowered(opt_class, monkeypatch):
    """Without a GPU: 0-dim CPU tensors stand in for the CPU values of a CUDA graph (the step
    counters and the step sizes torch.optim computes from them): the wrapper computes them as
    Python numbers (host_math.py: test_triton_host_math.py), the counters are read by `.item()`
    and written back by `fill_`, kernels take the step sizes as arguments. `_foreach_addcdiv_`
    with a tensor of step sizes is spelled per tensor (its fake run raised "Expected scalars to
    be on CPU, got meta")."""
    from dynamo_lite.backends.triton.graph_lowering import GraphLowering
    if DEVICE == "cpu":        # on a GPU the CPU values are host values for real (GraphLowering.on_host)
        monkeypatch.setattr(GraphLowering, "on_host", lambda self, v: v.device.type == "cpu" and len(
            v.shape if isinstance(v, torch.Tensor) else v.sizes) == 0)
    gs = lowered(_foreach_optimizer_step(opt_class))
    # the optimizer's graph (on a GPU the forward/backward graphs may be compiled after it)
    steps = [g for g in gs if "aten.fill_.Scalar" in g.extern_ops]
    assert len(steps) == 1, [dict(g.extern_ops) for g in gs]
    assert ".item()" in steps[0].wrapper_source             # step sizes read as kernel arguments
    assert steps[0].extern_ops["aten.fill_.Scalar"] == 4    # one step counter per parameter


@pytest.mark.skipif(DEVICE != "cuda", reason="CPU scalars next to CUDA tensors need a GPU")
@pytest.mark.parametrize("opt_class", [torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD])
def test_foreach_step_on_cuda_with_cpu_step_counters_is_lowered(opt_class):
    """On a GPU, torch.optim keeps `step` as a 0-dim CPU tensor (capturable=False): the graph
    computes on the CPU and the GPU, as eager does; it is lowered, the counters stay on the CPU."""
    options = dict(momentum=0.9) if opt_class is torch.optim.SGD else {}
    gs = lowered(_foreach_optimizer_step(opt_class, **options))
    assert any(g.kernel_count for g in gs)


# -- writes through an `inplace=True` argument ------------------------------------------------------

def test_functional_inplace_argument_writes_into_the_input():
    """`x += y; F.relu(x, inplace=True)` returning x (ResNet's residual): the graph writes into its
    input x and returns it. The writes through `inplace=` (by keyword and by position) count as
    writes, so the graph is lowered with x written back, not run as captured."""
    import torch.nn.functional as F

    def residual(x, y, w):
        x += y * w
        return F.relu(x, inplace=True)

    def positional(x, y):
        F.hardtanh(x, -0.5, 0.5, True)
        return y + x
    lowered(run_steps(residual, t(4, 8), t(4, 8), t(8)))
    lowered(run_steps(positional, t(4, 8), t(4, 8)))


def test_inplace_argument_into_an_input_another_input_views():
    """`F.relu(a, inplace=True)` where b views a's memory: the write is seen (b changes), so the
    result that reads b after it matches eager's."""
    import torch.nn.functional as F

    def fn(a, b):
        F.relu(a, inplace=True)
        return b * 2
    base = t(16)
    eager_base = base.clone()
    compiled = dl.capture(fn, backend="triton")
    got = compiled(base[:8], base[4:12])
    expected = fn(eager_base[:8], eager_base[4:12])
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(base, eager_base)
