"""Differential fuzzing of dynamo_lite: random programs, eager vs captured.

    python bench/fuzz.py --n 10000 --seed 0            # the full run (about 0.1 s a program per job)
    python bench/fuzz.py --n 2000 --seed 1 --jobs 2
    python bench/fuzz.py --style library --n 2000      # library-style programs (tests/fuzz/library.py)
    python bench/fuzz.py --program 1000042            # one program: print it and its verdict
    python bench/fuzz.py --style library --program 42 # (the style picks the generator)
    python bench/fuzz.py --file tests/regressions/x.py
    python bench/fuzz.py --backend triton --device cuda   # needs triton and a GPU (or TRITON_INTERPRET=1)

Prints the counts (programs, mismatches, crashes, hangs, internal errors, seconds), shrinks each
distinct failure to a minimal program and saves it under tests/regressions/ (replayed by
tests/test_fuzz_regressions.py; --save-dir to put them elsewhere, --no-save to skip), then the
coverage: how many programs captured 1 graph, several, or ran eagerly, and the most frequent
graph-break reasons (--json writes all counts). Exits 1 when any program failed.
The generator, oracle and worker live in tests/fuzz/ (see its __init__.py).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# tests/fuzz is a package of the test suite; this script shares it (and is not itself `fuzz`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import json  # noqa: E402

from fuzz import driver  # noqa: E402
from fuzz.oracle import triton_runnable  # noqa: E402
from fuzz.worker import Worker  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="number of programs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--style", choices=sorted(driver.GENERATORS), default="tensor",
                   help="program generator: tensor (generator.py, default) or library (library.py)")
    p.add_argument("--start", type=int, default=0, help="first program index")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--backend", default="eager", help="eager (default), triton or inductor")
    p.add_argument("--device", default="cpu")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per program before it counts as a hang")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--save-dir", type=Path, default=driver.REGRESSIONS_DIR, help="where shrunk failures go")
    p.add_argument("--json", type=Path, help="write the counts, coverage and failures to this file")
    p.add_argument("--top", type=int, default=15, help="graph-break reasons to list")
    p.add_argument("--max-shrink", type=int, default=10, help="distinct failures to shrink")
    p.add_argument("--program", type=int, help="run only this program (a generator seed) and show it")
    p.add_argument("--file", type=Path, help="run only this program file")
    args = p.parse_args(argv)

    if args.backend == "triton":
        ok, why = triton_runnable(args.device)
        if not ok:
            print(f"skipping the triton backend: {why}")
            return 0

    if args.program is not None or args.file is not None:
        source = driver.strip_header(args.file.read_text()) if args.file else driver.generate(args.program, args.style)
        print(source)
        with Worker() as worker:
            v = worker.run(source, str(args.file or f"<fuzz-{args.program}>"), backend=args.backend,
                           device=args.device, timeout=args.timeout)
        print(f"verdict: {v.category or 'ok'}  frames: {v.statuses}  graphs: {v.graphs}  breaks: {v.breaks}\n{v.message}")
        return 0 if v.ok else 1

    def progress(done: int, failed: int) -> None:
        if done % 250 == 0 or done == args.n:
            print(f"  {done}/{args.n} programs, {failed} failing", flush=True)

    print(f"fuzzing dynamo_lite: {args.n} {args.style}-style programs, seed {args.seed}, backend {args.backend}, "
          f"{args.jobs} jobs", flush=True)
    summary = driver.run_programs(driver.seeds_for(args.seed, args.n, args.start), jobs=args.jobs,
                                  backend=args.backend, device=args.device, timeout=args.timeout, progress=progress,
                                  style=args.style)
    if summary.failures and not args.no_shrink:
        with Worker() as worker:
            for failure in driver.distinct(summary.failures)[:args.max_shrink]:
                print(f"shrinking program {failure.program} [{failure.verdict.category}] "
                      f"({len(failure.source.splitlines())} lines)", flush=True)
                driver.shrink_failure(failure, worker, backend=args.backend, device=args.device,
                                      timeout=args.timeout, log=None)
                print(f"  -> {len(failure.shrunk.splitlines())} lines", flush=True)
                if not args.no_save:
                    driver.save_regression(failure, args.seed, args.save_dir, style=args.style, backend=args.backend)
    print(summary.report())
    print(summary.coverage(args.top))
    if args.json:
        args.json.write_text(json.dumps({
            "style": args.style, "seed": args.seed, "start": args.start, "programs": summary.programs,
            "seconds": summary.seconds, "categories": dict(summary.categories),
            "eager_errors": dict(summary.eager_errors), "statuses": dict(summary.statuses),
            "graphs": summary.graph_buckets(), "breaks": dict(summary.breaks.most_common()),
            "break_programs": dict(summary.break_programs.most_common()),
            "failures": [{"program": f.program, "category": f.verdict.category, "message": f.verdict.message,
                          "saved": str(f.saved) if f.saved else None} for f in summary.failures]}, indent=1))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
