"""`dynamo-lite report`: run a corpus of models eagerly and under capture, one isolated process per
model, and report graphs, graph breaks (with their hints), correctness, capture time and
steady-state call time; optionally TorchDynamo's numbers side by side from the same run.

The per-model work is dynamo_lite.report.survey.survey_model; this module adds isolation (a crash or a hang
is one failed row), parallel jobs, a progress bar, the tables and the JSON file.
"""
from __future__ import annotations

import collections
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import runpy
import sys
import time
from dataclasses import dataclass
from typing import Optional

from .. import breaks
from . import registry


# `--ray` without `--jobs`: as many models in flight as the cluster has CPUs.
ALL_CPUS = 0


@dataclass
class ReportOptions:
    paths: tuple = ()
    backend: str = "eager"
    compare: Optional[str] = None       # "torch" to run TorchDynamo too
    jobs: int = 1                 # ALL_CPUS (0): as many as the Ray cluster has CPUs
    pattern: Optional[str] = None
    timeout: float = 120.0
    json_path: Optional[str] = None
    resume_path: Optional[str] = None   # a --json file of an earlier (possibly killed) run to continue
    suites: tuple = registry.DEFAULT_SUITES   # which suites of the bundled corpus (ignored with paths)
    html_path: Optional[str] = None     # also write the self-contained HTML report here
    ray: Optional[str] = None           # run the models on a Ray cluster: its address, or "local"


def _load_entries(options: ReportOptions):
    if not options.paths:
        return registry.all_models(options.pattern, suites=options.suites)
    before = set(registry._REGISTRY)
    for path in options.paths:
        files = [os.path.join(root, f) for root, _, names in os.walk(path) for f in sorted(names)
                 if f.endswith(".py")] if os.path.isdir(path) else [path]
        for file in files:
            runpy.run_path(file, run_name=f"corpus_user_{abs(hash(file))}")
    return [e for name, e in registry._REGISTRY.items() if name not in before and e.matches(options.pattern)]


def _child(name: str, suite: Optional[str], options: ReportOptions, conn) -> None:
    """Runs in its own process: survey one model (of `suite`: only that suite's modules are
    imported, if the forkserver has not already), send the result as a dict."""
    try:
        import logging
        import warnings
        warnings.simplefilter("ignore")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")   # it resets its logger's level on import
        # the rows and tables are the report: keep libraries' own chatter (TorchDynamo's graph-break
        # warnings in --compare runs, transformers' fallback notices) off the terminal
        for noisy in ("torch._dynamo", "torch._inductor", "transformers"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        import torch
        # parallel models share the machine's cores: without this each process runs torch's
        # thread pool on all of them, and the spin-waiting of oversubscribed pools makes the
        # timings of small models noise (tens of times their real value, at random)
        cores = os.cpu_count() or 1
        in_parallel = options.jobs if options.jobs != ALL_CPUS else cores    # (--ray: one model per core)
        torch.set_num_threads(max(1, cores // in_parallel))
        from dynamo_lite.report.survey import survey_model, warm_up
        if options.paths:
            _load_entries(options)
        entry = registry.get(name, (suite,) if suite else options.suites)
        # warmed up once the model is built: a model skipped at build time costs no engine start-up
        result = survey_model(entry, compare_torch=options.compare == "torch", timeout=options.timeout,
                              backend=options.backend, prepare=lambda: warm_up(options.compare == "torch"))
        conn.send(result.to_json())
    except BaseException as exc:   # noqa: BLE001 - any failure is this model's row
        conn.send(registry.failed_row(name, "CRASH", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class IsolatedModel:
    """One model surveyed in a process of its own (started from a forkserver that has torch imported),
    with a deadline: whatever happens there, `poll`/`wait` give one row for it, its survey's, a CRASH
    row when the process dies without one, or a timeout row (and the process killed) past the deadline.
    The local scheduler (`_run_all`) keeps `--jobs` of these running; a Ray task runs one
    (`run_model_isolated`)."""

    def __init__(self, name: str, options: ReportOptions):
        context = multiprocessing.get_context("forkserver")
        # the forkserver imports torch, dynamo_lite and the corpus modules of the suites once; each
        # model's process is forked from it (a zoo library's import costs seconds, times hundreds)
        context.set_forkserver_preload(["torch", "dynamo_lite", "dynamo_lite.report.survey",
                                        *registry.suite_modules(() if options.paths else options.suites)])
        self.name = name
        # each engine's calls have `timeout` seconds inside the survey; this is the backstop for a
        # process stuck where no such timeout reaches (a C extension, a deadlock, an import)
        self.deadline_s = options.timeout * (4 if options.compare else 2) + 60
        self._deadline = time.monotonic() + self.deadline_s
        self._conn, child_end = context.Pipe(duplex=False)
        suite = None if options.paths else registry.suite_of_name(name)
        self._process = context.Process(target=_child, args=(name, suite, options, child_end), daemon=True)
        self._process.start()
        child_end.close()

    @property
    def waitables(self) -> list:
        """What `multiprocessing.connection.wait` wakes up on: a row sent, or the process gone."""
        return [self._conn, self._process.sentinel]

    def poll(self) -> Optional[dict]:
        """The model's row if it is settled now, else None."""
        alive = self._process.is_alive()     # asked first: a row sent just before exiting is still read
        if self._conn.poll():
            try:
                row = self._conn.recv()
            except EOFError:                 # the pipe closed without a row: the process died
                return self._died()
            self._process.join(10)
            self.kill()
            return row
        if not alive:
            return self._died()
        if time.monotonic() > self._deadline:
            self.kill()
            return registry.failed_row(self.name, "timeout", f"no result within {self.deadline_s:.0f} s")
        return None

    def wait(self) -> dict:
        """Block until the model's row is settled (at the latest at the deadline) and return it."""
        while True:
            row = self.poll()
            if row is not None:
                return row
            multiprocessing.connection.wait(self.waitables, timeout=max(0.0, self._deadline - time.monotonic()))

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()

    def _died(self) -> dict:
        self._process.join(10)
        self.kill()
        return registry.failed_row(self.name, "CRASH", f"the model's process died (exit code {self._process.exitcode})")


def run_model_isolated(name: str, options: ReportOptions) -> dict:
    """Survey one model in a process of its own, with its deadline, and return its row (a crash or a
    hang is a failed row, never an exception): what a Ray task runs for each model."""
    return IsolatedModel(name, options).wait()


def _run_all(entries, options: ReportOptions, progress=None) -> list[dict]:
    """Run every entry in its own process (`--jobs` at a time, or on a Ray cluster with `--ray`);
    `progress(row)` is called as each finishes. Returns the rows in the entries' order."""
    if options.ray is not None:
        from .ray_runner import run_all_on_ray
        return run_all_on_ray(entries, options, progress, run_one=run_model_isolated)
    pending = [e.name for e in entries]
    running: list[IsolatedModel] = []
    results: dict = {}
    try:
        while pending or running:
            while pending and len(running) < max(1, options.jobs):
                running.append(IsolatedModel(pending.pop(0), options))
            multiprocessing.connection.wait([w for model in running for w in model.waitables], timeout=1.0)
            for model in list(running):
                row = model.poll()
                if row is not None:
                    running.remove(model)
                    results[model.name] = row
                    if progress is not None:
                        progress(row)
    finally:                           # interrupted (Ctrl-C): no model process outlives the run
        for model in running:
            model.kill()
    return [results[e.name] for e in entries]


def _events(result: dict, status: str) -> list:
    dl = result.get("dl") or {}
    return [e for e in dl.get("events", []) if e["status"] == status]


def summary(results: list[dict], compare: Optional[str]) -> dict:
    statuses = collections.Counter(r["status"] for r in results)
    ran = [r for r in results if r.get("dl")]
    out = {"models": len(results), "statuses": dict(statuses),
           "correct": sum(1 for r in ran if r["dl"]["status"] == "ok"),
           "wrong": sum(1 for r in ran if r["dl"]["status"] == "WRONG"),
           "dl_graphs": sum(r["dl"]["graphs"] for r in ran),
           "dl_breaks": sum(r["dl"]["breaks"] for r in ran),
           "dl_eager_frames": sum(r["dl"]["eager_frames"] for r in ran)}
    steady = [r["dl"]["steady_call_s"] / r["eager_steady_s"] for r in ran
              if r["dl"]["status"] == "ok" and r.get("eager_steady_s")]
    if steady:
        out["steady_call_vs_eager_geomean"] = math.exp(sum(map(math.log, steady)) / len(steady))
    if compare:
        both = [r for r in ran if r.get("torch")]
        out["torch_graphs"] = sum(r["torch"]["graphs"] for r in both)
        out["torch_breaks"] = sum(r["torch"]["breaks"] for r in both)
        ok = [r for r in both if r["dl"]["status"] == r["torch"]["status"] == "ok"
              and r["dl"]["first_call_s"] and r["torch"]["first_call_s"]]
        if ok:
            out["capture_ratio_geomean"] = math.exp(sum(math.log(r["dl"]["first_call_s"] / r["torch"]["first_call_s"])
                                                        for r in ok) / len(ok))
            out["capture_ratio_models"] = len(ok)
        steady_both = [r for r in ok if r["dl"].get("steady_call_s") and r["torch"].get("steady_call_s")]
        if steady_both:
            out["steady_ratio_geomean"] = math.exp(sum(math.log(r["dl"]["steady_call_s"] / r["torch"]["steady_call_s"])
                                                       for r in steady_both) / len(steady_both))
        out["models_with_fewer_or_equal_graphs"] = sum(1 for r in ok if r["dl"]["graphs"] <= r["torch"]["graphs"])
        # Where TorchDynamo captured nothing (it ran the whole model eagerly), any graph of ours is
        # more capture, not more fragmentation: told apart, never hidden.
        out["models_with_more_graphs"] = [
            {"name": r["name"], "dl": r["dl"]["graphs"], "torch": r["torch"]["graphs"],
             "torch_captured_nothing": r["torch"]["graphs"] == 0}
            for r in both if r["dl"]["status"] == r["torch"]["status"] == "ok" and r["dl"]["graphs"] > r["torch"]["graphs"]]
    kinds = collections.Counter()
    for r in ran:
        for e in _events(r, "break") + _events(r, "fallback"):
            kinds[breaks.event_kind(e)] += 1
    out["break_kinds"] = dict(kinds.most_common())
    return out


def _render(results: list[dict], info: dict, options: ReportOptions, console) -> None:
    from rich.table import Table
    table = Table(title=f"dynamo-lite report ({len(results)} models, backend {options.backend})")
    for col in ("model", "result", "graphs", "breaks", "eager", "top break kinds", "ops", "capture ms", "call/eager"):
        table.add_column(col, justify="right" if col not in ("model", "result", "top break kinds") else "left")
    if options.compare:
        for col in ("torch graphs", "torch breaks", "capture dl/torch"):
            table.add_column(col, justify="right")
    for r in results:
        dl = r.get("dl")
        if not dl:
            table.add_row(r["name"], f"{r['status']}: {r.get('detail', '')[:60]}", *[""] * (7 + 3 * bool(options.compare)))
            continue
        kinds = collections.Counter(e["kind_name"] for e in _events(r, "break") + _events(r, "fallback"))
        ratio = dl["steady_call_s"] / r["eager_steady_s"] if r.get("eager_steady_s") else float("nan")
        row = [r["name"], "ok" if dl["status"] == "ok" else f"[red]{dl['status']}[/red]", str(dl["graphs"]),
               str(dl["breaks"]), str(dl["eager_frames"]), ", ".join(f"{k} x{n}" for k, n in kinds.most_common(2)),
               str(dl["ops"]), f"{dl['first_call_s'] * 1e3:.0f}", f"{ratio:.2f}"]
        if options.compare:
            t = r.get("torch") or {}
            cap = dl["first_call_s"] / t["first_call_s"] if t.get("first_call_s") else float("nan")
            row += [str(t.get("graphs", "")), str(t.get("breaks", "")), f"{cap:.2f}"]
        table.add_row(*row)
    console.print(table)
    kinds = Table(title="graph-break kinds across the corpus (breaks + frames run eagerly)")
    for col in ("kind", "count", "what", "hint"):
        kinds.add_column(col)
    for kind_id, n in info["break_kinds"].items():
        k = breaks.KINDS.get(kind_id)
        kinds.add_row(f"{kind_id} {k.name if k else ''}", str(n), k.explanation if k else "", k.hint if k else "")
    console.print(kinds)
    lines = [f"models {info['models']}: correct {info['correct']}, wrong {info['wrong']}, "
             + ", ".join(f"{k} {v}" for k, v in info["statuses"].items()),
             f"dynamo_lite: {info['dl_graphs']} graphs, {info['dl_breaks']} breaks, "
             f"{info['dl_eager_frames']} frames run eagerly"]
    if "steady_call_vs_eager_geomean" in info:
        lines.append(f"steady-state call time / eager, geometric mean: {info['steady_call_vs_eager_geomean']:.2f}")
    if options.compare and "torch_graphs" in info:
        lines.append(f"TorchDynamo: {info['torch_graphs']} graphs, {info['torch_breaks']} breaks; models with "
                     f"graphs <= TorchDynamo's: {info.get('models_with_fewer_or_equal_graphs', 0)}")
        over = info.get("models_with_more_graphs", [])
        if over:
            lines.append("more graphs than TorchDynamo: " + ", ".join(
                f"{m['name']} ({m['dl']} vs {m['torch']}{': TorchDynamo captured nothing' if m['torch_captured_nothing'] else ''})"
                for m in over))
        if "capture_ratio_geomean" in info:
            lines.append(f"capture (first call) dynamo_lite / TorchDynamo, geometric mean over "
                         f"{info['capture_ratio_models']} models: {info['capture_ratio_geomean']:.2f}x")
        if "steady_ratio_geomean" in info:
            lines.append(f"steady-state call dynamo_lite / TorchDynamo, geometric mean: "
                         f"{info['steady_ratio_geomean']:.2f}x")
    for line in lines:
        console.print(line)


def run_report(options: ReportOptions) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    console = Console()
    if options.ray is not None:
        from .ray_runner import RayNotInstalled, require_ray
        try:
            require_ray()
        except RayNotInstalled as e:
            print(f"dynamo-lite report: {e}", file=sys.stderr)
            return 2
    entries = _load_entries(options)
    if not entries:
        console.print("no models matched")
        return 2
    try:
        done = _resumed_rows(options, entries)
    except ValueError as e:
        console.print(f"dynamo-lite report: {e}")
        return 2
    json_path = options.json_path or options.resume_path
    pending = [e for e in entries if e.name not in done]
    if done:
        console.print(f"resuming {options.resume_path}: {len(done)} model(s) done, {len(pending)} to run")
    start = time.perf_counter()
    finished = dict(done)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("running models", total=len(pending))

        def advance(result):
            bar.update(task, advance=1, description=f"{result['name']}: {result['status']}")
            finished[result["name"]] = result
            if json_path:            # each result on disk as it comes: a killed run can be resumed
                _write_json(json_path, [finished[e.name] for e in entries if e.name in finished], options,
                            partial=True)

        _run_all(pending, options, advance)
    results = [finished[e.name] for e in entries]
    info = summary(results, options.compare)
    info["seconds"] = round(time.perf_counter() - start, 1)
    _render(results, info, options, console)
    where = f" on Ray ({options.ray})" if options.ray is not None else ""
    jobs = options.jobs if options.jobs != ALL_CPUS else "(one per CPU of the cluster)"
    console.print(f"wall time {info['seconds']} s with --jobs {jobs}{where}")
    if json_path:
        _write_json(json_path, results, options, info=info)
    if options.html_path:
        from .html import write_html
        write_html(options.html_path, results, info, options)
        console.print(f"HTML report: {options.html_path}")
    return 1 if info["wrong"] else 0


def _write_json(path: str, results: list, options: ReportOptions, info: Optional[dict] = None,
                partial: bool = False) -> None:
    """Write the report file (through a temporary file: a kill mid-write leaves the last one)."""
    data = {"summary": info if info is not None else summary(results, options.compare), "models": results,
            "options": vars(options)}
    if partial:
        data["partial"] = True
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(tmp, path)


def _resumed_rows(options: ReportOptions, entries) -> dict:
    """name -> row of the models an earlier run (`--resume FILE`) finished, for this run's models;
    ValueError when that run was made with other engines or backend (its rows would not compare)."""
    if not options.resume_path:
        return {}
    if not os.path.exists(options.resume_path):
        return {}                   # nothing written yet: start from the beginning
    with open(options.resume_path) as f:
        data = json.load(f)
    before = data.get("options") or {}
    for key in ("compare", "backend"):
        if before.get(key) != getattr(options, key):
            raise ValueError(f"{options.resume_path} was run with --{key} {before.get(key)!r}, this run with "
                             f"{getattr(options, key)!r}: its results cannot be continued")
    wanted = {e.name for e in entries}
    return {row["name"]: row for row in data.get("models", []) if row.get("name") in wanted}
