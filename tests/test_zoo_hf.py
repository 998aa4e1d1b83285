"""The "hf" suite (dynamo_lite_corpus.zoo_hf): one tiny model per transformers architecture.

Listing: one entry per model type of the installed transformers, made from name tables alone (no
config or modeling module imported). Building: the generic shrinking keeps configs consistent
(heads divide widths, one layer of each kind, per-stage lists, token ids inside the vocabulary), a
sample of architectures — a decoder LM, an encoder, an encoder-decoder, a vision and an audio model —
is built tiny and surveyed under dynamo_lite with status ok, and a model over the size bound is a
skip with the reason. Without transformers the suite lists nothing and says why.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dynamo_lite.report.registry import all_models, get, suite_problems

ROOT = Path(__file__).resolve().parents[1]
HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning",
                                        "ignore::FutureWarning")

# the sample surveyed end to end: (model type, what it stands for)
SAMPLE = (("llama", "decoder LM"), ("bert", "encoder"), ("t5", "encoder-decoder"), ("vit", "vision"),
          ("wav2vec2", "audio"))
SAMPLE_MAX_PARAMS = 1_000_000


def _run(script: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_transformers
def test_lists_one_entry_per_architecture_without_building_anything():
    """In a fresh interpreter: one entry per MODEL_MAPPING_NAMES type, and listing imported no
    configuration or modeling module of any architecture."""
    out = _run("""
        import re, sys
        from dynamo_lite.report.registry import all_models, suite_problems
        entries = all_models(suites=("hf",))
        loaded = [m for m in sys.modules if re.match(r"transformers[.]models[.](?!auto[.])[^.]+[.](configuration|modeling)_", m)]
        assert not loaded, loaded[:5]
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
        assert sorted(e.name for e in entries) == sorted(f"hf.{t}" for t in MODEL_MAPPING_NAMES)
        for e in entries:
            assert e.requires == "transformers" and e.tags[:2] == ("hf", "zoo") and e.module.endswith("zoo_hf"), e
        assert "hf" not in suite_problems
        print("ok", len(entries))
    """)
    assert out.startswith("ok") and int(out.split()[1]) >= 300


def test_without_transformers_the_suite_lists_nothing_and_says_why():
    out = _run("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "transformers" or name.startswith("transformers."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, Block())
        from dynamo_lite.report.registry import all_models, suite_problems
        assert all_models(suites=("hf",)) == []
        assert "transformers is not installed" in suite_problems["hf"], suite_problems
        print("ok")
    """)
    assert out.startswith("ok")


@needs_transformers
def test_tiny_config_keeps_dimensions_consistent():
    from transformers import Gemma3TextConfig, LlamaConfig, SwinConfig

    from dynamo_lite_corpus.zoo_hf import HEAD_DIM, VOCAB, WIDTH, special_token_ids, tiny_config

    llama = tiny_config(LlamaConfig)
    assert (llama.num_hidden_layers, llama.hidden_size, llama.num_attention_heads, llama.num_key_value_heads,
            llama.head_dim, llama.vocab_size) == (2, WIDTH, 4, 4, HEAD_DIM, VOCAB)
    assert all(t < VOCAB for t in special_token_ids(llama))
    # Gemma 3 alternates five sliding-window layers and one global layer: the tiny model keeps one of each
    gemma = tiny_config(Gemma3TextConfig)
    assert set(gemma.layer_types) == {"sliding_attention", "full_attention"}
    assert len(gemma.layer_types) == gemma.num_hidden_layers == 6
    # Swin: per-stage depths and heads; the derived hidden_size follows the tiny embed_dim
    swin = tiny_config(SwinConfig, geometry=True)
    assert swin.depths == [1, 1, 1, 1] and swin.num_heads == [1, 2, 4, 8]
    assert swin.hidden_size == swin.embed_dim * 2 ** 3 and swin.image_size == 32


@needs_transformers
@pytest.mark.parametrize("model_type, kind", SAMPLE, ids=[t for t, _ in SAMPLE])
def test_sample_builds_tiny_and_captures(model_type, kind):
    from dynamo_lite.report.survey import survey_model
    entry = get(f"hf.{model_type}", suites=("hf",))
    example = entry.build()
    params = sum(p.numel() for p in example.model.parameters())
    assert params < SAMPLE_MAX_PARAMS, (model_type, params)
    assert example.kwargs and not example.args
    result = survey_model(entry)
    assert result.status == "ok", (kind, result.status, result.detail)
    assert result.dl.graphs >= 1


@needs_transformers
def test_a_model_over_the_size_bound_is_skipped_with_the_reason(monkeypatch):
    from dynamo_lite.report.survey import survey_model
    from dynamo_lite_corpus import zoo_hf
    monkeypatch.setattr(zoo_hf, "MAX_PARAMS", 1000)
    monkeypatch.setattr(zoo_hf, "_RECIPE", {})
    result = survey_model(get("hf.bert", suites=("hf",)))
    assert result.status == "skipped"
    assert "parameters after shrinking" in result.detail, result.detail


def test_suite_problems_names_no_problem_when_transformers_is_there():
    all_models(suites=("hf",))
    assert ("hf" in suite_problems) == (not HAVE_TRANSFORMERS)
