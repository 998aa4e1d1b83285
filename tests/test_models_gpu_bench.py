"""bench/models_gpu.py in its CPU smoke mode, in-process, on one tiny Hugging Face model: the forward
row and the training row come back with eager and dynamo_lite timed, counted and checked against
eager (a wrong result from either engine would make `correct` False), an engine that raises becomes
that engine's status, and a library that is not installed skips its row."""
import math

import pytest
import torch

import triton_env                   # noqa: F401  first: the Triton interpreter where there is no GPU
from bench_loader import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("models_gpu.py", "models_gpu_bench")


def _gpt2(bench):
    pytest.importorskip("transformers")
    return [s for s in bench.SPECS if s.build is bench.hf_gpt2]


def test_smoke_rows_are_produced_and_correct(bench):
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend="eager",
                            only=("forward", "train"))
    assert [r.mode for r in rows] == ["forward", "train"]
    for row in rows:
        assert row.status == "ok", row.status
        for engine in (row.inductor, row.ours):
            assert engine.status == "ok", engine.status
            assert engine.correct is True, (row.name, engine)
            assert engine.graphs >= 1 and engine.ms > 0 and engine.first_call_s > 0
            assert engine.max_diff is not None and math.isfinite(engine.max_diff)
            assert row.mode == "forward" or engine.max_diff <= 1.0
        assert row.eager.ms > 0 and row.ratio > 0
    lines = bench.summary(rows)
    assert any("forward" in line for line in lines) and any("train" in line for line in lines)
    assert lines[-1].endswith("none")
    assert all(r.name in bench.format_row(r) for r in rows)


def test_a_wrong_engine_is_reported_not_correct(bench):
    ref = torch.ones(4)
    assert bench.compare_outputs({"logits": ref.clone()}, {"logits": ref}, 1e-3) == (0.0, True)
    diff, ok = bench.compare_outputs({"logits": ref + 0.1}, {"logits": ref}, 1e-3)
    assert not ok and diff == pytest.approx(0.1)
    assert not bench.compare_outputs({"logits": ref * float("nan")}, {"logits": ref}, 1e-3)[1]


def test_the_training_check_allows_eagers_own_error_and_no_more(bench):
    """Gradients and losses against eager in fp32, each allowed 3x eager's own low-precision error."""
    torch.manual_seed(0)
    exact = bench.Steps((2.0, 1.5), [torch.randn(64), torch.randn(8, 8), None])
    noise = lambda scale: [g + scale * torch.randn_like(g) if g is not None else None for g in exact.grads]  # noqa
    eager = bench.Steps((2.01, 1.52), noise(0.2))            # bf16 eager: 20% off fp32
    assert bench.compare_training(eager, exact, eager, 2e-2)[1]
    assert bench.compare_training(bench.Steps((2.0, 1.51), noise(0.3)), exact, eager, 2e-2)[1]
    # a gradient scaled by 2 (e.g. a backward that adds a term twice) is outside 3x eager's error
    wrong = [g * 2 if g is not None else None for g in exact.grads]
    worst, ok = bench.compare_training(bench.Steps((2.0, 1.5), wrong), exact, eager, 2e-2)
    assert not ok and worst > 1
    # one parameter's gradient wrong is enough
    one_wrong = [exact.grads[0], -exact.grads[1], None]
    assert not bench.compare_training(bench.Steps((2.0, 1.5), one_wrong), exact, eager, 2e-2)[1]
    assert not bench.compare_training(bench.Steps((2.0, 1.5), noise(0.2)[:2] + [torch.ones(2)]),
                                      exact, eager, 2e-2)[1]
    assert not bench.compare_training(bench.Steps((2.0, 1.8), exact.grads), exact, eager, 2e-2)[1]
    nan = [g * float("nan") if g is not None else None for g in exact.grads]
    assert not bench.compare_training(bench.Steps((2.0, 1.5), nan), exact, eager, 2e-2)[1]
    assert bench.checkable(exact, eager, 2e-2) == (2, 2)
    assert bench.checkable(exact, bench.Steps(eager.losses, noise(1.0)), 2e-2) == (0, 2)   # eager as far as it gets
    # a wrong optimizer update (the step's learning rate doubled) with right gradients
    exact.updates, eager.updates = [torch.ones(5)], [torch.ones(5) * 1.01]
    assert bench.compare_training(bench.Steps((2.0, 1.5), exact.grads, [torch.ones(5)]), exact, eager, 2e-2)[1]
    assert not bench.compare_training(bench.Steps((2.0, 1.5), exact.grads, [torch.ones(5) * 2]),
                                      exact, eager, 2e-2)[1]
    # fp32 rows: eager is the reference, the floor alone applies
    assert bench.compare_training(exact, exact, exact, 1e-3) == (0.0, True)
    assert not bench.compare_training(bench.Steps((2.0, 1.5), noise(0.01)), exact, exact, 1e-3)[1]


def test_adamw_updates_are_compared_over_all_parameters(bench):
    """AdamW's first updates are +-lr per element: signs flipped where a gradient is near 0 are
    all or nothing, so a small tensor can be 10% off in one engine and exact in eager. Over all
    parameters, flips as many as eager's pass; a wrong learning rate does not."""
    torch.manual_seed(0)
    lr = 1e-4
    exact_updates = [torch.sign(torch.randn(192)) * lr for _ in range(20)]

    def flipped(fraction, first):
        out = [u.clone() for u in exact_updates]
        for u in out[first:first + 10]:
            u[torch.rand(192) < fraction] *= -1
        return out
    grads = [torch.ones(3)]
    exact = bench.Steps((2.0, 1.5), grads, exact_updates)
    eager = bench.Steps((2.0, 1.5), grads, flipped(0.02, 0))          # flips in the first ten tensors
    ours = bench.Steps((2.0, 1.5), grads, flipped(0.03, 10))          # in the other ten
    assert bench.compare_training(ours, exact, eager, 2e-2)[1]
    wrong_lr = bench.Steps((2.0, 1.5), grads, [u * 2 for u in flipped(0.02, 10)])
    assert not bench.compare_training(wrong_lr, exact, eager, 2e-2)[1]


def test_a_wrong_gradient_makes_a_bf16_training_row_not_correct(bench, monkeypatch):
    """In the whole row (bf16 autocast on the CPU): a backend whose backward doubles one gradient fails."""
    real_grads = bench.grads
    calls = []

    def corrupting(model):
        gs = real_grads(model)
        calls.append(1)
        # exact and eager with dropout off (twice: the allowances, and that nothing else is
        # random), eager with GPT-2's dropout on, Inductor-as-eager, then ours
        if len(calls) == 6:
            gs[0] = gs[0] * 2
        return gs
    monkeypatch.setattr(bench, "grads", corrupting)
    (row,) = bench.run_models(device="cpu", quick=True, dtype=torch.bfloat16, specs=_gpt2(bench),
                              inductor_backend="eager", only="train")
    assert row.status == "ok" and row.eager_error is not None and row.eager_error > 0
    assert row.checkable[0] > 0 and row.dropouts > 0
    assert row.inductor.correct is True, row.inductor
    assert row.ours.correct is False and row.ours.max_diff > 1, row.ours


def test_an_engine_that_draws_other_dropout_masks_is_not_correct(bench, monkeypatch):
    """GPT-2 trains with its dropout on: engines are checked against eager's steps drawn from the
    same seed, so an engine whose masks differ (here: one that draws a number before each step,
    shifting the random stream) is reported wrong, while one that draws eager's masks passes."""
    def engine(shift):
        def wrap(step):
            def run(*args):
                if shift:
                    torch.rand(1)
                return step(*args)
            return run, lambda: (1, None)
        return wrap
    monkeypatch.setattr(bench, "_engines", lambda *a: [("inductor", engine(False)), ("ours", engine(True))])
    (row,) = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), only="train")
    assert row.status == "ok" and row.dropouts > 0
    assert row.inductor.correct is True, row.inductor
    assert row.ours.correct is False and row.ours.max_diff > 1, row.ours


def test_a_failing_backend_still_gives_a_correct_row(bench, monkeypatch):
    monkeypatch.setattr(bench.CountingBackend, "__call__", lambda self, gm, ex: 1 / 0)
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend=None, only="forward")
    (row,) = rows
    assert row.status == "ok" and row.inductor.status == "skipped"
    # a backend that fails: dynamo_lite runs the frame eagerly, so the row is still measured and correct
    assert row.ours.status == "ok" and row.ours.correct is True, row.ours


def test_missing_library_skips_its_row(bench):
    spec = bench.Spec("not installed", "no_such_library_xyz", bench.hf_gpt2, "adamw")
    rows = bench.run_models(device="cpu", quick=True, specs=[spec], inductor_backend=None)
    assert [r.status for r in rows] == ["skipped: no_such_library_xyz is not installed"] * 2


def test_an_engine_that_raises_is_that_engines_status(bench, monkeypatch):
    def raising(*args, **kwargs):
        raise RuntimeError("this engine always fails")
    monkeypatch.setattr(bench.dl, "capture", raising)
    rows = bench.run_models(device="cpu", quick=True, specs=_gpt2(bench), inductor_backend="eager", only="all")
    assert [r.status for r in rows] == ["ok", "ok", "ok"]
    for row in rows:
        assert row.ours.status == "RuntimeError: this engine always fails" and row.ours.ms is None
        assert row.inductor.correct is True and row.ratio is None
        assert "ours: RuntimeError" in bench.format_row(row)


def test_generate_rows_come_back_checked_and_a_wrong_token_is_not_correct(bench):
    """The generate row (a whole `generate()` per engine, each engine's forward compiled): eager's
    tokens back from both engines; a token changed where eager's logits have a clear winner is
    reported wrong, the same tokens are not."""
    specs = _gpt2(bench)
    rows = bench.run_models(device="cpu", quick=True, specs=specs, only="generate", inductor_backend="eager")
    assert [r.mode for r in rows] == ["generate"]
    row = rows[0]
    assert row.status == "ok", row.status
    for engine in (row.inductor, row.ours):
        assert engine.status == "ok" and engine.correct is True and engine.agreement == "same tokens", engine
        assert engine.graphs >= 1 and engine.ms > 0 and engine.first_call_s > 0
    assert any("generate" in line for line in bench.summary(rows))
    torch.manual_seed(0)
    model, inputs, _ = specs[0].build(bench.Sizes(batch=2, seq=64, image=64, quick=True), "cpu")
    model.eval()
    prompt = inputs["input_ids"][:, :8]
    with torch.no_grad():
        ref = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, do_sample=False,
                             pad_token_id=0)
        assert bench._same_tokens(model, ref.clone(), ref, 8, 1e-3) == (True, "same tokens")
        wrong = ref.clone()
        logits = model(ref[:, :9]).logits[:, -1]
        wrong[:, 9] = logits.argmin(-1)                         # eager's least likely token
        ok, why = bench._same_tokens(model, wrong, ref, 8, 1e-3)
    assert not ok and "not a near-tie" in why, why


def test_first_calls_start_from_empty_caches(bench, monkeypatch):
    """Every compiler's on-disk cache is an empty directory of the run's, so a first call cannot
    find what an earlier run on the machine compiled or tuned."""
    import os
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir
    from dynamo_lite.backends.triton import cache
    for name in bench.CACHE_ENV:
        monkeypatch.setenv(name, "/nonexistent-warm-cache")
    caches = bench.fresh_caches()
    try:
        root = os.path.realpath(caches.name)
        assert os.listdir(root) == []
        for where in (cache.cache_dir(), inductor_cache_dir(), os.environ["TRITON_CACHE_DIR"]):
            assert os.path.realpath(where).startswith(root + os.sep), where
        assert len({os.environ[name] for name in bench.CACHE_ENV}) == 3
    finally:
        caches.cleanup()


def test_our_first_call_phases_count_the_forward_and_backward_graphs_kernels(bench):
    """The row's note on where our first call went (lowering, tuning, compiling, waiting) counts
    the launchers of every compiled part, a training graph's backward included."""
    pytest.importorskip("triton")
    from triton_env import DEVICE
    from dynamo_lite.backends.triton import settings
    counting = bench.CountingBackend("triton")
    w = torch.randn(16, 8, device=DEVICE, requires_grad=True)

    def step(x, w):
        return (torch.relu(x @ w) * 2 + 1).sum()
    x = torch.randn(4, 16, device=DEVICE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(settings, "strict", True)                  # a compile error fails, not falls back
        loss = bench.dl.capture(step, backend=counting)(x, w)
        loss.backward()
    expected = w.detach().clone().requires_grad_()
    step(x, expected).backward()
    torch.testing.assert_close(w.grad, expected.grad)
    (graph,) = counting.compiled
    assert graph.fallback_reason is None, graph.fallback_reason
    assert graph.kernel_count >= 2 and len(graph.launchers) == graph.kernel_count   # forward's and backward's
    phases = counting.phases()
    assert set(phases) == {"lower", "tune", "compile", "wait"} and phases["lower"] > 0
    assert all(v >= 0 for v in phases.values())
    note = bench._phases_note(phases)
    assert note.startswith(" (first call: lowering ") and note.endswith("in all)")
    assert bench._phases_note(None) == ""
