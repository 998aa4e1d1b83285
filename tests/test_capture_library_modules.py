"""Library constructs that reach C code or torch internals from a forward: nn.RNN/LSTM/GRU (weak
references to their flat weights, `_VF.lstm`), custom torch.autograd.Function, weight_norm
parametrizations and numpy in forward. Each is checked against eager (values, and gradients where
a backward exists) with the graph count that shows the construct no longer breaks the graph."""
import contextlib
import copy

import pytest
import torch
import torch.nn as nn

import asserting
from dynamo_lite.fallback.records import RECORDS
from dynamo_lite_corpus.misc import GradientReversalFn
from harness import (CountingBackend, Graphs, assert_same, capture, check, check_state_change, reset,
                     skip_in_reference)


# -- recurrent modules -----------------------------------------------------------------------------

RNNS = {
    "lstm_2_layers": (lambda: nn.LSTM(4, 5, 2), lambda: (torch.randn(3, 2, 4),)),
    "lstm_with_state": (lambda: nn.LSTM(4, 5), lambda: (torch.randn(3, 2, 4), (torch.randn(1, 2, 5),
                                                                                 torch.randn(1, 2, 5)))),
    "lstm_proj": (lambda: nn.LSTM(4, 6, proj_size=3), lambda: (torch.randn(3, 2, 4),)),
    "gru_bidirectional_batch_first": (lambda: nn.GRU(4, 5, batch_first=True, bidirectional=True),
                                      lambda: (torch.randn(2, 3, 4),)),
    "gru_unbatched": (lambda: nn.GRU(4, 5), lambda: (torch.randn(3, 4), torch.randn(1, 5))),
    "rnn_relu": (lambda: nn.RNN(4, 5, nonlinearity="relu"), lambda: (torch.randn(3, 2, 4),)),
    "rnn_no_bias": (lambda: nn.RNN(4, 5, bias=False), lambda: (torch.randn(3, 2, 4),)),
}


@pytest.mark.parametrize("name", RNNS)
def test_recurrent_module_is_one_graph(name):
    make_module, make_inputs = RNNS[name]
    torch.manual_seed(0)
    check(make_module().eval(), *make_inputs(), graphs=Graphs(
        dl=1, torch=None, why="TorchDynamo's allow_rnn=False graph-breaks on nn.RNN modules"))


def test_lstm_gradients_match_eager():
    torch.manual_seed(0)
    eager = nn.LSTM(4, 5, 2)
    model = copy.deepcopy(eager)
    backend = CountingBackend()
    compiled = capture(model, backend=backend)
    x = torch.randn(3, 2, 4)
    for net, params in ((eager, eager), (compiled, model)):
        out, (h, c) = net(x)
        (out.sum() + h.pow(2).sum() + c.mean()).backward()
    assert backend.count == 1
    for (name, a), (_, b) in zip(eager.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=lambda m: f"{name}.grad: {m}")


def test_rnn_weight_replaced_between_calls():
    """`ref() is not weight` in _weights_have_changed is decided while tracing; replacing a
    parameter makes the weak reference stale, which the guard must see."""
    torch.manual_seed(0)
    gru = nn.GRU(4, 5)
    x = torch.randn(3, 2, 4)

    def change():
        gru.weight_hh_l0 = nn.Parameter(torch.randn(15, 5))

    check_state_change(lambda x: gru(x)[0], (x,), change, max_graphs=None)


def test_rnn_weight_updated_in_place_reuses_graph():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5)
    x = torch.randn(3, 2, 4)

    def change():
        with torch.no_grad():
            lstm.weight_ih_l0.mul_(2)

    backend = check_state_change(lambda x: lstm(x)[0], (x,), change)
    assert backend.count == 1


def test_rnn_train_mode_recaptures():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5, 2, dropout=0.0).eval()
    check_state_change(lambda x: lstm(x)[1][0], (torch.randn(3, 2, 4),), lambda: lstm.train())


# -- custom autograd.Function ----------------------------------------------------------------------

GradReverse = GradientReversalFn       # DANN's gradient reversal (corpus model dann_grad_reversal)


class ClampedExp(torch.autograd.Function):
    """Saves its output for backward and uses a made-up gradient (so autograd's own would differ)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        ctx.mark_non_differentiable()
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y.clamp(max=2.0)


class ScaleNewStyle(torch.autograd.Function):
    """forward without ctx plus setup_context (the torch.func-compatible style); two outputs."""

    @staticmethod
    def forward(x, scale):
        return x * scale, x + 1

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.scale = inputs[1]

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return grad_a * ctx.scale * 10 + grad_b, None


class PrintingFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward of PrintingFn")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class InPlaceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _grad_reverse(x):
    return GradReverse.apply(torch.relu(x), 0.5).sin().sum()


def _clamped_exp(x):
    return (ClampedExp.apply(x * 3) * x).sum()


def _scale_new_style(x):
    a, b = ScaleNewStyle.apply(x.cos(), 3.0)
    return (a * b).sum()


@pytest.mark.parametrize("fn", [_grad_reverse, _clamped_exp, _scale_new_style])
def test_autograd_function_is_a_graph_op_with_its_own_backward(fn):
    torch.manual_seed(0)
    x = torch.randn(5, requires_grad=True)
    check(fn, x, graphs=1)
    backend = CountingBackend()
    reset()
    x_eager, x_captured = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    fn(x_eager).backward()
    capture(fn, backend=backend)(x_captured).backward()
    assert backend.count == 1
    assert any(getattr(n.target, "__name__", "").endswith("_apply") for n in backend.call_nodes(0)), \
        backend.describe()
    torch.testing.assert_close(x_captured.grad, x_eager.grad)


def test_dann_module_gradients_match_eager():
    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Linear(6, 8)
            self.domain = nn.Linear(8, 2)

        def forward(self, x, alpha: float = 0.5):
            feats = torch.relu(self.features(x))
            return self.domain(GradReverse.apply(feats, alpha))

    torch.manual_seed(0)
    eager = DANN()
    model = copy.deepcopy(eager)
    backend = CountingBackend()
    compiled = capture(model, backend=backend)
    x = torch.randn(4, 6)
    eager(x).pow(2).sum().backward()
    compiled(x).pow(2).sum().backward()
    assert backend.count == 1
    for (name, a), (_, b) in zip(eager.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=lambda m: f"{name}.grad: {m}")


OUTSIDE_WEIGHT = torch.tensor([1.5, -2.0, 0.5], requires_grad=True)


class GradModeReadingFn(torch.autograd.Function):
    """A forward that reads grad mode (eager runs every forward under no_grad) and multiplies by a
    parameter from outside (whose gradient never flows through apply); no setup_context, the
    style functorch's `functionalize` refuses."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        scale = 3.0 if torch.is_grad_enabled() else 2.0
        return (x * OUTSIDE_WEIGHT * scale).tanh()

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("never called: no input requires grad")


class ReturnsItsInputFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("grad_mode", [False, True], ids=["no_grad", "grad_enabled"])
def test_autograd_function_recording_nothing_is_its_forward_in_the_graph(grad_mode):
    """No input requires grad (or grad mode is off): eager's apply records no backward, so the
    graph holds the forward's own ops (no apply node a backend must retrace), run under no_grad as
    eager runs it: the output does not require grad although the outside weight does."""
    def fn(x):
        with torch.set_grad_enabled(grad_mode):
            y = GradModeReadingFn.apply(x + 1)
            return y * 2, y.requires_grad, torch.is_grad_enabled()

    result = check(fn, torch.randn(3), graphs=1)
    assert result.eager.value[1] is False
    names = [getattr(n.target, "__name__", str(n.target)) for n in result.backend.call_nodes(0)]
    assert not any(name.endswith("_apply") for name in names), names
    assert "tanh" in names, names


def test_autograd_function_returning_its_input_recording_nothing_stays_an_apply_call():
    """Eager returns a fresh alias of the input there (not the input itself): a write through it
    changes the input, and `is` says False."""
    def fn(x):
        with torch.no_grad():
            y = ReturnsItsInputFn.apply(x)
            y.add_(1)
            return y, y is x

    result = check(fn, torch.randn(3), graphs=None)
    assert result.eager.value[1] is False
    assert any(getattr(n.target, "__name__", "").endswith("_apply") for n in result.backend.call_nodes(0))


def test_autograd_function_that_prints_is_a_graph_break():
    def fn(x):
        return PrintingFn.apply(x + 1) - 1

    check(fn, torch.randn(3), graphs=Graphs(dl=3, torch=None, why="a break at the apply call: the graphs before "
                                                                 "and after it, and the forward's own after its print"))


def test_autograd_function_that_changes_its_input_in_place_is_a_graph_break():
    def fn(x):
        y = x + 1
        return InPlaceFn.apply(y) + y

    check(fn, torch.randn(3), graphs=Graphs(dl=3, torch=None, why="a break at the apply call: the graphs before "
                                                                 "and after it, and the forward's own"))


SCALE = 2.0


class GlobalScaleFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SCALE

    @staticmethod
    def backward(ctx, g):
        return g * SCALE


def test_autograd_function_reading_a_global_follows_its_changes():
    def fn(x):
        return GlobalScaleFn.apply(x)

    def change():
        global SCALE
        SCALE = 5.0

    try:
        check_state_change(fn, (torch.randn(3),), change)
    finally:
        globals()["SCALE"] = 2.0


# -- parametrizations ------------------------------------------------------------------------------

class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(-1, -2)


def _weight_normed_conv():
    return nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1))


def _symmetric_linear():
    layer = nn.Linear(5, 5)
    nn.utils.parametrize.register_parametrization(layer, "weight", Symmetric())
    return layer


PARAMETRIZED = {
    "weight_norm_conv": (_weight_normed_conv, lambda: torch.randn(2, 4, 7)),
    "custom_symmetric": (_symmetric_linear, lambda: torch.randn(3, 5)),
}


@pytest.mark.parametrize("name", PARAMETRIZED)
def test_parametrized_module_is_one_graph(name):
    make_module, make_input = PARAMETRIZED[name]
    torch.manual_seed(0)
    check(make_module(), make_input(), graphs=1)


def test_weight_norm_gradients_reach_the_original_parameters():
    torch.manual_seed(0)
    eager = _weight_normed_conv()
    model = copy.deepcopy(eager)
    backend = CountingBackend()
    compiled = capture(model, backend=backend)
    x = torch.randn(2, 4, 7)
    eager(x).sin().sum().backward()
    compiled(x).sin().sum().backward()
    assert backend.count == 1
    for (name, a), (_, b) in zip(eager.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=lambda m: f"{name}.grad: {m}")


def test_parametrization_cache_enabled_between_calls():
    """Inside `parametrize.cached()` the property reads a module-level cache: the guard on the
    cache flag must see it switch."""
    torch.manual_seed(0)
    layer = _symmetric_linear()
    entered = []

    def change():
        ctx = nn.utils.parametrize.cached()
        ctx.__enter__()
        entered.append(ctx)

    try:
        check_state_change(lambda x: layer(x), (torch.randn(3, 5),), change, max_graphs=None)
    finally:
        for ctx in entered:
            ctx.__exit__(None, None, None)


def test_parametrized_original_replaced_in_place():
    torch.manual_seed(0)
    conv = _weight_normed_conv()

    def change():
        with torch.no_grad():
            conv.parametrizations.weight.original0.mul_(3)

    backend = check_state_change(lambda x: conv(x), (torch.randn(2, 4, 7),), change)
    assert backend.count == 1


# -- numpy in forward ------------------------------------------------------------------------------

np = pytest.importorskip("numpy")


def _sinusoid_table(n_position, d_hid):
    def cal_angle(position, hid_idx):
        return position / np.power(10000, 2 * (hid_idx // 2) / d_hid)

    table = np.array([[cal_angle(pos, j) for j in range(d_hid)] for pos in range(n_position)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table)


def test_numpy_on_constants_folds_into_a_graph_constant():
    def fn(x):
        return x + _sinusoid_table(x.size(1), x.size(2)).unsqueeze(0)

    result = check(fn, torch.randn(2, 5, 6), graphs=Graphs(dl=1, torch=None, why="TorchDynamo fails on this model"))
    check(fn, torch.randn(2, 7, 4), graphs=1)       # other sizes: another table, not the first one
    assert not any("sin" in str(n.target) for n in result.backend.call_nodes(0))


def test_tensor_from_a_folded_array_is_fresh_on_every_call():
    def fn(x):
        return torch.from_numpy(np.arange(4, dtype=np.float32)) * 1, torch.as_tensor(np.ones(4)) + x

    backend = CountingBackend()
    reset()
    compiled = capture(fn, backend=backend)
    first, _ = compiled(torch.zeros(4))
    first.add_(100)                       # the caller changes what it got
    again, other = compiled(torch.zeros(4))
    torch.testing.assert_close(again, torch.arange(4, dtype=torch.float32))
    torch.testing.assert_close(other, torch.ones(4, dtype=torch.float64))
    assert backend.count == 1


def test_returned_folded_array_is_fresh_on_every_call():
    def fn(x):
        a = np.arange(3)
        return x + 1, a, a

    backend = CountingBackend()
    reset()
    compiled = capture(fn, backend=backend)
    _, a, b = compiled(torch.zeros(2))
    assert a is b                           # one object, as in eager
    a += 10
    _, again, _ = compiled(torch.zeros(2))
    assert again.tolist() == [0, 1, 2]
    assert backend.count == 1


def test_array_changed_after_from_numpy_is_seen_by_the_tensor():
    def fn(x):
        a = np.zeros(3, dtype=np.float32)
        t = torch.from_numpy(a)
        a[0] = 5.0                          # t shares a's memory in eager
        return x + t

    check(fn, torch.randn(3), graphs=None)


def test_array_argument_becomes_a_graph_input():
    def fn(x, arr):
        return x * torch.from_numpy(arr) + torch.tensor(arr)

    backend = CountingBackend()
    reset()
    compiled = capture(fn, backend=backend)
    x = torch.randn(3)
    for arr in (np.array([1.0, 2.0, 3.0], dtype=np.float32), np.array([7.0, -1.0, 0.5], dtype=np.float32)):
        torch.testing.assert_close(compiled(x, arr), fn(x, arr))       # new contents, same graph
    assert backend.count == 1
    assert len([n for n in backend.graphs[0].graph.nodes if n.op == "placeholder"]) == 2
    ints = np.array([1, 2, 3])
    torch.testing.assert_close(compiled(x, ints), fn(x, ints))           # another dtype: recaptured
    assert backend.count == 2
    shared = np.array([1.0, 2.0, 3.0], dtype=np.float32)

    def mutate_through_tensor(arr):
        torch.from_numpy(arr).mul_(2)      # in place, through the shared memory
        return arr

    reset()
    eager_arr, captured_arr = shared.copy(), shared.copy()
    mutate_through_tensor(eager_arr)
    capture(mutate_through_tensor, backend=CountingBackend())(captured_arr)
    assert captured_arr.tolist() == eager_arr.tolist()


def test_numpy_mask_roundtrip_is_one_graph():
    class MaskScorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x, lengths):
            mask = np.arange(x.size(1))[None, :] < lengths.cpu().numpy()[:, None]
            mask = torch.from_numpy(mask).to(x.device)
            return self.fc(x).masked_fill(~mask.unsqueeze(-1), 0.0).sum(1)

    torch.manual_seed(0)
    result = check(MaskScorer(), torch.randn(3, 5, 6), torch.tensor([5, 2, 3]), graphs=1)
    x, lengths = torch.randn(3, 5, 6), torch.tensor([1, 4, 0])
    torch.testing.assert_close(result.compiled(x, lengths), MaskScorer.forward(result.compiled, x, lengths))


def test_numpy_random_is_not_folded():
    def fn(x):
        return x + torch.from_numpy(np.random.rand(3))

    reset()
    compiled = capture(fn, backend=CountingBackend())
    for _ in range(2):
        np.random.seed(1)
        expected = fn(torch.zeros(3, dtype=torch.float64))
        np.random.seed(1)
        torch.testing.assert_close(compiled(torch.zeros(3, dtype=torch.float64)), expected)


TABLE = np.arange(3.0)


def test_numpy_global_array_is_read_on_every_call():
    def fn(x):
        return x + torch.from_numpy(np.sin(TABLE))

    def change():
        TABLE[:] = [5.0, 6.0, 7.0]

    check_state_change(fn, (torch.zeros(3, dtype=torch.float64),), change, max_graphs=None)


def test_cpu_and_to_same_device_are_not_graph_ops():
    def fn(x):
        return x.cpu().to("cpu").to(torch.float32) is x, x.cpu() + 1

    result = check(fn, torch.randn(3), graphs=1)
    assert len(result.backend.call_nodes(0)) == 1


def _folded_array_across_a_break(x):
    a = np.arange(3.0)
    b = a
    a += 1                                  # in place: b sees it
    print("between")
    b[0] = 10.0
    return x + torch.from_numpy(a)


def _shared_array_changed_after_a_break(x):
    a = np.zeros(3)
    t = torch.from_numpy(a)
    print("between")
    a[1] = 4.0
    return x + t


@pytest.mark.parametrize("fn", [_folded_array_across_a_break, _shared_array_changed_after_a_break])
def test_folded_arrays_at_a_graph_break(fn):
    check(fn, torch.zeros(3, dtype=torch.float64), graphs=None)


# -- assert on tensor values -----------------------------------------------------------------------

ASSERT_CASES = [
    (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 1, 2])),
    (torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([0, 1, 2])),
    (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 5, 2])),
    (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([-1, 1, 2])),
]


@pytest.mark.parametrize("fn", [asserting.assert_not, asserting.assert_and, asserting.assert_or,
                                asserting.assert_ambiguous])
@pytest.mark.parametrize("case", range(len(ASSERT_CASES)))
def test_assert_on_tensor_values_is_a_graph_node(fn, case):
    """The same captured graph raises AssertionError (with its message) exactly when eager does."""
    x, t = ASSERT_CASES[case]
    # `a or b`: `a` true skips `b`, a real branch (a graph break); `b` then is an assert
    expected = 2 if fn is asserting.assert_or else 1
    check(fn, x, t, graphs=Graphs(dl=expected, torch=None, why="TorchDynamo breaks on the `and`/`or` of an assert"))


# -- torch._check_tensor_all -----------------------------------------------------------------------

def _checked_scale(x, t):
    y = x * 2
    torch._check_tensor_all(t >= 0)         # transformers' torch_compilable_check while compiling
    return y + t


def _checked_with_value_error(x, t):
    torch._check_tensor_all_with(ValueError, t < 3)
    return x - t


def _checked_with_a_message(x, t):
    torch._check_tensor_all(t >= 0, lambda: f"negative: {t.tolist()}")
    return x + t


def _checked_int_tensor(x, t):
    torch._check_tensor_all(t)              # not a bool tensor: torch's TypeError, as in eager
    return x


@pytest.mark.parametrize("fn", [_checked_scale, _checked_with_value_error])
@pytest.mark.parametrize("case", range(len(ASSERT_CASES)))
def test_check_tensor_all_is_a_graph_node(fn, case):
    """The same graph raises torch's exception and message exactly when eager does: no break at
    the `.item()` torch's own Python code reads the condition with (TorchDynamo breaks there)."""
    x, t = ASSERT_CASES[case]
    check(fn, x, t, graphs=Graphs(dl=1, torch=None, why="TorchDynamo breaks at the .item() inside the check"))


@pytest.mark.parametrize("fn", [_checked_with_a_message, _checked_int_tensor])
@pytest.mark.parametrize("case", [0, 3])
def test_check_tensor_all_traced_as_python_where_it_is_not_a_node(fn, case):
    check(fn, *ASSERT_CASES[case], graphs=None)


def _checked_after_a_print(x, t):
    ok = t >= 0
    print("checking")
    torch._check_tensor_all(ok)             # between two breaks: a graph of the check alone
    print("checked")
    return x * 2


@pytest.mark.parametrize("case", range(len(ASSERT_CASES)))
def test_a_graph_of_checks_alone_runs_as_is(case):
    # the comparison (a graph), the check alone (no work for a backend), the multiplication
    # (a graph; not reached where the check raises)
    x, t = ASSERT_CASES[case]
    expected = 1 if (t < 0).any() else 2
    check(_checked_after_a_print, x, t, graphs=Graphs(dl=expected, torch=None, why="TorchDynamo breaks at the "
                                                                                     ".item() inside the check"))
    assert any(r.ops_as_is for r in RECORDS)


class _State:
    seen = False


def _counted_then_asserted(state, x, t):
    state.seen = True                        # replayed after the graph: must happen before a raise
    return asserting.assert_positive(x) * t


def _counted_then_checked(state, x, t):
    state.seen = True
    return _checked_scale(x, t)


def _counted_dropout_checked_written(state, x, t, buf):
    state.seen = True
    y = torch.nn.functional.dropout(x, 0.5, training=True)    # draws before the check
    torch._check_tensor_all(t >= 0)
    buf.add_(y)                                                 # written after it
    return y * 2


@pytest.mark.parametrize("fn", [_counted_then_asserted, _counted_then_checked, _counted_dropout_checked_written])
def test_a_check_after_a_pending_side_effect_is_in_the_graph_and_raises_after_it(fn):
    """A check on tensor values (an assert, torch._check_tensor_all) made while a Python side
    effect is pending (it is replayed after the graph) is a graph node all the same: when it
    fails, on the first call or any later one, the frame runs again eagerly (random generators and
    written inputs put back first), so the effect happens before the exception as in eager."""
    reset()
    backend = CountingBackend()
    captured = capture(fn, backend=backend)
    good, bad = torch.tensor([1, 2]), torch.tensor([-1, 2])
    for i, (x, t) in enumerate([(torch.ones(2), good), (torch.ones(2), good), (-torch.ones(2), good),
                                (torch.ones(2), bad), (torch.ones(2), good), (torch.ones(2), bad)]):
        extra = (torch.zeros(2),) if fn is _counted_dropout_checked_written else ()
        outcomes = []
        for run in (fn, captured):
            state = _State()
            args = (state, x.clone(), t) + tuple(e.clone() for e in extra)
            torch.manual_seed(i)
            try:
                outcome = ("value", run(*args))
            except (AssertionError, RuntimeError) as e:
                outcome = (type(e), str(e))
            # the effect, the written input, where the generator was left
            outcomes.append(outcome + (state.seen, args[3:], torch.rand(1)))
        assert_same(outcomes[0], outcomes[1], f"call {i}")
    assert backend.count == 1                                 # no break at the check


# -- modules made inside forward -------------------------------------------------------------------

class _Instantier(dict):
    """transformers' ACT2FN: `ACT2FN["silu"]` builds a fresh activation module on every lookup."""

    def __getitem__(self, key):
        cls, kwargs = super().__getitem__(key)
        return cls(**kwargs)


ACTIVATIONS = _Instantier(silu=(nn.SiLU, {}), gelu=(nn.GELU, {"approximate": "tanh"}),
                          leaky=(nn.LeakyReLU, {"negative_slope": 0.2}))


class _UserInitActivation(nn.Module):
    made = 0

    def __init__(self):
        super().__init__()
        type(self).made += 1            # user code in __init__: must run once per call, as in eager

    def forward(self, x):
        return x.relu()


@pytest.mark.parametrize("name", ["silu", "gelu", "leaky"])
def test_activation_module_made_in_forward_stays_in_the_graph(name):
    def fn(x):
        return ACTIVATIONS[name](x * 2) + 1
    check(fn, torch.randn(4, 5), graphs=1)


def test_inplace_activation_module_made_in_forward():
    def fn(x):
        h = x + 1
        return nn.ReLU(inplace=True)(h), h
    check(fn, torch.randn(4, 5), graphs=1)


@skip_in_reference("TorchDynamo inlines __init__, guards on the class counter and recompiles on every call")
def test_module_with_user_init_made_in_forward_runs_init_each_call():
    def fn(x):
        return _UserInitActivation()(x) * 3
    before = _UserInitActivation.made
    check(fn, torch.randn(3), graphs=Graphs(dl=1, torch=None, why="dynamo_lite breaks at the construction (user "
                                                                  "__init__); the graph after it holds relu and the product"))
    assert _UserInitActivation.made - before == 4          # two eager calls, two captured calls


def test_module_with_parameters_made_in_forward_is_not_captured_as_a_constant():
    def fn(x):
        torch.manual_seed(1)
        return nn.Linear(3, 2)(x)                            # fresh random weights on every call
    check(fn, torch.randn(4, 3), graphs=None)


def test_module_made_in_forward_that_escapes_is_a_new_object_each_call():
    def fn(x):
        act = nn.Tanh()
        return act(x), act
    reset()
    compiled = capture(fn, backend=CountingBackend())
    x = torch.randn(3)
    (y1, m1), (y2, m2) = compiled(x), compiled(x)
    assert_same(torch.tanh(x), y1)
    assert_same(torch.tanh(x), y2)
    assert isinstance(m1, nn.Tanh) and m1 is not m2


# -- torch's associative_scan (transformers' Mamba on its compile path) -----------------------------

from torch._higher_order_ops.associative_scan import associative_scan  # noqa: E402
from dynamo_lite.higher_order import MAX_UNROLLED_SCAN  # noqa: E402


def _linear_recurrence(left, right):
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 2, -1])
def test_associative_scan_of_a_tuple_is_one_graph(dim, reverse):
    def fn(a, b):
        states = associative_scan(_linear_recurrence, (a, b), dim=dim, reverse=reverse, combine_mode="generic")
        return states[1].sum(dim, keepdim=True) + states[0]
    torch.manual_seed(0)
    check(fn, torch.rand(4, 3, 5), torch.randn(4, 3, 5), graphs=1, atol=1e-5, rtol=1e-5)


def test_associative_scan_with_a_closure_over_a_tensor():
    def fn(x, scale):
        def combine(left, right):
            return torch.maximum(left, right * scale)
        return associative_scan(combine, x, 1, combine_mode="generic")
    torch.manual_seed(0)
    check(fn, torch.randn(2, 6), torch.tensor(1.0), graphs=1)


def test_associative_scan_too_long_to_unroll_still_computes_the_scan():
    def fn(x):
        return associative_scan(lambda a, b: a + b, x + 1, 0, combine_mode="generic")
    x = torch.randn(MAX_UNROLLED_SCAN + 1, 2)
    result = check(fn, x, graphs=Graphs(
        dl=1, torch=None, why="dynamo_lite breaks at the scan past its unroll limit; the scan runs eagerly, "
                              "torch's higher-order machinery with the frame hook off (its combine calls are "
                              "not captured one by one)"))
    torch.testing.assert_close(result.captured.value, (x + 1).cumsum(0))
