"""Which aten calls the `triton` backend leaves in real models' graphs (issue 14, item 5: nothing
common left behind), forward and training, over models nobody here chose.

    python bench/aten_calls.py [--train] [-k NAME] [--json FILE] [--device cpu|cuda]

Models: bench/models_gpu.py's rows in their tiny (`--quick`) variants, plus tiny configs of more
Hugging Face architectures and ~60 timm models built with their defaults (random weights). Each
is called through `dynamo_lite.capture(model, backend="triton")` with its default arguments
(forward: `eval()` under no_grad, twice, so a recapture on an identical call shows; `--train`:
one captured step of forward, loss and backward in train mode). Per model: graphs, kernels,
graphs run as captured (fallbacks), the library calls left to cuBLAS / cuDNN / SDPA (matmuls,
convolutions, attention: counted, not listed), every other aten call by op, and the lowerings
that raised (a bug of ours: `CompiledGraph.lowering_errors`). At the end: each op by the number
of models that call it. A library that is not installed skips its models.

On the CPU the kernels run under TRITON_INTERPRET=1 (set here unless given): slow, so the sizes
are tiny; what is counted does not depend on the size except where a lowering has a size limit
(a sort's width, a cat's operand count). Models with a fixed input size keep theirs (224 x 224
for Swin, which then takes tens of minutes under the interpreter: on the CPU, pick rows with
`-k`). No timing: this is a coverage report, not a benchmark.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import traceback

os.environ.setdefault("TRITON_INTERPRET", "1")
HERE = os.path.dirname(os.path.realpath(__file__))
# this directory's triton.py would shadow the triton package
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))
sys.path.append(HERE)

import torch  # noqa: E402

import models_gpu as M  # noqa: E402

#: library calls: matmuls, convolutions, attention (what both engines hand to cuBLAS / cuDNN / SDPA)
LIBRARY = ("mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward", "attention", "linear")

#: (name, transformers config class, model class, config arguments): tiny configs of
#: architectures beyond models_gpu.py's
HF_MORE = [
    ("mamba", "MambaConfig", "MambaForCausalLM", dict(hidden_size=64, num_hidden_layers=2, vocab_size=512, state_size=8)),
    ("bloom", "BloomConfig", "BloomForCausalLM", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=512)),
    ("opt", "OPTConfig", "OPTForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                                                vocab_size=512, word_embed_proj_dim=64)),
    ("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                             intermediate_size=128, vocab_size=512)),
    ("falcon", "FalconConfig", "FalconForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                         vocab_size=512)),
    ("distilbert", "DistilBertConfig", "DistilBertModel", dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=512)),
    ("mistral", "MistralConfig", "MistralForCausalLM", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                            num_attention_heads=4, num_key_value_heads=2, vocab_size=512)),
    ("phi", "PhiConfig", "PhiForCausalLM", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                num_attention_heads=4, vocab_size=512)),
    ("gemma", "GemmaConfig", "GemmaForCausalLM", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                      num_attention_heads=4, num_key_value_heads=1, head_dim=16, vocab_size=512)),
    ("qwen2", "Qwen2Config", "Qwen2ForCausalLM", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512)),
    ("roberta", "RobertaConfig", "RobertaModel", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                      intermediate_size=128, vocab_size=512)),
    ("electra", "ElectraConfig", "ElectraModel", dict(hidden_size=64, embedding_size=32, num_hidden_layers=2,
                                                      num_attention_heads=4, intermediate_size=128, vocab_size=512)),
]

#: timm models by their names, defaults otherwise (a spread of families: mobile nets, attention
#: hybrids, MLP mixers, re-parameterized and normalizer-free nets)
TIMM_MORE = [
    "mobilenetv3_small_050", "swin_tiny_patch4_window7_224", "regnetx_002", "resnest14d", "cspdarknet53", "dla34",
    "ghostnet_050", "mixnet_s", "levit_128s", "poolformer_s12", "coat_lite_tiny", "deit_tiny_patch16_224",
    "inception_v3", "xception41", "res2net50_14w_8s", "dpn68", "hrnet_w18_small", "rexnet_100", "selecsls42b",
    "gernet_s", "mnasnet_050", "lcnet_050", "mobilevit_xxs", "edgenext_xx_small", "efficientformer_l1", "nfnet_l0",
    "repvgg_a0", "visformer_tiny", "twins_svt_small", "pit_ti_224", "crossvit_tiny_240", "resmlp_12_224",
    "gmlp_ti16_224", "vovnet39a", "sequencer2d_s", "hardcorenas_a", "fbnetc_100", "eca_resnet33ts", "halonet26t",
    "lambda_resnet26t", "botnet26t_256", "cait_xxs24_224", "xcit_nano_12_p16_224", "volo_d1_224",
    "maxvit_nano_rw_256", "coatnet_nano_rw_224", "fastvit_t8", "efficientvit_b0", "repghostnet_050",
    "inception_next_tiny", "hgnetv2_b0", "tiny_vit_5m_224", "vit_small_patch16_rope_224",
]
#: timm models whose training steps are surveyed with --train (besides models_gpu.py's)
TIMM_TRAIN = ["mobilenetv3_small_050", "regnetx_002", "ghostnet_050", "mixnet_s", "edgenext_xx_small",
              "cspdarknet53", "dla34", "repvgg_a0"]


def _hf(cfg_name: str, model_name: str, cfg: dict):
    def build(sizes, device):
        import transformers
        model = getattr(transformers, model_name)(getattr(transformers, cfg_name)(**cfg))
        return model.to(device), M._ids(sizes, 512, device), None
    return build


def _timm(name: str, batch: int):
    def build(sizes, device):
        import timm
        model = timm.create_model(name, pretrained=False)
        cfg = getattr(model, "pretrained_cfg", None) or {}
        # the smallest image a net takes (a fixed-size one its own; 96 for the deep Inception stems)
        size = cfg.get("input_size", (3, 224, 224))[1] if cfg.get("fixed_input_size") else \
            96 if name in ("inception_v3", "xception41") else 64
        inputs = {"x": torch.randn(batch, 3, size, size, device=device)}
        return model.to(device), inputs, None
    return build


def models(train: bool) -> list[tuple[str, str, object]]:
    """(name, library, build) of every model surveyed."""
    rows = [(s.name, s.library, s.build) for s in M.SPECS if not train or s.train]
    if train:
        rows += [(n, "timm", _timm(n, 2)) for n in TIMM_TRAIN]
    else:
        rows += [(n, "transformers", _hf(c, m, cfg)) for n, c, m, cfg in HF_MORE]
        rows += [(n, "timm", _timm(n, 1)) for n in TIMM_MORE]
    return rows


def _is_library(op: str) -> bool:
    name = op.split(".")[1] if "." in op else op
    return any(lib in name for lib in LIBRARY)


def survey(name: str, build, device: str, train: bool) -> dict:
    """One model's row (what the module docstring lists)."""
    import dynamo_lite as dl
    from dynamo_lite.backends.triton import backend as B
    torch.manual_seed(0)
    sizes = M.Sizes(batch=2 if train else 1, seq=16, image=64, quick=True)
    model, inputs, loss_fn = build(sizes, device)
    B.recent.clear()
    recaptured = None
    if train:
        model.train()
        if loss_fn is None:
            loss_fn = M._lm_loss if "input_ids" in inputs else M._image_loss
        if loss_fn is M._image_loss and "target" not in inputs:
            inputs["target"] = torch.randint(0, getattr(model, "num_classes", 10), (inputs["x"].shape[0],), device=device)

        def step(**kw):
            loss = loss_fn(model, kw)
            loss.backward()
            return loss
        dl.capture(step, backend="triton")(**inputs)
        graphs = list(B.recent)
    else:
        model.eval()
        inputs = {k: v for k, v in inputs.items() if k != "target"}     # (models_gpu.py's label for its loss)
        captured = dl.capture(model, backend="triton")
        with torch.no_grad():
            captured(**inputs)
            graphs = list(B.recent)
            captured(**inputs)
        recaptured = len(B.recent) - len(graphs)
    calls, library, errors = collections.Counter(), 0, {}
    for g in graphs:
        errors.update(g.lowering_errors)
        for op, n in g.extern_ops.items():
            if _is_library(op):
                library += n
            else:
                calls[op] += n
    return {"model": name, "graphs": len(graphs), "kernels": sum(g.kernel_count for g in graphs),
            "fallbacks": [g.fallback_reason for g in graphs if g.fallback_reason], "library_calls": library,
            "aten_calls": dict(calls), "lowering_errors": errors, "recaptured": recaptured}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help="training steps instead of forward calls")
    parser.add_argument("-k", default="", help="only models whose name contains this (case-insensitive)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default="", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("the CPU needs TRITON_INTERPRET=1")
    rows, by_op = [], collections.defaultdict(set)
    for name, library, build in models(args.train):
        if args.k.lower() not in name.lower():
            continue
        try:
            __import__(library)
        except ImportError:
            print(f"{name:44s} skipped: {library} is not installed", flush=True)
            continue
        start = time.perf_counter()
        try:
            row = survey(name, build, args.device, args.train)
        except Exception as e:  # noqa: BLE001 -- one model's failure is its row
            row = {"model": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            traceback.print_exc(limit=3)
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        for op in row.get("aten_calls", {}):
            by_op[op].add(name)
        if "error" in row:
            print(f"{name:44s} ERROR {row['error']}", flush=True)
        else:
            again = "" if row["recaptured"] in (None, 0) else f" RECAPTURED {row['recaptured']}"
            print(f"{name:44s} {row['seconds']:6.1f}s graphs={row['graphs']} kernels={row['kernels']} "
                  f"library={row['library_calls']} aten={row['aten_calls']}"
                  + (f" fallbacks={row['fallbacks'][:2]}" if row["fallbacks"] else "")
                  + (f" LOWERING ERRORS={row['lowering_errors']}" if row["lowering_errors"] else "") + again, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    print("\naten calls other than the library's, by the number of models that make them:")
    for op, names in sorted(by_op.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(names):4d}  {op:44s} {', '.join(sorted(names)[:5])}{' ...' if len(names) > 5 else ''}")
    errors = sum(bool(r.get("lowering_errors")) for r in rows)
    failed = sum("error" in r for r in rows)
    print(f"\n{len(rows)} models: {failed} failed to run, {errors} with lowering errors")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
