"""The triton backend's one generic launcher (generic_launch.py, dynamo_lite/_launcher.c) instead of
Triton's C launcher built per kernel signature.

Without a GPU: each argument kind is packed as Triton's own generated launcher packs it, checked
byte for byte by running both against a stand-in CUDA driver (a `libcuda.so.1` built here that
records what cuLaunchKernel / cuLaunchKernelEx receive), in a subprocess so that the stand-in
never meets a real driver; kernels ours cannot launch go to Triton's launcher; the direct launch
path passes what the kernel takes; a compile worker builds no launcher. On a GPU: graphs launch
through it and match eager."""
import collections
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
import torch

from triton_env import DEVICE, INTERPRET   # first: sets TRITON_INTERPRET before triton loads

import torch.fx                                            # noqa: E402

from dynamo_lite.backends.triton import generic_launch, settings   # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    from dynamo_lite import _launcher
except ImportError:
    _launcher = None

needs_extension = pytest.mark.skipif(_launcher is None, reason="dynamo_lite._launcher is not built")

Metadata = collections.namedtuple("Metadata", "num_warps num_ctas shared launch_cooperative_grid launch_pdl "
                                              "global_scratch_size profile_scratch_size tensordesc_meta target")
Target = collections.namedtuple("Target", "backend arch warp_size")


def metadata(**changes):
    plain = dict(num_warps=4, num_ctas=1, shared=1024, launch_cooperative_grid=False, launch_pdl=False,
                 global_scratch_size=0, profile_scratch_size=0, tensordesc_meta=None, target=Target("cuda", 90, 32))
    return Metadata(**{**plain, **changes})


# ----------------------------------------------------------------------------------------------
# which kernels, and the kind of each argument
# ----------------------------------------------------------------------------------------------

def test_each_signature_type_has_its_kind():
    signature = {"a": "*fp32", "b": "*bf16", "c": "i1", "d": "i8", "e": "i16", "f": "i32", "g": "i64", "h": "u1",
                 "i": "u8", "j": "u16", "k": "u32", "l": "u64", "m": "fp16", "n": "bf16", "o": "fp32", "p": "fp64",
                 "XBLOCK": "constexpr"}
    assert generic_launch.kinds_for(signature) == "PPbbhiqBBHIQezfdx"
    assert generic_launch.kinds_for({"t": ("*fp32", "i32")}) is None             # a tuple argument
    assert generic_launch.kinds_for({"d": "tensordesc<fp16[64, 64]>"}) is None


@pytest.mark.parametrize("changes, why", [
    ({}, None),
    ({"num_ctas": 2}, "a cluster of CTAs"),
    ({"launch_cooperative_grid": True}, "a cooperative launch"),
    ({"launch_pdl": True}, "programmatic dependent launch"),
    ({"global_scratch_size": 128}, "a global scratch buffer"),
    ({"profile_scratch_size": 64}, "a profile scratch buffer"),
    ({"tensordesc_meta": [{"swizzle": 0}]}, "tensor descriptors"),
    ({"target": Target("hip", "gfx942", 64)}, "a hip kernel"),
])
def test_kernels_it_cannot_launch_are_named_with_the_reason(changes, why):
    assert generic_launch.why_not({"a": "*fp32", "n": "i32", "XBLOCK": "constexpr"}, metadata(**changes)) == why


class FakeSource:
    def __init__(self, module, signature):
        fn = type("fn", (), {"__module__": module})
        self.fn = type("jit", (), {"fn": fn})()
        self.signature = signature


def test_our_kernels_get_the_generic_launcher_and_everything_else_tritons(monkeypatch):
    monkeypatch.setattr(generic_launch, "unavailable", lambda: None)
    monkeypatch.setattr(settings, "generic_launch", True)
    monkeypatch.setattr(generic_launch, "stats", {"generic": 0, "triton": 0, "reasons": {}})
    monkeypatch.setattr(generic_launch, "GenericLauncher", lambda signature, metadata: "generic")
    make = generic_launch.make_launcher_factory(lambda src, metadata: "triton")
    ours = FakeSource("dynamo_lite_kernels.triton_poi_abc", {"a": "*fp32", "XBLOCK": "constexpr"})
    assert make(ours, metadata()) == "generic"
    assert make(FakeSource("users_module", ours.signature), metadata()) == "triton"      # not ours
    assert make(ours, metadata(launch_cooperative_grid=True)) == "triton"                # ours, unusual
    monkeypatch.setattr(settings, "generic_launch", False)
    assert make(ours, metadata()) == "triton"                                              # switched off
    assert generic_launch.stats == {"generic": 1, "triton": 3, "reasons": {"a cooperative launch": 1}}


@needs_extension
def test_without_a_driver_it_says_why_it_cannot_launch():
    if _launcher.error() is None:
        pytest.skip("a CUDA driver is loaded here")
    import triton
    why = generic_launch.unavailable()
    assert "libcuda.so.1" in why or not triton.__version__.startswith(generic_launch.VERIFIED_TRITON), why
    with pytest.raises(RuntimeError, match="cannot launch: .*libcuda.so.1"):
        _launcher.launch(1, 1, 1, 1, 128, 0, 0, b"")


# ----------------------------------------------------------------------------------------------
# packing, without a driver
# ----------------------------------------------------------------------------------------------

@needs_extension
@pytest.mark.parametrize("kind, value, packed", [
    ("b", 200, struct.pack("<B", 200)),
    ("h", -1234, struct.pack("<h", -1234)),
    ("i", -7, struct.pack("<i", -7)),
    ("q", -2 ** 40, struct.pack("<q", -2 ** 40)),
    ("B", True, b"\x01"),
    ("B", 300, struct.pack("<B", 300 & 0xFF)),            # masked, as Triton's format 'B'
    ("H", 70000, struct.pack("<H", 70000 & 0xFFFF)),
    ("I", 2 ** 32 + 5, struct.pack("<I", 5)),
    ("Q", 2 ** 64 - 1, struct.pack("<Q", 2 ** 64 - 1)),
    ("e", 1.5, struct.pack("<e", 1.5)),
    ("z", 3.14159, struct.pack("<f", 3.14159)[2:]),      # bf16: the top half of the fp32, truncated
    ("f", 0.1, struct.pack("<f", 0.1)),
    ("d", 0.1, struct.pack("<d", 0.1)),
    ("P", 0x7F0012345600, struct.pack("<Q", 0x7F0012345600)),
    ("P", None, bytes(8)),
    ("x", 1024, b""),                                     # a constexpr: not passed
])
def test_each_kind_is_packed_as_its_c_type(kind, value, packed):
    assert _launcher.pack(kind.encode(), value) == packed


@needs_extension
@pytest.mark.parametrize("kind, value, error", [
    ("b", -1, OverflowError), ("h", 40000, OverflowError), ("i", 2 ** 31, OverflowError),
    ("q", 2 ** 63, OverflowError), ("i", 1.5, TypeError), ("Q", 1.0, TypeError), ("P", "text", TypeError),
    ("?", 1, ValueError),
])
def test_values_tritons_launcher_refuses_are_refused(kind, value, error):
    with pytest.raises(error):
        _launcher.pack(kind.encode(), value)


@needs_extension
def test_a_tensor_is_passed_as_its_address():
    t = torch.empty(4)
    if _launcher.error() is None:       # a driver is loaded: a CPU tensor is refused, as Triton refuses it
        with pytest.raises(ValueError, match="cpu tensor"):
            _launcher.pack(b"xPx", 1, t, None)
    else:
        assert _launcher.pack(b"xPx", 1, t, None) == struct.pack("<Q", t.data_ptr())


# ----------------------------------------------------------------------------------------------
# against Triton's own launcher, through a stand-in driver
# ----------------------------------------------------------------------------------------------

STUB_DRIVER = r"""
#include "cuda.h"
#include <string.h>
/* a stand-in libcuda.so.1: records the launch it is asked for */
static size_t expected[512]; static int n_expected;
static unsigned char params_seen[8192]; static size_t params_length;
static unsigned long long seen[9]; static int launches;
void stub_expect(int n, const size_t *sizes) { n_expected = n; memcpy(expected, sizes, n * sizeof(size_t)); }
int stub_launches(void) { int n = launches; launches = 0; return n; }   /* since the last call */
size_t stub_params(unsigned char *out) { memcpy(out, params_seen, params_length); return params_length; }
void stub_dims(unsigned long long *out) { memcpy(out, seen, sizeof seen); }
static void record(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, CUstream stream, void **params) {
    unsigned long long dims[9] = {(unsigned long long)f, gx, gy, gz, bx, by, bz, shared, (unsigned long long)stream};
    memcpy(seen, dims, sizeof dims);
    params_length = 0;
    for (int i = 0; i < n_expected; i++) { memcpy(params_seen + params_length, params[i], expected[i]); params_length += expected[i]; }
    launches++;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params,
                                void **extra) {
    record(f, gx, gy, gz, bx, by, bz, shared, stream, params); return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    if (c->numAttrs != 0) return CUDA_ERROR_INVALID_VALUE;
    record(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes,
           c->hStream, params);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p) { *(CUdeviceptr *)data = p; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) { *s = "stand-in error"; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)1; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) { *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { *c = (CUcontext)1; return CUDA_SUCCESS; }
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { return CUDA_SUCCESS; }
"""

# Both launchers are called as Triton's CompiledKernel calls its launcher (`kernel.run(...)`) with
# the same kernel; what reached the driver is compared. Each case: the kernel's parameters as
# (signature type, value), with the signature of scalars left to Triton's binder where given as
# None (an int equal to 1 and None become constexprs there, and are not passed).
COMPARE = r"""
import ctypes, json, sys
stub_path, include_dir, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
stub = ctypes.CDLL(stub_path, mode=ctypes.RTLD_GLOBAL)     # first: it is the libcuda.so.1 of this process
import torch
from triton import knobs
from triton.backends.nvidia.driver import CudaLauncher
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend, GPUTarget
from dynamo_lite import _launcher
from dynamo_lite.backends.triton import generic_launch
_launcher.load(stub_path)
SIZES = {"P": 8, "b": 1, "h": 2, "i": 4, "q": 8, "B": 1, "H": 2, "I": 4, "Q": 8, "e": 2, "z": 2, "f": 4, "d": 8}

class Meta:
    num_warps, num_ctas, shared, launch_cooperative_grid, launch_pdl = 8, 1, 4096, False, False
    global_scratch_size = global_scratch_align = profile_scratch_size = profile_scratch_align = 0
    tensordesc_meta = None
    target = GPUTarget("cuda", 90, 32)

def value(v):
    if isinstance(v, list):            # ["tensor", dtype]
        return torch.empty(8, dtype=getattr(torch, v[1]))
    return v

def record():
    out = (ctypes.c_ubyte * 8192)()
    length = stub.stub_params(out)
    dims = (ctypes.c_ulonglong * 9)()
    stub.stub_dims(dims)
    return {"launches": stub.stub_launches(), "dims": list(dims), "params": bytes(out[:length]).hex()}

results = []
for case in cases:
    names = [f"a{i}" for i in range(len(case["params"]))]
    args = [value(v) for _, v in case["params"]]
    signature = {n: (ty if ty is not None else native_specialize_impl(BaseBackend, a, False, True, True)[0])
                 for n, (ty, _), a in zip(names, case["params"], args)}
    src = type("Src", (), {"signature": signature, "constants": {},
                           "fn": type("Fn", (), {"arg_names": names})()})()
    kinds = generic_launch.kinds_for(signature)
    sizes = [SIZES[k] for k in kinds if k != "x"] + [8, 8]
    stub.stub_expect(len(sizes), (ctypes.c_size_t * len(sizes))(*sizes))
    row = {"signature": signature}
    grid = case["grid"]
    for name, launcher in (("triton", CudaLauncher(src, Meta)), ("ours", generic_launch.GenericLauncher(signature, Meta))):
        try:
            launcher(*grid, 0x5150, 0xF00D, (Meta.num_warps, Meta.num_ctas, Meta.shared), None, None, None, *args)
            row[name] = record()
        except Exception as e:
            row[name] = {"error": type(e).__name__}
    results.append(row)
print("RESULTS", json.dumps(results))
"""

CASES = [
    # every kind, constexprs between and after, null and integer pointers
    {"grid": [3, 2, 1], "params": [["*fp32", ["tensor", "float32"]], ["i1", 1], ["i8", 100], ["i16", -1234],
                                   ["i32", -7], ["i64", -2 ** 40], ["constexpr", 1], ["u1", True], ["u8", 300],
                                   ["u16", 65535], ["u32", 2 ** 32 + 5], ["u64", 2 ** 64 - 1], ["fp16", 1.5],
                                   ["bf16", 3.14159], ["fp32", 0.1], ["fp64", 0.1], ["*bf16", None],
                                   ["*fp16", 0x7F0012345600], ["constexpr", 1024]]},
    # as the binder specializes our kernels' arguments: 1 and None are constexprs, 16 an i32, 2**33 an i64
    {"grid": [7, 1, 1], "params": [[None, ["tensor", "float16"]], [None, ["tensor", "bfloat16"]], [None, 1],
                                   [None, 16], [None, 2 ** 33], [None, 0.5], [None, True], [None, None],
                                   [None, 2 ** 63], ["constexpr", 64], ["constexpr", 8]]},
    # constexprs only; an empty grid (nothing launched by either)
    {"grid": [5, 1, 1], "params": [["constexpr", 4]]},
    {"grid": [0, 1, 1], "params": [["*fp32", 4096], ["i32", 3]]},
    # a value Triton's launcher refuses (format 'b' is an unsigned byte): both refuse it
    {"grid": [1, 1, 1], "params": [["i8", -1]]},
]


@needs_extension
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_it_passes_the_driver_what_tritons_own_launcher_passes(tmp_path):
    import triton
    if not triton.__version__.startswith(generic_launch.VERIFIED_TRITON):
        # (the launcher is not used with it either: generic_launch.unavailable says why)
        pytest.skip(f"Triton {triton.__version__}: the packing is checked against {generic_launch.VERIFIED_TRITON}")
    include = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "include")
    if not os.path.exists(os.path.join(include, "cuda.h")):
        pytest.skip("triton without its CUDA backend headers")
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    (stub_dir / "stub.c").write_text(STUB_DRIVER)
    stub = stub_dir / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{include}", "-Wl,-soname,libcuda.so.1", "-o", str(stub),
                    str(stub_dir / "stub.c")], check=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_LIBCUDA_PATH=str(stub_dir),
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-c", COMPARE, str(stub), include, json.dumps(CASES)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.split("RESULTS ", 1)[1])
    for case, row in zip(CASES, results):
        assert row["ours"] == row["triton"], (case, row)
    assert [row["ours"].get("launches") for row in results] == [1, 1, 1, 0, None]   # the empty grid: none
    assert results[0]["ours"]["dims"][1:8] == [3, 2, 1, 256, 1, 1, 4096]
    assert results[-1]["ours"] == {"error": "OverflowError"}
    # the binder's case: 1 and None were not passed, and neither were the constexprs
    assert generic_launch.kinds_for(results[1]["signature"]) == "PPxiqfBxQxx"


# ----------------------------------------------------------------------------------------------
# the direct launch path and the compile workers
# ----------------------------------------------------------------------------------------------

@needs_extension
def test_the_direct_launch_passes_only_what_the_kernel_takes(monkeypatch):
    """launch.py's generated `run` calls the generic launcher with addresses, scalars by value,
    without the arguments Triton specialized into the kernel and without constexprs."""
    from dynamo_lite.backends.triton import launch
    calls = []
    run = generic_launch.GenericLauncher({"out": "*fp32", "x": "*fp32", "one": "constexpr", "n": "i32",
                                          "XBLOCK": "constexpr"}, metadata(num_warps=2, shared=64))
    run.native_launch = lambda *args: calls.append(args)
    compiled = type("Compiled", (), {"run": run, "function": 0xABC, "packed_metadata": (2, 1, 64)})()
    ks = type("KS", (), {"args": ["out", "x", "one", "n"], "scalars": [2, 3], "name": "triton_poi_test"})()
    launcher = type("L", (), {"ks": ks, "grid": (4, 1, 1), "check_alignment": (), "_alignment": None,
                              "_constexprs": lambda self: {"XBLOCK": 128}, "_call": None, "_unusable": None})()
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 77, raising=False)
    direct = launch._direct_launch(launcher, compiled, torch.device("cuda", 0))
    a, b = torch.empty(4), torch.empty(4)
    direct(a, b, 1, 1000)
    assert calls == [(0xABC, 4, 1, 1, 64, 64, 77, b"PPi", a.data_ptr(), b.data_ptr(), 1000)]


def _can_compile_for_sm90() -> bool:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    return spec is not None and os.path.exists(os.path.join(os.path.dirname(spec.origin), "backends", "nvidia",
                                                            "bin", "ptxas"))


KERNEL = """
import triton
import triton.language as tl

@triton.jit
def add_kernel(out_ptr, in_ptr, n, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr + x, tl.load(in_ptr + x, x < n) + 1, x < n)
"""


@pytest.mark.skipif(not _can_compile_for_sm90(), reason="needs triton with its CUDA backend (ptxas)")
def test_a_worker_builds_no_launcher_where_the_parent_launches_through_ours(tmp_path):
    from dynamo_lite.backends.triton import precompile
    (tmp_path / "add_kernel.py").write_text(KERNEL)
    job = {"path": str(tmp_path / "add_kernel.py"), "name": "add_kernel", "args": ["*float32", "*float32", "int"],
           "constexprs": {"XBLOCK": 128}, "num_warps": 4, "target": ["cuda", 90, 32],
           "cache_dir": str(tmp_path / "bin")}
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(precompile.WORKER_SCRIPT)!r})
        import compile_worker
        compile_worker._warm_launcher = lambda kernel, target: print("BUILT")
        job = json.loads(sys.argv[1])
        compile_worker.compile_job(dict(job, generic_launch=True))
        print("GENERIC DONE")
        compile_worker.compile_job(dict(job, generic_launch=False))
        print("TORCH", "torch" in sys.modules)
    """), json.dumps(job)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["GENERIC", "DONE", "BUILT", "TORCH", "False"], out.stdout


# ----------------------------------------------------------------------------------------------
# on a GPU
# ----------------------------------------------------------------------------------------------

def model_scaled(scale: float):
    def model(x, w, y):
        h = torch.nn.functional.layer_norm(x * scale, (x.shape[-1],), w)
        return (h.softmax(-1) + y.sum(0)).relu(), torch.sigmoid(x).mean(1) * scale
    return model


@pytest.mark.skipif(INTERPRET, reason="launches on a GPU")
@pytest.mark.parametrize("generic", [True, False])
def test_graphs_launch_through_it_on_a_gpu(monkeypatch, generic):
    from dynamo_lite.backends.triton import triton_backend
    import triton
    if generic and not triton.__version__.startswith(generic_launch.VERIFIED_TRITON):
        pytest.skip(f"Triton {triton.__version__}: the generic launcher is not used with it")
    if generic and generic_launch.unavailable() is not None:
        pytest.fail(f"the generic launcher is unavailable on a GPU: {generic_launch.unavailable()}")
    monkeypatch.setattr(settings, "generic_launch", generic)
    monkeypatch.setattr(generic_launch, "stats", {"generic": 0, "triton": 0, "reasons": {}})
    args = (torch.randn(64, 1000, device=DEVICE), torch.randn(1000, device=DEVICE), torch.randn(8, 1000, device=DEVICE))
    model = model_scaled(2.0 if generic else 3.0)          # kernels of their own: compiled here
    compiled = triton_backend(torch.fx.symbolic_trace(model), list(args))
    for _ in range(3):                  # the first launch, then the direct path
        for got, ref in zip(compiled(*args), model(*args)):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    if generic:
        assert generic_launch.stats["generic"] > 0 and generic_launch.stats["triton"] == 0, generic_launch.stats
    else:
        assert generic_launch.stats["generic"] == 0
