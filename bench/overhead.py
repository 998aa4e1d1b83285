"""Per-call overhead of a captured function, measured in one run against eager PyTorch and
TorchDynamo (torch.compile with its `eager` backend, so both run the same ops and only the
capture machinery differs).

    python bench/overhead.py [--calls N] [--repeats R]

Workloads: a tiny function (2 tensor args, 3 ops), a module with 50 parameters (25 Linear
layers of 4x4), and torchvision's ResNet-50 on a 1x3x32x32 image when torchvision is installed
(161 modules, 320 parameters and buffers: what a real model's guards cost per call). Prints time
per call, overhead over eager, and the ratio of the two overheads.
"""
from __future__ import annotations

import argparse
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


def per_call_us(fns, args, calls: int, repeats: int) -> list[float]:
    """Median time per call of each fn; the fns are timed round-robin so drift hits all alike."""
    for fn in fns:
        for _ in range(200):
            fn(*args)
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            samples[i].append(time_calls(fn, args, calls))
    return [statistics.median(s) for s in samples]


def measure(name, eager_fn, make_dl, make_dynamo, args, calls, repeats):
    eager, ours, dynamo = per_call_us([eager_fn, make_dl(), make_dynamo()], args, calls, repeats)
    ours_over, dynamo_over = ours - eager, dynamo - eager
    # When capture makes a call faster than eager (inlined module calls skip nn.Module.__call__),
    # an "overhead" ratio means nothing: compare the per-call times directly then.
    ratio = (f"overhead ratio dynamo_lite/TorchDynamo = {ours_over / dynamo_over:.2f}" if dynamo_over > 0 < ours_over
             else f"time ratio dynamo_lite/TorchDynamo = {ours / dynamo:.2f}")
    print(f"{name:<24} eager {eager:7.2f} us | dynamo_lite {ours:7.2f} us ({ours_over:+6.2f}) | "
          f"torch.compile(eager) {dynamo:7.2f} us ({dynamo_over:+6.2f}) | {ratio}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    x, y = torch.randn(8), torch.randn(8)
    print(f"torch {torch.__version__}; median of {args.repeats} x {args.calls} calls")
    measure("tiny fn (2 args, 3 ops)", tiny, lambda: dl.capture(tiny),
            lambda: torch.compile(tiny, backend="eager"), (x, y), args.calls, args.repeats)
    model = FiftyParams().eval()
    xm = torch.randn(2, 4)
    measure("module, 50 parameters", model, lambda: dl.capture(model),
            lambda: torch.compile(model, backend="eager"), (xm,), args.calls // 4, args.repeats)
    try:
        import torchvision
    except ImportError:
        print("resnet50: skipped (torchvision is not installed: pip install -r requirements/corpus.txt)")
        return
    resnet = torchvision.models.resnet50().eval()
    image = torch.randn(1, 3, 32, 32)
    measure("torchvision resnet50", resnet, lambda: dl.capture(resnet),
            lambda: torch.compile(resnet, backend="eager"), (image,), max(args.calls // 40, 10), args.repeats)


if __name__ == "__main__":
    main()
