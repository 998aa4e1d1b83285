"""Sorts, top-k and cummax by row width on the GPU: eager vs Inductor vs dynamo_lite's `triton`
backend, in one run, to place `lower_reductions.SORT_MAX` (the widest row the backend sorts in
registers; wider rows stay aten calls).

    python3 bench/sorts.py [--widths 64,256,1024,4096] [--elements 24] [--no-inductor] [--sort-max N]

Per dtype (fp16, fp32), row width n and op — a descending stable sort (values and indices), the
top 8 (`topk`), `cummax` — over 2^elements elements in rows of n: each engine's median time
(`triton.testing.do_bench`), ours/eager and ours/Inductor, whether ours ran as kernels or as
aten calls (rows wider than SORT_MAX), and whether ours equals eager (values and, for the sort,
indices: a stable sort has one answer). `--sort-max N` sets SORT_MAX for the run, to time the
kernels of rows wider than it is now. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]   # (bench/triton.py)
sys.path.insert(0, os.path.dirname(_HERE))

import torch                                               # noqa: E402


def sort_rows(x):
    return torch.sort(x, dim=-1, descending=True, stable=True)


def top8(x):
    return torch.topk(x, 8, dim=-1)


def running_max(x):
    return torch.cummax(x, dim=-1)


OPS = (("sort", sort_rows), ("topk8", top8), ("cummax", running_max))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--widths", default="64,256,1024,4096")
    parser.add_argument("--elements", type=int, default=24, help="log2 of the elements per tensor")
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--sort-max", type=int, default=None, help="lower_reductions.SORT_MAX for this run")
    opts = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/sorts.py needs a CUDA GPU")
        return 1
    from triton.testing import do_bench

    import dynamo_lite as dl
    from dynamo_lite.backends.triton import backend, lower_reductions
    if opts.sort_max is not None:
        lower_reductions.SORT_MAX = opts.sort_max

    print(f"device: {torch.cuda.get_device_name()}; ms (median); ours/eager, ours/Inductor")
    for dtype in (torch.float16, torch.float32):
        for n in map(int, opts.widths.split(",")):
            x = torch.rand((1 << opts.elements) // n, n, device="cuda", dtype=dtype)
            for name, fn in OPS:
                dl.reset()
                torch._dynamo.reset()
                backend.recent.clear()
                ours = dl.capture(fn, backend="triton")
                ind = None if opts.no_inductor else torch.compile(fn)
                try:
                    expected, got = fn(x), ours(x)
                    same = torch.equal(expected[0], got[0]) and (name != "sort" or torch.equal(expected[1], got[1]))
                    aten = sum(sum(g.extern_ops.values()) for g in backend.recent)
                    t_eager = do_bench(lambda: fn(x), warmup=10, rep=50)
                    t_ours = do_bench(lambda: ours(x), warmup=10, rep=50)
                    line = (f"{name:7s} {str(dtype)[6:]:8s} n={n:5d}  eager {t_eager:.3f}  ours {t_ours:.3f} "
                            f"({'aten' if aten else 'kernels'})  ours/eager {t_ours / t_eager:.2f}")
                    if ind is not None:
                        ind(x)
                        t_ind = do_bench(lambda: ind(x), warmup=10, rep=50)
                        line += f"  Inductor {t_ind:.3f}  ours/Inductor {t_ours / t_ind:.2f}"
                    print(line + ("" if same else "  !! differs from eager"), flush=True)
                except Exception as e:             # an engine's failure is its row, not the run's end
                    print(f"{name:7s} {str(dtype)[6:]:8s} n={n:5d}  ERROR {e!r:.200}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
