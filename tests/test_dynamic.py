"""Dynamic shapes: automatic (static first, symbolic once a dim changes), dynamic=True/False,
0/1 specialization, shape-dependent branches and relations, all compared with eager."""
import dataclasses
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite as dl
from harness import CountingBackend


def attention(x, w):
    B, T, C = x.shape
    att = (x @ x.transpose(1, 2)) / math.sqrt(C)
    mask = torch.ones(T, T).tril().bool()
    att = att.masked_fill(~mask[:T, :T], float("-inf")).softmax(-1)
    return (att @ x).reshape(B, T * C) @ w[: T * C]


_OLD_TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13)


@pytest.mark.xfail(_OLD_TORCH, strict=False,
                   reason="torch < 2.13: the fake bmm of x @ x.transpose(1, 2) specializes the shared symbolic size "
                          "(results stay correct; one graph per length)")
def test_sequence_lengths_8_to_64_use_at_most_two_graphs():
    backend = CountingBackend()
    captured = dl.capture(attention, backend=backend)
    w = torch.randn(64 * 4, 3)
    for T in range(8, 65):
        x = torch.randn(2, T, 4)
        torch.testing.assert_close(captured(x, w), attention(x, w))
    assert backend.count == 2
    assert "sym_size" in backend.graphs[-1].code


def test_dynamic_true_captures_once_and_dynamic_false_every_size():
    def f(x):
        return F.gelu(x).sum(-1) * x.shape[-1]

    dyn, static = CountingBackend(), CountingBackend()
    captured_dyn = dl.capture(f, backend=dyn, dynamic=True)
    captured_static = dl.capture(lambda x: f(x), backend=static, dynamic=False)
    for n in (3, 5, 9, 17):
        x = torch.randn(2, n)
        torch.testing.assert_close(captured_dyn(x), f(x))
        torch.testing.assert_close(captured_static(x), f(x))
    assert dyn.count == 1 and static.count == 4


def test_composite_ops_take_symbolic_sizes():
    # interpolate's C++ composite kernel demands concrete sizes; with dynamic sizes the op runs through
    # the Python dispatcher (its decomposition), as in TorchDynamo, instead of breaking the graph
    def f(x, w):
        out = torch.cat([x, x], dim=1)
        gate = torch.sigmoid(F.conv2d(F.avg_pool2d(x, kernel_size=2, stride=2), w))
        return out[:, :4] * F.interpolate(gate, size=(out.shape[-2], out.shape[-1]), mode="nearest")

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend, fullgraph=True)
    w = torch.randn(4, 4, 1, 1)
    for n in (8, 12, 16, 20):
        x = torch.randn(2, 4, n, n)
        torch.testing.assert_close(captured(x, w), f(x, w))
    assert backend.count == 2


def test_sizes_zero_and_one_stay_specialized():
    def f(x):
        return x.sum(0) + x.shape[0]

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend, dynamic=True)
    for n in (1, 4, 7, 1, 0):
        x = torch.randn(n, 3)
        torch.testing.assert_close(captured(x), f(x))
    assert backend.count == 3     # size 1, symbolic (4 and 7), size 0


def shape_branch(x):
    if x.shape[0] > 2:
        return x[:2] * 10
    return x - 1


def test_branch_on_a_dynamic_size_is_guarded():
    backend = CountingBackend()
    captured = dl.capture(shape_branch, backend=backend)
    for n in (4, 2, 4, 3, 5, 2, 6):
        x = torch.randn(n, 2)
        torch.testing.assert_close(captured(x), shape_branch(x))
    assert backend.count <= 3


def test_relation_between_inputs_is_guarded():
    def f(a, b):
        return a @ b

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend, dynamic=True)
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    torch.testing.assert_close(captured(a, b), a @ b)
    a, b = torch.randn(6, 7), torch.randn(7, 2)
    torch.testing.assert_close(captured(a, b), a @ b)
    assert backend.count == 1
    with pytest.raises(RuntimeError):
        captured(torch.randn(3, 4), torch.randn(5, 2))   # mismatched: the same error as eager


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))).view(x.shape[0], -1).mean(-1)


def test_module_with_dynamic_batch_keeps_parameters_static():
    model = MLP()
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    for batch in range(2, 20):
        x = torch.randn(batch, 8)
        torch.testing.assert_close(captured(x), model(x))
    assert backend.count == 2


def test_invalid_dynamic_argument_is_a_clear_error():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        dl.capture(shape_branch, dynamic="yes")


# -- Python floats that change between calls ---------------------------------------------------

def _scaled_step(x, scale, lr):
    y = x * scale
    if scale > 0:                       # a branch on the float: specialized under a guard
        y = y + 1 - lr
    return y.sum() * lr, scale * 2


def test_a_float_that_changes_becomes_a_graph_input():
    backend = CountingBackend()
    captured = dl.capture(_scaled_step, backend=backend)
    for i in range(10):
        x, lr = torch.randn(4), 0.1 * (i + 1)
        got, expected = captured(x, 1.0 + i, lr), _scaled_step(x, 1.0 + i, lr)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1] and type(got[1]) is float
    assert backend.count == 2, "static first, then one graph taking the floats as inputs"
    placeholders = [n.name for n in backend.graphs[-1].graph.nodes if n.op == "placeholder"]
    assert placeholders == ["l_x", "l_scale", "l_lr"], placeholders


def test_a_branch_on_a_dynamic_float_is_guarded():
    backend = CountingBackend()
    captured = dl.capture(_scaled_step, backend=backend)
    for scale in (1.0, 2.0, 3.0, -1.0, -2.0, 4.0):
        x = torch.randn(4)
        got, expected = captured(x, scale, 0.5), _scaled_step(x, scale, 0.5)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert backend.count == 3, "static, dynamic with scale > 0, dynamic with scale <= 0"


def test_a_loss_scale_read_with_item_and_fed_back_in():
    """The issue's case: a scale read with .item() each step and passed back in."""
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)

    def step(x, scale):
        loss = (x @ w).pow(2).mean() * scale
        return loss, loss.detach() / (1.0 + loss.detach())

    backend = CountingBackend()
    captured = dl.capture(step, backend=backend)
    scale_c = scale_e = 2.0 ** 8
    for _ in range(10):
        x = torch.randn(3, 4)
        (loss_c, ratio_c), (loss_e, ratio_e) = captured(x, scale_c), step(x, scale_e)
        torch.testing.assert_close(loss_c, loss_e)
        scale_c, scale_e = scale_c * (1.0 + ratio_c.item()), scale_e * (1.0 + ratio_e.item())
    assert scale_c == pytest.approx(scale_e)
    assert backend.count <= 3


def test_floats_in_a_dict_and_an_int_where_a_float_was():
    def f(x, group):
        return x * group["lr"] + group["momentum"]

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    for lr in (0.1, 0.2, 0.3, 0.4):
        group = {"lr": lr, "momentum": 0.9}
        torch.testing.assert_close(captured(torch.ones(3), group), f(torch.ones(3), group))
    assert backend.count == 2
    ints = torch.arange(3)
    group = {"lr": 2, "momentum": 0.9}          # an int: int tensor * int stays an int tensor in eager
    torch.testing.assert_close(captured(ints, group), f(ints, group))
    assert captured(ints, group).dtype == f(ints, group).dtype


def test_dynamic_false_keeps_floats_constant():
    backend = CountingBackend()
    captured = dl.capture(_scaled_step, backend=backend, dynamic=False)
    for scale in (1.0, 2.0, 3.0):
        x = torch.randn(4)
        torch.testing.assert_close(captured(x, scale, 0.5)[0], _scaled_step(x, scale, 0.5)[0])
    assert backend.count == 3


def test_a_backend_that_does_not_take_floats_keeps_them_constant():
    seen = []

    def no_floats(gm, example_inputs):
        seen.append([type(v).__name__ for v in example_inputs])
        return gm.forward
    no_floats.accepts_scalar_inputs = False

    captured = dl.capture(_scaled_step, backend=no_floats)
    for i in range(4):
        x = torch.randn(4)
        torch.testing.assert_close(captured(x, 1.0 + i, 0.5)[0], _scaled_step(x, 1.0 + i, 0.5)[0])
    assert seen == [["Tensor"]] * 4, seen


# -- Python ints that change between calls -----------------------------------------------------

def _int_uses(x, n, items):
    y = x * n + n // 2                  # arithmetic stays in the graph (SymInt)
    picked = items[n % len(items)]      # indexing a list needs the value: specialized under a guard
    return y, picked, n + 1


def test_an_int_that_changes_becomes_a_graph_input():
    backend = CountingBackend()
    captured = dl.capture(lambda x, n: (x * n + n // 2, n * 3), backend=backend)
    for n in range(2, 12):
        x = torch.randn(4)
        got = captured(x, n)
        torch.testing.assert_close(got[0], x * n + n // 2)
        assert got[1] == n * 3 and type(got[1]) is int
    assert backend.count == 2, "static first, then one graph taking the int as an input"
    placeholders = [n.name for n in backend.graphs[-1].graph.nodes if n.op == "placeholder"]
    assert placeholders == ["l_x", "l_n"], placeholders


def test_a_dynamic_int_that_indexes_a_list_is_specialized_correctly():
    backend = CountingBackend()
    captured = dl.capture(_int_uses, backend=backend)
    items = ["a", "b", "c"]
    for n in (2, 3, 4, 5, 2, 3, 7):
        x = torch.randn(4)
        got, expected = captured(x, n, items), _int_uses(x, n, items)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
    assert backend.count <= 5


def test_a_bool_stays_a_constant():
    backend = CountingBackend()
    captured = dl.capture(lambda x, flag: x + 1 if flag else x - 1, backend=backend)
    for flag in (True, False, True, False):
        x = torch.randn(3)
        torch.testing.assert_close(captured(x, flag), x + 1 if flag else x - 1)
    assert backend.count == 2


def test_an_augmented_assignment_to_a_dynamic_number_does_not_change_earlier_reads():
    """`n += 1` on a graph-input int or float makes a new value: the value read before it (returned
    here) keeps its own (fx prints an in-place node as `n += 1; m = n`, which rebinds `n`)."""
    def f(x, n, scale):
        before, before_scale = n, scale
        n += 10
        scale *= 2.0
        return x * n * scale, before, n, before_scale, scale

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    for k in range(2, 7):
        x = torch.randn(3)
        got, expected = captured(x, k, 0.5 * k), f(x, k, 0.5 * k)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:], (got[1:], expected[1:])
    assert backend.count == 2


@dataclasses.dataclass
class _Scaled:
    scale: float = 2.0
    shift: int = 3
    tags: list = dataclasses.field(default_factory=list)


_CONFIG = _Scaled(scale=3.0)


def _replace_compare_and_write_back(x):
    copy = dataclasses.replace(_CONFIG, shift=_CONFIG.shift + 1)
    same = copy == _CONFIG                 # compares the dynamic numbers: pins them under guards
    _CONFIG.scale = _CONFIG.scale * 1.0    # then a result that is constant after all is written back
    return x * _CONFIG.scale, same


def test_a_dynamic_number_pinned_by_a_guard_is_written_back_as_a_plain_number():
    """After a comparison pins a dynamic float, results computed from it are constants: they must
    reach the program as Python numbers (a SymFloat written into an object broke its deepcopy)."""
    captured = dl.capture(_replace_compare_and_write_back)
    try:
        for i in range(5):
            _CONFIG.scale, _CONFIG.shift = _CONFIG.scale + 0.5 * i, i
            expected_scale = _CONFIG.scale
            got = captured(torch.ones(2))
            assert type(_CONFIG.scale) is float and _CONFIG.scale == expected_scale
            torch.testing.assert_close(got[0], torch.ones(2) * expected_scale)
            assert got[1] is False
    finally:
        _CONFIG.scale, _CONFIG.shift = 3.0, 3


def _as_dict_of_config(x):
    return x * _CONFIG.scale, dataclasses.asdict(_CONFIG)


def test_asdict_of_a_dataclass_holding_dynamic_numbers_is_captured():
    """dataclasses.asdict deep-copies the fields: a number that became a graph input is immutable,
    its copy is itself (it was a break)."""
    backend = CountingBackend()
    captured = dl.capture(_as_dict_of_config, backend=backend)
    try:
        for i in range(4):
            _CONFIG.scale = 3.0 + i
            got, expected = captured(torch.ones(2)), _as_dict_of_config(torch.ones(2))
            torch.testing.assert_close(got[0], expected[0])
            assert got[1] == expected[1] and type(got[1]["scale"]) is float
        assert backend.count == 2
    finally:
        _CONFIG.scale = 3.0


def test_an_int_that_indexes_a_tensor_stays_a_graph_input():
    # `scores[:, label]` in a loop over labels: a select at a symbolic index, not one graph per label
    def f(x, i):
        row = x[i]
        col = x[:, i]
        return row * 2, col.sum(), x[i, i], x[:, i - 1]

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    x = torch.rand(6, 6)
    for i in (1, 2, 3, 4, 5):
        for got, expected in zip(captured(x, i), f(x, i)):
            torch.testing.assert_close(got, expected)
    assert backend.count == 2
    for got, expected in zip(captured(x, -1), f(x, -1)):      # the sign is guarded: one more graph
        torch.testing.assert_close(got, expected)
    with pytest.raises(IndexError):
        captured(x, 6)


def _view_by_a_0d_tensor(x, n, a):
    s = a.sum()
    y = x.view(n, -1)              # reads n's value: under dynamic sizes a symbol for it
    if y.shape[0] > 2:
        return y * 2 + s
    return y * 3 + s


def test_the_value_of_a_0d_tensor_an_op_reads_is_guarded():
    # Once `a`'s size was seen changing the frame is captured with dynamic sizes. Named for
    # ShapeEnv, the 0-d int tensor `n` got a symbol for its value from FakeTensorMode, whose guards
    # no input named: left out where no dim of the call was symbolic (a wrong result: the branch on
    # the view's size), an internal error where one was. A 0-d tensor is not named now: the view
    # reads n's value as in a static capture
    from harness import call_both
    backend = CountingBackend()
    captured = dl.capture(_view_by_a_0d_tensor, backend=backend)
    x = torch.ones(4)
    for v, m in ((4, 3), (4, 1), (2, 1), (1, 1), (4, 5), (2, 5), (2, 1)):
        call_both(_view_by_a_0d_tensor, captured, (x, torch.tensor(v), torch.ones(m)), {}, f"n={v}, a of {m}")
