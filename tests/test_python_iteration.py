"""The iteration protocol while tracing (issue 12): differential tests, eager vs captured.

* the protocol on any object: `__iter__` returning self / another iterator / a generator,
  `__next__` raising StopIteration, the old `__getitem__` protocol, `iter()` / `next()`, `in`
  falling back to iteration, list subclasses read from the frame; a list's, tuple's or range's
  iterator made outside the frame is read ahead and moved on, other iterators made outside are
  refused (DL020);
* generators as lazy iterators: the body runs only as far as it is consumed (side effects and
  prints interleave as in eager), infinite generators, `yield from` and return values, send /
  throw / close; a generator outliving the trace part-way is refused (DL021);
* itertools, functools.reduce and the builtins over any iterable (lazy where Python is lazy);
* iterating tensors (unbind along dim 0), static and dynamic.

Each test checks values, exceptions, printed output, mutated inputs and the graph count (run
with DL_TEST_REFERENCE=torch to validate the expectations against TorchDynamo).
"""
from __future__ import annotations

import functools
import itertools
import operator

import pytest
import torch

import dynamo_lite as dl
from dynamo_lite.fallback.records import RECORDS
from harness import Graphs, REFERENCE, CountingBackend, check, reset, skip_in_reference

rows = torch.randn(4, 3)


def break_kinds(fn) -> set:
    """The break kinds recorded for `fn`'s frames in the last capture (dynamo_lite only)."""
    return {r.kind.id for r in RECORDS if r.name == fn.__name__ and r.kind is not None}


def expect_refused(fn, kind: str) -> None:
    if not REFERENCE:
        assert kind in break_kinds(fn), f"{fn.__name__}: expected a {kind} break, got {break_kinds(fn)}"


# =============================================================================================
# 1. the iteration protocol on any object
# =============================================================================================

class CountUp:
    """An iterator object: __iter__ returns self, __next__ raises StopIteration at the end."""

    def __init__(self, n):
        self.n, self.i = n, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class Bag:
    """An iterable whose __iter__ returns another iterator."""

    def __init__(self, *items):
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)


class Squares:
    """An iterable whose __iter__ is a generator function."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield i * i


class OldSequence:
    """Only __getitem__: iterated by index until IndexError (the old sequence protocol)."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i + 10


def test_user_iterator_in_a_loop():
    def f(x):
        for i in CountUp(3):
            x = x * i
        return x
    check(f, rows, graphs=1)


def test_user_iterator_consumers():
    def f(x):
        a, b, c = CountUp(3)
        first, *rest = CountUp(4)
        return x * a + b * c, first, rest, list(CountUp(2)), tuple(CountUp(1)), sum(CountUp(4)), [*CountUp(2)]
    check(f, rows, graphs=1)


def test_user_iterator_passed_in_advances_it():
    def f(x, it):
        return [x * i for i in it], it.i
    check(f, rows, CountUp(3), graphs=1)


def test_iter_returning_another_iterator_and_a_generator():
    def f(x):
        return [x + i for i in Bag(1, 2, 3)], [x * s for s in Squares(3)], list(zip(Bag("a", "b"), Squares(5)))
    check(f, rows, graphs=1)


def test_old_sequence_protocol():
    def f(x):
        return [x * i for i in OldSequence(3)], list(enumerate(OldSequence(2))), 11 in OldSequence(3)
    check(f, rows, graphs=1)


def test_iter_and_next_builtins_on_objects():
    def f(x):
        it = iter(Bag(1, 2))
        a = next(it)
        b = next(it)
        c = next(it, -1)
        counter = iter(CountUp(2))
        return x * (a + b + c), next(counter), counter.__next__(), next(counter, "done")
    check(f, rows, graphs=1)


def test_next_past_the_end_raises_stopiteration():
    def f(x):
        it = iter(CountUp(1))
        next(it)
        try:
            next(it)
        except StopIteration:
            return x + 1
        return x
    check(f, rows, graphs=1)


def test_in_falls_back_to_iteration():
    def f(x):
        return x * (3 in CountUp(5)), 7 in CountUp(5), 2 in Bag(1, 2), 1 in Squares(3), 12 in OldSequence(2)
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo answers `x in [x]` with a tensor")
def test_in_a_list_of_tensors():
    def f(x):
        return x + 1, None in [x, x], "a" in (x,), x in [x]
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo answers False")
def test_number_in_a_list_of_tensors_compares_by_value():
    def f(x):
        y = x + 1
        return y, 2 in [x.sum().round()]
    check(f, torch.ones(2), graphs=1)       # `2 == tensor(2.)` is the tensor's truth: a break
    expect_refused(f, "DL003")


def test_in_consumes_an_iterator_up_to_the_item():
    def f(x):
        it = iter([1, 2, 3, 4])
        found = 2 in it
        return x * found, list(it)
    check(f, rows, graphs=1)


class NotIterable:
    pass


class BadIter:
    def __iter__(self):
        return [1, 2]


@pytest.mark.parametrize("make", [NotIterable, BadIter], ids=["not_iterable", "iter_returns_a_list"])
def test_iterating_a_non_iterable_raises_typeerror(make):
    def f(x):
        y = x + 1
        try:
            for _ in make():
                pass
        except TypeError as e:
            return y, e.args
        return y, ""
    check(f, rows, graphs=1)


class Processors(list):
    """A list subclass iterated as a list (transformers' LogitsProcessorList)."""

    def __call__(self, x):
        for p in self:
            x = p(x)
        return x


def test_list_subclass_read_from_the_frame():
    procs = Processors([torch.relu, torch.sigmoid, torch.tanh])

    def f(x, procs):
        return procs(x) + len([p for p in procs])
    check(f, rows, procs, graphs=1)


def run_with_fresh(fn, make_args):
    """Eager and captured on fresh arguments (for inputs deepcopy cannot copy or compare)."""
    reset()
    captured = dl.capture(fn, backend=CountingBackend())
    for _ in range(2):
        expected, got = fn(*make_args()), captured(*make_args())
        torch.testing.assert_close(got, expected)


class Config:
    """Iterates its attribute names through a generator with `yield from` (transformers'
    PreTrainedConfig.__iter__, read by validate_token_ids)."""

    def __init__(self):
        self.pad_token_id, self.vocab_size, self.name = 3, 10, "cfg"

    def _keys(self, attributes):
        for key in attributes:
            if not key.startswith("_"):
                yield key

    def __iter__(self):
        yield from self._keys(self.__dict__)


def test_config_iterated_through_yield_from():
    def f(x, config):
        total = 0
        for name in config:
            value = getattr(config, name)
            if name.endswith("_token_id") and isinstance(value, int) and 0 <= value < config.vocab_size:
                total += value
        return x + total
    check(f, rows, Config(), graphs=1)


def take_two(x, it):
    first = next(it)
    return x * first + next(it)


def drain_into(x, it):
    return x * len(list(it)), x + sum(it, torch.zeros(3))


SEQUENCES = {"list": lambda xs: list(xs), "tuple": lambda xs: tuple(xs),
             "range": lambda xs: range(len(xs))}


@pytest.mark.parametrize("kind", SEQUENCES)
def test_an_iterator_made_outside_is_read_ahead_and_left_where_eager_leaves_it(kind):
    """A list's, tuple's or range's iterator passed in (a loop live across a break hands one to its
    resume function): the captured code reads the items ahead of it, from wherever it stands, and
    moves it on as eager does; the graph does not depend on the position."""
    reset()
    backend = CountingBackend()
    captured = dl.capture(take_two, backend=backend)
    items = [torch.randn(3) for _ in range(6)]
    for skip in (0, 1, 3, 0, 4):
        its = [iter(SEQUENCES[kind](items)) for _ in range(2)]
        for it in its:
            for _ in range(skip):
                next(it)
        expected, got = take_two(torch.ones(3), its[0]), captured(torch.ones(3), its[1])
        torch.testing.assert_close(got, expected)
        assert list(its[1]) == list(its[0]) if kind == "range" else \
            [t.tolist() for t in its[1]] == [t.tolist() for t in its[0]]
    # tensors: one graph at every position; ints (range): one, then one with the number as an input
    assert backend.count == (2 if kind == "range" else 1)
    assert "DL020" not in break_kinds(take_two)


def take_two_pairs(x, it):
    i, a = next(it)
    j, b = next(it)
    return x * a + b * (i + j)


PAIRS = {"enumerate": lambda xs: enumerate(list(xs), 3),
         "zip": lambda xs: zip(xs, tuple(t * 2 for t in xs)),
         "zip of enumerate": lambda xs: zip(range(len(xs)), enumerate(xs))}


@pytest.mark.parametrize("kind", PAIRS)
def test_an_enumerate_or_zip_made_outside_is_read_ahead_too(kind):
    """enumerate / zip over list, tuple or range iterators: their items are read ahead the same way
    (the count of an enumerate becomes a graph input once it is seen changing)."""
    reset()
    backend = CountingBackend()
    captured = dl.capture(take_two_pairs if kind != "zip of enumerate" else
                          lambda x, it: take_two_pairs(x, ((i, e[1] * e[0]) for i, e in it)), backend=backend)
    items = [torch.randn(3) for _ in range(7)]
    for skip in (0, 2, 1, 4):
        seqs = [PAIRS[kind](items) for _ in range(2)]
        for it in seqs:
            for _ in range(skip):
                next(it)
        expected = (take_two_pairs if kind != "zip of enumerate" else
                    lambda x, it: take_two_pairs(x, ((i, e[1] * e[0]) for i, e in it)))(torch.ones(3), seqs[0])
        torch.testing.assert_close(captured(torch.ones(3), seqs[1]), expected)
        torch.testing.assert_close(list(seqs[1]), list(seqs[0]))
    assert backend.count <= 3
    assert "DL020" not in {r.kind.id for r in RECORDS if r.kind is not None}


def test_a_zip_run_out_leaves_its_iterators_where_eager_does():
    """zip takes an item from its first iterator before it finds the second one run out: the
    replay moves the real zip, so the first iterator loses that item in both runs."""
    def f(x, it):
        return sum((a * b for a, b in it), x)

    def run(fn):
        firsts, seconds = [torch.randn(3) for _ in range(5)], [torch.randn(3) for _ in range(3)]
        a, b = iter(firsts), iter(seconds)
        return fn(torch.zeros(3), zip(a, b)), list(a), list(b)
    torch.manual_seed(0)
    expected = run(f)
    reset()
    torch.manual_seed(0)
    got = run(dl.capture(f, backend=CountingBackend()))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("kind", ["list", "tuple"])
def test_an_iterator_made_outside_run_out_in_captured_code(kind):
    """Draining it: its end is guarded as 'exactly n left' and it is left run out, as eager
    leaves it (a list it runs over that grows later is not seen by it)."""
    reset()
    captured = dl.capture(drain_into, backend=CountingBackend())
    for n, skip in ((4, 1), (4, 1), (5, 0), (3, 3)):
        items = [torch.randn(3) for _ in range(n)]
        seqs = [SEQUENCES[kind](items) for _ in range(2)]
        its = [iter(seq) for seq in seqs]
        for it in its:
            for _ in range(skip):
                next(it)
        expected, got = drain_into(torch.ones(3), its[0]), captured(torch.ones(3), its[1])
        torch.testing.assert_close(got, expected)
        if kind == "list":
            for seq in seqs:
                seq.append(torch.zeros(3))
        for it in its:
            with pytest.raises(StopIteration):
                next(it)


def test_an_iterator_over_a_list_the_captured_code_also_changes_is_refused():
    """The items ahead are read as they were when the frame was called: not when the code also
    reaches the list itself (it could change it first), so that next() is a break (DL020)."""
    def f(x, lst, it):
        lst.insert(0, x * 2)
        return next(it) + 1

    def run(fn):
        lst = [torch.ones(3), torch.zeros(3)]
        it = iter(lst)
        return fn(torch.full((3,), 5.0), lst, it), [t.tolist() for t in it], [t.tolist() for t in lst]
    reset()
    captured = dl.capture(f, backend=CountingBackend())
    for _ in range(2):
        torch.testing.assert_close(run(captured), run(f))
    expect_refused(f, "DL020")


def test_generator_made_outside_is_refused():
    def gen():
        yield 1
        yield 2

    def f(x, g):
        return x * next(g), list(g)
    run_with_fresh(f, lambda: (rows, gen()))
    expect_refused(f, "DL020")


def test_list_grows_while_a_loop_runs_over_it():
    def f(x, work):
        done = []
        for item in work:
            if item < 3:
                work.append(item + 2)
            done.append(x * item)
        return done
    check(f, rows, [0, 1], graphs=1)


def test_dict_changing_size_while_iterated_raises():
    def f(x):
        d = {"a": 1}
        try:
            for k in d:
                d[k + "!"] = 2
        except RuntimeError as e:
            return x + len(d), e.args
        return x, ""
    check(f, rows, graphs=1)


# =============================================================================================
# 2. generators: lazy, suspended between items
# =============================================================================================

def logged_range(log, n):
    for i in range(n):
        log.append(i)
        yield i


def test_generator_consumed_partly_by_break():
    def f(x, log):
        for i in logged_range(log, 5):
            x = x + i
            if i == 1:
                break
        return x
    check(f, rows, [], graphs=1)


def test_generator_advanced_by_next():
    def f(x, log):
        g = logged_range(log, 5)
        a = next(g)
        b = next(g)
        return x * (a + b)
    check(f, rows, [], graphs=1)


def test_generator_side_effects_interleave_with_the_consumer():
    def f(x, log):
        for i in logged_range(log, 3):
            log.append(("consumer", i))
            x = x * 2
        return x
    check(f, rows, [], graphs=1)


def test_generator_prints_interleave():
    def chatty(n):
        for i in range(n):
            print("yield", i)
            yield i

    def f(x):
        for i in chatty(2):
            print("got", i)
        return x + 1
    check(f, rows, graphs=0)      # print inside a loop: the frame runs eagerly


def test_infinite_generator_with_break_islice_zip():
    def naturals():
        n = 0
        while True:
            yield n
            n += 1

    def f(x):
        total = x
        for n in naturals():
            if n > 3:
                break
            total = total + n
        return total, list(itertools.islice(naturals(), 2, 5)), list(zip("ab", naturals()))
    check(f, rows, graphs=1)


def test_generator_expression_is_lazy():
    def f(x, log):
        squares = (log.append(i) or i * i for i in range(10))
        return x * any(s > 3 for s in squares), next(squares)
    check(f, rows, [], graphs=1)


def test_generator_over_tensors():
    def f(x):
        g = (r * i for i, r in enumerate(x))
        first = next(g)
        return first, sum(g)
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo gives None as the value of `yield from` a generator that returns")
def test_yield_from_and_return_values():
    def inner(n):
        for i in range(n):
            yield i
        return n * 10

    def outer():
        got = yield from inner(2)
        yield got
        got = yield from [7, 8]
        yield got

    def f(x):
        return x + 1, list(outer())
    check(f, rows, graphs=1)


def test_return_value_carried_by_stopiteration():
    def gen():
        yield 1
        return "done"

    def f(x):
        g = gen()
        next(g)
        try:
            next(g)
        except StopIteration as e:
            return x + 1, e.value
        return x, None
    check(f, rows, graphs=1)


def test_generator_send():
    def accumulator():
        total = 0
        while True:
            value = yield total
            if value is None:
                return total
            total += value

    def f(x):
        acc = accumulator()
        next(acc)
        acc.send(2)
        t = acc.send(3)
        return x * t
    check(f, rows, graphs=1)


def test_generator_close_runs_finally():
    def guarded(log):
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")

    def f(x, log):
        g = guarded(log)
        a = next(g)
        g.close()
        g.close()
        return x + a, list(g)
    check(f, rows, [], graphs=1)


def test_generator_throw_caught_in_the_body():
    def resilient(log):
        while True:
            try:
                yield len(log)
            except ValueError as e:
                log.append(e.args)

    def f(x, log):
        g = resilient(log)
        next(g)
        n = g.throw(ValueError("bad"))
        g.close()                   # GeneratorExit passes through `except ValueError`
        return x * n
    check(f, rows, [], graphs=1)


@skip_in_reference("TorchDynamo loses the RuntimeError's message")
def test_generator_raising_stopiteration_is_a_runtimeerror():
    def broken():
        yield 1
        raise StopIteration("inner")

    def f(x):
        y = x * 2
        try:
            return list(broken())
        except RuntimeError as e:
            return y, e.args
    check(f, rows, graphs=1)


def test_exception_from_a_generator_reaches_the_consumer():
    def failing():
        yield 1
        raise KeyError("k")

    def f(x):
        got = []
        try:
            for v in failing():
                got.append(x * v)
        except KeyError:
            got.append(x)
        return got
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo never runs the finally of the dropped generator")
def test_generator_dropped_inside_try_is_refused():
    def guarded(log):
        try:
            yield 1
            yield 2
        finally:
            log.append("cleanup")

    def f(x, log):
        for v in guarded(log):
            x = x + v
            break
        log.append("after loop")
        return x
    check(f, rows, [], graphs=0)      # DL021: eager runs the finally when the generator is dropped
    expect_refused(f, "DL021")


def test_generator_returned_unconsumed_is_made_again():
    """Not started: made again from its function, arguments and cells (it was refused, DL021)."""
    def f(x):
        return (x * i for i in range(3))
    reset()
    backend = CountingBackend()
    got = dl.capture(f, backend=backend)(rows)
    assert got.__qualname__ == f(rows).__qualname__
    torch.testing.assert_close(list(got), list(f(rows)))
    if not REFERENCE:
        assert "DL021" not in break_kinds(f)


def test_generator_returned_part_way_is_refused():
    def f(x):
        gen = (x * i for i in range(3))
        next(gen)
        return gen
    reset()
    got = dl.capture(f)(rows)
    expected = f(rows)
    torch.testing.assert_close(list(got), list(expected))
    expect_refused(f, "DL021")


def test_generator_live_at_a_graph_break():
    def f(x, log):
        g = logged_range(log, 4)
        a = next(g)
        print("between")
        return x + a + next(g)
    check(f, rows, [], graphs=0)      # the generator is live at the print: the frame runs eagerly
    expect_refused(f, "DL005")


def test_generator_finished_before_a_graph_break():
    def f(x, log):
        y = x * 2
        total = sum(logged_range(log, 3))
        print("after")
        return y + total
    check(f, rows, [], graphs=2)


# =============================================================================================
# 3. itertools
# =============================================================================================

ITERTOOLS = {
    "product": lambda x: [x * a + b for a, b in itertools.product([1, 2], range(3))],
    "product_repeat": lambda x: list(itertools.product("ab", repeat=2)),
    "chain": lambda x: list(itertools.chain([x], (x * i for i in range(2)), "ab")),
    "chain_from_iterable": lambda x: list(itertools.chain.from_iterable([[x, x + 1], (x * 2,)])),
    "combinations": lambda x: [a * b for a, b in itertools.combinations([x, x + 1, x + 2], 2)],
    "combinations_with_replacement": lambda x: list(itertools.combinations_with_replacement("abc", 2)),
    "permutations": lambda x: [list(p) for p in itertools.permutations(range(3))],
    "permutations_r": lambda x: [a - b for a, b in itertools.permutations([x, x * 2], 2)],
    "islice": lambda x: [list(itertools.islice(range(10), 3)), list(itertools.islice("abcdefg", 1, None, 2)),
                         list(itertools.islice(iter(x), 1, 3))],
    "repeat": lambda x: [list(itertools.repeat(x, 2)), list(zip(range(3), itertools.repeat("r")))],
    "count": lambda x: [list(zip("abc", itertools.count(5, 2))), list(itertools.islice(itertools.count(0.5), 3))],
    "cycle": lambda x: list(itertools.islice(itertools.cycle([x, x + 1]), 5)),
    "accumulate": lambda x: [list(itertools.accumulate([1, 2, 3])), list(itertools.accumulate(x)),
                             list(itertools.accumulate([1, 5, 2], max, initial=3)),
                             list(itertools.accumulate([x, x], operator.mul))],
    "groupby": lambda x: [(k, list(g)) for k, g in itertools.groupby("aabccc")],
    "groupby_key": lambda x: [(k, [t * 2 for t in g]) for k, g in itertools.groupby(x, key=lambda r: 1)],
    "zip_longest": lambda x: list(itertools.zip_longest([x], "ab", fillvalue=0)),
    "starmap": lambda x: list(itertools.starmap(torch.add, [(x, 1), (x, x)])),
    "pairwise": lambda x: [b - a for a, b in itertools.pairwise(x)],
    "takewhile_dropwhile": lambda x: [list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1])),
                                      list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1]))],
    "compress": lambda x: list(itertools.compress([x, x + 1, x + 2], [1, 0, 1])),
    "tee": lambda x: [list(a) + list(b) for a, b in [itertools.tee(iter([x, x * 2]))]],
}


@pytest.mark.parametrize("name", list(ITERTOOLS))
def test_itertools(name):
    use = ITERTOOLS[name]

    def f(x):
        return x + 1, use(x)
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo keeps a groupby group valid after the next group is taken")
def test_groupby_groups_expire():
    def f(x):
        groups = [(k, g) for k, g in itertools.groupby("aabbb")]
        first = itertools.groupby([1, 1, 2])
        k, g = next(first)
        one = next(g)
        rest = list(first)
        return x + 1, [(k, list(g)) for k, g in groups], one, [(k, list(g)) for k, g in rest]
    check(f, rows, graphs=1)


def test_itertools_pull_lazily_from_generators():
    def f(x, log):
        taken = list(itertools.islice(logged_range(log, 10), 2))
        small = list(itertools.takewhile(lambda v: v < 2, logged_range(log, 10)))
        pairs = next(itertools.pairwise(logged_range(log, 10)))
        return x + 1, taken, small, pairs
    check(f, rows, [], graphs=1)


@skip_in_reference("TorchDynamo fails internally on invalid itertools arguments")
def test_itertools_errors_match_eager():
    def f(x):
        out = []
        for make in (lambda: itertools.islice([], -1), lambda: itertools.combinations([], -1),
                     lambda: itertools.repeat(1, "a"), lambda: itertools.product([], repeat=-1)):
            try:
                make()
            except (ValueError, TypeError) as e:
                out.append((type(e).__name__, e.args))
        return x + 1, out
    check(f, rows, graphs=1)


# =============================================================================================
# 4. functools.reduce and the builtins over any iterable
# =============================================================================================

def test_reduce():
    def f(x):
        return (functools.reduce(operator.add, [x, x * 2, x * 3]), functools.reduce(lambda a, b: a * b, x.shape, 1),
                functools.reduce(torch.mul, (r for r in x)), functools.reduce(max, [3, 9, 2]))
    check(f, rows, graphs=1)


def test_reduce_of_empty_raises():
    def f(x):
        try:
            functools.reduce(operator.add, [])
        except TypeError as e:
            return x + 1, e.args
        return x, ""
    check(f, rows, graphs=1)


def test_map_filter_are_lazy():
    def f(x, log):
        def touch(v):
            log.append(v)
            return v * 2
        m = map(touch, [1, 2, 3, 4])
        first = next(m)
        kept = filter(lambda v: log.append(("f", v)) or v > 4, m)
        return x * first, next(kept), list(map(operator.add, [x, x], (1, 2)))
    check(f, rows, [], graphs=1)


def test_enumerate_zip():
    def f(x):
        pairs = list(zip(x, range(10)))
        return ([i * r for i, r in enumerate(x, start=1)], pairs, list(enumerate("ab", 5)),
                list(zip()), list(zip([1, 2], "ab", strict=True)))
    check(f, rows, graphs=1)


@pytest.mark.parametrize("second", [[1], [1, 2, 3]], ids=["shorter", "longer"])
def test_zip_strict_mismatch_raises(second):
    def f(x, other):
        try:
            return list(zip([x, x], other, strict=True))
        except ValueError as e:
            return e.args
    check(f, rows, second, graphs=0)


@skip_in_reference("TorchDynamo fails internally on max(1, 'a')")
def test_iteration_errors_match_eager():
    def chain_reaches_a_number():
        c = itertools.chain([1], 5)
        next(c)
        next(c)

    def f(x):
        out = []
        for fail in (lambda: iter(5), lambda: next([1]), lambda: len(map(abs, [1])), lambda: map(abs),
                     lambda: enumerate("a", 1.5), lambda: zip([1], bad=1), chain_reaches_a_number,
                     lambda: sorted([1, "a"]), lambda: max(1, "a"), lambda: sum(["a"], "")):
            try:
                fail()
            except TypeError as e:
                out.append(e.args)
        return x + 1, out
    check(f, rows, graphs=1)


def test_reversed():
    class Deck:
        def __init__(self):
            self.cards = ["a", "b", "c"]

        def __len__(self):
            return len(self.cards)

        def __getitem__(self, i):
            return self.cards[i]

    class Backwards:
        def __reversed__(self):
            yield from (3, 2, 1)

    def f(x):
        return (list(reversed([x, x + 1])), list(reversed(range(3))), list(reversed((1, 2))), list(reversed(Deck())),
                list(reversed(Backwards())), list(reversed({"k": 1, "j": 2})), reversed(x), list(reversed(x.shape)),
                list(reversed("ab")))
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo raises another TypeError message")
def test_reversed_generator_raises():
    def f(x):
        try:
            reversed(i for i in range(3))
        except TypeError as e:
            return x + 1, e.args
        return x, ""
    check(f, rows, graphs=1)


def test_sorted_and_sort_with_key():
    def f(x, words):
        by_len = sorted(words, key=len)
        words.sort(key=lambda w: w[-1], reverse=True)
        tensors = sorted([x, x[:2], x[:1]], key=lambda t: t.shape[0])
        return by_len, words, [t * 2 for t in tensors], sorted((3, 1, 2), reverse=True)
    check(f, rows, ["ccc", "a", "bb", "dd"], graphs=1)


def test_failed_sort_leaves_the_list_as_eager_does():
    def f(x, items):
        try:
            items.sort()
        except TypeError as e:
            return x + 1, e.args
        return x, ()
    check(f, rows, [5, 3, "b", 1, "a", 4, 2], graphs=1)


def test_sorted_pairs_decided_by_their_leading_numbers():
    """Tuples holding tensors sort without comparing the tensors when a constant item before them
    decides each comparison (CPython compares sequences item by item)."""
    def f(x):
        pairs = [(2, x), (0, x + 1), (1, "mid", x * 2), (1, "low", [x])]
        nested = sorted([[(1, 2), x], [(1, 1), x - 1]], reverse=True)
        by_key = sorted(range(3), key=lambda i: (-i, x))
        return sorted(pairs), nested, by_key
    check(f, rows, graphs=1)


def test_sorted_pairs_that_compare_tensors_raise_as_eager():
    def f(x):
        try:
            return sorted([(1, x), (1, x + 1)])
        except RuntimeError as e:             # bool() of a many-element tensor
            return x, str(e)
    # comparing the tensors is data dependent: a break in a try block, which resumes (the except
    # sees the RuntimeError raised by the break's own instruction)
    check(f, rows, graphs=Graphs(dl=1, torch=0, why="a break inside a try block resumes in dynamo_lite; "
                                                     "TorchDynamo runs such a frame eagerly"))
    expect_refused(f, "DL003")


def test_sorted_comparing_tensors_breaks():
    def f(x):
        return sorted([x[0].sum(), x[1].sum()])
    check(f, rows, graphs=1)      # comparing tensors: data dependent
    expect_refused(f, "DL003")


def test_min_max_of_python_values():
    def f(x):
        return (x * max(1, 3, 2), min([4, 2, 8]), max("abc", key=ord), min([], default=-1),
                max((i for i in range(5)), key=lambda v: -v), min(x.shape), max([[1, 2], [1, 3]]))
    check(f, rows, graphs=1)


def sizes_min_max(x):
    return x.new_zeros(max(x.shape[0], 3)) + min([x.shape[0] - 1, 4, x.shape[1]])


@pytest.mark.parametrize("dynamic", [None, True], ids=["automatic", "dynamic"])
def test_min_max_of_symbolic_sizes_stay_symbolic(dynamic):
    """Under dynamic shapes, max()/min() of sizes is torch.sym_max/sym_min, as under TorchDynamo:
    one graph serves every size (after the first, static, capture in automatic mode)."""
    reset()
    backend = CountingBackend()
    captured = torch.compile(sizes_min_max, backend=backend, dynamic=dynamic) if REFERENCE else \
        dl.capture(sizes_min_max, backend=backend, dynamic=dynamic)
    for n in (2, 3, 5, 8, 6):
        x = torch.randn(n, 4)
        torch.testing.assert_close(captured(x), sizes_min_max(x))
    assert backend.count == (1 if dynamic else 2)


@skip_in_reference("TorchDynamo fails internally on max() of an empty list")
def test_min_max_empty_raises():
    def f(x):
        try:
            max([])
        except ValueError as e:
            return x + 1, e.args
        return x, ""
    check(f, rows, graphs=1)


def test_max_of_tensors_compares_as_eager():
    def f(a, b):
        return max(a, b) * 2
    check(f, torch.tensor(1.0), torch.tensor(3.0),
          graphs=1)      # dynamo_lite breaks at the data-dependent comparison, TorchDynamo uses torch.maximum
    expect_refused(f, "DL002")


@skip_in_reference("TorchDynamo returns torch.maximum where eager raises")
def test_max_of_multi_element_tensors_raises_as_eager():
    def f(a, b):
        return max(a, b)
    check(f, rows, rows + 1, graphs=0)      # the truth value of the comparison is ambiguous: eager raises


def test_sum_any_all():
    def f(x, log):
        def checked(v):
            log.append(v)
            return v
        return (sum([x, x], x), sum(r for r in x), sum([0.1] * 10), sum(range(4), 10), sum([1, 2.5], 1j),
                any(checked(v) > 1 for v in range(5)), all(checked(v) < 1 for v in range(5)))
    check(f, rows, [], graphs=1)


def test_join_and_constructors_of_generators():
    def f(x):
        words = ("w" + str(i) for i in range(3))
        return x + 1, "-".join(words), list(words), tuple(i for i in "ab"), set(i % 2 for i in range(4)), \
            dict((str(i), i) for i in range(2))
    check(f, rows, graphs=1)


def test_what_iterators_are():
    def f(x):
        g = (i for i in range(2))
        m = map(abs, [1])
        return (x + 1, callable(g), callable(m), callable(CountUp(1)), callable(len), hasattr(m, "send"),
                type(m) is map, type(iter([1])).__name__, isinstance(itertools.count(), itertools.count),
                type(enumerate("a")).__name__)
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo gives a generator the type tuple_iterator")
def test_a_generator_is_a_generator():
    def f(x):
        g = (i for i in range(2))
        return x + 1, type(g).__name__, hasattr(g, "send"), g.__name__
    check(f, rows, graphs=1)


@skip_in_reference("TorchDynamo unpacks itertools.count() forever (it hangs)")
def test_unpacking_an_infinite_iterator_raises():
    def f(x):
        try:
            a, b = itertools.count()
        except ValueError as e:
            return x + 1, e.args
        return x, ""
    check(f, rows, graphs=1)


def test_iter_with_sentinel():
    def f(x):
        values = iter([1, 2, 0, 3])
        return x + 1, list(iter(lambda: next(values), 0)), list(values)
    check(f, rows, graphs=1)


# =============================================================================================
# 5. iterating tensors
# =============================================================================================

def test_tensor_iteration_forms():
    def f(x, y):
        a, *rest = x
        return ([r * 2 for r in x], list(zip(x, y)), [i * r for i, r in enumerate(x)], a, rest,
                sum(x), list(reversed(list(x))))
    check(f, rows, rows + 1, graphs=1)


def test_iterating_an_empty_tensor():
    def f(x):
        out = [r * 2 for r in x]
        return x + 1, out
    check(f, torch.randn(0, 3), graphs=1)


@skip_in_reference("TorchDynamo fails internally iterating a 0-d tensor")
def test_iterating_a_0d_tensor_raises():
    def f(x):
        try:
            for _ in x:
                pass
        except TypeError as e:
            return e.args
        return ""
    check(f, torch.tensor(1.0), graphs=0)


def tensor_loop(x):
    for y in x:
        last = y * 2
    return last


@pytest.mark.parametrize("dynamic", [None, True], ids=["automatic", "dynamic"])
def test_tensor_iteration_with_changing_sizes(dynamic):
    """Dim 0 becomes symbolic on the second size: the number of rows is specialized (guarded),
    as TorchDynamo does, so each new size is a new graph and every call matches eager."""
    reset()
    backend = CountingBackend()
    captured = dl.capture(tensor_loop, backend=backend, dynamic=dynamic) if not REFERENCE else \
        torch.compile(tensor_loop, backend=backend, dynamic=dynamic)
    for n, dtype in ((3, torch.float32), (4, torch.float32), (5, torch.float64), (3, torch.float32), (2, torch.int64)):
        x = torch.arange(n * 2, dtype=dtype).reshape(n, 2)
        torch.testing.assert_close(captured(x), tensor_loop(x))
    assert backend.count == 4          # one per new (size, dtype): the row count is specialized


# =============================================================================================
# 6. breaks inside loops over lazy iterators: the frame runs eagerly, the meaning is unchanged
# =============================================================================================

def test_break_inside_a_loop_over_a_generator():
    def f(x, log):
        for i in logged_range(log, 3):
            print("item", i)
            x = x + i
        return x
    check(f, rows, [], graphs=0)      # print inside the loop: the frame runs eagerly


def test_break_inside_a_loop_over_itertools():
    def f(x):
        for a, b in itertools.product([1, 2], "ab"):
            print(a, b)
        return x * 2
    check(f, rows, graphs=0)      # print inside the loop: the frame runs eagerly
