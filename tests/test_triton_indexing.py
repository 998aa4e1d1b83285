"""Indexing and scatter ops lowered by the triton backend, against eager: advanced indexing
(`x[i]`, `x[:, i]`, `x[i, j]`, `x[torch.arange(b), last]`) and `index_select` as gather loads read
where their result is used, and `index_add`, `scatter_add`, `scatter_reduce(..., "sum")` and
`index_put(..., accumulate=True)` as kernels of atomic adds with their values computed inside,
`x[i] = v`, `scatter` and `index_copy` as kernels of stores.

Every test compiles a `torch.fx.symbolic_trace` graph with `triton_backend`, compares outputs and
mutated inputs with eager (`compile_and_check`) and asserts the op was lowered (no aten call left,
the kernel count where it fuses with its neighbours); what stays an aten call (fp16 destinations,
float scatters under deterministic algorithms, boolean masks) is asserted as well. On a machine
without a GPU the kernels run under Triton's interpreter (TRITON_INTERPRET=1, set by triton_env).
"""
import pytest
import torch.fx
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse)

pytest.importorskip("triton")

from test_triton_kernels import compile_and_check, t      # noqa: E402

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


def test_boolean_masks_and_integer_tables_stay_aten_calls():
    """`x[mask]` has a size that depends on the data; an integer table has no NaN to give an index
    outside it: both stay aten's."""
    def table(x, i):
        return x[i] + 1
    compile_and_check(table, ints(0, 9, 5, 3), ints(0, 5, 4), externs=1)


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


def test_narrow_floats_and_deterministic_algorithms_keep_float_scatters_aten_calls():
    """An fp16 destination would round at every atomic add; a float scatter adds repeated positions
    in no fixed order, so with deterministic algorithms asked for it stays aten's; integer adds are
    exact in any order and stay kernels."""
    def fn(x, i, s):
        return x.index_add(0, i, s)
    i = torch.tensor([1, 1, 0], device=DEVICE)
    compile_and_check(fn, t(3, 4, dtype=torch.float16), i, t(3, 4, dtype=torch.float16), externs=1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        compile_and_check(fn, t(3, 4), i, t(3, 4), externs=1)
        compile_and_check(fn, ints(0, 9, 3, 4), i, ints(0, 9, 3, 4), externs=0, rtol=0, atol=0)
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
