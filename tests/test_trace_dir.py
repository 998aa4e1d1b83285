"""The trace directory: a program run with DYNAMO_LITE_TRACE=DIR prints and returns what it does
eagerly and leaves one folder per captured frame (graphs, guard function, break, replacement code,
timings); a folder that cannot be written warns once and changes nothing else; `dynamo-lite
trace DIR` builds an index page linking one page per frame, everything escaped.

In a real headless Chromium (as tests/test_report_html.py: Debian's /usr/bin/chromium driven by
playwright; skipped without them unless DL_BROWSER_REQUIRED=1): the index loads without errors,
typing filters its rows, a link opens the frame's page with its sections, and the page links back.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite import config
from dynamo_lite.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent('''
    import sys
    import torch
    import dynamo_lite as dl

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x, scale):
            y = self.fc(x) * scale
            print("block <&> output", tuple(y.shape))
            return torch.relu(y) + 1

    torch.manual_seed(0)
    block = Block()
    run = block if sys.argv[1] == "eager" else dl.capture(block)
    outs = [run(torch.ones(2, 4), 2.0), run(torch.ones(2, 4), 3.0)]
    print([round(float(o.detach().sum()), 4) for o in outs])
''')


def _run(tmp_path, mode: str, trace_dir=None) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("DYNAMO_LITE_TRACE", None)
    if trace_dir is not None:
        env["DYNAMO_LITE_TRACE"] = str(trace_dir)
    return subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The program run eagerly and captured with a trace directory: (eager run, captured run, DIR)."""
    tmp = tmp_path_factory.mktemp("trace")
    eager = _run(tmp, "eager")
    captured = _run(tmp, "captured", tmp / "trace")
    assert eager.returncode == 0 and captured.returncode == 0, captured.stderr
    return eager, captured, tmp / "trace"


def _frames(directory: Path) -> dict:
    return {json.loads((d / "frame.json").read_text())["frame"]: d for d in sorted(directory.iterdir())
            if (d / "frame.json").exists()}


def test_the_traced_program_prints_and_returns_what_it_does_eagerly(traced):
    eager, captured, _ = traced
    assert captured.stdout == eager.stdout and "block <&> output" in captured.stdout
    assert "Warning" not in captured.stderr


def test_each_captured_frame_has_its_graphs_guards_break_code_and_timings(traced):
    directory = traced[2]
    line = PROGRAM.splitlines().index('        print("block <&> output", tuple(y.shape))') + 1
    folders = sorted(d.name for d in directory.iterdir())
    # the second call recaptures forward (scale changed); its resume function, where scale is
    # dead, is reused
    assert folders == ["0001-Block.forward", f"0002-Block.forward._resume_at_line_{line}", "0003-Block.forward"]
    first = directory / folders[0]
    data = json.loads((first / "frame.json").read_text())
    assert data["status"] == "break" and data["break"]["kind_id"] == "DL005"
    assert data["files"] == ["break.txt", "code.txt", "graph_1.py", "guards.py", "timings.json"]
    graph = (first / "graph_1.py").read_text()
    assert "def forward" in graph and "linear" in graph
    guards = (first / "guards.py").read_text()
    compile(guards, "guards.py", "exec")                           # real Python
    assert guards.startswith("def guard_Block_forward(self, x, scale):") and "scale == 2.0" in guards
    assert "self.fc" in guards and "___" not in guards
    code = (first / "code.txt").read_text()
    assert "graph 1" in code and f"resume Block.forward.<resume at line {line}>" in code
    brk = (first / "break.txt").read_text()
    assert "[DL005 print-or-log]" in brk and "fix:" in brk and 'print("block <&> output"' in brk
    assert json.loads((first / "timings.json").read_text())["capture_ms"] > 0
    second_call = json.loads((directory / folders[2] / "frame.json").read_text())
    assert second_call["recapture"]["old"] == "2.0" and second_call["recapture"]["new"] == "3.0"
    assert second_call["recapture"]["guard"] == "type(scale) is float and scale == 2.0"


def test_a_trace_directory_that_cannot_be_written_warns_once_and_changes_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(config, "trace_dir", str(blocker / "trace"))

    def f(x, n):
        print("n is", n)
        return x * n

    captured = dl.capture(f)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        outs = [captured(torch.ones(2), n) for n in (2, 3, 4)]
    for out, n in zip(outs, (2, 3, 4)):
        torch.testing.assert_close(out, torch.ones(2) * n)
    trace_warnings = [w for w in seen if "trace directory" in str(w.message)]
    assert len(trace_warnings) == 1 and "NotADirectoryError" in str(trace_warnings[0].message)


def test_config_trace_dir_set_at_run_time_writes_there(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "trace_dir", str(tmp_path / "t"))

    def g(x):
        return (x + 1).relu()

    torch.testing.assert_close(dl.capture(g)(torch.ones(3)), torch.ones(3) * 2)
    assert list(_frames(tmp_path / "t")) == [g.__qualname__]
    with pytest.raises(TypeError, match="trace_dir"):
        config.trace_dir = 3


def test_the_trace_command_builds_an_index_linking_one_page_per_frame(traced, capsys):
    directory = traced[2]
    assert cli(["trace", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == str(directory / "index.html")
    index = (directory / "index.html").read_text()
    for folder in _frames(directory).values():
        assert f'href="{folder.name}/index.html"' in index
        page = (folder / "index.html").read_text()
        assert 'href="../index.html"' in page and "Replacement code" in page
    assert "&lt;resume at line" in index and "<resume" not in index           # escaped
    first = (directory / "0001-Block.forward" / "index.html").read_text()
    assert "block &lt;&amp;&gt; output" in first and "<&>" not in first
    assert "def guard_Block_forward(self, x, scale):" in first


def test_the_trace_command_on_a_missing_or_empty_folder_exits_2(tmp_path, capsys):
    assert cli(["trace", str(tmp_path / "missing")]) == 2
    assert cli(["trace", str(tmp_path)]) == 2
    assert "DYNAMO_LITE_TRACE" in capsys.readouterr().err


# ---- in a real browser ----------------------------------------------------------------------

@pytest.fixture
def index(browser, traced):
    assert cli(["trace", str(traced[2])]) == 0
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.problems = []
    page.on("console", lambda m: page.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("request", lambda r: None if r.url.startswith("file:") else page.problems.append(f"request: {r.url}"))
    page.goto((traced[2] / "index.html").as_uri())
    yield page
    page.close()


def test_the_index_lists_every_frame_and_typing_filters_it(index):
    rows = index.locator("#frames tbody tr")
    assert rows.count() == 3
    assert index.locator(".card b").first.inner_text() == "3"
    index.fill("#filter", "resume")
    assert index.locator("#frames tbody tr:not([hidden])").count() == 1
    assert index.inner_text("#shown") == "1 of 3 frames"
    index.fill("#filter", "dl005")                         # a break kind finds its frames
    assert index.locator("#frames tbody tr:not([hidden])").count() == 2
    index.fill("#filter", "")
    assert index.locator("#frames tbody tr:not([hidden])").count() == 3
    assert index.problems == []


def test_a_link_opens_the_frames_page_with_its_sections_and_links_back(index):
    index.click("#frames tbody tr >> nth=0 >> a")
    assert index.url.endswith("0001-Block.forward/index.html")
    for section in ("#break", "#guards", "#code", "#timings"):
        assert index.locator(section).is_visible(), section
    assert "fix:" in index.locator("p.hint").inner_text()
    assert "def guard_Block_forward(self, x, scale):" in index.locator("pre").nth(2).inner_text()
    assert index.locator("h2.graph").count() == 1
    index.click("text=all frames")
    assert index.url.endswith("trace/index.html")
    index.click("#frames tbody tr >> nth=2 >> a")
    assert "type(scale) is float and scale == 2.0" in index.locator("#recapture + table").inner_text()
    assert index.problems == []
