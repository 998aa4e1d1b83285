"""The HTML page of `dynamo-lite report`: one self-contained file (no network) with the summary figures,
plotly charts (break kinds, graphs per model against TorchDynamo, capture-time and steady-state
distributions), a sortable and filterable table of the models, and per model every graph break and
frame run eagerly, explained (the source line, why, and the hint of its kind in `dynamo_lite.breaks`).

    dynamo-lite report --json report.json --html report.html    # after a run
    dynamo-lite report html report.json -o report.html          # from the JSON file of an earlier run

`write_html` takes the rows and summary that `dynamo_lite.report.run_report` has (or a --json file
holds). The page is built from escaped strings: the charts are plotly figures, with plotly.js embedded
once; sorting and filtering are a few lines of plain JavaScript over the rendered table. plotly is
imported only here and only when a page is written (`require_plotly` gives a clear error without it).
"""
from __future__ import annotations

import argparse
import collections
import json
import linecache
import os
import sys
import time
from html import escape
from typing import Optional

from .. import breaks


class PlotlyMissing(RuntimeError):
    """plotly is not installed: the HTML report cannot be written."""


def require_plotly():
    """The plotly package, or PlotlyMissing with what to install."""
    try:
        import plotly
        import plotly.graph_objects  # noqa: F401 - the figures below
        import plotly.io  # noqa: F401
        import plotly.offline  # noqa: F401
    except ImportError as exc:
        raise PlotlyMissing("the HTML report needs plotly: pip install plotly (the version pinned in "
                            f"requirements/ci.txt) [{exc}]") from None
    return plotly


# --------------------------------------------------------------------------------------------
# reading rows (fresh ones and those of older JSON files alike)
# --------------------------------------------------------------------------------------------

ENGINE_NAMES = {"dl": "dynamo_lite", "torch": "TorchDynamo"}
EVENT_WORDS = {"break": "graph break", "fallback": "ran eagerly", "error": "internal error"}


def _option(options, key, default=None):
    """A ReportOptions field, or the same key of the dict an older JSON file holds."""
    if isinstance(options, dict):
        return options.get(key, default)
    return getattr(options, key, default)


def _source_of(event: dict) -> str:
    """The event's line of code: stored at survey time; read from the file for older JSON."""
    if event.get("source"):
        return event["source"]
    file, _, line = str(event.get("location", "")).rpartition(":")
    return linecache.getline(file, int(line)).strip() if file and line.isdigit() else ""


def _short_path(location: str) -> str:
    """A location to show: relative to site-packages or to the working folder, when under either."""
    if "site-packages/" in location:
        return location.split("site-packages/", 1)[1]
    cwd = os.getcwd() + os.sep
    return location[len(cwd):] if location.startswith(cwd) else location


def _suites(results: list, options) -> dict:
    """model name -> suite. Rows of older JSON files do not carry it: ask the registry, when it can say."""
    found = {r["name"]: r["suite"] for r in results if r.get("suite")}
    if _option(options, "paths"):
        return {r["name"]: found.get(r["name"], "files") for r in results}
    if len(found) < len(results):
        from .registry import DEFAULT_SUITES, all_models, suite_of
        try:
            entries = all_models(suites=tuple(_option(options, "suites") or DEFAULT_SUITES))
            found = {e.name: suite_of(e) for e in entries} | found
        except Exception:   # noqa: BLE001 - the corpus is not importable here: the suites stay unknown
            pass
    return {r["name"]: found.get(r["name"]) or "-" for r in results}


def _ratio(a, b) -> Optional[float]:
    return a / b if a and b else None


def _figures(row: dict) -> dict:
    """The numbers of one table row (None where the model has none)."""
    dl, td = row.get("dl") or {}, row.get("torch") or {}
    both_ok = dl.get("status") == td.get("status") == "ok"
    return {"dl_graphs": dl.get("graphs"), "dl_breaks": dl.get("breaks"), "dl_eager": dl.get("eager_frames"),
            "td_graphs": td.get("graphs"), "td_breaks": td.get("breaks"),
            "dl_capture_ms": dl["first_call_s"] * 1e3 if dl.get("first_call_s") else None,
            "td_capture_ms": td["first_call_s"] * 1e3 if td.get("first_call_s") else None,
            "capture_ratio": _ratio(dl.get("first_call_s"), td.get("first_call_s")) if both_ok else None,
            "steady_ratio": _ratio(dl.get("steady_call_s"), td.get("steady_call_s")) if both_ok else None,
            "steady_vs_eager": _ratio(dl.get("steady_call_s"), row.get("eager_steady_s"))
            if dl.get("status") == "ok" else None}


def _events(row: dict, *statuses) -> list:
    return [e for e in (row.get("dl") or {}).get("events", []) if e.get("status") in statuses]


# --------------------------------------------------------------------------------------------
# charts
# --------------------------------------------------------------------------------------------

_COLORS = {"dl": "#2563eb", "torch": "#ea580c", "ratio": "#059669", "eager": "#7c3aed"}
# titles at the top, a subtitle under them, the legend (if any) just above the plot at the right
_LAYOUT = dict(template="plotly_white", margin=dict(l=10, r=20, t=90, b=40), height=400,
               font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=13),
               legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))


def _title(text: str, subtitle: str = "") -> dict:
    return dict(text=text, subtitle=dict(text=subtitle), y=0.98, yref="container", yanchor="top")


def _break_kinds_figure(go, results: list):
    """Stacked bars: per break kind, the graph breaks resumed after and the frames run eagerly."""
    counts = {"break": collections.Counter(), "eager": collections.Counter()}
    models = collections.defaultdict(set)
    for row in results:
        for e in _events(row, "break", "fallback", "error"):
            counts["break" if e["status"] == "break" else "eager"][breaks.event_kind(e)] += 1
            models[breaks.event_kind(e)].add(row["name"])
    order = sorted(models, key=lambda k: counts["break"][k] + counts["eager"][k])
    labels = [f"{k} {breaks.KINDS[k].name}" if k in breaks.KINDS else f"{k} internal-error" for k in order]
    hover = [f"{breaks.KINDS[k].explanation if k in breaks.KINDS else 'an error inside dynamo_lite'}"
             f"<br>in {len(models[k])} model(s)" for k in order]
    fig = go.Figure([go.Bar(y=labels, x=[counts[c][k] for k in order], orientation="h", name=name,
                            marker_color=color, customdata=hover, texttemplate="%{x:.0f}", textposition="inside",
                            hovertemplate="%{y}: %{x}<br>%{customdata}<extra>" + name + "</extra>")
                     for c, name, color in (("break", "graph breaks", _COLORS["dl"]),
                                            ("eager", "frames run eagerly", _COLORS["eager"]))])
    fig.update_layout(**_LAYOUT, barmode="stack", title=_title("Graph-break kinds (dynamo_lite)",
                                                               "graph breaks and frames run eagerly, by kind"))
    fig.update_layout(height=max(260, 150 + 34 * len(order)), legend_traceorder="normal")
    fig.update_yaxes(automargin=True)
    fig.update_xaxes(title="count")
    if not order:
        fig.add_annotation(text="no graph breaks and no frame run eagerly", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper", font=dict(size=16))
    return fig


def _graphs_figure(go, results: list, compare: bool):
    """Grouped bars of graphs per model, for the models where something happened (breaks, frames run
    eagerly, more than one graph, or a count different from TorchDynamo's)."""
    ran = [r for r in results if r.get("dl")]

    def notable(r):
        dl, td = r["dl"], r.get("torch") or {}
        return (dl["graphs"] != 1 or dl.get("events") or (compare and (td.get("graphs") != dl["graphs"]
                                                                         or td.get("breaks"))))

    shown = [r for r in ran if notable(r)][::-1]          # horizontal bars draw bottom-up
    names = [r["name"] for r in shown]
    engines = ("dl", "torch") if compare else ("dl",)
    traces = [go.Bar(y=names, x=[(r.get(engine) or {}).get("graphs", 0) for r in shown], orientation="h",
                     name=ENGINE_NAMES[engine], marker_color=_COLORS[engine], texttemplate="%{x}",
                     textposition="outside", cliponaxis=False,
                     hovertemplate="%{y}: %{x} graph(s)<extra>" + ENGINE_NAMES[engine] + "</extra>")
              for engine in engines][::-1]        # the legend and each group read dynamo_lite first
    others = len(ran) - len(shown)
    title = "Graphs per model" + (" against TorchDynamo" if compare else "")
    subtitle = (f"models with breaks or more than one graph; {others} other(s): one graph"
                + (" in both" if compare else "") if others else "")
    fig = go.Figure(traces)
    fig.update_layout(**_LAYOUT, barmode="group", title=_title(title, subtitle))
    fig.update_layout(height=max(300, 150 + (26 if compare else 18) * len(shown)), legend_traceorder="reversed")
    fig.update_yaxes(automargin=True)
    fig.update_xaxes(title="graphs", dtick=1)
    if not shown:
        fig.add_annotation(text="every model: one graph, no break", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper", font=dict(size=16))
    return fig


_LOG_TICKS = [m * 10 ** e for e in range(-3, 6) for m in (1, 2, 5)]    # 1, 2, 5, 10, 20, ... on log axes


def _box(go, name, values, names, color):
    return go.Box(x=values, name=name, text=names, marker_color=color, boxpoints="all", jitter=0.4, pointpos=0,
                  marker=dict(size=5, opacity=0.6), hovertemplate="%{text}: %{x:.3g}<extra>" + name + "</extra>")


def _capture_figure(go, results: list, compare: bool):
    """Distributions of the first call's time (capture + run), per engine, on a log axis."""
    fig = go.Figure()
    for engine in ("torch", "dl") if compare else ("dl",):
        rows = [r for r in results if (r.get(engine) or {}).get("status") == "ok" and r[engine].get("first_call_s")]
        fig.add_trace(_box(go, ENGINE_NAMES[engine], [r[engine]["first_call_s"] * 1e3 for r in rows],
                           [r["name"] for r in rows], _COLORS[engine]))
    fig.update_layout(**_LAYOUT, showlegend=False, title=_title("Capture time (first call: capture + run)",
                                                                "one point per model that ran correctly"))
    fig.update_xaxes(type="log", title="milliseconds (log scale)", tickvals=_LOG_TICKS)
    fig.update_yaxes(automargin=True)
    return fig


def _steady_figure(go, results: list, compare: bool):
    """Distributions of steady-state call time ratios (a later call): against eager and TorchDynamo."""
    series = [("TorchDynamo / eager", "torch", "eager", _COLORS["torch"]),
              ("dynamo_lite / eager", "dl", "eager", _COLORS["eager"]),
              ("dynamo_lite / TorchDynamo", "dl", "torch", _COLORS["ratio"])]
    fig = go.Figure()
    for name, top, bottom, color in series:
        if not compare and "torch" in (top, bottom):
            continue
        names, values = [], []
        for r in results:
            a = (r.get(top) or {})
            b = {"steady_call_s": r.get("eager_steady_s"), "status": "ok"} if bottom == "eager" else r.get(bottom) or {}
            if a.get("status") == b.get("status") == "ok" and a.get("steady_call_s") and b.get("steady_call_s"):
                names.append(r["name"])
                values.append(a["steady_call_s"] / b["steady_call_s"])
        fig.add_trace(_box(go, name, values, names, color))
    fig.add_vline(x=1, line_dash="dot", line_color="#64748b")
    fig.update_layout(**_LAYOUT, showlegend=False, title=_title("Steady-state call time, ratios",
                                                                "a later call; below 1: the first named is faster"))
    fig.update_xaxes(type="log", title="ratio (log scale)", tickvals=_LOG_TICKS)
    fig.update_yaxes(automargin=True)
    return fig


def _chart_divs(results: list, compare: bool) -> dict[str, str]:
    go = require_plotly().graph_objects
    import plotly.io as pio
    figures = {"chart-kinds": _break_kinds_figure(go, results),
               "chart-graphs": _graphs_figure(go, results, compare),
               "chart-capture": _capture_figure(go, results, compare),
               "chart-steady": _steady_figure(go, results, compare)}
    config = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
    # plotly's JSON escapes "<", so model names in hover texts cannot end the script element
    return {div_id: pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=config)
            for div_id, fig in figures.items()}


# --------------------------------------------------------------------------------------------
# page parts
# --------------------------------------------------------------------------------------------

def _cards(info: dict, compare: bool) -> str:
    """The summary figures, from `dynamo_lite.report.summary` (keys an older file lacks are left out)."""
    cards = []

    def card(title, value, note=""):
        cards.append(f'<div class="card"><div class="card-title">{escape(title)}</div>'
                     f'<div class="card-value">{escape(value)}</div><div class="card-note">{escape(note)}</div></div>')

    statuses = info.get("statuses", {})
    card("models", str(info.get("models", "?")), " · ".join(f"{n} {s}" for s, n in statuses.items()))
    card("correct", str(info.get("correct", "?")), f"under dynamo_lite; {info.get('wrong', 0)} wrong")
    card("dynamo_lite graphs", str(info.get("dl_graphs", 0)),
         f"{info.get('dl_breaks', 0)} breaks · {info.get('dl_eager_frames', 0)} frames run eagerly")
    if compare and "torch_graphs" in info:
        card("TorchDynamo graphs", str(info["torch_graphs"]), f"{info.get('torch_breaks', 0)} breaks")
    if "models_with_fewer_or_equal_graphs" in info:
        card("graphs ≤ TorchDynamo's", str(info["models_with_fewer_or_equal_graphs"]),
             f"models, of {info.get('capture_ratio_models', '?')} both ran correctly")
    for key, title, note in (("capture_ratio_geomean", "capture time", "dynamo_lite / TorchDynamo"),
                             ("steady_ratio_geomean", "steady-state call", "dynamo_lite / TorchDynamo"),
                             ("steady_call_vs_eager_geomean", "steady-state call", "dynamo_lite / eager")):
        if key in info:
            card(title, f"{info[key]:.2f}×", f"{note}, geometric mean")
    return '<section class="cards">' + "".join(cards) + "</section>"


_COLUMNS = (  # (key, header, tooltip, compare only, format)
    ("dl_graphs", "graphs", "graphs dynamo_lite handed to the backend", False, "{:.0f}"),
    ("dl_breaks", "breaks", "graph breaks dynamo_lite resumed after", False, "{:.0f}"),
    ("dl_eager", "eager", "frames dynamo_lite ran eagerly", False, "{:.0f}"),
    ("td_graphs", "TD graphs", "graphs TorchDynamo handed to the backend", True, "{:.0f}"),
    ("td_breaks", "TD breaks", "TorchDynamo's graph breaks", True, "{:.0f}"),
    ("dl_capture_ms", "capture ms", "dynamo_lite's first call (capture + run), ms", False, "{:.1f}"),
    ("td_capture_ms", "TD capture ms", "TorchDynamo's first call (capture + run), ms", True, "{:.1f}"),
    ("capture_ratio", "capture dl/TD", "first-call time, dynamo_lite / TorchDynamo", True, "{:.2f}×"),
    ("steady_ratio", "steady dl/TD", "steady-state call time, dynamo_lite / TorchDynamo", True, "{:.2f}×"),
    ("steady_vs_eager", "steady dl/eager", "steady-state call time, dynamo_lite / eager", False, "{:.2f}×"),
)


def _table(results: list, suites: dict, compare: bool, explained: dict) -> str:
    columns = [c for c in _COLUMNS if compare or not c[3]]
    head = ['<th data-type="text"><button>model</button></th>', '<th data-type="text"><button>suite</button></th>',
            '<th data-type="text"><button>status</button></th>']
    head += [f'<th data-type="num" title="{escape(tip)}"><button>{escape(label)}</button></th>'
             for _, label, tip, _, _ in columns]
    body = []
    for row in results:
        name, status, tags = row["name"], row["status"], list(row.get("tags") or ())
        figures = _figures(row)
        kinds = " ".join(f"{e['kind_id']} {e['kind_name']}" for e in _events(row, "break", "fallback", "error"))
        search = " ".join([name, suites[name], status, *tags, kinds]).lower()
        link = (f'<a href="#{explained[name]}">{escape(name)}</a>' if name in explained else escape(name))
        td_status = (row.get("torch") or {}).get("status")
        status_html = f'<span class="status status-{escape(status)}">{escape(status)}</span>'
        if td_status and td_status != "ok":
            status_html += f' <span class="td-status" title="TorchDynamo">TD {escape(td_status)}</span>'
        cells = [f'<td data-v="{escape(name)}">{link}<div class="tags">{escape(" ".join(tags))}</div></td>',
                 f"<td>{escape(suites[name])}</td>", f'<td data-v="{escape(status)}">{status_html}</td>']
        for key, _, _, _, fmt in columns:
            value = figures[key]
            shown = fmt.format(value) if value is not None else "–"
            css = "num"
            if key in ("capture_ratio", "steady_ratio", "steady_vs_eager") and value is not None:
                css += " better" if value < 0.95 else " worse" if value > 1.05 else ""
            cells.append(f'<td class="{css}" data-v="{"" if value is None else repr(float(value))}">'
                         f'{escape(shown)}</td>')
        body.append(f'<tr data-status="{escape(status)}" data-suite="{escape(suites[name])}" '
                    f'data-search="{escape(search)}">{"".join(cells)}</tr>')

    def select(id_, label, values):
        choices = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in sorted(set(values)))
        return f'<label>{escape(label)} <select id="{id_}"><option value="">all</option>{choices}</select></label>'

    controls = ('<div class="controls"><label>filter <input id="filter-text" type="search" '
                'placeholder="model, tag, break kind…"></label>'
                + select("filter-status", "status", [r["status"] for r in results])
                + select("filter-suite", "suite", suites.values())
                + f'<span id="shown-count">{len(results)} of {len(results)} models</span></div>')
    return (controls + '<div class="table-wrap"><table id="models"><thead><tr>' + "".join(head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table></div>")


def _event_html(event: dict, count: int) -> str:
    """One break or eager frame, explained: kind, where, the line of code, why, and what to do."""
    kind = breaks.KINDS.get(event.get("kind_id", ""))
    what = EVENT_WORDS.get(event.get("status"), event.get("status", ""))
    location = str(event.get("location", ""))
    source = _source_of(event)
    times = f' <span class="times">×{count}</span>' if count > 1 else ""
    parts = [f'<li class="event event-{escape(event.get("status", ""))}"><div class="event-head">'
             f'<span class="badge">{escape(what)}</span> <code class="kind">{escape(event.get("kind_id", ""))}</code> '
             f'<b>{escape(event.get("kind_name", ""))}</b> in <code>{escape(event.get("function", ""))}</code>'
             f'{times}</div>',
             f'<div class="where" title="{escape(location)}">{escape(_short_path(location))}</div>',
             f'<pre class="source">{escape(source)}</pre>' if source
             else '<div class="source-missing">(source line not available)</div>',
             "<dl>", f'<dt>why</dt><dd class="why">{escape(event.get("detail", ""))}</dd>']
    if event.get("fallback_reason"):
        eager_kind = breaks.KINDS.get(event.get("fallback_kind_id", ""))
        label = f"[{eager_kind.id} {eager_kind.name}] " if eager_kind else ""
        parts.append(f'<dt>ran eagerly because</dt><dd>{escape(label + event["fallback_reason"])}</dd>')
        if eager_kind is not None:
            parts.append(f'<dt>fix (to resume)</dt><dd class="hint">{escape(eager_kind.hint)}</dd>')
    if kind is not None:
        parts.append(f'<dt>what it means</dt><dd>{escape(kind.explanation)}</dd>'
                     f'<dt>fix</dt><dd class="hint">{escape(kind.hint)}</dd>')
    parts.append("</dl></li>")
    return "".join(parts)


_EVENT_FIELDS = ("status", "kind_id", "kind_name", "function", "location", "detail", "fallback_reason", "source",
                 "fallback_kind_id")


def _details(results: list, compare: bool) -> tuple[str, dict]:
    """Per model with something to explain, a <details> section; returns the HTML and name -> anchor id."""
    sections, anchors = [], {}
    for index, row in enumerate(results):
        dl, td = row.get("dl") or {}, row.get("torch") or {}
        # identical records (the same break seen on each pass of a loop) are shown once, with a count
        events = collections.Counter(tuple(e.get(k, "") for k in _EVENT_FIELDS) for e in dl.get("events", []))
        problems = [(row["status"], row["detail"])] if not dl and row.get("detail") else []
        problems += [(f"{ENGINE_NAMES[engine]} {run['status']}", run["detail"])
                     for engine, run in (("dl", dl), ("torch", td)) if run.get("detail")]
        if not events and not problems and not td.get("events"):
            continue
        anchor = anchors[row["name"]] = f"m-{index}"
        body = [f'<p class="problem"><b>{escape(label)}:</b> {escape(text)}</p>' for label, text in problems]
        if events:
            body.append('<ol class="events">' + "".join(_event_html(dict(zip(_EVENT_FIELDS, e)), n)
                                                        for e, n in events.items()) + "</ol>")
        if compare and td.get("events"):
            body.append("<p class=\"td-title\">TorchDynamo's graph breaks:</p><ul class=\"td-events\">"
                        + "".join(f"<li>{escape(str(e))}</li>" for e in td["events"]) + "</ul>")
        counts = (f"{dl.get('graphs', 0)} graph(s), {dl.get('breaks', 0)} break(s), "
                  f"{dl.get('eager_frames', 0)} eager frame(s)" if dl else row["status"])
        sections.append(f'<details id="{anchor}" class="model"><summary><b>{escape(row["name"])}</b> '
                        f'<span class="summary-counts">{escape(counts)}</span></summary>{"".join(body)}</details>')
    return ('<section id="explained"><h2>Breaks and frames run eagerly, explained</h2>'
            + ("".join(sections) or "<p>Nothing to explain: every model was captured whole.</p>")
            + "</section>"), anchors


def _kinds_table(results: list) -> str:
    """Every break kind that occurred (most frequent first), with its explanation and hint."""
    seen = collections.Counter(e["kind_id"] for r in results for e in _events(r, "break", "fallback", "error"))
    rows = "".join(f'<tr><td><code>{escape(k)}</code> {escape(breaks.KINDS[k].name)}</td>'
                   f'<td>{escape(breaks.KINDS[k].explanation)}</td><td class="hint">{escape(breaks.KINDS[k].hint)}</td></tr>'
                   for k, _ in seen.most_common() if k in breaks.KINDS)
    return ('<table class="kinds"><thead><tr><th>kind</th><th>what it means</th><th>fix</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>") if rows else ""


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------

def render_html(results: list, info: dict, options, partial: bool = False) -> str:
    """The whole page as one string (plotly.js included)."""
    plotly = require_plotly()
    compare = _option(options, "compare") == "torch"
    suites = _suites(results, options)
    details, anchors = _details(results, compare)
    charts = _chart_divs(results, compare)
    meta = [f"{len(results)} models", f"backend {_option(options, 'backend', 'eager')}",
            "compared with TorchDynamo" if compare else "dynamo_lite only"]
    if info.get("seconds") is not None:
        meta.append(f"wall time {info['seconds']} s")
    meta.append(f"written {time.strftime('%Y-%m-%d %H:%M')}")
    banner = ('<p class="partial">A partial run: the JSON file was written before the run finished.</p>'
              if partial else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dynamo-lite report</title>
<style>{_CSS}</style>
<script>{plotly.offline.get_plotlyjs()}</script>
</head><body>
<header><h1>dynamo-lite report</h1><p class="meta">{escape(" · ".join(meta))}</p>{banner}</header>
{_cards(info, compare)}
<section class="charts">
<div class="chart">{charts["chart-kinds"]}{_kinds_table(results)}</div>
<div class="chart">{charts["chart-graphs"]}</div>
<div class="chart">{charts["chart-capture"]}</div>
<div class="chart">{charts["chart-steady"]}</div>
</section>
<h2>Models</h2>
{_table(results, suites, compare, anchors)}
{details}
<footer>plotly {escape(plotly.__version__)} · no network needed</footer>
<script>{_JS}</script>
</body></html>
"""


def write_html(path: str, results: list, info: dict, options, partial: bool = False) -> None:
    """Write the self-contained HTML report of a run (the rows and summary of `run_report`) to `path`."""
    page = render_html(results, info, options, partial)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


def main(argv=None) -> int:
    """`dynamo-lite report html REPORT.json [-o FILE]`: the HTML page of an earlier run's JSON file."""
    parser = argparse.ArgumentParser(prog="dynamo-lite report html",
                                     description="write the self-contained HTML report of a `report --json` file")
    parser.add_argument("json_path", metavar="REPORT.json")
    parser.add_argument("-o", "--output", help="the HTML file (default: REPORT.html beside the JSON file)")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.json_path)[0] + ".html"
    try:
        with open(args.json_path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            raise ValueError(f"{args.json_path}: not a `dynamo-lite report --json` file (no 'models' list)")
        write_html(output, data["models"], data.get("summary") or {}, data.get("options") or {},
                   partial=bool(data.get("partial")))
    except (OSError, ValueError, PlotlyMissing) as e:
        print(f"dynamo-lite report html: {e}", file=sys.stderr)
        return 2
    print(f"HTML report: {output}")
    return 0


_CSS = """
:root { --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; --bg: #f8fafc; --dl: #2563eb; --td: #ea580c; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1440px; padding: 24px 32px; color: var(--ink); background: var(--bg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { margin: 0; font-size: 26px; } h2 { font-size: 19px; margin: 28px 0 10px; }
.meta { color: var(--muted); margin: 4px 0 16px; }
.partial { background: #fef3c7; border: 1px solid #f59e0b; padding: 8px 12px; border-radius: 6px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.card { background: white; border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.card-title { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card-value { font-size: 26px; font-weight: 650; margin: 2px 0; }
.card-note { color: var(--muted); font-size: 13px; }
/* two fixed columns: each chart has its final width when plotly draws it, while the page loads */
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; margin-top: 18px; }
@media (max-width: 1000px) { .charts { grid-template-columns: minmax(0, 1fr); } }
.chart { background: white; border: 1px solid var(--line); border-radius: 10px; padding: 6px; min-width: 0; }
table { border-collapse: collapse; width: 100%; background: white; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
.kinds { margin: 4px 0 6px; font-size: 13px; }
.kinds th { color: var(--muted); font-weight: 600; } .kinds td:first-child { white-space: nowrap; }
.kinds .hint { color: #166534; }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 10px; }
#models thead th { position: sticky; top: 0; background: #f1f5f9; vertical-align: bottom; }
#models th button { all: unset; cursor: pointer; font-weight: 600; }
#models th[aria-sort=ascending] button::after { content: " ▲"; }
#models th[aria-sort=descending] button::after { content: " ▼"; }
#models th[data-type=num], #models td.num { text-align: right; font-variant-numeric: tabular-nums; }
#models tbody tr:hover { background: #f8fafc; }
.tags { color: var(--muted); font-size: 11.5px; }
.status { padding: 1px 7px; border-radius: 9px; font-size: 12px; background: #e2e8f0; }
.status-ok { background: #dcfce7; color: #166534; }
.status-WRONG, .status-CRASH, .status-timeout, .status-eager-error { background: #fee2e2; color: #991b1b; }
.td-status { font-size: 11.5px; color: var(--td); }
.better { color: #15803d; } .worse { color: #b91c1c; }
.controls { display: flex; gap: 18px; align-items: center; margin: 8px 0 10px; flex-wrap: wrap; }
.controls input { width: 260px; padding: 4px 8px; } .controls select { padding: 3px 6px; }
#shown-count { color: var(--muted); }
details.model { background: white; border: 1px solid var(--line); border-radius: 8px; margin: 8px 0; padding: 8px 14px; }
details.model summary { cursor: pointer; } .summary-counts { color: var(--muted); margin-left: 8px; }
.events { padding-left: 20px; } .event { margin: 10px 0; }
.badge { font-size: 12px; padding: 1px 7px; border-radius: 9px; background: #dbeafe; color: #1e40af; }
.event-fallback .badge { background: #ede9fe; color: #5b21b6; } .event-error .badge { background: #fee2e2; color: #991b1b; }
.kind { color: var(--muted); } .times { color: var(--muted); }
.where { color: var(--muted); font-family: ui-monospace, monospace; font-size: 12.5px; margin-top: 2px; }
pre.source { background: #0f172a; color: #e2e8f0; padding: 6px 10px; border-radius: 6px; margin: 4px 0;
             white-space: pre-wrap; font-size: 13px; }
.source-missing { color: var(--muted); font-style: italic; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 4px 0; }
dt { color: var(--muted); } dd { margin: 0; } dd.hint { color: #166534; }
.problem { color: #991b1b; } .td-title { margin-bottom: 2px; color: var(--td); }
footer { color: var(--muted); margin-top: 30px; font-size: 12px; }
"""

# Sorting by a header (numbers by their data-v value; empty cells last either way) and filtering by
# text, status and suite. Opening a model's details when its link (or the page's #anchor) is followed.
_JS = """
(function () {
  const table = document.getElementById("models");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const text = document.getElementById("filter-text");
  const status = document.getElementById("filter-status");
  const suite = document.getElementById("filter-suite");
  const count = document.getElementById("shown-count");

  function key(row, column, numeric) {
    const cell = row.cells[column];
    const raw = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
    if (raw === "") return null;
    return numeric ? Number(raw) : raw.toLowerCase();
  }

  function sortBy(th) {
    const column = th.cellIndex, numeric = th.dataset.type === "num";
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    rows.sort(function (a, b) {
      const x = key(a, column, numeric), y = key(b, column, numeric);
      if (x === null || y === null) return (x === null) - (y === null);
      const order = numeric ? x - y : x.localeCompare(y);
      return ascending ? order : -order;
    });
    body.append(...rows);
  }

  function applyFilters() {
    const words = text.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    for (const row of rows) {
      const visible = words.every(w => row.dataset.search.includes(w))
        && (!status.value || row.dataset.status === status.value)
        && (!suite.value || row.dataset.suite === suite.value);
      row.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = shown + " of " + rows.length + " models";
  }

  function openSection(id) {
    const target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") target.open = true;
  }
  const openTarget = () => openSection(location.hash.slice(1));

  for (const th of table.tHead.rows[0].cells) th.addEventListener("click", () => sortBy(th));
  for (const control of [text, status, suite]) control.addEventListener("input", applyFilters);
  // a model's link opens its section at once (hashchange comes later, and not at all when the
  // address already ends in that section's name, e.g. after the reader closed it)
  table.addEventListener("click", event => {
    const link = event.target.closest("a[href^='#']");
    if (link) openSection(link.getAttribute("href").slice(1));
  });
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
"""
