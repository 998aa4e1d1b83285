"""Benchmark of the `triton` backend against eager and torch.compile (Inductor), measured in one run.

    python bench/triton.py [--quick] [-k NAME]

Includes optimizer updates written in torch ops in place (Adam over one 2^24 tensor and over 40
parameters, SGD momentum with `_foreach_` ops): the bandwidth column counts p, g, m, v read and
p, m, v written.

For each workload: eager time, Inductor time, ours (dynamo_lite.capture(..., backend="triton")),
ours/Inductor, ours(tc) (our backend under torch.compile's capture, to separate capture overhead
from kernel time; times in ms), and for memory-bound workloads the achieved bandwidth (minimum bytes moved / time)
against a device-to-device copy measured in the same run (`%copy`: a 1 GiB copy; `%same`: a copy
moving the workload's own bytes, the ceiling at its size). Then the geometric-mean speedup over
eager of Inductor and of ours, and the compile time of a new kernel (a pointwise graph with a
constant no earlier kernel had). Needs a CUDA GPU. Times are medians of `triton.testing.do_bench`
(which flushes L2 between runs).
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

# This file is named like the `triton` package: keep its own directory off the import path (where
# `python bench/triton.py` puts it), or `import triton` would import this script.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import torch                                               # noqa: E402
import torch.nn as nn                                      # noqa: E402
import torch.nn.functional as F                            # noqa: E402
from torch import fx                                       # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.backends.triton import triton_backend     # noqa: E402


# ---------------------------------------------------------------------------------------------
# workloads: (name, fn or module, inputs, minimum bytes moved or None)
# ---------------------------------------------------------------------------------------------

def pointwise8(x, y):
    return ((x * 2 + 1).relu() * y - 0.5).sigmoid() * x + y


def pointwise8_tiny(x):
    return ((x * 2 + 1).relu() * x - 0.5).sigmoid() * x + x


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def rmsnorm_swiglu(x, w, gate, up):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6), F.silu(gate) * up


def attention_softmax(scores, mask):
    s = scores * (1.0 / math.sqrt(64))
    return s.masked_fill(mask, float("-inf")).softmax(-1)


class Block(nn.Module):
    """Pre-LN GPT block: attention (SDPA, extern) and a GELU MLP."""

    def __init__(self, d=1024, heads=16):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LlamaMLPBlock(nn.Module):
    """RMSNorm + SwiGLU MLP with a residual (LLaMA's feed-forward half)."""

    def __init__(self, d=2048, hidden=5632):
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=1e-6)
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class ConvNet(nn.Module):
    """A small ResNet-style stack (eval-mode BatchNorm, ReLU, residual adds, global pooling)."""

    def __init__(self, c=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)) for _ in range(2))
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = F.relu(x + block(x))
        return self.head(x.mean((2, 3)))


def adam_step(params, grads, exp_avgs, exp_avg_sqs, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """An Adam update written in torch ops, in place (capturable form: `step` is a tensor)."""
    step += 1
    bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        p.sub_(lr * (m / bias1) / ((v.sqrt() / bias2.sqrt()).add_(eps)))


def sgd_momentum_foreach(params, grads, bufs):
    torch._foreach_mul_(bufs, 0.9)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-0.01)


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def group_norm(x, w, b):
    return F.group_norm(x, 32, w, b)


def instance_norm_by_hand(x):
    m = x.mean((2, 3), keepdim=True)
    v = x.var((2, 3), keepdim=True, unbiased=False)
    return (x - m) / torch.sqrt(v + 1e-5)


def transpose_copy(x):
    return x.transpose(1, 2).contiguous()


def transposed_add_bias(x, y, b):
    return x.transpose(1, 2) + y + b


def sum_dim0(x):
    return x.sum(0)


def cumulative_probabilities(x):
    """Top-p sampling's running sum of a softmax over the vocabulary's rows (a scan)."""
    return torch.softmax(x, -1).cumsum(-1)


def sum_dim1(x):
    return x.sum(1)


def moe_router(logits):
    """A mixture-of-experts router (Mixtral's): softmax over the experts, the top 2, renormalized."""
    w, experts = logits.softmax(-1).topk(2, dim=-1)
    return w / w.sum(-1, keepdim=True), experts


def lm_head(h, w):
    """GPT-2's tied LM head as its forward returns it: [8, 512, 768] @ wte.t(), 50257 columns
    (rows misaligned for cuBLAS; eager's own matmul takes an align-1 kernel)."""
    return F.linear(h, w)


def sort_rows(x):
    """Top-p sampling's first step: each row's probabilities sorted, descending (values, indices;
    stable, so that every engine's indices of tied values are eager's)."""
    return torch.sort(x, dim=-1, descending=True, stable=True)


def embedding_backward(grad, ids):
    """A token embedding's gradient, as a training graph computes it (GPT-2's 50257x768 table):
    each token's gradient row added into its row of a zero table, repeated tokens summed."""
    return torch.ops.aten.embedding_dense_backward(grad, ids, 50257, -1, False)


def optimizer_state(shapes, dev):
    params = [torch.randn(s, device=dev) for s in shapes]
    return (params, [torch.randn_like(p) for p in params], [torch.zeros_like(p) for p in params],
            [torch.zeros_like(p) for p in params])


def workloads(quick: bool):
    dev = "cuda"
    n = 1 << (22 if quick else 26)
    rows = 2048 if quick else 16384
    out = []
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    out.append(("pointwise chain (8 ops, 2^%d fp32)" % int(math.log2(n)), pointwise8, (x, y), 3 * n * 4))
    s = torch.randn(rows, 4096, device=dev)
    out.append((f"softmax {rows}x4096 fp32", softmax, (s,), 2 * s.numel() * 4))
    w, b = torch.randn(4096, device=dev), torch.randn(4096, device=dev)
    out.append((f"layer_norm {rows}x4096 fp32", layer_norm, (s, w, b), 2 * s.numel() * 4))
    xb = torch.randn(rows, 4096, device=dev, dtype=torch.bfloat16)
    g, u = torch.randn_like(xb), torch.randn_like(xb)
    wb = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    out.append((f"rms_norm + SiLU-gate {rows}x4096 bf16", rmsnorm_swiglu, (xb, wb, g, u), 5 * xb.numel() * 2))
    heads = 4 if quick else 32
    scores = torch.randn(4, heads, 1024, 1024, device=dev, dtype=torch.float16)
    mask = torch.ones(1024, 1024, device=dev, dtype=torch.bool).triu(1)
    out.append((f"attention softmax + causal mask 4x{heads}x1024x1024 fp16", attention_softmax,
                (scores, mask), 2 * scores.numel() * 2))
    torch.manual_seed(0)
    blk = Block().to(dev).half().eval()
    out.append(("transformer block 8x1024x1024 fp16", blk, (torch.randn(8, 1024, 1024, device=dev, dtype=torch.half),), None))
    mlp = LlamaMLPBlock().to(dev).to(torch.bfloat16).eval()
    out.append(("LLaMA RMSNorm+SwiGLU MLP 8x512x2048 bf16", mlp,
                (torch.randn(8, 512, 2048, device=dev, dtype=torch.bfloat16),), None))
    conv = ConvNet().to(dev).eval()
    out.append(("ResNet-style ConvNet 32x3x64x64 fp32", conv, (torch.randn(32, 3, 64, 64, device=dev),), None))
    # reductions of every shape: cross-entropy (row kernel + gather), group/instance norm, outer sums
    vocab_rows = 1024 if quick else 8192
    target = torch.randint(0, 32000, (vocab_rows,), device=dev)
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        logits = torch.randn(vocab_rows, 32000, device=dev, dtype=dtype)
        out.append((f"cross-entropy {vocab_rows}x32000 {str(dtype)[6:]}", cross_entropy, (logits, target),
                    logits.numel() * size))
    batch = 4 if quick else 32
    xg = torch.randn(batch, 64, 128, 128, device=dev, dtype=torch.float16)
    wg, bg = torch.randn(64, device=dev, dtype=torch.float16), torch.randn(64, device=dev, dtype=torch.float16)
    out.append((f"group_norm {batch}x64x128x128 fp16 (32 groups)", group_norm, (xg, wg, bg), 2 * xg.numel() * 2))
    out.append((f"instance norm by hand {batch}x64x128x128 fp16", instance_norm_by_hand, (xg,), 2 * xg.numel() * 2))
    # transposed operands (attention's `.transpose(1, 2).reshape(...)`, a residual added to a
    # transposed view): a 1-D tile reads one of the two operands a sector per element
    tb = 4 if quick else 32
    xt = torch.randn(tb, 1024, 1024, device=dev, dtype=torch.float16)
    yt, bt = torch.randn_like(xt), torch.randn(1024, device=dev, dtype=torch.float16)
    out.append((f"transpose(1, 2).contiguous() {tb}x1024x1024 fp16", transpose_copy, (xt,), 2 * xt.numel() * 2))
    out.append((f"x.transpose(1, 2) + y + bias {tb}x1024x1024 fp16", transposed_add_bias, (xt, yt, bt),
                3 * xt.numel() * 2))
    x3 = torch.randn(2048 if quick else 16384, 64, 256, device=dev)
    out.append((f"sum over dim 0 of {'x'.join(map(str, x3.shape))} fp32", sum_dim0, (x3,), x3.numel() * 4))
    out.append((f"sum over dim 1 of {'x'.join(map(str, x3.shape))} fp32", sum_dim1, (x3,), x3.numel() * 4))
    out.append((f"softmax(x).cumsum(-1) {rows}x4096 fp32 (a scan)", cumulative_probabilities, (s,), 2 * s.numel() * 4))
    # top-k and sort (scans of positions): a MoE router over 64 experts, rows of 1024 sorted
    router = torch.randn(4096 if quick else 65536, 64, device=dev)
    out.append((f"MoE router softmax + top-2 of {'x'.join(map(str, router.shape))} fp32", moe_router, (router,), None))
    probs = torch.rand(rows, 1024, device=dev, dtype=torch.float16)
    out.append((f"sort rows descending {rows}x1024 fp16", sort_rows, (probs,), None))
    hb, wte = (torch.randn(2 if quick else 8, 512, 768, device=dev, dtype=torch.bfloat16),
               torch.randn(50257, 768, device=dev, dtype=torch.bfloat16) * 0.05)
    out.append((f"GPT-2 LM head returned {'x'.join(map(str, hb.shape))} @ 768x50257 bf16", lm_head, (hb, wte), None))
    # an embedding's backward (index_put with accumulate: atomic adds): written table + gradient read
    tokens = 512 if quick else 4096
    ge, ids = torch.randn(tokens, 768, device=dev), torch.randint(0, 50257, (tokens,), device=dev)
    out.append((f"embedding backward {tokens}x768 into 50257 rows fp32", embedding_backward, (ge, ids),
                (50257 * 768 + ge.numel()) * 4))
    # optimizer updates: in place (reads p, g, m, v; writes p, m, v)
    m = 1 << (20 if quick else 24)
    state = optimizer_state([(m,)], dev)
    out.append((f"Adam update in place, 2^{int(math.log2(m))} fp32", adam_step,
                (*state, torch.zeros((), device=dev)), 7 * m * 4))
    shapes = [(1024, 1024), (1024,), (4096, 1024), (1024, 4096), (4096,)] * 8
    state = optimizer_state(shapes, dev)
    total = sum(p.numel() for p in state[0])
    out.append((f"Adam in place over {len(shapes)} params ({total / 1e6:.0f}M fp32)", adam_step,
                (*state, torch.zeros((), device=dev)), 7 * total * 4))
    out.append((f"SGD momentum _foreach_ in place over {len(shapes)} params", sgd_momentum_foreach, state[:3], 5 * total * 4))
    return out


# ---------------------------------------------------------------------------------------------
# measurement
# ---------------------------------------------------------------------------------------------

def bench(fn, args) -> float:
    from triton.testing import do_bench
    return do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median")


def wall_per_call(fn, args, calls: int = 500) -> float:
    """Seconds per call, back to back (host overhead included: what a launch-bound graph costs)."""
    for _ in range(20):
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls


def copy_bandwidth() -> float:
    """A 1 GiB device-to-device copy's bandwidth, read + write."""
    return same_size_copy_bandwidth(2 << 30)


_same_size: dict[int, float] = {}


def same_size_copy_bandwidth(nbytes: int) -> float:
    """What `copy_` reaches moving `nbytes` in all (half read, half written), timed as the
    workloads are: the ceiling at that size, where a launch's ramp-up and tail weigh more than in
    copy_bandwidth's 1 GiB."""
    if nbytes not in _same_size:
        src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        _same_size[nbytes] = nbytes / (bench(lambda: dst.copy_(src), ()) * 1e-3)
    return _same_size[nbytes]


def reference(fn, args) -> tuple[object, bool]:
    """(what eager `fn` computes from clones of `args`, whether it updates them in place): for an
    in-place update (it returns None) the reference is the arguments after it."""
    ref = fn(*_clone(args))
    if ref is not None:
        return ref, False
    ref = _clone(args)
    fn(*ref)
    return ref, True


def check_engine(f, args, ref, in_place: bool, name: str):
    """Compare engine `f` with `reference`'s result: its output, or what it wrote into clones of
    `args` when the workload updates them in place."""
    if not in_place:
        check(f(*args), ref, name)
        return
    got = _clone(args)
    f(*got)
    check(_flat(got), _flat(ref), name)


def check(a, b, name):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    for x, y in zip(a, b):
        tol = 2e-2 if x.dtype in (torch.float16, torch.bfloat16) else 1e-3
        if not torch.allclose(x.float(), y.float(), rtol=tol, atol=tol):
            print(f"  !! {name}: results differ, max abs diff {(x.float() - y.float()).abs().max().item():.3g}")
        elif x.stride() != y.stride():            # (Inductor returns a padded matmul result as a view)
            print(f"  !! {name}: strides {x.stride()}, eager's {y.stride()}")


def new_kernel_compile_ms() -> tuple[float, float, float]:
    """Compile a pointwise graph whose constant no earlier kernel had: total, ours, Triton JIT."""
    c = random.random() + 1.0
    x = torch.randn(1 << 20, device="cuda")

    def fn(x):
        return torch.sigmoid(x * c + 0.25) * x

    gm = fx.symbolic_trace(fn)
    torch.cuda.synchronize()
    start = time.perf_counter()
    compiled = triton_backend(gm, [x])
    built = time.perf_counter()
    compiled(x)
    torch.cuda.synchronize()
    done = time.perf_counter()
    jit = sum(l.compile_seconds for l in compiled.compiled_graph.launchers)
    return (done - start) * 1e3, (built - start) * 1e3, jit * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("-k", default="", help="only workloads whose name contains this (or one of these, comma-separated)")
    parser.add_argument("--dump", default="", help="write each workload's compiled source to this folder")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/triton.py needs a CUDA GPU")
        return 1
    import triton
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"python {sys.version.split()[0]}")
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth (1 GiB fp32, read+write): {copy_bw / 1e12:.2f} TB/s")
    header = (f"{'workload':58s} {'eager':>9s} {'inductor':>9s} {'ours':>9s} {'ours/ind':>8s} "
              f"{'ours GB/s':>10s} {'%copy':>6s} {'ind %copy':>9s} {'%same':>6s} {'ours(tc)':>9s}  kernels")
    print(header)
    speed_ours, speed_ind = [], []
    with torch.no_grad():
        for name, fn, args, nbytes in workloads(opts.quick):
            if opts.k and not any(part in name for part in opts.k.split(",")):
                continue
            dl.reset()
            torch._dynamo.reset()
            ours = dl.capture(fn, backend=_recording_backend)
            _recorded.clear()
            ind = torch.compile(fn)
            ref, in_place = reference(fn, args)
            check_engine(ours, args, ref, in_place, name + " (ours)")
            check_engine(ind, args, ref, in_place, name + " (inductor)")
            t_eager, t_ind, t_ours = bench(fn, args), bench(ind, args), bench(ours, args)
            torch._dynamo.reset()                      # the same backend under TorchDynamo's capture
            ours_tc = torch.compile(fn, backend=triton_backend)
            out_tc = ours_tc(*args)
            if not in_place:
                check(out_tc, ref, name + " (ours via torch.compile)")
            t_ours_tc = bench(ours_tc, args)
            if opts.dump:
                os.makedirs(opts.dump, exist_ok=True)
                slug = "".join(ch if ch.isalnum() else "_" for ch in name)[:40]
                with open(os.path.join(opts.dump, slug + ".py"), "w") as f:
                    f.write("\n\n# ---- next graph ----\n\n".join(c.source for c in _recorded))
            kernels = sum(c.kernel_count for c in _recorded)
            externs = sum(sum(c.extern_ops.values()) for c in _recorded)
            fallback = [c.fallback_reason for c in _recorded if c.fallback_reason]
            speed_ours.append(t_eager / t_ours)
            speed_ind.append(t_eager / t_ind)
            bw = ""
            if nbytes:
                ours_bw, ind_bw = nbytes / (t_ours * 1e-3), nbytes / (t_ind * 1e-3)
                same = same_size_copy_bandwidth(nbytes)
                bw = (f"{ours_bw / 1e9:10.0f} {100 * ours_bw / copy_bw:5.0f}% {100 * ind_bw / copy_bw:8.0f}% "
                      f"{100 * ours_bw / same:5.0f}%")
            else:
                bw = f"{'':10s} {'':6s} {'':9s} {'':6s}"
            print(f"{name:58s} {t_eager:8.3f}m {t_ind:8.3f}m {t_ours:8.3f}m {t_ours / t_ind:8.2f} {bw} "
                  f"{t_ours_tc:8.3f}m  "
                  f"{kernels} triton + {externs} extern, {len(_recorded)} graph(s)"
                  + (f" FALLBACK: {fallback}" if fallback else ""))
    geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    if speed_ours:
        print(f"geomean speedup over eager: inductor {geo(speed_ind):.2f}x, ours {geo(speed_ours):.2f}x "
              f"(ours/inductor time {geo(speed_ind) / geo(speed_ours):.2f})")
    tiny = torch.randn(4096, device="cuda")
    dl.reset()
    torch._dynamo.reset()
    times = [wall_per_call(f, (tiny,)) * 1e6 for f in (pointwise8_tiny, torch.compile(pointwise8_tiny),
                                               dl.capture(pointwise8_tiny, backend="triton"),
                                               torch.compile(pointwise8_tiny, backend=triton_backend))]
    print("per-call time of a tiny graph (8-op chain on 4096 elements, launch-bound): eager {:.1f} us, "
          "inductor {:.1f} us, ours {:.1f} us, ours(tc) {:.1f} us".format(*times))
    os.environ["DYNAMO_LITE_TRITON_TUNE"] = "0"
    runs = [new_kernel_compile_ms() for _ in range(3)]
    total, ours, jit = sorted(runs)[1]
    print(f"compile of a new kernel (median of 3): {total:.0f} ms end to end "
          f"(trace+lower+codegen {ours:.0f} ms, Triton JIT {jit:.0f} ms; launch-config tuning excluded)")
    return 0


_recorded = []


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    return x


def _flat(x) -> list:
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return [x]


def _recording_backend(gm, example_inputs):
    compiled = triton_backend(gm, example_inputs)
    _recorded.append(compiled.compiled_graph)
    return compiled


if __name__ == "__main__":
    sys.exit(main())
