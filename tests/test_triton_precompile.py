"""The triton backend's compile workers (precompile.py, compile_worker.py): a graph's kernels are
compiled ahead of its first call in worker processes, into Triton's on-disk cache, where the
parent's first launch finds them; a worker that fails, dies or never starts leaves the kernel to
its first launch, and results never change.

Without a GPU the graphs run in Triton's interpreter (nothing compiles there), but the workers
compile for real, for an H100 (sm_90: Triton ships ptxas, which needs no GPU): the tests say
which target the pool compiles for (`precompile.current_target`). That the parent's launch finds
a worker's binary is checked in a subprocess without the interpreter, whose Triton "device" is a
stand-in driver naming sm_90 (`warmup=True` compiles, or finds, without launching)."""
import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from triton_env import DEVICE, INTERPRET   # first: sets TRITON_INTERPRET before triton loads

import torch.fx                                            # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SM90 = ["cuda", 90, 32]


def _can_compile_for_sm90() -> bool:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return False
    return os.path.exists(os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "ptxas"))


needs_ptxas = pytest.mark.skipif(not _can_compile_for_sm90(), reason="needs triton with its CUDA backend (ptxas)")
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning"),
              pytest.mark.skipif(not INTERPRET, reason="the target is faked for the interpreter; "
                                 "on a GPU, test_triton_runtime and bench/compile_latency.py cover the workers")]


@pytest.fixture
def pool_for_sm90(monkeypatch, tmp_path):
    """The shared pool, two workers compiling for sm_90; a fresh kernel cache; stopped afterwards."""
    from dynamo_lite.backends.triton import precompile, settings
    precompile.shutdown()
    monkeypatch.setenv("DYNAMO_LITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(settings, "compile_workers", 2)
    monkeypatch.setattr(precompile, "current_target", lambda: list(SM90))
    monkeypatch.setattr(precompile, "stats", dict.fromkeys(precompile.stats, 0))
    yield precompile
    precompile.shutdown()


def compile_fn(fn, *args):
    from dynamo_lite.backends.triton import triton_backend
    return triton_backend(torch.fx.symbolic_trace(fn), list(args))


def model(x, w, y):
    h = torch.nn.functional.layer_norm(x * 2, (x.shape[-1],), w)
    return (h.softmax(-1) + y.sum(0)).relu(), torch.sigmoid(x).mean(1)


def inputs():
    return torch.randn(64, 256, device=DEVICE), torch.randn(256, device=DEVICE), torch.randn(8, 256, device=DEVICE)


def jobs_of(compiled) -> list:
    return [job for launcher in compiled.compiled_graph.launchers for job in launcher.jobs.values()]


def assert_same_as_eager(compiled, args):
    for got, ref in zip(compiled(*args), model(*args)):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


@needs_ptxas
def test_workers_compile_every_kernel_of_a_graph_into_tritons_cache(pool_for_sm90, tmp_path):
    precompile = pool_for_sm90
    args = inputs()
    compiled = compile_fn(model, *args)
    launchers = compiled.compiled_graph.launchers
    assert len(launchers) >= 2
    for launcher in launchers:                  # one job per config the first call compiles
        assert [dict(k) for k in launcher.jobs] == launcher.configs_to_try(None)
    jobs = jobs_of(compiled)
    done, _ = concurrent.futures.wait([job.future for job in jobs], timeout=240)
    assert len(done) == len(jobs)
    assert all(job.future.result()["ok"] for job in jobs), [job.error for job in jobs]
    assert precompile.stats["compiled"] == len(jobs) == precompile.stats["submitted"]
    binaries = list((tmp_path / "cache" / "triton" / "bin").rglob("*.cubin"))
    assert len(binaries) == len({job.request["name"] for job in jobs})
    assert_same_as_eager(compiled, args)
    assert all(not launcher.jobs for launcher in launchers)     # each launch took its job back


@needs_ptxas
def test_a_kernel_already_submitted_is_not_submitted_again(pool_for_sm90):
    precompile = pool_for_sm90
    args = inputs()
    first = compile_fn(model, *args)
    submitted = precompile.stats["submitted"]
    second = compile_fn(model, *args)                 # the same kernels (same names) again
    assert precompile.stats["submitted"] == submitted
    assert [j.request for j in jobs_of(second)] == [j.request for j in jobs_of(first)]
    assert_same_as_eager(second, args)
    assert_same_as_eager(first, args)


def _workers_run(precompile, script: str, tmp_path, monkeypatch) -> None:
    """The pool's workers run `script` instead of the compile worker (a slow or broken one)."""
    worker = tmp_path / "fake_worker.py"
    worker.write_text(script)
    monkeypatch.setattr(precompile, "WORKER_SCRIPT", str(worker))


def test_a_job_no_worker_started_is_taken_back(pool_for_sm90, tmp_path, monkeypatch):
    """Workers that are not ready yet (still importing) never hold a launch up: it compiles itself."""
    precompile = pool_for_sm90
    _workers_run(precompile, "import time\ntime.sleep(60)\n", tmp_path, monkeypatch)
    args = inputs()
    compiled = compile_fn(model, *args)
    jobs = jobs_of(compiled)
    assert jobs and not any(job.future.done() for job in jobs)
    assert_same_as_eager(compiled, args)
    assert all(job.future.cancelled() for job in jobs)
    assert precompile.stats["taken_back"] == len(jobs) and precompile.stats["compiled"] == 0


def test_workers_that_cannot_start_leave_kernels_to_their_first_launch(pool_for_sm90, tmp_path, monkeypatch):
    precompile = pool_for_sm90
    _workers_run(precompile, "import sys\nsys.exit(3)\n", tmp_path, monkeypatch)
    args = inputs()
    compiled = compile_fn(model, *args)
    jobs = jobs_of(compiled)
    concurrent.futures.wait([job.future for job in jobs], timeout=60)
    assert all(job.future.done() and not job.take() for job in jobs)
    assert precompile.stats["failed"] == len(jobs)
    assert precompile.stats["start_failed"] >= precompile.MAX_STARTS_FAILED
    assert_same_as_eager(compiled, args)


def test_a_worker_that_dies_in_a_job_fails_only_that_job(pool_for_sm90, tmp_path, monkeypatch):
    """The first worker dies on its first job; the one started in its place answers the next."""
    precompile = pool_for_sm90
    monkeypatch.setattr(precompile.settings, "compile_workers", 1)
    marker = tmp_path / "died-once"
    script = tmp_path / "dying_worker.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, sys
        print(json.dumps({{"ready": True}}), flush=True)
        for line in sys.stdin:
            if not os.path.exists({str(marker)!r}):
                open({str(marker)!r}, "w").close()
                os._exit(9)
            print(json.dumps({{"ok": True, "seconds": 0.0}}), flush=True)
    """))
    monkeypatch.setattr(precompile, "WORKER_SCRIPT", str(script))
    pool = precompile.shared_pool()
    first, second = pool.submit({"name": "a"}), pool.submit({"name": "b"})
    concurrent.futures.wait([first.future, second.future], timeout=60)
    assert not first.take() and "exited" in first.error
    assert second.take()
    assert pool.submit({"name": "a"}) is first            # one job per request
    assert precompile.stats["worker_died"] == 1


def test_a_worker_that_gives_up_leaves_the_jobs_to_the_others(pool_for_sm90, tmp_path, monkeypatch):
    """A job that kills its worker makes that worker's thread give up (MAX_STARTS_FAILED = 1
    here); the jobs after it are the other worker's to compile, not failed by the thread that gave
    up (which drained the shared queue: every later kernel of the process compiled in the parent)."""
    precompile = pool_for_sm90
    monkeypatch.setattr(precompile, "MAX_STARTS_FAILED", 1)
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys, time
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if json.loads(line)["name"] == "dies":
                os._exit(9)
            time.sleep(0.05)
            print(json.dumps({"ok": True, "seconds": 0.05}), flush=True)
    """))
    monkeypatch.setattr(precompile, "WORKER_SCRIPT", str(script))
    pool = precompile.shared_pool()
    dying = pool.submit({"name": "dies"})
    good = [pool.submit({"name": f"k{i}"}) for i in range(12)]
    concurrent.futures.wait([dying.future] + [j.future for j in good], timeout=60)
    assert not dying.take() and "exited" in dying.error
    assert all(j.take() for j in good), [j.error for j in good]
    assert precompile.stats["compiled"] == len(good)


@needs_ptxas
def test_a_compile_error_in_a_worker_is_reported_and_the_worker_goes_on(pool_for_sm90):
    args = inputs()
    compiled = compile_fn(model, *args)
    launcher = compiled.compiled_graph.launchers[0]
    request = dict(next(iter(launcher.jobs.values())).request)
    bad = pool_for_sm90.shared_pool().submit(dict(request, num_warps=3))     # not a power of two
    concurrent.futures.wait([bad.future], timeout=240)
    assert not bad.take() and bad.error
    good = pool_for_sm90.shared_pool().submit(dict(request, num_warps=2))
    concurrent.futures.wait([good.future], timeout=240)
    assert good.take(), good.error
    assert_same_as_eager(compiled, args)


def test_no_workers_no_jobs(pool_for_sm90, monkeypatch):
    precompile = pool_for_sm90
    monkeypatch.setattr(precompile.settings, "compile_workers", 0)
    args = inputs()
    compiled = compile_fn(model, *args)
    assert precompile.shared_pool() is None and not jobs_of(compiled)
    assert_same_as_eager(compiled, args)


def test_without_a_compile_target_no_pool_starts(tmp_path, monkeypatch):
    """The interpreter compiles nothing: no worker starts for it."""
    from dynamo_lite.backends.triton import precompile, settings
    precompile.shutdown()
    monkeypatch.setattr(settings, "compile_workers", 2)
    args = inputs()
    compiled = compile_fn(model, *args)
    assert precompile._pool is None and not jobs_of(compiled)
    assert_same_as_eager(compiled, args)


@pytest.mark.parametrize("value, expected", [("0", 0), ("3", 3), ("lots", None)])
def test_worker_count_from_the_environment(value, expected):
    env = dict(os.environ, DYNAMO_LITE_TRITON_COMPILE_WORKERS=value, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", "from dynamo_lite.backends.triton import settings; "
                          "print(settings.compile_workers)"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == (min(os.cpu_count() or 1, 32) if expected is None else expected)


FIRST_LAUNCH = """
    import json, os, sys, concurrent.futures, torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource
    from triton.runtime import driver
    from dynamo_lite.backends.triton import cache, precompile, settings
    from dynamo_lite.backends.triton.codegen import KernelSource
    from dynamo_lite.backends.triton.launch import Launcher

    class StandInDriver:                          # Triton's JIT asks the driver for the target only
        def get_current_device(self): return 0
        def get_current_stream(self, device): return 0
        def get_current_target(self): return GPUTarget("cuda", 90, 32)

    if len(sys.argv) > 3:                         # as TorchInductor does once it compiled: Triton has
        from triton.compiler.compiler import make_backend     # asked one ptxas its version, then
        make_backend(GPUTarget("cuda", 90, 32)).hash()         # TRITON_PTXAS_PATH names another
        os.environ["TRITON_PTXAS_PATH"] = sys.argv[3]
    ks = KernelSource(**json.loads(sys.argv[1]))
    launcher = Launcher(ks, arg_types=tuple(json.loads(sys.argv[2])))
    pool = precompile.CompilePool(1)
    launcher.precompile(pool, ["cuda", 90, 32], None)
    (cfg,) = launcher.configs_to_try(None)
    (job,) = launcher.jobs.values()
    concurrent.futures.wait([job.future], timeout=240)
    print("WORKER", job.take(), job.error)

    compiles = []
    make_ir = ASTSource.make_ir
    ASTSource.make_ir = lambda self, *a, **k: compiles.append(1) or make_ir(self, *a, **k)
    driver.set_active(StandInDriver())
    args = [torch.empty(4096) for _ in ks.args]
    constexprs = dict({k: v for k, v in cfg.items() if k != "num_warps"}, **settings.compile_options())
    with cache.triton_binary_cache():            # what Launcher._slow does, short of the launch
        launcher.fn.run(*args, grid=(1,), warmup=True, num_warps=cfg["num_warps"], **constexprs)
        print("PRECOMPILED", len(compiles))
        launcher.fn.run(*args, grid=(1,), warmup=True, num_warps=cfg["num_warps"] * 2, **constexprs)
        print("OTHER CONFIG", len(compiles))
    pool.close()
"""


@needs_ptxas
@pytest.mark.parametrize("ptxas_changes", [False, True], ids=["same-ptxas", "ptxas-changed-before-the-workers"])
def test_the_parents_first_launch_finds_the_workers_binary(tmp_path, monkeypatch, ptxas_changes):
    """Triton's JIT, asked for the kernel the way a launcher asks on a GPU, compiles nothing: it
    finds what the worker compiled (a config no worker compiled is compiled, so this can fail).
    Also where the parent's Triton remembered one ptxas's version and TRITON_PTXAS_PATH names
    another when the workers start (what TorchInductor leaves behind): the worker keys its binary
    as the parent does (precompile.parent_key)."""
    monkeypatch.setenv("DYNAMO_LITE_CACHE_DIR", str(tmp_path / "cache"))
    compiled = compile_fn(model, *inputs())
    launcher = max(compiled.compiled_graph.launchers, key=lambda launcher: len(launcher.ks.args))
    fields = {k: getattr(launcher.ks, k) for k in ("name", "source", "args", "kind", "xnumel", "rnumel",
                                                   "inner", "ops", "scalars")}
    env = dict(os.environ, PYTHONPATH=REPO, DYNAMO_LITE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TRITON_INTERPRET", None)
    env.pop("TRITON_PTXAS_PATH", None)
    other_ptxas = []
    if ptxas_changes:         # a ptxas that says another version (the same compiler underneath)
        from triton import knobs
        wrapper = tmp_path / "ptxas"
        wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then {knobs.nvidia.ptxas.path} --version; '
                           f'echo another build; exit 0; fi\nexec {knobs.nvidia.ptxas.path} "$@"\n')
        wrapper.chmod(0o755)
        other_ptxas = [str(wrapper)]
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(FIRST_LAUNCH), json.dumps(fields),
                          json.dumps(launcher.arg_types), *other_ptxas], env=env, capture_output=True, text=True,
                         timeout=400)
    assert out.returncode == 0, out.stderr
    assert "WORKER True None" in out.stdout, out.stdout
    assert "PRECOMPILED 0" in out.stdout and "OTHER CONFIG 1" in out.stdout, out.stdout


def test_a_forked_child_neither_uses_nor_stops_the_parents_workers(pool_for_sm90, tmp_path):
    precompile = pool_for_sm90
    pool = precompile.shared_pool()
    pid = os.fork()
    if pid == 0:                                   # the child: a pool of its own; closing the parent's does nothing
        ok = precompile.shared_pool() is not pool
        pool.close()
        os._exit(0 if ok and not pool._closed else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not pool._closed and all(p is None or p.poll() is None for p in pool.processes)


MIXED_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def mixed_kernel(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, s0, s1, s2, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(a_ptr + x, tl.load(b_ptr + x) * s0 + s1 + s2 + tl.load(c_ptr + x) + tl.load(d_ptr + x) + RBLOCK)
"""


@needs_ptxas
def test_a_worker_specializes_arguments_as_tritons_binder_does(tmp_path):
    """compile_worker specializes a job's arguments by hand (Triton's binder would import torch, the
    slow part of a worker's start): the same as the binder, for tensors of each dtype and scalars."""
    from dynamo_lite.backends.triton import compile_worker
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    path = tmp_path / "mixed_kernel.py"
    path.write_text(MIXED_KERNEL)
    import triton
    source = compile_worker._load_kernel(str(path), "mixed_kernel")
    fn = source if isinstance(source, triton.runtime.JITFunction) else triton.JITFunction(source.fn)  # (interpreted)
    backend = make_backend(GPUTarget(*SM90))
    kwargs = {"XBLOCK": 128, "RBLOCK": 4, "num_warps": 4, "debug": False, "instrumentation_mode": ""}
    for pointers in (["*bfloat16", "*float16", "*float32", "*int64", "*bool"], ["*int32", "*uint8", "*int8",
                                                                                 "*float64", "*int16"]):
        args = pointers + ["float", "int", "bool"]
        ours = compile_worker.specialization(fn, args, kwargs)
        binders = compile_worker._binder_specialization(fn, backend, args, kwargs)
        assert ours[1] == binders[1]
        # what the compile is keyed by: the signature, the constexprs' values and the attributes
        packed = [fn._pack_args(backend, dict(kwargs), *made, None)[1:] for made in (ours, binders)]
        assert packed[0] == packed[1]


@needs_ptxas
def test_a_worker_compiles_without_importing_torch(tmp_path):
    path = tmp_path / "mixed_kernel.py"
    path.write_text(MIXED_KERNEL)
    job = {"path": str(path), "name": "mixed_kernel", "args": ["*float32"] * 5 + ["float", "int", "bool"],
           "constexprs": {"XBLOCK": 128, "RBLOCK": 4}, "num_warps": 4, "target": SM90,
           "cache_dir": str(tmp_path / "bin")}
    from dynamo_lite.backends.triton import precompile
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(precompile.WORKER_SCRIPT)!r})
        import compile_worker
        compile_worker.compile_job(json.loads(sys.argv[1]))
        print("TORCH", "torch" in sys.modules)
    """), json.dumps(job)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "TORCH False" in out.stdout, out.stdout
    assert list((tmp_path / "bin").rglob("*.cubin"))


def test_one_job_per_launcher_kind_builds_the_launcher(pool_for_sm90, tmp_path, monkeypatch):
    """Triton's C launcher depends on which arguments are pointers or scalars, not on dtypes or
    constexpr values: only the first job of each kind asks its worker to build one."""
    precompile = pool_for_sm90
    _workers_run(precompile, "import time\ntime.sleep(60)\n", tmp_path, monkeypatch)
    pool = precompile.shared_pool()

    def job(name, args, **constexprs):
        return pool.submit({"name": name, "args": args, "constexprs": constexprs}).request["launcher"]
    assert job("a", ["*float32", "*float32"], XBLOCK=1024)
    assert not job("a", ["*float32", "*float32"], XBLOCK=2048)      # another config
    assert not job("b", ["*bfloat16", "*int64"], XBLOCK=64)         # other dtypes
    assert job("c", ["*float32", "float"], XBLOCK=64)               # a scalar
    assert job("d", ["*float32", "*float32"], XBLOCK=64, RBLOCK=8)  # another constexpr
