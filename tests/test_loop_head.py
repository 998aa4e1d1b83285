"""A `for` loop with a graph break inside: the stretch before the loop ends at its head, and the
loop body's stretches start there on every iteration, so one graph serves every iteration
(convert_frame._split_at_loop_head, registry kind DL038). Around it: a loop stretch that is a
single op with nothing to fuse runs as is (config.loop_single_ops_as_is), and a graph made again
with the same ops and inputs reuses what the backend made of it (convert_frame.COMPILED).

Differential throughout (harness.check: values, printed output, mutated inputs, a second call
that captures nothing new), plus the graphs the backend is given.
"""
import torch

import dynamo_lite as dl
from dynamo_lite import config
from dynamo_lite.fallback.records import RECORDS
from harness import CountingBackend, Graphs, call_both, check, reset

SPLIT = "dynamo_lite resumes at the loop head; TorchDynamo runs a frame with a break in a loop eagerly"


def graphs(n: int) -> Graphs:
    return Graphs(dl=n, torch=None, why=SPLIT)


def x44():
    return torch.randn(4, 4)


def body_then_print(x, items):
    x = x.cos()
    for w in items:
        x = torch.tanh(x @ w) * 2 + 1
        print("norm", x.shape)
        x = x - 0.5
    return x.sum()


def _ops_of(backend):
    return [sorted(str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
            for gm in backend.graphs]


def test_the_body_graph_is_the_same_for_every_iteration():
    # before the loop (cos); the body up to the print (one graph for every iteration, whatever
    # the count: the head splits it from what came before); after the print (x - 0.5, then the
    # loop head again: a single op, run as is); the end (a sum: one kernel, run as is too)
    ws = [torch.randn(4, 4) for _ in range(5)]
    few = check(body_then_print, x44(), ws[:2], graphs=graphs(2)).backend
    many = check(body_then_print, x44(), ws, graphs=graphs(2)).backend
    assert _ops_of(few) == _ops_of(many)
    heads = [r for r in RECORDS if r.kind is not None and r.kind.id == "DL038"]
    assert heads and all("DL005 print-or-log" in r.detail for r in heads), [r.detail for r in heads]


def experts_over_the_rows_they_got(x, ids, ws):
    """A mixture-of-experts loop: the loop's head picks an expert's rows (one op, then a break:
    nonzero), the rest of the iteration is real work (a graph)."""
    out = torch.zeros_like(x)
    for e, w in enumerate(ws):
        idx, = torch.where(ids == e)
        out.index_add_(0, idx, torch.relu(x[idx] @ w) * 2)
    return out


def test_the_end_of_an_iteration_is_one_graph_whether_the_loop_goes_on_or_ends():
    # before the loop (zeros_like); an iteration's end (a graph, for every iteration and also the
    # last: the head after it, one op to the break, is not glued to it, so neither is the code
    # after the loop); the head (ids == e: a single op, run as is); after the loop (no op)
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 1])
    ws = [torch.randn(4, 4) for _ in range(3)]
    check(experts_over_the_rows_they_got, torch.randn(10, 4), ids, ws, graphs=graphs(2))
    check(experts_over_the_rows_they_got, torch.randn(5, 4), ids[:5], ws[:2], graphs=graphs(2))
    ends = [r for r in RECORDS if r.graphs and any(n.target == "index_add_" for n in r.graphs[0].graph.nodes)]
    assert len(ends) == 1, [r.recompile_reason for r in ends]


def _patches_merged_by_their_sizes(x, sizes, w):
    """Mistral3's patch merger: a loop over images whose sizes are 0-d tensors read by view()
    (under dynamic sizes, symbols for their values), after a break at the loop's head."""
    out = []
    start = 0
    for i, (h, wd) in enumerate(sizes):
        n = h * wd
        patch = x[start:start + n].view(h, wd, -1)
        print("image", i)
        out.append(patch.permute(2, 0, 1).flatten(1).t() @ w)
        start = start + n
    return torch.cat(out)


def test_sizes_read_from_0d_tensors_in_a_split_loop_are_guarded():
    x, w = torch.randn(40, 4), torch.randn(4, 3)
    sizes = [(torch.tensor(2), torch.tensor(4)), (torch.tensor(4), torch.tensor(8))]
    check(_patches_merged_by_their_sizes, x, sizes, w, graphs=None)
    check(_patches_merged_by_their_sizes, x, sizes[::-1], w, graphs=None)


def _long_loop():
    """A loop with a break inside whose body is long enough that its FOR_ITER's jump needs an
    EXTENDED_ARG prefix, which the backward jump lands on."""
    body = "\n".join("        y = y * 1.0001 + 0.0001" for _ in range(120))
    source = f"""
def long_loop(x, ws):
    for w in ws:
        y = x @ w
{body}
        print("step")
        x = y.tanh()
    return x
"""
    namespace = {"torch": torch}
    exec(compile(source, "<long_loop>", "exec"), namespace)
    return namespace["long_loop"]


def test_a_loop_whose_head_has_an_extended_arg_splits_there_too():
    import dis
    fn = _long_loop()
    assert any(i.opname == "EXTENDED_ARG" and i.offset + 2 in {j.offset for j in dis.get_instructions(fn)
                                                              if j.opname == "FOR_ITER"}
               for i in dis.get_instructions(fn))
    # the body up to the print, one graph for every iteration (nothing before the loop; after
    # the print, a single op to the next head, run as is)
    check(fn, x44(), [torch.randn(4, 4) for _ in range(3)], graphs=graphs(1))


def body_over(x, kind):
    rows = {"list": [x, x * 2, x * 3], "tuple": (x, x + 1), "dict": {"a": x, "b": -x}}
    total = x.sum() * 0
    if kind == "range":
        for i in range(3):
            total = total + (x * i).sum()
            print("i", i)
    elif kind == "enumerate":
        for i, row in enumerate(rows["list"]):
            total = total + row.sum() * i
            print("i", i)
    elif kind == "zip":
        for a, b in zip(rows["list"], rows["tuple"]):
            total = total + (a * b).sum()
            print("pair")
    elif kind == "dict":
        for key, value in rows["dict"].items():
            total = total + value.sum()
            print("key", key)
    elif kind == "tensor":
        for row in x:
            total = total + row.relu().sum()
            print("row")
    else:
        for row in rows[kind]:
            total = total + row.exp().sum()
            print("row")
    return total


def test_every_kind_of_iterator_stays_correct():
    """Iterators the head can hand over for real, and those it cannot (the break then stays
    where it was): values and printed output match eager for each."""
    for kind in ("range", "list", "tuple", "enumerate", "zip", "dict", "tensor"):
        check(body_over, x44(), kind, graphs=None)


def test_a_loop_whose_iterator_is_a_generator_keeps_its_break():
    def gen(n):
        for i in range(n):
            yield i

    def f(x):
        for i in gen(3):
            x = x * 2 + i
            print(i)
        return x
    check(f, x44(), graphs=None)


def test_a_loop_inside_a_with_block():
    def f(x, ws):
        with torch.no_grad():
            for w in ws:
                x = torch.relu(x @ w)
                print("in no_grad")
        return x + 1
    check(f, x44(), [torch.randn(4, 4) for _ in range(3)], graphs=None)


def test_nested_loops_with_a_break_in_the_inner_one():
    def f(x, outer, inner):
        for a in outer:
            x = x * a
            for b in inner:
                x = torch.sin(x + b)
                print("inner")
            x = x.cos()
        return x
    check(f, x44(), [1.5, 2.0, 0.5], [0.1, 0.2], graphs=None)


def test_loop_with_break_continue_and_else():
    def f(x, ws):
        for i, w in enumerate(ws):
            if i == 1:
                continue
            x = torch.tanh(x @ w)
            print("at", i)
            if i == 3:
                break
        else:
            x = x * 100
        return x
    check(f, x44(), [torch.randn(4, 4) for _ in range(5)], graphs=None)
    check(f, x44(), [torch.randn(4, 4) for _ in range(3)], graphs=None)


# ---- a single op in a loop stretch runs as is ------------------------------------------------------

def accumulate(items):
    total = 0.0
    for x in items:
        loss = (x @ x.T).tanh().mean()
        print("loss ready")
        total = total + loss.detach()
    return total


def test_a_single_op_stretch_is_not_handed_to_the_backend():
    items = [torch.randn(4, 4) for _ in range(3)]
    backend = check(accumulate, items, graphs=graphs(1)).backend
    (ops,) = _ops_of(backend)           # the body's graph only
    assert "mean" in ops and "add" not in str(ops), ops
    assert any(r.ops_as_is for r in RECORDS)      # total + loss.detach(): detach and one add


def test_single_ops_go_to_the_backend_when_asked(monkeypatch):
    items = [torch.randn(4, 4) for _ in range(3)]
    monkeypatch.setattr(config, "loop_single_ops_as_is", False)
    # the body from the loop head (nothing comes before it); then `total + loss.detach()` is a
    # graph op, so it stays glued to the next iteration's body, for a float and for a tensor
    # total; and to the loop's end
    check(accumulate, items, graphs=graphs(4))


def mark_indicators(ids, embeds, features, indicator_ids):
    """Ovis2's visual indicators: each indicator's mask and a branch on whether it occurs."""
    for i, k in enumerate(indicator_ids):
        mask = ids == k
        if mask.any():                         # a break: the comparison and `any` both outlive the graph
            embeds[mask] = features[i]
    return (embeds * 2).tanh()


def test_a_stretch_whose_results_all_outlive_it_runs_as_is():
    ids = torch.tensor([[1, 5, 7, 5], [7, 2, 5, 1]])
    args = (ids, torch.randn(2, 4, 3), torch.randn(3, 3), [5, 7, 9])
    backend = check(mark_indicators, *args, graphs=graphs(1)).backend
    (ops,) = _ops_of(backend)                  # only the end: `(embeds * 2).tanh()`
    assert "tanh" in str(ops) and "any" not in str(ops), ops
    assert any(r.ops_as_is for r in RECORDS)


def test_an_intermediate_keeps_the_stretch_a_graph():
    def counted(ids, embeds, indicator_ids):
        for k in indicator_ids:
            hits = (ids == k).sum()            # `ids == k` is used only inside: worth a kernel
            if hits > 1:
                embeds = embeds + 1
        return embeds
    backend = check(counted, torch.tensor([1, 5, 5, 2]), torch.randn(3), [5, 2], graphs=None).backend
    assert any("sum" in str(ops) for ops in _ops_of(backend))


def few_ops_before_the_head(x, y, items):
    pair = [x, torch.where(x > 0, x, y)]       # two one-kernel ops, then the loop's head
    for a, b in zip(items, pair):
        scale = a.sum().item()                 # a break inside the loop
        y = a * scale + b
    return y.exp()


def test_a_few_ops_before_a_loop_head_with_a_break_inside():
    # (the stretch before the head has no output yet: once an internal error, StopIteration,
    # found by the fuzzer, seed 41)
    check(few_ops_before_the_head, torch.randn(5), torch.randn(5), [torch.randn(5), torch.randn(5)], graphs=None)
    assert not [r for r in RECORDS if r.status == "error"], [r.detail for r in RECORDS if r.status == "error"]


# ---- one stretch, two resume functions: compiled once ---------------------------------------------

def accumulate_in_with(items):
    total = 0.0
    for x in items:
        with torch.enable_grad():
            # `loss` is live at the loop head (were the block to swallow an exception, the print
            # and the add would read the previous iteration's): the body's resume function taken
            # from before the loop (no `loss` yet) and from the previous iteration (a `loss` to
            # hand on) are two code objects with one graph
            loss = (x @ x.T).tanh().mean()
        print("loss ready")
        total = total + loss.detach()
    return total


def test_one_stretch_entered_with_other_locals_bound_is_compiled_once():
    items = [torch.randn(4, 4) for _ in range(4)]
    check(accumulate_in_with, items, graphs=graphs(1))
    # the second resume function's graph is the first's, compiled once: counted once
    bodies = [r for r in RECORDS if r.graphs and "mean" in r.graphs[0].code]
    shared = [r for r in RECORDS if r.graphs_shared]
    assert len(bodies) == 1 and len(shared) == 1 and shared[0].code is not bodies[0].code, (bodies, shared)
    report = dl.explain(accumulate_in_with)(items)
    assert report.graph_count == 1 and "its compiled form is reused" in str(report), str(report)


def test_equal_graphs_of_other_code_or_of_a_recapture_are_compiled_again():
    reset()
    backend = CountingBackend()

    def one(x):
        return (x * 2).relu() + 1

    def two(x):
        return (x * 2).relu() + 1
    a, b = dl.capture(one, backend=backend), dl.capture(two, backend=backend)
    x = x44()
    call_both(one, a, (x,), {}, "one")
    call_both(two, b, (x,), {}, "two: the same graph in another function")
    assert backend.count == 2
    call_both(one, a, (x.double(),), {}, "another dtype")
    assert backend.count == 3


def test_explain_says_which_ops_ran_as_they_are_and_why_the_loop_head_broke():
    items = [torch.randn(4, 4) for _ in range(3)]
    report = dl.explain(accumulate)(items)
    text = str(report)
    assert "run as they are, no graph" in text, text
    assert report.graph_count == 1, text
    assert any(b.kind_id == "DL038" for b in report.breaks), [b.kind_id for b in report.breaks]


# ---- slices with tensor bounds --------------------------------------------------------------------

def block_mask(sizes, x):
    """A block-diagonal mask filled a block at a time, bounds from iterating cumsums (pixtral)."""
    mask = torch.full((x.shape[1], x.shape[1]), -1e9)
    ends = torch.tensor(sizes).cumsum(-1)
    starts = torch.tensor([0] + sizes[:-1]).cumsum(-1)
    for start, end in zip(starts, ends):
        mask[start:end, start:end] = 0
    return mask[None].expand(x.shape[0], -1, -1) + x.sum()


def test_a_loop_slicing_by_tensor_bounds():
    # the slice is built from 0-d tensors: its bounds need their Python values (a break, then
    # a break at the loop head); the resumed code gets the slice on its stack and must treat its
    # bounds as tensors, never as constants (a real tensor reaching a traced op)
    check(block_mask, [3, 3, 4], torch.randn(2, 10, 4), graphs=Graphs(dl=2, torch=None, why=SPLIT))
    check(block_mask, [2, 8], torch.randn(2, 10, 4), graphs=Graphs(dl=2, torch=None, why=SPLIT))


def fill_between(x, where):
    x[where] = 0
    return x * 2


def test_a_slice_with_tensor_bounds_passed_in():
    check(fill_between, torch.randn(6), slice(torch.tensor(1), torch.tensor(4)), graphs=None)
    check(fill_between, torch.randn(6), slice(1, 4), graphs=1)


def length_regulator(emb, durations):
    """FastSpeech2's length regulator: each row repeated by its durations into a padded tensor."""
    max_len = durations.sum(dim=1).max()
    out = torch.zeros(emb.size(0), max_len, emb.size(2))        # max_len's value: a break
    for i, (e, d) in enumerate(zip(emb, durations)):
        rep = torch.repeat_interleave(e, d, dim=0)                # a data-dependent shape: a break
        out[i, :rep.size(0)] = rep
    return out


def test_stretches_of_views_or_one_write_run_as_is():
    # the iterator's unbinds (views only, in a resume function) and each row's write (one op, in
    # the loop) have nothing for a backend: only the sums before the first break make a graph
    emb, durations = torch.randn(3, 4, 5), torch.tensor([[1, 2, 0, 1], [0, 0, 3, 1], [2, 2, 2, 2]])
    check(length_regulator, emb, durations, graphs=graphs(1))
    assert sum(r.ops_as_is for r in RECORDS) >= 3
