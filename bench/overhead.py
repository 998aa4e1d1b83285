"""Per-call overhead of a captured function, measured in one run against eager PyTorch and
TorchDynamo (torch.compile with its `eager` backend, so both run the same ops and only the
capture machinery differs).

    python bench/overhead.py [--calls N] [--repeats R]

Workloads: a tiny function (2 tensor args, 3 ops) and a module with 50 parameters (25 Linear
layers of 4x4). Prints time per call, overhead over eager, and the ratio of the two overheads.
"""
from __future__ import annotations

import argparse
import statistics
import time

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


def per_call_us(fn, args, calls: int, repeats: int) -> float:
    for _ in range(200):
        fn(*args)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def measure(name, eager_fn, make_dl, make_dynamo, args, calls, repeats):
    eager = per_call_us(eager_fn, args, calls, repeats)
    ours = per_call_us(make_dl(), args, calls, repeats)
    dynamo = per_call_us(make_dynamo(), args, calls, repeats)
    ours_over, dynamo_over = ours - eager, dynamo - eager
    print(f"{name:<24} eager {eager:7.2f} us | dynamo_lite {ours:7.2f} us (+{ours_over:6.2f}) | "
          f"torch.compile(eager) {dynamo:7.2f} us (+{dynamo_over:6.2f}) | "
          f"overhead ratio dynamo_lite/TorchDynamo = {ours_over / dynamo_over:.2f}")
    return ours_over / dynamo_over


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
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


if __name__ == "__main__":
    main()
