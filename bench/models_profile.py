"""Where a model's forward (or training step's) time goes, per engine: host (CPU) time, GPU time,
kernels, aten calls.

    python bench/models_profile.py [-k NAME] [--out DIR] [--calls N] [--train]

For each forward row of bench/models_gpu.py (same models, sizes, dtype and engines; `-k` selects
by name), and each engine (eager, Inductor, ours), it measures per call:

* wall: `triton.testing.do_bench`'s median (what models_gpu.py reports);
* host: the CPU time of one call issued to an idle GPU (synchronize, start the clock, call, stop
  the clock): what the engine costs on the host, the GPU's work left out;
* loop: calls back to back without a synchronize between them (no L2 flush), per call;
* GPU busy: the sum of the durations of the GPU activities (kernels, copies, memsets) in a
  torch.profiler trace of a few calls, per call, split by kind (Triton, matmul, convolution,
  attention, other aten kernels), with the kernels that take the most time listed.

When `host` is above `GPU busy`, the engine is launch-bound at this size. For ours it also
reports the time spent inside the compiled wrappers (the rest is the capture layer: guards,
frame set-up, output structures), a cProfile of a few calls, the aten calls the wrappers make and
their sources (`--out`: ours_code.txt); Inductor's generated wrappers go to inductor_code.txt
(from a fresh TORCHINDUCTOR_CACHE_DIR). Everything printed also goes to DIR/report.txt.

`--train`: the training rows' steps instead (models_gpu.run_train's step: forward + loss +
backward + optimizer step under bf16 autocast), with the same figures per engine; for ours each
graph's kernels, aten calls and compile time (AOTAutograd's forward and backward together).
"""
from __future__ import annotations

import argparse
import collections
import copy
import cProfile
import glob
import importlib.util
import io
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from typing import Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor_profile_"))


def _load_models_gpu():
    spec = importlib.util.spec_from_file_location("models_gpu", os.path.join(_HERE, "models_gpu.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_gpu"] = module       # (its dataclasses look their module up)
    spec.loader.exec_module(module)          # it fixes sys.path (bench/triton.py shadows triton)
    return module


models_gpu = _load_models_gpu()

import torch                                               # noqa: E402

import dynamo_lite as dl                                   # noqa: E402


class Report:
    """Prints and keeps every line for report.txt."""

    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def kernel_class(name: str) -> str:
    low = name.lower()
    if any(k in low for k in ("flash", "fmha", "attention", "attn")):
        return "attention"
    if any(k in low for k in ("gemm", "cutlass", "nvjet", "xmma", "sm90_", "sm80_", "cublas", "matmul")):
        return "matmul"
    if any(k in low for k in ("conv", "cudnn", "implicit_", "winograd", "fft")):
        return "conv"
    if low.startswith("triton_"):
        return "triton"
    if "memcpy" in low or "memset" in low:
        return "copy/memset"
    return "other aten"


def host_us(fn, calls: int) -> float:
    """Median CPU time of one call issued to an idle GPU, in microseconds."""
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def loop_ms(fn, calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def gpu_profile(fn, calls: int):
    """(GPU busy us per call, {class: us per call}, [(us per call, launches per call, name)], CPU ops)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per_name: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    cpu_ops: collections.Counter = collections.Counter()
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            entry = per_name[evt.name]
            entry[0] += evt.time_range.elapsed_us()
            entry[1] += 1
        elif evt.name.startswith("aten::") and evt.cpu_parent is None:
            cpu_ops[evt.name] += 1
    by_class: dict[str, float] = collections.defaultdict(float)
    for name, (us, _) in per_name.items():
        by_class[kernel_class(name)] += us / calls
    kernels = sorted(((us / calls, n / calls, name) for name, (us, n) in per_name.items()), reverse=True)
    busy = sum(us for us, _, _ in kernels)
    top_ops = [(n / calls, name) for name, n in cpu_ops.most_common()]
    return busy, dict(by_class), kernels, top_ops


class TimedBackend(models_gpu.CountingBackend):
    """The counting triton backend, timing the calls of the compiled wrappers it returns and
    keeping the arguments of their latest call (for `wrapper_line_times`)."""

    def __init__(self):
        super().__init__("triton")
        self.inside = 0.0
        self.last_args: dict[int, tuple] = {}       # position in self.compiled -> arguments

    def __call__(self, gm, example_inputs):
        compiled = super().__call__(gm, example_inputs)
        position = len(self.compiled) - 1

        def timed(*args):
            self.last_args[position] = args
            start = time.perf_counter()
            try:
                return compiled(*args)
            finally:
                self.inside += time.perf_counter() - start
        timed.compiled_graph = compiled.compiled_graph
        return timed


def _overloads_for_bindings(info, bindings: dict) -> dict:
    """{global name: the OpOverload} for the wrapper's globals that are Python bindings (the
    `.out` overload where the wrapper passes `out=`)."""
    out = {}
    for name, value in info.wrapper_call.__globals__.items():
        ops = [op for op, binding in bindings.items() if binding is value]
        if not name.startswith("aten_op") or not ops:
            continue
        writes_out = any("out=" in line for line in info.wrapper_source.splitlines() if f"{name}(" in line)
        out[name] = next(op for op in ops if (op._overloadname == "out") == writes_out)
    return out


def _line_label(stmt: str, namespace: dict) -> str:
    """What one line of a generated wrapper does, for grouping host times."""
    from dynamo_lite.backends.triton.launch import Launcher
    if stmt.endswith("# reuse"):
        return "reuse with as_strided" if ".as_strided(" in stmt else "bookkeeping (del, reuse)"
    if stmt.startswith("del "):
        return "bookkeeping (del, reuse)"
    match = re.match(r"^(?:[\w, ]+ = )?(\w+)(?:\.run)?\(", stmt)
    if match is None:
        return "other: " + re.sub(r"\d+", "N", stmt)[:40]
    callee = namespace.get(match.group(1))
    views = stmt.count("_view(") + stmt.count(".as_strided(")
    suffix = f" (+{views} views)" if views else ""
    if isinstance(callee, Launcher):
        return "triton launch" + suffix
    if match.group(1) == "empty_strided":
        return "empty_strided"
    if match.group(1).startswith("aten_op"):
        return f"aten {getattr(callee, '__name__', callee)}{suffix}"
    return match.group(1) + suffix


def wrapper_line_times(info, args, calls: int = 20, replace: Optional[dict] = None):
    """{label: (lines per call, host us per call)} over the lines of one generated wrapper, and the
    wrapper's plain host time per call (us): each line timed, the GPU idle before each call.
    `replace`: globals of the wrapper to swap (by name) in both runs."""
    namespace = dict(info.wrapper_call.__globals__)
    plain_call = info.wrapper_call
    if replace:
        namespace.update(replace)
        plain_ns = dict(namespace)
        exec(compile(info.wrapper_source, "<wrapper, globals replaced>", "exec"), plain_ns)
        plain_call = plain_ns["call"]
    lines = info.wrapper_source.splitlines()
    statements: list[list[str]] = []            # a statement's lines (an `if` with its body: one)
    for line in lines[1:]:
        if line.strip():
            if line.startswith("        ") and statements:
                statements[-1].append(line)
            else:
                statements.append([line])
    labels: list[str] = []
    out = [lines[0]]
    for statement in statements:
        stmt = statement[0].strip()
        labels.append(_line_label(statement[-1].strip() if stmt.startswith("if ") else stmt, namespace))
        k = len(labels) - 1
        out.append("    _t = _pc()")
        if stmt.startswith("return "):
            out.append(f"    _r = {stmt[len('return '):]}")
        else:
            out.extend(statement)
        out.append(f"    _acc[{k}] += _pc() - _t")
    out.append("    return _r")
    acc = [0.0] * len(labels)
    namespace.update(_pc=time.perf_counter, _acc=acc)
    exec(compile("\n".join(out) + "\n", "<instrumented wrapper>", "exec"), namespace)
    instrumented = namespace["call"]
    plain = host_us(lambda: plain_call(*args), calls)
    instrumented(*args)
    acc[:] = [0.0] * len(labels)
    host_us(lambda: instrumented(*args), calls)
    grouped: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for label, seconds in zip(labels, acc):
        grouped[label][0] += 1
        grouped[label][1] += seconds / calls * 1e6
    return dict(grouped), plain


def measure_engine(name: str, fn, report: Report, calls: int, timed: Optional["TimedBackend"] = None,
                   cprofile: bool = False):
    """One engine's figures (first call, wall, host, loop, GPU busy by kind, top kernels, aten
    calls; for ours, `timed`: time inside the wrappers, each wrapper's lines, a cProfile; a
    cProfile of any engine with `cprofile`).
    Returns (name, wall ms, host us, loop ms, busy us)."""
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    wall = models_gpu.time_ms(fn, "cuda")
    host = host_us(fn, 30)
    loop = loop_ms(fn, 20)
    if timed is not None:
        timed.inside = 0.0
        host_us(fn, 30)
        inside = timed.inside / 30 * 1e6
    busy, by_class, kernels, ops = gpu_profile(fn, calls)
    report(f"-- {name}: first call {first:.1f} s; wall {wall:.3f} ms; host {host:.0f} us; "
           f"loop {loop:.3f} ms; GPU busy {busy:.0f} us; launches/call {sum(n for _, n, _ in kernels):.0f}")
    report("   by kind (us/call): " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_class.items(),
                                                                                 key=lambda kv: -kv[1])))
    for us, n, kname in kernels[:25]:
        report(f"   {us:8.1f} us {n:5.1f}x  [{kernel_class(kname)}] {kname[:150]}")
    report("   top-level aten calls per call: " + ", ".join(f"{op} {n:g}" for n, op in ops[:30]))
    if timed is not None:
        report(f"   inside the compiled wrappers: {inside:.0f} us of {host:.0f} us host time")
        for position, info in enumerate(timed.compiled):
            report(f"   graph {position}: {info.kernel_count} kernels, aten calls {sum(info.extern_ops.values())}, "
                   f"compiled in {info.compile_seconds:.1f} s" + (f"; runs as captured: {info.fallback_reason}"
                                                                 if info.fallback_reason else ""))
            if info.wrapper_call is not None and position in timed.last_args:
                _report_wrapper_lines(info, timed.last_args[position], position, report)
    if timed is not None or cprofile:
        _cprofile(fn, report)
    return name, wall, host, loop, busy


def _report_wrapper_lines(info, args, position: int, report: Report) -> None:
    grouped, plain = wrapper_line_times(info, args)
    report(f"   wrapper {position}: host {plain:.0f} us per call; its lines, timed one by one "
           f"({sum(us for _, us in grouped.values()):.0f} us in all):")
    for label, (n, us) in sorted(grouped.items(), key=lambda kv: -kv[1][1]):
        report(f"     {us:7.0f} us  {n:4d} lines  {us / n:6.1f} us/line  {label[:110]}")
    direct = {id(la): la.run for la in info.launchers}
    for la in info.launchers:
        la.run = la._call
    grouped, plain = wrapper_line_times(info, args)
    for la in info.launchers:
        la.run = direct[id(la)]
    launch_lines = {k: v for k, v in grouped.items() if k.startswith("triton launch")}
    report(f"   the same through Launcher._call (the launch path before the direct one): host "
           f"{plain:.0f} us per call; launches: " + "; ".join(
               f"{label} {us / n:.1f} us/line" for label, (n, us) in launch_lines.items()))
    from dynamo_lite.backends.triton.wrapper import PYTHON_BINDINGS
    grouped, plain = wrapper_line_times(info, args, replace=_overloads_for_bindings(info, PYTHON_BINDINGS))
    aten_lines = {k: v for k, v in grouped.items() if k.startswith("aten ")}
    report(f"   the same with OpOverloads for the Python bindings: host {plain:.0f} us per call; "
           + "; ".join(f"{label} {us / n:.1f} us/line" for label, (n, us) in aten_lines.items()))


def _report_summary(summary: list, report: Report) -> None:
    report("summary (ms / us): " + "; ".join(f"{n}: wall {w:.3f}, host {h:.0f}, loop {lp:.3f}, busy {b:.0f}"
                                          for n, w, h, lp, b in summary))


def _write_ours_code(out_dir: str, title: str, timed: "TimedBackend") -> None:
    with open(os.path.join(out_dir, "ours_code.txt"), "a") as f:
        f.write(f"\n\n##### {title}\n")
        for info in timed.compiled:
            f.write(f"# {info.kernel_count} kernels; aten calls {info.extern_ops}; host ops {info.host_ops}; "
                    f"fallback {info.fallback_reason}\n")
            f.write(info.source)


def profile_model(spec, sizes, report: Report, out_dir: str, calls: int):
    torch.manual_seed(0)
    model, inputs, _ = spec.build(sizes, "cuda")
    model = model.to("cuda").eval().to(torch.bfloat16)
    inputs = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in inputs.items() if k != "target"}
    report(f"\n=== {spec.name} ===")
    with torch.no_grad():
        torch._dynamo.reset()
        inductor = torch.compile(copy.deepcopy(model))
        dl.reset()
        timed = TimedBackend()
        ours = dl.capture(copy.deepcopy(model), backend=timed)
        summary = [measure_engine("eager", lambda: model(**inputs), report, calls),
                   measure_engine("inductor", lambda: inductor(**inputs), report, calls),
                   measure_engine("ours", lambda: ours(**inputs), report, calls, timed)]
        _report_summary(summary, report)
    _write_ours_code(out_dir, spec.name, timed)


def profile_train(spec, sizes, report: Report, out_dir: str, calls: int):
    """The training row's step (models_gpu.run_train's: dropout off, bf16 autocast, fp32
    parameters), each engine on its own copy of the model and optimizer."""
    torch.manual_seed(0)
    model, inputs, loss_fn = spec.build(sizes, "cuda")
    model = model.to("cuda").train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    step = models_gpu.make_train_step(loss_fn, "cuda", torch.bfloat16)
    report(f"\n=== {spec.name} train step ===")
    torch._dynamo.reset()
    inductor = torch.compile(step)
    dl.reset()
    timed = TimedBackend()
    ours = dl.capture(step, backend=timed)
    summary = []
    for name, engine, extra in (("eager", step, None), ("inductor", inductor, None), ("ours", ours, timed)):
        m = copy.deepcopy(model)
        opt = models_gpu.make_optimizer(spec.train, m)
        summary.append(measure_engine(name, lambda: engine(m, opt, inputs), report, calls, extra,
                                      cprofile=name == "inductor"))
        m = opt = None
        torch.cuda.empty_cache()
    _report_summary(summary, report)
    _write_ours_code(out_dir, spec.name + " train step", timed)


def _cprofile(fn, report: Report, calls: int = 20):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(order).print_stats(30)
        report(f"   cProfile of {calls} calls ({order}):")
        for line in text.getvalue().splitlines():
            if line.strip():
                report("   | " + line[:200])


def host_microbench(report: Report, calls: int = 2000):
    """Host cost of single wrapper statements on the GPU (queued back to back, tiny GPU work):
    an OpOverload call against the op's Python binding, views, allocations."""
    dev = torch.device("cuda", torch.cuda.current_device())
    bf16 = dict(dtype=torch.bfloat16, device=dev)
    x = torch.randn(8, 64, 56, 56, **bf16).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 1, 1, **bf16).to(memory_format=torch.channels_last)
    a, b, bias = torch.randn(64, 64, **bf16), torch.randn(64, 64, **bf16), torch.randn(64, **bf16)
    aten = torch.ops.aten
    conv_args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    cases = {
        "aten.convolution.default (OpOverload)": lambda: aten.convolution.default(*conv_args),
        "torch.convolution": lambda: torch.convolution(*conv_args),
        "aten.addmm.default (OpOverload)": lambda: aten.addmm.default(bias, a, b),
        "torch.addmm": lambda: torch.addmm(bias, a, b),
        "aten.mm.default (OpOverload)": lambda: aten.mm.default(a, b),
        "torch.mm": lambda: torch.mm(a, b),
        "t.as_strided(sizes, strides)": lambda: a.as_strided((64, 64), (1, 64)),
        "t.as_strided(sizes, strides, t.storage_offset() + 0)": lambda: a.as_strided((64, 64), (1, 64),
                                                                                   a.storage_offset() + 0),
        "torch.empty_strided(..., dtype=, device=)": lambda: torch.empty_strided((64, 64), (64, 1), **bf16),
        "with torch._C.DisableTorchFunction(): pass": lambda: _disabled_torch_function(),
        "t.data_ptr()": lambda: a.data_ptr(),
    }
    report("\n=== host cost per statement (us, queued back to back) ===")
    for name, fn in cases.items():
        for _ in range(50):
            fn()
        report(f"   {loop_ms(fn, calls) * 1e3:7.2f} us  {name}")


def _disabled_torch_function():
    with torch._C.DisableTorchFunction():
        pass


def dump_inductor_code(out_dir: str):
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    with open(os.path.join(out_dir, "inductor_code.txt"), "w") as out:
        for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True), key=os.path.getmtime):
            with open(path) as f:
                text = f.read()
            if "def call(" in text:
                out.write(f"\n\n##### {path}\n{text}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", action="append", default=[], help="rows whose name contains this (repeatable)")
    parser.add_argument("--out", default=".", help="folder for report.txt, ours_code.txt, inductor_code.txt")
    parser.add_argument("--calls", type=int, default=5, help="calls in each profiler trace")
    parser.add_argument("--train", action="store_true", help="the training rows' steps instead of the forwards")
    opts = parser.parse_args(argv)
    os.makedirs(opts.out, exist_ok=True)
    open(os.path.join(opts.out, "ours_code.txt"), "w").close()
    report = Report()
    report(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    sizes = models_gpu.Sizes(batch=8, seq=512, image=224, quick=False)
    for spec in models_gpu.SPECS:
        if opts.k and not any(k.lower() in spec.name.lower() for k in opts.k):
            continue
        if importlib.util.find_spec(spec.library) is None or (opts.train and not spec.train):
            continue
        try:
            (profile_train if opts.train else profile_model)(spec, sizes, report, opts.out, opts.calls)
        except Exception as e:                              # noqa: BLE001 -- one row's failure is reported
            report(f"{spec.name}: {type(e).__name__}: {e}")
        torch.cuda.empty_cache()
        with open(os.path.join(opts.out, "report.txt"), "w") as f:
            f.write("\n".join(report.lines) + "\n")
    host_microbench(report)
    with open(os.path.join(opts.out, "report.txt"), "w") as f:
        f.write("\n".join(report.lines) + "\n")
    dump_inductor_code(opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
