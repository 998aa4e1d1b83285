"""Rendering an ExplainReport: rich renderables for terminals, plain text, and HTML for notebooks.
Kept apart from the report model so that importing dynamo_lite does not import rich."""
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


def render(report):
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text
    from rich.syntax import Syntax

    yield Text(f"dynamo_lite.explain: {report.function}", style="bold")
    yield Text(report.summary())
    if report.breaks:
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
    for g in report.graphs:
        ops = ", ".join(f"{k} x{v}" for k, v in list(g.ops.items())[:8])
        yield Text(f"\nGraph {g.index}: {g.frame} ({g.location}), {g.op_count} op(s): {ops}", style="bold")
        yield Syntax(g.code, "python", theme="ansi_dark", word_wrap=True)
        if g.guards:
            yield Text("guards: " + "; ".join(g.guards), style="dim")
    if report.recompiles:
        table = Table("frame", "recapture reason", title="Recaptures")
        for frame, reason in report.recompiles:
            table.add_row(frame, reason)
        yield table
    if report.errors:
        yield Text("Internal errors (frames ran eagerly): " + "; ".join(report.errors), style="yellow")


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
