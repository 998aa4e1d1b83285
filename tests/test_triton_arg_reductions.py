"""argmax / argmin and max / min over a dim (values and indices) on the triton backend, against eager.

These are pick reductions (ir.PICKS): each row's first maximum (minimum), a row's first NaN where
it holds any, its index as int64 and, for max.dim / min.dim, its value. Every test compares the
compiled graph with eager exactly (indices equal, values equal bit for bit, NaN where eager has
NaN) and asserts the graph was lowered: no extern aten call, and one kernel where the pick fuses
with what computes its input or uses its result. The rows are held in registers (`per` kernels),
looped over in blocks (`red`: forced at small sizes by the `looped` fixture), along memory and
across it (a reduction over dim 0, a transposed input); few long rows, which a sum splits in two
passes, stay one pass.
"""
import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

import torch.fx                                                          # noqa: E402

from dynamo_lite.backends.triton import lower_reductions, triton_backend   # noqa: E402
from test_triton_kernels import compile_and_check, t      # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes

NAN, INF = float("nan"), float("inf")


def check(fn, *args, kernels=None):
    """`compile_and_check` exactly (no tolerance, NaN equal to NaN), with no extern call left."""
    return compile_and_check(fn, *args, kernels=kernels, externs=0, rtol=0, atol=0, equal_nan=True)


def picks(x):
    """Every pick along the last dim: argmax, argmin, max.dim and min.dim (values and indices)."""
    hi, lo = x.max(-1), x.min(-1)
    return x.argmax(-1), x.argmin(-1), hi.values, hi.indices, lo.values, lo.indices


def special_rows(cols: int) -> torch.Tensor:
    """Rows that test the rules: ties, several NaNs (in a row, first and last), all NaN, all -inf,
    all +inf, -inf and +inf with NaN, a constant row, and random rows."""
    rows = torch.randn(12, cols, device=DEVICE)
    rows[0] = torch.randint(0, 3, (cols,), device=DEVICE).float()    # ties everywhere
    rows[1, cols // 3: cols // 3 + 3] = NAN                        # three NaNs in a row
    rows[1, cols - 1] = NAN
    rows[2, 0] = NAN                                               # the first element
    rows[3, cols - 1] = NAN                                        # the last one
    rows[4] = NAN
    rows[5] = -INF
    rows[6] = INF
    rows[7] = -INF
    rows[7, cols // 2] = NAN
    rows[8] = 2.5
    rows[9, cols // 2:] = INF                                      # the max is tied, late in the row
    rows[10, 1::2] = -INF
    return rows


# -- one kernel, fused, in registers ------------------------------------------------------------

def test_argmax_fuses_with_its_producer_and_its_consumer():
    def fn(x):
        return (x * 2 - 1).relu().argmax(1) + 1
    check(fn, t(16, 33), kernels=1)


def test_max_dim_values_and_indices_are_one_kernel():
    def fn(x):
        hi = x.max(1)
        return hi.values * 2, hi.indices
    info = check(fn, special_rows(33), kernels=1)
    source = info.kernels[0].source
    assert source.count("tl.reduce(") == 1 and "_argmax_nan" in source, source   # one pair reduction


@pytest.mark.parametrize("cols", [33, 64])                # masked lanes, and none
def test_ties_nans_and_infinities_pick_as_eager(cols):
    check(picks, special_rows(cols), kernels=1)


def test_signed_zeros_keep_the_first_one():
    """max.dim of a row of +-0 gives the row's first zero, as eager (a plain max may give either)."""
    def fn(x):
        return x.max(1).values, x.min(1).values
    x = torch.tensor([[-0.0, 0.0, 0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, 0.0]], device=DEVICE)
    check(fn, x)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x])
    for got, expected in zip(compiled(x), fn(x)):
        assert torch.equal(torch.signbit(got), torch.signbit(expected)), (got, expected)


# -- dims: keepdim, negative, None, middle and outer, size 1 ---------------------------------------

def test_keepdim_negative_dims_and_dim_none():
    def fn(x):
        lo = x.min(-2, keepdim=True)
        return (x.argmax(-1, keepdim=True), x.argmin(dim=None), x.argmax(None, keepdim=True),
                lo.values, lo.indices, x.argmax(1))
    x = special_rows(20).reshape(4, 3, 20)
    x[1, :, 7] = NAN
    check(fn, x)


def test_dim_none_numbers_the_flattened_tensor():
    def fn(x, y):
        return x.argmax(), y.argmin()
    x = t(5, 7, 3)
    x[3, 1, 2] = 50.0
    x[4, 0, 0] = 50.0                                      # a later tie
    y = t(6, 9)
    y[2, 4] = NAN
    y[5, 0] = NAN
    check(fn, x, y)


def test_reductions_over_outer_and_middle_dims():
    def fn(x):
        mid, outer = x.max(1), x.min(0)
        return x.argmax(0), mid.values, mid.indices, outer.values, outer.indices
    x = torch.randint(-3, 3, (9, 70, 6), device=DEVICE).float()   # ties; dim 1 loops across rows
    x[2, 10:13, 1] = NAN
    x[0, :, 2] = -INF
    check(fn, x)


def test_one_element_rows_and_a_scalar():
    def fn(x, s):
        hi = x.max(1)
        return x.argmax(1), hi.values, hi.indices, s.argmax(), x.argmin(1, keepdim=True)
    check(fn, t(5, 1), torch.tensor(3.0, device=DEVICE))


# -- layouts: transposed and permuted inputs (loops ordered by stride) ---------------------------

def test_transposed_input():
    def fn(x):
        xt = x.t()
        hi = xt.max(0)
        return xt.argmax(1), xt.argmin(0), hi.values, hi.indices, xt.argmax(), xt.argmin(None, keepdim=True)
    check(fn, special_rows(40))


def test_permuted_input_over_several_dims_of_memory():
    def fn(x):
        p = x.permute(2, 0, 1)                             # (6, 4, 10), dim 2 is x's dim 1
        return p.argmax(), p.argmin(2), p.max(1).indices
    x = torch.randint(0, 4, (4, 10, 6), device=DEVICE).float()
    x[1, 3, 2] = NAN
    check(fn, x)


# -- looped rows and few long rows ------------------------------------------------------------

@pytest.fixture
def looped(monkeypatch):
    """Every reduction loops, in blocks of at most 8, along rows and across them (as in
    test_triton_reductions' blocks_of_8): the `red` kernels at sizes the interpreter runs quickly."""
    from dynamo_lite.backends.triton import codegen, settings
    monkeypatch.setattr(codegen, "LOOPED_RBLOCK_MAX", 8)
    monkeypatch.setattr(codegen, "PERSISTENT_MAX_OUTER", 2)
    monkeypatch.setattr(settings, "persistent_max_inner", 8)


@pytest.mark.parametrize("cols", [21, 32])                # a partial last block, and exact blocks
def test_looped_rows_pick_as_eager(looped, cols):
    info = check(picks, special_rows(cols), kernels=1)
    assert info.kernels[0].kind == "red" and "for roffset" in info.kernels[0].source


def test_looped_ties_across_blocks_keep_the_first(looped):
    """Each lane's running pick, then the row's: a tie in a later block never wins."""
    def fn(x):
        return x.argmax(1), x.argmin(1), x.max(1).indices
    x = torch.zeros(3, 40, device=DEVICE)
    x[0, [5, 13, 21]] = 1.0                               # the same lane of three blocks
    x[1, [13, 5]] = -1.0
    x[2, [30, 6, 7]] = NAN
    check(fn, x, kernels=1)


def test_looped_across_rows_and_transposed(looped):
    def fn(x):
        hi = x.t().max(1)
        return x.argmax(0), x.argmin(0, keepdim=True), hi.values, hi.indices
    check(fn, special_rows(19), kernels=2)             # domains (12, 19) and (19, 12)


def test_looped_over_several_dims_of_a_permuted_input(looped):
    def fn(x):
        return x.permute(1, 0, 2).argmax(), x.permute(2, 1, 0).argmin()
    x = torch.randint(0, 3, (3, 5, 4), device=DEVICE).float()
    x[2, 1, 3] = NAN
    check(fn, x)


def test_a_long_row_loops(monkeypatch):
    from dynamo_lite.backends.triton import settings
    monkeypatch.setattr(settings, "persistent_max_inner", 256)
    x = special_rows(1000)[:6]
    info = check(picks, x, kernels=1)
    assert info.kernels[0].kind == "red"


def test_few_long_rows_are_not_split():
    """A sum over dim 0 of a tall tensor (or of two long rows) is split in two passes
    (`_split_plan`); a pick is one pass, its index over the whole row."""
    def tall(x):
        hi = x.max(0)
        return x.argmax(0), hi.values, hi.indices

    def long_rows(x):
        return x.argmin(1), x.argmax(1)
    assert lower_reductions._split_plan((8192, 8), [0], inner=False) is not None
    x = torch.randint(0, 50, (8192, 8), device=DEVICE).float()
    x[6000, 3] = 100.0
    x[7000:7003, 5] = NAN
    check(tall, x, kernels=1)
    assert lower_reductions._split_plan((2, 20000), [1]) is not None
    y = torch.randint(0, 50, (2, 20000), device=DEVICE).float()
    y[1, 15000] = -1.0
    y[0, 19999] = NAN
    check(long_rows, y, kernels=1)


# -- dtypes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_compare_in_their_own_precision(dtype):
    """Values that differ in fp32 but round to one fp16 / bf16 value tie, as in eager."""
    x = (special_rows(30) * 0.01 + 1.0).to(dtype)
    x[11] = (1.0 + torch.arange(30, device=DEVICE) * 1e-4).to(dtype)   # a few distinct values
    check(picks, x, kernels=1)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8])
def test_integers(dtype):
    info = torch.iinfo(dtype)
    x = torch.randint(max(info.min, -5), min(info.max, 5), (6, 25), device=DEVICE).to(dtype)
    x[0] = info.min                                      # the identities themselves, tied
    x[1] = info.max
    x[2, 7] = info.max
    x[2, 9] = info.max
    check(picks, x, kernels=1)


def test_integers_looped(looped):
    x = torch.randint(-4, 4, (5, 29), device=DEVICE, dtype=torch.int32)
    x[0] = torch.iinfo(torch.int32).min
    check(picks, x, kernels=1)


def test_max_and_min_over_a_dim_of_bools():
    def fn(x):
        hi, lo = x.max(1), x.min(0)
        return hi.values, hi.indices, lo.values, lo.indices
    x = torch.rand(7, 13, device=DEVICE) > 0.5
    x[0] = False
    x[1] = True
    check(fn, x)
