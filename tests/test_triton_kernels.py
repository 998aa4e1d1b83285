"""Generated Triton kernels against eager, on fx graphs fed straight to the backend.

Each test traces a function with `torch.fx.symbolic_trace` (the same kind of torch-level graph
dynamo_lite captures), compiles it with `triton_backend`, compares every output with eager and
asserts how many kernels the graph became (fusion really happened). On a machine without a GPU
the kernels run under Triton's interpreter (TRITON_INTERPRET=1, set here before triton loads),
so shapes stay small.
"""
import re
import warnings

import pytest
import torch

from triton_env import DEVICE, INTERPRET, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

import torch.fx                                           # noqa: E402
import torch.nn.functional as F                           # noqa: E402

from dynamo_lite.backends.triton import triton_backend   # noqa: E402
import dynamo_lite as dl                                   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


def compile_and_check(fn, *args, kernels=None, externs=None, rtol=1e-4, atol=1e-4, runs_as_captured=None,
                      equal_nan=False):
    """Compile `fn`'s fx graph, compare with eager (outputs and mutated inputs), check counts.
    `runs_as_captured`: the fallback reason expected (the graph is not compiled); `equal_nan`:
    NaN where eager has NaN counts as equal."""
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, list(args))
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    expected = fn(*eager_args)
    got = compiled(*args)
    assert type(got) is type(expected)             # the structure gm.forward returns
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape and g.dtype == e.dtype, f"output {i}: {g.shape}/{g.dtype} vs {e.shape}/{e.dtype}"
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=lambda m: f"output {i}: {m}")
    for a, e in zip(args, eager_args):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                       msg=lambda m: f"mutated input: {m}")
    info = compiled.compiled_graph
    if runs_as_captured is not None:
        assert runs_as_captured in (info.fallback_reason or ""), info.fallback_reason
        return
    assert info.fallback_reason is None
    if kernels is not None:
        assert info.kernel_count == kernels, f"{info.kernel_count} kernels, expected {kernels}:\n{info.source}"
    if externs is not None:
        assert sum(info.extern_ops.values()) == externs, info.extern_ops
    return info


# -- pointwise ------------------------------------------------------------------------------

def test_pointwise_chain_is_one_kernel():
    def fn(x, y):
        return ((x * 2 + 1).relu() * y - 0.5).sigmoid() * x + y
    info = compile_and_check(fn, t(64, 33), t(64, 33), kernels=1, externs=0)
    assert "xindex" in info.kernels[0].source and "//" not in info.kernels[0].source   # dims merged


def test_unary_math_ops():
    def fn(x):
        return (torch.exp(x) + torch.log(x.abs() + 1) + torch.sqrt(x.abs()) + torch.rsqrt(x.abs() + 1)
                + torch.sin(x) * torch.cos(x) + torch.tanh(x) + torch.erf(x) + x.reciprocal().clamp(-5, 5)
                + torch.floor(x) + torch.ceil(x) + torch.trunc(x) + x.sign() + x.pow(3) + x.abs().pow(0.7))
    compile_and_check(fn, t(257), kernels=1, rtol=1e-4, atol=1e-3)


def test_powers_of_negative_bases_and_denormal_powers_match_eager():
    """x ** e for integer e beyond the multiplies (|e| > 8) has x's sign where e is odd, as eager
    ((-2) ** 11 = -2048, not 2^(11 log2 -2) = NaN); a non-integer e of a negative x is NaN in both.
    2^x and x ** e below 2^-126 are denormals as in eager (the GPU's exp2 flushes them: their
    log would be -inf), and a power that small, logged, is finite."""
    def fn(x, small, tiny):
        return (x ** 11, x ** 10, x ** -9, x ** 2.5, torch.exp2(small), tiny ** 1.95,
                torch.log2(torch.exp2(small)), torch.log(tiny ** 1.95))
    x = torch.tensor([-2.0, -1.5, -0.5, 0.0, 0.5, 1.5, 2.0], device=DEVICE)
    small = torch.tensor([-130.0, -140.0, -126.5, -149.0, -100.0, 3.0, -160.0], device=DEVICE)
    tiny = torch.tensor([1e-20, 3e-20, 1e-21, 5e-19, 1e-10, 0.5, 2.0], device=DEVICE)
    info = compile_and_check(fn, x, small, tiny, rtol=1e-4, atol=1e-30, equal_nan=True)
    assert "_exp2(" in info.kernels[0].source


_PTX_OF = r"""
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from dynamo_lite.backends.triton import settings
path, name, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("kernel", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
signature = dict(args, XBLOCK="constexpr")
attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(args))}
src = ASTSource(getattr(module, name), signature=signature, constexprs={"XBLOCK": 64}, attrs=attrs)
kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(settings.compile_options(), num_warps=1))
print(kernel.asm["ptx"])
"""


def test_a_product_minus_itself_is_zero_as_in_eager(tmp_path):
    """`x * y - x * y` fused into one kernel is 0, as eager's (which rounds each op): Triton may not
    contract one op's multiply with the next op's add into an FMA, which gives the product's
    rounding error instead (settings.compile_options; fuzz seed 2202, program 41, on an H200: a
    where() on that value took the other branch). Checked in the kernel's PTX for an H100 too,
    compiled here (no GPU needed), so CPU CI sees it; on a GPU, also in the values."""
    import json
    import os
    import subprocess
    import sys
    from dynamo_lite.backends.triton import settings

    def fn(x, y):
        p = x * y
        d = (p - x * y) * 1e8
        return (torch.where(d == 0, 1.0, -1.0), d, torch.floor(x / y), torch.sqrt(x.abs()).floor(),
                y.abs().reciprocal())
    x, y = t(4096), t(4096)
    x[:4] = torch.tensor([4.6875, 49.0, 1e6, 7.0])              # exact quotients and roots
    y[:4] = torch.tensor([0.9375, 7.0, 1e3, 7.0])
    info = compile_and_check(fn, x, y, kernels=1, rtol=0, atol=0)
    assert settings.compile_options() == {"enable_fp_fusion": False}
    kernel = info.kernels[0]
    path = tmp_path / "kernel.py"
    path.write_text(kernel.source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _PTX_OF, str(path), kernel.name,
                          json.dumps({f"ptr{i}": "*fp32" for i in range(len(kernel.args))})],
                         capture_output=True, text=True, env=env, timeout=300)
    if run.returncode != 0 and ("ptxas" in run.stderr or "LLVM" in run.stderr and "not found" in run.stderr):
        pytest.skip(f"Triton cannot compile for sm_90 here: {run.stderr[-300:]}")
    assert run.returncode == 0, run.stderr[-2000:]
    ptx = run.stdout
    assert "mul.rn.f32" in ptx and "fma" not in ptx, ptx
    # IEEE division and square root, as eager's (Triton's `/` is div.full.f32, up to 2 ulp off:
    # 4.6875 / 0.9375 gave 5.0000005; tl.sqrt is sqrt.approx.ftz.f32)
    assert "div.rn.f32" in ptx and "div.full" not in ptx and "sqrt.rn.f32" in ptx and "sqrt.approx" not in ptx, ptx


def test_a_quotient_of_an_approximate_value_is_divided_without_ieee_divisions_slow_path():
    """IEEE division (tl.div_rn) where both operands are what eager computes, to the bit; Triton's
    `/` (div.full, no slow path) where one comes from an approximate function (exp: ex2.approx), as
    a softmax's normalization: the GPU's IEEE division calls a subroutine for every numerator of 0,
    which a causal mask makes half of them (1.9x slower on an H200). Values as eager's either way."""
    def fn(scores, mask, x, y):
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return probs, x / y, torch.exp(x) / y, (x / y).floor()
    scores, x, y = t(64, 128), t(64, 128), t(64, 128)
    x[0, :3], y[0, :3] = torch.tensor([4.6875, 49.0, 1e6]), torch.tensor([0.9375, 7.0, 1e3])
    mask = torch.ones(64, 128, device=DEVICE, dtype=torch.bool).triu(1)
    info = compile_and_check(fn, scores, mask, x, y)
    source = "\n".join(k.source for k in info.kernels)
    divisions = re.findall(r"tmp\d+ = (tl\.div_rn\(tmp\d+, tmp\d+\)|tmp\d+ / tmp\d+)", source)
    ieee = [d for d in divisions if d.startswith("tl.div_rn")]
    # x / y (a value and under the floor: one expression, once per kernel that holds it) rounded as
    # eager's; the softmax's and exp(x) / y with `/`
    assert 1 <= len(ieee) <= len(info.kernels) and len(divisions) - len(ieee) >= 2, source
    got = triton_backend(torch.fx.symbolic_trace(fn), [scores, mask, x, y])(scores, mask, x, y)
    assert torch.equal(got[1], x / y) and torch.equal(got[3], (x / y).floor())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_floor_division_of_floats_is_eagers(dtype):
    """torch.div(a, b, rounding_mode="floor") is the floor of the exact quotient, as eager's (and
    Python's //): 1.0 // 0.1 is 9, though 1.0 / 0.1 rounds to 10.0; and at the edges (0, -0,
    infinities, NaN, exact multiples, negative divisors) the same values, bit for bit. float64
    stays an aten call (its exact remainder would need a wider type)."""
    def fn(a, b):
        return torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc") * 2
    inf, nan = float("inf"), float("nan")
    edges_a = [1.0, 1.0, -7.0, 4.6875, 0.5, -0.5, -0.0, 0.0, 3.0, -3.0, inf, -inf, 5.0, -1.0, 1.0, nan, 6.0, -6.0]
    edges_b = [0.1, 0.2, 0.7, 0.9375, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, inf, inf, -inf, 1.0, -3.0, 0.25]
    # quotients below 128 in magnitude: exact in bf16 too (Triton's interpreter truncates fp32 to
    # bf16 where eager and the GPU round to nearest, so larger ones could differ by a bf16 ulp on CI)
    b_rest = (torch.rand(200) * 3 + 0.5) * torch.where(torch.rand(200) < 0.5, -1.0, 1.0)
    a = torch.cat([torch.tensor(edges_a), torch.randn(200) * 40]).to(DEVICE, dtype)
    b = torch.cat([torch.tensor(edges_b), b_rest]).to(DEVICE, dtype)
    if dtype is torch.bfloat16:
        # computed in fp32 and rounded once, as eager on CUDA (opmath); eager on the CPU rounds
        # its steps to bf16 (66 // -0.582 is -115 there, the floor of -113.4 being -114)
        compiled = triton_backend(torch.fx.symbolic_trace(fn), [a, b])
        for got, want in zip(compiled(a, b), fn(a.float(), b.float())):
            torch.testing.assert_close(got, want.to(dtype), rtol=0, atol=0, equal_nan=True)
        assert not compiled.compiled_graph.extern_ops
        return
    info = compile_and_check(fn, a, b, rtol=0, atol=0, equal_nan=True)
    assert bool(info.extern_ops) == (dtype is torch.float64), info.extern_ops


def test_activations():
    def fn(x):
        return (F.gelu(x) + F.gelu(x, approximate="tanh") + F.silu(x) + F.hardswish(x) + F.elu(x)
                + F.leaky_relu(x, 0.1) + F.softplus(x) + F.mish(x) + F.relu6(x) + torch.sigmoid(x))
    compile_and_check(fn, t(300), rtol=1e-4, atol=1e-4, kernels=1, externs=0)


def test_activations_of_log1p_and_expm1_are_one_kernel():
    """softplus, mish, ELU, SELU and CELU decompose into log1p / expm1, lowered (no aten call)."""
    def fn(x):
        return F.softplus(x) + F.mish(x) + F.elu(x) + F.selu(x) + F.celu(x, 0.5) + F.softplus(x, 2.0, 5.0)
    compile_and_check(fn, t(300) * 8, rtol=1.3e-6, atol=1e-5, kernels=1, externs=0)


#: tl.exp on the GPU is ex2.approx of x * log2(e): the product's rounding makes a relative error
#: growing with |x| (3e-6 near 76; eager's expf is within an ulp), under the interpreter numpy's
EXP_RTOL = 1e-6 if DEVICE == "cpu" else 1e-5

LOG1P_EXPM1_SPECIAL = [0.0, -0.0, -1.0, -1.5, float("inf"), float("-inf"), float("nan"), 1e-30, -1e-30, 1e-8,
                       -1e-8, 1e-4, -0.2929, 0.4142, 0.41422, -0.29289, 1.0, 2.0, 1e6, 3e38, -0.99999994, 88.7,
                       89.0, -88.0, -104.0, 5.0, 20.0, -17.33, -20.0, 0.69, -0.69, 0.7, -0.7]


@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_log1p_and_expm1_are_accurate_near_zero(name):
    """Within a few ulp of eager everywhere, where log(1 + x) / exp(x) - 1 would have lost a small
    x's digits; the special values (zeros' signs, -1, infinities, NaN) as eager's."""
    op = getattr(torch, name)
    x = torch.cat([torch.tensor(LOG1P_EXPM1_SPECIAL), torch.randn(2000) * 1e-3, torch.randn(2000) * 10,
                   torch.rand(2000) * 2 - 1]).to(DEVICE)
    rtol = 1e-6 if name == "log1p" else EXP_RTOL
    info = compile_and_check(lambda v: op(v), x, rtol=rtol, atol=0, equal_nan=True, kernels=1, externs=0)
    got = triton_backend(torch.fx.symbolic_trace(lambda v: op(v)), [x])(x)
    zeros = x == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(x[zeros]))
    assert "_" + name in info.source


ELEMENTARY_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 1.5, -3.5, float("inf"), float("-inf"), float("nan"),
                      1e-30, -1e-30, 1e-8, 0.99999994, -0.99999994, 1.0000001, 9.0, 9.1, 88.0, -88.5, 4096.0, 5000.0,
                      1e20, -1e20, 3e38, 0.3, 0.35, 2.414, 2.4143, 0.4142, 0.41422, 12.5, 13.5, -0.5000001]

#: op -> relative tolerance: those built from tl.exp / log / sin / cos (approximate on the GPU)
#: get more than those of exact arithmetic (1e-6 is about 8 ulp in fp32)
ELEMENTARY = {"atan": 1e-6, "asin": 1e-6, "acos": 1e-6, "asinh": 2e-6, "acosh": 2e-6, "atanh": 2e-6,
              "sinh": max(2e-6, EXP_RTOL), "cosh": max(2e-6, EXP_RTOL), "log10": 2e-6, "tan": 4e-6, "sinc": 4e-6, "round": 0, "signbit": 0}


@pytest.mark.parametrize("name", sorted(ELEMENTARY))
def test_elementary_functions_are_kernels_within_ulps_of_eager(name):
    """Inverse trigonometric and (inverse) hyperbolic functions, round-half-to-even, log10, tan,
    sinc and signbit: one kernel each (they were aten calls), within a few ulp of eager's libm
    on special values (zeros' signs, infinities, NaN, the ends of each formula's ranges) and on
    random ones of several scales."""
    op = getattr(torch, name)
    special = torch.tensor(ELEMENTARY_SPECIAL)
    x = torch.cat([special, torch.randn(2000), torch.randn(2000) * 20, torch.rand(2000) * 2 - 1,
                   torch.randn(500) * 1e-3, torch.randn(500).round() / 2]).to(DEVICE)
    if name in ("sinh", "cosh"):
        x = x[x.abs() != 89.0]          # eager's vectorized sinh / cosh overflow there, its scalar ones do not
    rtol = ELEMENTARY[name]
    info = compile_and_check(lambda v: op(v), x, rtol=rtol, atol=0, equal_nan=True, kernels=1, externs=0)
    got, want = triton_backend(torch.fx.symbolic_trace(lambda v: op(v)), [x])(x), op(x)
    zeros = want == 0
    if want.dtype.is_floating_point:
        assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros]))
    assert info.extern_ops == {}


@pytest.mark.parametrize("decimals", [1, 2, -1, -2])
def test_round_with_decimals_is_eagers(decimals):
    x = torch.cat([torch.randn(3000) * 100, torch.tensor([0.125, -0.125, 2.5, -2.5, 150.0, -250.0])]).to(DEVICE)
    compile_and_check(lambda v: torch.round(v, decimals=decimals) + 1, x, rtol=0, atol=0, kernels=1, externs=0)


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmax", "fmin", "copysign", "heaviside"])
def test_binary_elementary_functions_are_kernels_with_eagers_special_values(name):
    """atan2 (every quadrant, zeros' signs, both infinite), hypot (infinite beats NaN), fmax /
    fmin (a NaN ignored), copysign (-0.0's sign), heaviside: every pair of special values."""
    op = getattr(torch, name)
    a, b = _special_pairs()
    rtol = 1e-6 if name in ("atan2", "hypot") else 0
    info = compile_and_check(lambda x, y: op(x, y), a, b, rtol=rtol, atol=0, equal_nan=True, kernels=1, externs=0)
    got, want = triton_backend(torch.fx.symbolic_trace(lambda x, y: op(x, y)), [a, b])(a, b), op(a, b)
    zeros = want == 0
    if name not in ("fmax", "fmin"):     # which of 0.0 and -0.0 is the larger is C's choice (fmaxf)
        assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros]))
    assert info.extern_ops == {}


def test_elementary_functions_of_float64_stay_aten_calls():
    """fp32 formulas (atan's polynomial): fp64 is eager's call; copysign, exact, is a kernel."""
    x = t(50, dtype=torch.float64)
    compile_and_check(lambda v: torch.atan(v) * 2, x, externs=1, kernels=1)
    compile_and_check(lambda v: torch.copysign(v, -v) * 2, x, externs=0, kernels=1)


def _special_pairs():
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 3.0, 1e-30, -50.0, 50.0])
    a = torch.cat([special.repeat_interleave(len(special)), torch.randn(300) * 5])
    b = torch.cat([special.repeat(len(special)), torch.randn(300) * 5])
    return a.to(DEVICE), b.to(DEVICE)


def test_logaddexp_and_xlogy_are_kernels_with_eagers_special_values():
    """Every pair of special values (infinities of one sign, NaN, zeros) as eager's; xlogy with a
    scalar on either side; KL divergence (xlogy of the target) one kernel."""
    def fn(x, y):
        return torch.logaddexp(x, y), torch.xlogy(x, y), torch.xlogy(x, 2.0) + torch.xlogy(3.0, y.abs())
    a, b = _special_pairs()
    compile_and_check(fn, a, b, rtol=1.3e-6, atol=1e-6, equal_nan=True, externs=0)

    def kl(p, q):
        return F.kl_div(p, q, reduction="batchmean")
    compile_and_check(kl, t(8, 10).log_softmax(-1), t(8, 10).softmax(-1), rtol=1.3e-6, atol=1e-6, kernels=1, externs=0)


def test_pow_of_two_tensors_is_a_kernel_with_eagers_special_values():
    """C's pow on every pair of special values (signed zeros and infinities, NaN, negative bases
    with integer and fractional exponents), and BLOOM's ALiBi slopes (a 0-dim base to int32 powers)."""
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, float("inf"), float("-inf"),
                            float("nan"), 1e-30, 10.0, 2.5, -2.5])
    a = torch.cat([special.repeat_interleave(len(special)), torch.rand(300) * 10]).to(DEVICE)
    b = torch.cat([special.repeat(len(special)), torch.randn(300) * 3]).to(DEVICE)
    info = compile_and_check(lambda x, y: torch.pow(x, y), a, b, rtol=1e-5, atol=0, equal_nan=True, externs=0)
    got = triton_backend(torch.fx.symbolic_trace(lambda x, y: torch.pow(x, y)), [a, b])(a, b)
    zeros = got == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(torch.pow(a, b)[zeros])), info.source
    powers = torch.arange(1, 9, dtype=torch.int32, device=DEVICE)
    compile_and_check(lambda base, p: torch.pow(base, p) * 2, torch.tensor(0.5, device=DEVICE), powers,
                      rtol=1e-6, atol=0, kernels=1, externs=0)


def _image():
    return t(2, 8, 6, 6)


#: composite ops that were aten calls of their own, now decomposed into lowered ops: (fn, inputs)
COMPOSITES = {
    "weight_norm": (lambda v, g: torch._weight_norm(v, g, 0) * 2, lambda: [t(8, 4, 3), t(8, 1, 1).abs()]),
    "unfold": (lambda a: F.unfold(a, 3, padding=1) * 2, lambda: [_image()]),
    "fold": (lambda a: F.fold(a, (6, 6), 3, padding=1) * 2, lambda: [t(2, 72, 36)]),
    "bicubic": (lambda a: F.interpolate(a, scale_factor=2, mode="bicubic") + 1, lambda: [_image()]),
    "logaddexp2": (lambda a, b: torch.logaddexp2(a, b) + 1, lambda: [t(64), t(64)]),
    "xlog1py": (lambda a, b: torch.special.xlog1py(a, b.abs()) + 1, lambda: [t(64), t(64)]),
    "losses": (lambda a, b: F.huber_loss(a, b) + F.smooth_l1_loss(a, b, beta=0.5) + F.mse_loss(a, b) + F.l1_loss(a, b),
               lambda: [t(64), t(64)]),
    "bce": (lambda a, b: F.binary_cross_entropy(torch.sigmoid(a), b), lambda: [t(64), t(64).sigmoid()]),
    "shuffles": (lambda a: (F.pixel_shuffle(a * 2, 2) + 1, F.channel_shuffle(a * 2, 2) + 1,
                            F.pixel_unshuffle(a * 2, 2) + 1), lambda: [_image()]),
    "prelu": (lambda a, w: F.prelu(a, w) + 1, lambda: [_image(), t(8).abs()]),
    "shrinks": (lambda a: F.hardshrink(a) + F.softshrink(a) + F.logsigmoid(a), lambda: [t(64)]),
    "reductions": (lambda a: torch.aminmax(a, dim=1)[0] + torch.nansum(a, 1) + torch.std_mean(a, 1)[0]
                   + torch.std_mean(a, 1)[1], lambda: [t(4, 9)]),
    "renorm_diag": (lambda a: torch.renorm(a, 2, 0, 1.0) + torch.diag_embed(a)[:, 0, :5], lambda: [t(4, 5)]),
    "index_fill": (lambda a, i: a.index_fill(0, i, 2.0) + 1,
                   lambda: [t(5, 3), torch.tensor([0, 2], device=DEVICE)]),
    "grid_sample": (lambda a, g: F.grid_sample(a, g, align_corners=False) + 1,
                    lambda: [_image(), torch.rand(2, 4, 4, 2, device=DEVICE) * 2 - 1]),
    "bce_logits": (lambda a, b, w: F.binary_cross_entropy_with_logits(a, b, pos_weight=w) + 1,
                   lambda: [t(4, 5), t(4, 5).sigmoid(), t(5).abs()]),
    "new_empty": (lambda a: a.new_empty_strided((4, 6), (6, 1)).fill_(2.0) + a.new_empty((4, 6)).fill_(1.0) + a,
                  lambda: [t(4, 6)]),
    "arange": (lambda a: a + torch.arange(0, 6, device=a.device) + torch.arange(2, 8, device=a.device).float(),
               lambda: [t(4, 6)]),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_ops_are_kernels(name):
    """Losses, shrinks, shuffles, weight norm, unfold / fold, bicubic upsampling, grid sampling
    and the like: eager's values, no aten call left (they were each one, or several)."""
    fn, make = COMPOSITES[name]
    compile_and_check(fn, *make(), rtol=1e-5, atol=1e-5, externs=0)


def test_a_lowering_that_raises_is_an_aten_call_said_once_and_recorded(monkeypatch):
    """A lowering's own exception (a bug of ours) makes that op an aten call, right but slower:
    outside strict mode it is warned once per op and kind of error, and kept in the graph's
    `lowering_errors` (it was only a debug log: an `arange` lowering that raised IndexError hid
    an aten call in GPT-2's positions)."""
    from dynamo_lite.backends.triton import lowerings, settings
    from dynamo_lite.fallback import records
    monkeypatch.setattr(settings, "strict", False)
    monkeypatch.setattr(records, "_warned", set())

    def broken(lw, node, x, *rest, **kw):
        raise IndexError("a lowering bug")
    monkeypatch.setitem(lowerings.LOWERINGS, torch.ops.aten.sin, broken)

    def fn(x):
        return torch.sin(x * 2) + 1
    x = t(64)
    for expected_warnings in (1, 0):
        with pytest.warns(RuntimeWarning) if expected_warnings else warnings.catch_warnings(record=True) as caught:
            info = compile_and_check(fn, x, externs=1)
        messages = [str(w.message) for w in caught if "lowering aten.sin" in str(w.message)]
        assert len(messages) == expected_warnings, messages
        assert info.lowering_errors == {"aten.sin.default": "IndexError: a lowering bug"}


def test_log1p_of_float64_stays_an_aten_call():
    compile_and_check(lambda x: torch.log1p(x.abs()) * 2, t(50, dtype=torch.float64), externs=1, kernels=2)


def test_comparisons_where_and_masks():
    def fn(x, y):
        m = (x > y) & (x < 1.0) | ~(y >= 0.5)
        return torch.where(m, x, y * 2), m, x.masked_fill(x < 0, -1.0), torch.maximum(x, y), torch.minimum(x, 0.2 * y)
    compile_and_check(fn, t(8, 16), t(8, 16), kernels=1)


def test_bool_ops_of_a_0dim_tensors_comparison_are_one_kernel():
    """`(x > 0) | (s > 0)` with a 0-dim `s`: the scalar comparison combined with a block of bools
    (under the interpreter this failed at the first call and the graph ran as captured)."""
    def fn(x, s):
        return ((x > 0) | (s > 0)), ((x < 0) & ~(s < 1)), ((x > 0) ^ (s > 0)), (x > 0) | torch.isnan(s)
    compile_and_check(fn, t(8, 5), torch.tensor(0.5, device=DEVICE), kernels=1, externs=0)


def test_integer_and_bool_ops():
    def fn(a, b):
        return a * 3 + b, (a == b).sum(), (a > 0).float().mean(), torch.where(a > b, a, b).amax(0)
    a = torch.randint(-5, 5, (6, 7), device=DEVICE)
    b = torch.randint(-5, 5, (6, 7), device=DEVICE)
    compile_and_check(fn, a, b)


def test_broadcasting_is_one_kernel():
    def fn(x, y, z):
        return x + y * z - 1.0
    compile_and_check(fn, t(4, 1, 6), t(5, 1), t(6), kernels=1)


def test_scalar_tensors_and_constants():
    def fn(x, s):
        return x * s + torch.ones(3, 5, device=x.device) * 2 + torch.arange(5, device=x.device) * 0.5
    compile_and_check(fn, t(3, 5), torch.tensor(1.5, device=DEVICE), kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dtypes_compute_in_fp32(dtype):
    def fn(x, y):
        return (x * y + 1).sigmoid() * 3, x.float() * 2, (x + y).to(torch.float16)
    tol = 1e-4 if dtype is torch.float32 else 2e-2
    compile_and_check(fn, t(128, dtype=dtype), t(128, dtype=dtype), kernels=1, rtol=tol, atol=tol)


# -- views are index rewrites ----------------------------------------------------------------------

def test_permuted_and_strided_inputs():
    def fn(x, y, z):
        return x * 2 + y + z.t()
    x = t(6, 5, 4).permute(2, 0, 1)            # (4, 6, 5), non-contiguous
    y = t(12, 12)[::2, 2:7]                    # (6, 5): strided, with an offset
    assert not x.is_contiguous() and not y.is_contiguous()
    compile_and_check(fn, x, y, t(5, 6), kernels=1)


def test_views_never_copy():
    def fn(x):
        a = x.view(4, 6, 2).permute(2, 0, 1)[:, 1:3].unsqueeze(0).expand(3, 2, 2, 6)
        return a * 2 + x.t()[0:6:2].sum()
    compile_and_check(fn, t(12, 4), kernels=2)


def test_outputs_that_are_views_alias_the_input():
    def fn(x):
        return x.t(), x[1], x.unsqueeze(0).expand(3, 4, 5)
    x = t(4, 5)
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    out = compiled(x)
    assert compiled.compiled_graph.kernel_count == 0
    assert all(o.data_ptr() >= x.data_ptr() and o._base is not None or o.data_ptr() == x.data_ptr() for o in out)
    torch.testing.assert_close(out[0], x.t())


def test_cat_and_pad_use_masked_loads():
    def fn(x, y):
        return torch.cat([x, y * 2], 1).relu(), F.pad(x, (1, 2, 0, 1), value=3.0) * 2
    compile_and_check(fn, t(4, 3), t(4, 5), kernels=2)


@pytest.mark.parametrize("pad", [(-1, 2, 0, 1), (1, -2), (-1, -1, -2, 3), (0, 0, -3, -1), (2, -5)])
def test_negative_padding_crops_in_the_kernel(pad):
    """A negative pad amount crops that side (F.pad's cropping, a U-Net's skip connection):
    one kernel, no aten call."""
    def fn(x):
        return F.pad(x * 2, pad, value=-1.5) + 1
    compile_and_check(fn, t(5, 6), kernels=1, externs=0)


@pytest.mark.parametrize("dim, start, end, step", [(1, 0, None, 2), (1, 1, None, 2), (0, 1, 6, 3), (-1, 2, 7, 4),
                                                    (1, 5, None, 2)])
def test_slice_scatter_with_a_step_is_one_kernel(dim, start, end, step):
    """`x` with `src` at every step-th position of a slice (the backward of `t[..., ::2]`): one
    kernel, eager's values (the elements are copies)."""
    def fn(x, src):
        return torch.slice_scatter(x * 2, src * 3, dim, start, end, step) + 1
    x = t(7, 9)
    sizes = list(x.shape)
    sizes[dim] = len(range(*slice(start, end, step).indices(x.shape[dim])))
    compile_and_check(fn, x, t(*sizes), kernels=1, externs=0, rtol=0, atol=0)


def test_every_other_element_trains_through_its_strided_backward():
    """GPT-J / CodeGen's `rotate_every_two`: `x[..., ::2]` and `x[..., 1::2]` stacked; the backward
    scatters into every other element (slice_scatter with a step), lowered, no aten call."""
    import dynamo_lite as dl
    from dynamo_lite.backends.triton import backend as backend_module

    def rotate_every_two(x):
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)

    def fn(x):
        return (rotate_every_two(x * 3) * x).sum()
    x = t(2, 3, 8)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    fn(xe).backward()
    backend_module.recent.clear()
    dl.reset()
    dl.capture(fn, backend="triton")(xc).backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-6, atol=1e-6)
    externs = [op for g in backend_module.recent for op in g.extern_ops]
    assert "aten.slice_scatter.default" not in externs, externs


@pytest.mark.parametrize("shifts, dims", [(3, 1), ((-2, 5), (1, 2)), ((2, 2), (2, 2)), (0, 0), (-13, -1)])
def test_roll_is_masked_loads_in_the_kernel_reading_it(shifts, dims):
    """Swin's shifted windows: `torch.roll` of a computed value, rolled and reduced in one kernel."""
    def fn(x):
        y = torch.roll(x * 2, shifts, dims)
        return y + 1, y.sum(-1)
    compile_and_check(fn, t(2, 5, 7), kernels=1, externs=0, rtol=0, atol=1e-5)


def test_adaptive_avg_pool1d_of_a_transposed_sequence_is_one_kernel():
    """Swin's pooler (transformers): `AdaptiveAvgPool1d(1)` over `h.transpose(1, 2)` leaves an
    `as_strided` restating the mean's own layout after functionalization: read as it is, no aten
    call. An `as_strided` that reads other memory stays one."""
    def fn(h):
        return torch.flatten(F.adaptive_avg_pool1d(h.transpose(1, 2) * 2, 1), 1) + 1
    compile_and_check(fn, t(2, 16, 8), kernels=1, externs=0)


def test_as_strided_reads_its_storage_as_eager_lays_it_out():
    """`as_strided` addresses the storage of the op that made its input (Longformer's overlapping
    chunks of a `reshape` that is a view in eager: (16, 128, 1) strides over a linear's output,
    which we compute contiguous after the bias): a view of that op's buffer in eager's layout,
    stored so where ours differs. Read over a graph input: the input itself (an aten call)."""
    def chunks(x, bias):
        q = (x + bias).view(16, 2, 4, 16).transpose(0, 1).transpose(1, 2).reshape(8, 16, 16)
        # q.view(8, 2, 8, 16) has strides (16, 1024, 128, 1): chunks overlapping by half
        return q.view(8, 2, 8, 16).as_strided((8, 3, 8, 16), (16, 512, 128, 1)) * 2
    compile_and_check(chunks, t(16, 2, 64), t(64), externs=0)
    compile_and_check(lambda x: (x + 1).as_strided((3, 2), (1, 3)) * 2, t(2, 3), externs=0)
    # an offset into a piece of `split` (the storage is the split input's)
    compile_and_check(lambda x: (x * 3).split(2, 0)[1].as_strided((2, 2), (1, 2), 5) + 1, t(4, 3), externs=0)
    # the storage of a graph input: the caller's tensor, read by aten
    compile_and_check(lambda x: x.t().as_strided((2, 3), (1, 2)) * 2, t(2, 3), externs=1)
    # a write through as_strided (functionalized: as_strided_scatter, an aten call on eager's layout)
    def write(x, b):
        y = x.t() + b
        y.as_strided((2, 2), (1, 2), 1).mul_(10)
        return y + 1
    compile_and_check(write, t(2, 3), t(3, 2))
    # a storage whose positions are not elements (a dtype view): the graph runs as captured
    compile_and_check(lambda x: (x + 1).view(torch.int32).as_strided((2, 2), (1, 2)) + 1, t(2, 3),
                      runs_as_captured="as_strided")


def test_split_chunk_select_slice():
    def fn(x):
        a, b = x.chunk(2, -1)
        return a * torch.sigmoid(b), x.split([1, 3], 0)[1] + 1, x[:, 2] * x[1:3, :].sum()
    compile_and_check(fn, t(4, 8))


# -- reductions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [0, 1, 2, -1, (0, 2), (0, 1, 2)])
def test_reduction_along_each_dim(dims):
    def fn(x):
        return x.sum(dims), (x * 2).amax(dims), x.mean(dims, keepdim=True)
    compile_and_check(fn, t(5, 6, 7), kernels=1)


def test_reductions_of_permuted_input():
    def fn(x):
        return x.sum((0, 2), keepdim=True), x.mean(1), x.amin(0), x.max()
    compile_and_check(fn, t(4, 6, 8).permute(2, 0, 1))


def test_long_rows_use_a_looped_kernel(monkeypatch):
    from dynamo_lite.backends.triton import settings
    def fn(x):
        return x.softmax(-1), x.sum(-1)
    info = compile_and_check(fn, t(3, 10000), kernels=1)
    assert info.kernels[0].kind == "per"                  # the default keeps rows of up to 16384
    monkeypatch.setattr(settings, "persistent_max_inner", 8192)
    info = compile_and_check(fn, t(3, 10000), kernels=1)
    assert info.kernels[0].kind == "red"


def test_var_mean_and_std():
    def fn(x):
        v, m = torch.var_mean(x, dim=1)
        return v, m, x.std(0), x.var(1, correction=0, keepdim=True)
    compile_and_check(fn, t(6, 30))


# -- fused normalizations ----------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_is_one_kernel(dim):
    def fn(x):
        return torch.softmax(x, dim), torch.log_softmax(x, dim)
    compile_and_check(fn, t(16, 100), kernels=1)


def test_softmax_fp16():
    def fn(x):
        return torch.softmax(x, -1)
    compile_and_check(fn, t(8, 64, dtype=torch.float16), kernels=1, rtol=2e-3, atol=2e-3)


def test_masked_attention_softmax_is_one_kernel():
    def fn(scores, mask):
        return (scores * 0.125).masked_fill(mask, float("-inf")).softmax(-1)
    mask = torch.ones(16, 16, dtype=torch.bool, device=DEVICE).triu(1)
    compile_and_check(fn, t(2, 3, 16, 16), mask, kernels=1)


def test_safe_softmax_with_fully_masked_rows_is_one_kernel():
    """`_safe_softmax` (transformers' sdpa-free attention) zeroes rows that are all -inf through
    `zeros_like`, which becomes `full_like`: a constant in the kernel, never an aten call that
    writes the zeros out (nor a second kernel reading them back)."""
    def fn(scores, mask):
        return torch.ops.aten._safe_softmax(scores + mask, -1)
    mask = torch.zeros(2, 1, 1, 16, device=DEVICE)
    mask[0] = float("-inf")                                   # every row of batch 0 fully masked
    info = compile_and_check(fn, t(2, 3, 16, 16), mask, kernels=1, externs=0)
    assert "full_like" not in info.wrapper_source


def test_full_like_keeps_the_eager_layout_and_dtype():
    def fn(x):
        return torch.full_like(x, 2.5), torch.zeros_like(x.t()), torch.full_like(x, 7, dtype=torch.int64) + x.long()
    info = compile_and_check(fn, t(6, 10), externs=0)
    got = info.wrapper_call(t(6, 10))
    assert got[1].stride() == (1, 10)                         # preserve_format: the transposed strides


def test_layer_norm_gelu_residual_is_one_kernel():
    def fn(x, w, b):
        return F.gelu(F.layer_norm(x, (64,), w, b)) + x
    info = compile_and_check(fn, t(8, 4, 64), t(64), t(64), kernels=1, externs=0)
    assert info.kernels[0].kind == "per"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_layer_norm(dtype):
    def fn(x, w, b):
        return F.layer_norm(x, (48,), w, b)
    tol = 1e-4 if dtype is torch.float32 else 1e-2
    compile_and_check(fn, t(20, 48, dtype=dtype), t(48, dtype=dtype), t(48, dtype=dtype), kernels=1, rtol=tol, atol=tol)


def test_rms_norm_is_one_kernel():
    def fn(x, w):
        return F.rms_norm(x, (64,), w, eps=1e-6)
    compile_and_check(fn, t(8, 64), t(64), kernels=1)


def test_rms_norm_with_silu_gated_activation():
    def fn(x, w, gate, up):
        return F.rms_norm(x, (64,), w, eps=1e-6) * (F.silu(gate) * up)
    compile_and_check(fn, t(8, 64), t(64), t(8, 64), t(8, 64), kernels=1)


def test_norms_in_eval_models():
    def fn(x, w, b, mean, var):
        return (F.batch_norm(x, mean, var, w, b, training=False).relu(), F.group_norm(x, 2, w, b),
                torch.linalg.vector_norm(x, dim=(2, 3)))
    compile_and_check(fn, t(2, 4, 3, 3), t(4), t(4), t(4), torch.rand(4, device=DEVICE) + 0.5, rtol=1e-4, atol=1e-4)


# -- externs and mutation --------------------------------------------------------------------------

def test_matmul_is_extern_and_its_epilogue_fuses():
    def fn(x, w, b):
        return F.gelu(F.linear(x, w, b)) * 2 + 1
    compile_and_check(fn, t(8, 16), t(32, 16), t(32), kernels=1, externs=1, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_over_a_contraction_of_one_is_a_fused_outer_product(dtype):
    """Rotary embeddings' `inv_freq @ position_ids` (a contraction of length 1) is a pointwise
    product fused with the cos/sin that read it; a real matmul stays a library call."""
    def fn(inv_freq, positions, x):
        freqs = (inv_freq[None, :, None] @ positions[:, None, :].float()).transpose(1, 2)
        emb = torch.cat([freqs, freqs], -1)
        return emb.cos().to(x.dtype) * x, emb.sin().to(x.dtype) * x, x[0, :, :1] @ x[1, :1, :], x[0] @ x[1]
    inv_freq = torch.rand(8, device=DEVICE)                  # (computed in fp32, as transformers does)
    positions = torch.arange(16, device=DEVICE)[None]
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-4
    compile_and_check(fn, inv_freq, positions, t(2, 16, 16, dtype=dtype), kernels=2, externs=1, rtol=tol, atol=tol)


def test_embeddings_are_gathers_fused_with_their_layer_norm():
    """BERT's input layer: three embedding lookups (int64 and int32 indices, one broadcast over
    the batch), summed and layer-normed: one kernel that gathers the rows, no aten call."""
    def fn(ids, positions, token_types, wte, wpe, tte, w, b):
        h = F.embedding(ids, wte) + F.embedding(positions, wpe) + F.embedding(token_types, tte)
        return F.layer_norm(h, (32,), w, b), F.embedding(ids, wte)
    ids = torch.randint(0, 50, (2, 12), device=DEVICE)
    positions = torch.arange(12, device=DEVICE)[None].expand(2, 12)
    token_types = torch.randint(0, 2, (2, 12), device=DEVICE, dtype=torch.int32)
    compile_and_check(fn, ids, positions, token_types, t(50, 32), t(16, 32), t(2, 32), t(32), t(32),
                      kernels=1, externs=0)


def test_unknown_op_runs_as_aten_call():
    def fn(x, w):
        return torch.kthvalue(x, 2, 0).values * 2, torch.median(w, 1).values + 1
    info = compile_and_check(fn, t(5, 3), t(10, 8))
    assert set(info.extern_ops) == {"aten.kthvalue.default", "aten.median.dim"}


def test_input_mutation_is_stored_in_place():
    def fn(x, y):
        x.add_(y)
        x.select(0, 0).fill_(0.0)
        return x.sum(-1)
    info = compile_and_check(fn, t(4, 8), t(8))
    assert info.mutated_inputs == [0]


def test_batch_norm_training_updates_running_stats():
    def fn(x, mean, var, w, b):
        return F.batch_norm(x, mean, var, w, b, training=True, momentum=0.1)
    compile_and_check(fn, t(4, 3, 5), t(3), torch.rand(3, device=DEVICE) + 0.5, t(3), t(3), kernels=1)


# -- 2-D tiles for transposed operands ------------------------------------------------------------

def _tiled(info) -> bool:
    """A 2-D tile (transposed or of rows)."""
    return "tl.arange(0, YBLOCK)[:, None]" in info.source


def test_a_transposed_operand_gets_a_2d_tile():
    def fn(x, y, b):
        return torch.relu(x.transpose(1, 2) + y + b) * 2
    info = compile_and_check(fn, t(3, 33, 47), t(3, 47, 33), t(33), kernels=1)    # sizes off the block sizes
    assert _tiled(info), info.source


def test_a_2d_tile_with_broadcasts_on_either_axis_and_a_contiguous_operand():
    def fn(x, y, col, row):
        return x.t() * y + col[:, None] - row
    info = compile_and_check(fn, t(40, 24), t(24, 40), t(24), t(40), kernels=1)
    assert _tiled(info), info.source
    # each broadcast operand is loaded as a vector of the tile's rows or columns, not per element
    loads = re.findall(r"tl\.load\(ptr\d \+ \((.*?)\), (\w+)", info.source)
    assert sorted(mask for _, mask in loads) == ["cmask", "xmask", "xmask", "ymask"], info.source


def test_a_2d_tile_under_masks_of_a_cat_and_in_half_precision():
    def fn(x, y):
        return torch.cat([x.t(), y], dim=1).float() + 1
    info = compile_and_check(fn, t(20, 32, dtype=torch.float16), t(32, 18, dtype=torch.float16), kernels=1,
                             rtol=1e-3, atol=1e-3)
    assert _tiled(info), info.source


def test_contiguous_or_small_operands_keep_a_1d_tile():
    def fn(x, b):
        return x * 2 + b
    assert not _tiled(compile_and_check(fn, t(32, 40), t(40), kernels=1))

    def small(x):
        return x.t() + 1
    assert not _tiled(compile_and_check(small, t(8, 40), kernels=1))


def test_a_transpose_copy_gets_a_2d_tile():
    def fn(x):
        return x.transpose(1, 2).contiguous()
    info = compile_and_check(fn, t(2, 32, 48), kernels=1)
    assert _tiled(info), info.source


# -- row tiles: operands constant along the innermost dims -------------------------------------

def _row_tiled(info) -> bool:
    return all("ymask = yindex < ynumel" in k.source for k in info.kernels)


def test_batch_norm_add_relu_over_nchw_gets_a_row_tile_with_its_per_channel_math_once_a_row():
    """Eval-mode batch norm + residual add + ReLU (a ResNet block's end), sizes off the block
    sizes: the four per-channel loads are [YBLOCK, 1] (masked by the row mask alone), the values
    eager's (whose CPU kernel folds the statistics into one scale and shift: not to the bit)."""
    def fn(x, s, m, v, w, b):
        y = F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5)
        y += s
        return F.relu(y, inplace=True)
    args = (t(3, 5, 6, 10), t(3, 5, 6, 10), t(5), torch.rand(5, device=DEVICE) + 0.5, t(5), t(5))
    info = compile_and_check(fn, *args, kernels=1)
    assert _row_tiled(info), info.source
    assert info.kernels[0].source.count(", ymask, other=0)") == 4, info.source


def test_a_row_tile_with_row_column_and_whole_tile_operands_in_half_precision():
    """A per-(batch, channel) scale, a per-position bias (varies along the columns only: [1, XBLOCK]),
    a host scalar and a full operand; fp16 in, fp32 out."""
    def fn(x, scale, pos, a):
        return (x.float() * scale[:, :, None] + pos) * a
    info = compile_and_check(fn, t(4, 6, 40, dtype=torch.float16), t(4, 6), t(40), torch.tensor(1.5),
                             kernels=1, rtol=0, atol=0)
    assert _row_tiled(info), info.source
    source = info.kernels[0].source
    assert ", ymask, other=0)" in source and ", cmask, other=0)" in source, source


def test_a_row_tile_stores_a_value_per_row_broadcast_over_its_columns():
    def fn(x, w):
        scaled = x * w[:, None]
        per_row = torch.exp(w)[:, None].expand(-1, 40).contiguous()
        return scaled, per_row, per_row + scaled
    info = compile_and_check(fn, t(12, 40), t(12), kernels=1)
    assert _row_tiled(info) and "tl.broadcast_to(" in info.source, info.source


def _row_vectors(info) -> bool:
    return any("ylocal = " in k.source for k in info.kernels)


def test_column_broadcasts_and_rows_of_a_few_elements_keep_a_plain_1d_tile():
    def per_column(x, b):                   # b varies along the innermost dim: nothing per row
        return x * 2 + b
    info = compile_and_check(per_column, t(32, 40), t(40), kernels=1)
    assert not _tiled(info) and not _row_vectors(info), info.source

    def tiny_rows(x, w):                    # rows of 2 x 2: under ROW_VECTOR_MIN_INNER
        return x * w[:, None, None]
    info = compile_and_check(tiny_rows, t(64, 2, 2), t(64), kernels=1)
    assert not _tiled(info) and not _row_vectors(info), info.source


# -- row vectors: rows too short or unaligned for a row tile ----------------------------------

def test_batch_norm_relu_over_7x7_computes_its_per_channel_math_on_row_vectors():
    """A ResNet's last stage (rows of 7 x 7: no aligned row tile): the tile stays 1-D, the four
    per-channel loads and 1 / sqrt(var + eps) are vectors over the block's rows, gathered to its
    elements; over more rows than a block spans, in bf16 as in the model."""
    def fn(x, m, v, w, b):
        return F.relu(F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5))
    c = 70
    args = (t(3, c, 7, 7, dtype=torch.bfloat16), t(c, dtype=torch.bfloat16),
            (torch.rand(c, device=DEVICE) + 0.5).bfloat16(), t(c, dtype=torch.bfloat16), t(c, dtype=torch.bfloat16))
    info = compile_and_check(fn, *args, kernels=1, rtol=2e-2, atol=2e-2)
    source = info.kernels[0].source
    assert _row_vectors(info) and "[YBLOCK, XBLOCK]" not in source, source
    assert source.count(", ymask, other=0)") == 4 and source.count("tl.gather(") == 4, source
    sqrt = next(line for line in source.splitlines() if "tl.sqrt_rn(" in line)
    assert "tl.gather" not in sqrt and "tmp" in sqrt, source          # on the row vector


def test_row_vectors_with_short_unaligned_rows_masked_loads_and_per_element_operands():
    def short_rows(x, w):                   # rows of 3 x 4 elements: under ROW_TILE_MIN_INNER
        return x * w[:, None, None]
    info = compile_and_check(short_rows, t(64, 3, 4), t(64), kernels=1)
    assert _row_vectors(info), info.source

    def odd_rows(x, w):                     # rows of 7 x 7: no vector loads of a row tile's rows
        return x * w[:, None, None]
    assert _row_vectors(compile_and_check(odd_rows, t(64, 7, 7), t(64), kernels=1))

    def padded(x, w):                       # a load with a mask of its own (the pad's) stays per element
        return F.pad(x, (2, 2), value=-1.0) * torch.exp(w)[:, None]
    info = compile_and_check(padded, t(12, 32), t(12), kernels=1)
    assert _row_vectors(info) and "[YBLOCK, XBLOCK]" not in info.source, info.source

    def mixed(x, w, i, a):                  # a per-row where over per-element values, an index, a scalar
        keep = w > 0
        y = torch.where(keep[:, None], x, x * a) + i[:, None].float()
        return y, torch.sigmoid(w * a)[:, None].expand(-1, 9).contiguous()
    info = compile_and_check(mixed, t(40, 9), t(40), torch.randint(0, 5, (40,), device=DEVICE), torch.tensor(2.5),
                             kernels=1)
    assert _row_vectors(info), info.source


def test_row_vectors_where_rows_span_more_than_the_index_width():
    """Rows of 10 elements over 3 x 5 x 7 (the per-row operand indexed by two dims, one of
    them strided): each block's rows, whatever the block size the launch picks."""
    def fn(x, s):
        return x * s.transpose(0, 1)[:, :, None] - s.sum()
    info = compile_and_check(fn, t(5, 3, 10), t(3, 5), kernels=2)
    assert _row_vectors(info), info.source


def test_row_tiles_and_row_vectors_can_be_switched_off(monkeypatch):
    from dynamo_lite.backends.triton import settings
    monkeypatch.setattr(settings, "row_tile", False)

    def fn(x, w):
        return torch.relu(x * w[:, None])
    for shape in ((16, 64), (16, 7)):
        info = compile_and_check(fn, t(*shape), t(16), kernels=1)
        assert not _tiled(info) and not _row_vectors(info), info.source


# -- repeated ops -----------------------------------------------------------------------------

def test_an_attention_mask_sliced_alike_by_each_layer_is_computed_once():
    """Each layer slices the model's mask the same way before its attention call (an aten call
    that needs the mask in memory): the slices merge into one value, stored once (not one buffer
    per layer; in a model the copies were kernels of their own, one per layer). (On CUDA the
    attention op's decomposition expands the mask to every head first: that is the one buffer.)"""
    def fn(q, k, v, m):
        mask = (1.0 - m[:, None, None, :]) * -10000.0
        out = q
        for _ in range(3):
            out = F.scaled_dot_product_attention(out, k, v, attn_mask=mask[:, :, :, :k.shape[-2]])
        return out
    q, k, v = t(2, 4, 8, 16), t(2, 4, 8, 16), t(2, 4, 8, 16)
    m = (torch.rand(2, 12, device=DEVICE) > 0.3).float()        # (longer than the keys: a real slice)
    info = compile_and_check(fn, q, k, v, m, externs=3)
    assert info.kernel_count == 1 and info.wrapper_source.count("empty_strided(") == 1, info.wrapper_source


def test_equal_results_returned_twice_stay_two_tensors_and_random_ones_differ():
    """Merging repeated ops leaves returned values alone (eager returns two tensors: writing one
    leaves the other), and never merges random ops."""
    def fn(x):
        return x + 1, x + 1, (x * 2).t(), (x * 2).t()
    x = t(4, 5)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x])
    a, b, c, d = compiled(x)
    assert a.data_ptr() != b.data_ptr() and c.data_ptr() != d.data_ptr()
    a.add_(1)
    torch.testing.assert_close(b, x + 1)

    def noise(x):
        return torch.rand_like(x) + x, torch.rand_like(x) + x
    r1, r2 = triton_backend(torch.fx.symbolic_trace(noise), [x])(x)
    assert not torch.equal(r1, r2)


# -- max pooling ------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (3, 2, 1, 1, False),            # a ResNet stem
    (2, 2, 0, 1, False),
    (3, 2, 1, 2, True),             # dilated, windows past the end (ceil_mode)
    ((3, 2), (1, 2), (1, 0), 1, False),
])
def test_max_pool2d_values_and_indices_match_eager(kernel, stride, padding, dilation, ceil_mode):
    """Values and indices of the window scan, with ties (rounded values), -inf and NaN, after a
    batch norm + ReLU computed again in each window position (its per-channel scale once per
    output element): one kernel, no aten call."""
    def fn(x, m, v, w, b):
        y = F.relu(F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5))
        return F.max_pool2d(y * 2 - 1, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    x = (t(2, 4, 11, 10) * 2).round()
    x[0, 1, 3, 4] = float("nan")
    x[1, 2] = float("-inf")
    args = (x, t(4), torch.rand(4, device=DEVICE) + 0.5, t(4), t(4))
    compiled = triton_backend(torch.fx.symbolic_trace(fn), list(args))
    (values, indices), (want_values, want_indices) = compiled(*args), fn(*args)
    torch.testing.assert_close(values, want_values, equal_nan=True)
    assert torch.equal(indices, want_indices)
    info = compiled.compiled_graph
    assert info.kernel_count == 1 and not info.extern_ops, info.source


@pytest.mark.parametrize("kernel, stride, padding, ceil_mode, count_include_pad, divisor", [
    (2, 2, 0, False, True, None),           # DenseNet's transition
    (3, 2, 1, False, True, None),           # padding counted
    (3, 2, 1, False, False, None),          # padding not counted: edge windows divide by less
    (3, 2, 1, True, True, None),            # windows past the end (ceil_mode)
    (3, 2, 1, True, False, None),
    ((3, 2), (1, 2), (1, 0), False, True, 5),
    (3, 1, 1, False, False, None),          # Inception's 3x3 / 1 average pool
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_avg_pool2d_matches_eager(kernel, stride, padding, ceil_mode, count_include_pad, divisor, dtype):
    """Eager's sums (fp32, window order) and divisors, every padding and rounding mode, after a
    batch norm + ReLU computed in each window position: one kernel, no aten call."""
    def fn(x, m, v, w, b):
        y = F.relu(F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5))
        return F.avg_pool2d(y * 2 - 1, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    args = [a.to(dtype) for a in (t(2, 4, 11, 10), t(4), torch.rand(4, device=DEVICE) + 0.5, t(4), t(4))]
    compiled = triton_backend(torch.fx.symbolic_trace(fn), list(args))
    tol = 1e-6 if dtype == torch.float32 else 1e-3
    torch.testing.assert_close(compiled(*args), fn(*args), rtol=tol, atol=tol)
    info = compiled.compiled_graph
    assert info.kernel_count == 1 and not info.extern_ops, info.source


def test_avg_pool2d_of_exact_values_is_eagers_to_the_bit():
    """Sums of small integers and divisors that round (/ 9, / 6, / 4 at the edges)."""
    def fn(x):
        return F.avg_pool2d(x, 3, 2, 1, False, False), F.avg_pool2d(x, 3, 1, 1), F.avg_pool2d(x, 2)
    x = (t(2, 3, 9, 8) * 4).round()
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x])
    for got, want in zip(compiled(x), fn(x)):
        assert torch.equal(got, want)


def test_max_pool2d_stores_a_costly_producer_first():
    """Each element is read by several windows: one that takes many ops to compute is computed
    once, stored, then pooled."""
    def fn(x):
        y = x
        for _ in range(3):
            y = (y.sin() * 1.5 + y.cos()).tanh()
        return F.max_pool2d(y, 3, 2, 1)
    compile_and_check(fn, t(2, 4, 9, 9), kernels=2, externs=0)


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (3, 2, 1, 1, False), (3, 2, 1, 2, True), ((3, 2), (1, 2), (1, 0), 1, False)])
def test_max_pool2d_values_alone_match_eager(kernel, stride, padding, dilation, ceil_mode):
    """Without indices the scan keeps no position: a window of -inf only, NaN and ties still
    give eager's values."""
    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode) * 1
    x = (t(2, 4, 11, 10) * 2).round()
    x[0, 1, 3, 4] = float("nan")
    x[1, 2] = float("-inf")
    x[0, 3, :, :5] = float("-inf")
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x])
    torch.testing.assert_close(compiled(x), fn(x), equal_nan=True)
    info = compiled.compiled_graph
    assert info.kernel_count == 1 and not info.extern_ops, info.source
    assert "== -1" not in info.source, info.source      # no position tracked


def test_a_pooled_values_per_channel_part_is_computed_once_per_output():
    """Loads that do not move with the window (a per-channel scale) are not masked by the
    window position, so all nine positions share them."""
    def fn(x, s):
        return F.max_pool2d(x * s.sqrt()[None, :, None, None], 3, 2, 1)
    info = compile_and_check(fn, t(2, 4, 9, 9), t(4).abs() + 0.1, kernels=1, externs=0)
    assert info.source.count("tl.sqrt_rn(") == 1, info.source


def test_max_pool2d_fuses_with_a_cheap_producer_and_consumer():
    def fn(x):
        return F.max_pool2d(x.relu(), 3, 2, 1) + 1
    compile_and_check(fn, t(2, 4, 9, 9), kernels=1, externs=0)


def test_max_pool2d_of_channels_last_keeps_its_layout_and_trains():
    x = t(2, 8, 12, 12).to(memory_format=torch.channels_last).requires_grad_()

    def fn(x):
        return F.max_pool2d(x.relu(), 3, 2, 1)
    gm = torch.fx.symbolic_trace(fn)
    out = triton_backend(gm, [x.detach()])(x.detach())
    expected = fn(x)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    compiled = dl.capture(fn, backend="triton")
    x2 = x.detach().clone().requires_grad_()
    compiled(x2).square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (3, 2, 1, 1, False), (2, 2, 0, 1, False), (3, 2, 1, 2, True), ((3, 2), (1, 2), (1, 0), 1, False),
    (3, 1, 1, 1, False)])
def test_max_pool2d_backward_is_a_kernel_gathering_each_windows_gradient(kernel, stride, padding, dilation,
                                                                         ceil_mode, channels_last):
    """The input's gradient sums, per element, the gradients of the windows whose max it was
    (ties in the rounded input pick one, as eager's indices do); a kernel, not eager's
    max_pool2d_with_indices_backward; channels-last where the input is."""
    from dynamo_lite.backends.triton import backend as triton_backend_module
    x = (t(2, 4, 11, 10) * 2).round()
    x = x.to(memory_format=torch.channels_last) if channels_last else x

    def fn(x):
        return (F.max_pool2d(x.relu() * 2, kernel, stride, padding, dilation, ceil_mode) ** 2).sum()
    triton_backend_module.recent.clear()
    dl.reset()
    leaf, want = x.clone().requires_grad_(), x.clone().requires_grad_()
    dl.capture(fn, backend="triton")(leaf).backward()
    fn(want).backward()
    torch.testing.assert_close(leaf.grad, want.grad)
    assert leaf.grad.stride() == want.grad.stride()
    graphs = list(triton_backend_module.recent)
    assert graphs and all(g.fallback_reason is None and not g.extern_ops for g in graphs), \
        [(g.fallback_reason, g.extern_ops) for g in graphs]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("kernel, stride, padding, ceil_mode, count_include_pad, divisor", [
    (2, 2, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, False, False, None),
    (3, 2, 1, True, True, None), (3, 2, 1, True, False, None), ((3, 2), (1, 2), (1, 0), False, True, 5),
    (3, 1, 1, False, False, None)])
def test_avg_pool2d_backward_is_a_kernel_gathering_each_windows_share(kernel, stride, padding, ceil_mode,
                                                                      count_include_pad, divisor, channels_last):
    """The input's gradient sums, per element, each covering window's gradient over its divisor
    (eager's, padding counted or not, ceil_mode's short windows), in eager's order: a kernel,
    not eager's avg_pool2d_backward; channels-last where the input is. The values are checked
    against eager's on the contiguous input: eager's CUDA kernel for a channels-last input with
    padding gives wrong gradients in torch before the fix of pytorch#188344 (it drops the padding
    from the input's coordinates), which these tests found on an H100 with torch 2.11."""
    from dynamo_lite.backends.triton import backend as triton_backend_module
    x = t(2, 4, 11, 10)
    x = x.to(memory_format=torch.channels_last) if channels_last else x

    def fn(x):
        return (F.avg_pool2d(x.relu() * 2, kernel, stride, padding, ceil_mode, count_include_pad, divisor) ** 2).sum()
    triton_backend_module.recent.clear()
    dl.reset()
    leaf, want, nchw = x.clone().requires_grad_(), x.clone().requires_grad_(), x.contiguous().requires_grad_()
    dl.capture(fn, backend="triton")(leaf).backward()
    fn(want).backward()
    fn(nchw).backward()
    torch.testing.assert_close(leaf.grad, nchw.grad, rtol=1e-6, atol=1e-6)
    assert leaf.grad.stride() == want.grad.stride()
    graphs = list(triton_backend_module.recent)
    assert graphs and all(g.fallback_reason is None and not g.extern_ops for g in graphs), \
        [(g.fallback_reason, g.extern_ops) for g in graphs]


# -- gather -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dim, index_shape", [(1, (6, 4)), (0, (3, 9)), (-1, (6, 9))])
def test_gather_reads_inside_the_kernel_of_its_producer_and_consumer(dim, index_shape):
    """`torch.gather` of a computed value, smaller index than the source on the other dims:
    one kernel, no aten call, eager's values."""
    def fn(x, i):
        return torch.gather(x * 2 - 1, dim, i).relu() + 1
    x = t(6, 9)
    index = torch.randint(0, x.shape[dim], index_shape, device=DEVICE)
    compile_and_check(fn, x, index, kernels=1, externs=0)
