"""The trace directory: with `DYNAMO_LITE_TRACE=DIR` (or `dynamo_lite.config.trace_dir`), each frame
we capture, or decide to run eagerly, is written to a folder of its own under DIR, for programs too
big to read in a terminal. `dynamo-lite trace DIR` turns the folder into browsable pages
(trace_html.py).

One frame's folder, `DIR/0001-M.forward/`:
    frame.json     what explain knows of it: status, location, graphs, break, recapture, timings
    graph_1.py     the fx code of each graph it handed to the backend
    guards.py      its guards as the Python function that checks them
    code.txt       its replacement code as labelled bytecode (absent: the frame's own code runs)
    break.txt      why it broke or ran eagerly, with the hint (absent: it did not)
    timings.json   capture time, and when the frame was written

Writing never disturbs the program: a failure to write warns once and the program goes on.
Several processes may share one DIR (`report --jobs`): a folder is claimed with an exclusive mkdir.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
import warnings

from . import config
from .explain_report import report_from_records
from .fallback import records
from .fallback.records import FrameRecord

FRAME_FILE = "frame.json"
_counter = itertools.count(1)


def write_record(record: FrameRecord) -> None:
    """records.add's sink: write the record's folder when a trace directory is set."""
    directory = config.trace_dir
    if not directory:
        return
    try:
        write_frame(directory, record)
    except Exception as e:       # a full disk or a read-only folder must not stop the program
        with warnings.catch_warnings():      # (capture silences warnings while it runs; this one is for the user)
            warnings.simplefilter("always")
            records.warn_once(("trace_dir", directory), f"dynamo_lite: cannot write the trace directory "
                                                        f"{directory!r} ({type(e).__name__}: {e}); the program goes "
                                                        f"on without it")


def write_frame(directory: str, record: FrameRecord) -> str:
    """Write one record's folder under `directory`; returns the folder's path."""
    report = report_from_records(record.qualname or record.name, record.backend, [record])
    frame = report.frames[0]
    folder = _claim_folder(directory, frame.frame)
    files = {}
    for n, graph in enumerate(report.graphs, 1):
        files[f"graph_{n}.py"] = f"# {graph.frame}, graph {n}: {graph.op_count} op(s)\n{graph.code}\n"
    if frame.guard_code:
        files["guards.py"] = frame.guard_code
    if frame.code:
        files["code.txt"] = frame.code + "\n"
    brk = report.breaks[0] if report.breaks else None
    if brk is not None:
        files["break.txt"] = _break_text(brk)
    timings = {"capture_ms": frame.capture_ms, "written_at": time.time(), "pid": os.getpid()}
    files["timings.json"] = json.dumps(timings, indent=2) + "\n"
    summary = {"folder": os.path.basename(folder), "frame": frame.frame, "location": frame.location,
               "status": frame.status, "detail": frame.detail, "backend": report.backend,
               "graphs": [{"file": f"graph_{n}.py", "op_count": g.op_count, "ops": g.ops}
                          for n, g in enumerate(report.graphs, 1)],
               "guard_count": len(getattr(record.guards, "guards", ()) or ()),
               "break": dataclasses.asdict(brk) if brk is not None else None,
               "recapture": frame.recapture, "recompile_reason": frame.recompile_reason,
               "timings": timings, "files": sorted(files)}
    files[FRAME_FILE] = json.dumps(summary, indent=2, default=str) + "\n"
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    return folder


def _claim_folder(directory: str, frame: str) -> str:
    os.makedirs(directory, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in frame).strip("_")[:80] or "frame"
    while True:
        path = os.path.join(directory, f"{next(_counter):04d}-{safe}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:       # an earlier run's, or another process's
            continue


def _break_text(b) -> str:
    what = "graph break, resumed after it" if b.resumed else f"the frame ran eagerly: {b.eager_reason or b.detail}"
    lines = [f"[{b.kind_id} {b.kind_name}] at {b.location} in {b.frame} ({what})",
             f"    {b.source_line}", f"why: {b.explanation}" + (f" ({b.detail})" if b.detail else ""),
             f"fix: {b.hint}"]
    if len(b.user_stack) > 1:
        lines.append("inlined call stack: " + " -> ".join(f"{fn} ({f}:{line})" for f, line, fn, _ in b.user_stack))
    return "\n".join(lines) + "\n"


def read_frames(directory: str) -> list[dict]:
    """The frame.json of every frame folder under `directory`, in the order they were written."""
    frames = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name, FRAME_FILE)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            data["folder"] = name
            frames.append(data)
    return sorted(frames, key=lambda d: (d.get("timings", {}).get("written_at", 0), d["folder"]))
