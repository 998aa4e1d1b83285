"""`dynamo-lite report` and `dynamo-lite explain` end to end, as a user runs them: a process per
model, JSON output, exit status (non-zero only for wrong results), a crash or a hang as one
failed row, a missing optional dependency as a skip."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.once     # CI runs these on one Python version (conftest.py)

ROOT = Path(__file__).resolve().parents[1]

USER_MODELS = textwrap.dedent('''
    import os, time
    import torch
    import dynamo_lite as dl
    from dynamo_lite.report.registry import model, require

    def wrong_backend(gm, example_inputs):
        def run(*args):
            return tuple(o + 1 if isinstance(o, torch.Tensor) else o for o in gm(*args))
        return run

    if "wrong" not in dl.list_backends():
        dl.register_backend("wrong", wrong_backend)

    @model("user_ok")
    def build_ok():
        return torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)

    @model("user_crash")
    def build_crash():
        class Crash(torch.nn.Module):
            def forward(self, x):
                os._exit(3)            # the model's process dies
                return x
        return Crash(), (torch.randn(2),)

    @model("user_hang")
    def build_hang():
        class Hang(torch.nn.Module):
            def forward(self, x):
                time.sleep(600)
                return x
        return Hang(), (torch.randn(2),)

    @model("user_needs_missing_package", requires="package_that_is_not_installed")
    def build_missing():
        require("package_that_is_not_installed")
''')


def _cli(*args, timeout=600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), COLUMNS="160")
    return subprocess.run([sys.executable, "-m", "dynamo_lite.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_report_on_a_bundled_model_writes_json(tmp_path):
    out = tmp_path / "report.json"
    proc = _cli("report", "-k", "print_in_forward", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    rows = {r["name"]: r for r in data["models"]}
    assert set(rows) == {"print_in_forward"}
    row = rows["print_in_forward"]
    assert row["status"] == "ok" and row["dl"]["graphs"] == 2 and row["dl"]["breaks"] == 1
    assert "print_in_forward" in proc.stdout and "DL005" in proc.stdout     # the row and the break-kind table


def test_report_isolates_crashes_hangs_and_skips(tmp_path):
    models = tmp_path / "user_models.py"
    models.write_text(USER_MODELS)
    out = tmp_path / "report.json"
    proc = _cli("report", str(models), "--timeout", "20", "--jobs", "2", "--json", str(out))
    rows = {r["name"]: r for r in json.loads(out.read_text())["models"]}
    assert rows["user_ok"]["status"] == "ok"
    assert rows["user_crash"]["status"] not in ("ok", "WRONG") and "died" in rows["user_crash"]["detail"]
    assert rows["user_hang"]["status"] == "timeout"
    assert rows["user_needs_missing_package"]["status"] == "skipped"
    assert "package_that_is_not_installed" in rows["user_needs_missing_package"]["detail"]
    assert proc.returncode == 0, "no wrong results: crashes, hangs and skips do not fail the report"


def test_report_exit_status_is_non_zero_on_a_wrong_result(tmp_path):
    models = tmp_path / "user_models.py"
    models.write_text(USER_MODELS)
    proc = _cli("report", str(models), "-k", "user_ok", "--backend", "wrong")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "WRONG" in proc.stdout


def test_explain_command_prints_breaks_with_source_and_hint(tmp_path):
    out = tmp_path / "explain.json"
    proc = _cli("explain", "print_in_forward", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "[DL005 print-or-log]" in proc.stdout and "fix:" in proc.stdout and "print(" in proc.stdout
    data = json.loads(out.read_text())
    assert data["graph_count"] == 2 and data["breaks"][0]["kind_id"] == "DL005"


def test_explain_command_unknown_model_suggests_names():
    proc = _cli("explain", "print_in")
    assert proc.returncode == 2 and "did you mean print_in_forward" in proc.stderr


def _row(name, dl_graphs, torch_graphs, status="ok"):
    engine = {"status": status, "graphs": dl_graphs, "breaks": 0, "eager_frames": 0, "events": [],
              "first_call_s": 0.2, "steady_call_s": 0.001}
    return {"name": name, "status": "ok", "eager_steady_s": 0.001, "dl": engine,
            "torch": {**engine, "graphs": torch_graphs, "first_call_s": 0.4}}


def test_summary_names_models_with_more_graphs_and_when_torchdynamo_captured_nothing():
    from dynamo_lite.report import summary
    info = summary([_row("whole", 1, 1), _row("fewer", 1, 3), _row("more", 3, 2), _row("nothing", 1, 0)],
                   compare="torch")
    assert info["dl_graphs"] == 6 and info["torch_graphs"] == 6
    assert info["models_with_fewer_or_equal_graphs"] == 2
    assert info["models_with_more_graphs"] == [
        {"name": "more", "dl": 3, "torch": 2, "torch_captured_nothing": False},
        {"name": "nothing", "dl": 1, "torch": 0, "torch_captured_nothing": True}]
    assert info["capture_ratio_geomean"] == pytest.approx(0.5)


@pytest.fixture(scope="module")
def two_model_report(tmp_path_factory):
    """A real `report --json` of two bundled models (the file format `report diff` reads)."""
    out = tmp_path_factory.mktemp("diff") / "old.json"
    proc = _cli("report", "-k", "print_in_forward", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    twin = json.loads(json.dumps(data["models"][0]))
    twin["name"] = "print_in_forward_twin"
    data["models"].append(twin)
    out.write_text(json.dumps(data))
    return out


def _diff_against(tmp_path, old_path, edit) -> subprocess.CompletedProcess:
    data = json.loads(old_path.read_text())
    rows = {r["name"]: r for r in data["models"]}
    edit(rows)
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    return _cli("report", "diff", str(old_path), str(new))


def test_report_diff_of_a_run_with_itself_is_clean(two_model_report):
    proc = _cli("report", "diff", str(two_model_report), str(two_model_report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 models in both runs; 0 regression(s), 0 other change(s)" in proc.stdout


def test_report_diff_exits_1_on_more_graphs_or_a_wrong_result(tmp_path, two_model_report):
    def worse(rows):
        rows["print_in_forward"]["dl"]["graphs"] += 1
        rows["print_in_forward_twin"]["dl"]["status"] = "WRONG"

    proc = _diff_against(tmp_path, two_model_report, worse)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regressions (2):" in proc.stdout
    assert "graphs 2 -> 3" in proc.stdout and "ok -> WRONG" in proc.stdout


def test_report_diff_lists_improvements_and_slowdowns(tmp_path, two_model_report):
    def mixed(rows):
        rows["print_in_forward"]["dl"]["breaks"] = 0             # better: not a regression
        twin = rows["print_in_forward_twin"]
        # 10x (or more) its time relative to the same eager time: whatever the measured ratio was
        # (a loaded machine makes it anything), a growth well past the 1.5x threshold
        twin["dl"]["steady_call_s"] = max(twin["dl"]["steady_call_s"], 1e-3) * 10

    proc = _diff_against(tmp_path, two_model_report, mixed)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "graph breaks 1 -> 0" in proc.stdout.split("other changes")[1]
    assert "steady-state" in proc.stdout.split("other changes")[0]
    proc = _diff_against(tmp_path, two_model_report, lambda rows: rows["print_in_forward"]["dl"].update(breaks=0))
    assert proc.returncode == 0 and "1 other change(s)" in proc.stdout


def test_report_diff_rejects_a_file_that_is_not_a_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    proc = _cli("report", "diff", str(bad), str(bad))
    assert proc.returncode == 2 and "not a `dynamo-lite report --json` file" in proc.stderr


RESUMABLE_MODELS = textwrap.dedent('''
    import os, time
    import torch
    from dynamo_lite.report.registry import model

    @model("user_resume_first")
    def build_first():
        return torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)

    @model("user_resume_second")
    def build_second():
        class MaybeHang(torch.nn.Module):
            def forward(self, x):
                if os.environ.get("DL_TEST_HANG") == "1":
                    time.sleep(600)          # the run is killed here
                return x * 2
        return MaybeHang(), (torch.randn(2),)
''')


def test_report_writes_each_result_and_resumes_a_killed_run(tmp_path):
    models = tmp_path / "resumable.py"
    models.write_text(RESUMABLE_MODELS)
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               COLUMNS="160", DL_TEST_HANG="1")
    proc = subprocess.Popen([sys.executable, "-m", "dynamo_lite.cli", "report", str(models), "--json", str(out)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and "user_resume_first" in out.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "no partial result written"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)           # the run dies while the second model hangs
        proc.wait()
    partial = json.loads(out.read_text())
    assert partial["partial"] is True and [r["name"] for r in partial["models"]] == ["user_resume_first"]
    first = partial["models"][0]

    resumed = _cli("report", str(models), "--resume", str(out))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 model(s) done, 1 to run" in resumed.stdout
    final = json.loads(out.read_text())
    rows = {r["name"]: r for r in final["models"]}
    assert "partial" not in final and set(rows) == {"user_resume_first", "user_resume_second"}
    assert rows["user_resume_first"] == first                 # kept as it was, not run again
    assert rows["user_resume_second"]["status"] == "ok" and rows["user_resume_second"]["dl"]["status"] == "ok"


def test_report_refuses_to_resume_a_run_made_with_other_engines(tmp_path, two_model_report):
    proc = _cli("report", "-k", "print_in_forward", "--resume", str(two_model_report), "--compare", "torch")
    assert proc.returncode == 2 and "cannot be continued" in proc.stdout


KIND_MODELS = textwrap.dedent('''
    import torch
    from dynamo_lite.report.registry import model

    class Handles(torch.nn.Module):
        def forward(self, x):
            try:
                x = x + 1
                int("not a number")
            except ValueError:
                print("handling")          # a break while an exception is handled: this frame runs eagerly
                x = x * 2
            return x

    class Prints(torch.nn.Module):
        def forward(self, x):
            for i in range(3):
                x = x + i
                print(i)                   # a break inside a loop: resumes
            return x

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.handles, self.prints = Handles(), Prints()

        def forward(self, x):
            return self.prints(self.handles(x))

    @model("kinds_everywhere")
    def build():
        return Both(), (torch.randn(2, 3),)
''')


def test_every_reason_in_the_report_has_a_registry_kind(tmp_path):
    """No free-text reason reaches the report: each break and each frame run eagerly names a kind of
    the registry (a frame run eagerly also the kind of why it could not resume), and the summary
    counts eager frames under that kind."""
    from dynamo_lite import breaks
    models = tmp_path / "kind_models.py"
    models.write_text(KIND_MODELS)
    out = tmp_path / "report.json"
    proc = _cli("report", str(models), "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    events = [e for r in data["models"] for e in r["dl"]["events"]]
    assert {e["status"] for e in events} >= {"break", "fallback"}, events
    for e in events:
        assert e["kind_id"] in breaks.KINDS, e
        assert breaks.event_kind(e) in breaks.KINDS, e
    eager = [e for e in events if e["status"] == "fallback"]
    assert eager and all(e["fallback_kind_id"] == "DL022" for e in eager), eager
    assert data["summary"]["break_kinds"].get("DL022", 0) >= 1, data["summary"]["break_kinds"]
