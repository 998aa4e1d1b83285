"""`dynamo-lite report --ray` end to end on Ray's local cluster: the same rows as a `--jobs` run, a crash
or a hang still one failed row, `--json` written as models finish and `--resume` continuing it; and
without Ray, a message and exit status 2. The Ray runs are skipped where Ray is not installed (it is
an optional extra: requirements/ray.txt)."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed (pip install -r requirements/ray.txt -c requirements/ci.txt)")

USER_MODELS = textwrap.dedent('''
    import os, time
    import torch
    from dynamo_lite.report.registry import model

    @model("ray_ok")
    def build_ok():
        return torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)

    @model("ray_crash")
    def build_crash():
        os._exit(3)                    # the model's process dies while building it

    @model("ray_hang")
    def build_hang():
        class Hang(torch.nn.Module):
            def forward(self, x):
                time.sleep(600)
                return x
        return Hang(), (torch.randn(2),)
''')


def _env() -> dict:
    return dict(os.environ, COLUMNS="160",
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def _cli(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dynamo_lite.cli", *args], env=_env(), capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _comparable(row: dict) -> dict:
    """A row without what changes from run to run (timings)."""
    timing = {"eager_s", "eager_steady_s", "first_call_s", "steady_call_s", "max_abs_diff"}
    out = {k: v for k, v in row.items() if k not in timing}
    for engine in ("dl", "torch"):
        if out.get(engine):
            out[engine] = {k: v for k, v in out[engine].items() if k not in timing}
    return out


@needs_ray
def test_ray_gives_the_rows_of_a_jobs_run(tmp_path):
    rows = {}
    for how in (["--jobs", "2"], ["--ray"]):          # --ray alone: one model per CPU of the cluster
        out = tmp_path / f"{how[0]}.json"
        proc = _cli("report", "-k", "print", *how, "--json", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows[how[0]] = [_comparable(r) for r in json.loads(out.read_text())["models"]]
        if how == ["--ray"]:
            assert "one per CPU of the cluster" in proc.stdout, proc.stdout[-500:]
    assert [r["name"] for r in rows["--ray"]] == ["print_in_forward", "subclass_print_super", "function_print_item"]
    assert all(r["status"] == "ok" and r["dl"]["graphs"] >= 2 for r in rows["--ray"])
    assert rows["--ray"] == rows["--jobs"]


@needs_ray
def test_ray_run_isolates_a_crash_and_a_hang_writes_as_it_goes_and_resumes(tmp_path):
    models = tmp_path / "user_models.py"
    models.write_text(USER_MODELS)
    out = tmp_path / "out.json"
    first = _cli("report", str(models), "-k", "ray_ok", "--ray", "--json", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    ok_row = json.loads(out.read_text())["models"][0]
    assert ok_row["name"] == "ray_ok" and ok_row["status"] == "ok"

    # a relative path: the workers run elsewhere, and must find the file all the same
    relative = os.path.relpath(models, ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "dynamo_lite.cli", "report", relative, "--ray", "--jobs", "2",
                             "--timeout", "8", "--resume", str(out)], env=_env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []                           # the file as the run rewrites it: one row more each time
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        data = json.loads(out.read_text())
        if data.get("partial") and len(data["models"]) not in seen:
            seen.append(len(data["models"]))
        time.sleep(0.2)
    stdout, stderr = proc.communicate(timeout=max(1, deadline - time.monotonic()))
    assert proc.returncode == 0, stdout + stderr
    assert "1 model(s) done, 2 to run" in stdout
    assert 2 in seen, f"no partial file with the crash's row while the hang ran: {seen}"
    final = json.loads(out.read_text())
    rows = {r["name"]: r for r in final["models"]}
    assert "partial" not in final and list(rows) == ["ray_ok", "ray_crash", "ray_hang"]
    assert rows["ray_ok"] == ok_row                              # kept as it was, not run again
    assert rows["ray_crash"]["status"] == "CRASH" and "exit code 3" in rows["ray_crash"]["detail"]
    assert rows["ray_hang"]["status"] == "timeout"
    assert "ray_crash" in stdout and "Traceback" not in stdout + stderr


def test_a_model_file_missing_on_a_node_is_a_failed_row_that_says_so():
    from dynamo_lite.report import ReportOptions
    from dynamo_lite.report.ray_runner import _on_node

    def never(name, options):
        raise AssertionError("the model was run without its file")

    row = _on_node(never, "m", ReportOptions(paths=("/nowhere/models.py",)))
    assert row["name"] == "m" and row["status"] == "CRASH"
    assert "/nowhere/models.py not found on Ray node" in row["detail"] and "same path" in row["detail"]


def test_ray_not_installed_is_a_message_and_exit_status_2():
    hide_ray = ("import sys; sys.modules['ray'] = None; from dynamo_lite.cli import main; "
                "sys.exit(main(['report', '-k', 'print_in_forward', '--ray']))")
    proc = subprocess.run([sys.executable, "-c", hide_ray], env=_env(), capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pip install -r requirements/ray.txt" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
