"""explain(): the report's graphs, breaks (with source line, hint and inlined call stack),
recaptures and renderings (text, HTML, JSON); what we built for each frame: its guards as the
Python function that checks them (run here against the real check), its replacement code as
labelled bytecode, and the recapture history of each code object (guard, old and new value)."""
import dis
import json
import math
import re

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
    assert any("x is a Tensor" in guard for guard in report.graphs[0].guards)


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
    # the frame's own section says why it runs eagerly, by kind, also where the break is listed
    # only once (the break met again in a callee's frame, or in a resume function)
    frame = report.frames[0]
    assert frame.status == "fallback" and frame.eager_why.startswith("DL005 print-or-log")
    assert "could not resume there: DL022 break-in-handler" in frame.eager_why
    assert f"why it runs eagerly: {frame.eager_why}" in " ".join(str(report).split())


# ---- what we built: guard functions, replacement code, recapture history -------------------------

class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))

    def forward(self, x, scale):
        y = x * self.weight * scale
        print("between graphs")
        return y.relu() + 1


def _readable_check(record):
    """The guard function explain shows, made runnable: it must answer as the real check does."""
    source, names = record.guards.readable(record.qualname)
    namespace = {**Scaled.forward.__globals__, "torch": torch, "math": math, **names}
    exec(compile(source, "<shown guards>", "exec"), namespace)
    return next(v for k, v in namespace.items() if k.startswith("guard_"))


def test_guards_are_shown_as_the_function_that_checks_them_with_the_users_names(capsys):
    model, x = Scaled(), torch.randn(3)
    expected = model(x, 2.0)
    eager_out = capsys.readouterr().out
    report = dl.explain(model)(x, 2.0)
    assert capsys.readouterr().out == eager_out
    torch.testing.assert_close(report.output, expected)
    first = report.frames[0]
    assert first.guard_code.startswith("def guard_Scaled_forward(self, x, scale):")
    assert "type(scale) is float and scale == 2.0" in first.guard_code
    assert "self.weight.shape == (3,)" in first.guard_code and "x.dtype is torch.float32" in first.guard_code
    assert "type(self) is Scaled" in first.guard_code
    assert "___" not in first.guard_code and "_parameters" not in first.guard_code
    assert "torch.is_grad_enabled() is True" in first.guard_code


def test_the_shown_guard_function_accepts_and_refuses_what_the_compiled_check_does():
    from dynamo_lite.fallback.records import RECORDS
    model, x = dl.capture(Scaled()), torch.randn(3)
    model(x, 2.0)
    record = next(r for r in RECORDS if r.qualname == "Scaled.forward" and r.guards is not None)
    shown = _readable_check(record)
    frozen = dl.capture(Scaled())
    frozen.weight.requires_grad_(False)
    another = Scaled()
    # the captured frame runs on the module itself (capture returns a state-sharing wrapper)
    model, frozen = type(model)._dynamo_lite_original, type(frozen)._dynamo_lite_original
    cases = [(model, x, 2.0), (another, x, 2.0), (model, torch.randn(4), 2.0), (model, x, 3.0),
             (model, x.double(), 2.0), (model, x, 2), (frozen, x, 2.0), (model, torch.randn(6)[::2], 2.0),
             (model, x.clone().requires_grad_(), 2.0)]
    answers = [shown(*args) for args in cases]
    assert answers == [record.guards.check(type(model).forward, *args) for args in cases]
    assert answers == [True, True] + [False] * 7       # instances of one class share the graph


def test_a_resume_functions_guards_name_its_stack_items_and_its_line():
    line = Scaled.forward.__code__.co_firstlineno + 2          # print("between graphs")
    report = dl.explain(Scaled())(torch.ones(3), 2.0)
    resumed = report.frames[1]
    assert resumed.frame == f"Scaled.forward.<resume at line {line}>"
    assert resumed.guard_code.startswith(f"def guard_Scaled_forward_resume_at_line_{line}(stack0, y):")
    assert "(stack0 is None)" in resumed.guard_code and "___stack" not in resumed.guard_code


def test_replacement_code_is_labelled_bytecode_naming_graphs_and_resume_functions():
    line = Scaled.forward.__code__.co_firstlineno + 2
    report = dl.explain(Scaled())(torch.ones(3), 2.0)
    first, resumed = report.frames[0].code, report.frames[1].code
    assert "LOAD_CONST            graph 1" in first and "LOAD_CONST            graph 2" in resumed
    assert f"resume Scaled.forward.<resume at line {line}>" in first
    assert f'# line {line}: print("between graphs")' in first
    for listing in (first, resumed):
        assert "0x" not in listing                    # no addresses: two runs give the same listing
        _assert_labels_resolve(listing)
    text = str(report)
    assert "Guards, checked before each reuse:" in text and "Replacement code:" in text
    assert "def guard_Scaled_forward(self, x, scale):" in text


def _assert_labels_resolve(listing: str):
    defined = set(re.findall(r"^(L\d+):", listing, re.M))
    used = set(re.findall(r"-> (L\d+)", listing)) | set(re.findall(r"#   (L\d+) to", listing))
    assert used and used <= defined, (used, defined)


def looping(xs):
    total = 0
    for x in xs:
        try:
            total = total + 1 / x
        except ZeroDivisionError:
            continue
    return total


def test_the_listing_of_any_code_keeps_every_instruction_and_resolves_jumps_to_labels():
    from dynamo_lite.code_listing import listing
    text = listing(looping.__code__)
    _assert_labels_resolve(text)
    opnames = [line.split()[1] if re.match(r"L\d+:", line) else line.split()[0]
               for line in text.splitlines() if not line.startswith("#")]
    assert opnames == [i.opname for i in dis.get_instructions(looping.__code__)]
    assert "exception table" in text and "# line 4:" not in text           # lines are the file's own
    assert f"# line {looping.__code__.co_firstlineno + 4}: total = total + 1 / x" in text


def scaled(x, n):
    print("scaled by", n)
    return x * n


def calls_scaled_twice(x):
    a = scaled(x, 2)
    b = scaled(x, 3)
    c = scaled(torch.ones(4), 3)
    return a + b, c


def test_recapture_history_names_the_guard_that_failed_with_old_and_new_value(capsys):
    x = torch.ones(3)
    expected = calls_scaled_twice(x)
    eager_out = capsys.readouterr().out
    report = dl.explain(calls_scaled_twice)(x)
    assert capsys.readouterr().out == eager_out
    torch.testing.assert_close(report.output, expected)
    history = report.history()
    captures = history["scaled"]          # it breaks before reading x: only n is guarded
    assert len(captures) == 2 and captures[0].recapture is None
    assert captures[1].recapture == {"guard": "type(n) is int and n == 2", "old": "2", "new": "3",
                                     "reason": "n changed: 2 -> 3"}
    line = scaled.__code__.co_firstlineno + 1
    resumed = history[f"scaled.<resume at line {line}>"]      # after the print, x is read
    assert [c.recapture["guard"] for c in resumed[1:]] == ["type(n) is int and n == 2", resumed[2].recapture["guard"]]
    tensor = resumed[2].recapture
    assert tensor["guard"].startswith("type(x) is torch.Tensor and x.dtype is torch.float32")
    assert tensor["old"] == "Tensor(float32, cpu, size=[3], stride=[1])"
    assert tensor["new"] == "Tensor(float32, cpu, size=[4], stride=[1])"
    text = str(report)
    assert "Recapture history" in text and "type(n) is int and n == 2" in text
    assert "size=[4]" in text


def by_mode(x, mode):
    print("mode", mode)
    return x + 1 if mode.startswith("fast") else x - 1


def test_a_long_guard_is_wrapped_at_its_own_ands_only_and_still_checks_the_same():
    from dynamo_lite.fallback.records import RECORDS
    mode = "fast and (loose) ' and \" quoted and long enough to wrap the guard line"
    captured = dl.capture(by_mode)
    torch.testing.assert_close(captured(torch.ones(2), mode), by_mode(torch.ones(2), mode))
    record = next(r for r in RECORDS if r.qualname == "by_mode" and r.guards is not None)
    source, names = record.guards.readable("by_mode")
    assert f"mode == {mode!r}" in source                    # the string's own " and "s are not split
    namespace = {"torch": torch, "math": math, **names}
    exec(compile(source, "<shown guards>", "exec"), namespace)
    shown = namespace["guard_by_mode"]
    for args in [(torch.ones(2), mode), (torch.ones(2), mode + "!"), (torch.ones(2), 3)]:
        assert shown(*args) == record.guards.check(by_mode, *args)
    assert shown(torch.ones(2), mode) is True


def test_explain_groups_breaks_by_kind():
    def f(x):
        x = x + 1
        print("a")
        x = x * 2
        print("b")
        try:
            int("no")
        except ValueError:
            print("handling")         # runs that frame part eagerly (DL022)
        return x

    report = dl.explain(f)(torch.ones(2))
    kinds = {kind: (resumed, eager) for kind, resumed, eager in report.by_kind()}
    assert kinds["DL005"][0] >= 2 and kinds["DL022"] == (0, 1), kinds
    text = str(report)
    assert "by kind: " in text and "DL022 break-in-handler (1 ran eagerly)" in text, text[:400]


def test_arguments_given_to_explain_itself_get_a_clear_error():
    def fn(x):
        return x + 1
    try:
        dl.explain(fn, torch.ones(2))
    except TypeError as e:
        assert "dynamo_lite.explain(fn)(*args, **kwargs)" in str(e)
    else:
        raise AssertionError("explain(fn, x) did not raise")
    assert torch.equal(dl.explain(fn)(torch.ones(2)).output, torch.full((2,), 2.0))
