"""The triton backend's CUDA-graph mode (backends/triton/cudagraphs.py, backend `triton_cudagraphs`):
differential against eager over several calls with changing inputs; outputs a caller holds are
never overwritten by a later replay; outputs that share memory still do; a parameter the user
replaces is read, not the recorded one; graphs that cannot be recorded (random numbers, writes
into inputs, CPU values) run as compiled and say why. The recording itself needs a GPU; on the
CPU the mode is accepted and every graph runs as compiled, with the reason."""
import pytest
import torch
import torch.nn.functional as F

from triton_env import DEVICE, INTERPRET

import dynamo_lite as dl
from dynamo_lite.backends.triton import backend

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or INTERPRET, reason="needs a CUDA GPU")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 64)
        self.register_buffer("scale", torch.full((64,), 0.5))

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))
        return x + h * self.scale, h.sum(-1)


def latest_graph():
    return backend.recent[-1]


def run_both(model, inputs):
    """Captured calls' results, each compared with eager's at the end (after every call ran)."""
    compiled = dl.capture(model, backend="triton_cudagraphs")
    got = [compiled(x) for x in inputs]
    want = [model(x) for x in inputs]
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b, rtol=2e-4, atol=2e-4)
    return got


def test_the_mode_is_a_backend():
    assert "triton_cudagraphs" in dl.list_backends()


@pytest.mark.skipif(not INTERPRET, reason="the CPU side of the mode")
def test_on_the_cpu_graphs_run_as_compiled_and_say_why():
    model = Block().eval()
    with torch.no_grad():
        run_both(model, [torch.randn(4, 64) for _ in range(3)])
    info = latest_graph()
    assert info.kernel_count > 0
    assert info.cuda_graph.startswith("not recorded") and "cpu" in info.cuda_graph, info.cuda_graph
    assert info.cuda_graph_calls == {"replayed": 0, "compiled": 0}


@needs_gpu
def test_replays_match_eager_and_keep_earlier_outputs():
    model = Block().to(DEVICE).eval()
    inputs = [torch.randn(8, 64, device=DEVICE) for _ in range(5)]
    with torch.no_grad():
        got = run_both(model, inputs)          # (compared after all five calls: nothing overwritten)
    info = latest_graph()
    assert info.cuda_graph == "recorded", info.cuda_graph
    assert info.cuda_graph_calls["replayed"] == 4          # the first call compiles, the second records
    assert got[1][0].data_ptr() != got[2][0].data_ptr()


@needs_gpu
def test_a_replaced_parameter_is_read_and_a_changed_buffer_too():
    model = Block().to(DEVICE).eval()
    x = torch.randn(8, 64, device=DEVICE)
    with torch.no_grad():
        compiled = dl.capture(model, backend="triton_cudagraphs")
        compiled(x), compiled(x), compiled(x)
        model.fc1.weight = torch.nn.Parameter(torch.randn(128, 64, device=DEVICE))   # a new tensor
        model.scale.mul_(3)                                                          # in place
        got = compiled(x)
        want = model(x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=2e-4, atol=2e-4)
    info = latest_graph()
    assert info.cuda_graph == "recorded" and info.cuda_graph_calls["compiled"] == 1, info.cuda_graph_calls


@needs_gpu
def test_outputs_sharing_memory_still_share_it():
    def fn(x):
        y = (x * 2).relu()
        return y, y.t(), y[1:]
    x = torch.randn(16, 16, device=DEVICE)
    compiled = dl.capture(fn, backend="triton_cudagraphs")
    for _ in range(3):
        y, yt, tail = compiled(x)
    assert latest_graph().cuda_graph == "recorded"
    torch.testing.assert_close(y, fn(x)[0])
    y.zero_()
    assert yt.abs().sum() == 0 and tail.abs().sum() == 0      # views of one storage, as in eager


@needs_gpu
@pytest.mark.parametrize("case", ["dropout", "writes-input"])
def test_graphs_that_cannot_be_replayed_run_as_compiled(case):
    def dropout(x):
        return F.dropout(x * 2, 0.5, training=True)

    def writes_input(x):
        x.mul_(2)
        return x.sum()
    fn = dropout if case == "dropout" else writes_input
    compiled = dl.capture(fn, backend="triton_cudagraphs")
    x = torch.randn(64, device=DEVICE)
    ref = x.clone()
    for _ in range(3):
        out = compiled(x)
    info = latest_graph()
    assert info.cuda_graph.startswith("not recorded"), info.cuda_graph
    assert ("random" in info.cuda_graph) if case == "dropout" else ("writes into its inputs" in info.cuda_graph)
    if case == "writes-input":
        torch.testing.assert_close(x, ref * 8)
        torch.testing.assert_close(out, (ref * 8).sum())
    else:
        assert ((out == 0) | torch.isclose(out, x * 4)).all()


def test_attention_without_dropout_draws_no_random_numbers():
    from dynamo_lite.backends.triton.cudagraphs import draws_random_numbers
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(q, x):
        a = F.scaled_dot_product_attention(q, q, q)                 # dropout_p=0.0: nothing drawn
        b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
        return a, b, F.dropout(x, 0.0, training=True), F.dropout(x, 0.5, training=True), torch.rand_like(x)
    gm = make_fx(fn, pre_dispatch=False)(torch.randn(1, 2, 4, 8), torch.randn(8))
    seeded = {str(n.target): draws_random_numbers(n) for n in gm.graph.nodes if n.op == "call_function"
              and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())}
    draws = [n for n in gm.graph.nodes if n.op == "call_function" and draws_random_numbers(n)]
    assert len(draws) >= 3, seeded        # the dropout_p=0.1 attention, dropout(0.5), rand_like
    assert any("attention" in str(n.target) for n in gm.graph.nodes if n.op == "call_function"
               and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) and not draws_random_numbers(n)), seeded


def test_replay_bookkeeping_with_a_stand_in_recording(monkeypatch):
    """What a replay does around the CUDA graph, on the CPU: the copied inputs go into the
    recording's buffers, outputs come back as new memory sharing nothing with the recording, a
    call on another current device switches to the recording's, a moved parameter runs as compiled."""
    from dynamo_lite.backends.triton.backend import CompiledGraph
    from dynamo_lite.backends.triton.cudagraphs import Recorded
    info = CompiledGraph(cuda_graph="recorded")
    compiled_calls = []
    recorded = Recorded(lambda *a: compiled_calls.append(a) or "compiled", info, frozenset({0}))
    w, x, out = torch.randn(3), torch.randn(3), torch.empty(3)

    class StandIn:                      # the recording: out = param + copied input
        def replay(self):
            out.copy_(recorded.inputs[0] + recorded.inputs[1])
    recorded.graph, recorded.inputs, recorded.copied = StandIn(), [w, torch.empty(3)], [1]
    recorded.addresses, recorded.outputs = [(0, w.data_ptr())], (out,)
    recorded.storages, recorded.layout = [out.untyped_storage()], [(0, out.dtype, 0, (3,), (1,))]
    switched = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "device", lambda d: switched.append(d) or __import__("contextlib").nullcontext())
    first = recorded(w, x)
    second = recorded(w, x * 2)
    torch.testing.assert_close(first[0], w + x)          # not overwritten by the second replay
    torch.testing.assert_close(second[0], w + x * 2)
    assert first[0].data_ptr() not in (out.data_ptr(), second[0].data_ptr()) and switched == [0, 0]
    assert recorded(torch.randn(3), x) == "compiled" and len(compiled_calls) == 1
    assert info.cuda_graph_calls == {"replayed": 2, "compiled": 1}
