"""The layouts the triton backend chooses for cuBLAS and cuDNN (backends/triton/layouts.py): padded
rows for large misaligned matrices, matmuls run on padded M, K or N (zero-padded operands, the
result the leading part of a padded buffer), channels-last convolutions with weights copied by a
kernel on each call, and graph outputs that keep eager's strides.

On CUDA these are on by default; here the setting `extern_layouts = "always"` forces them on the
CPU under Triton's interpreter, with a small size threshold, so every test is differential (eager
vs `dl.capture(..., backend="triton")`: values, output and gradient strides, gradients) and also
checks from the wrapper's source that the layout was really chosen. GPU checks at the end."""
import copy
import math
import re

import pytest
import torch

from triton_env import DEVICE, INTERPRET, strict   # noqa: F401  (first: sets TRITON_INTERPRET; autouse fixture)

pytest.importorskip("triton")

import torch.nn as nn                                      # noqa: E402
import torch.nn.functional as F                            # noqa: E402

import dynamo_lite as dl                                   # noqa: E402
from dynamo_lite.backends.triton import backend as triton_backend_module   # noqa: E402
from dynamo_lite.backends.triton import graph_lowering, layouts, settings, wrapper  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or INTERPRET, reason="needs a CUDA GPU")


@pytest.fixture
def forced(monkeypatch):
    """Library layouts on for CPU tensors, padding for matrices of 1000 elements and more."""
    monkeypatch.setattr(settings, "extern_layouts", "always")
    monkeypatch.setattr(layouts, "PAD_MIN_NUMEL", 1000)


@pytest.fixture
def poisoned(monkeypatch):
    """Fresh float buffers come filled with NaN (the wrapper's `empty_strided`): a pad element
    read where it should not be shows in the values."""
    original = torch.empty_strided

    def empty_strided(*args, **kwargs):
        out = original(*args, **kwargs)
        return out.fill_(float("nan")) if out.is_floating_point() else out

    def allocator(device):
        return lambda sizes, strides, dtype: empty_strided(sizes, strides, dtype=dtype, device=device)
    monkeypatch.setattr(torch, "empty_strided", empty_strided)
    monkeypatch.setattr(wrapper, "ALLOCATOR", allocator)


def wrapper_source() -> str:
    graphs = list(triton_backend_module.recent)
    assert graphs and all(g.fallback_reason is None for g in graphs), [g.fallback_reason for g in graphs]
    return "\n".join(g.wrapper_source for g in graphs)


def assert_same(got, expected, rtol=1e-4, atol=1e-4):
    """Values, and each tensor's strides as eager gives them."""
    got, expected = (got, expected) if isinstance(got, (tuple, list)) else ((got,), (expected,))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)
        assert g.stride() == e.stride(), (g.stride(), e.stride())


def t(*sizes):
    return torch.randn(*sizes, device=DEVICE)


# -- the decisions -----------------------------------------------------------------------------

def test_padded_strides_round_the_row_pitch_up_to_16_bytes():
    assert layouts.padded_strides((4096, 50257), torch.bfloat16) == (50264, 1)
    assert layouts.padded_strides((4096, 50257), torch.float32) == (50260, 1)
    assert layouts.padded_strides((8, 512, 50257), torch.bfloat16) == (512 * 50264, 50264, 1)
    assert layouts.padded_strides((16, 768), torch.bfloat16) == (768, 1)


def test_which_matrices_are_padded():
    bf16 = torch.bfloat16
    assert layouts.needs_padding((4096, 50257), bf16)                   # GPT-2's logits
    assert not layouts.needs_padding((4096, 768), bf16)                 # aligned
    assert not layouts.needs_padding((16, 1001), bf16)                  # small
    assert not layouts.needs_padding((1 << 21, 1), bf16)                # a vector
    # the transposed LM head weight [768, 50257] with strides (1, 768): leading dimension 768
    assert not layouts.misaligned_matrix((768, 50257), (1, 768), 0, bf16)
    assert layouts.misaligned_matrix((50257, 4096), (1, 50257), 0, bf16)
    assert layouts.misaligned_matrix((4096, 768), (768, 1), 3, bf16)    # base address off by 6 bytes
    assert layouts.misaligned_matrix((4096, 768), (1536, 2), 0, bf16)   # no unit stride


def test_matmul_dims_padded_where_contiguous_and_misaligned():
    bf16 = torch.bfloat16
    # GPT-2's LM head forward: x [4096, 768] @ w.t() [768, 50257]: N is the result's contiguous dim
    assert layouts.matmul_padding((4096, 768), (768, 1), (768, 50257), (1, 768), bf16) == (4096, 768, 50264)
    # its input gradient: g [4096, 50257] @ w [50257, 768]: K is g's contiguous dim
    assert layouts.matmul_padding((4096, 50257), (50264, 1), (50257, 768), (768, 1), bf16) == (4096, 50264, 768)
    # its weight gradient: g.t() [50257, 4096] @ x [4096, 768]: M is contiguous in g.t()
    assert layouts.matmul_padding((50257, 4096), (1, 50264), (4096, 768), (768, 1), bf16) == (50264, 4096, 768)
    # aligned, small, or a matrix-vector product: nothing
    assert layouts.matmul_padding((4096, 768), (768, 1), (768, 3072), (3072, 1), bf16) == (4096, 768, 3072)
    assert layouts.matmul_padding((16, 64), (64, 1), (64, 1001), (1001, 1), bf16) == (16, 64, 1001)
    assert layouts.matmul_padding((1, 768), (768, 1), (768, 50257), (1, 768), bf16) == (1, 768, 50257)


def test_layouts_are_chosen_for_cuda_unless_the_setting_says_otherwise(monkeypatch):
    assert layouts.enabled(torch.device("cuda", 0)) and not layouts.enabled(torch.device("cpu"))
    monkeypatch.setattr(settings, "extern_layouts", "never")
    assert not layouts.enabled(torch.device("cuda", 0))
    monkeypatch.setattr(settings, "extern_layouts", "always")
    assert layouts.enabled(torch.device("cpu"))


# -- matmuls -----------------------------------------------------------------------------------

def test_lm_head_results_read_in_the_graph_are_computed_into_padded_rows(forced, poisoned):
    """Results that the graph's kernels read get padded rows; one that is returned as it is (a
    bias-free LM head) is computed in place with eager's strides (`layouts.row_class_mm`: fp32's
    4 row classes, 992 columns each, edges of 10), so no padded result is copied out. New
    buffers start as NaN: an element no class or edge wrote would show."""
    def fn(x, w, b):
        h = F.layer_norm(x, (64,))
        return F.linear(h, w), F.linear(x, w, b).relu(), F.linear(x, w).softmax(-1)
    args = t(2, 8, 64), t(1001, 64), t(1001)
    expected = fn(*args)
    assert_same(dl.capture(fn, backend="triton")(*args), expected)
    source = wrapper_source()
    assert source.count("(1004, 1)") == 2 and source.count("out=") == 3, source
    assert re.search(r"\(1, 64\)\), 4, 3, 992, 10, out=buf\d+\)", source), source
    assert layouts.row_class_plan(16, 1001, torch.float32) == (4, 3, 992, 10)


def test_returned_matmul_of_a_row_major_weight_is_padded_and_stored_once(forced, poisoned):
    """`x @ (w * 2)` with w [K, N] row-major: b is no column-major matrix, so the returned result
    takes the padded path, and b is stored once, with padded rows."""
    def fn(x, w):
        return x @ (w * 2)
    args = t(24, 32), t(32, 1001)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))
    source = wrapper_source()
    assert source.count("kernel") == 2 and "empty_strided((32, 1004), (1004, 1)" in source, source
    assert "empty_strided((24, 1004), (1004, 1)" in source, source


@pytest.mark.parametrize("n", [1001, 1002, 1003, 1005, 1009, 1011, 1014])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_returned_lm_head_with_misaligned_rows_of_every_residue(forced, poisoned, n, dtype):
    """Every residue of n mod 8 (bf16) or 4 (fp32), 24 or 48 rows: the row classes and edges
    cover the whole result, through a view to the [batch, seq, vocab] output; a row count no
    class size divides falls back to padding."""
    def fn(x, w):
        return F.linear(x, w)
    for rows in (24, 48, 20):
        x, w = t(rows // 4, 4, 32).to(dtype), t(n, 32).to(dtype)
        tol = 1e-4 if dtype == torch.float32 else 2e-2
        assert_same(dl.capture(fn, backend="triton")(x, w), fn(x, w), rtol=tol, atol=tol)
        plan = layouts.row_class_plan(rows, n, dtype)
        assert (plan is None) == (rows % (16 // dtype.itemsize // math.gcd(n % (16 // dtype.itemsize), 16 // dtype.itemsize)) != 0)
        source = wrapper_source()
        assert (f", {', '.join(map(str, plan))}, out=" in source) if plan else "out=" in source, source
        dl.reset()
        triton_backend_module.recent.clear()


def test_bmm_and_baddbmm_results_and_a_misaligned_input_operand(forced):
    def fn(a, b, c, x, w):
        return torch.bmm(a, b), torch.baddbmm(c, a, b, beta=0.5), (x @ w) * 2
    args = t(3, 40, 16), t(3, 16, 1001), t(3, 40, 1001), t(24, 1001), t(1001, 32)
    expected = fn(*args)
    assert_same(dl.capture(fn, backend="triton")(*args), expected)
    source = wrapper_source()
    assert "(40160, 1004, 1)" in source                   # bmm/baddbmm results, padded per batch
    assert source.count("empty_strided((3, 16, 1004)") == 1, source   # b padded once for both
    # K = 1001 is x's contiguous dim: x copied with zero pad columns, w with zero pad rows
    assert "empty_strided((24, 1004), (1004, 1)" in source and "empty_strided((1004, 32), (32, 1)" in source


def test_addmm_biases_are_padded_with_the_result(forced):
    def fn(x, w, c, r):
        return torch.addmm(c, x, w, beta=0.5, alpha=2), torch.addmm(r, x, w).relu(), torch.addmm(c[0], x, w)
    args = t(24, 64), t(64, 1001), t(24, 1001), t(1, 1001)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))
    source = wrapper_source()
    assert source.count("out=") == 3 and "empty_strided((24, 1004), (1004, 1)" in source, source
    assert "empty_strided((1, 1004), (1004, 1)" in source and "(1004,), (1,)" in source, source    # r, c[0]


def test_pad_columns_of_a_result_never_reach_a_row_reduction(forced, poisoned):
    """A row of x holding inf makes the result's pad column inf * 0 = NaN there; every row
    reduction must still see only the real columns (and new buffers start as NaN)."""
    def fn(x, w):
        y = x @ w
        return y.amax(-1), y.logsumexp(-1), y.sum(-1), y.argmax(-1), y[:, -1] * 2
    x, w = t(24, 64), t(64, 1001).abs() + 0.1
    x[3, 5] = float("inf")
    assert_same(dl.capture(fn, backend="triton")(x, w), fn(x, w))
    assert "empty_strided((24, 1004), (1004, 1)" in wrapper_source()


def test_graph_input_weight_copied_on_every_call(forced):
    """The padded copy of a weight is made by a kernel on each call: a write through `.data`
    shows."""
    model = nn.Linear(32, 1001, bias=False).to(DEVICE)
    x = t(24, 32)
    compiled = dl.capture(lambda x: model(x).relu(), backend="triton")
    returned = dl.capture(model, backend="triton")          # computed in place, w read as it is
    with torch.no_grad():
        assert_same(compiled(x), model(x).relu())
        assert_same(returned(x), model(x))
        model.weight.data.mul_(-2)
        assert_same(compiled(x), model(x).relu())
        assert_same(returned(x), model(x))
    assert "empty_strided((32, 1004), (1, 32)" in wrapper_source()     # w.t(), copied as rows of 32


def test_computed_transposed_weight_is_stored_as_its_rows_are_read(forced):
    """`x @ (w * 2).t()` (a weight cast under autocast looks so): the operand is stored
    column-major (straight from w's rows, no transposing kernel), padded where N needs it (the
    result is read by a kernel), as it is where the result is returned (computed in place)."""
    def fn(x, w, v):
        return (x @ (w * 2).t()) * 2, torch.relu(x @ (v - 1).t()), x @ (w * 3).t()
    args = t(24, 32), t(1001, 32), t(64, 32)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))
    source = wrapper_source()
    assert "empty_strided((32, 1004), (1, 32)" in source and "empty_strided((32, 64), (1, 32)" in source, source
    assert "empty_strided((32, 1001), (1, 32)" in source and ", 4, 3, 992, 10, out=" in source, source


def test_intermediate_read_by_two_matmuls_is_stored_once_with_padded_rows(forced):
    def fn(x, w, v):
        g = torch.tanh(x @ w.t()) * 3            # [24, 1001], and its transpose for the second mm
        return g @ v, g.t() @ x
    args = t(24, 32), t(1001, 32), t(1001, 16)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))
    source = wrapper_source()
    assert "(1004, 1)" in source and "(1, 1004)" in source, source


class TinyLM(nn.Module):
    def __init__(self, vocab=1021, d=32):
        super().__init__()
        self.emb, self.ln, self.fc = nn.Embedding(vocab, d), nn.LayerNorm(d), nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight                  # tied, as in GPT-2

    def forward(self, idx, targets):
        h = self.ln(self.emb(idx))
        logits = self.head(h + F.gelu(self.fc(h)))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)), logits


def test_training_lm_head_gradients_match_eager(forced, poisoned):
    """GPT-2's LM head in training, vocabulary 1021 (pads to 1024): the forward returns the
    logits, so they are computed in place with eager's strides (row classes, the tied weight read
    as it is); the backward pads K of the input gradient (the logits gradient is stored with zero
    pad columns and read as it is; the weight copied with zero rows) and M of the weight
    gradient."""
    torch.manual_seed(0)
    model = TinyLM().to(DEVICE)
    reference = copy.deepcopy(model)
    idx, targets = torch.randint(0, 1021, (2, 12), device=DEVICE), torch.randint(0, 1021, (2, 12), device=DEVICE)
    loss, logits = dl.capture(model, backend="triton")(idx, targets)
    loss.backward()
    ref_loss, ref_logits = reference(idx, targets)
    ref_loss.backward()
    assert_same((loss, logits), (ref_loss, ref_logits))
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
        assert p.grad.stride() == q.grad.stride(), name
    source = wrapper_source()
    assert ", 4, 3, 1012, 10, out=" in source and "empty_strided((32, 1024), (1, 32)" not in source, source
    assert "empty_strided((2, 12, 1024)" in source, source                  # the logits gradient
    assert "(24, 1024), (1024, 1))" in source and "(1024, 24), (1, 1024))" in source, source  # read padded
    assert "empty_strided((1024, 32), (32, 1)" in source, source            # weight rows, and its gradient


def test_training_logits_saved_for_the_backward_keep_padded_rows(forced, poisoned):
    """Logits that leave the forward's graph only as an activation saved for the backward (the
    square's gradient reads them; a layout of ours to choose) keep padded rows; the loss alone
    is returned."""
    torch.manual_seed(0)
    model = TinyLM().to(DEVICE)
    reference = copy.deepcopy(model)
    idx = torch.randint(0, 1021, (2, 12), device=DEVICE)

    def loss_of(m, i):
        logits = m.head(m.ln(m.emb(i)))
        return (logits * logits).mean()
    loss = dl.capture(loss_of, backend="triton")(model, idx)
    loss.backward()
    ref_loss = loss_of(reference, idx)
    ref_loss.backward()
    assert_same(loss, ref_loss)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    source = wrapper_source()
    assert ", 4, 3, 1012, 10, out=" not in source and "empty_strided((24, 1024), (1024, 1)" in source, source


# -- convolutions ------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.blocks, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(Block(), Block()), nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.blocks(F.relu(self.stem(x))).mean((2, 3)))


def test_convolutions_run_channels_last_end_to_end(forced):
    torch.manual_seed(0)
    model = ConvNet().to(DEVICE).eval()
    x = t(2, 3, 8, 8)
    with torch.no_grad():
        assert_same(dl.capture(model, backend="triton")(x), model(x))
    source = wrapper_source()
    # every activation our kernels store between convolutions is NHWC: nothing is left for cuDNN to convert
    assert "(2, 8, 8, 8), (512, 64, 8, 1)" not in source and "(2, 8, 8, 8), (512, 1, 64, 8)" in source, source
    # the conv weights (graph inputs) are copied channels-last by a kernel, not by cuDNN
    assert "(8, 8, 3, 3), (72, 1, 24, 8)" in source, source


@pytest.mark.parametrize("case", ["conv1d", "conv2d grouped strided", "conv2d returned", "conv_transpose2d", "conv3d"])
@pytest.mark.parametrize("layout", ["forced", "default"])
def test_a_convolutions_bias_is_added_by_the_kernel_that_reads_its_result(case, layout, request):
    """The library is called without the bias; the bias add fuses into the kernel after it (or,
    for a result returned as it is, is that result's own kernel). Values and strides are eager's."""
    if layout == "forced":
        request.getfixturevalue("forced")
    g = torch.Generator(device="cpu").manual_seed(1)

    def r(*sizes):
        return torch.randn(*sizes, generator=g).to(DEVICE)
    if case == "conv1d":
        def fn(x, w, b):
            return torch.relu(F.conv1d(x, w, b, padding=1)) * 2
        args = r(2, 4, 9), r(6, 4, 3), r(6)
    elif case == "conv2d grouped strided":
        def fn(x, w, b):
            return torch.sigmoid(F.conv2d(x, w, b, stride=2, padding=1, groups=2)) + x[:, 1:2, ::2, ::2]
        args = r(2, 4, 8, 8), r(6, 2, 3, 3), r(6)
    elif case == "conv2d returned":
        def fn(x, w, b):
            y = F.conv2d(x, w, b, padding=1)
            return y, y.mean((2, 3))
        args = r(2, 3, 6, 6), r(5, 3, 3, 3), r(5)
    elif case == "conv_transpose2d":
        def fn(x, w, b):
            return F.gelu(F.conv_transpose2d(x, w, b, stride=2, output_padding=1))
        args = r(2, 4, 5, 5), r(4, 3, 3, 3), r(3)
    else:
        def fn(x, w, b):
            return F.conv3d(x, w, b).abs().sum((2, 3, 4))
        args = r(2, 3, 5, 5, 5), r(4, 3, 2, 2, 2), r(4)
    triton_backend_module.recent.clear()
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))
    source = wrapper_source()
    graph = triton_backend_module.recent[-1]
    assert dict(graph.extern_ops) == {"aten.convolution.default": 1}, graph.extern_ops
    (call,) = re.findall(r"= aten_op\d+\((.*)\)", source)
    assert call.split(", ")[2] == "None", source                            # no bias passed to the library
    assert graph.kernel_count >= 1 and "arg2" in source.split("kernel", 1)[1], source


def test_a_conv_output_returned_from_the_graph_has_eager_strides(forced):
    def fn(x, w):
        y = F.conv2d(x, w, padding=1)
        return y, torch.relu(y) + 1
    args = t(2, 4, 6, 6), t(8, 4, 3, 3)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))


def test_every_way_of_changing_a_weight_is_seen(forced):
    """The channels-last copy of a weight is made on each call: a write through `.data` (which no
    version counter sees), an in-place write, load_state_dict and a new Parameter all show."""
    torch.manual_seed(0)
    model = ConvNet().to(DEVICE).eval()
    x = t(2, 3, 8, 8)
    compiled = dl.capture(model, backend="triton")
    weight = model.blocks[0].conv1.weight
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        weight.data.mul_(-1)
        assert_same(compiled(x), model(x))
        weight.mul_(0.5)
        assert_same(compiled(x), model(x))
        model.load_state_dict({k: v * 0.5 for k, v in model.state_dict().items()})
        assert_same(compiled(x), model(x))
        model.blocks[1].conv2.weight = nn.Parameter(t(8, 8, 3, 3))      # another tensor
        assert_same(compiled(x), model(x))


@pytest.fixture
def exact_fp32(monkeypatch):
    """fp32 convolutions and matmuls in full fp32 on CUDA. cuDNN computes fp32 convolutions in
    TF32 by default (10-bit mantissas), and NHWC and NCHW algorithms round differently, so a
    weight gradient summed over the batch differs from eager's by ~1e-3 relative in either layout;
    in fp32 they agree to rounding, which is what would show a layout mistake."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)


def train_and_compare(x, steps: int = 1):
    """ConvNet's forward and backward `steps` times on ours and on eager: outputs, gradients
    (values and strides) and running statistics as eager's."""
    torch.manual_seed(0)
    model = ConvNet().to(DEVICE).train()
    reference = copy.deepcopy(model)
    compiled = dl.capture(model, backend="triton")
    for _ in range(steps):
        out = compiled(x)
        out.sum().backward()
        expected = reference(x)
        expected.sum().backward()
        assert_same(out, expected)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")
        assert p.grad.stride() == q.grad.stride(), name
    for a, b in zip(model.buffers(), reference.buffers()):                # running statistics
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_convolution_training_gradients_match_eager(forced, exact_fp32):
    train_and_compare(t(2, 3, 8, 8))


@pytest.mark.parametrize("size", [8, 7])
def test_training_saves_activations_in_the_convolutions_layout(forced, exact_fp32, monkeypatch, size):
    """The activations the forward saves for the backward stay channels-last (no second, NCHW
    copy is written), and the backward is compiled for them as they come: gradients and running
    statistics as eager's, and no NCHW activation in either graph. With 7x7 images (rows of 28
    bytes, more than PAD_MIN_NUMEL elements) they are not stored as NCHW with padded rows either."""
    # values with several readers are stored where they are made (ResNet-50's block outputs,
    # a training batch norm + add + relu, are big enough for that)
    monkeypatch.setattr(graph_lowering, "REUSE_REALIZE_OPS", 0)
    batch = 2 if size == 8 else 4
    triton_backend_module.recent.clear()
    train_and_compare(t(batch, 3, size, size), steps=2)
    forward = next(g for g in triton_backend_module.recent if g.output_strides)
    activation = (batch, 8, size, size)
    assert layouts.channels_last_strides(activation) in forward.output_strides    # saved channels-last
    source = wrapper_source()
    stored = re.findall(re.escape(f"empty_strided({activation}, ") + r"(\([\d, ]*\))", source)
    assert stored and set(stored) == {str(layouts.channels_last_strides(activation))}, stored
    if size == 7:
        assert f"empty_strided({activation[:3] + (8,)}, " not in source, source    # no padded rows


def test_an_extern_result_in_an_equivalent_layout_is_not_copied():
    """A 1x1 weight's gradient with channels-last strides is the same memory order as the
    contiguous one the meta promised: a view, no copy; a really different layout is copied."""
    from dynamo_lite.backends.triton.wrapper import _fix_layout
    g = torch.randn(16, 8, device=DEVICE).view(16, 8, 1, 1).as_strided((16, 8, 1, 1), (8, 1, 8, 8))
    fixed = _fix_layout(g, (16, 8, 1, 1), (8, 1, 1, 1))
    assert fixed.data_ptr() == g.data_ptr() and fixed.stride() == (8, 1, 1, 1) and torch.equal(fixed, g)
    x = torch.randn(2, 3, 4, 5, device=DEVICE).to(memory_format=torch.channels_last)
    copied = _fix_layout(x, (2, 3, 4, 5), (60, 20, 5, 1))
    assert copied.data_ptr() != x.data_ptr() and copied.stride() == (60, 20, 5, 1) and torch.equal(copied, x)


def test_attention_after_a_patch_convolution_stays_contiguous(forced):
    """4-d values not computed from a convolution's output (attention heads) keep row-major
    layouts in a graph with convolutions."""
    def fn(img, w, wq):
        patches = F.conv2d(img, w, stride=4).flatten(2).transpose(1, 2)        # [B, 16, 32]
        q = (patches @ wq).view(2, 16, 4, 8).transpose(1, 2)                   # [B, 4, 16, 8]
        return F.scaled_dot_product_attention(q, q, q) * 2, torch.relu(q) + 1
    args = t(2, 3, 16, 16), t(32, 3, 4, 4), t(32, 32)
    assert_same(dl.capture(fn, backend="triton")(*args), fn(*args))


# -- on the GPU (the default settings) -----------------------------------------------------------

@needs_gpu
def test_gpu_lm_head_is_padded_or_computed_in_place_and_matches_eager():
    """[4096, 768] x [768, 50257] in bf16: read by a kernel, run on N = 50264 (cuBLAS's aligned
    kernels), the weight copied with 50264 rows each call, the result the leading 50257 columns;
    returned, computed in place by 8 row classes of 50208 columns and edges of 52."""
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16) * 0.05

    def read(x, w):
        return F.linear(x, w).float().log_softmax(-1)

    def returned(x, w):
        return F.linear(x, w)
    for fn, expected in ((read, ("empty_strided((768, 50264), (1, 768)", "empty_strided((4096, 50264), (50264, 1)")),
                         (returned, (", 8, 7, 50208, 52, out=", "empty_strided((4096, 50257), (50257, 1)"))):
        dl.reset()
        triton_backend_module.recent.clear()
        compiled = dl.capture(fn, backend="triton")
        assert_same(compiled(x, w), fn(x, w), rtol=2e-2, atol=2e-2)
        source = wrapper_source()
        assert all(e in source for e in expected), source
        with torch.no_grad():
            w.data.mul_(-1)
        assert_same(compiled(x, w), fn(x, w), rtol=2e-2, atol=2e-2)


@needs_gpu
def test_gpu_conv_weights_channels_last_and_seen_when_changed():
    torch.manual_seed(0)
    model = ConvNet().cuda().eval().to(torch.bfloat16)
    x = torch.randn(4, 3, 32, 32, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        compiled = dl.capture(model, backend="triton")
        assert_same(compiled(x), model(x), rtol=2e-2, atol=2e-2)
        model.stem.weight.mul_(2)
        assert_same(compiled(x), model(x), rtol=2e-2, atol=2e-2)
        model.stem.weight.data.mul_(-1)
        assert_same(compiled(x), model(x), rtol=2e-2, atol=2e-2)
