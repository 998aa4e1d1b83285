"""Variants of the triton backend, and every launch config its tuner times, on bench/triton.py's
workloads in one process: one GPU run instead of one per variant.

    python3 bench/triton_sweep.py -k group_norm,cross-entropy --variant "" \
        --variant settings.peel_tail=False [--configs] [--wide] [--inductor]

A variant is comma-separated `module.NAME=VALUE` assignments (VALUE a Python literal) to
attributes of the triton backend's modules (MODULES: `settings`, `codegen`, `launch`,
`lower_reductions`; e.g. `lower_reductions.SPLIT_OUTER_MAX_PROGRAMS=128`); "" is the code as it
is (the default: one variant). Each workload is compiled afresh for each variant, with the launch
configs tuned before not read from disk, so every candidate is timed again. Per variant: ours'
time, ours/Inductor where `--inductor` timed it, % of copy bandwidth, kernels; `--configs` lists
each kernel's timed launch configs, fastest first; `--wide` adds WIDE's configs to the tuner's
candidates, to see whether a better one exists. The assignments are undone after each variant.
Needs a CUDA GPU (`parse_variant` and `assigned` are what tests/test_triton_sweep_bench.py checks
on the CPU).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]   # (bench/triton.py)
sys.path.insert(0, os.path.dirname(_HERE))

MODULES = ("settings", "codegen", "launch", "lower_reductions")

#: launch configs `--wide` adds, by kernel kind: looped reductions along / across rows, 2-D tiles
WIDE = {
    # (blocks larger than a kernel's bound, launch.block_bound, are left out)
    "red_inner": [dict(XBLOCK=1, RBLOCK=r, num_warps=w) for r in (512, 1024, 2048, 4096, 8192) for w in (2, 4, 8, 16, 32)],
    "red_outer": [dict(XBLOCK=x, RBLOCK=r, num_warps=w) for x, r in ((64, 16), (128, 16), (64, 32), (128, 32), (256, 8))
                  for w in (4, 8)],
    "poi": [dict(XBLOCK=x, num_warps=w) for x, w in ((1024, 2), (2048, 4), (4096, 4), (4096, 8), (8192, 8),
                                                       (8192, 16), (16384, 16))],
    "poi_2d": [dict(XBLOCK=x, YBLOCK=y, num_warps=w) for x, y in ((64, 64), (128, 128), (64, 128), (128, 64),
                                                                 (256, 32), (32, 256)) for w in (4, 8)],
}


def parse_variant(text: str) -> list[tuple[str, str, object]]:
    """`"settings.peel_tail=False,launch.TUNE_MIN_NUMEL=1"` -> [(module, name, value), ...]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        target, sep, value = part.partition("=")
        module, dot, name = target.strip().partition(".")
        if not sep or not dot or module not in MODULES or not name:
            raise ValueError(f"{part!r}: expected MODULE.NAME=VALUE with MODULE one of {', '.join(MODULES)}")
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"{part!r}: {value.strip()!r} is not a Python literal") from None
        out.append((module, name, parsed))
    return out


@contextlib.contextmanager
def assigned(assignments):
    """Set each (module, name, value) of the triton backend for the block, then restore it; a name
    the module does not have is an error (a typo would otherwise measure the code as it is)."""
    saved = []
    try:
        for module, name, value in assignments:
            mod = importlib.import_module(f"dynamo_lite.backends.triton.{module}")
            if not hasattr(mod, name):
                raise AttributeError(f"dynamo_lite.backends.triton.{module} has no {name}")
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, value)
        yield
    finally:
        for mod, name, value in reversed(saved):
            setattr(mod, name, value)


def widened(ks, out: list[dict]) -> list[dict]:
    """The tuner's candidates `out` for kernel `ks` and WIDE's for its kind, the blocks of a looped
    reduction bound as the tuner's own are (launch.block_bound: the kernel's code relies on it)."""
    from dynamo_lite.backends.triton import launch
    out = list(out)
    wide = WIDE.get(_kind(ks), [])
    if ks.kind == "per":            # persistent rows: the row's block, rows a program and warps
        rblock = 1 << max(0, (ks.rnumel - 1).bit_length())
        wide = [dict(XBLOCK=x, RBLOCK=rblock, num_warps=w) for x in (1, 2, 4, 8) for w in (1, 2, 4, 8, 16, 32)
                if x * rblock <= 65536]
    for cfg in wide:
        if ks.kind == "red" and cfg["RBLOCK"] > launch.block_bound(ks):
            continue
        if cfg not in out:
            out.append(dict(cfg))
    return out


def _kind(ks) -> str:
    if ks.kind == "poi":
        return "poi_2d" if ks.ynumel > 1 else "poi"
    return f"{ks.kind}_{'inner' if ks.inner else 'outer'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", default="", help="workloads whose name contains one of these (comma-separated)")
    parser.add_argument("--variant", action="append", default=None, help="MODULE.NAME=VALUE,... (repeatable)")
    parser.add_argument("--configs", action="store_true", help="list every launch config timed")
    parser.add_argument("--wide", action="store_true", help="add WIDE's launch configs to the candidates")
    parser.add_argument("--inductor", action="store_true", help="time Inductor once per workload")
    parser.add_argument("--quick", action="store_true", help="bench/triton.py's smaller sizes")
    opts = parser.parse_args(argv)
    variants = [(text, parse_variant(text)) for text in (opts.variant or [""])]

    import torch
    if not torch.cuda.is_available():
        print("bench/triton_sweep.py needs a CUDA GPU")
        return 1
    spec = importlib.util.spec_from_file_location("bench_triton", os.path.join(_HERE, "triton.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import dynamo_lite as dl
    from dynamo_lite.backends.triton import cache, launch

    timed = []
    original_time, original_candidates = launch.Launcher._time, launch.candidates

    def time_and_note(self, cfg, args, reps=8):
        t = original_time(self, cfg, args, reps)
        timed.append((self.ks, dict(cfg), t))
        return t

    def candidates(ks, interpret):
        out = original_candidates(ks, interpret)
        return widened(ks, out) if opts.wide and not interpret else out
    launch.Launcher._time, launch.candidates = time_and_note, candidates
    cache.load_config = lambda *a, **k: None          # every candidate timed again

    torch.backends.cuda.matmul.allow_tf32 = False
    copy_bw = bench.copy_bandwidth()
    print(f"device: {torch.cuda.get_device_name()}, copy bandwidth {copy_bw / 1e12:.2f} TB/s")
    with torch.no_grad():
        for name, fn, args, nbytes in bench.workloads(opts.quick):
            if opts.k and not any(part in name for part in opts.k.split(",")):
                continue
            ref, in_place = bench.reference(fn, args)
            t_ind = None
            if opts.inductor:
                torch._dynamo.reset()
                ind = torch.compile(fn)
                bench.check_engine(ind, args, ref, in_place, f"{name} (inductor)")
                t_ind = bench.bench(ind, args)
            print(f"\n{name}" + (f": Inductor {t_ind:.4f} ms" if t_ind else ""))
            for text, assignments in variants:
                with assigned(assignments):
                    dl.reset()
                    timed.clear()
                    bench._recorded.clear()
                    ours = dl.capture(fn, backend=bench._recording_backend)
                    bench.check_engine(ours, args, ref, in_place, f"{name} (ours, {text or 'as is'})")
                    t = bench.bench(ours, args)
                ratio = f"  ours/Inductor {t / t_ind:.2f}" if t_ind else ""
                share = (f"  {100 * nbytes / (t * 1e-3) / copy_bw:.0f}% of copy, "
                         f"{100 * nbytes / (t * 1e-3) / bench.same_size_copy_bandwidth(nbytes):.0f}% of a "
                         f"same-size copy") if nbytes else ""
                kernels = sum(c.kernel_count for c in bench._recorded)
                print(f"  [{text or 'as is'}] ours {t:.4f} ms{ratio}{share}  ({kernels} kernels)")
                if opts.configs:
                    for ks, cfg, ms in sorted(timed, key=lambda r: (r[0].name, r[2])):
                        print(f"      {ks.kind} x{ks.xnumel} r{ks.rnumel} {cfg}: {ms * 1000:.1f} us  ({ks.name[-12:]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
