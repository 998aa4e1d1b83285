"""`dynamo-lite trace DIR`: the browsable pages of a trace directory (trace_dir.py writes it).

`DIR/index.html` is the summary: totals, then one row per frame (status, graphs, ops, guards,
break kind, recapture, capture time), filterable by typing, each linking to the frame's page
`DIR/<frame folder>/index.html`, which shows its break, recapture, graphs, guard function,
replacement code and timings. Plain HTML files with inline CSS and a few lines of script; nothing
is loaded from the network.
"""
from __future__ import annotations

import html
import json
import os

from .trace_dir import read_frames

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #1d2430; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #d8dde6; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { text-align: left; padding: 0.3em 0.7em; border-bottom: 1px solid #e5e8ee; vertical-align: top; }
th { background: #f2f4f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 0.8em; font-size: 0.85em;
      white-space: pre-wrap; overflow-wrap: anywhere; }
.status-captured { color: #1a7f37; } .status-break { color: #9a6700; }
.status-fallback, .status-error { color: #cf222e; }
.cards { display: flex; gap: 1em; margin: 1em 0; } .card { border: 1px solid #d8dde6; padding: 0.5em 1em; }
.card b { display: block; font-size: 1.3em; } .hint { color: #1a7f37; } .muted { color: #6e7781; }
input { padding: 0.3em; width: 20em; }
"""

_FILTER = """
document.getElementById('filter').addEventListener('input', function () {
  var q = this.value.toLowerCase(), shown = 0, rows = document.querySelectorAll('#frames tbody tr');
  rows.forEach(function (r) { var hit = r.textContent.toLowerCase().indexOf(q) >= 0; r.hidden = !hit; shown += hit; });
  document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' frames';
});
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, script: str = "") -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{_STYLE}</style></head><body>\n{body}\n"
            + (f"<script>{script}</script>" if script else "") + "</body></html>\n")


def build(directory: str) -> str:
    """Write the summary page and one page per frame; returns the summary's path."""
    frames = read_frames(directory)
    if not frames:
        raise FileNotFoundError(f"no traced frames in {directory!r} (run the program with DYNAMO_LITE_TRACE={directory})")
    for frame in frames:
        with open(os.path.join(directory, frame["folder"], "index.html"), "w", encoding="utf-8") as f:
            f.write(frame_page(directory, frame))
    path = os.path.join(directory, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(index_page(frames))
    return path


def index_page(frames: list) -> str:
    graphs = sum(len(f["graphs"]) for f in frames)
    breaks = sum(1 for f in frames if f.get("break"))
    recaptures = sum(1 for f in frames if f.get("recapture"))
    capture = sum(f["timings"]["capture_ms"] for f in frames)
    cards = "".join(f"<div class=\"card\"><b>{_e(v)}</b>{_e(k)}</div>" for k, v in
                    (("frames", len(frames)), ("graphs", graphs), ("breaks", breaks), ("recaptures", recaptures),
                     ("capture ms", f"{capture:.1f}")))
    rows = []
    for n, f in enumerate(frames, 1):
        b = f.get("break") or {}
        kind = f"{b['kind_id']} {b['kind_name']}" if b else ""
        recapture = (f.get("recapture") or {}).get("guard", "")
        rows.append(
            f"<tr><td class=\"num\">{n}</td><td><a href=\"{_e(f['folder'])}/index.html\">{_e(f['frame'])}</a></td>"
            f"<td class=\"muted\" title=\"{_e(f['location'])}\">{_e(os.path.basename(f['location']))}</td><td class=\"status-{_e(f['status'])}\">{_e(f['status'])}</td>"
            f"<td class=\"num\">{len(f['graphs'])}</td><td class=\"num\">{sum(g['op_count'] for g in f['graphs'])}</td>"
            f"<td class=\"num\">{f['guard_count']}</td><td>{_e(kind)}</td><td><code>{_e(recapture)}</code></td>"
            f"<td class=\"num\">{f['timings']['capture_ms']:.1f}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("#", "frame", "location", "status", "graphs", "ops", "guards",
                                             "break", "recaptured on", "capture ms"))
    body = (f"<h1>dynamo_lite trace</h1><div class=\"cards\">{cards}</div>"
            f"<p><input id=\"filter\" placeholder=\"filter frames (name, status, break kind...)\"> "
            f"<span id=\"shown\" class=\"muted\">{len(frames)} of {len(frames)} frames</span></p>"
            f"<table id=\"frames\"><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>")
    return _page("dynamo_lite trace", body, _FILTER)


def _read(directory: str, frame: dict, name: str) -> str:
    path = os.path.join(directory, frame["folder"], name)
    if name not in frame.get("files", ()) or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def frame_page(directory: str, frame: dict) -> str:
    parts = ["<p><a href=\"../index.html\">&larr; all frames</a></p>",
             f"<h1>{_e(frame['frame'])}</h1>",
             f"<p class=\"muted\">{_e(frame['location'])} &middot; <span class=\"status-{_e(frame['status'])}\">"
             f"{_e(frame['status'])}</span> &middot; backend {_e(frame['backend'])} &middot; capture "
             f"{frame['timings']['capture_ms']:.1f} ms</p>"]
    b = frame.get("break")
    if b:
        what = "graph break, resumed after it" if b["resumed"] else f"the frame ran eagerly: {b['eager_reason'] or b['detail']}"
        stack = " &rarr; ".join(f"{_e(fn)} ({_e(os.path.basename(f))}:{line})" for f, line, fn, _ in b["user_stack"])
        parts.append(f"<h2 id=\"break\">Break: {_e(b['kind_id'])} {_e(b['kind_name'])}</h2>"
                     f"<p>{_e(b['location'])} ({_e(what)})</p><pre>{_e(b['source_line'])}</pre>"
                     f"<p><b>why:</b> {_e(b['explanation'])}{_e(' (' + b['detail'] + ')') if b['detail'] else ''}</p>"
                     f"<p class=\"hint\"><b>fix:</b> {_e(b['hint'])}</p>"
                     + (f"<p><b>inlined call stack:</b> {stack}</p>" if len(b["user_stack"]) > 1 else ""))
    r = frame.get("recapture")
    if r:
        parts.append(f"<h2 id=\"recapture\">Recaptured</h2><table><tr><th>guard that failed</th>"
                     f"<th>old value</th><th>new value</th></tr><tr><td><code>{_e(r['guard'])}</code></td>"
                     f"<td>{_e(r['old'])}</td><td>{_e(r['new'])}</td></tr></table>")
    for n, g in enumerate(frame["graphs"], 1):
        ops = ", ".join(f"{k} x{v}" for k, v in g["ops"].items())
        parts.append(f"<h2 class=\"graph\">Graph {n} ({_e(g['file'])}): {g['op_count']} op(s)</h2>"
                     f"<p class=\"muted\">{_e(ops)}</p><pre>{_e(_read(directory, frame, g['file']))}</pre>")
    guards = _read(directory, frame, "guards.py")
    if guards:
        parts.append(f"<h2 id=\"guards\">Guards ({frame['guard_count']}), checked before each reuse</h2>"
                     f"<pre>{_e(guards)}</pre>")
    code = _read(directory, frame, "code.txt")
    parts.append("<h2 id=\"code\">Replacement code</h2>"
                 + (f"<pre>{_e(code)}</pre>" if code else "<p class=\"muted\">none: the frame's own code runs</p>"))
    parts.append(f"<h2 id=\"timings\">Timings</h2><pre>{_e(json.dumps(frame['timings'], indent=2))}</pre>")
    return _page(f"{frame['frame']} - dynamo_lite trace", "\n".join(parts))
