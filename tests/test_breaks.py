"""Graph breaks: every break kind resumes correctly after running the unsupported instruction
eagerly, with the expected number of graphs; side effects replay in order; breaks nest through
inlined calls. Breaks inside loops and try blocks: tests/test_loop_try_breaks.py."""
import contextlib
import io
import logging
import warnings

import numpy as np
import pytest
import torch

import dynamo_lite as dl
from dynamo_lite.fallback.records import RECORDS
from harness import CountingBackend, assert_same, check


def run_both(fn, *make_args, graphs=None, calls=2):
    """Run fn eagerly and captured (fresh args each time), compare values and stdout, check graphs."""
    backend = CountingBackend()
    captured = dl.capture(fn, backend=backend)
    for _ in range(calls):
        torch.manual_seed(0)
        args_e = [m() for m in make_args]
        torch.manual_seed(0)
        args_c = [m() for m in make_args]
        out_e, out_c = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_e):
            expected = fn(*args_e)
        with contextlib.redirect_stdout(out_c):
            got = captured(*args_c)
        torch.testing.assert_close(got, expected)
        assert out_c.getvalue() == out_e.getvalue()
        for a, b in zip(args_c, args_e):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(a, b)
        if graphs is not None:
            assert backend.count == graphs, f"expected {graphs} graphs, got {backend.count}"
    return backend


def rand3():
    return torch.randn(3)


def breaks_of(name):
    return [r for r in RECORDS if r.name == name and r.status == "break"]


def with_print(x):
    y = x * 2
    print("y has", y.shape[0], "items")
    return y + 1


def test_print_breaks_once_and_resumes():
    run_both(with_print, rand3, graphs=2)
    assert breaks_of("with_print")[0].kind.id == "DL005"


log = logging.getLogger("dynamo_lite.tests")


def with_logging_and_warning(x):
    y = x.sin()
    log.info("value %s", 3)
    z = y.cos()
    warnings.warn("careful")
    return z * 2


def test_break_before_a_closure_over_an_argument_resumes():
    """`y` is an argument and a cell (inner closes over it): the resume function gets the frame's
    cell, and the closure made after the break is built over it (3.13 loads a cell with LOAD_FAST
    of the argument's slot, which the resume function no longer has)."""
    def f(x, y, n):
        print("before")
        y = x * 2

        def inner(t):
            return t + y
        out = inner(x)
        y = y + 1
        return out, inner(x)

    run_both(f, lambda: torch.randn(3), lambda: torch.randn(3), lambda: 2, graphs=1)


def test_logging_and_warnings_break():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_both(with_logging_and_warning, rand3, graphs=3)
    kinds = [r.kind.id for r in breaks_of("with_logging_and_warning")]
    assert kinds.count("DL005") == 2


def item_scale(x):
    scale = x.abs().max().item()
    return x / scale + 1


def tolist_sum(x):
    values = (x * 2).tolist()
    return torch.tensor(values).sum() + x


def bool_of_tensor(x):
    flag = bool((x > 0).any())
    return x + 1 if flag else x - 1


@pytest.mark.parametrize("fn, graphs", [(item_scale, 2), (tolist_sum, 2), (bool_of_tensor, 2)])
def test_tensor_to_python_breaks(fn, graphs):
    run_both(fn, rand3, graphs=graphs)


def branch(x):
    y = x * 3
    if y.sum() > 0:
        return y - 1
    return y + 1


def test_data_dependent_branch_resumes_on_both_sides():
    backend = CountingBackend()
    captured = dl.capture(branch, backend=backend)
    for sign in (1, -1, 1, -1):
        x = torch.ones(3) * sign
        torch.testing.assert_close(captured(x), branch(x))
    assert backend.count == 3      # the prefix, then one graph per side


def masked(x):
    y = x * 2
    picked = y[y > 0]              # data-dependent output shape
    return picked.sum() + y.mean()


def nonzero_unique(x):
    idx = torch.nonzero(x > 0)
    u = torch.unique(x.round())
    return idx.float().sum() + u.sum()


@pytest.mark.parametrize("fn", [masked, nonzero_unique])
def test_dynamic_output_shape_ops_break(fn):
    run_both(fn, rand3)
    assert any(r.kind.id in ("DL004", "DL003") for r in breaks_of(fn.__name__))


def uses_numpy(x):
    y = x + 1
    n = np.float32(np.sqrt(4.0))
    return y * float(n)


def test_numpy_on_constants_folds_without_a_break():
    run_both(uses_numpy, rand3, graphs=1)


def uses_numpy_on_data(x):
    y = x + 1
    n = np.sqrt(x.numpy()).sum()
    return y * float(n)


def test_numpy_on_tensor_data_breaks():
    run_both(uses_numpy_on_data, lambda: torch.rand(3))
    assert breaks_of("uses_numpy_on_data")[0].kind.id == "DL003"     # float() of an array computed in the graph


def explicit(x):
    y = x + 1
    dl.graph_break()
    return y * 2


def test_explicit_graph_break():
    run_both(explicit, rand3, graphs=2)
    assert breaks_of("explicit")[0].kind.id == "DL007"


def level3(x):
    print("deep")
    return x * 3


def level2(x):
    return level3(x + 1) - 1


def level1(x):
    return level2(x * 2) + 5


def test_break_three_levels_deep_breaks_at_the_outer_call_site():
    backend = run_both(level1, rand3)
    records = [r for r in RECORDS if r.status in ("break", "captured")]
    names = {r.name for r in records}
    assert {"level1", "level2", "level3"} <= names
    assert backend.count >= 4


def mutate_then_print(x, items):
    items.append(x.sum())
    y = x * 2
    print(len(items))
    items.append(y.sum())
    return y


def test_side_effects_are_replayed_before_the_break():
    backend = CountingBackend()
    captured = dl.capture(mutate_then_print, backend=backend)
    ours, theirs = [], []
    x = torch.ones(2)
    out_c, out_e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_c):
        got = captured(x, ours)
    with contextlib.redirect_stdout(out_e):
        expected = mutate_then_print(x, theirs)
    torch.testing.assert_close(got, expected)
    assert out_c.getvalue() == out_e.getvalue() == "1\n"
    assert len(ours) == len(theirs) == 2
    torch.testing.assert_close(ours, theirs)


@dl.disable
def eager_helper(x):
    return torch.from_numpy(x.numpy() * 2)


def calls_disabled(x):
    y = x.sin()
    z = eager_helper(y)
    return z + x


def test_disabled_function_runs_eagerly_and_is_a_break():
    run_both(calls_disabled, rand3, graphs=2)
    assert breaks_of("calls_disabled")[0].kind.id == "DL014"


class _UserBlock(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


_LAYER = torch.nn.Linear(3, 3)
_BUILTIN_STACK = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
_STACK_WITH_USER_BLOCK = torch.nn.Sequential(torch.nn.Linear(3, 3), _UserBlock())


def loop_calling_layers(x):
    try:
        raise KeyError
    except KeyError:                        # a break while handling an exception: this frame runs eagerly
        for i in range(2):
            x = _BUILTIN_STACK(_LAYER(x)) + i
            print(i)
    return x


def test_torch_layers_called_from_an_eager_frame_run_eagerly():
    """A lone built-in layer or a stack of them reached from eager code is not worth a graph
    (TorchDynamo skips them too): no graphs, same values and output."""
    with torch.no_grad():
        run_both(loop_calling_layers, rand3, graphs=0)


def loop_calling_user_stack(x):
    try:
        raise KeyError
    except KeyError:                        # a break while handling an exception: this frame runs eagerly
        for i in range(2):
            x = _STACK_WITH_USER_BLOCK(x) + i
            print(i)
    return x


def test_torch_container_holding_user_modules_is_still_captured_from_an_eager_frame():
    with torch.no_grad():
        run_both(loop_calling_user_stack, rand3, graphs=1)


def test_torch_layer_is_captured_when_it_is_what_capture_was_given():
    """The same layer, already run eagerly from an eager frame, is captured as the entry."""
    with torch.no_grad():
        run_both(loop_calling_layers, rand3, graphs=0)
        backend = run_both(_LAYER, rand3, graphs=1)
        run_both(loop_calling_layers, rand3, graphs=0)
    assert backend.count == 1


def try_with_print(x):
    try:
        print("inside")
        y = x + 1
    except ValueError:
        y = x
    return y * 2


def test_break_inside_try_resumes():
    run_both(try_with_print, rand3, graphs=1)
    assert any(r.status == "break" for r in RECORDS if r.name == "try_with_print")


def print_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("inside", y.shape[0])
        z = y + 1
    return z * x, z.requires_grad


def item_in_nested_grad_modes(x):
    with torch.no_grad():
        a = x.sin()
        with torch.enable_grad():
            b = (x * 3).sum()
            s = b.item()                      # a break two `with` blocks deep
            c = x * s
        d = a + c
    return d, c.requires_grad, d.requires_grad, torch.is_grad_enabled()


def branch_in_set_grad_enabled(x):
    with torch.set_grad_enabled(False):
        y = x.cos()
        if y.sum() > 0:                       # a data-dependent branch: both sides resume in the block
            y = y * 2
        else:
            y = y - 1
    return y + x, y.requires_grad


def print_in_nullcontext(x):
    with contextlib.nullcontext():
        y = x + 1
        print("null")
    return y * 2


def grad_input():
    return torch.randn(3, requires_grad=True)


@pytest.mark.parametrize("fn", [print_in_no_grad, item_in_nested_grad_modes, branch_in_set_grad_enabled,
                                print_in_nullcontext])
def test_break_inside_grad_mode_with_block_resumes(fn):
    """Values, printed output, requires_grad of results and the grad mode afterwards match eager;
    graphs on both sides of the break (TorchDynamo also resumes inside these blocks)."""
    expected = {print_in_no_grad: 2, item_in_nested_grad_modes: 2, branch_in_set_grad_enabled: 2,
                print_in_nullcontext: 2}[fn]
    run_both(fn, grad_input, graphs=expected)
    assert torch.is_grad_enabled()
    statuses = {r.status for r in RECORDS if r.name == fn.__name__}
    assert "break" in statuses and "fallback" not in statuses


def _raises_inside(x):
    raise ValueError("from inside the block")


def raise_at_break_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        dl.disable(_raises_inside)(y)         # the break's own call raises
    return y


def raise_after_break_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("before")
        if x.shape[0] == 3:
            raise KeyError("in the resumed part")
    return y


@pytest.mark.parametrize("fn,exc", [(raise_at_break_in_no_grad, ValueError), (raise_after_break_in_no_grad, KeyError)])
def test_exception_inside_interrupted_grad_mode_block_restores_grad_mode(fn, exc):
    for run in (fn, dl.capture(fn, backend=CountingBackend())):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(exc):
            run(grad_input())
        assert torch.is_grad_enabled(), f"{run} left grad mode off"


class _UserError(ValueError):
    def __init__(self, k):
        super().__init__(f"user error {k}")


def raise_user_exception_in_no_grad(x):
    y = x + 1
    with torch.set_grad_enabled(False):
        raise _UserError(2)                   # a break at the construction; the raise is in the resumed part
    return y


def caught_exception_leaves_no_grad_block(x, d):
    y = x + 1
    try:
        with torch.no_grad():
            z = y * 2
            z = z + d["missing"]              # KeyError leaves the block through its __exit__
    except KeyError:
        z = y * 3
    return z, torch.is_grad_enabled()


def test_user_exception_raised_in_resumed_grad_mode_block():
    for run in (raise_user_exception_in_no_grad, dl.capture(raise_user_exception_in_no_grad)):
        with pytest.raises(_UserError, match="user error 2"):
            run(grad_input())
        assert torch.is_grad_enabled()


def test_exception_caught_outside_a_grad_mode_block_is_one_graph():
    backend = run_both(caught_exception_leaves_no_grad_block, grad_input, dict, graphs=1)
    assert backend.count == 1


def print_in_no_grad_in_try(x):
    try:
        with torch.no_grad():
            y = x * 2
            print("in try")
    except ValueError:
        y = x
    return y


def test_break_inside_with_inside_try_resumes_after_the_with_statement_runs_as_python():
    """A grad-mode block inside a try block cannot be left and re-entered around the break (the
    try's handler would see the wrong grad mode): the `with` statement runs as Python instead,
    and the block's body resumes with the real block (tests/test_with_breaks.py). TorchDynamo
    runs the frame eagerly."""
    run_both(print_in_no_grad_in_try, rand3, graphs=1)
    record = [r for r in RECORDS if r.name == "print_in_no_grad_in_try"][0]
    assert record.status == "break" and record.kind.name == "with-entered-for-real"
    assert "DL005" in record.detail and record.fallback_kind is None


def raises_after_work(x, out):
    out.add_(1)
    y = x * 2
    raise ValueError(f"bad {y.shape[0]}")


def test_user_exception_after_graph_keeps_mutations_and_message():
    out = torch.zeros(2)
    with pytest.raises(ValueError, match="bad 3"):
        dl.capture(raises_after_work)(torch.ones(3), out)
    assert torch.equal(out, torch.ones(2))


def nested_calls(x):
    y = torch.relu(x)
    print(y.sum().item() > -1)
    return torch.sigmoid(y)


def test_stack_with_nested_call_and_null_below():
    run_both(nested_calls, rand3, graphs=2)


def generator_inside(x):
    gen = (x * i for i in range(3))
    total = sum(gen)
    print("total")
    return total + 1


def test_generator_created_inside_the_frame():
    run_both(generator_inside, rand3, graphs=2)


def fullgraph_target(x):
    y = x + 1
    print("no")
    return y


def test_fullgraph_raises_graph_break_error():
    with pytest.raises(dl.GraphBreakError, match="print-or-log"):
        dl.capture(fullgraph_target, fullgraph=True)(torch.ones(2))


class _Holder:
    def __init__(self, t):
        self.t = t


def test_values_read_before_a_break_are_the_ones_the_trace_read():
    """Values read from the frame before the break (`old = holder.t`, `first = d['a']`) are
    rebuilt for the resume function as they were read, not re-read after the replayed writes."""
    from harness import check

    def f(x, holder, d):
        old, first = holder.t, d["a"]
        holder.t = x * 2
        d["a"] = x * 3
        print("break")
        return old + 1, first + 1, holder.t, d["a"]

    check(f, torch.ones(2), _Holder(torch.zeros(2)), {"a": torch.full((2,), 5.0)}, graphs=2)


# -- resume functions run as plain bytecode ------------------------------------------------------
# A resume function is normally captured itself, so its bytecode only runs when that capture
# fails (or past the cache limit). These tests make every resume function run as CPython would
# run it, so wrong slots in its bytecode (cells named as plain locals) show as wrong results.

@pytest.fixture
def resume_functions_run_eagerly(monkeypatch):
    import dynamo_lite.convert_frame as convert_frame
    original = convert_frame.convert_frame

    def convert(code, func, args, options):
        if "<resume at" in code.co_qualname:
            return None
        return original(code, func, args, options)
    monkeypatch.setattr(convert_frame, "convert_frame", convert)
    dl.reset()
    yield
    dl.reset()


def _cell_comprehension_after_break(x):
    y = x + 1
    print("b")
    late = [lambda v: v * i for i in range(2)]      # i: a cell, saved and restored around the comprehension
    i = 5
    g = lambda v: v + i                             # noqa: E731
    return late[1](y) + g(y)


def _argument_cell_after_break(x, y):
    print("b")
    y = x * 2

    def inner(t):
        return t + y
    return inner(x), [a * b for a, b in ((1, 2), (3, 4))]


def _free_variable_passed_on_after_break(x):
    k = x.sum()

    def middle(v):
        print("m")
        def inner(w):
            return w * k
        a, b = v, inner(v)                          # 3.13: STORE_FAST_STORE_FAST
        return a + b
    return middle(x)


def _nested_try_in_a_loop_after_break(x, n):
    t = x * 2
    print("b")
    for _ in range(n):
        ctx = None
        try:
            try:
                {}["k"]
            except KeyError:
                raise ValueError("wrapped")
        except ValueError as err:                   # the handlers' stack depths must be the original's
            ctx = type(err.__context__).__name__
            t = t + 1
    return t, ctx


def _many_locals_after_break(x):
    s1 = s2 = None                                  # low local numbers: 3.13 pairs their loads/stores
    a0, a1, a2, a3, a4, a5, a6, a7 = range(8)
    b0, b1, b2, b3, b4, b5, b6, b7 = range(8, 16)
    print("b")                                      # the resume function takes the 17 live locals first,
    s1, s2 = {a1, b1, a2, b3, a4}, {b1, b2, a4, b5}      # so s1, s2 are past index 15 there
    u = s1 & s2
    return x + len(u) + a0 + a3 + a5 + a6 + a7 + b0 + b4 + b6 + b7


@pytest.mark.parametrize("fn, args", [(_cell_comprehension_after_break, (torch.ones(3),)),
                                      (_many_locals_after_break, (torch.ones(3),)),
                                      (_nested_try_in_a_loop_after_break, (torch.ones(3), 2)),
                                      (_argument_cell_after_break, (torch.ones(3), torch.zeros(3))),
                                      (_free_variable_passed_on_after_break, (torch.arange(3.0),))],
                         ids=["cell-comprehension", "many-locals", "nested-try", "argument-cell", "free-variable"])
def test_resume_function_bytecode_runs_correctly_on_its_own(resume_functions_run_eagerly, fn, args):
    """Also run through an ordinary capture (the resume functions traced) below."""
    expected_out, got_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(expected_out):
        expected = fn(*args)
    with contextlib.redirect_stdout(got_out):
        got = dl.capture(fn)(*args)
    assert_same(expected, got)
    assert got_out.getvalue() == expected_out.getvalue()


def test_many_locals_after_a_break_traced():
    run_both(_many_locals_after_break, lambda: torch.randn(3), graphs=1)


def returns_a_closure(x):
    k = x.shape[0]

    def scale(t):
        return t * k
    return scale(x), scale


def returns_two_closures_over_one_variable(x):
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count

    def read():
        return count
    total = x.sum()
    return total, bump, read


def _padding_mask_function(mask):
    def inner(b, i):                      # transformers' padding_mask_function, inlined
        return mask[b, i]
    return inner


def returns_an_inlined_calls_closure(x, mask):
    fn = _padding_mask_function(mask > 0)
    return x * 2, fn


def test_a_closure_that_outlives_the_frame_is_rebuilt_over_new_cells():
    """A function over the frame's own variables (or an inlined call's) that is returned: rebuilt
    after the graph over new cells holding what the trace left, one cell however many functions
    share it, so the frame captures."""
    x = rand3()
    expected = returns_a_closure(x)
    report = dl.explain(returns_a_closure)(x)
    got = report.output
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1](x), expected[1](x))
    assert report.breaks == [] and report.graph_count == 1, str(report)

    _, bump, read = dl.capture(returns_two_closures_over_one_variable)(x)
    assert (bump(), bump(), read()) == (1, 2, 2)          # one cell, shared as in eager

    mask = torch.tensor([[1, 0], [0, 1]])
    _, fn = dl.capture(returns_an_inlined_calls_closure)(x, mask)
    _, eager_fn = returns_an_inlined_calls_closure(x, mask)
    assert fn(0, 1).item() == eager_fn(0, 1).item() and fn(1, 1).item() == eager_fn(1, 1).item()


def returns_a_recursive_closure(x):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    return x * fact(3), fact


def test_a_recursive_closure_that_outlives_the_frame_has_a_kind_of_its_own():
    """A nested function that calls itself through its own cell cannot be rebuilt cell by cell:
    the frame runs eagerly, reported as closure-escapes (DL033), with its hint."""
    x = rand3()
    expected = returns_a_recursive_closure(x)
    report = dl.explain(returns_a_recursive_closure)(x)
    got = report.output
    torch.testing.assert_close(got[0], expected[0])
    assert got[1](4) == expected[1](4) == 24
    assert [b.kind_id for b in report.breaks] == ["DL033"], report.breaks
    assert "closure-escapes" in str(report) and "functools.partial" in str(report)


def writes_then_fails_on_an_expanded_view(x, y):
    wide = y.expand(2, 5)                 # its elements share memory
    dl.graph_break()
    y *= 2                                # the graph writes y, then
    wide -= x                             # fails: eager refuses writes into an expand, after y *= 2
    return y


def test_a_graph_failing_after_writes_leaves_inputs_as_eager_does():
    """The graph's writes are undone and the frame rerun eagerly, which raises eager's error with y
    written as eager left it; the expanded view is not copied back (that copy itself raised, after
    y had been restored: y ended unwritten)."""
    check(writes_then_fails_on_an_expanded_view, torch.randn(2, 5), torch.randn(1, 5), graphs=None)
