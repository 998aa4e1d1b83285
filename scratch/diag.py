"""Diagnostic (not committed): where do our forward rows lose to Inductor? per graph fallback / kernels / externs + profiles."""
import os, sys, collections, torch, copy
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import models_gpu as M
import dynamo_lite as dl
from torch.profiler import profile, ProfilerActivity
ks = sys.argv[1].split(",")
sizes = M.Sizes(batch=8, seq=512, image=224, quick=False)
dev = "cuda"

def prof(fn, label):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for _ in range(5): fn()
        torch.cuda.synchronize()
    print(f"----- {label}")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))

for spec in M.SPECS:
    if not any(k.lower() in spec.name.lower() for k in ks):
        continue
    torch.manual_seed(0)
    model, inputs, _ = spec.build(sizes, dev)
    model = model.to(device=dev).eval().to(torch.bfloat16)
    inputs = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in inputs.items() if k != "target"}
    print("=" * 30, spec.name, flush=True)
    with torch.no_grad():
        dl.reset()
        cb = M.CountingBackend("triton")
        ours = dl.capture(copy.deepcopy(model), backend=cb)
        ours(**inputs)
        for i, c in enumerate(cb.compiled):
            ext = dict(c.extern_ops)
            print(f"graph {i}: kernels {c.kernel_count} fallback {c.fallback_reason!r} externs {ext} compile {c.compile_seconds:.1f}s")
        print(dl.explain(copy.deepcopy(model))(**inputs) if False else "", flush=True)
        prof(lambda: ours(**inputs), "ours " + spec.name)
        torch._dynamo.reset()
        ind = torch.compile(copy.deepcopy(model))
        ind(**inputs)
        prof(lambda: ind(**inputs), "inductor " + spec.name)
        prof(lambda: model(**inputs), "eager " + spec.name)
