"""`generate()` of Hugging Face decoder LMs under capture, the ways users set it up.

    python3 -m dynamo_lite_corpus.lib_generate [--compare torch] [--json FILE] [-k NAME]

Each model (tiny, random weights, a left-padded batch of 2) runs ``model.generate(input_ids,
attention_mask=..., max_new_tokens=8, do_sample=False)`` with every default on (DynamicCache). Eager
gives the reference tokens; then, on a fresh identically seeded copy each time:

``forward``   ``model.forward = capture(model.forward)``, then ``model.generate(...)`` — what
              transformers' docs show for torch.compile; same line for both engines.
``module``    dynamo_lite: ``model = dl.capture(model)`` (same class, forward captured) then
              ``model.generate(...)``. TorchDynamo: ``model.compile()`` (nn.Module.compile, in place),
              then ``model.generate(...)``: ``torch.compile(model).generate`` would not compile
              anything (OptimizedModule hands attribute lookups, ``generate`` included, to the
              original module), so the in-place form is the TorchDynamo equivalent.
``generate``  ``model.generate = capture(model.generate)``: the whole decoding loop traced (a
              pattern users try; also the ``lib_*_generate`` entries of the report).

Reported per mode: tokens identical to eager (must be), graphs handed to the backend at the first
forward step (prefill), graphs added over decoding steps 2-8 (recaptures: the sequence length drops
to 1 and the cache grows each step), graphs added by a second identical ``generate`` call, and
graph breaks / frames run eagerly.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field

import torch

from dynamo_lite.report.registry import MissingDependency
from dynamo_lite.report.survey import CountingBackend

MODELS = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),     # a sliding-window cache (DynamicSlidingWindowLayer)
}
NEW_TOKENS = 8


@dataclass
class ModeRun:
    model: str
    mode: str
    engine: str                      # "dl" or "torch"
    status: str = "ok"               # ok / WRONG / CRASH
    tokens_identical: bool = False
    steps: int = 0                   # forward calls during the first generate()
    graphs_first_step: int = 0       # graphs compiled during the first forward call
    graphs_later_steps: int = 0      # graphs compiled during forward calls 2..steps (recaptures)
    graphs_second_generate: int = 0  # graphs compiled by a second, identical generate() call
    graphs_total: int = 0
    graphs_per_step: list = field(default_factory=list)
    breaks: int = 0
    eager_frames: int = 0
    reasons: list = field(default_factory=list)
    first_generate_s: float = 0.0
    second_generate_s: float = 0.0
    detail: str = ""


def _build(name):
    from .libraries import HF_TINY, _hf_model, _hf_text
    config_name, model_name = MODELS[name]
    net, config = _hf_model(config_name, model_name, HF_TINY, {})
    torch.manual_seed(1)
    inputs = _hf_text(config, pad="left")
    return net, dict(inputs, max_new_tokens=NEW_TOKENS, do_sample=False)


class _StepCounter:
    """Counts the model's forward calls and the graphs compiled during each (module hooks run in
    ``Module._call_impl``, outside a captured forward)."""

    def __init__(self, net, backend):
        self.backend, self.per_step, self._before = backend, [], 0
        self.handles = [net.register_forward_pre_hook(self._pre), net.register_forward_hook(self._post)]

    def _pre(self, module, args):
        self._before = len(self.backend.graphs)

    def _post(self, module, args, out):
        self.per_step.append(len(self.backend.graphs) - self._before)

    def remove(self):
        for h in self.handles:
            h.remove()


def _reset(engine):
    if engine == "dl":
        import dynamo_lite as dl
        dl.reset()
    else:
        import torch._dynamo as torch_dynamo
        from torch._dynamo.utils import counters
        torch_dynamo.reset()
        counters.clear()


def _setup(net, mode, engine, backend):
    """Apply the user's one line for `mode` and `engine`; returns the object to call generate on."""
    if engine == "dl":
        import dynamo_lite as dl
        wrap = lambda fn: dl.capture(fn, backend=backend)  # noqa: E731
    else:
        wrap = lambda fn: torch.compile(fn, backend=backend)  # noqa: E731
    if mode == "forward":
        net.forward = wrap(net.forward)
        return net
    if mode == "module":
        if engine == "dl":
            return wrap(net)
        net.compile(backend=backend)
        return net
    if mode == "generate":
        net.generate = wrap(net.generate)
        return net
    raise ValueError(mode)


def _frames(run: ModeRun, engine: str) -> None:
    if engine == "dl":
        from dynamo_lite.fallback.records import RECORDS
        for r in RECORDS:
            if r.status == "captured":
                continue
            if r.status == "break":
                run.breaks += 1
            else:
                run.eager_frames += 1
            kind = f"{r.kind.id} {r.kind.name}" if r.kind else "internal-error"
            run.reasons.append(f"{r.status}: [{kind}] {getattr(r, 'qualname', '') or r.name} at {r.location}: "
                               + " ".join(str(r.detail).split())[:200])
    else:
        from torch._dynamo.utils import counters
        run.breaks = sum(counters["graph_break"].values())
        run.reasons = [f"{n}x {reason.splitlines()[0]}" for reason, n in counters["graph_break"].most_common()]


def run_mode(name: str, mode: str, engine: str, expected: torch.Tensor) -> ModeRun:
    run = ModeRun(name, mode, engine)
    torch.manual_seed(0)
    net, kwargs = _build(name)
    backend = CountingBackend()
    _reset(engine)
    counter = _StepCounter(net, backend) if mode != "generate" else None
    try:
        target = _setup(net, mode, engine, backend)
        start = time.perf_counter()
        out = target.generate(**kwargs)
        run.first_generate_s = time.perf_counter() - start
        first = len(backend.graphs)
        if counter is not None:
            run.graphs_per_step = list(counter.per_step)
            run.steps = len(counter.per_step)
            run.graphs_first_step = counter.per_step[0] if counter.per_step else 0
            run.graphs_later_steps = sum(counter.per_step[1:])
        else:
            run.graphs_first_step = first
        _frames(run, engine)
        run.tokens_identical = torch.equal(out, expected)
        start = time.perf_counter()
        again = target.generate(**kwargs)
        run.second_generate_s = time.perf_counter() - start
        run.graphs_second_generate = len(backend.graphs) - first
        run.graphs_total = len(backend.graphs)
        if not run.tokens_identical or not torch.equal(again, expected):
            run.status = "WRONG"
            run.detail = f"tokens differ from eager: {out.tolist()} (second call {again.tolist()}) != {expected.tolist()}"
    except Exception as exc:      # noqa: BLE001 - one failed row
        from dynamo_lite.report.survey import _short
        run.status, run.detail = "CRASH", _short(exc)
        run.graphs_total = len(backend.graphs)
        if not run.reasons:
            _frames(run, engine)
    finally:
        if counter is not None:
            counter.remove()
        _reset(engine)
    return run


def survey(names, modes, compare_torch: bool):
    """Yield a `ModeRun` per model, mode and engine."""
    for name in names:
        torch.manual_seed(0)
        net, kwargs = _build(name)
        expected = net.generate(**kwargs)
        for mode in modes:
            for engine in ("dl", "torch") if compare_torch else ("dl",):
                yield run_mode(name, mode, engine, expected)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m dynamo_lite_corpus.lib_generate", description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", help="only models whose name contains PATTERN")
    parser.add_argument("--mode", action="append", choices=["forward", "module", "generate"],
                        help="set-up(s) to run (default: all)")
    parser.add_argument("--compare", choices=["torch"], help="also run TorchDynamo")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every break and eager frame")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.simplefilter("ignore")
    for noisy in ("torch._dynamo", "torch.fx.experimental.symbolic_shapes", "transformers"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    names = [n for n in MODELS if not args.pattern or args.pattern in n]
    from dynamo_lite.report.survey import warm_up
    warm_up(args.compare == "torch")
    runs, bad = [], False
    print(f"{'model':7s} {'mode':9s} {'engine':6s} {'result':6s} {'tokens':6s} {'steps':>5s} {'graphs':>6s} "
          f"{'step1':>5s} {'2..8':>5s} {'again':>5s} {'breaks':>6s} {'eager':>5s} {'1st s':>6s} {'2nd s':>6s}")
    try:
        for run in survey(names, args.mode or ["forward", "module", "generate"], args.compare == "torch"):
            runs.append(run)
            bad |= run.status != "ok"
            print(f"{run.model:7s} {run.mode:9s} {run.engine:6s} {run.status:6s} "
                  f"{'same' if run.tokens_identical else 'DIFF':6s} {run.steps:5d} {run.graphs_total:6d} "
                  f"{run.graphs_first_step:5d} {run.graphs_later_steps:5d} {run.graphs_second_generate:5d} "
                  f"{run.breaks:6d} {run.eager_frames:5d} {run.first_generate_s:6.2f} {run.second_generate_s:6.2f}"
                  + (f"   per step {run.graphs_per_step}" if run.graphs_per_step else ""))
            if run.detail:
                print(f"    !! {run.detail}")
            if args.verbose:
                for reason in run.reasons:
                    print(f"    {reason}"[:240])
            sys.stdout.flush()
    except MissingDependency as exc:
        print(f"skipped: {exc}")
        return 0
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in runs], f, indent=1, default=str)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
