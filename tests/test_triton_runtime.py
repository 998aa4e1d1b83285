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
    short_rows = KernelSource("k", "", [], "per", 16384, 49, True, [])      # rows reduced within one warp too
    assert {c["num_warps"] for c in candidates(short_rows, False)} >= {1, 4}
    # a 1-D kernel with vectors of its rows of 49: each block's rows fit its YBLOCK
    row_vectors = KernelSource("k", "", [], "poi", 1 << 22, 1, True, [], row_inner=49)
    for c in candidates(row_vectors, False) + candidates(row_vectors, True):
        assert c["YBLOCK"] >= (c["XBLOCK"] - 1) // 49 + 2 and c["YBLOCK"] & (c["YBLOCK"] - 1) == 0, c
        assert grid_for(row_vectors, c) == (-(-(1 << 22) // c["XBLOCK"]), 1, 1)


class _RecordingCLaunch:
    """Stands in for Triton's C launcher: records each call's arguments."""

    def __init__(self, fail: bool = False):
        self.calls = []
        self.fail = fail

    def __call__(self, *args):
        if self.fail:
            raise TypeError("function takes exactly 20 arguments")
        self.calls.append(args)


def _fake_compiled(c_launch):
    import types
    run = types.SimpleNamespace(launch=c_launch, global_scratch_size=0, profile_scratch_size=0,
                                launch_cooperative_grid=False, launch_pdl=False)
    return types.SimpleNamespace(run=run, function=1234, packed_metadata=(4, 1, 0))


@needs_triton
def test_direct_launch_passes_addresses_and_checks_alignment(cache_dir, monkeypatch):
    """After the first launch the wrapper calls `launcher.run`, generated per kernel: Triton's C
    launcher gets the grid, the kernel and each tensor as its address (an int); an argument the
    kernel was compiled for as 16-byte aligned that now is not goes back to `_call` (another
    specialization), as does a launcher whose API differs (then for good)."""
    from dynamo_lite.backends.triton import launch
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 77, raising=False)

    def fn(x, y):
        return x * 2 + y
    x, y = torch.randn(4096, device=DEVICE), torch.randn(4096, device=DEVICE)
    compiled = compile_fn(fn, x, y)
    torch.testing.assert_close(compiled(x, y), fn(x, y))
    (launcher,) = compiled.compiled_graph.launchers
    assert launcher.check_alignment == (0, 1)                 # both inputs may come misaligned
    launcher.config, launcher.grid, launcher._alignment = dict(XBLOCK=1024, num_warps=4), (4, 1, 1), (True, True)
    slow = []
    monkeypatch.setattr(launcher, "_call", lambda *args: slow.append(args))
    c_launch = _RecordingCLaunch()
    run = launch._direct_launch(launcher, _fake_compiled(c_launch), torch.device("cuda", 0))
    out = torch.empty(4096, device=DEVICE)
    run(x, y, out)
    ((*head, a0, a1, a2, xblock),) = c_launch.calls
    assert head == [4, 1, 1, 77, 1234, False, False, None, None, (4, 1, 0), None, None, None]
    assert (a0, a1, a2, xblock) == (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1024) and not slow
    base = torch.randn(4097, device=DEVICE)
    run(base[1:], y, out)                                     # misaligned by 4 bytes: the other path
    assert len(c_launch.calls) == 1 and len(slow) == 1 and slow[0][0].data_ptr() == base[1:].data_ptr()

    failing = launch._direct_launch(launcher, _fake_compiled(_RecordingCLaunch(fail=True)), torch.device("cuda", 0))
    failing(x, y, out)
    assert launcher._direct_failed and len(slow) == 2


@needs_triton
def test_direct_launch_declines_launchers_it_does_not_know(cache_dir):
    from dynamo_lite.backends.triton import launch

    def fn(x):
        return x + 1
    x = torch.randn(64, device=DEVICE)
    compiled = compile_fn(fn, x)
    compiled(x)
    (launcher,) = compiled.compiled_graph.launchers
    launcher.config, launcher.grid, launcher._alignment = dict(XBLOCK=64, num_warps=1), (1, 1, 1), (True,)
    with_scratch = _fake_compiled(_RecordingCLaunch())
    with_scratch.run.global_scratch_size = 128
    assert launch._direct_launch(launcher, with_scratch, torch.device("cuda", 0)) is None
    python_wrapper = _fake_compiled(lambda *args: None)       # Triton's tensor-descriptor wrapper is Python
    assert launch._direct_launch(launcher, python_wrapper, torch.device("cuda", 0)) is None


def _binding_cases():
    """(OpOverload, args, kwargs) for each entry of wrapper.PYTHON_BINDINGS."""
    aten = torch.ops.aten
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 6, generator=g), torch.randn(6, 7, generator=g)
    bias = torch.randn(7, generator=g)
    a3, b3, bias3 = torch.randn(3, 5, 6, generator=g), torch.randn(3, 6, 7, generator=g), torch.randn(3, 5, 7, generator=g)
    x, w = torch.randn(2, 4, 9, 9, generator=g), torch.randn(8, 2, 3, 3, generator=g)
    weight, ids = torch.randn(10, 4, generator=g), torch.tensor([[1, 0, 9], [3, 3, 2]])
    return [
        (aten.convolution.default, (x, w, torch.randn(8, generator=g), [2, 1], [1, 0], [1, 2], False, [0, 0], 2), {}),
        (aten.convolution.default, (x, torch.randn(4, 3, 3, 3, generator=g), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1), {}),
        (aten.mm.default, (a, b), {}),
        (aten.mm.out, (a, b), {"out": torch.empty(5, 7)}),
        (aten.addmm.default, (bias, a, b), {"beta": 0.5, "alpha": 2.0}),
        (aten.addmm.out, (bias, a, b), {"out": torch.empty(5, 7)}),
        (aten.bmm.default, (a3, b3), {}),
        (aten.bmm.out, (a3, b3), {"out": torch.empty(3, 5, 7)}),
        (aten.baddbmm.default, (bias3, a3, b3), {"beta": 2.0, "alpha": 0.5}),
        (aten.baddbmm.out, (bias3, a3, b3), {"beta": 2.0, "out": torch.empty(3, 5, 7)}),
        (aten.embedding.default, (weight, ids), {}),
        (aten.embedding.default, (weight, ids, 3), {}),
    ]


def test_python_bindings_run_the_same_overload():
    """The wrapper calls some extern ops through their Python binding (less host time than an
    OpOverload call): each gives what its OpOverload gives, bit for bit, with the same arguments."""
    from dynamo_lite.backends.triton.wrapper import PYTHON_BINDINGS
    cases = _binding_cases()
    assert {op for op, _, _ in cases} == set(PYTHON_BINDINGS)
    for op, args, kwargs in cases:
        want = op(*args, **kwargs)
        got_kwargs = dict(kwargs)
        if "out" in kwargs:
            got_kwargs["out"] = torch.empty_like(kwargs["out"])
        got = PYTHON_BINDINGS[op](*args, **got_kwargs)
        assert torch.equal(got, want), op
        if "out" in kwargs:
            assert got is got_kwargs["out"]


@needs_triton
def test_wrapper_calls_python_bindings_for_externs(cache_dir):
    def fn(x, w, b):
        return torch.relu(F.linear(x, w, b)) @ w
    x, w, b = torch.randn(16, 32, device=DEVICE), torch.randn(32, 32, device=DEVICE), torch.randn(32, device=DEVICE)
    compiled = compile_fn(fn, x, w, b)
    torch.testing.assert_close(compiled(x, w, b), fn(x, w, b))
    namespace = compiled.compiled_graph.wrapper_call.__globals__
    externs = [v for k, v in namespace.items() if k.startswith("aten_op")]
    assert externs and all(not isinstance(v, torch._ops.OpOverload) for v in externs)


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
def test_gpu_direct_launch_is_used_and_matches_eager(cache_dir):
    def fn(x, y):
        return torch.sigmoid(x * 1.5) + y
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    compiled = compile_fn(fn, x, y)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    (launcher,) = compiled.compiled_graph.launchers
    assert launcher.run.__code__.co_filename.startswith("<launch ")
    x2, y2 = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(compiled(x2, y2), fn(x2, y2))   # other buffers: their addresses


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


@pytest.mark.parametrize("fast", [True, False], ids=["torch-helper", "fallback"])
def test_a_read_only_view_starts_past_its_tensors_own_offset(fast, monkeypatch):
    """`reinterpret(t, sizes, strides, k)` in a wrapper: `t`'s memory from `k` elements past where
    `t` itself starts (a graph input can be a view with a storage offset), with torch's C helper
    and with the fallback where torch has none."""
    from dynamo_lite.backends.triton import wrapper
    if not fast:
        monkeypatch.setattr(wrapper, "_torch_fast_path", lambda name: None)
    reinterpret = wrapper._reinterpreter()
    base = torch.arange(40.0, device=DEVICE)
    t = base[10:]                                   # storage offset 10
    got = reinterpret(t, (2, 3), (3, 1), 4)
    assert got.storage_offset() == 14 and got.tolist() == [[14.0, 15.0, 16.0], [17.0, 18.0, 19.0]]
    assert reinterpret(t, (2,), (1,)).tolist() == [10.0, 11.0]


def test_attention_reads_views_of_one_buffer_through_reinterpret():
    """q, k and v as views into one projection buffer (offsets, head-split strides) go to the
    attention call as `reinterpret` views (its schema says it only reads them); the results
    match eager, the view offsets included."""
    def fn(x, w):
        qkv = (x @ w).view(2, 16, 3, 4, 8)
        q, k, v = qkv.unbind(2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2).reshape(2, 16, 32) * 2
    x, w = torch.randn(2, 16, 32, device=DEVICE), torch.randn(32, 96, device=DEVICE)
    compiled = compile_fn(fn, x, w)
    torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)
    source = compiled.compiled_graph.wrapper_source
    assert "as_strided" not in source and "_view(" not in source
    assert sum(line.count("reinterpret(") for line in source.splitlines() if ", 32)" in line or ", 64)" in line) >= 2
