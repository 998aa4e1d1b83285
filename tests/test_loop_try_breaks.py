"""Graph breaks inside loops and try blocks resume (TorchDynamo runs such frames eagerly).

Inside a loop, the code before the loop and each stretch of the body between breaks become
graphs; the loop itself runs as Python (runtime.drive calls the resume functions one after the
other), and later iterations reuse the cached graphs. Inside a try block, an exception raised by
the break's own instruction or by the resumed code reaches the except/finally blocks as in eager.

Every test is differential (harness.check: values, exceptions, printed output, mutated inputs,
graph counts, and a second call that must capture nothing new).
"""
import collections
import itertools
import sys

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite.fallback.records import RECORDS
from harness import CountingBackend, Graphs, check, reset

@pytest.fixture(autouse=True)
def every_stretch_to_the_backend(monkeypatch):
    """The shapes here are tiny (one op per stretch): every stretch goes to the backend, so the
    counts say how the loop is cut (tests/test_loop_head.py covers single ops run as is)."""
    monkeypatch.setattr(dl.config, "loop_single_ops_as_is", False)


DRIVEN = "dynamo_lite resumes after a break inside a loop/try block; TorchDynamo runs the frame eagerly"


def graphs(n: int) -> Graphs:
    return Graphs(dl=n, torch=None, why=DRIVEN)


def x44():
    return torch.randn(4, 4)


# ---- loops ------------------------------------------------------------------------------------

def loop_over_range(x, n):
    x = x + 1
    for i in range(n):
        x = x * 2
        print("step", i)
        x = x - 1
    return x.sin()


def test_for_range_resumes_and_reuses_graphs_whatever_the_iteration_count():
    # before the loop + the first stretch; after the print through the next iteration's first
    # stretch (the resume function reads the range iterator it is given ahead, so one stretch
    # per iteration), recaptured once as the loop counter becomes a graph input; the exit
    few = check(loop_over_range, x44(), 3, graphs=graphs(4)).backend.count
    many = check(loop_over_range, x44(), 12, graphs=graphs(4)).backend.count
    assert few == many


_DEPTHS = []


@dl.disable
def _record_stack_depth():
    """A graph break (a disabled function) that notes how deep the Python stack is."""
    depth, f = 0, sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    _DEPTHS.append(depth)


def loop_probing_the_stack(x, n):
    for _ in range(n):
        x = x * 0.5 + 1
        _record_stack_depth()
    return x


def test_the_python_stack_does_not_grow_with_the_iterations():
    """Each break in the loop continues through runtime.drive, not one resume call deeper: 3,000
    iterations (more than the recursion limit's worth of frames) run at a constant depth."""
    reset()
    x = x44()
    expected = loop_probing_the_stack(x, 3000)
    _DEPTHS.clear()
    got = dl.capture(loop_probing_the_stack)(x, 3000)
    torch.testing.assert_close(got, expected)
    assert len(_DEPTHS) == 3000 and max(_DEPTHS) == min(_DEPTHS[2:]), (min(_DEPTHS), max(_DEPTHS))


def loop_while(x):
    i = 0
    while i < 4:
        x = x + i
        print(i)
        i += 1
    return x


def loop_break_continue(x):
    for i in range(6):
        if i == 1:
            continue
        x = x * 1.5
        print("v", i)
        if i == 4:
            break
        x = x + 1
    return x


def nested_loops(x):
    for i in range(3):
        for j in range(2):
            x = x + i * j
            print(i, j)
        x = x.cos()
    return x


def loop_over_list(x, ws):
    for w in ws:
        x = x @ w
        print(tuple(x.shape))
    return x


def loop_enumerate_zip(x, ws):
    for k, (a, b) in enumerate(zip(ws, ws[1:])):
        x = x @ a @ b
        print(k)
    return x


def loop_over_dict(x):
    scales = {"a": 1.0, "b": 2.0, "c": 0.5}
    for name, scale in scales.items():
        x = x * scale
        print(name)
    return x


def loop_over_tensor_rows(x):
    total = 0
    for row in x:
        total = total + row.sum()
        print("row")
    return total


def loop_data_dependent_branch(x):
    for _ in range(3):
        if x.sum() > 0:
            x = x - 1
        else:
            x = x + 2
    return x


def loop_returns_inside(x):
    for i in range(5):
        x = x + 1
        print(i)
        if i == 2:
            return x * 10
    return x


def loop_raises_inside(x):
    for i in range(3):
        x = x + 1
        print(i)
        if i == 1:
            raise ValueError(f"boom {i}")
    return x


def loop_mutates_inputs(x, log):
    for i in range(3):
        x.add_(1)
        print(i)
        log.append(i)
    return x


def loop_with_item(x):
    total = 0.0
    for i in range(3):
        total += (x * i).sum().item()
        x = x + total
    return x, total


ws3 = lambda: [torch.randn(4, 4) for _ in range(3)]   # noqa: E731


LOOP_SHAPES = [
    (loop_while, (x44,), 4),
    (loop_break_continue, (x44,), 4),
    (nested_loops, (x44,), 6),
    (loop_over_list, (x44, ws3), 1),            # nothing before the loop: the body's graph starts at its head
    (loop_enumerate_zip, (x44, ws3), 2),
    (loop_over_dict, (x44,), 3),
    (loop_over_tensor_rows, (x44,), 2),
    (loop_data_dependent_branch, (x44,), 4),
    (loop_returns_inside, (x44,), 4),
    (loop_raises_inside, (x44,), 3),
    (loop_mutates_inputs, (x44, list), 2),      # (as loop_over_list)
    (loop_with_item, (x44,), 4),
]


def test_a_frame_with_a_break_in_a_loop_is_not_run_eagerly():
    reset()
    backend = CountingBackend()
    dl.capture(loop_while, backend=backend)(x44())
    records = [r for r in RECORDS if r.name == "loop_while"]
    assert records and not [r for r in records if r.status == "fallback"]
    assert any(r.status == "break" for r in records)


# ---- try blocks -------------------------------------------------------------------------------

def try_print(x):
    try:
        x = x + 1
        print("in try")
        x = x * 2
    except ValueError:
        x = x - 1
    return x


def try_break_instruction_raises(x):
    try:
        x = x + 1
        x = x * int("nope")            # a break (int of a str) whose own instruction raises
    except ValueError as e:
        x = x - len(str(e))
    return x


def try_resumed_code_raises(x, log):
    try:
        x = x + 1
        print("a")
        log.append(1)
        raise KeyError("k")
    except KeyError:
        x = x * 3
    finally:
        log.append(2)
    return x


def try_finally_return(x, log):
    try:
        x = x + 1
        print("body")
        return x * 2
    finally:
        log.append("finally")          # runs after the return value is computed


def try_inside_loop(x):
    for i in range(4):
        try:
            x = x + i
            print(i)
            if i == 2:
                int("x")
        except ValueError:
            x = x * 0.5
            continue
        x = x - 1
    return x


def loop_inside_try(x):
    try:
        for i in range(3):
            x = x + 1
            print(i)
        int("bad")
    except ValueError:
        x = x * 7
    return x


def nested_try_finally(x):
    try:
        try:
            x = x + 1
            print("inner")
            {}["missing"]
        finally:
            x = x * 2
    except KeyError as e:
        x = x - len(repr(e))
    return x


def try_uncaught_exception_type(x):
    try:
        x = x + 1
        print("in try")
        raise TypeError("not caught here")
    except ValueError:
        x = x * 0
    return x


TRY_SHAPES = [
    (try_print, (x44,), 2),
    (try_break_instruction_raises, (x44,), 1),
    (try_resumed_code_raises, (x44, list), 2),
    (try_finally_return, (x44, list), 2),
    (try_inside_loop, (x44,), 5),
    (loop_inside_try, (x44,), 3),               # (as loop_over_list)
    (nested_try_finally, (x44,), 2),
    (try_uncaught_exception_type, (x44,), 1),
]


@pytest.mark.parametrize("fn, make_args, count", LOOP_SHAPES + TRY_SHAPES, ids=lambda v: getattr(v, "__name__", None)
                         if callable(v) and not isinstance(v, tuple) else None)
def test_loop_and_try_shapes(fn, make_args, count):
    """Each shape matches eager (values, printed output, exceptions, mutated inputs), makes
    `count` graphs and reuses them on the second call, and no frame of it runs eagerly."""
    torch.manual_seed(0)
    check(fn, *[m() for m in make_args], graphs=graphs(count))
    ran_eagerly = [(r.qualname, r.fallback_reason) for r in RECORDS
                   if r.name == fn.__name__ and r.status == "fallback"]
    assert not ran_eagerly


def break_in_except_body(x):
    try:
        x = x + 1
        int("bad")
    except ValueError:
        print("handling")              # sys.exc_info() / a bare raise here need the handled exception
        x = x * 2
    return x


def test_a_break_in_an_except_block_runs_the_frame_eagerly_with_its_kind():
    check(break_in_except_body, x44(), graphs=Graphs(dl=0, torch=None, why=DRIVEN))
    records = [r for r in RECORDS if r.name == "break_in_except_body" and r.status == "fallback"]
    assert records and records[-1].fallback_kind.id == "DL022"
    report = dl.explain(break_in_except_body)(x44())
    eager = [b for b in report.breaks if not b.resumed]
    assert eager and eager[0].eager_kind_id == "DL022"
    assert "[DL022 break-in-handler]" in str(report)


def loop_over_a_list_filled_before(x):
    groups = []                        # filled in the stretch that holds the inner loop
    print("made")
    for k in range(3):
        groups.append((k % 2, k))
    total = x
    for kind, k in groups:             # a break inside: the iterator is rebuilt part-way through
        if kind:
            print("odd", k)
            total = total + k
        else:
            total = total * 2
    return total, groups


def test_an_iterator_part_way_through_a_list_the_trace_filled():
    """The list's contents are replayed after the stack is rebuilt: the iterator over it is moved to
    its position once they are there (a list iterator's position cannot pass its list's end).
    `print` is a break inside the inner loop."""
    check(loop_over_a_list_filled_before, x44(), graphs=graphs(2))


class _Indexed(torch.nn.Module):
    """Each iteration indexes another layer with the counter: the stretch after the break is
    specialized per layer (the guards check which layer `self.layers[i]` is)."""
    def __init__(self, n=6):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        for i in range(len(self.layers)):
            print("layer", i)
            x = self.layers[i](x).relu()
        return x


def test_a_loop_stretch_specialized_per_iteration_runs_eagerly_after_the_limit():
    """Values match eager throughout; the stretch stops at config.loop_stretch_limit graphs (DL031)
    instead of one graph per layer."""
    with torch.no_grad():
        check(_Indexed(), x44(), graphs=None)
    records = [r for r in RECORDS if r.status == "fallback" and r.kind is not None and r.kind.id == "DL031"]
    assert records, "the stretch that specializes per layer gives up after config.loop_stretch_limit graphs"
    per_frame = collections.Counter(r.qualname for r in RECORDS if r.graphs)
    assert max(per_frame.values()) <= dl.config.loop_stretch_limit, per_frame


def break_inside_a_comprehension(q, k, v, bounds):
    lengths = bounds[1:] - bounds[:-1]
    t = "outer"                        # a comprehension variable of the same name, shadowed inside
    splits = [torch.split(t, lengths.tolist(), dim=0) for t in (q, k, v)]
    by_key = {i: len(s) for i, s in enumerate(splits)}
    return torch.cat([a + b * c for a, b, c in zip(*splits)]), by_key, t


def test_a_break_inside_a_comprehension_resumes():
    """The comprehension's own list comes into the resume function as an argument (what it
    appends is replayed), and the variable it saved (an inlined comprehension, 3.12+) is restored."""
    rows = lambda: torch.randn(6, 2)   # noqa: E731
    check(break_inside_a_comprehension, rows(), rows(), rows(), torch.tensor([0, 2, 6]), graphs=None)
    ran_eagerly = [r for r in RECORDS if r.name == "break_inside_a_comprehension" and r.status == "fallback"]
    assert not ran_eagerly, [(r.qualname, r.fallback_reason) for r in ran_eagerly]


def comprehension_over_a_view_after_breaks(t):
    for _ in range(2):
        d = dict([("a", t), ("b", t - 1)])
        items = d.items()
        scale = t.abs().mean().item()      # a break
        t = t / (1.0 + scale)
        values = d.values()
        d.setdefault("c", t * 3)
        del d["b"]
        keys = [k for k, _ in items]       # breaks inside (the view's iterator): k and _ saved unbound
        count = len(values)                # a break after the comprehension restored them
        t = t + list(d.values())[-1]
    return t, keys, count


def test_variables_a_comprehension_left_unbound_stay_unbound_across_breaks():
    """A comprehension restores the (unbound) variables it saved by storing NULL: the next break
    must not hand them to its resume function (it crashed the interpreter)."""
    check(comprehension_over_a_view_after_breaks, torch.ones(2), graphs=None)


TOKENS = tuple(range(90, 110))


def loop_over_enumerate_of_ints(x):
    for i, token in enumerate(TOKENS):
        x = x * 0.5 + token
        print(i)
        x = x - i
    return x


def test_the_item_tuple_of_an_enumerate_becomes_graph_inputs():
    """`(i, token)` changes on every iteration: its changing numbers become graph inputs, so the
    stretches keep a fixed number of graphs however long the loop (20 iterations here)."""
    check(loop_over_enumerate_of_ints, torch.ones(3), graphs=graphs(4))



def accumulate_with_a_break(xs, outs):
    for x in xs:
        y = x * 2
        print("step")
        outs.append(y + 1)
    outs.extend([xs[0]])
    return outs[-2], len(outs)


def test_an_accumulator_only_appended_to_keeps_one_graph_per_stretch():
    # `outs` grows each iteration: appending to it reads neither its length nor its items, so the
    # stretch after the break is not specialized per length (it was one graph per iteration, then eager)
    xs = [torch.randn(3) for _ in range(6)]
    result = check(accumulate_with_a_break, xs, [torch.zeros(3)], graphs=None)
    assert result.backend.count <= 3
    assert not [r for r in RECORDS if r.status == "fallback"]


def comprehension_with_a_break(xs):
    return [torch.split(x, x.shape[0] // 2)[0].tolist()[0] * 2 for x in xs]


def test_a_comprehension_with_a_break_in_each_item_reuses_its_stretch():
    # the first item; each later item's stretch (it reads the comprehension's iterator ahead),
    # recaptured once as the float from tolist() becomes a graph input; the exit, where the
    # iterator has run out: one graph call per item, whatever the number of items
    xs = [torch.arange(4.0) + i for i in range(6)]
    result = check(comprehension_with_a_break, xs, graphs=None)
    assert result.backend.count <= 4
    longer = check(comprehension_with_a_break, xs * 3, graphs=None)
    assert longer.backend.count == result.backend.count


class _Accumulating(torch.nn.Module):
    """An accumulator that grows each iteration and requires grad once the first layer output is
    in it: the stretch after the break misses on it once (its size becomes dynamic, its
    requires_grad flips), which is not a graph per iteration."""
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        out = torch.zeros(1, 4)
        for i in range(5):
            print("step", i)
            out = torch.cat([out, self.lin(x).sum(0, keepdim=True) * i])
        return out


def test_a_loop_stretch_miss_the_next_capture_covers_does_not_count_toward_the_limit(monkeypatch):
    """A tensor whose requires_grad flipped, or whose sizes changed in dims that become dynamic,
    is met by the next capture in every later iteration: the loop keeps its graphs (no DL031)
    even with loop_stretch_limit 1."""
    monkeypatch.setattr(dl.config, "loop_stretch_limit", 1)
    check(_Accumulating(), x44(), graphs=None)
    assert not [r for r in RECORDS if r.kind is not None and r.kind.id == "DL031"]


class _ReversedFlows(torch.nn.Module):
    """VITS' flows run in reverse: `reversed(ModuleList)` (a `reversed` object, the module list has
    no __reversed__) live across a break in the loop."""
    def __init__(self):
        super().__init__()
        self.flows = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(4))

    def forward(self, x):
        for i, flow in enumerate(reversed(self.flows)):
            x = flow(x).tanh()
            print("flow", i)
        return x


def test_a_reversed_module_list_is_handed_on_at_a_break():
    """The `reversed` iterator made in the trace is rebuilt standing where the trace left it, and
    the resumed loop reads it ahead like a list's iterator: one body graph for every iteration."""
    with torch.no_grad():
        check(_ReversedFlows(), x44(), graphs=graphs(2))


def reversed_list_with_break(x, items):
    for k in reversed(items):
        print("item", k)
        x = x * k
    return x


def test_a_reversed_list_iterator_live_across_a_break():
    check(reversed_list_with_break, x44(), [1.0, 2.0, 3.0], graphs=None)


def unpack_a_generator_that_breaks(x, grid):
    y = x * 2
    h, w = (int(v) for v in grid)        # int(tensor) inside the generator: a break
    return y[:h, :w] + 1


def generator_made_before_a_break(x, grid):
    k = 2
    gen = (int(v) * k for v in grid)
    print("made", gen.__qualname__)
    k = 3                                  # the generator runs later and sees this k (a shared cell)
    return x * sum(gen), k


def test_a_generator_not_started_at_a_break_is_made_again():
    """HunYuan-VL's `grid_h, grid_w = (int(value) for value in grid_hw)`: a generator expression
    made in the trace, not started when the break comes, is made again from its function, its
    arguments and its cells (the frame ran eagerly: DL021)."""
    grid = torch.tensor([3, 4])
    check(unpack_a_generator_that_breaks, torch.randn(5, 6), grid, graphs=graphs(2))
    check(generator_made_before_a_break, torch.randn(3), grid, graphs=None)


def groupby_loop_with_breaks(x, types, grids):
    """HunYuan-VL's spans: a loop over `itertools.groupby` made in the trace, live at a break."""
    spans = []
    grid_iter = iter(grids)
    for kind, group in itertools.groupby(enumerate(types.tolist()), lambda t: t[1]):
        if kind != 1:
            continue
        group = list(group)
        g = next(grid_iter)
        spans.append((group[0][0], group[-1][0] + 1, int(g.sum())))
        x = x * 2
    return x, spans


def groupby_group_left_part_way(x, items):
    """Each group's first item only: at the break the groupby has not read past its group, which
    the next step must skip (CPython's own state, rebuilt)."""
    out = []
    for k, grp in itertools.groupby(items, lambda v: v // 10):
        first = next(grp)
        del grp
        print("group", k)
        out.append((k, first))
        x = x + first
    return x, out


def test_a_groupby_live_at_a_break_is_handed_on_in_its_state():
    grids = [torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([5, 6])]
    check(groupby_loop_with_breaks, torch.randn(3), torch.tensor([0, 1, 1, 0, 1, 2, 2, 1]), grids, graphs=None)
    check(groupby_group_left_part_way, torch.randn(3), [1, 2, 3, 11, 12, 25, 31, 32], graphs=None)
    assert not [r for r in RECORDS if r.status == "fallback"], [r.detail for r in RECORDS]


# ---- sizes that change from iteration to iteration ------------------------------------------------

def routed_experts(x, ids, w):
    """A mixture-of-experts loop (switch_transformers' shape): the experts hit come from nonzero,
    each takes the rows routed to it (`torch.where`: a break whose sizes depend on the data)."""
    out = torch.zeros_like(x)
    hit = torch.greater(torch.bincount(ids, minlength=4), 0).nonzero()
    for e in hit:
        idx, = torch.where(ids == e)
        out.index_add_(0, idx, torch.relu(x[idx] @ w) * 2)
    return out


def masked_rows_then_print(x, ids):
    """Rows picked by a mask (a break), worked on, then a print (a break): the stretch after the
    print gets a tensor whose rows were a symbolic size in the graph that made it."""
    total = x.sum()
    for k in ids.unique():
        rows = x[ids == k]
        y = rows * 2 + 1
        print("expert")
        total = total + (y.sin() * 3).sum()
    return total


def test_sizes_that_depend_on_data_are_symbolic_from_the_first_capture():
    """What a break at nonzero / a boolean mask / torch.where leaves, and what a graph made from
    it with a symbolic size, is handed to the resume function with those dims symbolic at once
    (convert_frame._hand_on_dynamic_sizes): each stretch is captured once, not first for one
    size and then again for all (every expert here gets a different number of rows)."""
    def resized():
        return [r.recompile_reason for r in RECORDS if r.recompile_reason and "size" in r.recompile_reason]
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 1, 0])
    # before bincount; after it up to nonzero; the loop's head through `ids == e`; the expert's
    # stretch through the next head; the same stretch where the loop ends (one more before: the
    # expert's stretch for 4 rows, then for any number)
    check(routed_experts, torch.randn(16, 8), ids, torch.randn(8, 8), graphs=graphs(5))
    assert not resized(), resized()
    # before unique; the loop's head through `ids == k`; a mask's rows worked on; after the print
    # through the next mask; the same where the loop ends (two more before: the two stretches
    # after the mask for 4 rows, then for any number)
    check(masked_rows_then_print, torch.randn(16, 8), ids, graphs=graphs(5))
    assert not resized(), resized()
