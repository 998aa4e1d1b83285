"""The triton backend's runtime: kernel cache (memory, disk, a second process), buffer reuse in the
wrapper, launch configs, and what happens without triton or without a GPU. GPU-only checks at the
end skip cleanly on a machine without CUDA."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from triton_env import DEVICE, INTERPRET   # first: sets TRITON_INTERPRET before triton loads

import torch.fx                                            # noqa: E402
import torch.nn.functional as F                            # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAS_TRITON = __import__("importlib").util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="needs triton")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or INTERPRET, reason="needs a CUDA GPU")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")


def run_python(code: str, env_updates: dict, drop=()) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(env_updates)
    for key in drop:
        env.pop(key, None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNAMO_LITE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def compile_fn(fn, *args):
    from dynamo_lite.backends.triton import triton_backend
    return triton_backend(torch.fx.symbolic_trace(fn), list(args))


SECOND_PROCESS = """
    import json, torch, torch.fx
    from dynamo_lite.backends.triton import triton_backend, cache
    def fn(x):
        return (x * 3).softmax(-1) + 1
    x = torch.randn(8, 32, device="{device}")
    out = triton_backend(torch.fx.symbolic_trace(fn), [x])(x)
    torch.testing.assert_close(out, fn(x))
    print(json.dumps(cache.stats))
"""


@needs_triton
def test_second_process_reuses_the_disk_cache(cache_dir):
    code = SECOND_PROCESS.format(device=DEVICE)
    env = {"DYNAMO_LITE_CACHE_DIR": str(cache_dir)}
    first = run_python(code, env)
    assert first.returncode == 0, first.stderr
    second = run_python(code, env)
    assert second.returncode == 0, second.stderr
    s1, s2 = json.loads(first.stdout.splitlines()[-1]), json.loads(second.stdout.splitlines()[-1])
    assert s1["writes"] == 1 and s1["disk_hits"] == 0
    assert s2["writes"] == 0 and s2["disk_hits"] == 1
    kernels = list((cache_dir / "triton" / "kernels").rglob("*.py"))
    assert len(kernels) == 1 and "@triton.jit" in kernels[0].read_text()
    if not INTERPRET:                                       # Triton's binaries live in our cache too
        assert any((cache_dir / "triton" / "bin").iterdir())


@needs_triton
def test_identical_kernels_compile_once(cache_dir):
    from dynamo_lite.backends.triton import cache

    def fn(x, y):
        return (x + 1).relu() * 2, (y + 1).relu() * 2
    before = dict(cache.stats)
    compiled = compile_fn(fn, torch.randn(4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE))
    first, second = compiled.compiled_graph.kernels     # nothing shared: two kernels, one source
    assert first.name == second.name and first.source == second.source
    compile_fn(fn, torch.randn(4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE))
    assert cache.stats["memory_hits"] > before["memory_hits"]


@needs_triton
def test_wrapper_reuses_dead_buffers(cache_dir):
    def fn(x, w):
        h = (x * 2) @ w
        h = torch.relu(h) @ w
        h = torch.sigmoid(h) @ w
        return h + 1
    x, w = torch.randn(16, 16, device=DEVICE), torch.randn(16, 16, device=DEVICE)
    compiled = compile_fn(fn, x, w)
    torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)
    assert "# reuse" in compiled.compiled_graph.wrapper_source


@needs_triton
def test_launch_config_candidates():
    from dynamo_lite.backends.triton.codegen import KernelSource
    from dynamo_lite.backends.triton.launch import candidates, grid_for
    poi = KernelSource("k", "", [], "poi", 1 << 26, 1, True, [])
    per = KernelSource("k", "", [], "per", 16384, 4096, True, [])
    red = KernelSource("k", "", [], "red", 64, 100000, False, [])
    for ks in (poi, per, red):
        for interpret in (True, False):
            configs = candidates(ks, interpret)
            assert configs and all(c["XBLOCK"] >= 1 for c in configs)
            assert (len(configs) == 1) == interpret or ks.kind != "poi"
    assert all(c["RBLOCK"] == 4096 for c in candidates(per, False))
    assert grid_for(poi, {"XBLOCK": 1024}) == (1 << 16, 1, 1)


def test_importable_without_triton():
    code = """
        import sys
        sys.modules["triton"] = None              # as if it were not installed
        import torch, torch.fx, dynamo_lite
        from dynamo_lite.backends import triton_backend
        assert "triton" in dynamo_lite.list_backends() or True
        gm = torch.fx.symbolic_trace(lambda x: x + 1)
        try:
            triton_backend(gm, [torch.randn(2)])
        except RuntimeError as e:
            print("ERROR:", e)
    """
    result = run_python(code, {})
    assert result.returncode == 0, result.stderr
    assert "needs the triton package" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
@needs_triton
def test_without_gpu_or_interpreter_says_what_it_needs():
    code = """
        import warnings, torch, torch.fx, dynamo_lite as dl
        from dynamo_lite.backends import triton_backend
        try:
            triton_backend(torch.fx.symbolic_trace(lambda x: x + 1), [torch.randn(2)])
        except RuntimeError as e:
            print("ERROR:", e)
        try:
            dl.capture(lambda x: x * 2, backend="triton", fullgraph=True)(torch.randn(2))
        except RuntimeError as e:
            print("FULLGRAPH:", e)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = dl.capture(lambda x: x * 3, backend="triton")(torch.ones(2))
        print("EAGER:", out.tolist(), any("TRITON_INTERPRET=1" in str(w.message) for w in caught))
    """
    result = run_python(code, {}, drop=("TRITON_INTERPRET",))
    assert result.returncode == 0, result.stderr
    assert "needs a CUDA GPU" in result.stdout and "TRITON_INTERPRET=1" in result.stdout
    assert "FULLGRAPH: backend 'triton' failed to compile a graph" in result.stdout
    assert "'triton' backend needs a CUDA GPU" in result.stdout.split("FULLGRAPH:", 1)[1]
    assert "EAGER: [3.0, 3.0] True" in result.stdout


@needs_triton
def test_torch_compile_dynamic_sizes(cache_dir):
    import dynamo_lite.backends
    torch._dynamo.reset()
    f = torch.compile(lambda x: (x * 2).softmax(-1), backend=dynamo_lite.backends.triton_backend, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n, 16, device=DEVICE)
        torch.testing.assert_close(f(x), (x * 2).softmax(-1))
    torch._dynamo.reset()


# -- GPU only ---------------------------------------------------------------------------------------

@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_low_precision_normalizations(cache_dir, dtype):
    def fn(x, w, b):
        return F.layer_norm(x, (1024,), w, b), x.softmax(-1), F.rms_norm(x, (1024,), w)
    x = torch.randn(512, 1024, device="cuda", dtype=dtype)
    w, b = torch.randn(1024, device="cuda", dtype=dtype), torch.randn(1024, device="cuda", dtype=dtype)
    compiled = compile_fn(fn, x, w, b)
    for got, ref in zip(compiled(x, w, b), fn(x.float(), w.float(), b.float())):
        torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2)
    assert compiled.compiled_graph.kernel_count == 1


@needs_gpu
def test_gpu_tuned_config_is_cached_and_fast_path_is_used(cache_dir):
    def fn(x):
        return torch.sigmoid(x * 1.5) + x
    x = torch.randn(1 << 22, device="cuda")
    compiled = compile_fn(fn, x)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), fn(x))
    (launcher,) = compiled.compiled_graph.launchers
    assert launcher._fast is not None
    configs = list((cache_dir / "triton" / "configs").glob("*.json"))
    assert len(configs) == 1 and torch.cuda.get_device_name() in configs[0].read_text()


@needs_gpu
def test_gpu_misaligned_input_takes_the_slow_path(cache_dir):
    def fn(x):
        return x * 2 + 1
    base = torch.randn(4097, device="cuda")
    compiled = compile_fn(fn, base[:4096])
    torch.testing.assert_close(compiled(base[:4096]), base[:4096] * 2 + 1)
    shifted = base[1:]                                         # same shape and strides, misaligned
    torch.testing.assert_close(compiled(shifted), shifted * 2 + 1)


@needs_gpu
def test_gpu_large_looped_and_outer_reductions(cache_dir):
    def fn(x):
        return x.softmax(-1), x.sum(0), x.amax(-1)
    x = torch.randn(64, 50000, device="cuda")
    compiled = compile_fn(fn, x)
    for got, ref in zip(compiled(x), fn(x)):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-3)


@needs_gpu
def test_gpu_convolution_inputs_are_stored_channels_last(cache_dir):
    def fn(x, w1, w2, scale):
        h = torch.relu(F.conv2d(x, w1, padding=1) * scale)
        return torch.relu(F.conv2d(h, w2, padding=1) + h).mean((2, 3))
    x = torch.randn(4, 16, 32, 32, device="cuda")
    w1, w2 = torch.randn(32, 16, 3, 3, device="cuda") * 0.1, torch.randn(32, 32, 3, 3, device="cuda") * 0.1
    scale = torch.randn(32, 1, 1, device="cuda")
    compiled = compile_fn(fn, x, w1, w2, scale)
    torch.testing.assert_close(compiled(x, w1, w2, scale), fn(x, w1, w2, scale), rtol=1e-2, atol=1e-2)
    source = compiled.compiled_graph.wrapper_source
    assert "(32768, 1, 1024, 32)" in source          # h is stored NHWC for the second convolution
