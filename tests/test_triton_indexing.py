"""Indexing and scatter ops lowered by the triton backend, against eager: advanced indexing
(`x[i]`, `x[:, i]`, `x[i, j]`, `x[torch.arange(b), last]`), `gather` and `index_select` as gather
loads read where their result is used (float, integer and bool tensors), and `index_add`,
`scatter_add`, `scatter_reduce(..., "sum")` and `index_put(..., accumulate=True)` as kernels of
atomic adds with their values computed inside, `x[i] = v`, `x[i, j] = v`, `scatter` and
`index_copy` as kernels of stores.

Every test compiles a `torch.fx.symbolic_trace` graph with `triton_backend`, compares outputs and
mutated inputs with eager (`compile_and_check`) and asserts the op was lowered (no aten call left,
the kernel count where it fuses with its neighbours); what stays an aten call (fp16 destinations,
float scatters under deterministic algorithms, index_put along dims that are not one in memory)
is asserted as well. `F.interpolate`'s nearest and linear modes are gathers at eager's source
positions. On a machine without a GPU the kernels run under Triton's interpreter (TRITON_INTERPRET=1, set by triton_env).
"""
import pytest
import torch.fx
import torch
import torch.nn.functional as F

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

from test_triton_kernels import compile_and_check, t      # noqa: E402
from dynamo_lite.backends.triton import triton_backend   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, on masked-off lanes


def ints(low, high, *shape):
    return torch.randint(low, high, shape, device=DEVICE)


# -- advanced indexing and index_select: gather loads ---------------------------------------------

@pytest.mark.parametrize("case", ["rows", "middle", "adjacent", "apart", "last_two", "pairs"])
def test_advanced_indexing_is_a_gather_inside_the_kernel_using_it(case):
    """Python's placement rule: the index tensors broadcast together; their shape takes the place
    of the indexed dims where those are adjacent (`x[:, i, j]`), and comes first where a slice
    separates them (`x[i, :, j]`). Negative indices count from the end. The gathered value is
    computed (exp) and used (+1) in the same kernel."""
    torch.manual_seed(0)
    fns = {
        "rows": lambda x, i, j: (x.exp()[i] + 1),
        "middle": lambda x, i, j: (x.exp()[:, i] + 1),
        "adjacent": lambda x, i, j: (x.exp()[:, i, j] + 1),
        "apart": lambda x, i, j: (x.exp()[i, :, j] + 1),
        "last_two": lambda x, i, j: (x.exp()[..., i, j[:1]] + 1),
        "pairs": lambda x, i, j: (x.exp()[i[0], j] + 1),
    }
    x = t(6, 5, 4)
    i = ints(-4, 4, 3, 2)                  # in range of every dim, negative ones included
    j = ints(-4, 4, 2)
    compile_and_check(fns[case], x, i, j, kernels=1, externs=0)


def test_the_last_token_of_each_sequence_picked_by_arange_and_lengths():
    """`h[torch.arange(b), lengths - 1]` (a sequence classifier's pooled logits) over a transposed
    input: one gather of both positions, in the kernel that reads it."""
    def fn(h, lengths):
        hs = h.transpose(0, 1) * 2
        return hs[torch.arange(hs.shape[0], device=h.device), lengths - 1].softmax(-1)
    torch.manual_seed(0)
    compile_and_check(fn, t(7, 3, 8), torch.tensor([7, 1, 4], device=DEVICE), kernels=1, externs=0)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_reads_the_rows_it_names(dim):
    def fn(x, i):
        return x.sigmoid().index_select(dim, i) * 3
    torch.manual_seed(0)
    compile_and_check(fn, t(5, 6, 4), torch.tensor([3, 0, 3, 1], device=DEVICE), kernels=1, externs=0)
    compile_and_check(fn, t(5, 6, 4), torch.tensor(2, device=DEVICE), kernels=1, externs=0)   # a 0-d index


INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


def int_tensor(dtype, *shape):
    return ints(0, 2 if dtype is torch.bool else 100, *shape).to(dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_and_bool_gathers_are_gathers_inside_the_kernel(dtype):
    """`x[i, j]` (negative indices), `x[:, j]`, `torch.gather` and `index_select` of integer and
    bool tensors: one kernel per result, computing the value gathered (a maximum) where it is
    read, eager's values exactly."""
    def advanced(x, y, i, j):
        return torch.maximum(x, y)[i, j], torch.maximum(x, y)[:, j]

    def gather(x, y, i, j):
        return torch.gather(torch.maximum(x, y), 1, i)

    def index_select(x, y, i, j):
        return torch.maximum(x, y).index_select(0, j)
    torch.manual_seed(0)
    x, y = int_tensor(dtype, 6, 5), int_tensor(dtype, 6, 5)
    i, j = torch.tensor([[0, -1], [5, -6]], device=DEVICE), torch.tensor([4, -5], device=DEVICE)
    compile_and_check(advanced, x, y, i, j, kernels=2, externs=0, rtol=0, atol=0)
    compile_and_check(gather, x, y, ints(0, 5, 6, 3), j, kernels=1, externs=0, rtol=0, atol=0)
    compile_and_check(index_select, x, y, i, torch.tensor([5, 0, 2, 2], device=DEVICE), kernels=1, externs=0,
                      rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool])
def test_an_integer_gather_outside_the_tensor_reads_nothing_and_gives_zero(dtype):
    """Eager raises for an index outside the tensor; the kernel's load there is masked (never a
    read outside it) and the element is 0 (False): integers have no NaN, which floats give."""
    def fn(x, i, j, k):
        return x[i, j], torch.gather(x, 1, k), x.index_select(1, k[0])
    from dynamo_lite.backends.triton import triton_backend
    x = int_tensor(dtype, 4, 3) if dtype is torch.bool else torch.arange(1, 13, device=DEVICE).to(dtype).view(4, 3)
    i, j = torch.tensor([0, 3, -4], device=DEVICE), torch.tensor([2, -1, 1], device=DEVICE)
    k = torch.tensor([[2, 0], [1, 1], [0, 2], [2, 2]], device=DEVICE)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x, i, j, k])
    assert not sum(compiled.compiled_graph.extern_ops.values())
    for g, e in zip(compiled(x, i, j, k), fn(x, i, j, k)):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    # outside: i, then j (at 1 * 3 + 3, an offset inside x); inside: both negative
    i, j = torch.tensor([4, 1, -4], device=DEVICE), torch.tensor([0, 3, -3], device=DEVICE)
    k = torch.tensor([[3, 0], [1, -1], [0, 2], [2, 9]], device=DEVICE)
    if DEVICE == "cpu":         # (on CUDA eager's check is a device-side assert, which ends the process's CUDA)
        with pytest.raises(IndexError):
            x[i, j]
    zero = torch.zeros((), device=DEVICE, dtype=dtype)
    advanced, gathered, selected = compiled(x, i, j, k)
    torch.testing.assert_close(advanced, torch.stack([zero, zero, x[0, 0]]), rtol=0, atol=0)
    inside = (k >= 0) & (k < 3)                    # (gather does not count negative indices from the end)
    torch.testing.assert_close(gathered, torch.gather(x, 1, k.clamp(0, 2)).where(inside, zero), rtol=0, atol=0)
    torch.testing.assert_close(selected, torch.cat([zero.expand(4, 1), x[:, :1]], 1), rtol=0, atol=0)


# -- scatters: atomic adds ------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_adds_computed_values_along_a_dim(dim):
    """Repeated indices add up; the values (alpha * exp) are computed where they are added; the
    tensor added into is itself computed."""
    def fn(x, i, s):
        return (x * 2).index_add(dim, i, s.exp(), alpha=-0.5) + 1
    torch.manual_seed(0)
    x = t(4, 5, 6)
    sizes = list(x.shape)
    sizes[dim] = 7
    i = ints(0, x.shape[dim], 7)
    i[:3] = i[0]                                           # a repeat
    compile_and_check(fn, x, i, t(*sizes), externs=0)


def test_index_add_into_an_input_in_place_and_into_integers():
    """`x.index_add_` writes into the graph's input (compared with eager's mutated input); an
    integer index_add is exact (atomic integer adds give the same sum in any order)."""
    def in_place(x, i, s):
        x.index_add_(0, i, s)
        return x.sum()

    def integers(x, i, s):
        return x.index_add(0, i, s, alpha=3)
    torch.manual_seed(0)
    i = torch.tensor([2, 0, 2, 2, 4], device=DEVICE)
    compile_and_check(in_place, t(5, 3), i, t(5, 3), externs=0)
    for dtype in (torch.int32, torch.int64):
        compile_and_check(integers, ints(-9, 9, 5, 3).to(dtype), i, ints(-9, 9, 5, 3).to(dtype),
                          externs=0, rtol=0, atol=0)


def test_scatter_add_and_scatter_reduce_sum():
    """`scatter_add(dim, index, src)` with `src` larger than `index` (only index's positions are
    read) and `scatter_reduce(..., "sum")` including the tensor itself; "amax" stays aten's."""
    def scatter_add(x, i, s):
        return x.scatter_add(1, i, s.cos())

    def reduce_sum(x, i, s):
        return x.scatter_reduce(-1, i, s, "sum")

    def reduce_amax(x, i, s):
        return x.scatter_reduce(-1, i, s, "amax")
    torch.manual_seed(0)
    x, s = t(4, 6, 5), t(4, 7, 5)
    compile_and_check(scatter_add, x, ints(0, 6, 4, 3, 5), s, kernels=2, externs=0)
    compile_and_check(reduce_sum, x, ints(0, 5, 4, 6, 3), s, kernels=2, externs=0)
    compile_and_check(reduce_amax, x, ints(0, 5, 4, 6, 3), s, externs=1)


def test_index_put_accumulate_after_leading_slices_with_negative_indices():
    """`x.index_put_([None, i], v, accumulate=True)` (what `x[:, i] += v` is not: that one reads,
    adds and writes back) with negative indices and values broadcast over the indexed shape."""
    def fn(x, i, v):
        return torch.ops.aten.index_put(x + 1, [None, i], v * 2, True)
    torch.manual_seed(0)
    compile_and_check(fn, t(3, 6, 4), torch.tensor([[0, -1], [5, 0]], device=DEVICE), t(2, 1, 4),
                      kernels=2, externs=0)


def scatter_operand(dtype, *shape):
    return t(*shape, dtype=dtype) if dtype.is_floating_point else ints(-9, 9, *shape).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_index_put_accumulate_with_several_index_tensors_adds_repeats(dtype):
    """`x.index_put((i, j), v, accumulate=True)`: one atomic add per value at `i * size_j + j`,
    repeated pairs adding up (integers exactly), negative indices counting from the end; after a
    leading slice with index tensors that broadcast together ([3, 1] and [4]: pairs repeated
    across rows and columns); and in place into the graph's input."""
    def pairs(x, i, j, v):
        return torch.ops.aten.index_put(x + 1, [i, j], v * 2, True)

    def broadcast(x, i, j, v):
        return torch.ops.aten.index_put(x, [None, i, j], v, True)

    def in_place(x, i, j, v):
        x.index_put_((i, j), v, accumulate=True)
        return x * 2
    torch.manual_seed(0)
    exact = {} if dtype.is_floating_point else {"rtol": 0, "atol": 0}
    i, j = torch.tensor([0, -1, 0, 3, 0], device=DEVICE), torch.tensor([2, 4, 2, -5, -3], device=DEVICE)
    compile_and_check(pairs, scatter_operand(dtype, 4, 5), i, j, scatter_operand(dtype, 5), kernels=2, externs=0,
                      **exact)
    compile_and_check(in_place, scatter_operand(dtype, 4, 5), i, j, scatter_operand(dtype, 5), externs=0, **exact)
    rows, cols = torch.tensor([[0], [-4], [2]], device=DEVICE), torch.tensor([1, -4, 1, 3], device=DEVICE)
    compile_and_check(broadcast, scatter_operand(dtype, 3, 4, 5, 2), rows, cols, scatter_operand(dtype, 3, 4, 2),
                      kernels=2, externs=0, **exact)


def test_index_put_with_several_index_tensors_adds_nothing_for_an_index_outside():
    """Eager raises for an index outside; the kernel adds nothing there, each index checked
    against its own dim: (1, 5) would be at 1 * 5 + 5, an element of x (row 2)."""
    def fn(x, i, j, v):
        return torch.ops.aten.index_put(x, [i, j], v, True)
    from dynamo_lite.backends.triton import triton_backend
    x, v = ints(-9, 9, 4, 5), ints(1, 9, 3)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x, ints(0, 4, 3), ints(0, 5, 3), v])
    assert not sum(compiled.compiled_graph.extern_ops.values())
    i, j = torch.tensor([1, 4, 2], device=DEVICE), torch.tensor([5, 0, -1], device=DEVICE)
    expected = x.clone()
    expected[2, 4] += v[2]
    torch.testing.assert_close(compiled(x, i, j, v), expected, rtol=0, atol=0)


def test_index_put_along_dims_its_layout_does_not_merge_stays_an_aten_call():
    """Index tensors apart (`x[i, :, j]`: their shape comes first) and a destination whose
    indexed dims are not one dim in memory (a transposed tensor: index_put keeps its layout)
    stay aten calls, with eager's values."""
    def apart(x, i, j, v):
        return torch.ops.aten.index_put(x, [i, None, j], v, True)

    def transposed(x, i, j, v):
        return torch.ops.aten.index_put(x.t(), [i, j], v, True)
    torch.manual_seed(0)
    i, j = torch.tensor([0, -1, 0, 3, 0], device=DEVICE), torch.tensor([2, 4, 2, -5, -3], device=DEVICE)
    compile_and_check(apart, t(4, 3, 5), i, j, t(5, 3), externs=1)
    compile_and_check(transposed, t(5, 4), i, j, t(5), externs=1)


def test_setitem_and_add_into_positions_of_several_index_tensors_through_capture():
    """What a user writes, captured by dynamo_lite: `x[i, j] = v` and `x[:, i, j] += v` (a gather,
    an add and a store of index_put without accumulate) and `x.index_put_((i, j), v,
    accumulate=True)` into integers with repeats: kernels only, no aten call."""
    from test_triton_capture import check_capture

    def setitem(x, i, j, v):
        x[i, j] = v * 2
        return x + 1

    def add_into(x, i, j, v):
        x[:, i, j] += v
        return x

    def accumulate(x, i, j, v):
        x.index_put_((i, j), v, accumulate=True)
        return x.sum()
    torch.manual_seed(0)
    distinct_i, distinct_j = torch.tensor([0, 3, -1], device=DEVICE), torch.tensor([[4], [0]], device=DEVICE)
    for fn, args in [(setitem, (t(5, 5), distinct_i, distinct_j, t(2, 3))),
                     (add_into, (t(2, 4, 5), distinct_i, torch.tensor([4, 0, 1], device=DEVICE), t(3))),
                     (accumulate, (ints(-9, 9, 4, 5), torch.tensor([0, 3, 0, 0], device=DEVICE),
                                   torch.tensor([1, -1, 1, 1], device=DEVICE), ints(-9, 9, 4)))]:
        graphs = check_capture(fn, *args, rtol=0, atol=0) if fn is accumulate else check_capture(fn, *args)
        assert not any(g.extern_ops for g in graphs), (fn.__name__, [dict(g.extern_ops) for g in graphs])


def test_narrow_floats_and_deterministic_algorithms_keep_float_scatters_aten_calls():
    """An fp16 destination would round at every atomic add; a float scatter adds repeated positions
    in no fixed order, so with deterministic algorithms asked for it stays aten's; integer adds are
    exact in any order and stay kernels."""
    def fn(x, i, s):
        return x.index_add(0, i, s)

    def pairs(x, i, j, s):
        return torch.ops.aten.index_put(x, [i, j], s, True)
    i = torch.tensor([1, 1, 0], device=DEVICE)
    compile_and_check(fn, t(3, 4, dtype=torch.float16), i, t(3, 4, dtype=torch.float16), externs=1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        compile_and_check(fn, t(3, 4), i, t(3, 4), externs=1)
        compile_and_check(fn, ints(0, 9, 3, 4), i, ints(0, 9, 3, 4), externs=0, rtol=0, atol=0)
        j = torch.tensor([2, 2, -1], device=DEVICE)      # several index tensors: the same rule
        compile_and_check(pairs, t(3, 4), i, j, t(3), externs=1)
        compile_and_check(pairs, ints(0, 9, 3, 4), i, j, ints(0, 9, 3), externs=0, rtol=0, atol=0)
    finally:
        torch.use_deterministic_algorithms(False)


# -- scatters without accumulate: stores ----------------------------------------------------------

def test_setitem_index_put_scatter_and_index_copy_store_computed_values():
    """`y[i] = v` (index_put without accumulate, written back into the input), `scatter` of a
    tensor and of a scalar, `index_copy` along a middle dim, fp16 included: a kernel storing the
    tensor, then one storing the values (computed in it) at their positions. Positions are
    distinct here; repeated ones keep any one value (next test)."""
    def setitem(y, i, v):
        y.index_put_((i,), v.exp())                         # `y[i] = v.exp()` (fx cannot trace `=`)
        return y * 2

    def scatters(x, i, v):
        return x.scatter(1, i, v.sin()), x.scatter(1, i, 0.5)

    def index_copy(x, i, v):
        return x.index_copy(1, i[0, :3], v[:, :3].transpose(1, 2).transpose(1, 2) * 3)
    torch.manual_seed(0)
    rows = torch.tensor([4, 0, -2], device=DEVICE)
    compile_and_check(setitem, t(6, 5), rows, t(3, 5), externs=0)
    compile_and_check(setitem, t(6, 5, dtype=torch.float16), rows, t(3, 5, dtype=torch.float16), externs=0)
    distinct = torch.stack([torch.randperm(6, device=DEVICE)[:4] for _ in range(5)])     # [5, 4], no repeat in a row
    compile_and_check(scatters, t(5, 6), distinct, t(5, 4), externs=0)
    compile_and_check(index_copy, t(5, 6, 2), distinct, t(5, 4, 2), externs=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_index_put_with_several_index_tensors_stores_values_at_their_pairs(dtype):
    """`y.index_put_((i, j), v)` (`y[i, j] = v`) with index tensors broadcast together ([3] and
    [2, 1]: six distinct pairs, negative indices among them) and values computed where they are
    stored, written back into the input; after a leading slice; with deterministic algorithms
    asked for, an aten call (repeated pairs would keep any one value)."""
    def setitem(y, i, j, v):
        y.index_put_((i, j), v * 3)
        return y + 1

    def after_a_slice(y, i, j, v):
        return torch.ops.aten.index_put(y, [None, i, j], v * 3)
    torch.manual_seed(0)
    exact = {} if dtype.is_floating_point else {"rtol": 0, "atol": 0}
    i, j = torch.tensor([4, 0, -2], device=DEVICE), torch.tensor([[1], [-1]], device=DEVICE)
    compile_and_check(setitem, scatter_operand(dtype, 6, 5), i, j, scatter_operand(dtype, 2, 3), externs=0, **exact)
    compile_and_check(after_a_slice, scatter_operand(dtype, 2, 6, 5), i, j, scatter_operand(dtype, 3), kernels=2,
                      externs=0, **exact)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        compile_and_check(setitem, scatter_operand(dtype, 6, 5), i, j, scatter_operand(dtype, 2, 3), externs=1,
                          **exact)
    finally:
        torch.use_deterministic_algorithms(False)


def test_a_scatter_to_repeated_positions_keeps_one_of_their_values():
    """Of repeated positions any one value is kept (eager on CUDA keeps any one; the CPU the last):
    each element holds one of the values stored there, the others x's own."""
    def fn(x, i, v):
        return x.index_put((i,), v)
    torch.manual_seed(0)
    from dynamo_lite.backends.triton import triton_backend
    x, v = t(4, 3), t(5, 3)
    i = torch.tensor([1, 3, 1, 1, 0], device=DEVICE)
    compiled = triton_backend(torch.fx.symbolic_trace(fn), [x, i, v])
    got = compiled(x, i, v)
    assert not sum(compiled.compiled_graph.extern_ops.values())
    torch.testing.assert_close(got[[0, 2, 3]], torch.stack([v[4], x[2], v[1]]))
    assert any(torch.equal(got[1], v[k]) for k in (0, 2, 3))
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        compile_and_check(fn, x, i, v, externs=1)              # eager's: deterministic, the last
    finally:
        torch.use_deterministic_algorithms(False)


# -- upsampling (F.interpolate): gathers at eager's source positions --------------------------------


UPSAMPLE_SIZES = [dict(scale_factor=2), dict(scale_factor=1.5), dict(scale_factor=0.5),
                  dict(scale_factor=1.1),       # the output as large as the input: CPU eager reads i there
                  "odd"]


def _interpolate(mode, spatial, how, **extra):
    kw = dict(size=[7, 9, 5][:spatial]) if how == "odd" else how
    return lambda x: F.interpolate(x * 2, mode=mode, **kw, **extra) + 1


@pytest.mark.parametrize("how", UPSAMPLE_SIZES, ids=str)
@pytest.mark.parametrize("mode, spatial", [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 2),
                                           ("nearest-exact", 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_nearest_upsampling_is_eagers_to_the_bit_in_one_kernel(mode, spatial, how, dtype):
    """Nearest and nearest-exact read the positions eager's kernels compute (float32 scale,
    nearest-exact's product in double), fused with what computes their input and what reads
    their result: one kernel, no aten call."""
    torch.manual_seed(0)
    x = t(2, 3, *[6, 5, 4][:spatial], dtype=dtype)
    compile_and_check(_interpolate(mode, spatial, how), x, kernels=1, externs=0, rtol=0, atol=0)


@pytest.mark.parametrize("how", UPSAMPLE_SIZES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode, spatial", [("linear", 1), ("bilinear", 2), ("trilinear", 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_linear_upsampling_matches_eager_in_one_kernel(mode, spatial, how, align_corners, dtype):
    """Source positions as eager's (one FMA): values in [-1, 1] within about one float32 ulp (the
    blend's own contractions are not eager's), one bfloat16 ulp (CPU eager rounds after each
    dim), double's rounding for doubles."""
    torch.manual_seed(0)
    x = (torch.rand(2, 3, *[6, 5, 4][:spatial], device=DEVICE) - 0.5).to(dtype)
    tol = {torch.float32: dict(rtol=0, atol=2.5e-7), torch.bfloat16: dict(rtol=8e-3, atol=8e-3),
           torch.float64: dict(rtol=0, atol=1e-15)}[dtype]
    fn = (lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **(
        dict(size=[7, 9, 5][:spatial]) if how == "odd" else how)))
    compile_and_check(fn, x, kernels=1, externs=0, **tol)


def test_upsampling_keeps_the_input_layout_and_integer_images():
    """A channels-last input gives a channels-last result, as eager's; nearest reads uint8 images
    as they are."""
    x = t(2, 8, 6, 5).to(memory_format=torch.channels_last)
    for mode in ("nearest", "bilinear"):
        gm = torch.fx.symbolic_trace(lambda x: F.interpolate(x, scale_factor=2, mode=mode))
        got, want = triton_backend(gm, [x])(x), gm(x)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=0, atol=2.5e-6)
    image = torch.randint(0, 256, (1, 3, 5, 7), device=DEVICE, dtype=torch.uint8)
    compile_and_check(lambda x: F.interpolate(x, scale_factor=3), image, kernels=1, externs=0, rtol=0, atol=0)


def test_fpn_top_down_merge_is_one_kernel():
    """A feature pyramid's merge, `relu(lateral + upsample(top))`: the upsampled map is never
    written. Bicubic is decomposed: gathers too."""
    torch.manual_seed(0)
    compile_and_check(lambda a, b: torch.relu(a + F.interpolate(b, size=a.shape[-2:], mode="nearest")),
                      t(2, 8, 12, 10), t(2, 8, 6, 5), kernels=1, externs=0, rtol=0, atol=0)
    compile_and_check(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic") + 1, t(1, 2, 4, 4), externs=0,
                      kernels=1, rtol=1e-5, atol=1e-5)
