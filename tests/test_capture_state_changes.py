"""State a captured function depends on changes between two calls -- a list or dict it closes
over, an object attribute, module hooks and requires_grad, torch's grad mode and default dtype,
argument strides.  The second call must still match eager (a stale graph must not be reused)."""
import contextlib

import pytest
import torch
import torch.nn as nn

from harness import REFERENCE, CountingBackend, assert_same, capture, check, check_state_change

SETTINGS = {"scale": 2.0, "activation": "relu"}


def test_list_contents_in_closure_changed():
    scales = [2.0, 3.0]

    def f(x):
        return x * scales[0] + scales[1]

    check_state_change(f, (torch.randn(3),), lambda: scales.__setitem__(0, -5.0))


def test_list_appended_in_closure():
    offsets = [1.0]

    def f(x):
        return sum(x + o for o in offsets)

    check_state_change(f, (torch.randn(3),), lambda: offsets.append(10.0))


def test_global_dict_value_changed(monkeypatch):
    def f(x):
        out = x * SETTINGS["scale"]
        return torch.relu(out) if SETTINGS["activation"] == "relu" else torch.tanh(out)

    def change():
        monkeypatch.setitem(SETTINGS, "scale", -1.0)
        monkeypatch.setitem(SETTINGS, "activation", "tanh")

    check_state_change(f, (torch.randn(4),), change)


def test_plain_object_attribute_changed():
    class Options:
        def __init__(self):
            self.temperature = 1.0
            self.use_bias = False

    opts = Options()
    bias = torch.ones(3)

    def f(x):
        y = x / opts.temperature
        return y + bias if opts.use_bias else y

    def change():
        opts.temperature = 0.25
        opts.use_bias = True

    check_state_change(f, (torch.randn(3),), change)


@pytest.fixture
def reference_guards_on_hooks():
    """TorchDynamo skips hook guards by default (a documented trade-off); turn them on so the
    reference checks the semantics dynamo_lite promises.  (config.patch, not monkeypatch: undoing
    a monkeypatch may delete the config entry altogether.)"""
    if not REFERENCE:
        yield
        return
    import torch._dynamo

    with torch._dynamo.config.patch(skip_nnmodule_hook_guards=False):
        yield


def test_forward_hook_registered_after_capture(reference_guards_on_hooks):
    lin = nn.Linear(3, 3)

    def f(x):
        return lin(x) * 2

    # with a hook, the frame may run eagerly while Linear.forward and the hook are captured alone
    check_state_change(f, (torch.randn(2, 3),), lambda: lin.register_forward_hook(lambda m, i, o: o + 100),
                       max_graphs=None)


def test_forward_pre_hook_registered_on_captured_module(reference_guards_on_hooks):
    """Hooks on the module passed to capture() itself must run too."""
    lin = nn.Linear(3, 3)
    compiled = capture(lin, backend=CountingBackend())
    x = torch.randn(2, 3)
    assert_same(lin(x), compiled(x))
    lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    assert_same(lin(x), compiled(x))
    torch.testing.assert_close(compiled(x), lin.bias.expand(2, 3))


def test_parameters_frozen_after_capture():
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x).sum(-1)

    check_state_change(f, (torch.randn(2, 3),), lambda: lin.requires_grad_(False))


def test_grad_mode_at_call_time():
    def f(x):
        return x.exp() * 2

    stack = contextlib.ExitStack()
    try:
        check_state_change(f, (torch.randn(3, requires_grad=True),), lambda: stack.enter_context(torch.no_grad()))
    finally:
        stack.close()


def test_default_dtype_changed():
    def f(x):
        return torch.zeros(3) + x.sum(), torch.arange(3.0)

    previous = torch.get_default_dtype()
    try:
        check_state_change(f, (torch.randn(2),), lambda: torch.set_default_dtype(torch.float64))
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("make_second", [
    lambda: torch.randn(4, 3).t(),
    lambda: torch.randn(3, 8)[:, ::2],
    lambda: torch.randn(3, 4).expand(2, 3, 4)[0],
], ids=["transposed", "strided_slice", "expanded"])
def test_non_contiguous_argument_after_contiguous(make_second):
    def f(x):
        return x.view(-1) if x.is_contiguous() else x.reshape(-1) * -1

    check_state_change(f, (torch.randn(3, 4),), lambda: None, args_after=(make_second(),))


def test_no_grad_decorated_submodule_forward():
    # transformers' rotary embeddings: `@torch.no_grad()` on forward, called from a module with grad on
    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freq", torch.arange(4.0))

        @torch.no_grad()
        def forward(self, x):
            return x * self.freq, torch.is_grad_enabled()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rotary = Rotary()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            scaled, grad_inside = self.rotary(x)
            out = self.proj(x) + scaled
            return out, grad_inside, torch.is_grad_enabled(), out.requires_grad, scaled.requires_grad
    check(Model(), torch.randn(2, 4, requires_grad=True), graphs=1)


def test_is_grad_enabled_reads_the_traced_grad_mode():
    def f(x):
        with torch.no_grad():
            inside = torch.is_grad_enabled()
            y = x * 2
        return y, inside, torch.is_grad_enabled()
    check(f, torch.randn(3, requires_grad=True), graphs=1)
