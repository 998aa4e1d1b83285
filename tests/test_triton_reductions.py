"""Reductions of every shape on the triton backend, against eager under Triton's interpreter.

Cross-entropy (log_softmax + nll_loss) never writes its [N, C] log-probabilities and makes no
extern nll_loss call; long rows take one pass (online softmax, one-pass var_mean); few long rows
are split into a partial and a small second reduction, unless what follows normalizes them; group norm
and what follows it are one kernel.
Each test compares values with eager and asserts the structure (kernels, buffers, externs).
"""
import re

import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

import torch.fx                                           # noqa: E402
import torch.nn.functional as F                           # noqa: E402

from dynamo_lite.backends.triton import lower_reductions, triton_backend   # noqa: E402
from test_triton_kernels import compile_and_check, t     # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes


def allocated_shapes(info) -> list[tuple[int, ...]]:
    """The sizes of every buffer the wrapper allocates."""
    return [tuple(int(s) for s in re.findall(r"\d+", m)) for m in
            re.findall(r"empty_strided\(\(([\d, ]*)\)", info.wrapper_source)]


def targets(n, classes, ignored=()):
    tgt = torch.randint(0, classes, (n,), device=DEVICE)
    for i in ignored:
        tgt[i] = -100
    return tgt


# -- cross-entropy: a reduction followed by a gather ----------------------------------------------

@pytest.fixture
def looped_above_8192(monkeypatch):
    """Rows longer than 8192 loop (`red` kernels; by default only rows over 16384 do, and a few of
    those are split first): the looped kernels are tested at sizes the interpreter runs quickly."""
    from dynamo_lite.backends.triton import settings
    monkeypatch.setattr(settings, "persistent_max_inner", 8192)


@pytest.mark.parametrize("classes", [100, 10000])          # a persistent and a looped row kernel
def test_cross_entropy_never_writes_log_probabilities(classes, looped_above_8192):
    def fn(x, tgt):
        return F.cross_entropy(x, tgt)
    info = compile_and_check(fn, t(6, classes), targets(6, classes, ignored=(2,)), kernels=2, externs=0)
    assert (6, classes) not in allocated_shapes(info), info.wrapper_source
    assert "nll_loss" not in info.wrapper_source
    if classes == 10000:                                   # max and sum of exp in one loop
        row = info.kernels[0]
        assert row.kind == "red" and row.source.count("for roffset") == 1, row.source


def test_cross_entropy_bf16():
    def fn(x, tgt):
        return F.cross_entropy(x, tgt)
    info = compile_and_check(fn, t(8, 300, dtype=torch.bfloat16), targets(8, 300), kernels=2, externs=0,
                             rtol=2e-2, atol=2e-2)
    assert (8, 300) not in allocated_shapes(info)


def test_nll_loss_reductions_weights_and_label_smoothing():
    def fn(x, tgt, w):
        logp = F.log_softmax(x, -1)
        return (F.nll_loss(logp, tgt, weight=w), F.nll_loss(logp, tgt, reduction="sum"),
                F.nll_loss(logp, tgt, weight=w, reduction="none"), F.cross_entropy(x, tgt, label_smoothing=0.1),
                F.nll_loss(logp[1], tgt[1]))
    compile_and_check(fn, t(7, 50), targets(7, 50, ignored=(0, 4)), torch.rand(50, device=DEVICE) + 0.1, externs=0)


def test_all_targets_ignored_gives_nan_like_eager():
    def fn(x, tgt):
        return F.cross_entropy(x, tgt)
    tgt = torch.full((4,), -100, device=DEVICE)
    gm = torch.fx.symbolic_trace(fn)
    x = t(4, 20)
    out = triton_backend(gm, [x, tgt])(x, tgt)
    assert torch.isnan(out) and torch.isnan(fn(x, tgt))


def test_target_out_of_range_is_nan_not_a_stray_read():
    def fn(x, tgt):
        return F.cross_entropy(x, tgt, reduction="none")
    x, tgt = t(4, 20), targets(4, 20)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x, tgt])
    bad = tgt.clone()
    bad[1] = 20                                           # eager raises; we must not read past the row
    out = compiled(x, bad)
    assert torch.isnan(out[1]) and not torch.isnan(out[[0, 2, 3]]).any()
    torch.testing.assert_close(out[[0, 2, 3]], fn(x, tgt)[[0, 2, 3]])


def test_cross_entropy_backward_is_one_kernel_without_extern():
    from dynamo_lite.backends.triton import backend

    def fn(x, tgt):
        return (F.cross_entropy(x, tgt),)
    x = t(6, 40).requires_grad_()
    tgt = targets(6, 40, ignored=(1,))
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x, tgt])
    out = compiled(x, tgt)[0]
    out.backward()
    grad = x.grad.clone()
    x.grad = None
    expected = fn(x, tgt)[0]
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, x.grad)
    forward, _, backward_graph = list(backend.recent)     # forward, both, backward (AOTAutograd)
    assert forward.extern_ops == {} and backward_graph.extern_ops == {}
    assert backward_graph.kernel_count == 1, backward_graph.source


# -- online softmax edge cases ---------------------------------------------------------------------


def test_looped_softmax_with_infinities_matches_eager(looped_above_8192):
    def fn(x):
        return torch.softmax(x, -1), torch.log_softmax(x, -1)
    x = t(7, 9000) * 20
    x[1] = float("-inf")                                  # a row of -inf: NaN in eager
    x[2, 7] = float("inf")
    x[3, :8000] = float("-inf")                           # the max appears late in the row
    x[4, 100] = float("nan")
    x[5] = 3.0                                            # every element equals the running max
    x[6, 10] = x[6, 8990] = float("inf")                  # inf seen again once it is the max
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    for got, want in zip(compiled(x), fn(x)):
        torch.testing.assert_close(got, want, equal_nan=True)
    assert compiled.compiled_graph.kernel_count == 1
    assert compiled.compiled_graph.kernels[0].source.count("for roffset") == 2   # stats, then stores


@pytest.mark.parametrize("cols", [1000, 9000], ids=["persistent", "looped"])
def test_softmax_at_the_edges_of_exp_matches_eager(looped_above_8192, cols):
    """The looped online softmax sums exp2((v - max) * log2(e)) (codegen.EXP2_ONLINE_SUM: exp2
    flushes denormal results, which change no such sum); values that are stored keep tl.exp, so
    probabilities in the denormal range stay there (their log finite, as in eager). The same values
    as eager at the edges: rows of -inf, +inf, NaN, magnitudes of 1e5 (an exact x - max), a spread
    of 95 (exp(-95) is a denormal)."""
    def fn(x):
        return (torch.softmax(x, -1), torch.log_softmax(x, -1), torch.exp(x - x.amax(-1, keepdim=True)),
                torch.log(torch.softmax(x, -1)))
    x = t(7, cols) * 30
    x[0] = float("-inf")
    x[1, 3] = float("inf")
    x[2, 5] = float("nan")
    x[3] *= 3000.0
    x[4, :] = -3e4
    x[4, cols - 1] = 3e4
    x[5, :] = -95.0
    x[5, 0] = 0.0
    x[6, :] = torch.linspace(-100.0, 0.0, cols)
    gm = torch.fx.symbolic_trace(fn)
    compiled = triton_backend(gm, [x])
    got, want = compiled(x), fn(x)
    for g, w in zip(got[:3], want[:3]):
        torch.testing.assert_close(g, w, equal_nan=True)
    # log of a denormal probability: finite, as eager's; its few mantissa bits give both engines'
    # divisions a rounding of ~1e-6 relative there (H200: -95.0003 vs -95.0000)
    torch.testing.assert_close(got[3], want[3], equal_nan=True, rtol=2e-5, atol=1e-5)
    assert torch.isfinite(got[3][5]).all()              # (exp(-95): a denormal, not 0)
    sources = "".join(k.source for k in compiled.compiled_graph.kernels)
    assert ("tl.exp2((tmp" in sources) == (cols > 8192), sources       # the online sum's exps only
    assert "tl.exp(" in sources, sources


@pytest.mark.parametrize("n", [100, 30000], ids=["row-kernel", "split"])
def test_max_and_min_of_rows_holding_nan_are_nan(n):
    """A row holding NaN: amax / amin are NaN as in eager (Triton's `tl.max` / `tl.min` combine with
    maxnumf / minnumf, which drop NaN on the GPU: the kernels reduce with NaN-propagating combine
    functions instead), and softmax next to them is NaN in that row only."""
    def fn(x):
        return x.amax(-1), x.amin(-1), torch.softmax(x, -1)
    x = t(4, n)
    x[1, 7] = float("nan")
    x[2, n - 1] = float("nan")
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x])
    for got, want in zip(compiled(x), fn(x)):
        torch.testing.assert_close(got, want, equal_nan=True)
    for kernel in compiled.compiled_graph.kernels:
        assert "tl.max(" not in kernel.source and "tl.min(" not in kernel.source


# -- reductions over outer and several dims; split reductions ----------------------------------------

@pytest.mark.parametrize("dims", [0, 1, (0, 2), (0, 1)])
def test_large_outer_and_multi_dim_reductions(dims):
    def fn(x):
        return x.sum(dims), x.mean(dims), x.amax(dims)
    x = t(64, 12, 40)
    info = compile_and_check(fn, x, rtol=1e-4, atol=1e-3)
    assert info.kernel_count <= 2


def test_few_long_rows_are_split():
    def fn(x):
        return x.sum(0), x.amax(0)
    x = t(40000, 6)
    info = compile_and_check(fn, x, rtol=1e-4, atol=1e-3, kernels=2)
    first, second = info.kernels
    assert first.xnumel > 6 and second.xnumel == 6 and second.rnumel == first.xnumel // 6
    # the contiguous dim is the one lanes walk: the tile's x dim is the unit-stride one
    assert first.inner is False


def test_split_plan_keeps_many_rows_whole():
    assert lower_reductions._split_plan((4096, 4096), [1]) is None            # enough rows
    assert lower_reductions._split_plan((64, 100), [0]) is None               # short rows
    whole, dim, pieces = lower_reductions._split_plan((32, 32, 2, 128, 128), [2, 3, 4])
    assert whole == [2] and dim == 3 and pieces == 2                          # group norm's groups


# -- norms -------------------------------------------------------------------------------------------

def test_var_mean_of_long_rows_reads_them_once(looped_above_8192):
    def fn(x):
        v, m = torch.var_mean(x, -1)
        return v, m, x.std(-1)
    x = t(3, 12000) * 3 + 100                             # a large mean: the shift keeps precision
    info = compile_and_check(fn, x, kernels=1, rtol=1e-4, atol=1e-3)
    assert info.kernels[0].source.count("for roffset") == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_group_norm_and_what_follows_are_one_kernel(dtype):
    """Statistics, normalize and the SiLU after it in x's own shape: one kernel, which reads x
    once and writes only the result (no per-channel scale buffer, no fp32 group view)."""
    def fn(x, w, b):
        return F.silu(F.group_norm(x, 4, w, b))
    tol = 1e-4 if dtype is torch.float32 else 2e-2
    x = (t(2, 8, 16, 16) * 2 + 1).to(dtype)
    info = compile_and_check(fn, x, t(8, dtype=dtype), t(8, dtype=dtype), rtol=tol, atol=tol, externs=0,
                             kernels=1)
    assert allocated_shapes(info) == [(2, 8, 16, 16)]                           # only the output


def test_group_norm_channels_last_is_one_kernel():
    def fn(x, w, b):
        return F.group_norm(x, 2, w, b) * 2
    x = t(2, 8, 6, 6).to(memory_format=torch.channels_last)
    compile_and_check(fn, x, t(8), t(8), rtol=1e-4, atol=1e-4, externs=0, kernels=1)


def test_group_norm_with_large_groups_is_split():
    def fn(x, w, b):
        return F.group_norm(x, 2, w, b)
    info = compile_and_check(fn, t(1, 4, 128, 128), t(4), t(4), rtol=1e-4, atol=1e-4, externs=0)
    stats = info.kernels[0]
    assert stats.xnumel > 2                                # more partial rows than groups


def test_long_rows_that_are_normalized_are_not_split(monkeypatch):
    """Enough long rows (here 4, with the row minimum lowered for the interpreter) whose statistics
    come back to x's size: one looped kernel per row, the normalize in its second loop; the same
    rows only summed are still split."""
    monkeypatch.setattr(lower_reductions, "NORMALIZE_MIN_ROWS", 4)

    def norm(x, w, b):
        return F.group_norm(x, 4, w, b)

    def total(x, w, b):
        return x.reshape(4, -1).sum(1) + b[:4]
    args = (t(1, 8, 128, 128), t(8), t(8))
    info = compile_and_check(norm, *args, rtol=1e-4, atol=1e-4, externs=0, kernels=1)
    source = info.kernels[0].source
    assert source.count("for roffset") == 2
    # the row the statistics loop reads is kept in L2 for the normalize loop, which reads it last
    first, second = source.split("for roffset")[1:]
    assert 'evict_last' in first and 'evict_first' not in first and 'evict_first' in second
    info = compile_and_check(total, *args, rtol=1e-4, atol=1e-3, externs=0)
    assert info.kernels[0].xnumel > 4


@pytest.mark.parametrize("pixels", [(128, 128), (100, 100)], ids=["blocks-tile-the-row", "ragged-row"])
def test_looped_group_norm_reads_per_channel_values_once_a_block(monkeypatch, pixels):
    """A looped group norm over (2 channels, 128x128 pixels) rows: every block lies in one channel
    (the block sizes divide 16384), so the channel's weight and bias are one load a row per block
    (not a gather per element), and no lane is past the row's end (no rmask); over 100x100 pixels
    blocks straddle channels and the row's end: gathers, and masks in the last block, the same
    values."""
    monkeypatch.setattr(lower_reductions, "NORMALIZE_MIN_ROWS", 4)

    def norm(x, w, b):
        return F.silu(F.group_norm(x, 4, w, b))
    args = (t(1, 8, *pixels), t(8), t(8))
    info = compile_and_check(norm, *args, rtol=1e-4, atol=1e-4, externs=0, kernels=1)
    source = info.kernels[0].source
    assert info.kernels[0].kind == "red" and source.count("for roffset") == 2, source
    per_channel = [line for line in source.splitlines() if "tl.load(ptr1 " in line or "tl.load(ptr2 " in line]
    assert per_channel, source
    if pixels == (128, 128):
        assert "tl.static_assert(16384 % RBLOCK == 0)" in source
        assert "r0 = (roffset // 16384)" in source
        assert all("rindex" not in line and "rmask" not in line for line in per_channel), per_channel
        assert "rmask)" not in source and "& rmask" not in source, source
    else:                       # whole blocks unmasked, the last, partial one masked (peeled)
        assert "static_assert" not in source and source.count("if 20000 % RBLOCK != 0:") == 2, source
        masked = [line for line in per_channel if "rmask" in line]
        assert masked and len(masked) < len(per_channel), per_channel


@pytest.mark.parametrize("peel", [True, False], ids=["peeled", "masked-throughout"])
def test_ragged_rows_mask_only_their_last_block(looped_above_8192, monkeypatch, peel):
    """Rows of 10000 logits in blocks that do not tile them: the whole blocks run without lane
    masks and the last, partial block with them (`settings.peel_tail`); off, every block is masked.
    Both match eager, infinities and an all -inf row included."""
    from dynamo_lite.backends.triton import settings
    monkeypatch.setattr(settings, "peel_tail", peel)

    def fn(x, tgt):
        return F.cross_entropy(x, tgt), torch.log_softmax(x, -1).amax(-1)
    x = t(5, 10000) * 10
    x[1] = float("-inf")
    x[2, 9999] = float("inf")
    x[3, 9990:] = 50.0                                    # the max in the partial block only
    info = compile_and_check(fn, x, targets(5, 10000, ignored=(1,)), equal_nan=True)
    row = next(k for k in info.kernels if k.kind == "red")
    assert ("if 10000 % RBLOCK != 0:" in row.source) == peel, row.source
    if peel:
        loops = row.source.split("for roffset in range(0, (10000 // RBLOCK) * RBLOCK, RBLOCK):")[1:]
        assert loops, row.source
        for loop in loops:
            whole, tail = loop.split("if 10000 % RBLOCK != 0:")
            assert "& rmask" not in whole and "& rmask" in tail, loop


@pytest.fixture
def blocks_of_8(monkeypatch):
    """Every reduction loops, in blocks of at most 8 (the launcher's bound and the kernels'
    divisibility rule at 8 instead of 4096): block-constant dims and rows that blocks tile exactly
    at sizes the interpreter runs quickly, along and across rows."""
    from dynamo_lite.backends.triton import codegen, launch, settings
    monkeypatch.setattr(codegen, "LOOPED_RBLOCK_MAX", 8)
    monkeypatch.setattr(codegen, "PERSISTENT_MAX_OUTER", 2)
    monkeypatch.setattr(settings, "persistent_max_inner", 8)
    monkeypatch.setattr(lower_reductions, "NORMALIZE_MIN_ROWS", 1)


def _weighted_sum(x, w):                      # w per index of dim 1: one value a block of (5, 16)
    var, mean = torch.var_mean(x, (1, 2))
    return (x * w[:, None]).sum((1, 2)), var, mean


def _masked_softmax(x):                         # rows of 24: blocks of 8 tile them
    return torch.softmax(x.masked_fill(x > 1.0, float("-inf")), -1), torch.log_softmax(x, -1)


def _ragged(x):                                 # rows of 21: the last block is partial
    return x.sum(-1), x.amax(-1), torch.softmax(x, -1)


def _outer(x):                                  # across rows of (4, 8) per output: outer, looped
    return x.sum((0, 1)), x.amax(0)


@pytest.mark.parametrize("case", [
    ("group_norm", lambda x, w, b: F.gelu(F.group_norm(x, 2, w, b)), lambda: (t(2, 4, 4, 8), t(4), t(4))),
    ("weighted_sum", _weighted_sum, lambda: (t(3, 5, 16), t(5))),
    ("masked_softmax", _masked_softmax, lambda: (t(3, 24),)),
    ("ragged", _ragged, lambda: (t(3, 21),)),
    ("outer", _outer, lambda: (t(4, 8, 6),)),
    ("cross_entropy_even", lambda x, y: F.cross_entropy(x, y), lambda: (t(5, 32), targets(5, 32, (1,)))),
    ("cross_entropy_ragged", lambda x, y: F.cross_entropy(x, y), lambda: (t(5, 30), targets(5, 30))),
], ids=lambda c: c[0])
def test_reductions_in_small_blocks_match_eager(blocks_of_8, case):
    _, fn, make = case
    info = compile_and_check(fn, *make(), rtol=1e-4, atol=1e-4, equal_nan=True)
    sources = "".join(k.source for k in info.kernels)
    assert "for roffset" in sources, sources          # every reduction looped
    if case[0] in ("group_norm", "weighted_sum"):
        assert "% RBLOCK == 0)" in sources and "(roffset // " in sources, sources


def test_rows_that_only_half_the_largest_block_tiles_get_blocks_of_that_half(blocks_of_8):
    """Rows of 20 (5 x 4, the bound 8): blocks of at most 4, no lane masks, and the launcher never
    offers a larger block (as rows of 5 x 4096 with blocks of up to 8192); rows of 24 keep the
    bound of 8, and ragged rows of 21 too."""
    from dynamo_lite.backends.triton import launch

    def fn(x, y, z):
        return torch.softmax(x, -1), y.sum(-1), z.amax(-1)
    info = compile_and_check(fn, t(3, 20), t(3, 24), t(3, 21), rtol=1e-4, atol=1e-4)
    bounds = {k.rnumel: k.rblock_max for k in info.kernels if k.kind == "red"}
    assert bounds == {20: 4, 24: 8, 21: 8}, bounds
    for k in info.kernels:
        assert all(c["RBLOCK"] <= k.rblock_max for c in launch.candidates(k, interpret=False)), k.name
        assert all(c["RBLOCK"] <= k.rblock_max for c in launch.candidates(k, interpret=True)), k.name
    row20 = next(k for k in info.kernels if k.rnumel == 20).source
    assert "tl.static_assert(20 % RBLOCK == 0)" in row20 and "rmask)" not in row20 and "& rmask" not in row20, row20


def test_batch_norm_training_statistics_split_and_update():
    def fn(x, mean, var, w, b):
        return F.batch_norm(x, mean, var, w, b, training=True, momentum=0.1).relu()
    info = compile_and_check(fn, t(8, 3, 48, 48), t(3), torch.rand(3, device=DEVICE) + 0.5, t(3), t(3),
                             rtol=1e-4, atol=1e-4, externs=0)
    assert info.kernels[0].xnumel > 3


def test_channels_last_batch_norm_statistics_are_split_across_channels():
    """Over (N, H, W) of a channels-last tensor the channels are contiguous: an outer reduction in
    memory though the last dim is reduced. 64 channels are one program of 64 lanes: the
    statistics are split over H (many programs), then summed per channel; values against eager."""
    x = t(8, 64, 32, 32).to(memory_format=torch.channels_last)
    assert not lower_reductions.reduces_innermost(
        lower_reductions.Value.of_buffer(_buffer_like(x)), [0, 2, 3])
    assert lower_reductions._split_plan((8, 64, 32, 32), [0, 2, 3], inner=False) is not None
    # ResNet's stem: no divisor of 112 gives the 64 pieces wanted after N; the largest one does
    assert lower_reductions._split_plan((8, 64, 112, 112), [0, 2, 3], inner=False) == ([0], 2, 56)

    def fn(x, mean, var, w, b):
        return F.batch_norm(x, mean, var, w, b, training=True, momentum=0.1).relu()
    info = compile_and_check(fn, x, t(64), torch.rand(64, device=DEVICE) + 0.5, t(64), t(64),
                             rtol=1e-4, atol=1e-4, externs=0, kernels=3)
    partial, total, normalize = info.kernels
    assert partial.inner is False and partial.xnumel >= 64 * 32          # lanes across channels, split
    assert total.xnumel == 64 and normalize.kind == "poi"


def _buffer_like(x):
    from dynamo_lite.backends.triton.ir import Buffer
    return Buffer("x", tuple(x.shape), tuple(x.stride()), x.dtype, x.device, "input")


def _instance_norm(x):
    m = x.mean((2, 3), keepdim=True)
    v = x.var((2, 3), keepdim=True, unbiased=False)
    return (x - m) / torch.sqrt(v + 1e-5)


def test_instance_norm_by_hand_is_one_kernel(monkeypatch):
    compile_and_check(_instance_norm, t(2, 3, 16, 16), kernels=1, rtol=1e-4, atol=1e-4)
    # rows of 16384 (128x128 pixels), as many rows as the split leaves whole (a GPU-sized batch
    # has thousands): read once, kept in registers
    monkeypatch.setattr(lower_reductions, "SPLIT_MAX_ROWS", 6)
    info = compile_and_check(_instance_norm, t(2, 3, 128, 128), kernels=1, rtol=1e-4, atol=1e-4)
    assert info.kernels[0].kind == "per"


def test_instance_norm_by_hand_over_looped_rows_is_one_kernel(looped_above_8192):
    info = compile_and_check(_instance_norm, t(2, 3, 100, 100), kernels=1, rtol=1e-4, atol=1e-4)
    assert info.kernels[0].source.count("for roffset") == 2    # statistics in one pass, then the stores


def test_outer_reduction_with_many_narrow_outputs_is_split():
    # 512 outputs of an outer reduction are only 8 programs of 64 lanes: split the long dim
    plan = lower_reductions._split_plan((16384, 2, 256), [0])
    assert plan is not None and plan[1] == 0 and plan[2] > 1

    def fn(x):
        return x.sum(0)
    info = compile_and_check(fn, t(16384, 2, 16), rtol=1e-4, atol=1e-3, kernels=2)
    assert info.kernels[1].xnumel == 32


# -- scans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
def test_cumsum_with_its_producer_and_consumer_is_one_kernel(dtype):
    """`mask.long().cumsum(-1) - 1` (position ids from an attention mask): the cast, the scan and
    the subtraction in one kernel, integers scanned in int64 as eager does (bool and int32 give
    int64), fp16 in fp32; the second scan of the same rows in that kernel too."""
    x = (t(6, 37) * 4).to(dtype) if dtype is not torch.bool else t(6, 37) > 0
    if dtype is torch.float16:
        x = t(6, 37).half()      # running sums up to ~15: eager rounds them (and `- 1`) to fp16

    def fn(x):
        return x.cumsum(-1) - 1, x.cumprod(1) if dtype is torch.float32 else x.cumsum(1, dtype=torch.float32)
    tol = 2e-2 if dtype is torch.float16 else 1e-3
    info = compile_and_check(fn, x, kernels=1, externs=0, rtol=tol, atol=tol)
    assert all(k.kind == "per" for k in info.kernels)


def test_a_scan_of_a_normalized_row_is_one_kernel_with_its_statistics():
    """Top-p's `softmax(x).cumsum(-1)` and a centered running sum: the row's reductions, then its
    scan, in one kernel that reads the row once."""
    def fn(x):
        return torch.softmax(x, -1).cumsum(-1), (x - x.mean(1, keepdim=True)).cumsum(1) * 2
    info = compile_and_check(fn, t(6, 300), kernels=2, externs=0, rtol=1e-4, atol=1e-4)
    assert all(k.source.count("tl.load(") == 1 for k in info.kernels), info.source


@pytest.mark.parametrize("shape, dim", [((5, 7, 9), 1), ((5, 7, 9), 0), ((3, 300), -1), ((40, 3), 0)])
def test_scans_along_each_dim(shape, dim):
    """Two scans of the same rows: one kernel."""
    def fn(x):
        return torch.cumsum(x * 2, dim), torch.cumprod(x.sigmoid() + 0.5, dim)
    compile_and_check(fn, t(*shape), kernels=1, externs=0, rtol=1e-4, atol=1e-4)


def test_a_scan_of_a_scan_is_one_kernel():
    """The second scan reads the first's result in registers (scheduler.fit)."""
    def fn(x):
        once = torch.cumsum(x, 1)
        return torch.cumsum(once * 2, 1) - once, once
    compile_and_check(fn, t(7, 45), kernels=1, externs=0, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_logcumsumexp_is_a_scan_with_infinities_and_nan_as_eager(dtype):
    """logcumsumexp: a scan combining with log(exp(a) + exp(b)) (the larger factored out), its
    producer and consumer in its kernel, along either dim; -inf (an empty prefix), +inf and NaN
    come out as eager's, fp16 scanned in fp32."""
    x = t(6, 37) * 3
    x[0, 3] = float("-inf")
    x[1, :5] = float("-inf")
    x[2, 7] = float("inf")
    x[3, 9] = float("nan")
    x = x.to(dtype)

    def fn(x):
        return torch.logcumsumexp(x * 2, -1) + 1, torch.logcumsumexp(x, 0)
    tol = 2e-2 if dtype is torch.float16 else 1e-4
    info = compile_and_check(fn, x, kernels=2, externs=0, rtol=tol, atol=tol, equal_nan=True)
    assert all("_logaddexp" in k.source for k in info.kernels)


def test_reverse_cumsum_of_a_flip_and_its_gradient():
    """A suffix sum (`x.flip(d).cumsum(d).flip(d)`, what the gradient of cumsum computes): the
    scan reads its row backwards, the flip of its result is a second kernel (a lane would need
    another lane's value); captured and trained, both directions run as kernels."""
    import dynamo_lite as dl

    def fn(x):
        return x.flip(1).cumsum(1).flip(1) * 3
    compile_and_check(fn, t(4, 33), kernels=2, externs=0)
    x = t(4, 33).requires_grad_()
    x2 = x.detach().clone().requires_grad_()

    def step(x):
        return (x.exp().cumsum(1) ** 2).sum()
    dl.capture(step, backend="triton")(x2).backward()
    step(x).backward()
    torch.testing.assert_close(x2.grad, x.grad, rtol=1e-4, atol=1e-4)


def test_scans_of_rows_too_long_to_hold_stay_aten_calls(monkeypatch):
    """Rows longer than the kernel holds (along memory: persistent_max_inner; across it: 64)
    run eager's cumsum; a scan along a size-1 dim is a copy."""
    from dynamo_lite.backends.triton import settings
    monkeypatch.setattr(settings, "persistent_max_inner", 256)

    def fn(x, y, z):
        return x.cumsum(1), y.cumsum(0), z.cumsum(1) + 1
    info = compile_and_check(fn, t(3, 300), t(100, 3), t(4, 1, 5), externs=2)
    assert info.extern_ops == {"aten.cumsum.default": 2}, info.extern_ops
