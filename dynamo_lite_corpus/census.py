"""A census of the corpus suites: build every model and call it once eagerly, without capturing.

    python -m dynamo_lite_corpus.census --suite timm,torchvision,diffusers [-k PATTERN] [--jobs N]
                                        [--timeout S] [--json FILE]

It answers "how much of this suite builds here, what is skipped and why, and how long does a call
take" before anyone spends an hour on a report. Each model runs in its own process (forked from a
server that has imported torch and the suites' libraries once), under a time limit, so a hang or a
crash is one row. Per suite it prints the models listed, built, skipped (grouped by reason: numbers
in the reasons are masked, so "25.6M parameters, over ..." and "31.0M parameters, over ..." are one
group), failed (grouped by error), and the distribution of the build and eager-call times.

Works for any suite of `dynamo_lite.report.registry.SUITES`.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from typing import Optional

from dynamo_lite.report import registry


@dataclass
class Row:
    name: str
    suite: str
    status: str                  # built / skipped / failed / timeout / crash
    detail: str = ""             # skip reason or error
    stage: str = ""              # where a failure happened: build or call
    params: int = 0
    inputs: str = ""             # the shapes of the call's tensors, e.g. "2x3x32x32"
    build_s: float = 0.0
    eager_s: float = 0.0         # the one eager call


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


def _shapes(value) -> list:
    """The shapes of the tensors in `value` (nested in lists, tuples and dicts), as "2x3x32x32"."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return ["x".join(map(str, value.shape))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _shapes(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _shapes(v)]
    return []


def _census_one(name: str, suites: tuple, threads: int, conn) -> None:
    """In the model's own process: build, call once, send a Row as a dict."""
    import warnings
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(threads)
    row = Row(name, "", "built")
    try:
        entry = registry.get(name, suites)
        row.suite = registry.suite_of(entry) or ""
        start = time.perf_counter()
        try:
            example = entry.build()
        except registry.ModelSkipped as exc:
            row.status, row.detail = "skipped", str(exc)
            return
        except Exception as exc:      # noqa: BLE001 - the builder's failure is this row
            row.status, row.stage, row.detail = "failed", "build", _short(exc)
            return
        row.build_s = time.perf_counter() - start
        if isinstance(example.model, torch.nn.Module):
            row.params = sum(p.numel() for p in example.model.parameters())
        row.inputs = ", ".join(_shapes((example.args, example.kwargs)))[:200]
        torch.manual_seed(1234)
        start = time.perf_counter()
        try:
            example()
        except Exception as exc:      # noqa: BLE001
            row.status, row.stage, row.detail = "failed", "call", _short(exc)
            return
        row.eager_s = time.perf_counter() - start
    except BaseException as exc:      # noqa: BLE001 - even a KeyboardInterrupt is reported, not lost
        row.status, row.detail = "crash", _short(exc)
    finally:
        conn.send(asdict(row))
        conn.close()


def run_census(entries: list, suites: tuple, jobs: int = 1, timeout: float = 300.0, progress=None) -> list[Row]:
    """Run every entry in its own process, `jobs` at a time; rows in the entries' order."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "dynamo_lite.report.registry"]
                                   + [f"{registry.CORPUS_PACKAGE}.{m}" for s in suites for m in registry.SUITES[s].modules])
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    pending, running, rows = list(entries), {}, {}
    while pending or running:
        while pending and len(running) < max(1, jobs):
            entry = pending.pop(0)
            parent, child = context.Pipe(duplex=False)
            process = context.Process(target=_census_one, args=(entry.name, suites, threads, child), daemon=True)
            process.start()
            child.close()
            running[entry.name] = (process, parent, time.monotonic() + timeout, registry.suite_of(entry) or "")
        for name, (process, conn, deadline, suite) in list(running.items()):
            row = None
            if conn.poll():
                try:
                    row = Row(**conn.recv())
                    row.suite = row.suite or suite
                except EOFError:
                    row = Row(name, suite, "crash", f"the model's process died (exit code {process.exitcode})")
                process.join(10)
            elif not process.is_alive():
                row = Row(name, suite, "crash", f"the model's process died (exit code {process.exitcode})")
            elif time.monotonic() > deadline:
                process.kill()
                process.join(10)
                row = Row(name, suite, "timeout", f"no result within {timeout:g} s")
            if row is not None:
                rows[name] = row
                del running[name]
                if progress is not None:
                    progress(row)
        time.sleep(0.02)
    return [rows[e.name] for e in entries]


# --------------------------------------------------------------------------------------------
# the summary
# --------------------------------------------------------------------------------------------

def reason_group(text: str) -> str:
    """A reason with its numbers masked (not digits inside names: "UNet2DModel" stays), so reasons that
    differ only in sizes group together."""
    return re.sub(r"(?<![A-Za-z_])\d+(\.\d+)?", "#", text)[:160]


def distribution(seconds: list) -> str:
    if not seconds:
        return "-"
    values = sorted(seconds)

    def pick(q):
        return values[min(len(values) - 1, int(q * len(values)))]

    buckets = collections.Counter("<10ms" if s < .01 else "<100ms" if s < .1 else "<1s" if s < 1 else "<10s"
                                  if s < 10 else ">=10s" for s in values)
    spread = ", ".join(f"{b} {buckets[b]}" for b in ("<10ms", "<100ms", "<1s", "<10s", ">=10s") if buckets[b])
    return (f"median {pick(.5) * 1e3:.0f} ms, p90 {pick(.9) * 1e3:.0f} ms, max {values[-1] * 1e3:.0f} ms, "
            f"total {sum(values):.1f} s  [{spread}]")


def summary_lines(rows: list[Row], suites: tuple) -> list[str]:
    lines = []
    for suite in suites:
        mine = [r for r in rows if r.suite == suite]
        counts = collections.Counter(r.status for r in mine)
        lines.append(f"suite {suite}: listed {len(mine)}, built {counts['built']}, skipped {counts['skipped']}, "
                     f"failed {counts['failed'] + counts['timeout'] + counts['crash']}"
                     + (f"  (suite problem: {registry.suite_problems[suite]})" if suite in registry.suite_problems
                        else ""))
        for title, statuses in (("skipped", ("skipped",)), ("failed", ("failed", "timeout", "crash"))):
            groups = collections.Counter()
            example = {}
            for r in mine:
                if r.status in statuses:
                    where = r.stage if r.status == "failed" else "" if r.status == "skipped" else r.status
                    key = reason_group(f"{where}: {r.detail}" if where else r.detail)
                    groups[key] += 1
                    example.setdefault(key, r.name)
            if groups:
                lines.append(f"  {title}, by reason:")
                lines += [f"    {n:5d}  {key}  (e.g. {example[key]})" for key, n in groups.most_common()]
        built = [r for r in mine if r.status == "built"]
        if built:
            lines.append(f"  build time: {distribution([r.build_s for r in built])}")
            lines.append(f"  eager call: {distribution([r.eager_s for r in built])}")
            slow = sorted(built, key=lambda r: -r.eager_s)[:5]
            lines.append("  slowest calls: " + ", ".join(f"{r.name} {r.eager_s:.2f} s" for r in slow))
    return lines


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynamo_lite_corpus.census", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="timm,torchvision,diffusers", help="comma-separated suites (or all)")
    parser.add_argument("-k", dest="pattern", help="only models whose name contains PATTERN (or a tag, or a glob)")
    parser.add_argument("--jobs", type=int, default=1, help="models run in parallel (one process each)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model (build and call)")
    parser.add_argument("--json", metavar="FILE", help="write the rows and the counts as JSON")
    parser.add_argument("--quiet", "-q", action="store_true", help="no line per model")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")              # the corpus never downloads anything
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    suites = registry.parse_suites(args.suite)
    started = time.monotonic()
    entries = registry.all_models(args.pattern, suites=suites)
    listed_s = time.monotonic() - started
    print(f"{len(entries)} models in {', '.join(suites)} (listed in {listed_s:.1f} s); --jobs {args.jobs}", flush=True)

    def progress(row: Row):
        if not args.quiet:
            what = f"{row.eager_s * 1e3:8.1f} ms  {row.inputs}" if row.status == "built" else row.detail[:150]
            print(f"{row.name:60s} {row.status:8s} {what}", flush=True)

    rows = run_census(entries, suites, args.jobs, args.timeout, progress)
    lines = summary_lines(rows, suites)
    print("", *lines, f"wall time {time.monotonic() - started:.0f} s", sep="\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suites": list(suites), "problems": dict(registry.suite_problems),
                       "summary": lines, "rows": [asdict(r) for r in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
