"""Per-call overhead of a captured function, measured in one run against eager PyTorch and
TorchDynamo (torch.compile with its `eager` backend, so both run the same ops and only the
capture machinery differs).

    python bench/overhead.py [--calls N] [--repeats R]

Workloads: a tiny function (2 tensor args, 3 ops), a module with 50 parameters (25 Linear
layers of 4x4), timm's ViT-B/16 module tree at width 16 on a 32x32 image when timm is installed
(its 12 blocks, 152 parameters, ~1,000 guards, with little arithmetic: what the guards and the
loading of a real model's parameters cost per call), torchvision's ResNet-50 on a 1x3x32x32
image when torchvision is installed (161 modules, 320 parameters and buffers), and transformers'
GPT-2 (4 layers of width 64, its default config otherwise, 16 tokens) when transformers is: a
config object read on every call, a KV cache made and returned. Prints time per
call, overhead over eager, and the ratio of the two overheads.

First, for those two real models, the guard check alone (what runs on every call before the graph):
ours (the generated function the C hook calls) against TorchDynamo's (its C++ guard manager's
`check` on the same frame), each timed on the model's forward frame as captured, the minimum
over rounds of 50 checks, the two timed in turn. (The same check of ours, timed in a process where
torch.compile has not run, was up to 2x faster for ResNet-50 on our 2-core machine: not
understood, and these machines are noisy; the figures here are both engines' in one process.)
"""
from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import time

# bench/triton.py would shadow the triton package that torch.compile imports.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

import torch
import torch.nn as nn

import dynamo_lite as dl


def tiny(x, y):
    return (x * y + 1).relu()


class FiftyParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(25))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def time_calls(fn, args, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def per_call_us(fns, args, calls: int, repeats: int, stat=statistics.median) -> list[float]:
    """`stat` (median) of each fn's time per call over `repeats` samples of `calls` calls; the fns
    are timed round-robin so drift hits all alike."""
    for fn in fns:
        for _ in range(200):
            fn(*args)
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            samples[i].append(time_calls(fn, args, calls))
    return [stat(s) for s in samples]


def measure(name, eager_fn, make_dl, make_dynamo, args, calls, repeats):
    eager, ours, dynamo = per_call_us([eager_fn, make_dl(), make_dynamo()], args, calls, repeats)
    ours_over, dynamo_over = ours - eager, dynamo - eager
    # When capture makes a call faster than eager (inlined module calls skip nn.Module.__call__),
    # an "overhead" ratio means nothing: compare the per-call times directly then.
    ratio = (f"overhead ratio dynamo_lite/TorchDynamo = {ours_over / dynamo_over:.2f}" if dynamo_over > 0 < ours_over
             else f"time ratio dynamo_lite/TorchDynamo = {ours / dynamo:.2f}")
    print(f"{name:<34} eager {eager:7.2f} us | dynamo_lite {ours:7.2f} us ({ours_over:+6.2f}) | "
          f"torch.compile(eager) {dynamo:7.2f} us ({dynamo_over:+6.2f}) | {ratio}")


def _frame_values(model, args) -> dict:
    """The forward frame's arguments by name, defaults filled in, and its free variables (a
    decorated forward's frame is its wrapper's: transformers' GPT-2)."""
    fn = type(model).forward
    bound = inspect.signature(fn, follow_wrapped=False).bind(model, *args)
    bound.apply_defaults()
    free = zip(fn.__code__.co_freevars, fn.__closure__ or ())
    return {**bound.arguments, **{name: cell.cell_contents for name, cell in free}}


def guard_checks(models, repeats: int) -> None:
    """Ours and TorchDynamo's guard check of each model's forward frame, timed alone, in turns."""
    from dynamo_lite.convert_frame import cache_entries
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    for name, model, args in models:
        code = type(model).forward.__code__
        captured = dl.capture(model)
        captured(*args)
        captured(*args)
        values = _frame_values(model, args)

        def check_args(entry):              # the check takes the frame arguments its guards read
            return (type(model).forward, *(values[n] for n in entry.guards.arg_names))
        ours = next(e for e in cache_entries(code) if getattr(e.guards, "guards", None) and e.check(*check_args(e)))
        frame_args = check_args(ours)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="eager")
        compiled(*args)
        compiled(*args)
        manager = _debug_get_cache_entry_list(code)[0].guard_manager
        assert manager.check(values), "TorchDynamo's guards fail on the frame they were made for"
        t_ours, t_dynamo = per_call_us([lambda: ours.check(*frame_args), lambda: manager.check(values)], (),
                                       50, repeats, stat=min)
        print(f"{name:<34} guard check: dynamo_lite {t_ours:7.1f} us ({len(ours.guards.guards)} guards) | "
              f"TorchDynamo {t_dynamo:7.1f} us | ratio {t_ours / t_dynamo:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}; median of {args.repeats} x {args.calls} calls")
    real = []                       # (name, model, args, calls per timing) of the installed libraries' models
    try:
        import timm
    except ImportError:
        print("timm vit_base_patch16_224: skipped (timm is not installed: pip install -r requirements/corpus.txt)")
    else:
        vit = timm.create_model("vit_base_patch16_224", img_size=32, embed_dim=16, num_heads=2).eval()
        real.append(("timm ViT-B/16 tree, w16", vit, (torch.randn(1, 3, 32, 32),), max(args.calls // 20, 20)))
    try:
        import torchvision
    except ImportError:
        print("resnet50: skipped (torchvision is not installed: pip install -r requirements/corpus.txt)")
    else:
        resnet = torchvision.models.resnet50().eval()
        real.append(("torchvision resnet50", resnet, (torch.randn(1, 3, 32, 32),), max(args.calls // 40, 10)))
    try:
        import transformers
    except ImportError:
        print("transformers GPT-2: skipped (transformers is not installed: pip install -r requirements/corpus.txt)")
    else:
        config = transformers.GPT2Config(n_layer=4, n_embd=64, n_head=4)      # defaults otherwise (KV cache on)
        gpt2 = transformers.GPT2LMHeadModel(config).eval()
        real.append(("transformers GPT-2, 4 layers w64", gpt2, (torch.randint(0, 1000, (1, 16)),),
                     max(args.calls // 40, 10)))
    guard_checks([(name, model, model_args) for name, model, model_args, _ in real], 3 * args.repeats)
    dl.reset()
    torch._dynamo.reset()
    x, y = torch.randn(8), torch.randn(8)
    measure("tiny fn (2 args, 3 ops)", tiny, lambda: dl.capture(tiny),
            lambda: torch.compile(tiny, backend="eager"), (x, y), args.calls, args.repeats)
    model = FiftyParams().eval()
    xm = torch.randn(2, 4)
    measure("module, 50 parameters", model, lambda: dl.capture(model),
            lambda: torch.compile(model, backend="eager"), (xm,), args.calls // 4, args.repeats)
    for name, module, model_args, calls in real:
        measure(name, module, lambda: dl.capture(module), lambda: torch.compile(module, backend="eager"),
                model_args, calls, args.repeats)


if __name__ == "__main__":
    main()
