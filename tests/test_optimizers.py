"""torch.optim optimizers under capture: `opt.step()` of AdamW, Adam and SGD with momentum (the
for-loop and the foreach implementations) runs from cached graphs, compared with eager step by
step (parameters and every state tensor), with learning-rate schedulers, optimizers made anew and
param groups added between calls. Then the mechanisms the optimizers need, each on its own: 0-d
tensors passed as Scalars, `.grad` of inputs, dicts keyed by tensors, `torch.set_grad_enabled` as
a call, try blocks in called functions, `function.__get__`."""
import pytest
import torch

import dynamo_lite as dl
from dynamo_lite.fallback import records
from dynamo_lite.graph_builder import written_inputs
from harness import CountingBackend

KINDS = {
    "adamw": lambda params, foreach: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=foreach),
    "adam": lambda params, foreach: torch.optim.Adam(params, lr=1e-2, foreach=foreach),
    "sgd": lambda params, foreach: torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=foreach),
}
# The compile path of torch.optim (taken while tracing, as under TorchDynamo: is_compiling() is
# True) keeps the step count a tensor and computes the bias corrections in float32 where eager
# uses Python floats (float64): results agree to float32 rounding, not bit for bit.
TOL = dict(rtol=1e-5, atol=1e-6)


def _model(device="cpu"):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)


def _assert_same_state(eager_opt, captured_opt):
    eager, captured = eager_opt.state_dict(), captured_opt.state_dict()
    assert eager["param_groups"] == captured["param_groups"]
    assert eager["state"].keys() == captured["state"].keys()
    for index, state in eager["state"].items():
        assert state.keys() == captured["state"][index].keys(), index
        for name, value in state.items():
            other = captured["state"][index][name]
            if isinstance(value, torch.Tensor):
                assert value.dtype == other.dtype and value.device == other.device, (index, name)
                torch.testing.assert_close(other, value, **TOL, msg=f"state[{index}][{name!r}]")
            else:
                assert other == value, (index, name)


def _train(kind, foreach, steps, schedule=None, captured=False, backend=None, per_step=None, device="cpu"):
    """`steps` optimizer steps on fixed data; returns (model, optimizer, graphs made after each step)."""
    model = _model(device)
    opt = KINDS[kind](model.parameters(), foreach)
    scheduler = schedule(opt) if schedule else None

    def step():
        opt.step()
    if captured:
        step = dl.capture(step, backend=backend)
    counts = []
    data = torch.Generator().manual_seed(1)
    for i in range(steps):
        x = torch.randn(3, 4, generator=data).to(device)
        model(x).pow(2).sum().backward()
        step()
        opt.zero_grad()
        if scheduler is not None:
            scheduler.step()
        if per_step is not None:
            per_step(i, model, opt)
        counts.append(backend.count if backend is not None else 0)
    return model, opt, counts


def _compare(kind, foreach, steps, schedule=None, per_step=None, device="cpu"):
    eager_model, eager_opt, _ = _train(kind, foreach, steps, schedule, per_step=per_step, device=device)
    backend = CountingBackend()
    model, opt, counts = _train(kind, foreach, steps, schedule, captured=True, backend=backend, per_step=per_step,
                                device=device)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p, dict(eager_model.named_parameters())[name], **TOL, msg=name)
    _assert_same_state(eager_opt, opt)
    return backend, counts


@pytest.mark.parametrize("foreach", [None, False, True], ids=["default", "for_loop", "foreach"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_steps_match_eager_and_steady_state_runs_from_the_cache(kind, foreach):
    backend, counts = _compare(kind, foreach, steps=6)
    # the first step makes the state: captured, it would fill `state` and fail its own guards
    # (DL037), so it runs eagerly without compiling a graph that could never run again; the second
    # step makes the one graph every later step reuses
    assert counts == [0, 1, 1, 1, 1, 1], counts
    assert any(r.kind is not None and r.kind.id == "DL037" for r in records.RECORDS)
    # the steady-state graph updates parameters and state tensors in place: its inputs are written
    placeholders = [n for n in backend.graphs[-1].graph.nodes if n.op == "placeholder"]
    written = written_inputs(backend.graphs[-1].graph)
    assert len(placeholders) > 8 and len(written) >= 8, (len(placeholders), written)


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_scheduler_changing_lr_every_step_does_not_recapture_every_step(kind, foreach):
    backend, counts = _compare(kind, foreach, steps=7,
                               schedule=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.7))
    assert counts[-1] <= 3 and counts[-4] == counts[-1], counts
    # the learning rate reaches the last graph as an input, not as a constant
    last = backend.graphs[-1]
    assert any(n.meta.get("real_type") is float for n in last.graph.find_nodes(op="placeholder")), last.code


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("foreach", [None, False], ids=["default", "for_loop"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cuda_steps_match_eager(kind, foreach):
    # on CUDA the default is foreach; the step counts stay on the CPU (capturable=False)
    _, counts = _compare(kind, foreach, steps=6, device="cuda",
                         schedule=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.7))
    assert counts[-1] <= 3 and counts[-4] == counts[-1], counts


def test_lambda_lr_warmup_keeps_the_graph_count_bounded():
    schedule = lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))  # noqa: E731
    _, counts = _compare("adamw", False, steps=8, schedule=schedule)
    assert counts[-1] <= 3 and counts[-5] == counts[-1], counts


def test_an_optimizer_made_anew_between_calls_gets_fresh_state():
    def remake(i, model, opt):
        if i == 2:
            holder["opt"] = KINDS["adam"](model.parameters(), False)

    results = []
    for captured in (False, True):
        holder = {}
        model = _model()
        holder["opt"] = KINDS["adam"](model.parameters(), False)

        def step():
            holder["opt"].step()
        if captured:
            step = dl.capture(step, backend=CountingBackend())
        data = torch.Generator().manual_seed(1)
        for i in range(5):
            model(torch.randn(3, 4, generator=data)).pow(2).sum().backward()
            step()
            holder["opt"].zero_grad()
            remake(i, model, holder["opt"])
        results.append((model, holder["opt"]))
    (eager_model, eager_opt), (model, opt) = results
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, **TOL)
    _assert_same_state(eager_opt, opt)
    assert opt.state_dict()["state"][0]["step"].item() == 2.0


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
def test_a_param_group_added_between_calls_recaptures_and_stays_correct(foreach):
    extra = {}

    def add_group(i, model, opt):
        if i == 2:
            torch.manual_seed(5)
            extra[id(opt)] = torch.nn.Parameter(torch.randn(3))
            opt.add_param_group({"params": [extra[id(opt)]], "lr": 0.05})
        if id(opt) in extra:
            extra[id(opt)].grad = torch.full((3,), 0.5 * (i + 1))

    backend, counts = _compare("adamw", foreach, steps=6, per_step=add_group)
    assert counts[2] < counts[-1] <= counts[2] + 2, counts       # recaptured for the new group, then cached
    assert counts[-2] == counts[-1], counts


def test_a_whole_training_step_with_the_scheduler_inside_the_captured_function():
    def run(captured):
        model = _model()
        opt = KINDS["adamw"](model.parameters(), None)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10)

        def train_step(x, y):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            scheduler.step()          # runs eagerly (a break): schedulers are not traced
            return loss.detach()
        backend = CountingBackend()
        fn = dl.capture(train_step, backend=backend) if captured else train_step
        data = torch.Generator().manual_seed(3)
        losses = [fn(torch.randn(5, 4, generator=data), torch.randn(5, 2, generator=data)) for _ in range(8)]
        return losses, model, opt, backend

    eager_losses, eager_model, eager_opt, _ = run(False)
    losses, model, opt, backend = run(True)
    torch.testing.assert_close(losses, eager_losses, **TOL)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, **TOL)
    _assert_same_state(eager_opt, opt)
    assert backend.count <= 4, backend.count     # forward, the step making the state, the step updating it
    assert any("addcdiv_" in g.code for g in backend.graphs)      # the optimizer's update is in a graph


def test_a_lambda_lr_stepped_inside_the_train_step_makes_no_graph_of_its_own():
    # LambdaLR calls its lambda on the step count (an int) from the scheduler's step, which runs
    # eagerly (a break). The lambda holds no tensor and names no torch module: it runs as it is,
    # as under TorchDynamo, where capturing it made the count a graph input after it changed and
    # `0.8 ** s` a graph of its own (5 graphs where TorchDynamo makes 4).
    torch_dynamo = pytest.importorskip("torch._dynamo")

    def run(wrap):
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.8 ** s)

        def train_step(x, y):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            scheduler.step()
            return loss.detach()
        fn = wrap(train_step)
        data = torch.Generator().manual_seed(3)
        losses = [fn(torch.randn(5, 4, generator=data), torch.randn(5, 2, generator=data)) for _ in range(6)]
        return losses, model, opt

    eager_losses, eager_model, eager_opt = run(lambda f: f)
    backend = CountingBackend()
    losses, model, opt = run(lambda f: dl.capture(f, backend=backend))
    torch.testing.assert_close(losses, eager_losses, **TOL)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, **TOL)
        torch.testing.assert_close(p.grad, q.grad, **TOL)
    _assert_same_state(eager_opt, opt)
    assert not [g for g in backend.graphs if "pow" in g.code], "the lambda made a graph"
    graphs = []
    torch_dynamo.reset()
    run(lambda f: torch.compile(f, backend=lambda gm, _: graphs.append(gm) or gm.forward))
    torch_dynamo.reset()
    assert backend.count <= len(graphs), (backend.count, len(graphs))


def test_functions_torch_marks_disabled_run_as_they_are():
    # Optimizer.zero_grad (and state_dict, add_param_group) carry torch's `torch._disable_dynamo`
    # mark: a call is a break (DL036) and its frame is not captured, as under TorchDynamo; it used
    # to be traced on its own frame, a break per `p.grad = None` and a loop stretch run eagerly.
    # The break at state_dict() comes after opt.step(), whose inlined ops sit in a try block: the
    # frame breaks at the step's call instead of running eagerly (DL018 could not resume).
    def run(wrap):
        model = _model()
        opt = KINDS["sgd"](model.parameters(), None)
        states = []

        def train_step(x, y):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            states.append(opt.state_dict())
            return loss.detach()
        fn = wrap(train_step)
        data = torch.Generator().manual_seed(4)
        losses = [fn(torch.randn(5, 4, generator=data), torch.randn(5, 2, generator=data)) for _ in range(4)]
        return losses, model, opt, states

    eager_losses, eager_model, eager_opt, eager_states = run(lambda f: f)
    first = len(records.RECORDS)
    losses, model, opt, states = run(lambda f: dl.capture(f, backend=CountingBackend()))
    torch.testing.assert_close(losses, eager_losses, **TOL)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, **TOL)
        torch.testing.assert_close(p.grad, q.grad, **TOL)
    _assert_same_state(eager_opt, opt)
    assert [s["param_groups"] for s in states] == [s["param_groups"] for s in eager_states]
    mine = list(records.RECORDS)[first:]
    assert not [r for r in mine if r.name in ("zero_grad", "state_dict")], [r.qualname for r in mine]
    assert {r.detail for r in mine if r.status == "break" and r.kind.id == "DL036"} == {
        "Optimizer.zero_grad", "Optimizer.state_dict"}
    # nothing runs eagerly but the first step, which makes the optimizer's state (DL037)
    assert not [r for r in mine if r.status in ("fallback", "error") and r.kind.id != "DL037"], \
        [(r.qualname, r.detail) for r in mine]


def test_two_optimizers_with_schedulers_do_not_keep_recapturing(recwarn):
    def run(captured):
        torch.manual_seed(0)
        gen, disc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
        opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
        opt_d = torch.optim.SGD(disc.parameters(), lr=1e-2, momentum=0.9)
        schedulers = [torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.9) for o in (opt_g, opt_d)]
        backend = CountingBackend()
        steps = [lambda: opt_g.step(), lambda: opt_d.step()]
        if captured:
            steps = [dl.capture(s, backend=backend) for s in steps]
        data = torch.Generator().manual_seed(2)
        for _ in range(20):
            disc(gen(torch.randn(2, 4, generator=data))).sum().backward()
            for step in steps:
                step()
            opt_g.zero_grad(), opt_d.zero_grad()
            for s in schedulers:
                s.step()
        return gen, disc, backend.count

    eager_gen, eager_disc, _ = run(False)
    first = len(records.RECORDS)
    gen, disc, count = run(True)
    captures = [r.qualname for r in list(records.RECORDS)[first:]]
    for p, q in zip([*gen.parameters(), *disc.parameters()], [*eager_gen.parameters(), *eager_disc.parameters()]):
        torch.testing.assert_close(p, q, **TOL)
    assert count == 4, count
    # the learning rates (floats read from param_groups) do not recapture, also when one float
    # object is both the rate and its `initial_lr`
    assert captures.count("_use_grad_for_differentiable.<locals>._use_grad") <= 4, captures
    assert not [w for w in recwarn if "dynamo_lite" in str(w.message)], [str(w.message)[:200] for w in recwarn]


def test_sgd_momentum_buffers_are_created_then_updated():
    backend, counts = _compare("sgd", False, steps=4)
    assert counts == [0, 1, 1, 1]        # the step that makes the buffers runs eagerly (DL037)


def test_graph_counts_are_no_worse_than_torchdynamo():
    torch_dynamo = pytest.importorskip("torch._dynamo")
    schedule = lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.7)  # noqa: E731
    for kind in ("adamw", "sgd"):
        model = _model()
        opt = KINDS[kind](model.parameters(), False)
        scheduler = schedule(opt)
        frames = []

        def counting(gm, example_inputs):
            frames.append(gm)
            return gm.forward
        torch_dynamo.reset()
        compiled = torch.compile(lambda: opt.step(), backend=counting)
        for _ in range(6):
            model(torch.randn(3, 4)).sum().backward()
            compiled()
            opt.zero_grad()
            scheduler.step()
        torch_dynamo.reset()
        backend, _ = _compare(kind, False, steps=6, schedule=schedule)
        assert backend.count <= len(frames), (kind, backend.count, len(frames))


# ---- the mechanisms, one at a time ---------------------------------------------------------------

def test_a_0d_tensor_passed_as_a_scalar_stays_in_the_graph():
    def f(x, a, b, t):
        x.addcdiv_(a, b, value=-t)
        return x.add(a, alpha=t * 2)

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    for scale in (0.5, 2.0):
        args = [torch.randn(4), torch.randn(4), torch.rand(4) + 1, torch.tensor(scale)]
        eager_args = [a.clone() for a in args]
        torch.testing.assert_close(captured(*args), f(*eager_args))
        torch.testing.assert_close(args[0], eager_args[0])
    assert backend.count == 1


def test_an_op_whose_output_depends_on_the_scalar_is_still_a_break():
    def f(x, t):
        return torch.arange(t) + x.sum()

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    for n in (3, 5):
        x, t = torch.randn(2), torch.tensor(n)
        torch.testing.assert_close(captured(x, t), f(x, t))
    report = dl.explain(f)(torch.randn(2), torch.tensor(4))
    assert any(b.kind_id == "DL003" for b in report.breaks), report


def test_grad_of_an_input_is_read_and_guarded():
    w = torch.nn.Parameter(torch.randn(3))

    def f(p):
        return p * 2 if p.grad is None else p - 0.1 * p.grad

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    torch.testing.assert_close(captured(w), f(w))
    w.grad = torch.randn(3)
    torch.testing.assert_close(captured(w), f(w))
    w.grad = torch.randn(3)
    torch.testing.assert_close(captured(w), f(w))
    assert backend.count == 2


def test_set_grad_enabled_called_as_a_function_switches_the_mode_at_once():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(True)
        return y, x * 3

    x = torch.randn(3, requires_grad=True)
    eager = f(x)
    captured = dl.capture(f, backend=CountingBackend())(x)
    assert [t.requires_grad for t in captured] == [t.requires_grad for t in eager] == [False, True]
    assert torch.is_grad_enabled()
    torch.testing.assert_close(captured, eager)


STATE = {}


def _tensor_keyed_update(params, g):
    for p in params:
        entry = STATE[p]
        if "avg" not in entry:
            entry["avg"] = torch.zeros_like(p)
        entry["avg"].mul_(0.5).add_(g)
        p.add_(entry["avg"])
    return len(STATE)


def test_a_dict_keyed_by_tensors_is_read_one_key_at_a_time():
    import collections
    results = []
    for captured in (False, True):
        global_state = collections.defaultdict(dict)
        globals()["STATE"] = global_state
        params = [torch.zeros(2), torch.zeros(3)]
        backend = CountingBackend()
        fn = dl.capture(_tensor_keyed_update, backend=backend) if captured else _tensor_keyed_update
        lengths = [fn(params, torch.tensor(1.0)) for _ in range(3)]
        del global_state[params[1]]                      # an entry removed: recapture, state made again
        lengths.append(fn(params, torch.tensor(2.0)))
        results.append((lengths, [p.clone() for p in params],
                        {i: {k: v.clone() for k, v in global_state[p].items()} for i, p in enumerate(params)},
                        backend.count))
    (eager_len, eager_params, eager_state, _), (cap_len, cap_params, cap_state, count) = results
    assert cap_len == eager_len
    torch.testing.assert_close(cap_params, eager_params)
    torch.testing.assert_close(cap_state, eager_state)
    assert count == 3          # state made, state updated, one entry made again


def _careful(x):
    try:
        return x.add_(1)
    finally:
        x.mul_(2)


def test_a_try_block_in_a_called_function_breaks_at_the_call_not_the_frame():
    def f(x, y):
        z = y.sin() * 2          # stays in a graph
        _careful(x)
        return z + x

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    x, y = torch.randn(3), torch.randn(3)
    ex, ey = x.clone(), y.clone()
    torch.testing.assert_close(captured(x, y), f(ex, ey))
    torch.testing.assert_close(x, ex)
    targets = {getattr(n.target, "__name__", n.target) for g in backend.graphs for n in g.graph.nodes}
    assert "sin" in targets


def test_function_get_binds_a_method_by_hand():
    class Scale:
        def __init__(self):
            self.k = 3.0

        def apply(self, x):
            return x * self.k

    s = Scale()
    func = Scale.apply

    def f(x):
        return func.__get__(s, Scale)(x) + func.__get__(None, Scale)(s, x)

    backend = CountingBackend()
    x = torch.randn(3)
    torch.testing.assert_close(dl.capture(f, backend=backend)(x), f(x))
    assert backend.count == 1


class _PerTensorState:
    """Per-parameter state in a dict attribute, as optimizers keep it; `extra` adds a new tensor
    key on every call (a frame that invalidates its own guards each time)."""

    def __init__(self, params):
        self.params, self.state = params, {}

    def step(self, extra):
        for p in [*self.params, extra]:
            if p not in self.state:
                self.state[p] = torch.zeros_like(p)
            self.state[p].add_(p)
        return sum(self.state[p].sum() for p in self.params)


def test_per_tensor_state_made_on_the_first_call_runs_it_eagerly_once():
    """The first call fills `self.state` (keys: tensors): its capture would fail its own guards, so
    it runs eagerly (DL037) and the second call makes the graph every later call reuses."""
    dl.reset()
    params = [torch.randn(3) for _ in range(2)]
    eager, mine = _PerTensorState(params), _PerTensorState([p.clone() for p in params])
    backend = CountingBackend()
    step = dl.capture(mine.step, backend=backend)
    extra = torch.ones(2)
    counts = []
    for _ in range(4):
        torch.testing.assert_close(step(extra), eager.step(extra))
        counts.append(backend.count)
    torch.testing.assert_close(list(mine.state.values()), list(eager.state.values()))
    assert counts == [0, 1, 1, 1], counts
    assert [r.kind.id for r in records.RECORDS if r.kind is not None] == ["DL037"]


def test_a_new_tensor_key_on_every_call_stays_right_and_is_captured():
    """A new tensor key on every call: the first call runs eagerly (DL037); from then on the dict
    is read a key at a time (each key's presence guarded, not the whole key set), so one graph
    serves every later call, new key or not. Every call matches eager."""
    dl.reset()
    params = [torch.randn(3) for _ in range(2)]
    eager, mine = _PerTensorState(params), _PerTensorState([p.clone() for p in params])
    backend = CountingBackend()
    step = dl.capture(mine.step, backend=backend)
    for i in range(dl.config.cache_size_limit + 3):
        extra = torch.full((2,), float(i))
        torch.testing.assert_close(step(extra), eager.step(extra))
    torch.testing.assert_close(list(mine.state.values()), list(eager.state.values()))
    deferred = [r for r in records.RECORDS if r.kind is not None and r.kind.id == "DL037"]
    assert 1 <= len(deferred) <= dl.config.cache_size_limit
    assert backend.count == 1


def test_under_fullgraph_the_first_call_is_captured_too():
    """fullgraph=True promises the captured graph on every call: the state-making call is not
    run eagerly (no DL037); it is captured, and the next call recaptures as the keys changed."""
    dl.reset()
    params = [torch.randn(3) for _ in range(2)]
    eager, mine = _PerTensorState(params), _PerTensorState([p.clone() for p in params])
    backend = CountingBackend()
    step = dl.capture(mine.step, backend=backend, fullgraph=True)
    extra = torch.ones(2)
    counts = []
    for _ in range(3):
        torch.testing.assert_close(step(extra), eager.step(extra))
        counts.append(backend.count)
    assert counts == [1, 2, 2], counts
    assert not [r for r in records.RECORDS if r.kind is not None and r.kind.id == "DL037"]


@pytest.mark.parametrize("foreach", [None, False])
def test_clip_grad_norm_is_traced_into_one_graph_with_the_step(foreach):
    """`clip_grad_norm_` between backward and the optimizer step (every LLM trainer's loop): traced
    through (torch/nn/utils/clip_grad.py, torch/utils/_foreach_utils.py; the grouping of tensors
    by device and dtype modelled), the clipped grads and the step are one graph, no break, and the
    parameters and optimizer state are eager's over three steps. As one graph op, the clipping
    was lost on backends that retrace the graph (fake parameters have no grads)."""
    def run(captured, backend=None):
        model = _model()
        opt = KINDS["adamw"](model.parameters(), None)

        def step():
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05, foreach=foreach)
            opt.step()
        if captured:
            step = dl.capture(step, backend=backend)
        data = torch.Generator().manual_seed(1)
        for _ in range(3):
            model(torch.randn(3, 4, generator=data)).pow(2).sum().backward()
            step()
            opt.zero_grad()
        return model, opt
    eager_model, eager_opt = run(False)
    first = len(records.RECORDS)
    backend = CountingBackend()
    model, opt = run(True, backend)
    for (name, p), q in zip(model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, **TOL, msg=name)
    _assert_same_state(eager_opt, opt)
    mine = list(records.RECORDS)[first:]
    assert not [r.detail for r in mine if r.kind is not None and r.kind.id == "DL028"]
    ops = [str(n.target) for r in mine for gm in r.graphs for n in gm.graph.nodes if n.op.startswith("call_")]
    assert any("norm" in op for op in ops) and any("mul" in op for op in ops), ops
    assert not any("clip_grad" in op for op in ops), ops          # traced through, not one opaque op
