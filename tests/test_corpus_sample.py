"""CI's corpus run: a fixed sample of every suite (tests/data/corpus_sample.json, chosen from a full
report by `dynamo_lite_corpus.sample`) captured by dynamo_lite, each model in its own process as
`dynamo-lite report` runs it, and checked against the stored figures: the captured results equal
eager's, the graphs and breaks are no more than the stored dynamo_lite figures, and no more graphs
than TorchDynamo's wherever that held in the full run the figures come from (CI does not run
TorchDynamo; the models where we had more graphs are known gaps, kept from getting worse).

Models whose libraries are not installed here are skipped, unless DL_CORPUS_SAMPLE_REQUIRED=1
(CI sets it where it installs the corpus extras), which makes a skipped model a failure. The
counts are checked on the Python version the figures were made on (bytecode differs between
versions, and so can graph counts); on another version only the results are.
"""
import os
import sys
from pathlib import Path

import pytest

from dynamo_lite.report import ReportOptions, _run_all, registry
from dynamo_lite_corpus import sample

ROOT = Path(__file__).resolve().parents[1]
DATA = sample.load(str(ROOT / sample.DATA))
STORED = DATA["models"]
SAME_PYTHON = DATA["python"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
REQUIRED = os.environ.get("DL_CORPUS_SAMPLE_REQUIRED") == "1"


def test_sample_covers_every_suite_with_at_least_60_models():
    suites = {figures["suite"] for figures in STORED.values()}
    assert len(STORED) >= 60
    assert suites == set(registry.SUITES), f"suites missing from the sample: {set(registry.SUITES) - suites}"


@pytest.fixture(scope="module")
def rows():
    entries = [e for e in registry.all_models(suites=tuple(registry.SUITES)) if e.name in STORED]
    runnable = [e for e in entries if not e.skip_reason()]
    options = ReportOptions(jobs=2, suites=tuple(registry.SUITES), timeout=300.0)
    found = {row["name"]: row for row in _run_all(runnable, options)} if runnable else {}
    for entry in entries:
        found.setdefault(entry.name, {"name": entry.name, "status": "skipped", "detail": entry.skip_reason()})
    return found


@pytest.mark.parametrize("name", sorted(STORED))
def test_sample_model(rows, name):
    stored = STORED[name]
    row = rows.get(name)
    if row is None:
        problem = registry.suite_problems.get(stored["suite"], "not listed by its suite")
        if REQUIRED:
            pytest.fail(f"{name}: {problem}")
        pytest.skip(f"{name}: {problem}")
    if row["status"] == "skipped":
        if REQUIRED:
            pytest.fail(f"{name} skipped: {row['detail']}")
        pytest.skip(row["detail"])
    assert row["status"] == "ok", f"{name}: {row['status']} {row.get('detail', '')}"
    dl = row["dl"]
    assert dl["status"] == "ok"
    if not SAME_PYTHON:
        return
    assert dl["graphs"] <= stored["dl_graphs"], (
        f"{name}: {dl['graphs']} graphs, stored {stored['dl_graphs']}: {dl['events']}")
    assert dl["breaks"] <= stored["dl_breaks"], f"{name}: {dl['breaks']} breaks: {dl['events']}"
    assert dl["eager_frames"] <= stored["dl_eager_frames"], f"{name}: frames run eagerly: {dl['events']}"
    # where we had no more graphs than TorchDynamo (which captured something), we must stay there;
    # where we had more (a known gap, listed by the full report), never more than then
    if 0 < stored["torch_graphs"] and stored["dl_graphs"] <= stored["torch_graphs"]:
        assert dl["graphs"] <= stored["torch_graphs"], f"{name}: {dl['graphs']} graphs vs TorchDynamo's " \
                                                       f"{stored['torch_graphs']}"
