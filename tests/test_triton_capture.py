"""The `triton` backend end to end: `dynamo_lite.capture(fn, backend="triton")` and
`torch.compile(fn, backend=dynamo_lite.backends.triton_backend)`, on functions and small models,
with in-place ops, grad-mode switches, symbolic sizes and the eager fallbacks. Runs under
Triton's interpreter where there is no GPU."""
import copy

import pytest
import torch

from triton_env import DEVICE, strict   # noqa: F401  (first: sets TRITON_INTERPRET; an autouse fixture)

pytest.importorskip("triton")

import torch.nn as nn                                      # noqa: E402
import torch.nn.functional as F                            # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
import dynamo_lite.backends                                # noqa: E402
from dynamo_lite.backends.triton import backend as triton_backend_module   # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")


def compiled_graphs():
    return list(triton_backend_module.recent)


def check_capture(fn, *args, rtol=1e-4, atol=1e-4, runs_as_captured=None):
    """Eager vs dl.capture(fn, backend="triton") on copies of args (outputs and mutated inputs).
    `runs_as_captured`: the fallback reason expected (the graph is not compiled), else none."""
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    expected = fn(*eager_args)
    got = dl.capture(fn, backend="triton")(*args)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol)
    for a, e in zip(args, eager_args):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
    graphs = compiled_graphs()
    if runs_as_captured is not None:
        assert graphs and all(runs_as_captured in (g.fallback_reason or "") for g in graphs), \
            [g.fallback_reason for g in graphs]
        return graphs
    assert graphs and all(g.fallback_reason is None for g in graphs), [g.fallback_reason for g in graphs]
    return graphs


def test_backend_is_registered_and_exported():
    assert "triton" in dl.list_backends()
    assert dynamo_lite.backends.lookup_backend("triton") is dynamo_lite.backends.triton_backend


def test_capture_function():
    def fn(x, y):
        return torch.relu(x * y + 1).softmax(-1), (x - y).sum(0)
    graphs = check_capture(fn, torch.randn(8, 32, device=DEVICE), torch.randn(8, 32, device=DEVICE))
    assert graphs[0].kernel_count == 2


class Block(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def test_transformer_block_module():
    torch.manual_seed(0)
    block = Block().to(DEVICE).eval()
    x = torch.randn(2, 8, 32, device=DEVICE)
    with torch.no_grad():
        expected = block(x)
        captured = dl.capture(block, backend="triton")
        torch.testing.assert_close(captured(x), expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(captured(x), expected, rtol=1e-4, atol=1e-4)   # cached graph
    (graph,) = compiled_graphs()
    assert graph.fallback_reason is None
    # ln1, attention-output copy, residual + ln2, gelu, residual: matmuls and SDPA are extern
    assert graph.kernel_count <= 5
    assert graph.extern_ops.get("aten.addmm.default") == 4


def test_layer_norm_gelu_residual_module_is_one_kernel():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(64)

        def forward(self, x):
            return F.gelu(self.ln(x)) + x
    m = M().to(DEVICE).eval()
    with torch.no_grad():
        (graph,) = check_capture(m, torch.randn(4, 8, 64, device=DEVICE))
    assert graph.kernel_count == 1


def test_in_place_ops_setitem_and_grad_mode():
    def fn(x, y):
        x += y
        x[0] = 3.0
        with torch.no_grad():
            z = x * 2
        return z.softmax(-1)
    (graph,) = check_capture(fn, torch.randn(4, 8, device=DEVICE), torch.randn(8, device=DEVICE))
    assert graph.mutated_inputs == [0]
    assert torch.is_grad_enabled()


def test_view_mutation_reaches_the_input():
    def fn(x):
        v = x.view(2, 8, 4)
        v.mul_(2)
        return v.sum(-1) + x.view(2, 8, 4)[..., 0]
    (graph,) = check_capture(fn, torch.randn(16, 4, device=DEVICE))
    assert graph.mutated_inputs == [0]


def test_returning_the_mutated_input():
    def fn(x):
        x.add_(1)
        return x
    x = torch.randn(5, device=DEVICE)
    expected = x + 1
    out = dl.capture(fn, backend="triton")(x)
    assert out is x or out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, expected)


def test_in_place_write_into_overlapping_memory_raises_as_in_eager():
    """`expand` makes elements share memory; eager refuses to write into it, so must we."""
    def fn(x):
        y = (x * 2).expand(3, 4)
        y.add_(1)
        return y
    x = torch.randn(4, device=DEVICE)
    with pytest.raises(RuntimeError) as eager:
        fn(x.clone())
    with pytest.raises(RuntimeError) as captured:
        dl.capture(fn, backend="triton")(x)
    assert str(captured.value) == str(eager.value)
    assert any("overlaps" in (g.fallback_reason or "") for g in compiled_graphs())


def test_in_place_write_from_an_overlapping_view_raises_as_in_eager():
    def fn(x):
        v = (x * 2).sin()
        v *= v[1:]
        return v
    x = torch.randn(2, 4, device=DEVICE)
    with pytest.raises(RuntimeError) as eager:
        fn(x.clone())
    with pytest.raises(RuntimeError) as captured:
        dl.capture(fn, backend="triton")(x)
    assert str(captured.value) == str(eager.value)


def test_an_augmented_assignment_to_a_slice_is_lowered_and_a_partial_overlap_raises_as_in_eager():
    """`y[:, 1] += 1` ends in `y[:, 1] = <that same view>`, a write eager does (into itself):
    lowered, not run as captured. `y[1:] = y[:-1]` overlaps partly, which eager refuses."""
    def augmented(x):
        y = x.clone()
        y[:, 1] += 1
        y[0] *= 2
        return y.sum(0)

    def shifted(x):
        y = x.clone()
        y[1:] = y[:-1]
        return y
    x = torch.randn(3, 4, device=DEVICE)
    torch.testing.assert_close(dl.capture(augmented, backend="triton")(x), augmented(x))
    graphs = compiled_graphs()
    assert graphs and all(g.fallback_reason is None and g.kernel_count >= 1 for g in graphs)
    with pytest.raises(RuntimeError) as eager:
        shifted(x)
    with pytest.raises(RuntimeError) as captured:
        dl.capture(shifted, backend="triton")(x)
    assert str(captured.value) == str(eager.value)


def test_symbolic_sizes_specialize_per_shape():
    def fn(x):
        return (x * 2).softmax(-1).sum(0)
    f = dl.capture(fn, backend="triton", dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 8, device=DEVICE)
        torch.testing.assert_close(f(x), fn(x))
    graph = compiled_graphs()[0]
    assert len(graph.specializations) == 3


def test_a_graph_dynamic_in_a_cache_length_only_compiles_its_static_parts_once():
    """A decode step's shape: the new token's ops static, the cache's concatenation and what
    reads the cache symbolic. After the length became dynamic, the graph is split: its static
    parts are compiled once (no new kernels for later lengths), the rest runs as captured; values
    are eager's at every length."""
    torch.manual_seed(0)
    w = torch.randn(8, 8, device=DEVICE)

    def step(x, cache):
        h = torch.tanh(x @ w) * 2                           # static: (2, 1, 8)
        keys = torch.cat([cache, h], 1)                     # symbolic: (2, T + 1, 8)
        attended = torch.softmax(h @ keys.transpose(1, 2), -1) @ keys
        out = (attended * 3).relu() + h.sigmoid()           # static again
        return F.layer_norm(out, (8,)), keys

    f = dl.capture(step, backend="triton")
    x = torch.randn(2, 1, 8, device=DEVICE)
    kernels = []
    for length in (4, 5, 6, 7, 9):
        cache = torch.randn(2, length, 8, device=DEVICE)
        got, want = f(x, cache), step(x, cache)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        kernels.append(compiled_graphs()[-1].kernel_count)
    graph = compiled_graphs()[-1]
    assert graph.split_parts is not None and graph.split_parts[0] >= 2, graph.split_parts
    assert kernels[-1] == kernels[-3] > 0, kernels            # lengths 6, 7, 9: nothing new compiled
    assert not graph.specializations and graph.fallback_reason is None


def test_a_static_part_checks_only_inputs_a_symbolic_part_computed_and_no_module_call_is_left():
    """Each call of a static part checks the sizes and strides of the inputs aten calls made (a
    symbolic part's results), not those of the graph's inputs (guarded before the graph runs) or of
    another static part's results (our kernels' layouts): a decode step's parts take the weights."""
    from torch.fx.passes.split_module import split_module
    from dynamo_lite.backends.triton import dynamic_split

    def f(x, w):
        a = x @ w
        b = a.cumsum(0)
        return b + a + w.sum(), b
    gm = torch.fx.symbolic_trace(f)
    parts = {"matmul": 0, "cumsum": 1, "add": 2, "sum_1": 2, "add_1": 2}
    split = split_module(gm, gm, lambda n: parts[n.name], keep_original_order=True, keep_original_node_name=True)
    checked = dynamic_split.checked_inputs(split, ["submod_0", "submod_2"])
    (call,) = [n for n in split.graph.nodes if n.target == "submod_2"]
    assert [a.target if a.op == "call_module" else a.name for a in call.args] == ["submod_1", "submod_0", "w"]
    assert checked == {"submod_0": (), "submod_2": (0,)}
    # and no module call is left to make: static parts called through `forward`, symbolic ones inlined
    flat = dynamic_split.flatten(split, ["submod_0", "submod_2"])
    assert not [n for n in flat.graph.nodes if n.op == "call_module"], flat.code
    assert "cumsum" in flat.code and not hasattr(flat, "submod_1")
    x, w = torch.randn(4, 3), torch.randn(3, 3)
    for got, want in zip(flat(x, w), f(x, w)):
        torch.testing.assert_close(got, want)


def test_a_training_graph_recompiled_for_a_new_shape_keeps_its_gradients():
    """A graph that became dynamic (a smaller last batch) is compiled per concrete shape: a training
    graph's specializations go through AOTAutograd as the first compile does. (They were compiled
    as plain forwards: the loss had no grad_fn and backward() raised.)"""
    def fn(x, w, v):
        return F.cross_entropy(F.linear(torch.tanh(F.linear(x, w)), v), torch.arange(x.shape[0], device=x.device) % 4)
    torch.manual_seed(0)
    w, v = torch.randn(6, 5, device=DEVICE), torch.randn(4, 6, device=DEVICE)
    f = dl.capture(fn, backend="triton")
    for m in (16, 3, 9):
        x = torch.randn(m, 5, device=DEVICE)
        grads = []
        for run in (fn, f):
            args = [t.clone().requires_grad_() for t in (x, w, v)]
            loss = run(*args)
            loss.backward()
            grads.append((loss.detach(), [a.grad for a in args]))
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_torch_compile_with_our_backend():
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32)).to(DEVICE).eval()
    compiled = torch.compile(model, backend=dynamo_lite.backends.triton_backend)
    x = torch.randn(4, 16, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    graphs = compiled_graphs()
    assert graphs and graphs[-1].fallback_reason is None and graphs[-1].kernel_count == 1
    torch._dynamo.reset()


def test_training_compiles_forward_and_backward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).to(DEVICE)
    reference = copy.deepcopy(model)
    x = torch.randn(5, 8, device=DEVICE)
    out = dl.capture(model, backend="triton")(x)
    assert out.requires_grad
    (out * out).sum().backward()
    expected = reference(x)
    (expected * expected).sum().backward()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    graphs = compiled_graphs()            # AOTAutograd's forward graph, backward graph, and both
    assert len(graphs) == 3 and all(g.fallback_reason is None for g in graphs)
    forward, both, backward = graphs
    assert forward.kernel_count > 0 and backward.kernel_count > 0
    assert both.kernel_count == forward.kernel_count + backward.kernel_count


def test_wrapper_source_is_kept():
    def fn(x):
        return (x + 1).sum(-1)
    dl.capture(fn, backend="triton")(torch.randn(4, 4, device=DEVICE))
    graph = compiled_graphs()[-1]
    assert graph.wrapper_source.startswith("def call(")
    assert "@triton.jit" in graph.source and "tl.sum" in graph.source


def test_floats_that_change_between_calls_stay_correct():
    """The triton backend does not take Python floats as graph inputs: a float that changes stays
    a constant of each graph (one graph per value), and every result matches eager."""
    def step(x, scale, lr):
        return ((x * scale) + 1 - lr).sum() * lr

    captured = dl.capture(step, backend="triton")
    for i in range(4):
        x = torch.randn(8, device=DEVICE)
        torch.testing.assert_close(captured(x, 1.0 + i, 0.1 * (i + 1)), step(x, 1.0 + i, 0.1 * (i + 1)),
                                   rtol=1e-4, atol=1e-4)


def _checked_softmax(x, t):
    y = (x * 2).softmax(-1)
    torch._check_tensor_all(t >= 0)
    return y + t.float().unsqueeze(-1)


@pytest.mark.parametrize("sign", [1, -1])
def test_graph_checks_run_after_the_compiled_graph(sign):
    """torch._check_tensor_all in a graph: compiled (no fallback), the check run after the kernels,
    raising eager's exception exactly when eager does."""
    triton_backend_module.recent.clear()
    x, t = torch.randn(4, 8, device=DEVICE), sign * torch.arange(1, 5, device=DEVICE)
    if sign > 0:
        check_capture(_checked_softmax, x, t)
        return
    with pytest.raises(RuntimeError) as eager:
        _checked_softmax(x, t)
    with pytest.raises(RuntimeError) as ours:
        dl.capture(_checked_softmax, backend="triton")(x, t)
    assert str(ours.value) == str(eager.value)
    assert all(g.fallback_reason is None for g in compiled_graphs())


def test_a_graph_with_a_check_that_writes_in_place_runs_as_captured():
    def fn(x, t):
        x.add_(1)
        torch._check_tensor_all(t >= 0)
        return x * 2
    triton_backend_module.recent.clear()
    check_capture(fn, torch.randn(4, device=DEVICE), torch.arange(4, device=DEVICE), runs_as_captured="a check on tensor values")


def _outputs_that_view_outputs(x):
    m = x > 0
    return m[0], m.unsqueeze(0), m, (x * 2)[1:]


def _write_through_the_base(outs):
    outs[2][0, 0] = not outs[2][0, 0]                # through the base: both views see it
    assert outs[0][0] == outs[2][0, 0] and outs[1][0, 0, 0] == outs[2][0, 0]


def _outputs_viewing_a_tensor_not_returned(x):
    t = (x.sum() * 0 + 0.25).unsqueeze(0)     # a view of the 0-d sum: t is no base of its own
    w = t[0]
    w -= w.square()
    return t, x * 2, w, t.expand(3)[1:]


def _write_through_the_widest(outs):
    assert outs[2].untyped_storage().data_ptr() == outs[3].untyped_storage().data_ptr() == \
        outs[0].untyped_storage().data_ptr()
    outs[0][0] = 7.0
    assert outs[2] == 7.0 and outs[3][1] == 7.0


def _a_view_that_changes_nothing(x):
    a = x[0] + 1
    w = a.view(-1)
    b = a.mul_(2)
    return a, w, b


def _other_objects_but_the_in_place_result(outs):
    a, w, b = outs
    assert w is not a and b is a and w.data_ptr() == a.data_ptr()


def _a_reshaped_reduction(x):
    m = x.min()
    return m.flatten(), m, m.reshape(1, 1)


def _the_reduction_shared_in_its_shapes(outs):
    flat, m, square = outs
    assert flat.shape == (1,) and m.shape == () and square.shape == (1, 1)
    assert flat.data_ptr() == m.data_ptr() == square.data_ptr()
    m.fill_(5.0)
    assert flat.tolist() == [5.0] and square.tolist() == [[5.0]]


def _strided_views_of_a_tensor_not_returned(x):
    s = torch.sub(x, x * 2)[::2]
    return s, s[1], s[:, 1:3]


def _write_through_the_strided_view(outs):
    s, row, window = outs
    assert s.untyped_storage().data_ptr() == row.untyped_storage().data_ptr() == window.untyped_storage().data_ptr()
    s.mul_(3)
    torch.testing.assert_close(row, s[1])
    torch.testing.assert_close(window, s[:, 1:3])


@pytest.mark.parametrize("fn, shared", [(_outputs_that_view_outputs, _write_through_the_base),
                                        (_outputs_viewing_a_tensor_not_returned, _write_through_the_widest),
                                        (_strided_views_of_a_tensor_not_returned, _write_through_the_strided_view),
                                        (_a_view_that_changes_nothing, _other_objects_but_the_in_place_result),
                                        (_a_reshaped_reduction, _the_reduction_shared_in_its_shapes)])
def test_outputs_that_view_one_another_share_memory(fn, shared):
    """Eager returns `m[0]` and `m.unsqueeze(0)` as views of `m`: the compiled graph's results are
    remade as those views of its `m`, so writing into one shows in the others, as in eager. When
    every output sharing memory views an intermediate the graph does not return (`t =
    s.unsqueeze(0); return t, t[0]`: a fuzzed program), the one spanning the others' memory is
    the base; where none does (`s = (x - y)[::2]; return s, s[1]`, every other row: a fuzzed
    program), the intermediate itself is computed and returned, hidden, as their base. `w = a.view(-1)` of a 1-d `a`, both returned: the kernels make one buffer, eager two
    tensor objects sharing it (a fuzzed program: `w is a` held in ours); an in-place op's result,
    which eager returns as its input object itself, stays that object. `m.flatten()` beside a
    0-d `m`: the kernels return m's buffer for both, remade in the view's shape (a fuzzed
    program: it came out 0-d, so its `tolist()` was a float)."""
    triton_backend_module.recent.clear()
    x = torch.randn(3, 4, device=DEVICE)
    expected = fn(x)
    got = dl.capture(fn, backend="triton")(x)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    assert all(g.fallback_reason is None for g in compiled_graphs())
    for outs in (expected, got):
        shared(outs)


def test_hidden_base_keeps_the_output_structure_and_an_overlapping_call_runs_as_captured():
    """The hidden base of strided views (`_returning_also`) is not among the results: a list
    stays a list of the graph's own outputs, also when the graph writes an input and a call
    passes overlapping inputs (then the graph runs as captured)."""
    def fn(x, y):
        s = (x - y)[::2]
        y.add_(1)
        return [s, s[1]]
    compiled = dl.capture(fn, backend="triton")
    for make in (lambda: (torch.randn(3, 10, device=DEVICE), torch.randn(3, 10, device=DEVICE)),
                 lambda: (lambda b: (b[:3], b[1:4]))(torch.randn(4, 10, device=DEVICE))):
        x, y = make()
        ex, ey = x.clone(), y.clone()
        if x.data_ptr() != ex.data_ptr() and x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr():
            base = torch.empty(4, 10, device=DEVICE)
            base.copy_(torch.cat([x[:1], y]))
            ex, ey = base[:3], base[1:4]
        want, got = fn(ex, ey), compiled(x, y)
        assert type(got) is list and len(got) == 2
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        torch.testing.assert_close(y, ey)
        assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()


def test_an_output_that_views_another_is_not_computed_by_a_kernel_of_its_own():
    """BERT's last layer norm and its `h[:, 0]` (the pooler's first token), both returned: one
    kernel computes `h`, and `h[:, 0]` is that result's view (it was a second kernel recomputing
    the normalization for those rows), sharing its memory as in eager."""
    def fn(a, b, w, bias):
        h = F.layer_norm(a + b, (64,), w, bias, 1e-12)
        return h[:, 0], h, h[1:, 2:5].transpose(0, 1)
    triton_backend_module.recent.clear()
    args = [torch.randn(4, 8, 64, device=DEVICE) for _ in range(2)] + [torch.randn(64, device=DEVICE)] * 2
    expected = fn(*args)
    got = dl.capture(fn, backend="triton")(*args)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride() and g.storage_offset() == e.storage_offset()
    (graph,) = compiled_graphs()
    assert graph.fallback_reason is None and graph.kernel_count == 1, graph.source
    first, h, window = got
    h[0, 0, 0] = 123.0
    h[1, 2, 0] = -5.0
    assert first[0, 0] == 123.0 and window[0, 0, 0] == -5.0


def test_an_unused_matrix_product_of_mixed_dtypes_raises_as_eager():
    """Its result is dead code the backend would drop; the fake kernel takes the mixed dtypes
    that eager's refuses, so the op breaks the graph and raises there (a fuzzed program)."""
    lin = torch.nn.Linear(3, 3).to(DEVICE)

    def f(x):
        unused = lin(x.double())           # noqa: F841
        return x * 2
    x = torch.randn(2, 3, device=DEVICE)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as captured:
        dl.capture(f, backend="triton")(x)
    assert str(captured.value) == str(eager.value)


@pytest.mark.parametrize("op", ["softmax", "log_softmax_unused"])
def test_an_op_eager_refuses_for_an_integer_dtype_raises_as_eager(op):
    """`softmax` of an integer tensor: its fake kernel keeps the dtype, eager's kernel raises "not
    implemented for 'Long'"; the backend would compute it (or drop it, unused) in float math.
    The op breaks the graph and eager raises its own error there (a fuzzed program)."""
    def f(x, ids):
        if op == "softmax":
            return x * torch.softmax(ids, -1)
        unused = ids.log_softmax(-1)        # noqa: F841
        return x * 2
    x, ids = torch.randn(2, 3, device=DEVICE), torch.arange(6, device=DEVICE).reshape(2, 3)
    with pytest.raises(NotImplementedError) as eager:
        f(x, ids)
    with pytest.raises(NotImplementedError) as captured:
        dl.capture(f, backend="triton")(x, ids)
    assert str(captured.value) == str(eager.value)


def _in_place_cast_eager_refuses(x):
    n = torch.full((), 2)                 # int64
    n.mul_(1.5)                           # eager: "result type Float can't be cast to ... Long"
    return x + n


def test_an_in_place_op_eager_refuses_for_its_result_type_raises_as_in_eager():
    triton_backend_module.recent.clear()
    x = torch.randn(4, device=DEVICE)
    with pytest.raises(RuntimeError) as eager:
        _in_place_cast_eager_refuses(x)
    with pytest.raises(RuntimeError) as ours:
        dl.capture(_in_place_cast_eager_refuses, backend="triton")(x)
    assert str(ours.value) == str(eager.value)


def _integer_powers_of_a_constant():
    return torch.full((4,), 2, device=DEVICE).exp() ** 2, torch.full((3,), 1.5, device=DEVICE) ** 3


def test_an_integer_power_of_a_constant_is_that_power():
    """`exp(2) ** 2`, all constants: the product of the powers was the base itself (the lowering
    took a constant base for the empty product it starts from)."""
    triton_backend_module.recent.clear()
    expected = _integer_powers_of_a_constant()
    got = dl.capture(_integer_powers_of_a_constant, backend="triton")()
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)


class _TanhGelu(torch.autograd.Function):
    """BLOOM's GeLU style: ctx-taking forward, no setup_context (functorch's functionalize, which
    the backend retraces with, refuses to run such a Function)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(1.702 * x)        # deliberately not gelu's: shows whose backward ran


def test_autograd_function_under_no_grad_is_lowered_and_with_grad_keeps_its_backward():
    lin = nn.Linear(16, 16).to(DEVICE)

    def fn(x):
        return _TanhGelu.apply(lin(x)).sum(-1)

    x = torch.randn(4, 16, device=DEVICE)
    with torch.no_grad():
        graphs = check_capture(fn, x)
    assert graphs[0].kernel_count >= 1
    triton_backend_module.recent.clear()
    dl.reset()
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    fn(xe).sum().backward()
    dl.capture(fn, backend="triton")(xc).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-4, atol=1e-5)
    assert all(g.fallback_reason is None for g in compiled_graphs()), [g.fallback_reason for g in compiled_graphs()]


class _Counter:
    """A sliding-window KV cache's token counter (transformers' DynamicSlidingWindowLayer)."""

    def __init__(self):
        self.seen = 0


def test_an_int_counter_that_changes_is_a_graph_input_not_a_graph_per_value():
    """Ints seen changing become graph inputs with this backend too (floats stay constants): the
    counter's graph is captured once it changed, not again for every value, and its ops that do
    not read the counter are compiled."""
    w = torch.randn(8, 8, device=DEVICE)

    def step(x, counter):
        counter.seen += x.shape[0]
        h = torch.tanh(x @ w) * 2 + 1
        offset = max(counter.seen - 6, 0)
        return h.softmax(-1) * (offset + 1), counter.seen

    f = dl.capture(step, backend="triton")
    ours, theirs = _Counter(), _Counter()
    for _ in range(6):
        x = torch.randn(2, 8, device=DEVICE)
        got, want = f(x, ours), step(x, theirs)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and ours.seen == theirs.seen
    graphs = compiled_graphs()
    assert len(graphs) == 2, [g.split_parts for g in graphs]            # static first, then the int an input
    assert all(g.fallback_reason is None for g in graphs) and graphs[-1].kernel_count >= 1


def test_values_that_require_grad_where_the_inputs_do_not_say_so_are_eagers():
    """Found by fuzzing (seed 70500): a graph break inside `torch.no_grad()` resumes in a graph
    that starts with grad off and switches it on where the block ends; compiled for inference (grad
    off at its start), its linear's result lost requires_grad. A tensor made with
    `requires_grad=True` inside a graph did too. Such graphs run as captured: values,
    requires_grad and gradients are eager's."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3).to(DEVICE)

    def after_a_break_in_no_grad(x):
        with torch.no_grad():
            print("in the block")
            y = x * 2
        return lin(y).relu()

    def a_new_leaf(x):
        w = torch.ones(4, device=x.device, requires_grad=True)
        return (x * w).sum(), w

    x = torch.randn(2, 4, device=DEVICE)
    for fn in (after_a_break_in_no_grad, a_new_leaf):
        dl.reset()
        got, want = dl.capture(fn, backend="triton")(x), fn(x)
        got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
            assert g.requires_grad == w.requires_grad, fn.__name__
        if fn is after_a_break_in_no_grad:
            grads = torch.autograd.grad(got[0].sum(), lin.weight)[0], torch.autograd.grad(want[0].sum(), lin.weight)[0]
            torch.testing.assert_close(*grads)
        else:
            torch.testing.assert_close(torch.autograd.grad(got[0], got[1])[0], torch.autograd.grad(want[0], want[1])[0])
    # the optimizer's in-place updates of parameters (requires_grad, under no_grad) are no new values
    p = torch.randn(5, device=DEVICE, requires_grad=True)
    p.grad = torch.randn(5, device=DEVICE)
    opt = torch.optim.SGD([p], lr=0.1)
    dl.reset()
    dl.capture(lambda: opt.step(), backend="triton")()
    assert all(g.fallback_reason is None for g in triton_backend_module.recent if g.kernel_count)


def test_views_of_unbind_and_split_keep_eagers_restrictions_and_memory():
    """Found by fuzzing (seed 70500, program 63): `for row in x: row *= 2` after a linear breaks
    at the loop's head, and the graph before it returns `unbind`'s views. Compiled, they were views
    remade by AOTAutograd, which take the in-place write that eager refuses ("Output 0 of Unbind is
    a view and is being modified inplace"). Now the op runs again on its input after the call:
    the same error, and where eager allows the write (no grad) it lands in the viewed tensor."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4).to(DEVICE)

    def rows_scaled(x):
        x = F.gelu(lin(x))
        for row in x:
            row *= 2
        return x

    def halves(x):
        a, b = (x * 3).split(2, dim=1)
        print("between")
        c, d = (x + 1).chunk(2)
        e, f = torch.split(x - 1, split_size_or_sections=[1, 3], dim=1)
        return a, b, c.sum() + d.sum(), f, a

    x = torch.randn(3, 4, device=DEVICE)
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view") as eager:
        rows_scaled(x)
    dl.reset()
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view") as ours:
        dl.capture(rows_scaled, backend="triton")(x)
    assert str(ours.value) == str(eager.value)
    graphs = compiled_graphs()      # compiled and run, not failed and rerun eagerly
    assert graphs and all(g.fallback_reason is None for g in graphs), [g.fallback_reason for g in graphs]
    with torch.no_grad():                       # eager writes through the views: so do we
        dl.reset()
        torch.testing.assert_close(dl.capture(rows_scaled, backend="triton")(x), rows_scaled(x))
    # views returned across a break: eager's own views (their autograd nodes), sharing memory
    w = torch.randn(4, 4, device=DEVICE, requires_grad=True)
    dl.reset()
    got, want = dl.capture(halves, backend="triton")(w), halves(w)
    torch.testing.assert_close(got, want)
    for g, e in zip(got[:2], want[:2]):
        assert type(g.grad_fn).__name__ == type(e.grad_fn).__name__ == "SplitBackward0", (g.grad_fn, e.grad_fn)
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    assert type(got[3].grad_fn).__name__ == type(want[3].grad_fn).__name__ == "SplitWithSizesBackward0"
    assert got[4] is got[0]                     # one object twice, as eager returns it
    grads = [torch.autograd.grad(sum(t.sum() for t in out), w)[0] for out in (got, want)]
    torch.testing.assert_close(*grads)

    def split_without_grad(x):                  # made under no_grad: eager's views say so when written
        y = lin(x)
        with torch.no_grad():
            a, b = y.split(2, dim=1)
        print("between")
        return a, b

    dl.reset()
    errors = []
    for views in (dl.capture(split_without_grad, backend="triton")(x), split_without_grad(x)):
        with pytest.raises(RuntimeError, match="created in no_grad mode") as e:
            views[0].mul_(2)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_an_aten_graph_returning_rows_of_a_value_it_does_not_return():
    """AOTAutograd's forward of `a, b, c = gelu(linear(x)); return a, b, c` returns the three rows
    of `unbind` and not the tensor they view, and an aten graph's values do not say which are
    views: the first row was taken for the base of the others, whose memory it does not hold
    (the first call failed: setStorage out of bounds). The rows come from the viewed value now."""
    from torch.fx.experimental.proxy_tensor import make_fx
    x = torch.randn(3, 4, device=DEVICE)
    gm = make_fx(lambda y: tuple(torch.unbind(y * 2)), tracing_mode="fake")(x)
    compiled = triton_backend_module.compile_graph(gm, [x])
    got, want = compiled(x), torch.unbind(x * 2)
    torch.testing.assert_close(got, want)
    assert compiled.compiled_graph.fallback_reason is None and compiled.compiled_graph.kernel_count == 1
    assert len({t.untyped_storage().data_ptr() for t in got}) == 1      # one tensor's rows, as eager's
