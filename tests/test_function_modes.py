"""TorchFunctionModes entered in captured code (`with Mode():`, function_modes.py): every tensor
operation inside the block goes to the mode's `__torch_function__` as eager hands it (the same
func, args and kwargs: a logging mode sees the same calls in the same order), the mode off the
stack while its handler runs; the graph holds what the handler did. Differential against eager:
values, exceptions, printed output, what the modes recorded, graph counts.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import dynamo_lite
from harness import REFERENCE, CountingBackend, capture, check, check_calls, reset, skip_in_reference


class AddIsSub(TorchFunctionMode):
    """Changes what `+` means: the graph must hold subtractions."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.add:
            func = torch.Tensor.sub
        return func(*args, **(kwargs or {}))


class Log(TorchFunctionMode):
    """Records the name of every call torch hands it."""

    def __init__(self, tag=""):
        super().__init__()
        self.tag = tag
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(self.tag + getattr(func, "__name__", type(func).__name__))
        return func(*args, **(kwargs or {}))


class OnesForZeros(TorchFunctionMode):
    """Rewrites a factory call that has no tensor argument at all."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.zeros:
            func = torch.ones
        return func(*args, **(kwargs or {}))


class NoMul(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.mul:
            raise ValueError(f"no mul here ({len(args)} args)")
        return func(*args, **(kwargs or {}))


def mode_rewrites_an_operator(x, w):
    y = x * 2
    with AddIsSub():
        z = y + 1
        z = z + w[0]
        n = z.shape[0]
    return z * n + 1          # after the block: an addition again


def test_a_mode_rewrites_operators_inside_its_block_only():
    result = check(mode_rewrites_an_operator, torch.randn(3), torch.randn(2), graphs=1)
    targets = [n.target for gm in result.backend.graphs for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.Tensor.sub in targets or "sub" in [getattr(t, "__name__", t) for t in targets]


def mode_logs_what_it_sees(x, lin):
    m = Log()
    with m:
        y = F.relu(x) + x.sum()
        y = y[1:] * x.shape[0]
        n = len(y)
        y = lin(y.unsqueeze(0))
        d = y.dtype
        z = torch.zeros(2)
        y = y.sum(dim=1, keepdim=True) - z.mean()
    return y, m.seen, n, d


def test_a_logging_mode_sees_the_calls_eager_shows_it_in_order():
    lin = torch.nn.Linear(3, 2)
    result = check(mode_logs_what_it_sees, torch.randn(4), lin, graphs=1)
    seen = result.eager.value[1]
    assert seen[:4] == ["relu", "sum", "add", "__getitem__"] and "linear" in seen and "zeros" in seen
    assert result.captured.value[1] == seen


def test_a_factory_without_tensor_arguments_goes_to_the_mode():
    def f(x):
        with OnesForZeros():
            z = torch.zeros(3, dtype=x.dtype)
        return x + z
    check(f, torch.randn(3), graphs=1)


def nested_modes(x):
    outer, inner = Log("outer:"), Log("inner:")
    with outer:
        with inner:
            y = x + 1
        y = y * 2
    return y, outer.seen, inner.seen


def test_nested_modes_hand_the_inner_handlers_calls_to_the_outer_mode():
    result = check(nested_modes, torch.randn(3), graphs=1)
    _, outer_seen, inner_seen = result.eager.value
    assert inner_seen == ["inner:add"] and outer_seen == ["outer:add", "outer:mul"]


def mode_made_outside(x, mode):
    with mode:
        y = x.exp() + x
    return y


def test_a_mode_object_made_outside_records_into_its_own_list():
    eager_mode, captured_mode = Log(), Log()
    x = torch.randn(3)
    expected = mode_made_outside(x, eager_mode)
    backend = CountingBackend()
    reset()
    got = capture(mode_made_outside, backend=backend)(x, captured_mode)
    torch.testing.assert_close(got, expected)
    assert captured_mode.seen == eager_mode.seen == ["exp", "add"]
    assert backend.count == 1


def handler_raises(x):
    try:
        with NoMul():
            y = x * 2
    except ValueError as e:
        return x - 1, str(e)
    return y, ""


def test_an_exception_from_the_handler_reaches_the_program_and_the_mode_is_left():
    check(handler_raises, torch.randn(3), graphs=1)


def print_inside_the_block(x):
    with Log() as m:
        y = x + 1
        print("inside", len(m.seen))
        y = y * 2
    return y, m.seen


def test_a_break_inside_the_block_runs_the_block_eagerly():
    """The `with` statement entering the mode runs as Python (the break moves there, DL040) and
    the block's body, called with the mode active, runs eagerly (DL039)."""
    reset()
    report = dynamo_lite.explain(print_inside_the_block)(torch.randn(3))
    assert [(b.kind_id, b.eager_kind_id) for b in report.breaks] == [("DL040", ""), ("DL039", "")]
    # the handler's own frames (the mode is off the stack while they run) may be captured
    check(print_inside_the_block, torch.randn(3), graphs=None)


def test_has_torch_function_is_true_inside_the_block():
    from torch.overrides import has_torch_function_unary

    def f(x):
        with AddIsSub():
            inside = has_torch_function_unary(x)
        return x * 2, inside, has_torch_function_unary(x)
    result = check(f, torch.randn(3), graphs=1)
    assert result.eager.value[1:] == (True, False)


def test_values_of_later_calls_are_not_baked_in():
    check_calls(mode_rewrites_an_operator, (torch.randn(3), torch.randn(2)), (torch.randn(3), torch.randn(2)),
                graphs=1)


@skip_in_reference("TorchDynamo's own mode; the count differs")
def test_transformers_mask_pattern_vmapped_index_under_transform_get_item_to_index():
    """transformers' masking_utils: a mask function indexing a padding mask with 0-d tensors,
    vmapped over batch and key indices inside torch's TransformGetItemToIndex."""
    twrapped = pytest.importorskip("torch._dynamo._trace_wrapped_higher_order_op")
    mode_cls = twrapped.TransformGetItemToIndex

    def mask(padding, b, kv):
        def keep(bi, ki):
            return padding[bi, ki]
        with mode_cls():
            return torch.func.vmap(torch.func.vmap(keep, in_dims=(None, 0)), in_dims=(0, None))(b, kv)
    padding = torch.rand(3, 5) > 0.3
    check(mask, padding, torch.arange(3), torch.arange(5), graphs=1)


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2 + 1

    @staticmethod
    def backward(ctx, g):
        return g * 2


def custom_function_in_block(x):
    with AddIsSub():
        y = Twice.apply(x) + 1
    return y


def test_a_custom_function_inside_the_block_is_not_traced_past_the_mode():
    """Eager hands the mode the forward's `+` too (a subtraction then) and calls of autograd's own
    machinery: the tracer refuses the apply (DL039); the frame runs eagerly, with eager's values."""
    reset()
    report = dynamo_lite.explain(custom_function_in_block)(torch.randn(3))
    assert any(b.kind_id == "DL039" for b in report.breaks)
    check(custom_function_in_block, torch.randn(3), graphs=None)


def test_the_registry_has_the_function_mode_kind():
    from dynamo_lite import breaks
    assert breaks.FUNCTION_MODE.id == "DL039" and breaks.KINDS["DL039"].hint


@pytest.mark.skipif(REFERENCE, reason="dynamo_lite's own refusal")
def test_an_unmodelled_value_handed_to_the_mode_refuses_with_dl039():
    class Opaque:
        pass

    def f(x, o):
        with Log():
            return torch.add(x, 1, alpha=2), o
    reset()
    got = capture(f)(torch.ones(2), Opaque())
    torch.testing.assert_close(got[0], torch.full((2,), 3.0))


# -- a mode already active when a captured function is called ----------------------------------

def plain(x):
    return (x + 1).relu().sum(dim=0)


def test_a_frame_called_under_a_foreign_mode_runs_eagerly_and_the_mode_sees_eagers_calls():
    """Our guards and runtime make torch calls of their own, and a compiling backend's kernels
    would skip the mode: while a mode the program entered outside is active, the frame runs as it
    is (recorded with DL039), and is captured as usual once the mode is left."""
    reset()
    backend = CountingBackend()
    compiled = capture(plain, backend=backend)
    x = torch.randn(3, 2)
    torch.testing.assert_close(compiled(x), plain(x))           # captured: one graph
    assert backend.count == 1
    with Log() as eager_log:
        expected = plain(x)
    with Log() as captured_log:
        got = compiled(x)
    torch.testing.assert_close(got, expected)
    assert captured_log.seen == eager_log.seen == ["add", "relu", "sum"]
    with AddIsSub():
        torch.testing.assert_close(compiled(x), plain(x))
    before = backend.count        # (the handlers' own frames run with their mode off: captured)
    torch.testing.assert_close(compiled(x), plain(x))           # the graph again, guards pass
    assert backend.count == before


@pytest.mark.skipif(REFERENCE, reason="dynamo_lite's guard on the mode stack")
def test_torchs_default_device_mode_is_captured_under_and_guarded():
    reset()
    backend = CountingBackend()

    def make(x):
        return x + torch.ones(x.shape[0])
    compiled = capture(make, backend=backend)
    x = torch.randn(3)
    with torch.device("cpu"):
        torch.testing.assert_close(compiled(x), make(x))
    assert backend.count == 1
    torch.testing.assert_close(compiled(x), make(x))            # no mode now: the guard sees it
    assert backend.count == 2
