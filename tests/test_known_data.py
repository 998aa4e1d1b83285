"""Tensors made from Python constants in the captured code, whose data the trace knows
(known_data.py): reading their Python value (`.item()`, a slice bound, `int()`, `if t:`) is
answered while tracing instead of breaking the graph — VITS' WaveNet slices with
`torch.IntTensor([hidden])[0]` inside a loop over parametrized convolutions, which ran its frame
eagerly. Differential throughout (harness.check: values, printed output, mutated inputs); the
cases where the data is not known (written in place, computed from inputs) still break and stay
right."""
import pytest
import torch
from torch import nn

from dynamo_lite.fallback.records import RECORDS
from harness import CountingBackend, Graphs, call_both, capture, check, check_calls, check_state_change, reset

WHY = "TorchDynamo turns the tensor's data into a Python value with a graph break"


def slice_bound(x):
    n = torch.IntTensor([3])[0]
    a = x + 1
    return torch.tanh(a[:, :n]) * torch.sigmoid(a[:, n:])


def item_as_int(x):
    k = torch.tensor([2, 5])[1].item()
    return x.repeat(k, 1), k


def float_item(x):
    f = torch.tensor(0.1).item()          # float32's 0.1, as eager reads it
    return x * f, f


def branch(x):
    flags = torch.tensor([0, 1], dtype=torch.bool)
    if flags[1]:
        return x + 1
    return x - 1


def builtins_of_it(x):
    t = torch.tensor([7])
    return x * int(t), float(t[0]), bool(t), t.tolist()


def cast_then_index(x):
    n = torch.tensor([2.0]).long()[0]
    return x[:n]


@pytest.mark.parametrize("fn", [slice_bound, item_as_int, float_item, branch, builtins_of_it, cast_then_index])
def test_data_of_a_tensor_made_from_constants_is_read_without_a_break(fn):
    check(fn, torch.randn(4, 6), graphs=Graphs(dl=1, torch=None, why=WHY))


def written_in_place(x):
    t = torch.tensor([2])
    t.add_((x > 0).sum())              # its data now depends on x
    return x[: t.item()]


def written_through_a_view(x):
    t = torch.tensor([1, 2])
    t[0:1].copy_((x > 0).sum().reshape(1))
    return x[: t[0]]


def from_an_input(x):
    n = (x > 0).sum()
    return x[:n]


@pytest.mark.parametrize("fn", [written_in_place, written_through_a_view, from_an_input])
def test_a_tensor_whose_data_depends_on_inputs_still_breaks_and_is_right(fn):
    args = [(torch.tensor([1.0, -1.0, 2.0, 3.0, -5.0]),), (torch.tensor([-1.0, -1.0, 2.0, -3.0, -5.0]),),
            (torch.tensor([1.0, 1.0, 2.0, 3.0, 5.0]),)]
    check_calls(fn, *args, graphs=None)


def raises_like_eager(x):
    n = torch.tensor(1.5)
    return x[:n]                       # a float tensor has no __index__: TypeError, as in eager


def test_a_conversion_eager_refuses_raises_the_same_error():
    check(raises_like_eager, torch.randn(3), graphs=None)


class Config:
    width = 2


CONFIG = Config()


def from_a_global_setting(x):
    n = torch.tensor([CONFIG.width])[0]
    return x[:, :n] * 2


def test_a_changed_setting_gives_the_new_value():
    def change():
        CONFIG.width = 3
    try:
        # the setting seen changing becomes a graph input (a dynamic int): from then on the
        # tensor's data is not known while tracing, and the slice breaks (2 graphs more)
        check_state_change(from_a_global_setting, (torch.randn(2, 5),), change, max_graphs=3)
    finally:
        CONFIG.width = 2


class WaveNetLike(nn.Module):
    """transformers' VitsWaveNet in small: weight-normed convolutions (a class of their own per
    instance, from torch.nn.utils.parametrize) indexed by the loop counter, and a slice bound
    taken from a tensor made in forward."""

    def __init__(self, hidden=8, layers=3):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        norm = nn.utils.parametrizations.weight_norm
        self.in_layers = nn.ModuleList(norm(nn.Conv1d(hidden, 2 * hidden, 3, padding=1)) for _ in range(layers))
        self.res_layers = nn.ModuleList(norm(nn.Conv1d(hidden, 2 * hidden, 1)) for _ in range(layers))

    def forward(self, x):
        out = torch.zeros_like(x)
        channels = torch.IntTensor([self.hidden])
        for i in range(self.layers):
            h = self.in_layers[i](x)
            n = channels[0]
            acts = torch.tanh(h[:, :n, :]) * torch.sigmoid(h[:, n:, :])
            res = self.res_layers[i](acts)
            x = x + res[:, : self.hidden]
            out = out + res[:, self.hidden:]
        return out


def test_wavenet_loop_is_one_graph():
    torch.manual_seed(0)
    with torch.no_grad():
        check(WaveNetLike().eval(), torch.randn(2, 8, 10), graphs=Graphs(dl=1, torch=None, why=WHY))


def relative_pos(pos, stride, pooled_pos=None, shift=1):
    """transformers' FunnelAttentionStructure.relative_pos: arange between 0-d tensors."""
    if pooled_pos is None:
        pooled_pos = pos
    ref_point = pooled_pos[0] - pos[0]
    num_remove = shift * pooled_pos.shape[0]
    max_dist = ref_point + num_remove * stride
    min_dist = pooled_pos[0] - pos[-1]
    return torch.arange(max_dist, min_dist - 1, -stride, dtype=torch.long, device=pos.device)


def funnel_positions(x):
    pos = torch.arange(0, x.shape[1], dtype=torch.int64).to(x.dtype)
    cls_pos = pos.new_tensor([-1])
    pooled = torch.cat([cls_pos, pos[1:-1][::2]], 0)
    rel = relative_pos(pos, 2, pooled, shift=2)
    return x[:, rel[:4]] * 2, rel


def test_arange_bounded_by_known_tensors_is_one_graph():
    check(funnel_positions, torch.randn(2, 16), graphs=Graphs(dl=1, torch=None, why=WHY))


def test_a_new_length_recaptures_with_the_new_positions():
    # the second length is seen changing: the sizes become dynamic, the positions' data is then
    # not known while tracing (a break at arange), and every value stays eager's
    check_calls(funnel_positions, (torch.randn(2, 16),), graphs=None)
    for n in (16, 12, 20):
        check(funnel_positions, torch.randn(2, n), graphs=None)


def integer_and_float_arithmetic(x):
    t = torch.tensor([7, 3])
    q = (t // 2)[0] % 2                     # integers: // and % are followed
    f = torch.tensor([0.1, 0.2])
    s = (f[0] * 3 + f[1]).item()            # float32's rounding, as eager's
    d = (f[0] / 3).item()                   # division is not followed: a break, still eager's value
    return x[:q] + s + d, s, d


def with_alpha(x):
    t = torch.add(torch.tensor(2.0), torch.tensor(0.1), alpha=3)   # alpha: not followed
    return x * t.item()


@pytest.mark.parametrize("fn", [integer_and_float_arithmetic, with_alpha])
def test_arithmetic_gives_eager_values(fn):
    check(fn, torch.randn(4), graphs=None)


def segment_shape(values, ids):
    """transformers' TAPAS segment ops: shapes and segment counts carried as tensors made from
    sizes and config numbers, read back with .tolist() and int()."""
    num_segments = torch.as_tensor(4, device=ids.device)
    batch = torch.prod(torch.tensor(list(ids.size()[:1])))
    total = num_segments * batch
    flat_shape = torch.cat([torch.as_tensor([-1], dtype=torch.long),
                            torch.as_tensor(values.size()[2:], dtype=torch.long)], dim=0)
    flat = values.reshape(flat_shape.tolist())
    out = torch.zeros(int(total), dtype=torch.float)
    out = out.scatter_reduce(0, (ids + torch.arange(0, batch).unsqueeze(-1) * num_segments).view(-1), flat,
                             reduce="amin", include_self=False)
    new_shape = torch.cat([torch.ones_like(torch.as_tensor(ids.size()[:1])), num_segments.unsqueeze(0)], dim=0)
    return out.view(new_shape.tolist()), [int(x) for x in new_shape.tolist()]


def test_shapes_carried_as_tensors_are_one_graph():
    ids = torch.tensor([[0, 1, 1, 3], [2, 2, 0, 1]])
    check(segment_shape, torch.randn(2, 4), ids, graphs=Graphs(dl=1, torch=None, why=WHY))


def float_sum_is_not_followed(x):
    s = torch.tensor([0.1, 0.2, 0.3]).sum().item()     # float sums round by the kernel's order: a break
    return x * s, s


def test_a_float_reduction_breaks_and_gives_eagers_value():
    check(float_sum_is_not_followed, torch.randn(3), graphs=None)


def arange_to_a_number(x, n):
    return x[: n] + torch.arange(n)


def test_arange_to_a_number_seen_changing_stays_captured():
    # n becomes a graph input (a SymInt) on the second length: arange's bound is then symbolic,
    # not a tensor (an internal error once: with_known_bounds took it for one)
    reset()
    compiled = capture(arange_to_a_number, backend=CountingBackend())
    for n in (3, 5, 6, 7):
        call_both(arange_to_a_number, compiled, (torch.randn(8), n), {}, f"n={n}")
    assert not [r for r in RECORDS if r.status == "error"], [r.detail for r in RECORDS if r.status == "error"]


@torch.inference_mode()
def under_inference_mode(x):
    n = torch.tensor([2, 3])[0]            # an inference tensor: no version counter, not followed
    return x[:n] * 2


def test_inference_tensors_are_not_followed():
    # (an internal error once: reading the version counter of an inference tensor raises)
    check(under_inference_mode, torch.randn(4), graphs=None)
    assert not [r for r in RECORDS if r.status == "error"], [r.detail for r in RECORDS if r.status == "error"]
