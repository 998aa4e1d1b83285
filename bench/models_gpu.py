"""Real models end to end on one GPU: eager vs Inductor vs dynamo_lite's `triton` backend, in one run.

    python bench/models_gpu.py [--quick] [-k NAME] [--only forward|train|generate] [--json FILE] [--cudagraphs]
                               [--warm-caches]
    python bench/models_gpu.py --device cpu --quick          # smoke mode, no GPU needed

The benchmark issue 14 asks for ("Show"): models built from the installed libraries (Hugging Face
transformers, timm, torchvision) with their default arguments and default configs at realistic sizes,
random weights (nothing is downloaded), called as a user calls them (KV cache and every other default
left on). A library that is not installed skips its rows. Sizes: batch 8, sequence 512, images 224;
forward rows in bf16 with `model.eval()` under `torch.no_grad()`; training rows run a whole step
(forward + loss + backward + optimizer step: AdamW for the transformers, SGD with momentum for the
ResNet) with fp32 parameters under bf16 autocast, the step function captured as a whole, dropout
left as the model's config sets it (GPT-2's 0.1; timm's ViT-B/16 builds its dropouts with p=0).

Engines, each on its own `copy.deepcopy` of one model built under `torch.manual_seed(0)`:
eager; Inductor (`torch.compile(model)`, default mode); ours (`dynamo_lite.capture(model,
backend="triton")`, through a wrapping backend that counts graphs). Per row: eager / Inductor /
ours time (ms; `triton.testing.do_bench`, which flushes L2 between calls, in ROUNDS rounds that
time the engines in turns, each engine's median round: time_interleaved), ours/Inductor,
the first call of each compiled engine (seconds, capture and compile included; the eager model ran
first, so cuBLAS/cuDNN set-up is not in them; one process for the whole run, so later rows find
warm in-process state, as a user's second model would; the on-disk caches of all three compilers
-- Triton's, Inductor's and ours -- are empty temporary directories for the run, unless
`--warm-caches`: what an earlier run on the machine compiled is not found), graphs made (Inductor: TorchDynamo's
`counters["stats"]["unique_graphs"]`; ours: graphs given to the backend, and the Triton kernels and
eager fallbacks among them), and correctness against eager:

* forward: every tensor of the output (logits, hidden states, the KV cache as legacy tuples)
  compared to eager's; the row's number is the largest absolute difference, and it is correct when
  that is <= tol * max(1, max |eager|) with tol = 2e-2 in bf16/fp16 (a few units in the last place of
  an 8-bit mantissa after a few layers) and 1e-3 in fp32, and nothing is NaN where eager is not.
* training: two steps per engine, then the two losses, every parameter's gradient after the first
  step and every parameter's change over the two steps (the optimizer's update, which depends on
  the first step's) are compared with those of eager **in fp32** (autocast off, TF32 off), and each
  engine's error is allowed what eager's own low-precision steps err by, in the same run (the
  scheme of torch's own accuracy check, which allows an engine a multiple of eager's distance from
  an fp64 run; bf16 batch norm makes eager bf16 itself tens of percent away from fp32 in some
  gradients, so no fixed tolerance fits every model):
  - each gradient g: rms(g - g_fp32) <= 3 * rms(g_eager - g_fp32) + tol * rms(g_fp32);
  - each loss: |l - l_fp32| <= 3 * |l_eager - l_fp32| + tol * max(1, |l_fp32|);
  - the changes u of all parameters together: ||u - u_fp32|| / ||u_fp32|| <= 3 * (eager's) + tol
    (AdamW's first updates are +-lr per element, the sign of the gradient: a few signs flipped
    where a gradient is near 0 make a small tensor's update 10% off, by chance in eager or not;
    per tensor, that failed both engines on the ViT).
  The row's number is the worst error / allowance (<= 1 passes). A model with live dropout draws a
  mask per call, and the fp32 reference cannot draw eager's bf16 masks (CUDA's dropout kernels map
  random numbers to elements by dtype, SDPA's by kernel): there the allowances come from eager's
  distance from fp32 with every dropout set to p=0, and each engine is compared with eager's own
  bf16 steps with dropout on, each step run after the same `torch.manual_seed` (an engine that
  calls eager's dropout in eager's order draws eager's masks). Inductor draws its masks from its
  own random stream (Philox in its kernels), so on such a row its result is not checked.
  Where eager's error is as large
  as the gradient itself (a ResNet-50's early convolution weights at init) even a zero gradient
  passes: the row's notes count the gradients that are checkable, and give eager's own gradient
  error (||g_eager - g_fp32|| / ||g_fp32||, all parameters). With fp32 rows (`--dtype fp32`, the
  CPU's default) eager is the reference and its error is 0: each engine gets the floor alone (tol
  1e-3).

* generate (the causal LMs; eighteenth session): `generate()` greedy over a prompt of 128 tokens,
  64 new ones, every other default kept, each engine's `model.forward` compiled (`run_generate`
  says how it is checked). Its first call shows what compiling per shape costs: our backend
  compiles a dynamic graph once per distinct shape, so once per cache length.

At the end: geomean ours/Inductor over forward rows, training rows and generate rows (rows where both ran).
Every engine of every row runs in a try/except: an exception is that engine's status in the row,
never the end of the run. Rows are printed as they finish and `--json` is rewritten after each row,
so a run cut short keeps what it measured. `--quick`: tiny configs and inputs (the smoke mode).
On the CPU, ours uses the `eager` backend (pass `--ours-backend triton` with TRITON_INTERPRET=1 for
the interpreter) and Inductor is off unless `--inductor on`. `run_models` is what
tests/test_models_gpu_bench.py calls in-process.

`--cudagraphs` (forward rows; issue 14, item 8): both engines in their CUDA-graph modes instead,
Inductor as `torch.compile(model, mode="reduce-overhead")` and ours with the `triton` backend's
CUDA-graph mode (the `triton_cudagraphs` backend: backends/triton/cudagraphs.py); the notes say how
many of our graphs were recorded.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional

# bench/triton.py would shadow the triton package that torch.compile imports.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import torch                                               # noqa: E402
import torch.nn as nn                                      # noqa: E402
import torch.nn.functional as F                            # noqa: E402

import dynamo_lite as dl                                   # noqa: E402


# ---------------------------------------------------------------------------------------------
# models: each builder returns (model, inputs as kwargs, loss function for a training row)
# ---------------------------------------------------------------------------------------------

@dataclass
class Sizes:
    batch: int
    seq: int
    image: int
    quick: bool


def _ids(sizes: Sizes, vocab: int, device) -> dict:
    return {"input_ids": torch.randint(0, vocab, (sizes.batch, sizes.seq), device=device)}


def _lm_loss(model, inputs):
    return model(**inputs, labels=inputs["input_ids"]).loss


def _image_loss(model, inputs):
    logits = model(inputs["x"])
    return F.cross_entropy(logits.float(), inputs["target"])


def _images(sizes: Sizes, classes: int, device) -> dict:
    return {"x": torch.randn(sizes.batch, 3, sizes.image, sizes.image, device=device),
            "target": torch.randint(0, classes, (sizes.batch,), device=device)}


def hf_gpt2(sizes: Sizes, device):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = (GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1024, n_positions=256) if sizes.quick
              else GPT2Config(n_layer=4))
    return GPT2LMHeadModel(config), _ids(sizes, config.vocab_size, device), _lm_loss


def hf_llama(sizes: Sizes, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = (LlamaConfig(hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=4, vocab_size=1024) if sizes.quick
              else LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                               num_attention_heads=16, num_key_value_heads=16, vocab_size=32000))
    return LlamaForCausalLM(config), _ids(sizes, config.vocab_size, device), _lm_loss


def hf_bert(sizes: Sizes, device):
    from transformers import BertConfig, BertModel
    config = (BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                         vocab_size=1024) if sizes.quick else BertConfig(num_hidden_layers=4))
    return BertModel(config), _ids(sizes, config.vocab_size, device), None


def timm_resnet50(sizes: Sizes, device):
    import timm
    model = timm.create_model("resnet18" if sizes.quick else "resnet50", pretrained=False)
    return model, _images(sizes, model.num_classes, device), _image_loss


def timm_vit(sizes: Sizes, device):
    import timm
    if sizes.quick:
        model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=sizes.image)
    else:
        model = timm.create_model("vit_base_patch16_224", pretrained=False)
    return model, _images(sizes, model.num_classes, device), _image_loss


def tv_resnet50(sizes: Sizes, device):
    import torchvision
    model = torchvision.models.resnet18() if sizes.quick else torchvision.models.resnet50()
    return model, _images(sizes, 1000, device), _image_loss


def hf_t5(sizes: Sizes, device):
    from transformers import T5Config, T5ForConditionalGeneration
    config = (T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4, vocab_size=1024) if sizes.quick
              else T5Config())                                # t5-small's sizes: 6 + 6 layers, d_model 512
    inputs = _ids(sizes, config.vocab_size, device)
    inputs["decoder_input_ids"] = inputs["input_ids"].clone()
    return T5ForConditionalGeneration(config), inputs, None


def _timm(name: str, quick_name: str):
    def build(sizes: Sizes, device):
        import timm
        model = timm.create_model(quick_name if sizes.quick else name, pretrained=False)
        return model, _images(sizes, model.num_classes, device), _image_loss
    return build


def tv_densenet121(sizes: Sizes, device):
    import torchvision
    return torchvision.models.densenet121(), _images(sizes, 1000, device), _image_loss


def hf_segformer(sizes: Sizes, device):
    from transformers import SegformerConfig, SegformerForSemanticSegmentation
    config = (SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                              num_attention_heads=[1, 2], decoder_hidden_size=32, strides=[4, 2],
                              patch_sizes=[7, 3], mlp_ratios=[2, 2]) if sizes.quick
              else SegformerConfig())                         # mit-b0's sizes
    images = torch.randn(sizes.batch, 3, sizes.image, sizes.image, device=device)
    return SegformerForSemanticSegmentation(config), {"pixel_values": images}, None


def tv_deeplabv3(sizes: Sizes, device):
    from torchvision.models import segmentation
    # (weights_backbone=None: no download, as pretrained=False elsewhere; every other default kept)
    build = segmentation.deeplabv3_mobilenet_v3_large if sizes.quick else segmentation.deeplabv3_resnet50
    return build(weights_backbone=None), {"x": _images(sizes, 1, device)["x"]}, None


@dataclass
class Spec:
    name: str               # row name; quick mode builds the tiny variant under the same name
    library: str            # the module that must be importable
    build: Callable
    train: Optional[str]    # None: forward only; else the optimizer of its training row
    generate: bool = False  # also a `generate()` row (a causal LM)


SPECS = [
    Spec("hf GPT2LMHeadModel (4 layers)", "transformers", hf_gpt2, "adamw", generate=True),
    Spec("hf LlamaForCausalLM (1024 hidden, 4 layers)", "transformers", hf_llama, None, generate=True),
    Spec("hf BertModel (4 layers)", "transformers", hf_bert, None),
    Spec("timm resnet50", "timm", timm_resnet50, None),
    Spec("timm vit_base_patch16_224", "timm", timm_vit, "adamw"),
    Spec("torchvision resnet50", "torchvision", tv_resnet50, "sgd"),
    # forward rows of more models nobody here chose (seventeenth session): an encoder-decoder, and
    # convolutional nets with depthwise convolutions, squeeze-excitation, LayerNorm over channels,
    # average pooling and concatenation
    Spec("hf T5ForConditionalGeneration (t5-small sizes)", "transformers", hf_t5, None),
    Spec("timm convnext_tiny", "timm", _timm("convnext_tiny", "convnext_atto"), None),
    Spec("timm efficientnet_b0", "timm", _timm("efficientnet_b0", "efficientnet_b0"), None),
    Spec("torchvision densenet121", "torchvision", tv_densenet121, None),
    # segmentation (eighteenth session): bilinear upsampling of every stage's features / the logits
    Spec("hf SegformerForSemanticSegmentation (mit-b0)", "transformers", hf_segformer, None),
    Spec("torchvision deeplabv3_resnet50", "torchvision", tv_deeplabv3, None),
]


def make_optimizer(kind: str, model: nn.Module):
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-4)
    return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)


def make_train_step(loss_fn: Callable, device_type: str, autocast: Optional[torch.dtype]):
    """The step a user writes: zero the gradients, forward + loss under autocast, backward, step.

    Gradients are zeroed first, so they are still there after the step to be checked."""
    def train_step(model, opt, inputs):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = loss_fn(model, inputs)
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


# ---------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------

@dataclass
class EngineResult:
    ms: Optional[float] = None
    first_call_s: Optional[float] = None
    max_diff: Optional[float] = None
    correct: Optional[bool] = None
    graphs: Optional[int] = None
    kernels: Optional[int] = None            # ours on the triton backend: Triton kernels made
    fallbacks: Optional[int] = None          # ours on the triton backend: graphs run as captured
    recorded: Optional[list] = None          # ours in the CUDA-graph mode: per graph, "recorded" or why not
    shapes: Optional[int] = None             # ours on the triton backend: compiled shapes (a dynamic graph's each)
    pool: Optional[dict] = None              # ours on the triton backend: compile pool jobs until counted
                                             # (precompile.stats: compiled, failed, taken back by the parent)
    phases: Optional[dict] = None            # ours on the triton backend: seconds of lowering, tuning,
                                             # compiling in the parent, waiting for workers (_phases_note)
    agreement: Optional[str] = None          # generate: how its tokens compare with eager's
    status: str = "ok"


@dataclass
class Row:
    name: str
    mode: str                                # "forward", "train" or "generate"
    status: str = "ok"
    eager: EngineResult = field(default_factory=EngineResult)
    inductor: EngineResult = field(default_factory=EngineResult)
    ours: EngineResult = field(default_factory=EngineResult)
    eager_error: Optional[float] = None      # train: eager's first-step gradient error against fp32
    checkable: Optional[tuple] = None        # train: (tensors a zero gradient would fail on, tensors)
    dropouts: int = 0                        # train: nn.Dropout modules with p > 0 (masks drawn per step)

    @property
    def ratio(self) -> Optional[float]:
        if self.ours.ms and self.inductor.ms:
            return self.ours.ms / self.inductor.ms
        return None


class CountingBackend:
    """Wraps a dynamo_lite backend, counting the graphs it is given and (triton) what it made of them."""

    def __init__(self, backend: str, cudagraphs: bool = False):
        self.backend = backend
        self.cudagraphs = cudagraphs
        self.graphs = 0
        self.compiled = []
        self.backend_seconds = 0.0            # in triton_backend: lowering and code generation

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        if self.backend == "eager":
            return gm.forward
        from dynamo_lite.backends.triton import triton_backend
        start = time.perf_counter()
        compiled = triton_backend(gm, example_inputs, cudagraphs=self.cudagraphs)
        self.backend_seconds += time.perf_counter() - start
        self.compiled.append(compiled.compiled_graph)
        return compiled

    def phases(self) -> dict:
        """Where the first calls' seconds went, besides capture and running: the backend's
        lowering, kernels compiled in this process, waiting for the compile workers, tuning."""
        launchers = [la for c in self.compiled for la in c.launchers]
        return {"lower": self.backend_seconds,
                "compile": sum(la.compile_seconds for la in launchers),
                "wait": sum(la.wait_seconds for la in launchers),
                "tune": sum(la.tune_seconds for la in launchers)}


# ---------------------------------------------------------------------------------------------
# measurement
# ---------------------------------------------------------------------------------------------

def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn: Callable, device, rep: int = 500) -> float:
    if torch.device(device).type == "cuda":
        from triton.testing import do_bench
        return do_bench(fn, warmup=max(25, rep // 5), rep=rep, return_mode="median")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


#: timing rounds per row: each round times every engine once, in turn
ROUNDS = 3


def time_interleaved(timed: dict, results: dict, device) -> None:
    """Time the row's engines in turns (ROUNDS rounds, each engine once a round, ~150 ms of calls
    each) and give each the median of its rounds. A shared GPU's clocks and neighbours drift over
    a row's minutes (Inductor's timm ResNet-50 forward read 4.05, 6.05 and 2.25 ms in three runs
    that timed the engines one after another); in turns, a drift reaches every engine alike, so
    the ratio holds. An engine whose call raises keeps that as its status."""
    rounds: dict = {name: [] for name in timed}
    for _ in range(ROUNDS):
        for name, fn in list(timed.items()):
            try:
                rounds[name].append(time_ms(fn, device, rep=150))
            except Exception as e:
                results[name].status = _error(e)
                del timed[name]
    for name in timed:
        results[name].ms = statistics.median(rounds[name])


def first_call(fn: Callable, device):
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - start


def output_tensors(out) -> list:
    """Every tensor of a model's output, in a fixed order (ModelOutput fields, tuples, a KV cache)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):                     # ModelOutput is an OrderedDict
        return [t for v in out.values() for t in output_tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in output_tensors(v)]
    if hasattr(out, "to_legacy_cache"):           # transformers' Cache objects
        try:
            return output_tensors(out.to_legacy_cache())
        except Exception:
            return []
    return []


def tolerance(dtype: torch.dtype) -> float:
    return 2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3


def compare_outputs(got, ref, tol: float) -> tuple[float, bool]:
    got, ref = output_tensors(got), output_tensors(ref)
    if len(got) != len(ref):
        return math.inf, False
    worst, ok = 0.0, True
    for g, r in zip(got, ref):
        if g.shape != r.shape or g.dtype != r.dtype:
            return math.inf, False
        if not g.is_floating_point():
            same = torch.equal(g, r)
            worst, ok = (worst, ok) if same else (math.inf, False)
            continue
        g, r = g.float(), r.float()
        if not torch.equal(torch.isnan(g), torch.isnan(r)):
            return math.inf, False
        finite = ~torch.isnan(r)
        if finite.any():
            diff = (g[finite] - r[finite]).abs().max().item()
            bound = tol * max(1.0, r[finite].abs().max().item())
            worst = max(worst, diff)
            ok = ok and diff <= bound
    return worst, ok


def grads(model: nn.Module) -> list:
    return [p.grad.detach().float().clone() if p.grad is not None else None for p in model.parameters()]


@dataclass
class Steps:
    """What two training steps leave behind: the two losses, every parameter's gradient after the
    first step (before any update, so rounding is all that separates engines) and every
    parameter's change over the two steps (the optimizer's work)."""
    losses: tuple
    grads: list
    updates: list = field(default_factory=list)

    def tensors(self) -> list:
        return self.grads + self.updates


GRAD_MULTIPLIER = 3.0     # an engine may err by this many times eager's own low-precision error


def _rms(t: torch.Tensor) -> float:
    return t.pow(2).mean().sqrt().item() if t.numel() else 0.0


def relative_error(got: list, exact: list) -> float:
    """||x - x_exact|| / ||x_exact|| over all the tensors together (inf when which are None differ,
    or a value is not finite)."""
    if [g is None for g in got] != [g is None for g in exact]:
        return math.inf
    pairs = [(g, r) for g, r in zip(got, exact) if r is not None]
    err = math.sqrt(sum(((g - r) ** 2).sum().item() for g, r in pairs))
    norm = math.sqrt(sum((r ** 2).sum().item() for _, r in pairs))
    return err / max(norm, 1e-30) if math.isfinite(err) else math.inf


def gradient_error(got: Steps, exact: Steps) -> float:
    return relative_error(got.grads, exact.grads)


def _allowance(exact: torch.Tensor, eager: torch.Tensor, tol: float, reference=None) -> float:
    """GRAD_MULTIPLIER times eager's distance from fp32, plus tol times the reference's size."""
    return GRAD_MULTIPLIER * _rms(eager - exact) + tol * _rms(exact if reference is None else reference)


def checkable(exact: Steps, eager: Steps, tol: float) -> tuple[int, int]:
    """(gradients whose allowance is below their own rms, all gradients): where eager's own error
    is as large as the gradient (bf16 batch norm's early convolution weights in a ResNet at init),
    even a zero gradient would pass, so only the others can show a wrong one."""
    pairs = [(r, e) for r, e in zip(exact.grads, eager.grads) if r is not None]
    return sum(_allowance(r, e, tol) < _rms(r) for r, e in pairs), len(pairs)


def compare_training(got: Steps, exact: Steps, eager: Steps, tol: float,
                     reference: Optional[Steps] = None) -> tuple[float, bool]:
    """An engine's two steps against eager's in fp32 (`exact`), each allowed GRAD_MULTIPLIER times
    eager's own error in the row's precision (`eager`; `exact` itself in fp32 rows) plus a floor
    of tol: each loss, each gradient, and the parameters' changes all together (AdamW's first
    updates are +-lr per element, the sign of its gradient: a few signs flipped where a gradient
    is near 0 make a small tensor's update 10% off, eager's as well as an engine's, so they are
    compared over all parameters). `reference`: the steps the engine's error is measured against
    when they are not `exact` (a model with live dropout: eager's own steps with its masks, while
    `exact` and `eager` are the dropout-free pair that sizes the allowances). Returns the worst
    error / allowance (<= 1 passes) and whether all pass."""
    ref = reference or exact
    worst = 0.0
    for a, r, b, e in zip(got.losses, ref.losses, exact.losses, eager.losses):
        allowed = GRAD_MULTIPLIER * abs(e - b) + tol * max(1.0, abs(r))
        worst = max(worst, abs(a - r) / allowed if math.isfinite(a) else math.inf)
    if [g is None for g in got.grads] != [g is None for g in ref.grads]:
        return math.inf, False
    for g, r, x, e in zip(got.grads, ref.grads, exact.grads, eager.grads):
        if r is None:
            continue
        if g.shape != r.shape:
            return math.inf, False
        allowed = _allowance(x, e, tol, r)
        err = _rms(g - r)
        if not math.isfinite(err):
            return math.inf, False
        worst = max(worst, err / allowed if allowed > 0 else (0.0 if err == 0 else math.inf))
    if len(got.updates) != len(ref.updates):
        return math.inf, False
    if ref.updates:
        err = relative_error(got.updates, ref.updates)
        worst = max(worst, err / (GRAD_MULTIPLIER * relative_error(eager.updates, exact.updates) + tol))
    return worst, worst <= 1.0


# ---------------------------------------------------------------------------------------------
# running one row
# ---------------------------------------------------------------------------------------------

def _engines(ours_backend: str, inductor_backend: Optional[str], cudagraphs: bool = False):
    """(name, wrap(fn_or_module) -> (callable, graph counter)) for the compiled engines, in run order.
    `cudagraphs`: Inductor's reduce-overhead mode and our CUDA-graph mode instead of the defaults."""
    def inductor(obj):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        if inductor_backend == "inductor":
            compiled = torch.compile(obj, mode="reduce-overhead") if cudagraphs else torch.compile(obj)
        else:
            compiled = torch.compile(obj, backend=inductor_backend)
        return compiled, lambda: (int(torch._dynamo.utils.counters["stats"]["unique_graphs"]), None)
    inductor.own_random_stream = inductor_backend == "inductor"      # Philox dropout in its kernels

    def ours(obj):
        from dynamo_lite.backends.triton import precompile
        dl.reset()
        counting = CountingBackend(ours_backend, cudagraphs)
        before = dict(precompile.stats)
        kernels = lambda: (sum(c.kernel_count for c in counting.compiled),            # noqa: E731
                           sum(1 for c in counting.compiled if c.fallback_reason),
                           [c.cuda_graph for c in counting.compiled if c.cuda_graph is not None],
                           sum(len(c.specializations) or 1 for c in counting.compiled),
                           {k: v - before.get(k, 0) for k, v in precompile.stats.items()},
                           counting.phases())
        return dl.capture(obj, backend=counting), lambda: (counting.graphs, kernels() if counting.compiled else None)
    out = []
    if inductor_backend:
        out.append(("inductor", inductor))
    out.append(("ours", ours))
    return out


def run_forward(spec: Spec, sizes: Sizes, device, dtype, engines) -> Row:
    row = Row(spec.name, "forward")
    torch.manual_seed(0)
    model, inputs, _ = spec.build(sizes, device)
    model = model.to(device=device).eval()
    model = model.to(dtype)
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in inputs.items() if k != "target"}
    tol = tolerance(dtype)
    with torch.no_grad():
        ref, row.eager.first_call_s = first_call(lambda: model(**inputs), device)
        def attempt(wrap, result):
            compiled, counter = wrap(copy.deepcopy(model))
            out, result.first_call_s = first_call(lambda: compiled(**inputs), device)
            result.max_diff, result.correct = compare_outputs(out, ref, tol)
            _record_counts(result, counter)
            return lambda: compiled(**inputs)
        timed = {"eager": lambda: model(**inputs), **_each_engine(row, engines, device, attempt)}
        time_interleaved(timed, _results(row), device)
    return row


def _results(row: Row) -> dict:
    return {"eager": row.eager, "inductor": row.inductor, "ours": row.ours}


def _each_engine(row: Row, engines, device, attempt: Callable) -> dict:
    """{engine: what to time} for the engines `attempt(wrap, result)` set up and checked (it
    returns the call to time): an exception is that engine's status in the row, never the end
    of the run; memory is freed after each."""
    timed = {}
    for name, wrap in engines:
        result = getattr(row, name)
        try:
            timed[name] = attempt(wrap, result)
        except Exception as e:
            result.status = _error(e)
        finally:
            _free(device)
    return timed


#: generate rows: the prompt (the row's batch, GENERATE_PROMPT tokens) and the tokens generated
GENERATE_PROMPT, GENERATE_NEW = 128, 64


def run_generate(spec: Spec, sizes: Sizes, device, dtype, engines) -> Row:
    """`model.generate(prompt, max_new_tokens=N)` greedy, every other generation default kept
    (DynamicCache): each engine's `model.forward` compiled, the way transformers documents it
    for torch.compile. Times: a whole generate call (ms), its first call (compiles included, one
    per new shape where an engine specializes on shapes); the notes give the shapes our backend
    compiled. Correct: the same tokens as eager's, or a first difference at a near-tie of eager's
    own logits there (within the row's tolerance of its top logit: low precision may pick either)."""
    row = Row(spec.name + " generate", "generate")
    torch.manual_seed(0)
    model, inputs, _ = spec.build(sizes, device)
    model = model.to(device=device, dtype=dtype).eval()
    prompt = inputs["input_ids"][:, :min(sizes.seq, 8 if sizes.quick else GENERATE_PROMPT)]
    new = 6 if sizes.quick else GENERATE_NEW
    pad = model.config.eos_token_id if model.config.pad_token_id is None else model.config.pad_token_id
    if isinstance(pad, (list, tuple)):
        pad = pad[0]

    mask = torch.ones_like(prompt)                               # as a tokenizer returns it

    def generate(m):
        return m.generate(prompt, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                          pad_token_id=pad)
    tol = tolerance(dtype)
    with torch.no_grad():
        ref, row.eager.first_call_s = first_call(lambda: generate(model), device)
        def attempt(wrap, result):
            m = copy.deepcopy(model)
            m.forward, counter = wrap(m.forward)
            out, result.first_call_s = first_call(lambda: generate(m), device)
            result.correct, result.agreement = _same_tokens(model, out, ref, prompt.shape[1], tol)
            _record_counts(result, counter)
            return lambda: generate(m)
        timed = {"eager": lambda: generate(model), **_each_engine(row, engines, device, attempt)}
        _time_calls(timed, _results(row), device)
    return row


def _same_tokens(model, out, ref, start: int, tol: float) -> tuple[bool, str]:
    if out.shape == ref.shape and torch.equal(out, ref):
        return True, "same tokens"
    if out.shape[0] != ref.shape[0]:
        return False, f"{tuple(out.shape)} tokens, eager {tuple(ref.shape)}"
    length = min(out.shape[1], ref.shape[1])
    differs = (out[:, :length] != ref[:, :length]).any(0).nonzero()
    if len(differs) == 0:
        return False, f"{out.shape[1] - start} new tokens, eager {ref.shape[1] - start}"
    at = int(differs[0])
    logits = model(ref[:, :at]).logits[:, -1].float()                 # eager's own, before the difference
    rows = (out[:, at] != ref[:, at]).nonzero().flatten()
    picked = logits[rows, out[rows, at]]
    best = logits[rows].max(-1).values
    near = bool(((best - picked) <= tol * best.abs().clamp(min=1.0)).all())
    return near, f"first difference at new token {at - start}: " + ("a near-tie of eager's logits" if near else
                                                                      "not a near-tie")


def _time_calls(timed: dict, results: dict, device, rounds: int = ROUNDS) -> None:
    """Long calls (a whole generate): wall time of one call per engine per round, in turns, the
    median round; a raising engine keeps that as its status."""
    seen: dict = {name: [] for name in timed}
    for _ in range(rounds):
        for name, fn in list(timed.items()):
            try:
                seen[name].append(first_call(fn, device)[1] * 1e3)
            except Exception as e:
                results[name].status = _error(e)
                del timed[name]
    for name in timed:
        results[name].ms = statistics.median(seen[name])


STEP_SEED = 1234     # torch.manual_seed before each checked step (dropout's masks are eager's then)


def run_train(spec: Spec, sizes: Sizes, device, dtype, engines) -> Row:
    row = Row(spec.name + " train step", "train")
    torch.manual_seed(0)
    model, inputs, loss_fn = spec.build(sizes, device)
    model = model.to(device).train()
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout) and m.p > 0]
    row.dropouts = len(dropouts)
    autocast = None if dtype == torch.float32 else dtype
    step = make_train_step(loss_fn, torch.device(device).type, autocast)
    tol = tolerance(dtype)

    initial = [p.detach().float().clone() for p in model.parameters()]

    def two_steps(fn, m, opt, seed=STEP_SEED):
        torch.manual_seed(seed)
        (l1, first) = first_call(lambda: fn(m, opt, inputs), device)
        g1 = grads(m)
        torch.manual_seed(seed + 1)
        l2 = fn(m, opt, inputs)
        updates = [p.detach().float() - p0 for p, p0 in zip(m.parameters(), initial)]
        return Steps((float(l1), float(l2)), g1, updates), first

    def eager_steps(fn, seed=STEP_SEED):
        m = copy.deepcopy(model)
        opt = make_optimizer(spec.train, m)
        steps, first = two_steps(fn, m, opt, seed)
        return m, opt, steps, first

    # The allowances: eager's distance from fp32, with dropout off where the model has it on.
    noise = None
    with _dropout_off(dropouts):
        with _exact_fp32():
            exact = eager_steps(make_train_step(loss_fn, torch.device(device).type, None))[2]
        if dropouts:
            noise = eager_steps(step)[2]
            if eager_steps(step, seed=STEP_SEED + 7)[2].losses[0] != noise.losses[0]:
                row.status = "not checkable: the model is random with every nn.Dropout at p=0"
                return row
    eager_model, eager_opt, eager, row.eager.first_call_s = eager_steps(step)
    reference = eager if dropouts else None
    noise = eager if noise is None else noise
    row.eager_error = gradient_error(noise, exact)
    row.checkable = checkable(exact, noise, tol)
    timed = {"eager": (lambda m, o: lambda: step(m, o, inputs))(eager_model, eager_opt)}
    eager_model = eager_opt = None

    def attempt(wrap, result):
        m = copy.deepcopy(model)
        opt = make_optimizer(spec.train, m)
        compiled, counter = wrap(step)
        steps, result.first_call_s = two_steps(compiled, m, opt)
        if dropouts and getattr(wrap, "own_random_stream", False):
            result.max_diff, result.correct = None, None       # its masks are not eager's
        else:
            result.max_diff, result.correct = compare_training(steps, exact, noise, tol, reference)
        _record_counts(result, counter)
        return lambda: compiled(m, opt, inputs)
    timed.update(_each_engine(row, engines, device, attempt))
    time_interleaved(timed, _results(row), device)
    return row


@contextlib.contextmanager
def _dropout_off(modules):
    saved = [m.p for m in modules]
    for m in modules:
        m.p = 0.0
    try:
        yield
    finally:
        for m, p in zip(modules, saved):
            m.p = p


@contextlib.contextmanager
def _exact_fp32():
    """fp32 without TF32 (cuDNN convolutions use TF32 by default): the training rows' reference."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _pool_note(pool: Optional[dict]) -> str:
    """How the first call's kernels were compiled: by the compile workers, or by the parent (jobs
    it took back, or that failed in a worker), which is what makes a first call slow."""
    if not pool or not pool.get("submitted"):
        return ""
    deaths = pool.get("worker_died", 0) + pool.get("start_failed", 0)
    return (f" (compile pool: {pool['compiled']} of {pool['submitted']} jobs compiled by workers, "
            f"{pool['taken_back']} taken back, {pool['failed']} failed"
            + (f", {deaths} worker deaths or failed starts" if deaths else "") + ")")


def _phases_note(phases: Optional[dict]) -> str:
    """Our first call's seconds by phase (the rest is capture and running the graph)."""
    if not phases:
        return ""
    return (" (first call: lowering {lower:.1f} s, tuning {tune:.1f} s with its compiles and waits, "
            "compiling chosen configs in the parent {compile:.1f} s, waiting for workers {wait:.1f} s in all)"
            ).format(**phases)


def _record_counts(result: EngineResult, counter):
    result.graphs, made = counter()
    if made is not None:
        result.kernels, result.fallbacks, result.recorded, result.shapes, result.pool, result.phases = made


def _error(e: Exception) -> str:
    traceback.print_exc(limit=3)
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _free(device):
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------

def run_models(*, device="cuda", quick=False, dtype: Optional[torch.dtype] = None, k: str = "",
               only: str = "all", ours_backend: Optional[str] = None, inductor_backend: Optional[str] = "inductor",
               specs=None, on_row: Callable = lambda row: None, cudagraphs: bool = False) -> list[Row]:
    """Every selected row (`only`: "all", a mode or a tuple of modes); `inductor_backend=None`
    leaves Inductor out (its results stay empty)."""
    cuda = torch.device(device).type == "cuda"
    dtype = dtype or (torch.bfloat16 if cuda else torch.float32)
    ours_backend = ours_backend or ("triton" if cuda else "eager")
    sizes = Sizes(batch=2, seq=64, image=64, quick=True) if quick else Sizes(batch=8, seq=512, image=224, quick=False)
    engines = _engines(ours_backend, inductor_backend, cudagraphs)
    rows = []
    for spec in specs or SPECS:
        wanted = {"forward": True, "train": bool(spec.train), "generate": spec.generate}
        modes = [m for m in ("forward", "train", "generate") if (only == "all" or m in (only,) or
                                                                 not isinstance(only, str) and m in only) and wanted[m]]
        for mode in modes:
            name = spec.name + {"forward": "", "train": " train step", "generate": " generate"}[mode]
            if k and k.lower() not in name.lower():
                continue
            if importlib.util.find_spec(spec.library) is None:
                row = Row(name, mode, status=f"skipped: {spec.library} is not installed")
            else:
                try:
                    run = {"forward": run_forward, "train": run_train, "generate": run_generate}[mode]
                    row = run(spec, sizes, device, dtype, engines)
                except Exception as e:             # the model itself failed (build or eager run)
                    row = Row(name, mode, status=_error(e))
                    _free(device)
            if inductor_backend is None and row.status == "ok":
                row.inductor.status = "skipped"
            rows.append(row)
            on_row(row)
    return rows


def geomean(xs) -> Optional[float]:
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _fmt(x, spec):
    return format(x, spec) if x is not None else "–"


def _seconds(x) -> str:
    return f"{x:7.1f}s" if x is not None else f"{'–':>8s}"


def _ok(r: EngineResult) -> str:
    if r.status != "ok":
        return "–" if r.status == "skipped" else "ERR"
    return {True: "yes", False: "NO", None: "–"}[r.correct]


HEADER = (f"{'model':52s} {'eager':>8s} {'inductor':>8s} {'ours':>8s} {'ours/ind':>8s} {'ind 1st':>8s} "
          f"{'ours 1st':>8s} {'ind diff':>9s} {'ours diff':>9s} {'ok ind/ours':>11s} {'graphs ind/ours':>15s}  notes")


def format_row(row: Row) -> str:
    if row.status != "ok":
        return f"{row.name:52s} {row.status}"
    e, i, o = row.eager, row.inductor, row.ours
    notes = []
    if row.eager_error is not None:
        notes.append(f"eager vs fp32: first-step gradients {row.eager_error:.2g} off")
    if row.checkable is not None:
        notes.append(f"{row.checkable[0]}/{row.checkable[1]} tensors checkable")
    if row.dropouts:
        notes.append(f"dropout on ({row.dropouts} modules): checked against eager's steps with its masks"
                     + ("; inductor's own masks not checked" if i.status == "ok" and i.correct is None else ""))
    for who, r in (("inductor", i), ("ours", o)):
        if r.agreement and r.agreement != "same tokens":
            notes.append(f"{who}: {r.agreement}")
    if o.shapes is not None and o.shapes > 1 and row.mode == "generate":
        notes.append(f"ours compiled {o.shapes} shapes")
    if o.kernels is not None:
        notes.append(f"{o.kernels} triton kernels" + (f", {o.fallbacks} graph(s) run as captured" if o.fallbacks else "")
                     + _recorded_note(o.recorded) + _pool_note(o.pool) + _phases_note(o.phases))
    for who, r in (("inductor", i), ("ours", o)):
        if r.status not in ("ok", "skipped"):
            notes.append(f"{who}: {r.status}")
    graphs = f"{_fmt(i.graphs, 'd')}/{_fmt(o.graphs, 'd')}"
    return (f"{row.name:52s} {_fmt(e.ms, '8.2f')} {_fmt(i.ms, '8.2f')} {_fmt(o.ms, '8.2f')} "
            f"{_fmt(row.ratio, '8.2f')} {_seconds(i.first_call_s)} {_seconds(o.first_call_s)} "
            f"{_fmt(i.max_diff, '9.2g')} {_fmt(o.max_diff, '9.2g')} {_ok(i) + '/' + _ok(o):>11s} {graphs:>15s}  "
            + "; ".join(notes))


def _recorded_note(recorded: Optional[list]) -> str:
    if not recorded:
        return ""
    done = recorded.count("recorded")
    why = sorted({r for r in recorded if r != "recorded"})
    return f", {done} of {len(recorded)} graph(s) recorded into CUDA graphs" + (f" ({'; '.join(why)})" if why else "")


def summary(rows: list[Row]) -> list[str]:
    lines = []
    for mode in ("forward", "train", "generate"):
        ratios = [r.ratio for r in rows if r.mode == mode and r.ratio]
        firsts = [r.ours.first_call_s / r.inductor.first_call_s for r in rows
                  if r.mode == mode and r.ours.first_call_s and r.inductor.first_call_s]
        g, gf = geomean(ratios), geomean(firsts)
        if g is not None:
            lines.append(f"geomean ours/Inductor, {mode}: {g:.2f} over {len(ratios)} rows; "
                         f"first call ours/Inductor: {_fmt(gf, '.2f')}")
    wrong = [f"{r.name} ({who})" for r in rows for who in ("inductor", "ours") if getattr(r, who).correct is False]
    lines.append("results differing from eager beyond tolerance: " + (", ".join(wrong) if wrong else "none"))
    return lines


CACHE_ENV = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "DYNAMO_LITE_CACHE_DIR")


def fresh_caches() -> tempfile.TemporaryDirectory:
    """Point the three compilers' on-disk caches at empty directories (each reads its variable
    when it first looks there, and the compile workers each starts inherit it). Without this, a
    first call times what an earlier run on the machine left behind: a kernel found on disk is not
    compiled, a launch config found there not tuned."""
    tmp = tempfile.TemporaryDirectory(prefix="models_gpu_caches_")
    for name in CACHE_ENV:
        os.environ[name] = os.path.join(tmp.name, name.split("_CACHE_DIR")[0].lower())
    return tmp


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny configs and inputs")
    parser.add_argument("-k", default="", help="only rows whose name contains this (case-insensitive)")
    parser.add_argument("--only", choices=("all", "forward", "train", "generate"), default="all")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None,
                        help="forward dtype and autocast dtype (default bf16 on CUDA, fp32 on the CPU)")
    parser.add_argument("--ours-backend", choices=("triton", "eager"), default=None,
                        help="dynamo_lite backend (default triton on CUDA, eager on the CPU)")
    parser.add_argument("--inductor", choices=("auto", "on", "off"), default="auto",
                        help="auto: on with CUDA, off on the CPU")
    parser.add_argument("--json", default="", help="write the rows to this file (rewritten after each row)")
    parser.add_argument("--cudagraphs", action="store_true",
                        help="forward rows with Inductor's reduce-overhead mode and our CUDA-graph mode")
    parser.add_argument("--warm-caches", action="store_true",
                        help="keep the compilers' on-disk caches (default: empty ones for the run, so first "
                             "calls compile everything)")
    opts = parser.parse_args(argv)
    cuda = torch.device(opts.device).type == "cuda"
    if not opts.warm_caches:
        caches = fresh_caches()
        print(f"caches: empty, under {caches.name} (--warm-caches keeps the machine's)")
    if cuda and not torch.cuda.is_available():
        print("no CUDA GPU: run with --device cpu --quick for the smoke mode")
        return 1
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, None: None}[opts.dtype]
    inductor = opts.inductor == "on" or (opts.inductor == "auto" and cuda)
    versions = [f"torch {torch.__version__}", f"python {sys.version.split()[0]}"]
    for lib in ("triton", "transformers", "timm", "torchvision"):
        if importlib.util.find_spec(lib) is not None:
            versions.append(f"{lib} {getattr(__import__(lib), '__version__', '?')}")
        else:
            versions.append(f"{lib} not installed")
    print(f"device: {torch.cuda.get_device_name() if cuda else 'cpu'}; " + ", ".join(versions))
    print("times in ms; first calls in s; diff: largest |engine - eager| "
          "(train: worst error / allowance against eager in fp32, <= 1 passes)")
    print(HEADER, flush=True)
    done = []

    def on_row(row):
        done.append(row)
        print(format_row(row), flush=True)
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump([dict(dataclasses.asdict(r), ratio=r.ratio) for r in done], f, indent=1)

    rows = run_models(device=opts.device, quick=opts.quick, dtype=dtype, k=opts.k, only=opts.only,
                      ours_backend=opts.ours_backend, inductor_backend="inductor" if inductor else None,
                      on_row=on_row, cudagraphs=opts.cudagraphs)
    for line in summary(rows):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
