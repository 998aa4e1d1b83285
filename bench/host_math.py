"""CPU time of a lowered foreach AdamW step's host scalars: Python numbers (host_math.py) or aten calls.

    python bench/host_math.py [--params 52] [--calls 200]

Runs on the CPU with no GPU: as in tests/test_triton_host_math.py, 0-dim CPU tensors and 1-d ones
of at most `--params` elements (the stacked step sizes) stand in for the host values of a CUDA graph
(`GraphLowering.on_host` is patched; every parameter has more elements), and the kernels are stubbed out after the first calls (under Triton's interpreter they
would dominate), so what is timed is the wrapper's own work per step: the host arithmetic (step
counters, bias corrections, step sizes) and the guards and call of the captured `opt.step()`,
the same in both modes; in the stand-in, Adam's `lerp` weight and its test (`full`, `abs`, `ge`,
`where`) are host values too, aten calls in both modes (on a GPU they are kernels). Prints the
time per step and the aten calls per step of each mode, and the time of the Python host lines
alone (`h_... = ...` and the counters' `fill_`), run by themselves.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

# bench/triton.py would shadow the triton package.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]
os.environ.setdefault("TRITON_INTERPRET", "1")

import torch                                                   # noqa: E402
import torch.nn as nn                                          # noqa: E402

import dynamo_lite as dl                                       # noqa: E402
from dynamo_lite.backends.triton import backend, settings      # noqa: E402
from dynamo_lite.backends.triton.graph_lowering import GraphLowering   # noqa: E402
from dynamo_lite.backends.triton.launch import Launcher        # noqa: E402


def stand_in(n_params: int):
    def on_host(self, v) -> bool:
        sizes = tuple(v.shape if isinstance(v, torch.Tensor) else v.sizes)
        return v.device.type == "cpu" and (sizes == () or (len(sizes) == 1 and sizes[0] <= n_params))
    return on_host


def time_steps(host_math: bool, n_params: int, calls: int) -> tuple[float, dict]:
    settings.host_math = host_math
    dl.reset()                                     # compile afresh (the capture cache is per code object)
    torch.manual_seed(0)
    width = n_params + 1                           # every bias larger than a host value
    model = nn.Sequential(*(nn.Linear(width, width) for _ in range(n_params // 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    model(torch.randn(4, width)).sum().backward()

    def step(opt):
        opt.step()
    compiled = dl.capture(step, backend="triton")
    for _ in range(3):                             # the first makes the state eagerly, then compile
        compiled(opt)
    graph = backend.recent[-1]
    assert graph.fallback_reason is None, graph.fallback_reason
    real_call, Launcher.__call__ = Launcher.__call__, lambda self, *args: None
    try:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                compiled(opt)
            times.append((time.perf_counter() - start) / calls)
    finally:
        Launcher.__call__ = real_call
    return statistics.median(times), graph


def time_host_lines(graph, calls: int) -> float:
    """Run the wrapper's host lines by themselves, those that read only graph inputs (the step
    counters; not the stand-in's lerp weights, which aten calls compute), on fresh 0-dim tensors."""
    from dynamo_lite.backends.triton.host_math import RUNTIME
    lines, dropped = [], set()
    for line in graph.wrapper_source.splitlines():
        if not (line.startswith("    h_") or ".fill_(" in line):
            continue
        reads = set(re.findall(r"\b(h_\w+|buf\d+)\b", line.split("=", 1)[-1]))
        if reads & dropped or any(r.startswith("buf") for r in reads):
            dropped.add(line.split()[0])
            continue
        lines.append(line)
    names = sorted(set(re.findall(r"\b(arg\d+)\b", "\n".join(lines))))
    namespace = dict(RUNTIME)
    exec(f"def host({', '.join(names)}):\n" + "\n".join(lines) + "\n", namespace)
    tensors = [torch.tensor(1.0) for _ in names]
    start = time.perf_counter()
    for _ in range(calls):
        namespace["host"](*tensors)
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=52)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    GraphLowering.on_host = stand_in(args.params)
    results = {}
    for host_math in (False, True):
        seconds, graph = time_steps(host_math, args.params, args.calls)
        extern_ops = graph.extern_ops
        results[host_math] = seconds
        name = "python numbers" if host_math else "aten calls    "
        print(f"host scalars as {name}: {seconds * 1e6:8.1f} us per step, "
              f"{sum(extern_ops.values())} aten calls per step {dict(sorted(extern_ops.items()))}")
    print(f"the Python host lines alone (step counters, step sizes, fill_): "
          f"{time_host_lines(graph, args.calls) * 1e6:.1f} us per step")
    print(f"speedup of the step's CPU time: {results[False] / results[True]:.2f}x "
          f"({args.params} parameters, kernels stubbed)")


if __name__ == "__main__":
    main()
