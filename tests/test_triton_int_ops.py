"""Integer division, remainders, bitwise ops and shifts lowered by the Triton backend, against eager.

Each test traces a function with `torch.fx.symbolic_trace`, compiles it with `triton_backend`,
and compares every output with eager's BIT FOR BIT (integers equal, floats equal in their bits,
NaN where eager has NaN), then asserts the ops were lowered: no aten call left, one kernel where
they fuse. What eager cannot be compared on (integer division by zero: the CPU raises, CUDA gives
undefined values; MIN / -1 in trunc mode: the CPU traps) is checked against the values the
lowering documents (lowerings.c_division). On a machine without a GPU the kernels run under
Triton's interpreter (TRITON_INTERPRET=1, set by triton_env before triton loads).
"""
import math

import numpy as np
import pytest
import torch

from triton_env import DEVICE, INTERPRET, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

import torch.fx                                           # noqa: E402

from dynamo_lite.backends.triton import triton_backend   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes

INT_DTYPES = [torch.int32, torch.int64, torch.int8, torch.uint8]
_BITS_OF = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float64: torch.int64}


def assert_bitwise_equal(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    """Equal values of equal dtype and shape; floats to the bit (-0.0 is not 0.0), any NaN is NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape}/{got.dtype} vs {want.shape}/{want.dtype}"
    got, want = got.cpu(), want.cpu()
    if got.dtype.is_floating_point:
        same = (got.view(_BITS_OF[got.dtype]) == want.view(_BITS_OF[got.dtype])) | (got.isnan() & want.isnan())
    else:
        same = got == want
    if not bool(same.all()):
        bad = (~same).nonzero()[:8].flatten().tolist() if got.dim() == 1 else "(see values)"
        raise AssertionError(f"{what}: differs at {bad}\n got  {got.flatten()[~same.flatten()][:8].tolist()}\n"
                             f" want {want.flatten()[~same.flatten()][:8].tolist()}")


def compile_exact(fn, *args, kernels=1, externs=0):
    """Compile `fn`'s fx graph, compare every output with eager's bit for bit, and check that it
    became `kernels` kernels with `externs` aten calls left. Returns (compiled outputs, graph info)."""
    compiled = triton_backend(torch.fx.symbolic_trace(fn), list(args))
    expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    got = compiled(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert_bitwise_equal(g, e, f"output {i}")
    info = compiled.compiled_graph
    assert info.fallback_reason is None, info.fallback_reason
    assert sum(info.extern_ops.values()) == externs, info.extern_ops
    if kernels is not None:
        assert info.kernel_count == kernels, f"{info.kernel_count} kernels, expected {kernels}:\n{info.source}"
    return got, info


def ints(values, dtype):
    return torch.tensor(values, dtype=torch.int64).to(dtype).to(DEVICE)


def int_operands(dtype, nonzero_divisor=True):
    """Dividends and divisors of `dtype` with every sign combination, exact multiples, the dtype's
    extremes (MIN / -1 included for signed types), and random values; divisors never 0."""
    info = torch.iinfo(dtype)
    if dtype.is_signed:
        a = [7, -7, 7, -7, 6, -6, 0, 0, 1, -1, info.min, info.min, info.max, info.max, info.min, 5]
        b = [2, 2, -2, -2, 3, -3, 5, -5, -1, 1, -1, 1, -1, info.min, info.max, info.min]
    else:
        a = [7, 0, 6, 255, 255, 1, 200, 3]
        b = [2, 5, 3, 1, 255, 255, 7, 200]
    g = torch.Generator().manual_seed(0)
    ra = torch.randint(info.min, info.max, (64,), generator=g, dtype=torch.int64)
    rb = torch.randint(max(info.min, -100), min(info.max, 100), (64,), generator=g, dtype=torch.int64)
    rb = torch.where(rb == 0, 1, rb)
    return ints(a + ra.tolist(), dtype), ints(b + rb.tolist(), dtype)


# -- integer remainder and division -----------------------------------------------------------

@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_remainder_fmod_and_floor_division_are_pythons_and_cs(dtype):
    """remainder and floor division as Python's (the remainder has the divisor's sign), fmod and
    trunc division as C's (the dividend's): Triton's `%` and `//` are C's, corrected by one where
    they went past the floor. MIN // -1 wraps to MIN as eager's. One kernel for all of them."""
    def fn(a, b):
        return (torch.remainder(a, b), torch.fmod(a, b), torch.floor_divide(a, b),
                torch.div(a, b, rounding_mode="floor"), a % b + a // b)
    a, b = int_operands(dtype)
    compile_exact(fn, a, b)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_trunc_division_is_cs(dtype):
    """torch.div(..., rounding_mode="trunc") on integers: rounded toward zero. (Without MIN / -1:
    eager's CPU kernel traps on it, the process dies with SIGFPE.)"""
    def fn(a, b):
        return torch.div(a, b, rounding_mode="trunc")
    a, b = int_operands(dtype)
    if dtype.is_signed:
        keep = ~((a == torch.iinfo(dtype).min) & (b == -1))
        a, b = a[keep], b[keep]
    compile_exact(fn, a, b)


def test_integer_ops_with_scalars_wrap_the_scalar_to_the_dtype_as_eager():
    """A Python scalar operand is converted to the tensor's dtype first, as eager's kernels do:
    `uint8 % -3` divides by 253, `uint8 ^ 300` xors 44; a scalar dividend (`7 % x`) too."""
    def fn(x, u, s):
        return (x % 3, x % -3, 7 % x, x // -2, torch.div(x, 4, rounding_mode="trunc"), torch.fmod(x, -3),
                torch.remainder(-9, x), u % -3, u // 7, torch.fmod(u, 300), s % 5, s // -5)
    x = ints([7, -7, 6, -6, 0, 1, -1, 100, -100, 2**31 - 1, -2**31], torch.int32)
    x = torch.where(x == 0, 3, x)          # (a dividend of 7 % x: no zero)
    u = ints([0, 1, 7, 200, 252, 253, 255, 100, 50, 3, 9], torch.uint8)
    s = ints([-128, 127, -1, 0, 5, -5, 13, -13, 100, -100, 64], torch.int8)
    compile_exact(fn, x, u, s, kernels=None)      # (three unrelated inputs: a kernel each, or fewer)


def test_integer_division_fuses_with_its_neighbours():
    """Index arithmetic (`(i * 3 + 1) % 7`, `i // 4`) fuses with the ops around it, one kernel."""
    def fn(i, x):
        j = (i * 3 + 1) % 7 - i // 4
        return x * j.to(x.dtype) + (i.remainder(5) == 2).to(x.dtype)
    i = torch.arange(-40, 40, device=DEVICE, dtype=torch.int64)
    x = torch.randn(80, device=DEVICE)
    compile_exact(fn, i, x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.uint8])
def test_integer_division_by_zero_gives_the_documented_values_and_never_crashes(dtype):
    """Eager raises on the CPU (and gives undefined values on CUDA); a kernel divides by 1 instead:
    a // 0 = a, a % 0 = 0 (every mode), and MIN // -1 = MIN (trunc too), never reaching LLVM's
    undefined division."""
    def fn(a, b):
        return (torch.remainder(a, b), torch.fmod(a, b), a // b, torch.div(a, b, rounding_mode="trunc"))
    info = torch.iinfo(dtype)
    a = ints([7, -7, 0, info.min, info.max] if dtype.is_signed else [7, 0, 255, 1, 3], dtype)
    b = ints([0, 0, 0, -1, 0] if dtype.is_signed else [0, 0, 0, 0, 1], dtype)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [a, b])
    rem, fmod, floor, trunc = (r.cpu() for r in compiled(a, b))
    by_zero = (b == 0).cpu()
    expected_q = torch.where(by_zero, a.cpu(), a.cpu() // torch.where(by_zero, 1, b.cpu()))
    assert torch.equal(rem, torch.zeros_like(rem)) and torch.equal(fmod, torch.zeros_like(fmod))
    assert torch.equal(floor, expected_q) and torch.equal(trunc, expected_q), (floor, trunc)
    assert not compiled.compiled_graph.extern_ops


def test_bool_division_stays_an_aten_call():
    """Eager has no remainder of bools; the op is left to eager (which raises), never lowered."""
    from dynamo_lite.backends.triton.lowerings import NotLowerable, lower_remainder

    class Node:
        meta = {"val": torch.empty(2, dtype=torch.bool)}
    with pytest.raises(NotLowerable):
        lower_remainder(None, Node, None, None)


# -- float remainder and fmod -----------------------------------------------------------------

_INF, _NAN = math.inf, math.nan
#: edge cases: signs, signed zeros, infinite / zero / NaN divisors and dividends, exact multiples,
#: subnormals, a remainder that rounds to b (-1e-45 % 1.0 is 1.0), large quotients (below 2^120:
#: eager's vectorized CPU fmod gives NaN where a / b overflows fp32, test_float_fmod_is_exact_...)
_EDGE_A = [5.5, -5.5, 5.5, -5.5, -4.0, 4.0, 0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 1.0, -1.0, _INF, -_INF, _NAN,
           1.0, 7.0, -7.0, 0.0, -1e-45, 1e-45, 0.3, 16777216.0, 1e30, -1e30, 1e-40, 3.0e38, 6.5, -6.5]
_EDGE_B = [2.0, 2.0, -2.0, -2.0, 2.0, -2.0, 3.0, 3.0, -3.0, -3.0, _INF, _INF, -_INF, -_INF, 2.0, 2.0, 1.0,
           _NAN, 0.0, -0.0, 0.0, 1.0, -1.0, 0.1, 3.0, 3.0, 0.7, 3e-45, 1e5, 0.25, -0.25]


def _float_operands(dtype):
    g = torch.Generator().manual_seed(1)
    ra = torch.randn(200, generator=g) * 50
    rb = torch.randn(200, generator=g) * 3
    ea, eb = _EDGE_A, _EDGE_B
    a = torch.cat([torch.tensor(ea), ra]).to(dtype).to(DEVICE)
    b = torch.cat([torch.tensor(eb), rb]).to(dtype).to(DEVICE)
    return a, b


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_remainder_and_fmod_are_eagers_at_the_edges(dtype):
    """Float remainder as eager computes it (the exact fmod, plus b where that is nonzero with the
    other sign than b, rounded once), fmod exact: signed zeros, x % inf (x, or inf where the signs
    differ), x % 0 and inf % y NaN, NaN propagating; fp16 and bf16 computed in fp32, rounded once.
    Fused with a neighbour: one kernel."""
    def fn(a, b):
        return torch.remainder(a, b), torch.fmod(a, b), a % b * 2
    compile_exact(fn, *_float_operands(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_remainder_with_scalars_rounds_the_scalar_to_the_dtype(dtype):
    """`x % 0.1` divides by the dtype's 0.1 (eager converts the scalar first), `2.5 % x` too; an
    integer tensor with a float scalar is a float op."""
    def fn(x, i):
        return x % 0.1, torch.fmod(x, -2.5), torch.remainder(2.5, x), i % 2.5, torch.fmod(i, -0.75)
    values = [0.0, -0.0, 1.0, -1.0, 0.25, -0.25, 2.5, -2.5, 7.0, -7.0, 0.3, 100.0, -0.05, 1e-3, 33.3, -12.7, 0.15,
              5e-5]
    x = torch.tensor(values).to(dtype).to(DEVICE)
    i = ints(list(range(-6, -6 + len(values))), torch.int32)
    compile_exact(fn, x, i, kernels=None)


def test_float_fmod_is_exact_for_any_quotient():
    """fmod of random fp32 bit patterns (quotients up to 2^277, subnormals, infinities, NaNs) is
    C's fmodf to the bit (numpy's, exact), where Triton's own `%` on the GPU rounds a - trunc(a/b)*b
    and eager's vectorized CPU kernel gives NaN once a / b overflows fp32."""
    def fn(a, b):
        return torch.fmod(a, b), torch.remainder(a, b)
    g = torch.Generator().manual_seed(2)
    n = 4096
    bits = torch.randint(-2**31, 2**31, (2, n), generator=g, dtype=torch.int64).to(torch.int32)
    a, b = bits[0].view(torch.float32).clone(), bits[1].view(torch.float32).clone()
    b[: n // 4] = b[: n // 4].abs().clamp(max=1e-30)           # large quotients
    a[: n // 8] = a[: n // 8] * 0 + 3.0e38
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [a.to(DEVICE), b.to(DEVICE)])
    fmod, rem = compiled(a.to(DEVICE), b.to(DEVICE))
    with np.errstate(all="ignore"):
        want = torch.from_numpy(np.fmod(a.numpy(), b.numpy()))
        correct = (want != 0) & ((want < 0) != (b < 0))
        want_rem = torch.from_numpy(np.where(correct.numpy(), want.numpy() + b.numpy(), want.numpy()).astype(np.float32))
    assert_bitwise_equal(fmod, want, "fmod")
    assert_bitwise_equal(rem, want_rem, "remainder")
    assert not compiled.compiled_graph.extern_ops


def test_float64_remainder_and_fmod_stay_aten_calls():
    """float64's exact fmod would need integers wider than 64 bits: an aten call, eager's values."""
    def fn(a, b):
        return torch.remainder(a, b) + 1, torch.fmod(a, b)
    a = torch.tensor([5.5, -5.5, 1e300, -1.0], dtype=torch.float64, device=DEVICE)
    b = torch.tensor([2.0, 2.0, 1e-300, _INF], dtype=torch.float64, device=DEVICE)
    compile_exact(fn, a, b, kernels=None, externs=2)


def test_float_floor_divide_is_lowered():
    """floor_divide of floats (`x // y`) is div(rounding_mode="floor"), one kernel."""
    def fn(a, b):
        return a // b, a // 0.1
    a = torch.tensor([1.0, -7.0, 5.5, 0.0, -0.0, 3.0, _INF], device=DEVICE)
    b = torch.tensor([0.1, 0.7, -2.0, 3.0, 3.0, 0.0, 2.0], device=DEVICE)
    compile_exact(fn, a, b)


# -- bitwise ops and shifts -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int64])
def test_negation_flips_the_sign_bit_as_eager(dtype):
    """-x of +0.0 is -0.0 and of NaN a NaN of the other sign (Triton's `-x` is `0 - x`, which
    gave +0.0: 1 / -x was +inf where eager's is -inf); integers wrap (-(-128) in int8). The sign
    of a negated NaN is checked on the CPU only: CUDA's `neg` leaves it unspecified (PTX; an
    H100's eager gives +NaN for both signs in float32, keeps the sign in float64)."""
    if dtype.is_floating_point:
        nans = [_NAN, -_NAN] if DEVICE == "cpu" else []
        x = torch.tensor([0.0, -0.0, 4.0, -0.5, _INF, -_INF, *nans, 3e-45], device=DEVICE).to(dtype)

        def fn(x):              # (signbit reads the kernel's -x: its sign bit, in the kernel too)
            return torch.neg(x), 1 / -(x * 1), torch.signbit(-x)
    else:
        x = torch.tensor([0, 1, -3, 100, torch.iinfo(dtype).min, torch.iinfo(dtype).max], device=DEVICE, dtype=dtype)

        def fn(x):
            return torch.neg(x), -(x + 1)
    compile_exact(fn, x, kernels=None, externs=0)


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
def test_bitwise_ops_bit_by_bit(dtype):
    """and / or / xor of tensors and of (wrapped) scalars, on integers bit by bit and on bools
    logical, one kernel."""
    def fn(a, b):
        return a & b, a | b, a ^ b, (a & b) ^ (a | b)
    if dtype is torch.bool:
        a = torch.tensor([True, True, False, False], device=DEVICE)
        b = torch.tensor([True, False, True, False], device=DEVICE)
    else:
        a, b = int_operands(dtype)
    compile_exact(fn, a, b)


def test_bitwise_ops_with_scalars_and_mixed_dtypes():
    """Scalars wrap to the tensor's dtype (`u & -1` keeps every bit, `s & 300` is `s & 44`); a bool
    and an integer give the integer dtype, uint8 with int8 int16, as eager promotes them."""
    def fn(u, s, x, flag):
        return (u & -1, u | 256, u ^ 300, s & 300, x ^ -1, 3 & x, flag & x, flag | 3, u & s, x | flag)
    u = ints([0, 1, 7, 200, 255, 128], torch.uint8)
    s = ints([-128, 127, -1, 0, 5, -5], torch.int8)
    x = ints([-2**31, 2**31 - 1, -1, 0, 12345, -54321], torch.int32)
    flag = torch.tensor([True, False, True, False, True, True], device=DEVICE)
    compile_exact(fn, u, s, x, flag, kernels=None)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_by_tensor_amounts_match_eager_out_of_range_too(dtype):
    """Shifts by amounts in [0, bits) as C's (left wraps; right is arithmetic on signed, logical
    on unsigned), and by amounts out of it (negative, >= bits) as eager: a left shift is 0, a right
    shift fills with the sign. Where LLVM's shift would be undefined, the kernel never shifts."""
    def fn(x, s):
        return x << s, x >> s, torch.bitwise_left_shift(x, s), torch.bitwise_right_shift(x, s)
    bits = torch.iinfo(dtype).bits
    amounts = list(range(0, bits + 3)) + [bits * 2, 100] + ([-1, -5, -bits] if dtype.is_signed else [128, 255])
    info = torch.iinfo(dtype)
    base = [1, 5, info.max, info.min] + ([-1, -8] if dtype.is_signed else [200, 3])
    x = ints([v for v in base for _ in amounts], dtype)
    s = ints([a for _ in base for a in amounts], dtype)
    compile_exact(fn, x, s)


def test_shifts_by_scalars_and_of_scalars():
    """Constant amounts in range shift, out of range fold to eager's fill (`x >> 40` on int32 is
    its sign, `x << 32` is 0; 2**40 wraps to a shift by 0); `3 << s` shifts a scalar."""
    def fn(x, u, s):
        return (x >> 2, x << 3, x >> 40, x << 32, x << -1, x >> 2**40, u >> 1, u << 3, u << 8,
                3 << s, torch.bitwise_right_shift(-64, s), (x << 4) >> 4, (u << 4) >> 4)
    x = ints([1, -1, 5, -8, 2**31 - 1, -2**31, 12345, -54321], torch.int32)
    u = ints([0, 1, 7, 200, 255, 128, 15, 16], torch.uint8)
    s = ints([0, 1, 5, 62, 63, 64, 70, 3], torch.int64)
    compile_exact(fn, x, u, s, kernels=None)      # (unrelated inputs: a kernel each, or fewer)


def test_floating_shift_stays_unlowered():
    """No lowering builds a shift of floats (eager rejects it)."""
    from dynamo_lite.backends.triton.lowerings import NotLowerable, lower_shift

    class Node:
        meta = {"val": torch.empty(2, dtype=torch.float32)}
        target = torch.ops.aten.__lshift__.Scalar
    with pytest.raises(NotLowerable):
        lower_shift(None, Node, None, None)
