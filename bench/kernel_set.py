"""Kernel workloads cut from real models' graphs: eager vs Inductor vs dynamo_lite's triton backend.

    python bench/kernel_set.py [--json FILE] [-k NAME] [--min-ops 2]
    python bench/kernel_set.py --device cpu --quick        # smoke mode: the interpreter, no Inductor

Issue 14 asks for "a kernel set of at least 25 workloads taken from the fused regions of those
models' real graphs (not chosen to suit us)". The workloads are not written here: each model of
bench/models_gpu.py (its forward, at its sizes, in bf16 under `eval()`) is captured by dynamo_lite
with a recording backend, and its torch-level graph is cut at every op a compiler hands to a library
(linear / matmul / convolution / attention / embedding: `EXTERN`). What lies between two such
ops — the normalizations, activations, residual adds, softmaxes, reshapes — is one *region*: what a
fusing compiler should turn into as few kernels as possible. Each region with at least `--min-ops`
ops becomes a workload, its inputs the tensors that flowed into it when the model ran; equal regions
(same ops, same input shapes and dtypes) are kept once, with a count of where they occur.

Per workload: eager, Inductor (`torch.compile`, default mode) and ours (`triton_backend` on the region's
graph) in ms (`triton.testing.do_bench`), ours/Inductor, the bytes the region must move (its inputs
read once, its outputs written once) as % of the device's copy bandwidth for each compiled engine,
and correctness against eager (bf16 tolerance). At the end: geomean ours/Inductor, and how many rows
are above 1.25 and how many reach 90% of copy bandwidth.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]   # bench/triton.py shadows triton
sys.path.insert(0, os.path.dirname(_HERE))

import torch                                               # noqa: E402
import torch.fx                                            # noqa: E402
import torch.nn.functional as F                            # noqa: E402
from torch.fx.passes.split_module import split_module      # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.graph_builder import graph_structure      # noqa: E402

# ops a compiler hands to a library (cuBLAS, cuDNN, flash attention) or to a gather kernel of its own
def _models_gpu():
    """bench/models_gpu.py (its model builders), loaded by path: bench/ on sys.path would make
    bench/triton.py shadow the triton package."""
    if "models_gpu" not in sys.modules:
        spec = importlib.util.spec_from_file_location("models_gpu", os.path.join(_HERE, "models_gpu.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["models_gpu"] = module
        spec.loader.exec_module(module)
    return sys.modules["models_gpu"]


EXTERN = {F.linear, torch._C._nn.linear, torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm,
          F.conv1d, F.conv2d, F.conv3d, torch.conv2d, torch.conv1d, F.scaled_dot_product_attention,
          torch._C._nn.scaled_dot_product_attention, F.embedding, torch.embedding}
EXTERN_METHODS = {"matmul", "bmm", "mm"}
_VIEWS = {"view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "contiguous", "size", "expand",
          "flatten", "split", "chunk", "getitem", "dim", "t"}


@dataclass
class Workload:
    name: str               # model: first op ... last op
    model: str
    ops: list
    occurrences: int
    nbytes: int
    eager_ms: Optional[float] = None
    inductor_ms: Optional[float] = None
    ours_ms: Optional[float] = None
    inductor_gpu_ms: Optional[float] = None   # kernel time per call (profiler), launch overhead aside
    ours_gpu_ms: Optional[float] = None
    kernels: Optional[int] = None
    correct: Optional[bool] = None
    max_diff: Optional[float] = None
    status: str = "ok"

    @property
    def ratio(self) -> Optional[float]:
        return self.ours_ms / self.inductor_ms if self.ours_ms and self.inductor_ms else None

    @property
    def gpu_ratio(self) -> Optional[float]:
        return self.ours_gpu_ms / self.inductor_gpu_ms if self.ours_gpu_ms and self.inductor_gpu_ms else None


def _is_extern(node: torch.fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in EXTERN
    if node.op == "call_method":
        return node.target in EXTERN_METHODS
    return node.op == "call_module"


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def regions(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` split into submodules `submod_K`: each extern op alone, each stretch between them one."""
    part, current, after_extern = {}, 0, False
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if _is_extern(node):
            current += 1
            part[node] = current
            after_extern = True
            continue
        if after_extern:
            current += 1
            after_extern = False
        part[node] = current
    return split_module(gm, gm, lambda node: part[node], keep_original_order=True)


def _capture_graph(spec, sizes, device, dtype):
    """(the model's forward graph as dynamo_lite captured it, its example inputs)."""
    torch.manual_seed(0)
    model, inputs, _ = spec.build(sizes, device)
    model = model.to(device=device).eval().to(dtype)
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in inputs.items() if k != "target"}
    seen = []

    def record(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward
    dl.reset()
    with torch.no_grad():
        dl.capture(model, backend=record)(**inputs)
    return max(seen, key=lambda s: len(s[0].graph.nodes)) if seen else (None, None)


def _region_inputs(split: torch.fx.GraphModule, example_inputs: list) -> dict:
    """{submodule name: the arguments it was called with} from one run of the split graph."""
    found = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            found.setdefault(target, args)
            return super().call_module(target, args, kwargs)
    with torch.no_grad():
        Recorder(split).run(*example_inputs)
    return found


def _structure_key(sub: torch.fx.GraphModule, args) -> str:
    ops = graph_structure(sub)
    shapes = [(tuple(a.shape), a.stride(), str(a.dtype)) if isinstance(a, torch.Tensor) else repr(a) for a in args]
    return repr((ops, shapes))


def _nbytes(values) -> int:
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (tuple, list)):
            total += _nbytes(v)
    return total


def collect(sizes, device, dtype, min_ops: int, pattern: str = "") -> list[tuple[Workload, torch.fx.GraphModule, tuple]]:
    mg = _models_gpu()
    out, by_key = [], {}
    for spec in mg.SPECS:
        if pattern and pattern not in spec.name:
            continue
        if importlib.util.find_spec(spec.library) is None:
            print(f"kernel_set: {spec.name}: {spec.library} is not installed", file=sys.stderr)
            continue
        try:
            gm, example = _capture_graph(spec, sizes, device, dtype)
        except Exception as e:                 # noqa: BLE001 -- a model that cannot be built is skipped, said
            print(f"kernel_set: {spec.name}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            continue
        if gm is None:
            continue
        split = regions(gm)
        args_of = _region_inputs(split, example)
        for name, sub in split.named_children():
            if name not in args_of:
                continue
            calls = [n for n in sub.graph.nodes if n.op in ("call_function", "call_method")]
            real = [n for n in calls if _op_name(n) not in _VIEWS]
            if any(_is_extern(n) for n in calls) or len(real) < min_ops:
                continue
            args = args_of[name]
            if not all(isinstance(a, torch.Tensor) for a in args):
                continue
            key = _structure_key(sub, args)
            if key in by_key:
                by_key[key].occurrences += 1
                continue
            with torch.no_grad():
                result = sub(*args)
            results = result if isinstance(result, (tuple, list)) else (result,)
            ops = [_op_name(n) for n in real]
            short = spec.name.split(" (")[0]
            label = f"{short}: {' '.join(ops[:4])}{' ...' if len(ops) > 4 else ''} ({len(ops)} ops)"
            w = Workload(label, spec.name, ops, 1, _nbytes(args) + _nbytes(results))
            by_key[key] = w
            out.append((w, sub, tuple(args)))
    return out


def _bench_ms(fn, device) -> float:
    if device.type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn)
    start = time.perf_counter()
    for _ in range(3):
        fn()
    return (time.perf_counter() - start) / 3 * 1e3


def _gpu_ms(fn, device, calls: int = 20) -> Optional[float]:
    """GPU time per call: the kernels' (and copies') durations summed over `calls` profiled calls.
    Regions of a model at its real sizes run for microseconds, so a wall-clock timing of one call
    measures the engines' per-call overhead; this measures what their kernels cost."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = sum(e.time_range.elapsed_us() for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    return total / calls / 1e3


def _compare(got, ref, tol: float) -> tuple[float, bool]:
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    worst, ok = 0.0, len(got) == len(ref)
    for g, r in zip(got, ref):
        if not isinstance(r, torch.Tensor):
            continue
        diff = (g.float() - r.float()).abs().max().item() if r.numel() else 0.0
        bound = tol * max(1.0, r.float().abs().max().item() if r.numel() else 1.0)
        worst = max(worst, diff)
        ok = ok and g.shape == r.shape and (diff <= bound or (math.isnan(diff) and r.float().isnan().any().item()))
    return worst, ok


def run(workloads, device, inductor: bool, tol: float) -> None:
    from dynamo_lite.backends.triton import triton_backend
    for w, sub, args in workloads:
        try:
            with torch.no_grad():
                ref = sub(*args)
                w.eager_ms = _bench_ms(lambda: sub(*args), device)
                if inductor:
                    from torch import _dynamo
                    _dynamo.reset()
                    compiled = torch.compile(sub)
                    compiled(*args)
                    w.inductor_ms = _bench_ms(lambda: compiled(*args), device)
                    w.inductor_gpu_ms = _gpu_ms(lambda: compiled(*args), device)
                ours = triton_backend(sub, list(args))
                got = ours(*args)
                w.max_diff, w.correct = _compare(got, ref, tol)
                info = getattr(ours, "compiled_graph", None)
                w.kernels = getattr(info, "kernel_count", None)
                if getattr(info, "fallback_reason", None):
                    w.status = f"ran as captured: {info.fallback_reason[:60]}"
                w.ours_ms = _bench_ms(lambda: ours(*args), device)
                w.ours_gpu_ms = _gpu_ms(lambda: ours(*args), device)
        except Exception as e:                 # noqa: BLE001 -- a workload's failure is its row
            w.status = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"


def copy_bandwidth() -> float:
    """Bytes per second of a 1 GiB device-to-device copy (read + write)."""
    src = torch.empty(1 << 28, device="cuda")
    dst = torch.empty_like(src)
    ms = _bench_ms(lambda: dst.copy_(src), torch.device("cuda"))
    return 2 * src.numel() * 4 / (ms * 1e-3)


def _geomean(xs) -> Optional[float]:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def table(workloads, copy_bw: Optional[float]) -> str:
    lines = [f"{'workload':66s} {'x':>3s} {'eager':>7s} {'ind':>7s} {'ours':>7s} {'o/i':>5s} | {'ind gpu':>8s} "
             f"{'ours gpu':>8s} {'o/i':>5s} {'ind %cp':>7s} {'ours %cp':>8s} {'kern':>4s} ok"]
    for w in workloads:
        def pct(ms):
            return f"{w.nbytes / (ms * 1e-3) / copy_bw * 100:.0f}%" if ms and copy_bw else "-"

        def fmt(ms):
            return f"{ms:.3f}" if ms else "-"

        def us(ms):
            return f"{ms * 1e3:.1f}us" if ms else "-"

        def r(x):
            return f"{x:.2f}" if x else "-"
        ok = "-" if w.correct is None else ("yes" if w.correct else "NO")
        lines.append(f"{w.name[:66]:66s} {w.occurrences:>3d} {fmt(w.eager_ms):>7s} {fmt(w.inductor_ms):>7s} "
                     f"{fmt(w.ours_ms):>7s} {r(w.ratio):>5s} | {us(w.inductor_gpu_ms):>8s} {us(w.ours_gpu_ms):>8s} "
                     f"{r(w.gpu_ratio):>5s} {pct(w.inductor_gpu_ms):>7s} {pct(w.ours_gpu_ms):>8s} "
                     f"{w.kernels if w.kernels is not None else '-':>4} {ok}"
                     + ("" if w.status == "ok" else f"  [{w.status}]"))
    wall, gpu = [w.ratio for w in workloads if w.ratio], [w.gpu_ratio for w in workloads if w.gpu_ratio]
    if wall:
        lines.append(f"geomean ours/Inductor over {len(wall)} workloads: per call (wall) {_geomean(wall):.2f}"
                     + (f", GPU time {_geomean(gpu):.2f}; GPU time above 1.25: {sum(x > 1.25 for x in gpu)}" if gpu else ""))
    if copy_bw:
        big = [w for w in workloads if w.nbytes >= 64 << 20]
        reach = [w for w in big if w.ours_gpu_ms and w.nbytes / (w.ours_gpu_ms * 1e-3) >= 0.9 * copy_bw]
        reach_ind = [w for w in big if w.inductor_gpu_ms and w.nbytes / (w.inductor_gpu_ms * 1e-3) >= 0.9 * copy_bw]
        lines.append(f"regions moving >= 64 MiB: {len(big)}; at >= 90% of copy bandwidth (GPU time): ours "
                     f"{len(reach)}, Inductor {len(reach_ind)}")
    bad = [w.name for w in workloads if w.correct is False]
    lines.append(f"results differing from eager beyond tolerance: {', '.join(bad) if bad else 'none'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny models and inputs (smoke mode)")
    parser.add_argument("--min-ops", type=int, default=2, help="regions with fewer ops (views aside) are left out")
    parser.add_argument("-k", default="", help="only models whose name contains this")
    parser.add_argument("--inductor", choices=("on", "off"), default=None)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    mg = _models_gpu()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    sizes = mg.Sizes(batch=2 if args.quick else 8, seq=16 if args.quick else 512, image=32 if args.quick else 224,
                     quick=args.quick)
    start = time.perf_counter()
    workloads = collect(sizes, device, dtype, args.min_ops, args.k)
    inductor = (args.inductor or ("on" if cuda else "off")) == "on"
    run(workloads, device, inductor, 2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3)
    copy_bw = copy_bandwidth() if cuda else None
    print(f"kernel_set: {len(workloads)} workloads from {len({w.model for w, _, _ in workloads})} models, "
          f"{torch.cuda.get_device_name() if cuda else 'CPU'}, torch {torch.__version__}, "
          f"{time.perf_counter() - start:.0f} s")
    print(table([w for w, _, _ in workloads], copy_bw))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(asdict(w), ratio=w.ratio, gpu_ratio=w.gpu_ratio) for w, _, _ in workloads], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
