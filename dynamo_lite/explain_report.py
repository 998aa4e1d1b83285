"""The report `dynamo_lite.explain(fn)(*args)` returns (explain.py runs the function), built from
the capture records (`report_from_records`; the trace directory builds one per frame too).

The report lists every graph (fx code, op counts), every graph break and every frame that ran
eagerly (kind id, one-line explanation, a hint to act on, the user's `file:line` with the source
line and the inlined call stack), and for each frame what we built: its guards as the Python
function that checks them (with the frame's own names), its replacement code as labelled
bytecode (code_listing.py), capture time, and, per code object, the history of its recaptures
(which guard failed, its old and new value). It prints with rich in a terminal, renders as HTML
in Jupyter (`_repr_html_`) and serializes with `.to_json()`.
"""
from __future__ import annotations

import collections
import json
import linecache
from dataclasses import asdict, dataclass, field
from typing import Optional

from .code_listing import listing
from .fallback.records import FrameRecord


@dataclass
class BreakInfo:
    kind_id: str
    kind_name: str
    explanation: str
    hint: str
    detail: str
    frame: str
    location: str                 # file:line of the user's line that broke
    source_line: str
    user_stack: list              # [(file, line, function, source)], outermost first (inlined calls)
    resumed: bool                 # True: a graph break that resumed; False: the frame ran eagerly
    eager_reason: str = ""        # when not resumed: why the frame could not resume
    eager_kind_id: str = ""       # ... its kind in the registry (breaks.KINDS), '' when it is the break's own


@dataclass
class GraphInfo:
    index: int
    frame: str
    location: str
    op_count: int
    ops: dict
    code: str
    guards: list


@dataclass
class FrameInfo:
    frame: str
    location: str
    status: str                   # captured / break / fallback / error
    capture_ms: float
    recompile_reason: Optional[str] = None
    index: int = 0                # 1, 2, ... in the order captured
    graphs: list = field(default_factory=list)      # indices of its graphs in ExplainReport.graphs
    guard_code: str = ""          # the guards as the Python function that checks them
    code: str = ""                # the replacement code as labelled bytecode; "": the frame's own code runs
    recapture: Optional[dict] = None   # guard, old, new, reason: why this capture replaced none of the earlier
    detail: str = ""
    ops_as_is: int = 0            # a loop stretch's single op run as is, not handed to the backend
    graphs_shared: int = 0        # equal graphs of other resume functions whose compiled form it reuses
    eager_why: str = ""           # status fallback: "DL0xx name: what stopped it" (why the frame runs eagerly)
    code_id: int = 0              # which code object (resume functions of one line may be several)


@dataclass
class ExplainReport:
    function: str
    backend: str
    graphs: list = field(default_factory=list)
    breaks: list = field(default_factory=list)
    frames: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    # ---- summary -------------------------------------------------------------------------
    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_count(self) -> int:
        return sum(g.op_count for g in self.graphs)

    @property
    def recompiles(self) -> list:
        return [(f.frame, f.recompile_reason) for f in self.frames if f.recompile_reason]

    @property
    def capture_ms(self) -> float:
        return sum(f.capture_ms for f in self.frames)

    def history(self) -> dict:
        """{frame: [its FrameInfos, first capture first]} for each code object captured more than
        once (resume functions entering one line with other stack items or locals are other code
        objects of the same name: each has its own history)."""
        by_code: dict = {}
        for f in self.frames:
            by_code.setdefault((f.frame, f.location, f.code_id), []).append(f)
        names = collections.Counter(frame for frame, _, _ in by_code)
        history = {}
        for (frame, _, code_id), captures in by_code.items():
            if len(captures) > 1 or captures[0].recapture:
                key = frame if names[frame] == 1 else f"{frame} (code {len(history) + 1})"
                history[key] = captures
        return history

    def by_kind(self) -> list:
        """[(kind id, breaks resumed, frames run eagerly)], most frequent first: a frame run eagerly
        counts under the kind of why it could not resume when that has one."""
        counts: dict = {}
        for b in self.breaks:
            kind = b.eager_kind_id or b.kind_id
            resumed, eager = counts.get(kind, (0, 0))
            counts[kind] = (resumed + b.resumed, eager + (not b.resumed))
        return sorted(((k, r, e) for k, (r, e) in counts.items()), key=lambda row: -(row[1] + row[2]))

    def summary(self) -> str:
        return (f"{self.graph_count} graph(s), {self.break_count} graph break(s), {self.op_count} op(s), "
                f"{len(self.recompiles)} recapture(s), capture {self.capture_ms:.1f} ms, backend {self.backend}")

    # ---- output ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(graph_count=self.graph_count, break_count=self.break_count, op_count=self.op_count,
                    capture_ms=self.capture_ms, recompiles=[list(r) for r in self.recompiles])
        return data

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __rich_console__(self, console, options):
        from .explain_render import render
        yield from render(self)

    def __str__(self) -> str:
        from .explain_render import to_text
        return to_text(self)

    def _repr_html_(self) -> str:
        from .explain_render import to_html
        return to_html(self)


def _ops(gm) -> dict:
    counts = collections.Counter()
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
            counts[target] += 1
    return dict(counts.most_common())


def _frame_info(r: FrameRecord, index: int, graph_indices: list) -> FrameInfo:
    frame = r.qualname or r.name
    info = FrameInfo(frame, f"{r.filename}:{r.firstlineno}", r.status, round(r.capture_seconds * 1e3, 3),
                     r.recompile_reason, index, graph_indices, detail=r.detail, ops_as_is=r.ops_as_is,
                     graphs_shared=r.graphs_shared, code_id=r.code_id)
    if r.status == "fallback" and r.kind is not None:
        info.eager_why = _eager_why(r)
    if r.recapture is not None:
        info.recapture = asdict(r.recapture)
    if r.guards is not None and hasattr(r.guards, "readable"):
        info.guard_code = r.guards.readable(frame)[0]
    code = r.code
    if code is not None:
        names = ", ".join(f"graph {i}" for i in graph_indices)
        info.code = listing(code, names or None)
    elif r.code_ref is not None:
        info.code = "# (no longer cached: an object its guards identify has died)"
    return info


def _eager_why(r: FrameRecord) -> str:
    """Why a frame runs eagerly, by kind: the unsupported construct, and where a break could not
    resume, the kind and reason of that too."""
    why = f"{r.kind.id} {r.kind.name}: {r.detail}"
    if r.fallback_kind is not None or r.fallback_reason:
        kind = f"{r.fallback_kind.id} {r.fallback_kind.name}: " if r.fallback_kind is not None else ""
        why += f"; it could not resume there: {kind}{r.fallback_reason}"
    return why


def report_from_records(function: str, backend: str, records: list[FrameRecord]) -> ExplainReport:
    report = ExplainReport(function, backend)
    for r in records:
        frame = r.qualname or r.name
        first_graph = len(report.graphs) + 1
        for gm in r.graphs:
            guards = [g.describe() for g in r.guards.guards] if r.guards is not None else []
            report.graphs.append(GraphInfo(len(report.graphs) + 1, frame, f"{r.filename}:{r.firstlineno}",
                                           sum(_ops(gm).values()), _ops(gm), gm.code.strip(), guards))
        report.frames.append(_frame_info(r, len(report.frames) + 1, list(range(first_graph, len(report.graphs) + 1))))
        if r.status in ("break", "fallback") and r.kind is not None and not any(
                b.kind_id == r.kind.id and b.location == r.location for b in report.breaks):
            # (a break inside an inlined call is met twice: at the caller's call site, then in the
            # callee's own frame; the first report has the whole inlined call stack)
            stack = [(f, line, fn, linecache.getline(f, line).strip()) for f, line, fn in r.user_stack]
            report.breaks.append(BreakInfo(r.kind.id, r.kind.name, r.kind.explanation, r.kind.hint, r.detail, frame,
                                           r.location, r.source_line, stack, r.status == "break",
                                           r.fallback_reason, r.fallback_kind.id if r.fallback_kind else ""))
        if r.status == "error":
            report.errors.append(f"{frame}: {r.detail}")
    return report
