"""Host scalars computed as Python numbers by the triton backend's wrapper (host_math.py), against eager.

Without a GPU, CPU tensors stand in for the host values of a CUDA graph: `on_host` is patched to
call 0-dim CPU tensors and 1-d ones of at most 4 elements host values (torch.optim's step
counters, the step sizes computed from them and their stacked list), while larger CPU tensors
play the GPU's part (kernels under Triton's interpreter). Each test compares values, inputs and
optimizer state after several calls with eager on copies, and what the wrapper does instead of
aten calls; with `host_math` switched off the same graphs must still agree (the aten path).
"""
import re

import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; an autouse fixture)

pytest.importorskip("triton")


import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.backends.triton import backend as triton_backend_module, settings   # noqa: E402
from dynamo_lite.backends.triton.graph_lowering import GraphLowering   # noqa: E402
from test_triton_mutation import _foreach_optimizer_step   # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning"),
              pytest.mark.skipif(DEVICE != "cpu", reason="the CPU stand-in for host values")]

#: aten ops the host arithmetic of a foreach Adam step used to make, per parameter
STEP_SIZE_OPS = {"aten.pow.Scalar", "aten.pow.Tensor_Scalar", "aten.sub.Tensor", "aten.mul.Tensor",
                 "aten.add.Tensor", "aten.reciprocal.default", "aten.select.int", "aten.unsqueeze.default",
                 "aten.cat.default", "aten.copy_.default"}


def _stand_in_on_host(self, v) -> bool:
    sizes = tuple(v.shape if isinstance(v, torch.Tensor) else v.sizes)
    return v.device.type == "cpu" and (sizes == () or (len(sizes) == 1 and sizes[0] <= 4))


@pytest.fixture(autouse=True)
def host_values(monkeypatch):
    monkeypatch.setattr(GraphLowering, "on_host", _stand_in_on_host)


@pytest.fixture(params=[True, False], ids=["python", "aten"])
def host_math(request, monkeypatch):
    monkeypatch.setattr(settings, "host_math", request.param)
    return request.param


def graphs():
    return list(triton_backend_module.recent)


def lowered(gs):
    assert gs and all(g.fallback_reason is None for g in gs), [g.fallback_reason for g in gs]
    return gs


def optimizer_steps(opt_class, steps=4, **options):
    """torch.optim's foreach step captured against eager (test_triton_mutation's helper; 4
    parameters, each larger than a host value); the graphs that were lowered."""
    return lowered(_foreach_optimizer_step(opt_class, steps=steps, out_features=8, **options))


@pytest.mark.parametrize("opt_class, options", [
    (torch.optim.AdamW, {}),
    (torch.optim.Adam, {}),
    (torch.optim.Adam, dict(weight_decay=0.1, amsgrad=True)),
    (torch.optim.AdamW, dict(maximize=True)),
    (torch.optim.SGD, dict(momentum=0.9)),
], ids=["AdamW", "Adam", "Adam-amsgrad", "AdamW-maximize", "SGD-momentum"])
def test_optimizer_steps_agree_with_eager(opt_class, options, host_math):
    optimizer_steps(opt_class, **options)


def test_adamw_step_sizes_are_python_numbers():
    """The lowered foreach AdamW step: no aten call computes a step size (pow, sub, mul,
    reciprocal, their stacking and selecting); the step counters are written by `fill_`; the
    kernels take the step sizes as Python floats (no `.item()` of a computed one)."""
    step = optimizer_steps(torch.optim.AdamW)[-1]
    assert not STEP_SIZE_OPS & set(step.extern_ops), step.extern_ops
    assert step.extern_ops.get("aten.fill_.Scalar") == 4
    assert step.host_ops.get("aten.pow.Scalar") == 8 and step.host_ops.get("aten.select.int") == 4
    source = step.wrapper_source
    counters = re.findall(r"(\w+)\.fill_\(", source)
    assert len(counters) == 4 and all(source.count(f"{c}.item()") == 1 for c in counters), source
    assert "_pow(0.9, " in source and "_pow(0.999, " in source
    kernel_lines = [line for line in source.splitlines() if line.strip().startswith("kernel")]
    assert kernel_lines and not any(".item()" in line for line in kernel_lines), kernel_lines


def test_adamw_step_sizes_are_aten_calls_when_switched_off(monkeypatch):
    monkeypatch.setattr(settings, "host_math", False)
    step = optimizer_steps(torch.optim.AdamW, steps=2)[-1]
    assert step.extern_ops.get("aten.pow.Scalar") == 8 and not step.host_ops


# -- arithmetic a graph of one's own makes on host scalars ---------------------------------------

def run_calls(fn, make_args, calls=3):
    """Call eager `fn` on copies and the captured `fn` on `make_args()`'s tensors `calls` times,
    the host scalars changing between calls; compare results (nan and inf included) and inputs."""
    compiled = dl.capture(fn, backend="triton")
    for call in range(calls):
        args = make_args(call)
        eager_args = [a.clone() for a in args]
        expected = fn(*eager_args)
        got = compiled(*args)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, equal_nan=True,
                                   msg=lambda m: f"call {call}: result: {m}")
        for i, (a, e) in enumerate(zip(args, eager_args)):
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6, equal_nan=True,
                                       msg=lambda m: f"call {call}: input {i}: {m}")
    return lowered(graphs())[-1]


def scalar(v):
    return torch.tensor(float(v))


def test_ieee_results_where_python_raises(host_math):
    """Division by zero, a negative base to a fractional power, overflow in `**`, square roots of
    negatives: Python raises or goes complex, torch gives inf and nan; so must we."""
    def fn(x, s, t):
        a = (s - 1) / t
        b = (s - 2) ** 0.5
        c = 10.0 ** (s * 100)
        d = t.reciprocal() + torch.sqrt(s - 3)
        return x * a + x * b + x * c + x * d

    values = [(2.5, 0.0), (-1.0, -0.0), (1.0, 0.0), (4.0, 2.0)]
    graph = run_calls(fn, lambda k: (torch.randn(64), scalar(values[k][0]), scalar(values[k][1])), calls=4)
    if host_math:
        assert not {"aten.div.Tensor", "aten.pow.Tensor_Scalar", "aten.reciprocal.default"} & set(graph.extern_ops)


def test_counter_written_after_its_readers(host_math):
    """A host counter read before and after its in-place update: the kernel gets both values,
    the counter is written once, at the end (after every reader of its old value)."""
    def fn(x, step, lr):
        before = x * (lr / step)
        step.add_(1)
        after = x * (lr * step ** 2)
        step.mul_(2)
        return before + after

    graph = run_calls(fn, lambda k: (torch.randn(32), scalar(k + 1), scalar(0.1 * (k + 1))))
    if host_math:
        assert graph.extern_ops == {"aten.fill_.Scalar": 1}, graph.extern_ops


def test_value_needed_as_a_tensor_stays_an_aten_call(host_math):
    """A host value the graph returns, or that an op not translated reads (a comparison), is a
    tensor: computed by aten, as are the values it is computed from; the rest is Python."""
    def fn(x, s):
        y = s * 3 + 1
        flag = (y > 2.5)
        return x * y, y, torch.where(flag, x, -x) * (s - 1)

    graph = run_calls(fn, lambda k: (torch.randn(16), scalar(k - 0.5)))
    if host_math:
        assert graph.extern_ops.get("aten.mul.Tensor") == 1 and graph.host_ops.get("aten.sub.Tensor") == 1


def test_stacked_scalars_and_selects(host_math):
    """Scalars stacked into a 1-d host value and selected back (torch.optim's step-size list)."""
    def fn(x, s, t):
        sizes = torch.stack([s * 2, t + 1, s / t])
        return x[0] * sizes[0] + x[1] * sizes[2] + x[2] * sizes[-2] + x[3] * sizes[1]

    graph = run_calls(fn, lambda k: (torch.randn(4, 16), scalar(k + 0.5), scalar(2.0 - k)))
    if host_math:
        assert not {"aten.stack.default", "aten.select.int", "aten.cat.default"} & set(graph.extern_ops)


def test_same_expression_computed_once():
    """The same op over the same values is one line; over two tensors it is two (they may hold
    different values however alike they look)."""
    def fn(x, s, t):
        return x * (s * 2.0 - 1) + x.cos() * (s * 2.0 - 1) + x.sin() * (t * 2.0 - 1)

    graph = run_calls(fn, lambda k: (torch.randn(32), scalar(k + 1), scalar(k + 2)))
    source = graph.wrapper_source
    assert source.count(" * 2.0") == 2 and source.count(" - 1.0") == 2, source


def test_low_precision_and_integer_scalars_stay_aten_calls(host_math):
    """A float16 result (eager rounds it after each op) and integer ones (wrap-around, no
    promotion) are not Python doubles: aten calls, with the same values as eager."""
    def fn(x, h, n):
        n.add_(3)
        return x * (h * 3 + 1), n * 2

    graph = run_calls(fn, lambda k: (torch.randn(16), torch.tensor(0.1 + k, dtype=torch.float16),
                                     torch.tensor(2 ** 62 + k)))
    if host_math:
        assert not graph.host_ops and graph.extern_ops.get("aten.copy_.default") == 1, graph.extern_ops
