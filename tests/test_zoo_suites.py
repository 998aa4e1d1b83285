"""The zoo suites (dynamo_lite_corpus.zoo_timm, zoo_torchvision, zoo_diffusers) and the census.

- listing is complete (every timm name, every torchvision model, every exported diffusers ModelMixin
  class), names are unique, and listing builds no module;
- a sample of each suite builds and runs under dynamo_lite with the same results as eager;
- a model over the parameter limit is a skipped row whose reason says how to raise the limit;
- with a library's import blocked, its suite lists nothing and `suite_problems` says why;
- the census runs a model in its own process and groups skip reasons.

Tests that need a library skip when it is not installed; the blocked-import test runs everywhere.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dynamo_lite.report import registry

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = {"timm": "timm", "torchvision": "torchvision", "diffusers": "diffusers"}
INSTALLED = [s for s, package in LIBRARY.items() if importlib.util.find_spec(package) is not None]
ENV = {k: v for k, v in os.environ.items() if k != "DL_ZOO_MAX_PARAMS"} | {"HF_HUB_OFFLINE": "1"}


def _needs(suite: str):
    return pytest.mark.skipif(suite not in INSTALLED, reason=f"{LIBRARY[suite]} is not installed")


def _python(script: str, timeout: float = 240) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.skipif(not INSTALLED, reason="no zoo library installed")
def test_listing_is_complete_unique_and_builds_nothing():
    """Each suite lists exactly what its library lists, and no model is built while listing: no module with
    parameters is constructed (libraries make a few parameterless activation modules when imported)."""
    out = _python("""
        import inspect, json, warnings
        warnings.simplefilter("ignore")
        import torch.nn as nn
        created = []
        original_init = nn.Module.__init__
        def counting_init(self, *args, **kwargs):
            created.append(self)
            original_init(self, *args, **kwargs)
        nn.Module.__init__ = counting_init
        from dynamo_lite.report import registry
        suites = %r
        listed = {s: [e.name for e in registry.all_models(suites=(s,))] for s in suites}
        nn.Module.__init__ = original_init
        created = [type(m).__name__ for m in created if any(True for _ in m.parameters())]
        expected = {}
        if "timm" in suites:
            import timm
            expected["timm"] = ["timm." + n for n in timm.list_models()]
        if "torchvision" in suites:
            import torchvision
            expected["torchvision"] = ["tv." + n for n in torchvision.models.list_models()]
        if "diffusers" in suites:
            import diffusers
            names = []
            for n in dir(diffusers):
                try:
                    value = getattr(diffusers, n)
                except Exception:
                    continue
                if inspect.isclass(value) and issubclass(value, diffusers.ModelMixin) and value is not diffusers.ModelMixin:
                    names.append("diffusers." + n)
            expected["diffusers"] = names
        tags = {e.name: list(e.tags) for s in suites for e in registry.all_models(suites=(s,))}
        print(json.dumps({"listed": listed, "expected": expected, "created": created, "tags": tags}))
    """ % (tuple(INSTALLED),))
    result = json.loads(out.strip().splitlines()[-1])
    assert result["created"] == [], f"listing built models: {result['created'][:10]}"
    for suite, names in result["listed"].items():
        assert len(names) == len(set(names)), suite
        assert sorted(names) == sorted(result["expected"][suite]), suite
        assert all({LIBRARY[suite], "zoo"} <= set(result["tags"][n]) for n in names), suite
    if "timm" in result["listed"]:
        assert len(result["listed"]["timm"]) > 1000
    if "torchvision" in result["listed"]:
        families = {t for n in result["listed"]["torchvision"] for t in result["tags"][n]}
        assert {"classification", "segmentation", "detection", "video", "optical_flow"} <= families
    if "diffusers" in result["listed"]:
        assert {"diffusers.UNet2DConditionModel", "diffusers.AutoencoderKL",
                "diffusers.FluxTransformer2DModel"} <= set(result["listed"]["diffusers"])


SAMPLE = [("timm", "timm.resnet10t"), ("timm", "timm.vit_tiny_patch16_224"),
          ("torchvision", "tv.squeezenet1_1"), ("torchvision", "tv.lraspp_mobilenet_v3_large"),
          ("diffusers", "diffusers.PixArtTransformer2DModel"), ("diffusers", "diffusers.FluxTransformer2DModel")]


@pytest.mark.parametrize("suite,name", [pytest.param(s, n, marks=_needs(s)) for s, n in SAMPLE],
                         ids=[n for _, n in SAMPLE])
def test_sample_builds_small_and_captures(suite, name):
    from dynamo_lite.report.survey import survey_model
    entry = registry.get(name, (suite,))
    example = entry.build()
    images = [a for a in example.args if hasattr(a, "shape")] + [v for v in example.kwargs.values()
                                                               if hasattr(v, "shape")]
    assert images and images[0].shape[0] == 2
    if suite != "diffusers":            # the smallest size found, not the 224 pixels of the config
        assert images[0].shape[-1] < 224
    result = survey_model(entry, timeout=120)
    assert result.status == "ok", (result.status, result.detail)
    assert result.dl.graphs >= 1


@_needs("timm")
def test_a_model_over_the_limit_is_skipped_with_the_reason(monkeypatch):
    from dynamo_lite.report.survey import survey_model
    monkeypatch.setenv("DL_ZOO_MAX_PARAMS", "5")           # millions: resnet18 has 11.7M
    entry = registry.get("timm.resnet18", ("timm",))
    result = survey_model(entry)
    assert result.status == "skipped"
    assert "11.7M parameters" in result.detail and "limit of 5M" in result.detail
    assert "DL_ZOO_MAX_PARAMS" in result.detail


def test_a_blocked_library_empties_its_suite_and_says_why():
    """Listing never needs the library: blocked (or absent), the suite is empty and suite_problems has the reason."""
    out = _python("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("timm", "torchvision", "diffusers"):
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, Block())
        from dynamo_lite.report import registry
        for suite in ("timm", "torchvision", "diffusers"):
            assert registry.all_models(suites=(suite,)) == [], suite
            assert suite in registry.suite_problems[suite] and "not installed" in registry.suite_problems[suite], \\
                registry.suite_problems
        print("ok")
    """, timeout=120)
    assert out.strip().endswith("ok")


def test_census_groups_reasons_with_numbers_masked():
    from dynamo_lite_corpus.census import Row, reason_group, summary_lines
    assert reason_group("25.6M parameters, over the limit of 20M") == reason_group("31.0M parameters, over the limit of 20M")
    rows = [Row("a", "timm", "built", eager_s=0.01), Row("b", "timm", "skipped", "25.6M parameters, over"),
            Row("c", "timm", "skipped", "31.0M parameters, over"), Row("d", "timm", "failed", "ValueError: x", "call")]
    text = "\n".join(summary_lines(rows, ("timm",)))
    assert "listed 4, built 1, skipped 2, failed 1" in text
    assert "2  #M parameters, over" in text and "call: ValueError: x" in text


@_needs("timm")
def test_census_runs_each_model_in_its_own_process(tmp_path):
    out_file = tmp_path / "census.json"
    out = _python(f"""
        import os
        os.environ["DL_ZOO_MAX_PARAMS"] = "6"                   # resnet10t has 5.4M parameters, resnet14t 10.1M
        from dynamo_lite_corpus import census
        census.main(["--suite", "timm", "-k", "timm.resnet1[04]t", "--jobs", "2", "--json", {str(out_file)!r}])
    """)
    rows = {r["name"]: r for r in json.loads(out_file.read_text())["rows"]}
    assert set(rows) == {"timm.resnet10t", "timm.resnet14t"}
    assert rows["timm.resnet10t"]["status"] == "built" and rows["timm.resnet10t"]["eager_s"] > 0
    assert rows["timm.resnet14t"]["status"] == "skipped" and "10.1M parameters" in rows["timm.resnet14t"]["detail"]
    assert "suite timm: listed 2, built 1, skipped 1, failed 0" in out
