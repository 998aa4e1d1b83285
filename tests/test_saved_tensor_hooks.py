"""The capturing call does the user's autograd work once: tracing runs on fake tensors, whose saves
for backward never reach the program's saved-tensor hooks. Activation checkpointing (which counts
what forward saved against what recomputation saves) works under capture, both flavours, and
gradients match eager over several steps."""
import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import dynamo_lite as dl
from harness import CountingBackend


class _Checkpointed(nn.Module):
    def __init__(self, reentrant: bool):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(8, 16), nn.Linear(16, 8), nn.Linear(8, 1)
        self.reentrant = reentrant

    def block(self, x):
        return self.b(torch.relu(self.a(x)))

    def forward(self, x):
        h = checkpoint(self.block, x, use_reentrant=self.reentrant)
        return self.head(h).pow(2).mean()


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_activation_checkpointing_matches_eager(reentrant):
    torch.manual_seed(0)
    model, reference = _Checkpointed(reentrant), _Checkpointed(reentrant)
    reference.load_state_dict(model.state_dict())
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    for step in range(3):
        x = torch.randn(4, 8, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        loss, expected = captured(x), reference(x_ref)
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
        torch.testing.assert_close(x.grad, x_ref.grad, msg=f"step {step}")
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=f"step {step}")
    assert backend.count >= 1


class _CheckpointedLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 4)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = checkpoint(lambda h, layer=layer: torch.tanh(layer(h)), x, use_reentrant=False)
        return self.layers[-1](x)


def test_a_recomputation_stopped_early_inside_a_graph_matches_eager():
    # A captured train step (forward and backward): backward recomputes each checkpointed lambda
    # through its captured graph, and checkpoint stops that recomputation early by raising from its
    # saved-tensor hook inside the graph. The stop must reach checkpoint (it did in eager), not make
    # the lambda rerun eagerly into a checkpoint that has already stopped (AssertionError).
    torch.manual_seed(0)
    model, reference = _CheckpointedLoop(), _CheckpointedLoop()
    reference.load_state_dict(model.state_dict())

    def train_step(m, x, y):
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        return loss.detach()
    captured = dl.capture(train_step, backend=CountingBackend())
    for step in range(3):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        torch.testing.assert_close(captured(model, x, y), train_step(reference, x, y))
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=f"step {step}")


def test_saved_tensor_hooks_see_what_eager_saves():
    def f(x, w):
        return (x @ w).relu().sum()

    def run(fn):
        saved = []
        x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(type(t).__name__) or t, lambda t: t):
            out = fn(x, w)
        out.backward()
        return saved, x.grad, w.grad

    torch.manual_seed(0)
    expected_saved, *expected_grads = run(f)
    torch.manual_seed(0)
    saved, *grads = run(dl.capture(f))          # the capturing call
    assert saved == expected_saved, "tracing's fake tensors must not reach the program's hooks"
    torch.manual_seed(0)
    saved_again, *_ = run(dl.capture(f))        # a cached call
    assert saved_again == expected_saved
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)


class _CheckpointedBlocks(nn.Module):
    """Checkpointed blocks with dropout (recomputation must draw the same mask) in a loop."""

    def __init__(self, reentrant: bool):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)])
        self.reentrant = reentrant

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = checkpoint(lambda h, layer=layer: nn.functional.dropout(torch.tanh(layer(h)), 0.3), x,
                           use_reentrant=self.reentrant)
        return self.layers[-1](x)


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("input_grad", [False, True], ids=["data", "data-requiring-grad"])
def test_checkpoint_is_a_graph_node_with_eagers_gradients(reentrant, input_grad):
    # The checkpointed function is traced into a subgraph and the call is one node running the
    # real checkpoint on it: the whole train step is one graph before backward (it was a break at
    # every checkpoint call). Gradients, the dropout masks redrawn in recomputation, and which
    # parameters get gradients (a reentrant block whose inputs do not require grad gives its
    # parameters none) are eager's, over several steps.
    torch.manual_seed(0)
    model, reference = _CheckpointedBlocks(reentrant), _CheckpointedBlocks(reentrant)
    reference.load_state_dict(model.state_dict())

    def forward_loss(m, x, y):
        return torch.nn.functional.mse_loss(m(x), y)
    backend = CountingBackend()
    captured = dl.capture(forward_loss, backend=backend, fullgraph=True)
    for step in range(3):
        x, y = torch.randn(8, 16, requires_grad=input_grad), torch.randn(8, 4)
        x_ref = x.detach().clone().requires_grad_(input_grad)
        torch.manual_seed(step)
        loss = captured(model, x, y)
        loss.backward()
        torch.manual_seed(step)
        expected = forward_loss(reference, x_ref, y)
        expected.backward()
        torch.testing.assert_close(loss, expected)
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert (p.grad is None) == (q.grad is None), (step, name)
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, msg=f"step {step}: {name}")
        if input_grad:
            torch.testing.assert_close(x.grad, x_ref.grad)
    assert backend.count == 1


def test_checkpointed_function_with_a_side_effect_runs_eagerly():
    # checkpoint runs its function twice (forward and recomputation): one with a Python side
    # effect is not put in a graph; the call runs as in eager, appending twice per step.
    calls = []
    lin = nn.Linear(4, 4)

    def block(h):
        calls.append(1)
        return torch.tanh(lin(h))

    def f(x):
        return checkpoint(block, x * 2, use_reentrant=False).sum()
    x = torch.randn(3, 4, requires_grad=True)
    f(x).backward()
    expected_calls, expected_grad = len(calls), x.grad.clone()
    calls.clear()
    x.grad = None
    dl.capture(f, backend=CountingBackend())(x).backward()
    assert len(calls) == expected_calls == 2
    torch.testing.assert_close(x.grad, expected_grad)
