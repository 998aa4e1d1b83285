"""Graphs captured inside a DistributedDataParallel forward are cut at DDP's gradient buckets
(backends/ddp_split.py): one backend call per bucket, each piece holding the parameters of one
bucket as DDP itself rebuilt them, and the gradients (all-reduced by DDP) equal eager DDP's over
several steps. On a one-process gloo group, so the structure is checked on CPU."""
import copy

import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite import config
from harness import CountingBackend


class Tower(nn.Module):
    """Four Linear layers of different widths: each bucket boundary falls between two of them."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 32), nn.Linear(32, 16), nn.Linear(16, 4)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return self.layers[-1](x)


def _ddp_pair(bucket_cap_mb):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = Tower()
    reference = copy.deepcopy(model)
    return DDP(model, bucket_cap_mb=bucket_cap_mb), DDP(reference, bucket_cap_mb=bucket_cap_mb)


def _piece_bytes(backend) -> list[int]:
    """Bytes of DDP parameters each piece takes, last piece first (DDP's bucket order)."""
    sizes = [sum(t.numel() * t.element_size() for t in inputs if isinstance(t, nn.Parameter))
             for inputs in backend.example_inputs]
    return sizes[::-1]


def _rebuilt_buckets(ddp) -> list[int]:
    data = ddp._get_ddp_logging_data()
    return [int(s) for s in str(data["rebuilt_bucket_sizes"]).split(",")]


def _train(run, ddp, reference, steps=3):
    for step in range(steps):
        x = torch.randn(5, 8)
        loss, expected = run(x), reference(x).pow(2).mean()
        expected.backward()
        torch.testing.assert_close(loss, expected, msg=f"loss, step {step}")
        for (name, p), q in zip(ddp.module.named_parameters(), reference.module.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=f"grad of {name}, step {step}")
        ddp.zero_grad()
        reference.zero_grad()


def test_small_buckets_split_the_graph_into_one_piece_per_bucket(single_process_group):
    # Tower's parameters, bytes: 576, 2176, 2112, 272. A cap of 2100 bytes: DDP's buckets are
    # [272 + 2112], [2176], [576] (a bucket closes once it holds the cap).
    ddp, reference = _ddp_pair(bucket_cap_mb=2100 / 2 ** 20)
    backend = CountingBackend()
    captured = dl.capture(ddp, backend=backend)

    def run(x):
        loss = captured(x).pow(2).mean()
        loss.backward()
        return loss.detach()
    _train(run, ddp, reference)
    assert backend.count == 3, [g.code for g in backend.graphs]
    assert _piece_bytes(backend) == _rebuilt_buckets(reference) == [2384, 2176, 576]


def test_a_captured_step_that_calls_the_ddp_module_is_split_too(single_process_group):
    ddp, reference = _ddp_pair(bucket_cap_mb=2100 / 2 ** 20)
    backend = CountingBackend()

    @dl.capture(backend=backend)
    def step(x):
        loss = ddp(x).pow(2).mean()
        loss.backward()
        return loss.detach()
    _train(step, ddp, reference)
    pieces = [inputs for inputs in backend.example_inputs if any(isinstance(t, nn.Parameter) for t in inputs)]
    assert len(pieces) == 3


def test_default_buckets_keep_the_graph_whole(single_process_group):
    ddp, reference = _ddp_pair(bucket_cap_mb=None)
    backend = CountingBackend()
    captured = dl.capture(ddp, backend=backend)
    _train(lambda x: _backward(captured, x), ddp, reference)
    assert backend.count == 1


def test_optimize_ddp_off_keeps_the_graph_whole(single_process_group, monkeypatch):
    monkeypatch.setattr(config, "optimize_ddp", False)
    ddp, reference = _ddp_pair(bucket_cap_mb=2100 / 2 ** 20)
    backend = CountingBackend()
    captured = dl.capture(ddp, backend=backend)
    _train(lambda x: _backward(captured, x), ddp, reference)
    assert backend.count == 1


def test_a_ddp_wrapped_sequential_of_torch_layers_is_captured(single_process_group):
    # DDP's forward is torch's own code, run eagerly: the torch.nn model it calls is still the
    # user's model, captured (a lone torch.nn module called from eager code otherwise runs eagerly).
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp, reference = DDP(model), DDP(copy.deepcopy(model))
    backend = CountingBackend()
    captured = dl.capture(ddp, backend=backend)
    _train(lambda x: _backward(captured, x), ddp, reference)
    assert backend.count == 1


def _backward(module, x):
    loss = module(x).pow(2).mean()
    loss.backward()
    return loss.detach()
