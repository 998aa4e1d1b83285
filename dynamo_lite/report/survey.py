"""Survey the corpus: run every model eagerly and under `dl.capture`, and say what happened.

    python3 -m dynamo_lite.report.survey [-k PATTERN] [--compare torch] [--no-grad] [--json FILE] [--verbose]

For each model: build it (twice: a fresh, identically seeded copy per engine, so no run sees
another's state), run it eagerly, then under ``dl.capture(model, backend=counting)`` (and with
``--compare torch`` under ``torch.compile(model, backend=counting)``), with the RNG seeded the same
before each run and printed output captured. Then compare outputs (`dynamo_lite.report.compare`) and printed
text, call the captured model a second time (it must agree again; recaptures are counted) and a
third time with `shuffled` inputs (float values permuted: a graph that baked in data is caught), and
print one row per model followed by its graph breaks and the frames that ran eagerly, with their
reasons, from `dynamo_lite.fallback.records.RECORDS`.

Statuses: ``ok`` (same results as eager), ``WRONG`` (captured result or printed output differs:
a bug), ``CRASH`` (capture raised where eager did not: a bug), ``timeout``, ``skipped`` (optional
dependency missing, or the model cannot be built small: `ModelSkipped`), ``eager-error`` (the model itself fails: a corpus bug).

`survey_model(entry, ...)` returns a `SurveyResult` and is what other tools (the report CLI)
can reuse; `main()` is the command line. Exit status 1 when any model is WRONG or CRASH.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import io
import json
import linecache
import logging
import math
import os
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from .compare import Mismatch, compare, max_abs_diff
from .registry import Example, ModelEntry, ModelSkipped, all_models, suite_of


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------

@dataclass
class FrameEvent:
    """A dynamo_lite record other than a clean capture: a graph break the frame resumed after
    (status "break"), a frame that ran eagerly (status "fallback", with `fallback_reason`), or an
    internal error (status "error", the frame ran eagerly too)."""
    function: str
    status: str
    kind_id: str
    kind_name: str
    detail: str
    location: str
    fallback_reason: str = ""
    source: str = ""                  # the line of code at `location` (so reports need not have the file)
    fallback_kind_id: str = ""        # status "fallback": the registry kind of why it could not resume

    def describe(self) -> str:
        what = {"break": "break", "fallback": "eager", "error": "ERROR"}.get(self.status, self.status)
        kind = f"[{self.fallback_kind_id}] " if self.fallback_kind_id else ""
        why = f" (ran eagerly: {kind}{self.fallback_reason})" if self.fallback_reason else ""
        return f"{what}: [{self.kind_id} {self.kind_name}] {self.function} at {self.location}: {self.detail}{why}"


@dataclass
class EngineRun:
    """One engine's run of one model."""
    engine: str                       # "dl" or "torch"
    status: str = "ok"                # ok / WRONG / CRASH / timeout
    graphs: int = 0                   # graphs handed to the backend on the first call
    ops: int = 0                      # call_function/call_method/call_module nodes in those graphs
    captured_frames: int = 0          # dl: frames captured (with or without breaks)
    breaks: int = 0                   # graph breaks (dl: records with status "break"; torch: counters)
    eager_frames: int = 0             # dl: frames that ran eagerly (status "fallback" or "error")
    events: list = field(default_factory=list)   # dl: [FrameEvent]; torch: ["<n>x <reason>"]
    recaptures: int = 0               # new graphs on the second, identical call
    first_call_s: float = 0.0         # capture + run
    steady_call_s: float = 0.0        # a later call
    max_abs_diff: float = 0.0
    detail: str = ""                  # mismatch or crash message


@dataclass
class SurveyResult:
    name: str
    tags: tuple
    status: str                       # ok / WRONG / CRASH / timeout / skipped / eager-error
    detail: str = ""
    eager_s: float = 0.0
    eager_steady_s: float = 0.0       # a later eager call, for steady-state ratios
    dl: Optional[EngineRun] = None
    torch: Optional[EngineRun] = None
    suite: Optional[str] = None       # the corpus suite (registry.SUITES) or None for a user's file

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class CountingBackend:
    """A torch.compile-contract backend that records the graphs it is handed and runs them as is."""

    def __init__(self):
        self.graphs = []

    inner = None        # a backend to hand each graph on to (None: run the fx graph as is)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        return self.inner(gm, example_inputs) if self.inner is not None else gm.forward

    @property
    def ops(self) -> int:
        return sum(1 for gm in self.graphs for node in gm.graph.nodes
                   if node.op in ("call_function", "call_method", "call_module"))


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: Optional[float]):
    """SIGALRM-based limit (main thread, Unix); a no-op elsewhere or when seconds is falsy."""
    usable = seconds and hasattr(signal, "SIGALRM") and _is_main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _is_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _quiet():
    """Capture stdout (returned as a StringIO) and silence warnings and stderr logging."""
    buffer = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(buffer):
        warnings.simplefilter("ignore")
        yield buffer


def _build(entry: ModelEntry) -> Example:
    """Build with every RNG seeded the same, so each engine's copy of a model that does not seed
    itself (a user's model file) gets the same weights and inputs."""
    import random
    random.seed(0)
    torch.manual_seed(0)
    try:
        import numpy
        numpy.random.seed(0)
    except ImportError:
        pass
    return entry.build()


def _call(example: Example, fn, grad: bool):
    """Seed, copy the inputs, call; returns (output, printed text, seconds)."""
    args, kwargs = copy.deepcopy((example.args, example.kwargs))
    torch.manual_seed(1234)
    with _quiet() as printed, torch.set_grad_enabled(grad):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds = time.perf_counter() - start
    return out, printed.getvalue(), seconds


def shuffled(example: Example) -> Example:
    """The same inputs with every floating tensor's values permuted (same shapes, dtypes and value
    ranges, different data): a captured graph that baked in input values gives itself away."""
    gen = torch.Generator().manual_seed(99)

    def walk(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            flat = value.detach().reshape(-1)
            return flat[torch.randperm(flat.numel(), generator=gen)].reshape(value.shape).clone()
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(walk(v) for v in value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return Example(example.model, walk(example.args), walk(example.kwargs))


def _short(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0] if message else ''}{where}"


# --------------------------------------------------------------------------------------------
# engines
# --------------------------------------------------------------------------------------------

def _capture_dl(model, backend):
    import dynamo_lite as dl
    dl.reset()
    return dl.capture(model, backend=backend)


def _capture_torch(model, backend):
    import torch._dynamo as torch_dynamo
    from torch._dynamo.utils import counters
    torch_dynamo.reset()
    counters.clear()
    return torch.compile(model, backend=backend)


def _dl_frames(run: EngineRun, records) -> None:
    for r in records:
        if r.status == "captured":
            run.captured_frames += 1
            continue
        if r.status == "break":
            run.breaks += 1
        else:
            run.eager_frames += 1
        kind_id, kind_name = (r.kind.id, r.kind.name) if r.kind else ("-", "internal-error")
        run.events.append(FrameEvent(
            getattr(r, "qualname", "") or r.name, r.status, kind_id, kind_name,
            " ".join(str(r.detail).split())[:300], r.location,
            " ".join(str(getattr(r, "fallback_reason", "") or "").split())[:200], source_line(r.location),
            r.fallback_kind.id if getattr(r, "fallback_kind", None) else ""))


def source_line(location: str) -> str:
    """The stripped line of code at a "file:line" location ("" when the file cannot be read)."""
    file, _, line = str(location).rpartition(":")
    return linecache.getline(file, int(line)).strip() if file and line.isdigit() else ""


def _torch_breaks(run: EngineRun) -> None:
    from torch._dynamo.utils import counters
    reasons = counters["graph_break"]
    run.breaks = sum(reasons.values())
    run.events = [f"{count}x {reason.splitlines()[0]}" for reason, count in reasons.most_common()]


def run_engine(entry: ModelEntry, engine: str, expected: Any, expected_printed: str, grad: bool,
               timeout: Optional[float], expected_shuffled: Any = None, backend_name: str = "eager") -> EngineRun:
    """Build a fresh copy of `entry`, capture it with `engine` ("dl" or "torch") and compare with eager:
    the first call, a second identical call (counting recaptures), and a call with `shuffled` inputs
    when `expected_shuffled` (eager's output for them) is given."""
    from dynamo_lite.fallback.records import RECORDS

    run = EngineRun(engine)
    backend = CountingBackend()
    if engine == "dl" and backend_name != "eager":
        from dynamo_lite.backends import lookup_backend
        backend.inner = lookup_backend(backend_name)
    example = _build(entry)
    out = None
    try:
        with _time_limit(timeout):
            captured = (_capture_dl if engine == "dl" else _capture_torch)(example.model, backend)
            out, printed, run.first_call_s = _call(example, captured, grad)
            run.graphs, run.ops = len(backend.graphs), backend.ops
            if engine == "dl":
                _dl_frames(run, list(RECORDS))
            else:
                _torch_breaks(run)
            compare(expected, out)
            if printed != expected_printed:
                raise Mismatch(f"printed output differs: {printed!r} != eager {expected_printed!r}")
            out, printed, run.steady_call_s = _call(example, captured, grad)
            run.steady_call_s = min([run.steady_call_s] + [_call(example, captured, grad)[2] for _ in range(2)])
            run.recaptures = len(backend.graphs) - run.graphs
            compare(expected, out, path="second call: out")
            if printed != expected_printed:
                raise Mismatch(f"second call: printed output differs: {printed!r} != eager {expected_printed!r}")
            if expected_shuffled is not None:
                out, printed, _ = _call(shuffled(example), captured, grad)
                compare(expected_shuffled[0], out, path="shuffled inputs: out")
                if printed != expected_shuffled[1]:
                    raise Mismatch(f"shuffled inputs: printed output differs: {printed!r} != eager "
                                   f"{expected_shuffled[1]!r}")
    except Mismatch as exc:
        run.status, run.detail = "WRONG", str(exc)
        run.max_abs_diff = max_abs_diff(expected, out)
    except _Timeout as exc:
        run.status, run.detail = "timeout", str(exc)
    except Exception as exc:          # a crash of the engine: one failed row, not a dead survey
        run.status, run.detail = "CRASH", _short(exc)
        run.graphs, run.ops = len(backend.graphs), backend.ops
        if engine == "dl" and not run.captured_frames and not run.events:
            _dl_frames(run, list(RECORDS))
        elif engine == "torch" and not run.events:
            _torch_breaks(run)
    finally:
        if engine == "dl":
            import dynamo_lite as dl
            dl.reset()
        else:
            import torch._dynamo as torch_dynamo
            torch_dynamo.reset()
    return run


def survey_model(entry: ModelEntry, compare_torch: bool = False, grad: bool = True,
                 timeout: Optional[float] = 120.0, backend: str = "eager",
                 prepare: Optional[Callable[[], None]] = None) -> SurveyResult:
    """Run one corpus model eagerly and under dynamo_lite (and TorchDynamo); see the module docstring.
    `prepare()` runs once the model is built, before its first call (the report warms the engines up there)."""
    result = SurveyResult(entry.name, entry.tags, "ok", suite=suite_of(entry))
    try:
        example = _build(entry)
        if prepare is not None:
            prepare()
        with _time_limit(timeout):
            expected, printed, result.eager_s = _call(example, example.model, grad)
            result.eager_steady_s = min(_call(example, example.model, grad)[2] for _ in range(3))
    except ModelSkipped as exc:
        result.status, result.detail = "skipped", str(exc)
        return result
    except _Timeout as exc:
        result.status, result.detail = "timeout", f"the eager run {exc}"
        return result
    except Exception as exc:
        result.status, result.detail = "eager-error", _short(exc)
        return result
    try:
        with _time_limit(timeout):
            expected_shuffled = _call(shuffled(example), example.model, grad)[:2]
    except Exception:                # the model rejects shuffled inputs: skip that check
        expected_shuffled = None
    result.dl = run_engine(entry, "dl", expected, printed, grad, timeout, expected_shuffled, backend)
    if compare_torch:
        result.torch = run_engine(entry, "torch", expected, printed, grad, timeout, expected_shuffled)
    result.status = result.dl.status
    result.detail = result.dl.detail
    return result


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _row(result: SurveyResult, compare_torch: bool) -> str:
    head = f"{result.name:28s} {result.status:11s}"
    if result.dl is None:
        return f"{head} {result.detail}"
    dl = result.dl
    kinds = collections.Counter(e.kind_name for e in dl.events)
    reasons = ", ".join(k + (f" x{n}" if n > 1 else "") for k, n in kinds.most_common()) or "-"
    text = (f"{head} graphs {dl.graphs:3d}  breaks {dl.breaks:2d}  eager {dl.eager_frames:2d}  ops {dl.ops:4d}  "
            f"recap {dl.recaptures}  first {dl.first_call_s * 1e3:7.1f} ms  | {reasons}")
    if compare_torch and result.torch is not None:
        t = result.torch
        text += (f"\n{'':28s} {'torch ' + t.status:11s} graphs {t.graphs:3d}  breaks {t.breaks:2d}  {'':8s}  "
                 f"ops {t.ops:4d}  recap {t.recaptures}  first {t.first_call_s * 1e3:7.1f} ms")
    return text


def _details(result: SurveyResult, verbose: bool) -> list:
    lines = []
    if result.dl is not None:
        if result.dl.detail:
            lines.append(f"    !! {result.dl.detail}")
        shown = result.dl.events if verbose else result.dl.events[:4]
        lines += [f"    {e.describe()}"[:240] for e in shown]
        if len(result.dl.events) > len(shown):
            lines.append(f"    ... {len(result.dl.events) - len(shown)} more (--verbose)")
    if result.torch is not None:
        if result.torch.detail:
            lines.append(f"    torch !! {result.torch.detail}")
        if verbose:
            lines += [f"    torch break: {b}"[:240] for b in result.torch.events]
    return lines


def summarize(results: list, compare_torch: bool) -> list:
    """Totals, statuses and the most frequent graph-break / eager-frame reasons."""
    statuses = collections.Counter(r.status for r in results)
    ran = [r for r in results if r.dl is not None]
    whole = sum(1 for r in ran if r.dl.status == "ok" and r.dl.graphs == 1 and not r.dl.events)
    lines = ["", "=" * 100,
             f"models {len(results)}: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()),
             f"dynamo_lite: graphs {sum(r.dl.graphs for r in ran)}, breaks {sum(r.dl.breaks for r in ran)}, "
             f"eager frames {sum(r.dl.eager_frames for r in ran)}, recaptures on an identical call "
             f"{sum(r.dl.recaptures for r in ran)}, captured whole (1 graph, nothing eager) {whole}"]
    if compare_torch:
        tran = [r for r in ran if r.torch is not None]
        lines.append(f"TorchDynamo: graphs {sum(r.torch.graphs for r in tran)}, breaks "
                     f"{sum(r.torch.breaks for r in tran)}, recaptures {sum(r.torch.recaptures for r in tran)}, "
                     f"not ok {sum(1 for r in tran if r.torch.status != 'ok')}")
        both = [r for r in tran if r.dl.status == r.torch.status == "ok" and r.dl.first_call_s and r.torch.first_call_s]
        if both:
            ratio = math.exp(sum(math.log(r.dl.first_call_s / r.torch.first_call_s) for r in both) / len(both))
            lines.append(f"first call (capture + run) dynamo_lite / TorchDynamo, geometric mean over {len(both)} "
                         f"models: {ratio:.2f}x")
    for status, title in (("break", "graph breaks"), ("fallback", "frames run eagerly"),
                          ("error", "internal errors")):
        kinds = collections.Counter()
        models = collections.defaultdict(set)
        for r in ran:
            for e in r.dl.events:
                if e.status == status:
                    kinds[(e.kind_id, e.kind_name)] += 1
                    models[(e.kind_id, e.kind_name)].add(r.name)
        if kinds:
            lines.append(f"{title}, by kind (most frequent first):")
            for (kid, name), n in kinds.most_common():
                lines.append(f"  {n:4d}  {kid} {name:24s} in {len(models[(kid, name)])} models")
    bad = [r for r in results if r.status in ("WRONG", "CRASH", "timeout", "eager-error")]
    if bad:
        lines.append("failures:")
        lines += [f"  {r.name}: {r.status}: {r.detail}" for r in bad]
    torch_bad = [r for r in ran if r.torch is not None and r.torch.status != "ok"]
    if torch_bad:
        lines.append("TorchDynamo failures (for comparison):")
        lines += [f"  {r.name}: {r.torch.status}: {r.torch.detail}" for r in torch_bad]
    return lines


def warm_up(compare_torch: bool) -> None:
    """Capture a tiny function once per engine, so one-off import and initialisation costs do not
    land on the first model's capture time."""
    import dynamo_lite as dl
    x = torch.ones(2)
    with _quiet():
        dl.capture(lambda t: t + 1, backend=CountingBackend())(x)
        dl.reset()
        if compare_torch:
            import torch._dynamo as torch_dynamo
            torch.compile(lambda t: t + 1, backend=CountingBackend())(x)
            torch_dynamo.reset()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m dynamo_lite.report.survey", description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", help="only models whose name contains PATTERN (or with that tag, "
                                                   "or matching a glob)")
    parser.add_argument("--tag", action="append", default=[], help="only models with this tag (repeatable)")
    parser.add_argument("--compare", choices=["torch"], help="also run torch.compile (TorchDynamo) for comparison")
    parser.add_argument("--no-grad", action="store_true", help="run every call under torch.no_grad()")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model and engine (default 120)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--verbose", "-v", action="store_true", help="every eager frame and TorchDynamo break")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args(argv)

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")     # read when transformers configures logging
    os.environ.setdefault("HF_HUB_OFFLINE", "1")                 # the corpus never downloads anything
    for noisy in ("torch._dynamo", "torch.fx.experimental.symbolic_shapes"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    entries = all_models(args.pattern, args.tag)
    if args.list:
        for e in entries:
            skip = e.skip_reason()
            print(f"{e.name:28s} {','.join(e.tags):60s} {e.doc}" + (f"  [skipped: {skip}]" if skip else ""))
        return 0

    compare_torch = args.compare == "torch"
    warm_up(compare_torch)
    results = []
    for entry in entries:
        result = survey_model(entry, compare_torch=compare_torch, grad=not args.no_grad, timeout=args.timeout)
        results.append(result)
        print(_row(result, compare_torch))
        for line in _details(result, args.verbose):
            print(line)
        sys.stdout.flush()
    for line in summarize(results, compare_torch):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for r in results], f, indent=1, default=str)
    return 1 if any(r.status in ("WRONG", "CRASH") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
