"""explain(): the report's graphs, breaks (with source line, hint and inlined call stack),
recaptures and renderings (text, HTML, JSON)."""
import json

import torch

import dynamo_lite as dl


def helper(y):
    print("inside helper")
    return y * 2


def model_fn(x, y):
    a = x + 1
    b = helper(a * y)
    if b.sum() > 0:
        return b - 1
    return a + b


def test_report_lists_graphs_breaks_and_locations(capsys):
    x, y = torch.ones(3), torch.ones(3)
    report = dl.explain(model_fn)(x, y)
    assert capsys.readouterr().out == "inside helper\n"          # the function really ran
    torch.testing.assert_close(report.output, model_fn(x, y))
    assert report.graph_count == 4 and report.op_count == 6
    kinds = [b.kind_id for b in report.breaks]
    assert kinds == ["DL005", "DL002"]
    first = report.breaks[0]
    assert first.location.endswith(f"test_explain.py:{helper.__code__.co_firstlineno + 1}")
    assert first.source_line == 'print("inside helper")'
    assert [fn for _, _, fn, _ in first.user_stack] == ["model_fn", "helper"]
    assert first.resumed and "print" in first.hint
    assert all("def forward" in g.code for g in report.graphs)
    assert any("L['x'] is a Tensor" in guard for guard in report.graphs[0].guards)


def test_text_html_and_json_renderings():
    report = dl.explain(model_fn)(torch.ones(3), -torch.ones(3))
    text = str(report)
    assert "[DL005 print-or-log]" in text and 'print("inside helper")' in text and "fix:" in text
    assert "inlined call stack: model_fn" in text
    html = report._repr_html_()
    assert "<pre" in html and "DL002" in html
    data = json.loads(report.to_json())
    assert data["graph_count"] == report.graph_count and data["breaks"][1]["kind_name"] == "data-dependent-branch"


def test_recaptures_are_reported_with_reasons():
    def f(x, n):
        return x * n

    captured = dl.capture(f)
    captured(torch.ones(2), 2)
    report_fn = dl.explain(f)
    report = report_fn(torch.ones(2), 3)
    assert report.graph_count == 1 and report.recompiles == []


def test_frame_that_runs_eagerly_explains_why():
    def handles(x):
        try:
            x = x + 1
            int("not a number")
        except ValueError:
            print("handling")      # a break while an exception is handled: not resumable
            x = x + 1
        return x

    report = dl.explain(handles)(torch.ones(2))
    assert report.graph_count == 0
    assert not report.breaks[0].resumed and "except/finally" in report.breaks[0].eager_reason
    assert report.breaks[0].eager_kind_id == "DL022" and "[DL022 break-in-handler]" in str(report)
