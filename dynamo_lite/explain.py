"""`dynamo_lite.explain(fn)(*args)`: run fn for real under capture, from a clean cache, and return
the ExplainReport of what happened (explain_report.py; explain_render.py prints it)."""
from __future__ import annotations

from typing import Callable, Optional

from .eval_frame import capture, reset
from .explain_report import ExplainReport, report_from_records
from .fallback.records import RECORDS

__all__ = ["explain", "ExplainReport"]


def explain(fn: Callable, *args, backend="eager", dynamic: Optional[bool] = None) -> Callable[..., ExplainReport]:
    """`explain(fn)(*args, **kwargs)` runs fn once under capture (from a clean cache) and returns
    an ExplainReport. The function really runs; its output is on `report.output`."""
    if args:
        raise TypeError("explain(fn) returns a function to call with fn's arguments: "
                        "dynamo_lite.explain(fn)(*args, **kwargs), not dynamo_lite.explain(fn, *args)")
    name = getattr(fn, "__qualname__", None) or type(fn).__name__

    def run(*args, **kwargs) -> ExplainReport:
        reset()
        seen = {id(r) for r in RECORDS}
        captured = capture(fn, backend=backend, dynamic=dynamic)
        output = captured(*args, **kwargs)
        records = sorted((r for r in RECORDS if id(r) not in seen), key=lambda r: r.seq)
        backend_name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
        report = report_from_records(name, backend_name, records)
        report.output = output
        return report

    return run
