"""The model corpus (corpus/): registry sanity, deterministic builders, optional dependencies.

Fast by default: every built-in model is built twice and run eagerly (no capture). Set
``DL_CORPUS_SURVEY=1`` for the end-to-end run: every model (HF ones and the real libraries' too, when
installed) under dynamo_lite, compared with eager by `dynamo_lite.report.survey.survey_model`.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from dynamo_lite.report.compare import Mismatch, compare
from dynamo_lite.report.registry import MissingDependency, ModelEntry, all_models, get, model

# Models warn on purpose (logging_in_forward) and libraries warn about deprecations: not our business here.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = all_models()
OWN = [e for e in ENTRIES if e.requires is None]
HF = [e for e in ENTRIES if "hf" in e.tags]
HAVE_TRANSFORMERS = bool(HF) and HF[0].available()
LIB = [e for e in ENTRIES if "lib" in e.tags]          # dynamo_lite_corpus/libraries.py: the installed libraries
LIB_PACKAGES = ("transformers", "einops", "einx", "x_transformers", "diffusers", "timm", "torchvision")


def _run(entry: ModelEntry):
    example = entry.build()
    torch.manual_seed(1234)                 # models that draw random numbers agree given the same seed
    return example(), example


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

def test_corpus_size_and_unique_names():
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names))
    assert len(OWN) >= 20, len(OWN)
    assert len(HF) >= 25, len(HF)


def test_duplicate_registration_is_rejected():
    with pytest.raises(ValueError, match="registered twice"):
        model(OWN[0].name)(lambda: (torch.relu, (torch.ones(1),)))


def test_entries_are_described():
    for e in ENTRIES:
        assert e.doc, f"{e.name}: builder needs a docstring"
        assert e.tags, e.name
        if "breaks" in e.tags:
            assert e.breaks, f"{e.name}: tag the kind of break, e.g. 'break:print'"
        if e.breaks:
            assert "breaks" in e.tags
    assert all(e.requires == "transformers" for e in HF)


def test_filtering():
    assert [e.name for e in all_models("nanogpt")] == ["nanogpt", "nanogpt_manual_attn_loss"]
    assert all("breaks" in e.tags for e in all_models(tags=["breaks"]))
    assert {e.name for e in all_models("hf_*")} == {e.name for e in HF}
    assert get("unet").name == "unet"


# --------------------------------------------------------------------------------------------
# builders: deterministic, tiny, runnable
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("entry", OWN, ids=[e.name for e in OWN])
def test_builder_is_deterministic(entry, capsys):
    out1, ex1 = _run(entry)
    out2, ex2 = _run(entry)
    compare(out1, out2, rtol=0, atol=0)
    if isinstance(ex1.model, torch.nn.Module):
        assert not ex1.model.training, f"{entry.name}: build the model in eval mode"
        compare(ex1.model.state_dict(), ex2.model.state_dict(), rtol=0, atol=0)


@pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed")
@pytest.mark.parametrize("entry", HF, ids=[e.name for e in HF])
def test_hf_builder_runs_offline(entry, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out, example = _run(entry)
    assert not example.model.training
    assert isinstance(out, dict) and out, f"{entry.name}: expected a ModelOutput"


def test_library_entries_are_registered():
    assert len(LIB) >= 40, len(LIB)
    assert all(e.requires in LIB_PACKAGES and e.name.startswith("lib_") for e in LIB)
    for tag in ("hf-lib", "generate", "einops", "einx", "xtransformers", "diffusers", "timm", "torchvision"):
        assert any(tag in e.tags for e in LIB), tag


@pytest.mark.parametrize("entry", LIB, ids=[e.name for e in LIB])
def test_library_builder_runs_offline(entry, monkeypatch):
    """Built from the installed library with no download and run eagerly; skipped when it is not installed."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        out, example = _run(entry)
    except MissingDependency as exc:
        pytest.skip(str(exc))
    if isinstance(example.model, torch.nn.Module):
        assert not example.model.training, f"{entry.name}: build the model in eval mode"
    assert out is not None


def test_missing_dependency_is_a_skip_not_a_crash():
    from dynamo_lite.report.survey import survey_model

    entry = ModelEntry("needs_missing_pkg", ("test",), lambda: None, requires="no_such_package_for_dl_tests")
    assert "no_such_package_for_dl_tests" in entry.skip_reason()
    with pytest.raises(MissingDependency):
        entry.build()
    result = survey_model(entry)
    assert result.status == "skipped" and "not installed" in result.detail


def test_hf_models_skip_cleanly_without_transformers():
    """With `import transformers` blocked, the corpus still lists HF models and reports them skipped."""
    script = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "transformers" or name.startswith("transformers."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, Block())
        from dynamo_lite.report.registry import MissingDependency, all_models
        from dynamo_lite.report.survey import survey_model
        hf = [e for e in all_models() if "hf" in e.tags]
        assert len(hf) >= 25 and all(e.skip_reason() for e in hf)
        try:
            hf[0].build()
        except MissingDependency as exc:
            assert exc.package == "transformers", exc
        else:
            raise AssertionError("built without transformers")
        assert survey_model(hf[0]).status == "skipped"
        print("ok", len(hf))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_library_models_skip_cleanly_when_missing_or_broken():
    """With the libraries' imports blocked the corpus still lists the "lib" models and reports them skipped;
    a library that is installed but fails to import (torchvision 0.28's C ops next to a CPU torch) is a
    skip with the import error as the reason, not a failed model."""
    script = textwrap.dedent("""
        import importlib.abc, importlib.machinery, sys
        BLOCKED = %r
        class Broken(importlib.abc.Loader):
            def create_module(self, spec):
                return None
            def exec_module(self, module):
                raise RuntimeError("operator torchvision::nms does not exist")
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                top = name.split(".")[0]
                if top == "torchvision":
                    return importlib.machinery.ModuleSpec(name, Broken())
                if top in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, Block())
        from dynamo_lite.report.registry import all_models
        from dynamo_lite.report.survey import survey_model
        lib = [e for e in all_models() if "lib" in e.tags]
        assert len(lib) >= 40
        assert all(e.skip_reason() for e in lib if e.requires != "torchvision")
        for e in lib:
            if e.name in ("lib_gpt2", "lib_einops_vit", "lib_tv_resnet18"):
                result = survey_model(e)
                assert result.status == "skipped", (e.name, result.status, result.detail)
                if e.requires == "torchvision":
                    assert "fails to import: RuntimeError: operator torchvision::nms" in result.detail, result.detail
        print("ok", len(lib))
    """ % (tuple(p for p in LIB_PACKAGES if p != "torchvision"),))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_compare_walks_objects_compared_by_identity():
    """A KV cache object (transformers' DynamicCache) is compared attribute by attribute."""
    class Layer:
        def __init__(self, keys):
            self.keys, self.is_initialized = keys, True

    class Cache:
        def __init__(self, *keys):
            self.layers = [Layer(k) for k in keys]

    compare({"past": Cache(torch.ones(2))}, {"past": Cache(torch.ones(2))})
    with pytest.raises(Mismatch, match=r"out\['past'\]\.layers\[0\]\.keys"):
        compare({"past": Cache(torch.ones(2))}, {"past": Cache(torch.zeros(2))})


def test_compare_reports_the_path():
    compare({"a": (torch.ones(2), 1.0)}, {"a": (torch.ones(2), 1.0)})
    with pytest.raises(Mismatch, match=r"out\['a'\]\[0\]"):
        compare({"a": (torch.ones(2), 1.0)}, {"a": (torch.zeros(2), 1.0)})
    with pytest.raises(Mismatch, match="length"):
        compare([1, 2], [1])


# --------------------------------------------------------------------------------------------
# opt-in: the whole corpus under dynamo_lite (slow)
# --------------------------------------------------------------------------------------------

SURVEY = os.environ.get("DL_CORPUS_SURVEY", "").strip() not in ("", "0")


@pytest.mark.skipif(not SURVEY, reason="set DL_CORPUS_SURVEY=1 to run the corpus under dynamo_lite")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_corpus_model_under_dynamo_lite(entry):
    from dynamo_lite.report.survey import survey_model

    result = survey_model(entry, timeout=300)
    if result.status == "skipped":
        pytest.skip(result.detail)
    assert result.status == "ok", f"{entry.name}: {result.status}: {result.detail}"
