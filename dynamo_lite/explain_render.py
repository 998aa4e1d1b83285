"""Rendering an ExplainReport: rich renderables for terminals, plain text, and HTML for notebooks.
Breaks first, then each frame with its graphs, guard function and replacement code, then the
recapture history. Kept apart from the report model so that importing dynamo_lite does not
import rich."""
from __future__ import annotations

import linecache

from .breaks import KINDS


def _snippet(location: str, context: int = 2):
    from rich.syntax import Syntax
    path, _, line = location.rpartition(":")
    try:
        line_no = int(line)
    except ValueError:
        return None
    first = max(1, line_no - context)
    lines = [linecache.getline(path, n) for n in range(first, line_no + context + 1)]
    if not any(lines):
        return None
    return Syntax("".join(lines).rstrip("\n"), "python", line_numbers=True, start_line=first,
                  highlight_lines={line_no}, theme="ansi_dark", word_wrap=True)


def _kind_count(kind: str, resumed: int, eager: int) -> str:
    """`DL005 print-or-log (2 resumed, 1 ran eagerly)`."""
    counts = [f"{resumed} resumed"] * bool(resumed) + [f"{eager} ran eagerly"] * bool(eager)
    return f"{kind} {KINDS[kind].name if kind in KINDS else ''} ({', '.join(counts)})"


def render(report):
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    yield Text(f"dynamo_lite.explain: {report.function}", style="bold")
    yield Text(report.summary())
    if report.breaks:
        yield Text("by kind: " + ", ".join(_kind_count(*row) for row in report.by_kind()))
        yield Text("\nGraph breaks", style="bold underline")
    for i, b in enumerate(report.breaks, 1):
        kind = f"[{b.eager_kind_id} {KINDS[b.eager_kind_id].name}] " if b.eager_kind_id else ""
        what = "graph break, resumed after it" if b.resumed else \
            f"frame ran eagerly: {kind}{b.eager_reason or b.detail}"
        head = Text.assemble((f"{i}. [{b.kind_id} {b.kind_name}] ", "bold red"), (b.location, "cyan"),
                             f" in {b.frame} ({what})")
        parts = [head]
        snippet = _snippet(b.location)
        if snippet is not None:
            parts.append(snippet)
        parts.append(Text.assemble(("why: ", "bold"), b.explanation + (f" ({b.detail})" if b.detail else "")))
        parts.append(Text.assemble(("fix: ", "bold green"), b.hint))
        if len(b.user_stack) > 1:
            chain = " -> ".join(f"{fn} ({f.rsplit('/', 1)[-1]}:{line})" for f, line, fn, _ in b.user_stack)
            parts.append(Text.assemble(("inlined call stack: ", "bold"), chain))
        from rich.console import Group
        yield Panel(Group(*parts), expand=False)
    graphs = {g.index: g for g in report.graphs}
    for f in report.frames:
        yield from _frame(f, graphs)
    history = report.history()
    if history:
        table = Table("code object", "capture", "guard that failed", "old value", "new value",
                      title="Recapture history", title_justify="left")
        for frame, captures in history.items():
            for n, f in enumerate(captures, 1):
                r = f.recapture
                if r is None:
                    table.add_row(frame, str(n), "(first capture)" if n == 1 else f.recompile_reason or "", "", "")
                else:
                    table.add_row(frame, str(n), r["guard"], r["old"], r["new"])
        yield table
    if report.errors:
        yield Text("Internal errors (frames ran eagerly): " + "; ".join(report.errors), style="yellow")


def _frame(f, graphs):
    """One frame: its graphs, its guards as the function that checks them, its replacement code."""
    from rich.syntax import Syntax
    from rich.text import Text
    status = {"captured": "captured", "break": "captured up to a graph break",
              "fallback": "runs eagerly", "error": "internal error, runs eagerly"}.get(f.status, f.status)
    yield Text(f"\nFrame {f.index}: {f.frame} ({f.location}), {status}, capture {f.capture_ms:.1f} ms",
               style="bold")
    if f.eager_why:
        yield Text(f"why it runs eagerly: {f.eager_why}", style="yellow")
    if f.recapture:
        yield Text(f"recaptured: {f.recapture['reason']}", style="yellow")
    for i in f.graphs:
        g = graphs[i]
        ops = ", ".join(f"{k} x{v}" for k, v in list(g.ops.items())[:8])
        yield Text(f"Graph {g.index}, {g.op_count} op(s): {ops}", style="bold")
        yield Syntax(g.code, "python", theme="ansi_dark", word_wrap=True)
    if f.ops_as_is:
        yield Text(f"{f.ops_as_is} op(s) run as they are, no graph: a loop stretch with one op, or checks on "
                   f"tensor values only, have nothing for a backend to fuse "
                   f"(dynamo_lite.config.loop_single_ops_as_is)", style="dim")
    if f.graphs_shared:
        yield Text(f"{f.graphs_shared} graph(s) equal to one compiled for another resume function entering "
                   f"the same place (a loop's body reached from before the loop and from the previous "
                   f"iteration): its compiled form is reused, not compiled again or counted", style="dim")
    if f.guard_code:
        yield Text("Guards, checked before each reuse:", style="bold")
        yield Syntax(f.guard_code.rstrip(), "python", theme="ansi_dark", word_wrap=True)
    if f.code:
        yield Text("Replacement code:", style="bold")
        yield Syntax(f.code, "python", theme="ansi_dark", word_wrap=True)
    elif f.status != "error":
        yield Text("Replacement code: none, the frame's own code runs", style="dim")


def to_text(report, width: int = 110) -> str:
    from rich.console import Console
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=_Null())
    for part in render(report):
        console.print(part)
    return console.export_text()


def to_html(report, width: int = 110) -> str:
    from rich.console import Console
    console = Console(width=width, record=True, force_terminal=True, file=_Null())
    for part in render(report):
        console.print(part)
    return console.export_html(inline_styles=True, code_format="<pre style=\"font-family:monospace\">{code}</pre>")


class _Null:
    def write(self, *_):
        return 0

    def flush(self):
        pass
