"""The HTML report (`dynamo-lite report --html`, `dynamo-lite report html REPORT.json`), from a real run of
four tiny models of our own against TorchDynamo: a clean one, a print, an `.item()` (in a model whose name
needs escaping) and one skipped for a missing package.

Without a browser: the page is one file that loads nothing from the network, everything is escaped,
rows without results and runs without --compare work, and a missing plotly is a clear exit 2. In a real
headless Chromium (Debian's /usr/bin/chromium, driven by playwright, which never downloads a browser of
its own): no script errors, the four plotly charts are drawn, a header click sorts the table, typing
filters it, and a break's explain section shows its source line and hint. Without Chromium the browser
tests skip, unless DL_BROWSER_REQUIRED=1 (CI sets it where it installs Chromium), which makes that a failure.
"""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dynamo_lite import breaks
from dynamo_lite.report.html import write_html

pytestmark = pytest.mark.once     # CI runs these on one Python version (conftest.py)

ROOT = Path(__file__).resolve().parents[1]

TINY_MODELS = textwrap.dedent('''
    import torch
    from dynamo_lite.report.registry import model, require

    class Printing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            print("tiny <&> print", y.shape)
            return y.relu()

    class ItemScale(torch.nn.Module):
        def forward(self, x):
            scale = x.abs().max().item()
            return x / (scale + 1.0)

    @model("tiny_linear")
    def build_linear():
        return torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)

    @model("tiny_print", tags=("break:print",))
    def build_print():
        return Printing().eval(), (torch.randn(2, 4),)

    @model("tiny_item<&>", tags=("break:item",))
    def build_item():
        return ItemScale(), (torch.randn(3, 4),)

    @model("tiny_needs_missing", requires="package_that_is_not_installed")
    def build_missing():
        require("package_that_is_not_installed")
''')


def _cli(*args, prelude: str = "") -> subprocess.CompletedProcess:
    """`dynamo-lite ARGS` in a fresh interpreter (after `prelude`, Python run first)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               COLUMNS="160")
    code = f"{prelude}\nimport sys\nfrom dynamo_lite.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real `report --compare torch --json --html` of the tiny models: (JSON data, the page's path)."""
    folder = tmp_path_factory.mktemp("html_report")
    models = folder / "tiny_models.py"
    models.write_text(TINY_MODELS)
    json_path, html_path = folder / "report.json", folder / "report.html"
    proc = _cli("report", str(models), "--compare", "torch", "--json", str(json_path), "--html", str(html_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(json_path.read_text()), html_path


def _rows(data) -> dict:
    return {r["name"]: r for r in data["models"]}


# --------------------------------------------------------------------------------------------
# the file itself, no browser
# --------------------------------------------------------------------------------------------

def test_the_run_stores_each_break_with_its_source_line(run):
    rows = _rows(run[0])
    assert rows["tiny_linear"]["status"] == "ok" and rows["tiny_linear"]["dl"]["graphs"] == 1
    assert rows["tiny_needs_missing"]["status"] == "skipped" and not rows["tiny_needs_missing"]["dl"]
    (printing,) = rows["tiny_print"]["dl"]["events"]
    assert printing["kind_id"] == "DL005" and printing["source"] == 'print("tiny <&> print", y.shape)'
    (item,) = rows["tiny_item<&>"]["dl"]["events"]
    assert item["kind_id"] == "DL003" and item["source"] == "scale = x.abs().max().item()"


def _loaded_urls(page: str) -> list:
    """Addresses the page would fetch: script sources, stylesheets and other links, images, frames."""
    return re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?([^\"' >]+)", page, re.I)


def test_the_page_is_one_file_with_plotly_embedded_once_and_nothing_loaded(run):
    data, html_path = run
    assert sorted(p.name for p in html_path.parent.iterdir()) == ["report.html", "report.json", "tiny_models.py"]
    page = html_path.read_text()
    assert _loaded_urls(page) == []
    assert page.count("Plotly.newPlot(") == 4
    assert len(re.findall(r"plotly\.js v\d", page)) == 1          # the library's banner: embedded once
    assert "tiny_item&lt;&amp;&gt;" in page and "tiny_item<&>" not in page
    assert 'print(&quot;tiny &lt;&amp;&gt; print&quot;, y.shape)' in page


def test_special_characters_are_escaped_everywhere(tmp_path, run):
    """Names, tags, details, locations and source lines with markup in them, plus rows without results
    (as a crash or a timeout leaves them), in a run without --compare."""
    data = json.loads(json.dumps(run[0]))
    evil = "<script>alert('x')</script> & <img src=x onerror=alert(1)>"
    row = _rows(data)["tiny_print"]
    row["name"], row["tags"] = f"model {evil}", [f"tag{evil}"]
    row["dl"]["events"][0].update(detail=f"why {evil}", function=f"f{evil}", source=f"src {evil}",
                                  location=f"/x/{evil}.py:3", fallback_reason=f"because {evil}")
    row["dl"]["detail"] = f"detail {evil}"
    data["models"] += [{"name": f"crashed {evil}", "tags": [], "status": "CRASH", "detail": f"died {evil}"},
                       {"name": "hung", "tags": [], "status": "timeout", "detail": "no result within 60 s"}]
    out = tmp_path / "page.html"
    write_html(str(out), data["models"], data["summary"], {"compare": None, "backend": "eager", "paths": ["x"]})
    page = out.read_text()
    body = page.split("</head>", 1)[1]
    assert "<script>alert" not in body and "<img" not in body
    assert body.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;") >= 9
    assert "died " in body and "no result within 60 s" in body
    assert "TD graphs" not in body                    # no TorchDynamo columns without --compare
    assert _loaded_urls(page) == []


def test_report_html_from_an_older_json_file_reads_source_lines_from_the_files(tmp_path, run):
    data = json.loads(json.dumps(run[0]))
    for row in data["models"]:
        for event in (row.get("dl") or {}).get("events", []):
            del event["source"]                        # as files written before the field existed
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    proc = _cli("report", "html", str(old), "-o", str(tmp_path / "old.html"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scale = x.abs().max().item()" in (tmp_path / "old.html").read_text()


def test_without_plotly_the_html_commands_exit_2_with_a_clear_message(tmp_path, run):
    block = "import sys; sys.modules['plotly'] = None      # import plotly raises ImportError"
    for args in (("report", "html", str(run[1].with_suffix(".json")), "-o", str(tmp_path / "x.html")),
                 ("report", str(tmp_path / "no_models_needed.py"), "--html", str(tmp_path / "y.html"))):
        proc = _cli(*args, prelude=block)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "the HTML report needs plotly" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*.html"))


# --------------------------------------------------------------------------------------------
# in a headless Chromium
# --------------------------------------------------------------------------------------------

@pytest.fixture
def page(browser, run):
    """The run's page, opened; `page.problems` collects console errors, page errors and any request
    that leaves the file (there must be none)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.problems = []
    page.on("console", lambda m: page.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else page.problems.append(f"request: {r.url}"))
    page.goto(run[1].as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg")
    yield page
    page.close()


def _visible_names(page) -> list:
    return page.eval_on_selector_all("#models tbody tr:not([hidden])",
                                     "rows => rows.map(r => r.cells[0].dataset.v)")


def test_the_page_loads_without_errors_and_draws_the_charts_and_figures(page, run):
    assert page.locator(".js-plotly-plot").count() == 4
    titles = {"chart-kinds": "Graph-break kinds", "chart-graphs": "Graphs per model against TorchDynamo",
              "chart-capture": "Capture time", "chart-steady": "Steady-state call time"}
    for chart, title in titles.items():
        assert page.locator(f"#{chart} .main-svg").count() >= 1, chart
        assert title in page.locator(f"#{chart} .gtitle").first.text_content(), chart     # drawn, with its title
    assert page.locator("#chart-capture .boxlayer .points path").count() >= 6     # 3 models x 2 engines
    kinds = page.locator("#chart-kinds .ytick text").all_text_contents()
    assert sorted(kinds) == ["DL003 tensor-to-python", "DL005 print-or-log"]
    cards = dict(zip(page.locator(".card-title").all_text_contents(), page.locator(".card-value").all_text_contents()))
    assert cards["models"] == "4" and page.locator(".card").first.is_visible()
    assert cards["dynamo_lite graphs"] == str(run[0]["summary"]["dl_graphs"])
    assert page.problems == []


def test_clicking_a_header_sorts_the_table(page, run):
    graphs = {r["name"]: (r.get("dl") or {}).get("graphs") for r in run[0]["models"]}
    assert _visible_names(page) == list(graphs)                  # the run's order first
    ran = sorted((n for n in graphs if graphs[n] is not None), key=lambda n: (graphs[n], list(graphs).index(n)))
    page.click("#models th:has-text('graphs') >> nth=0")
    assert _visible_names(page) == ran + ["tiny_needs_missing"]   # ascending; no value last
    page.click("#models th:has-text('graphs') >> nth=0")
    shown = _visible_names(page)
    assert [graphs[n] for n in shown[:-1]] == sorted((graphs[n] for n in ran), reverse=True)
    assert shown[-1] == "tiny_needs_missing"
    page.click("#models th:has-text('model')")
    assert _visible_names(page) == sorted(graphs, key=str.lower)
    assert page.problems == []


def test_typing_in_the_filter_and_choosing_a_status_hide_rows(page):
    page.fill("#filter-text", "print")
    assert _visible_names(page) == ["tiny_print"]
    assert page.inner_text("#shown-count") == "1 of 4 models"
    page.fill("#filter-text", "dl003")                           # a break kind finds its models
    assert _visible_names(page) == ["tiny_item<&>"]
    page.fill("#filter-text", "")
    page.select_option("#filter-status", "skipped")
    assert _visible_names(page) == ["tiny_needs_missing"]
    page.select_option("#filter-status", "")
    assert len(_visible_names(page)) == 4
    assert page.problems == []


def test_a_breaks_explain_section_shows_its_source_line_why_and_hint(page):
    section = page.locator("details.model", has_text="tiny_print")
    assert not section.locator(".hint").is_visible()             # closed until asked for
    page.click("#models a:text-is('tiny_print')")                # the model's link opens it
    assert section.locator(".hint").is_visible()
    section.locator("summary").click()                           # closed by the reader,
    assert not section.locator(".hint").is_visible()
    page.click("#models a:text-is('tiny_print')")                # the same link opens it again
    assert section.locator(".hint").is_visible()
    assert section.locator("pre.source").inner_text() == 'print("tiny <&> print", y.shape)'
    assert section.locator(".hint").inner_text() == breaks.PRINT_OR_LOG.hint
    assert "DL005" in section.inner_text() and breaks.PRINT_OR_LOG.explanation in section.inner_text()
    assert re.search(r"tiny_models\.py:\d+", section.locator(".where").inner_text())
    item = page.locator("details.model", has_text="tiny_item<&>")
    item.locator("summary").click()
    assert item.locator("pre.source").inner_text() == "scale = x.abs().max().item()"
    assert item.locator(".hint").inner_text() == breaks.TENSOR_TO_PYTHON.hint
    assert page.problems == []
