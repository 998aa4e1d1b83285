"""DYNAMO_LITE_LOG=graph_breaks,recompiles,guards,graph,bytecode: what each artifact prints, through
the standard `logging` module (logger "dynamo_lite"), and that asking for logs prints them
without the application configuring logging first."""
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite import config

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import torch, dynamo_lite as dl

    def f(x):
        y = x + 1
        print("in the middle")
        return y * 2

    g = dl.capture(f)
    g(torch.ones(2))
    g(torch.ones(3, 2))
""")


def _run(log: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DYNAMO_LITE_LOG=log, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def test_environment_variable_prints_breaks_recompiles_guards_graphs_and_bytecode():
    proc = _run("graph_breaks,recompiles,guards,graph,bytecode")
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "graph break in f" in err and "[DL005 print-or-log]" in err
    assert "recapturing f" in err and "rank: expected 1, got 2" in err
    assert "replacement bytecode for f" in err and "CALL" in err
    assert "guards for f" in err and "x is a Tensor(dtype=torch.float32" in err
    assert "graph for f" in err and "def forward" in err
    assert proc.stdout.count("in the middle") == 2        # the user's print is untouched


def test_unknown_artifact_warns_and_names_the_choices():
    proc = _run("graph_brakes")
    assert proc.returncode == 0
    assert "unknown artifacts ['graph_brakes']" in proc.stderr and "graph_breaks" in proc.stderr
    assert "graph break in f" not in proc.stderr


def test_setting_config_log_at_run_time(caplog):
    def f(x):
        y = x.sin()
        dl.graph_break()
        return y.cos()
    saved = config.log
    try:
        config.log = frozenset({"graph_breaks"})
        with caplog.at_level(logging.INFO, logger="dynamo_lite"):
            torch.testing.assert_close(dl.capture(f)(torch.ones(2)), f(torch.ones(2)))
    finally:
        config.log = saved
    assert any("[DL007 explicit-graph-break]" in r.getMessage() for r in caplog.records)


def test_config_log_rejects_unknown_artifacts():
    with pytest.raises(ValueError, match="unknown log artifacts"):
        config.log = frozenset({"nope"})
