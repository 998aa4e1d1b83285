"""Compile latency: a cold process's first call of a model, per engine, each in a fresh process.

    python bench/compile_latency.py [--models gpt2,resnet50] [--engines inductor,capture,ours-w0,ours]
                                    [--repeat N] [--json FILE] [--profile DIR]
    python bench/compile_latency.py --device cpu --quick --engines capture,ours-w0   # smoke mode

Issue 14 (item 7) asks that a cold process's first graph be no slower than Inductor's, and the first
call of a Hugging Face model at most half of Inductor's. Each measurement runs in its own
subprocess whose caches are empty temporary directories (`TRITON_CACHE_DIR`,
`TORCHINDUCTOR_CACHE_DIR`, `DYNAMO_LITE_CACHE_DIR`), so nothing compiled by an earlier run is
found. In the child, the model (bench/models_gpu.py's builders: Hugging Face GPT-2 with its default
config at 4 layers, timm's or torchvision's ResNet-50; random weights, batch 8, sequence 512,
images 224, bf16, `eval()`, `no_grad`) runs eagerly once first (CUDA, cuBLAS and cuDNN set-up are
not counted), then the engine's first call is timed: capture, compile and run, synchronized.

Engines (Inductor first: the others' ratios are to it):
  inductor  `torch.compile(model)`, default mode (its own compile workers as it sets them up)
  capture   dynamo_lite with the `eager` backend: what capturing costs, without compiling
  ours-w0   dynamo_lite's `triton` backend, DYNAMO_LITE_TRITON_COMPILE_WORKERS=0: each kernel
            compiles at its first launch, in the parent (as before precompile.py)
  ours      the `triton` backend with its default compile workers (min(CPUs, 32))
  ours-after-inductor
            `ours`, timed after `torch.compile` compiled and ran the same model in the same process
            (as bench/models_gpu.py measures first calls: Inductor's compile workers, TorchDynamo and
            Triton already loaded)

Per row: first call (s; the median over --repeat fresh processes), its ratio to Inductor's, the
second call (s; what the first left undone), graphs and kernels, the compile pool's counters
(ours: jobs compiled by workers, taken back by the parent, failed; seconds launches waited for
workers; when the workers were ready, the graphs submitted and jobs taken back, in seconds from
the pool's start; the workers' seconds compiling and building launchers, the parent's compiling
and loading, and timing launch configs; kernels launched through our generic launcher and through Triton's
C launchers), the whole subprocess's wall time, and whether the output matched eager's (the tolerance
of bench/models_gpu.py). `--child` is the subprocess's entry point.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

# bench/triton.py would shadow the triton package
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

ENGINES = ["inductor", "capture", "ours-w0", "ours", "ours-after-inductor"]
MODELS = {"gpt2": ("transformers", "hf_gpt2"), "resnet50": ("timm", "timm_resnet50"),
          "tv-resnet50": ("torchvision", "tv_resnet50"), "vit": ("timm", "timm_vit"),
          "llama": ("transformers", "hf_llama")}


def _models_gpu():
    spec = importlib.util.spec_from_file_location("models_gpu_for_latency", os.path.join(_HERE, "models_gpu.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# the child: one engine, one model, one cold process
# ---------------------------------------------------------------------------------------------

def child(model_name: str, engine: str, device: str, quick: bool) -> dict:
    import torch
    import dynamo_lite as dl
    mg = _models_gpu()
    cuda = torch.device(device).type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    sizes = mg.Sizes(batch=2, seq=64, image=64, quick=True) if quick else mg.Sizes(8, 512, 224, False)
    torch.manual_seed(0)
    model, inputs, _ = getattr(mg, MODELS[model_name][1])(sizes, device)
    model = model.to(device=device).eval().to(dtype)
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in inputs.items() if k != "target"}
    result: dict = {"model": model_name, "engine": engine}
    counting = None
    with torch.no_grad():
        ref, result["eager_first_s"] = mg.first_call(lambda: model(**inputs), device)
        if engine == "inductor":
            compiled = torch.compile(copy.deepcopy(model))
        else:
            if engine == "ours-after-inductor":
                inductor = torch.compile(copy.deepcopy(model))
                _, result["inductor_first_s"] = mg.first_call(lambda: inductor(**inputs), device)
                del inductor
            # off a GPU, ours is the eager backend unless Triton's interpreter is on (smoke mode)
            triton = cuda or os.environ.get("TRITON_INTERPRET") == "1"
            backend = "triton" if triton and engine != "capture" else "eager"
            counting = mg.CountingBackend(backend)
            compiled = dl.capture(copy.deepcopy(model), backend=counting)
        profile_dir = os.environ.get("DL_LATENCY_PROFILE")
        if profile_dir:                  # --profile: where the first call's time goes (slows it)
            import cProfile
            profiler = cProfile.Profile()
            out, result["first_call_s"] = profiler.runcall(mg.first_call, lambda: compiled(**inputs), device)
            os.makedirs(profile_dir, exist_ok=True)
            profiler.dump_stats(os.path.join(profile_dir, f"{model_name}-{engine}.prof"))
        else:
            out, result["first_call_s"] = mg.first_call(lambda: compiled(**inputs), device)
        result["max_diff"], result["correct"] = mg.compare_outputs(out, ref, mg.tolerance(dtype))
        _, result["second_call_s"] = mg.first_call(lambda: compiled(**inputs), device)
    if counting is not None:
        result["graphs"] = counting.graphs
        infos = list(counting.compiled)
        result["kernels"] = sum(c.kernel_count for c in infos)
        result["eager_graphs"] = sum(1 for c in infos if c.fallback_reason)
        phases = counting.phases()
        result["wait_s"] = phases["wait"]
    if engine.startswith("ours") and counting is not None and counting.compiled:
        from dynamo_lite.backends.triton import cache, generic_launch, precompile, settings
        result["workers"] = settings.compile_workers
        result["launchers"] = {"generic": generic_launch.stats["generic"], "triton": generic_launch.stats["triton"],
                               "why_not_generic": dict(generic_launch.stats["reasons"])}
        result["pool"] = dict(precompile.stats)
        result["pool_timeline"] = {k: [round(t, 2) for t in v] for k, v in precompile.timeline.items()}
        result["worker_seconds"] = dict(precompile.worker_seconds)
        result["parent_compile_s"], result["tune_s"] = phases["compile"], phases["tune"]
        result["kernel_cache"] = dict(cache.stats)          # disk_hits 0: the caches were empty
    return result


# ---------------------------------------------------------------------------------------------
# the parent: a fresh process with empty caches per measurement
# ---------------------------------------------------------------------------------------------

def measure(model: str, engine: str, device: str, quick: bool, profile: str = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="dl-latency-") as tmp:
        env = dict(os.environ)
        env.update(TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   DYNAMO_LITE_CACHE_DIR=os.path.join(tmp, "dynamo_lite"))
        env.pop("DYNAMO_LITE_TRITON_COMPILE_WORKERS", None)
        if profile:
            env["DL_LATENCY_PROFILE"] = os.path.abspath(profile)
        if engine == "ours-w0":
            env["DYNAMO_LITE_TRITON_COMPILE_WORKERS"] = "0"
        command = [sys.executable, os.path.abspath(__file__), "--child", model, engine, "--device", device]
        start = time.perf_counter()
        proc = subprocess.run(command + (["--quick"] if quick else []), env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"model": model, "engine": engine, "status": "failed: " + " | ".join(tail)}
    result = json.loads(lines[-1])
    result["process_s"] = wall
    result["status"] = "ok"
    return result


def median_of(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return runs[-1]
    ok.sort(key=lambda r: r["first_call_s"])
    row = dict(ok[len(ok) // 2])
    row["runs"] = [r["first_call_s"] for r in ok]
    row["correct"] = all(r["correct"] for r in ok)
    return row


def _s(x) -> str:
    return f"{x:8.2f}" if isinstance(x, (int, float)) else f"{'-':>8}"


def format_row(row: dict, inductor_s) -> str:
    if row["status"] != "ok":
        return f"{row['model']:<12} {row['engine']:<9} {row['status']}"
    first = row["first_call_s"]
    ratio = first / inductor_s if inductor_s else None
    pool = row.get("pool")
    pool_text = (f"workers {row['workers']}: {pool['compiled']} compiled, {pool['taken_back']} taken back, "
                 f"{pool['failed']} failed, waited {row['wait_s']:.1f}s") if pool else ""
    times = row.get("pool_timeline")
    if times and times["ready"]:
        # when the workers were ready and the parent compiled jobs itself, from the pool's start
        taken = times["taken_back"]
        pool_text += (f"; ready {min(times['ready']):.1f}-{max(times['ready']):.1f}s, "
                      f"submitted {', '.join(f'{t:.1f}' for t in times['submitted'][:3])}s, taken back "
                      + (f"{taken[0]:.1f}-{taken[-1]:.1f}s" if taken else "none")
                      + f"; workers compiling {row['worker_seconds']['compile']:.1f}s + launchers "
                      f"{row['worker_seconds']['launcher']:.1f}s; parent compile+load {row['parent_compile_s']:.1f}s, "
                      f"tuning {row['tune_s']:.1f}s")
    launchers = row.get("launchers")
    if launchers:
        # kernels launched through our generic launcher / Triton's C launcher per signature
        pool_text += f"; launchers generic {launchers['generic']}, triton {launchers['triton']}"
        if launchers["why_not_generic"]:
            pool_text += f" ({launchers['why_not_generic']})"
    if row.get("inductor_first_s"):
        pool_text += f"; after Inductor's first call of {row['inductor_first_s']:.1f}s"
    kernels = f"{row.get('graphs', '-')}/{row.get('kernels', '-')}"
    return (f"{row['model']:<12} {row['engine']:<9} {_s(first)} {_s(ratio)} {_s(row['second_call_s'])} "
            f"{_s(row['process_s'])} {kernels:>9} {'yes' if row['correct'] else 'NO':>7}  {pool_text}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,resnet50")
    parser.add_argument("--engines", default=",".join(ENGINES[:4]))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models (smoke mode)")
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes per measurement (median)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--profile", metavar="DIR", help="cProfile each first call (slower) into DIR/MODEL-ENGINE.prof")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ENGINE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.device, args.quick)))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES] + [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)} (engines: {', '.join(ENGINES)}; models: {', '.join(MODELS)})")
    print(f"{'model':<12} {'engine':<9} {'first s':>8} {'/induct':>8} {'second s':>8} {'process':>8} "
          f"{'gr/kern':>9} {'correct':>7}")
    rows = []
    for model in args.models.split(","):
        library = MODELS[model][0]
        if importlib.util.find_spec(library) is None:
            print(f"{model:<12} skipped: {library} is not installed")
            continue
        inductor_s = None
        for engine in engines:
            row = median_of([measure(model, engine, args.device, args.quick, args.profile) for _ in range(max(1, args.repeat))])
            if engine == "inductor" and row["status"] == "ok":
                inductor_s = row["first_call_s"]
            rows.append(row)
            print(format_row(row, inductor_s), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    return 0 if all(r["status"] == "ok" and r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
