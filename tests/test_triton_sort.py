"""sort / argsort / topk and cummax / cummin on the triton backend, against eager.

These are scans of positions (ir.POSITION_SCANS): a kernel holding whole rows finds where each
result element lies in its row (a stable sort of packed (value, position) keys; a scan of
(value, position) pairs), and the values are gathered from those positions where they are used.
Every test compares with eager exactly (values bit for bit, NaN where eager has NaN, indices
equal) where eager's result is determined: a stable sort, a cummax (the later of equal values),
a topk of distinct values. Where it is not (an unstable sort or a topk with ties) the values
must equal eager's and the indices must be a permutation (a choice of positions) that holds
those values. Each test asserts the op was lowered: no extern aten call, and the kernel count.
"""
import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

import torch.fx                                                          # noqa: E402

from dynamo_lite.backends.triton import lower_reductions, triton_backend   # noqa: E402
from test_triton_kernels import compile_and_check                        # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes

NAN, INF = float("nan"), float("inf")


def check(fn, *args, kernels=None):
    """`compile_and_check` exactly (no tolerance, NaN equal to NaN), with no extern call left."""
    return compile_and_check(fn, *args, kernels=kernels, externs=0, rtol=0, atol=0, equal_nan=True)


def special(rows: int, cols: int, dtype=torch.float32) -> torch.Tensor:
    """Rows that test the order's rules: ties, NaNs (several, first, last, all), infinities,
    +0.0 and -0.0 mixed, a constant row; the rest random."""
    x = torch.randn(rows, cols, device=DEVICE)
    x[0] = torch.randint(0, 3, (cols,), device=DEVICE).float()       # ties everywhere
    x[1, cols // 3: cols // 3 + 3] = NAN
    x[1, cols - 1] = NAN
    x[2, 0] = NAN
    x[3] = NAN
    x[4, ::2] = -INF
    x[4, 1::3] = INF
    x[5] = 0.0
    x[5, 1::2] = -0.0                                              # equal to eager's sort: ties
    x[6] = 2.5
    return x.to(dtype)


def distinct(rows: int, cols: int, dtype=torch.float32) -> torch.Tensor:
    """Rows of distinct values (a permutation of exactly representable numbers, mixed signs)."""
    perm = torch.stack([torch.randperm(cols, device=DEVICE) for _ in range(rows)])
    return (perm - cols // 2).to(dtype)


# -- sort ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("cols", [37, 64])                 # masked lanes, and none
def test_stable_sort_is_eagers_with_nans_infinities_zeros_and_ties(descending, cols):
    def fn(x):
        v, i = torch.sort(x, dim=-1, descending=descending, stable=True)
        return v, i
    check(fn, special(9, cols), kernels=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int16, torch.int8,
                                   torch.uint8, torch.bool])
def test_stable_sort_of_other_dtypes(dtype):
    if dtype.is_floating_point:
        x = special(7, 50, dtype)
    elif dtype is torch.bool:
        x = torch.rand(7, 50, device=DEVICE) > 0.5
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (7, 50), device=DEVICE, dtype=dtype)
        x[0, :3] = info.min                                        # the extremes order too
        x[0, 3:6] = info.max

    def fn(x):
        (a, i), (b, j) = torch.sort(x, dim=1, descending=True, stable=True), torch.sort(x, dim=1, stable=True)
        return a, i, b, j
    source = check(fn, x, kernels=1).kernels[0].source
    narrow = dtype.itemsize <= 2                     # int32 keys (16-bit positions), else int64
    assert ("_sort_key16(tmp" in source) == narrow and ("_sort_key(tmp" in source) != narrow, source


def test_sort_along_an_outer_dim_and_of_a_transposed_input():
    def fn(x):
        a = torch.sort(x, dim=0, stable=True)
        b = torch.sort(x.t(), dim=1, descending=True, stable=True)
        return a.values, a.indices, b.values, b.indices
    check(fn, special(24, 10))


def test_sort_fuses_with_its_producer_and_consumer():
    def fn(x, y):
        v, i = torch.sort(x * 2 + y, dim=-1, stable=True)
        return v.relu() + 1, i
    check(fn, torch.randn(8, 40, device=DEVICE), torch.randn(40, device=DEVICE), kernels=1)


def test_unstable_sort_and_argsort_give_eagers_values_and_a_valid_permutation():
    x = special(9, 45)

    def fn(x):
        v, i = torch.sort(x, dim=-1)
        return v, i, torch.argsort(x, dim=-1, descending=True)
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    v, i, j = compiled(x)
    assert compiled.compiled_graph.fallback_reason is None and not compiled.compiled_graph.extern_ops
    ev, _, ej = fn(x)
    torch.testing.assert_close(v, ev, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.gather(1, i), ev, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.gather(1, j), x.gather(1, ej), rtol=0, atol=0, equal_nan=True)
    for p in (i, j):
        assert torch.equal(p.sort(1).values, torch.arange(45, device=DEVICE).expand(9, 45))


def test_a_row_too_long_to_hold_stays_an_aten_call():
    x = torch.randn(2, lower_reductions.SORT_MAX + 1, device=DEVICE)
    compile_and_check(_stable_sort, x, externs=1, rtol=0, atol=0)


def _stable_sort(x):
    v, i = torch.sort(x, stable=True)
    return v, i


def test_float64_and_int64_sorts_stay_aten_calls():
    # their 64-bit values leave no room for the position in a 64-bit key
    for x in (torch.randn(3, 20, device=DEVICE, dtype=torch.float64),
              torch.randint(-2**40, 2**40, (3, 20), device=DEVICE)):
        compile_and_check(_stable_sort, x, externs=1, rtol=0, atol=0)


# -- topk ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_topk_of_distinct_values_is_eagers(largest, k):
    def fn(x):
        v, i = torch.topk(x, k, dim=-1, largest=largest)
        return v, i
    check(fn, distinct(6, 40), kernels=None)


def test_topk_outputs_have_eagers_layout_and_fuse_a_producer():
    x = distinct(6, 64, torch.float16)

    def fn(x):
        v, i = torch.topk(x * 3, 4, dim=1)
        return v, i
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    got, expected = compiled(x), fn(x)
    assert not compiled.compiled_graph.extern_ops
    for g, e in zip(got, expected):
        assert torch.equal(g, e) and g.stride() == e.stride(), (g.stride(), e.stride())


def test_topk_with_nans_and_ties_gives_eagers_values():
    x = special(9, 30)

    def fn(x):
        v, i = torch.topk(x, 7, dim=-1)
        return v, i
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    v, i = compiled(x)
    assert not compiled.compiled_graph.extern_ops
    ev, _ = fn(x)
    torch.testing.assert_close(v, ev, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.gather(1, i), ev, rtol=0, atol=0, equal_nan=True)
    assert all(len(set(row.tolist())) == 7 for row in i)          # seven different positions


def test_topk_along_an_outer_dim():
    def fn(x):
        v, i = torch.topk(x, 3, dim=0, largest=False)
        return v, i
    check(fn, distinct(5, 32).t().contiguous())


# -- cummax / cummin ------------------------------------------------------------------------------

@pytest.mark.parametrize("cols", [37, 64])
def test_cummax_and_cummin_are_eagers_with_ties_and_nans(cols):
    def fn(x):
        hi, lo = torch.cummax(x, 1), torch.cummin(x, 1)
        return hi.values, hi.indices, lo.values, lo.indices
    check(fn, special(9, cols), kernels=1)


def test_cummax_of_integers_along_an_outer_dim_fused_with_its_consumer():
    x = torch.randint(-5, 5, (30, 6), device=DEVICE, dtype=torch.int32)

    def fn(x):
        hi = torch.cummax(x + 1, 0)
        return hi.values * 2, hi.indices
    check(fn, x, kernels=1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool])
def test_cummin_of_other_dtypes(dtype):
    x = special(7, 33, dtype) if dtype.is_floating_point else (
        torch.rand(7, 33, device=DEVICE) > 0.5 if dtype is torch.bool else
        torch.randint(-2**40, 2**40, (7, 33), device=DEVICE))
    def fn(x):
        v, i = torch.cummin(x, -1)
        return v, i
    check(fn, x, kernels=1)


def test_cummax_of_16_bit_floats_stays_an_aten_call():
    # (measured slower than eager's on an H200: lower_reductions.RUNNING_PICK_DTYPES)
    def fn(x):
        v, i = torch.cummax(x, -1)
        return v, i
    for dtype in (torch.float16, torch.bfloat16):
        compile_and_check(fn, special(9, 33, dtype), externs=1, rtol=0, atol=0, equal_nan=True)
