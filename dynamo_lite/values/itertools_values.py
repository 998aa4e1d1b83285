"""The itertools, as lazy iterator values: `count`, `repeat`, `cycle`, `chain` (and
`chain.from_iterable`), `islice`, `accumulate`, `groupby`, `zip_longest`, `starmap`, `pairwise`,
`takewhile`, `dropwhile`, `compress`, `tee`, and the combinatoric `product`, `combinations`,
`combinations_with_replacement` and `permutations`.

Each class follows its C implementation (Modules/itertoolsmodule.c) step by step: what the
constructor does at once (`iter()` of the arguments, or materializing them for the
combinatorics), and what each `next` does — which items it pulls from which iterator, which
function it calls, when it stops for good. So the traced code behind the items (a generator's
body, a predicate) runs exactly when eager runs it, and infinite iterators are fine while the
consumer stops. The combinatoric iterators order their items by the real itertools function run
on index ranges (their items are known once the pools are materialized).

Arguments that eager validates (a negative count, a non-integer stop) are validated by calling
the real function with stand-ins, so the program sees eager's exception. Each handler is
registered next to its class with `@models`.
"""
from __future__ import annotations

import itertools
import operator
from typing import Optional

from ..breaks import UNSUPPORTED_VALUE, TracedException, Unsupported
from ..modelled import models
from ..runtime import groupby_at
from ..semantics import binary, drain, equal, get_iter, next_item, truthy, unpack
from .base import Const, IteratorValue, Value, fold, is_const
from .containers import SeqValue
from .iterators import LazyIterator


def _constant(v: Value, what: str):
    if not v.is_python_constant():
        raise Unsupported(UNSUPPORTED_VALUE, f"{what} that is not a constant")
    return v.as_python()


def _none(v: Optional[Value]) -> bool:
    return v is None or is_const(v, type(None))


def _no_kwargs(fn, kwargs):
    if kwargs:
        fold(fn, **{k: None for k in kwargs})       # eager's TypeError
        raise Unsupported(UNSUPPORTED_VALUE, f"{fn.__name__}() keyword arguments")


# ============================================================================================
# infinite: count, repeat, cycle
# ============================================================================================

class CountIterator(LazyIterator):
    """count(start, step): start, start + step, start + step + step... (repeated additions, as
    CPython does for floats)."""
    __slots__ = ("current", "step")

    def __init__(self, start: Value, step: Value, source=None):
        super().__init__(source)
        self.current, self.step = start, step

    def python_type(self):
        return itertools.count

    def next(self, frame):
        item = self.current
        self.current = binary(frame, operator.add, item, self.step)
        return item


@models(itertools.count)
def _count(frame, args, kwargs):
    params = {**dict(zip(("start", "step"), args)), **kwargs}
    start, step = params.get("start", Const(0)), params.get("step", Const(1))
    fold(itertools.count, *[_constant(a, "count() argument") for a in args],
         **{k: _constant(v, "count() argument") for k, v in kwargs.items()})     # eager's TypeError
    return CountIterator(start, step)


class RepeatIterator(LazyIterator):
    """repeat(obj[, times]): obj, forever or `times` times."""
    __slots__ = ("obj", "left")

    def __init__(self, obj: Value, times: Optional[int], source=None):
        super().__init__(source)
        self.obj, self.left = obj, times

    def python_type(self):
        return itertools.repeat

    def next(self, frame):
        if self.left is not None:
            if self.left <= 0:
                return None
            self.left -= 1
        return self.obj


@models(itertools.repeat)
def _repeat(frame, args, kwargs):
    params = {**dict(zip(("object", "times"), args)), **kwargs}
    if len(args) > 2 or set(kwargs) - {"object", "times"} or "object" not in params:
        fold(itertools.repeat, *[None] * len(args), **{k: None for k in kwargs})
    times = _constant(params["times"], "repeat() count") if "times" in params else None
    fold(itertools.repeat, None, times) if times is not None else None     # eager's TypeError
    return RepeatIterator(params["object"], None if times is None else max(times, 0))


class CycleIterator(LazyIterator):
    """cycle(iterable): the items as they come (saved), then the saved ones over and over."""
    __slots__ = ("iterator", "saved", "index")

    def __init__(self, iterator: Value, source=None):
        super().__init__(source)
        self.iterator, self.saved, self.index = iterator, [], 0

    def python_type(self):
        return itertools.cycle

    def next(self, frame):
        if self.iterator is not None:
            item = next_item(frame, self.iterator)
            if item is not None:
                self.saved.append(item)
                return item
            self.iterator = None
        if not self.saved:
            return None
        item = self.saved[self.index]
        self.index = (self.index + 1) % len(self.saved)
        return item


@models(itertools.cycle)
def _cycle(frame, args, kwargs):
    _no_kwargs(itertools.cycle, kwargs)
    if len(args) != 1:
        fold(itertools.cycle, *args)
    return CycleIterator(get_iter(frame, args[0]))


# ============================================================================================
# chain, islice, accumulate, zip_longest, starmap, pairwise
# ============================================================================================

class ChainIterator(LazyIterator):
    """chain(*iterables) / chain.from_iterable(iterable): `iter()` of each iterable only once the
    previous one is exhausted."""
    __slots__ = ("sources", "active")

    def __init__(self, sources: Value, source=None):
        super().__init__(source)
        self.sources, self.active = sources, None

    def python_type(self):
        return itertools.chain

    def next(self, frame):
        while self.sources is not None:
            if self.active is None:
                iterable = next_item(frame, self.sources)
                if iterable is None:
                    self.sources = None
                    return None
                try:
                    self.active = get_iter(frame, iterable)
                except TracedException:
                    self.sources = None
                    raise
            item = next_item(frame, self.active)
            if item is not None:
                return item
            self.active = None
        return None


@models(itertools.chain)
def _chain(frame, args, kwargs):
    _no_kwargs(itertools.chain, kwargs)
    return ChainIterator(IteratorValue(args))


@models(itertools.chain.from_iterable)
def _chain_from_iterable(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        fold(itertools.chain.from_iterable, *args, **{k: None for k in kwargs})
    return ChainIterator(get_iter(frame, args[0]))


class IsliceIterator(LazyIterator):
    """islice(iterable, [start,] stop[, step]): skips to `start`, then every `step`-th item, and
    pulls nothing more once `stop` is reached."""
    __slots__ = ("iterator", "next_index", "stop", "step", "count")

    def __init__(self, iterator: Value, start: int, stop: Optional[int], step: int, source=None):
        super().__init__(source)
        self.iterator, self.next_index, self.stop, self.step, self.count = iterator, start, stop, step, 0

    def python_type(self):
        return itertools.islice

    def next(self, frame):
        try:
            return self._step(frame)
        except TracedException:
            self.iterator = None        # an error ends it for good, as exhaustion does
            raise

    def _step(self, frame):
        it = self.iterator
        if it is None:
            return None
        while self.count < self.next_index:
            if it.next(frame) is None:
                self.iterator = None
                return None
            self.count += 1
        if self.stop is not None and self.count >= self.stop:
            self.iterator = None
            return None
        item = it.next(frame)
        if item is None:
            self.iterator = None
            return None
        self.count += 1
        self.next_index += self.step
        if self.stop is not None and self.next_index > self.stop:
            self.next_index = self.stop
        return item


@models(itertools.islice)
def _islice(frame, args, kwargs):
    _no_kwargs(itertools.islice, kwargs)
    bounds = [_constant(a, "islice() bound") for a in args[1:]]
    fold(itertools.islice, (), *bounds)              # eager's ValueError / TypeError
    if len(args) == 2:
        start, stop, step = 0, bounds[0], 1
    else:
        start, stop = bounds[0] or 0, bounds[1]
        step = bounds[2] if len(bounds) > 2 and bounds[2] is not None else 1
    return IsliceIterator(get_iter(frame, args[0]), start, stop, step)


class AccumulateIterator(LazyIterator):
    """accumulate(iterable, func=operator.add, *, initial=None): running totals."""
    __slots__ = ("iterator", "func", "total", "initial")

    def __init__(self, iterator: Value, func: Optional[Value], initial: Optional[Value], source=None):
        super().__init__(source)
        self.iterator, self.func, self.total, self.initial = iterator, func, None, initial

    def python_type(self):
        return itertools.accumulate

    def next(self, frame):
        if self.initial is not None:
            self.total, self.initial = self.initial, None
            return self.total
        value = self.iterator.next(frame)
        if value is None:
            return None
        if self.total is None:
            self.total = value
        elif self.func is None:
            self.total = binary(frame, operator.add, self.total, value)
        else:
            self.total = self.func.call(frame, [self.total, value], {})
        return self.total


@models(itertools.accumulate)
def _accumulate(frame, args, kwargs):
    params = {**dict(zip(("iterable", "func"), args)), **kwargs}
    if len(args) > 2 or set(kwargs) - {"iterable", "func", "initial"} or "iterable" not in params:
        fold(itertools.accumulate, *[()] * len(args), **{k: None for k in kwargs})
    func = None if _none(params.get("func")) else params["func"]
    initial = None if _none(params.get("initial")) else params["initial"]
    return AccumulateIterator(get_iter(frame, params["iterable"]), func, initial)


class ZipLongestIterator(LazyIterator):
    """zip_longest(*iterables, fillvalue=None): tuples until every iterator is exhausted, the
    exhausted ones filled in."""
    __slots__ = ("iterators", "fill", "active")

    def __init__(self, iterators: list, fill: Value, source=None):
        super().__init__(source)
        self.iterators, self.fill, self.active = list(iterators), fill, len(iterators)

    def python_type(self):
        return itertools.zip_longest

    def next(self, frame):
        if not self.iterators or not self.active:
            return None
        items = []
        for i, it in enumerate(self.iterators):
            if it is None:
                items.append(self.fill)
                continue
            try:
                item = next_item(frame, it)
            except TracedException:
                self.active = 0
                raise
            if item is None:
                self.active -= 1
                if not self.active:
                    return None
                self.iterators[i] = None
                item = self.fill
            items.append(item)
        return SeqValue(items, tuple)


@models(itertools.zip_longest)
def _zip_longest(frame, args, kwargs):
    if set(kwargs) - {"fillvalue"}:
        fold(itertools.zip_longest, **{k: None for k in kwargs})
    return ZipLongestIterator([get_iter(frame, a) for a in args], kwargs.get("fillvalue", Const(None)))


class StarmapIterator(LazyIterator):
    """starmap(fn, iterable): fn(*item) for each item."""
    __slots__ = ("fn", "iterator")

    def __init__(self, fn: Value, iterator: Value, source=None):
        super().__init__(source)
        self.fn, self.iterator = fn, iterator

    def python_type(self):
        return itertools.starmap

    def next(self, frame):
        args = self.iterator.next(frame)
        if args is None:
            return None
        return self.fn.call(frame, unpack(frame, args), {})


@models(itertools.starmap)
def _starmap(frame, args, kwargs):
    _no_kwargs(itertools.starmap, kwargs)
    if len(args) != 2:
        fold(itertools.starmap, *args)
    return StarmapIterator(args[0], get_iter(frame, args[1]))


class PairwiseIterator(LazyIterator):
    """pairwise(iterable): (a, b), (b, c), ... over successive items."""
    __slots__ = ("iterator", "old")

    def __init__(self, iterator: Value, source=None):
        super().__init__(source)
        self.iterator, self.old = iterator, None

    def python_type(self):
        return itertools.pairwise

    def next(self, frame):
        it = self.iterator
        if it is None:
            return None
        if self.old is None:
            self.old = it.next(frame)
            if self.old is None:
                self.iterator = None
                return None
        new = it.next(frame)
        if new is None:
            self.iterator = self.old = None
            return None
        pair = SeqValue([self.old, new], tuple)
        self.old = new
        return pair


@models(itertools.pairwise)
def _pairwise(frame, args, kwargs):
    _no_kwargs(itertools.pairwise, kwargs)
    if len(args) != 1:
        fold(itertools.pairwise, *args)
    return PairwiseIterator(get_iter(frame, args[0]))


# ============================================================================================
# predicates: takewhile, dropwhile, compress; groupby
# ============================================================================================

class TakewhileIterator(LazyIterator):
    """takewhile(pred, iterable): items while pred(item) is true; the first false ends it."""
    __slots__ = ("pred", "iterator", "stopped")

    def __init__(self, pred: Value, iterator: Value, source=None):
        super().__init__(source)
        self.pred, self.iterator, self.stopped = pred, iterator, False

    def python_type(self):
        return itertools.takewhile

    def next(self, frame):
        if self.stopped:
            return None
        item = self.iterator.next(frame)
        if item is None:
            return None
        if truthy(frame, self.pred.call(frame, [item], {})):
            return item
        self.stopped = True
        return None


class DropwhileIterator(LazyIterator):
    """dropwhile(pred, iterable): skips items while pred(item) is true, then yields the rest."""
    __slots__ = ("pred", "iterator", "started")

    def __init__(self, pred: Value, iterator: Value, source=None):
        super().__init__(source)
        self.pred, self.iterator, self.started = pred, iterator, False

    def python_type(self):
        return itertools.dropwhile

    def next(self, frame):
        while (item := self.iterator.next(frame)) is not None:
            if self.started:
                return item
            if not truthy(frame, self.pred.call(frame, [item], {})):
                self.started = True
                return item
        return None


def _predicate_handler(fn, cls):
    def handler(frame, args, kwargs):
        _no_kwargs(fn, kwargs)
        if len(args) != 2:
            fold(fn, *args)
        return cls(args[0], get_iter(frame, args[1]))
    return handler


models(itertools.takewhile)(_predicate_handler(itertools.takewhile, TakewhileIterator))
models(itertools.dropwhile)(_predicate_handler(itertools.dropwhile, DropwhileIterator))


class CompressIterator(LazyIterator):
    """compress(data, selectors): the data items whose selector is true (a datum is pulled
    before its selector)."""
    __slots__ = ("data", "selectors")

    def __init__(self, data: Value, selectors: Value, source=None):
        super().__init__(source)
        self.data, self.selectors = data, selectors

    def python_type(self):
        return itertools.compress

    def next(self, frame):
        while (datum := self.data.next(frame)) is not None:
            selector = self.selectors.next(frame)
            if selector is None:
                return None
            if truthy(frame, selector):
                return datum
        return None


@models(itertools.compress)
def _compress(frame, args, kwargs):
    params = {**dict(zip(("data", "selectors"), args)), **kwargs}
    if len(args) > 2 or set(params) != {"data", "selectors"}:
        fold(itertools.compress, *[()] * len(args), **{k: () for k in kwargs})
    return CompressIterator(get_iter(frame, params["data"]), get_iter(frame, params["selectors"]))


class GroupbyIterator(LazyIterator):
    """groupby(iterable, key=None): (key, group) for each run of items with equal keys. The
    groups share this iterator's position: a group is valid only until the next one is asked
    for (then it is empty), as in CPython."""
    __slots__ = ("iterator", "keyfunc", "target", "current_key", "current_value", "current_group")

    def __init__(self, iterator: Value, keyfunc: Optional[Value], source=None):
        super().__init__(source)
        self.iterator, self.keyfunc = iterator, keyfunc
        self.target = self.current_key = self.current_value = self.current_group = None

    def python_type(self):
        return itertools.groupby

    def step(self, frame) -> bool:
        """Pull the next item and its key; False when the iterable is exhausted."""
        value = next_item(frame, self.iterator)
        if value is None:
            return False
        key = value if self.keyfunc is None else self.keyfunc.call(frame, [value], {})
        self.current_value, self.current_key = value, key
        return True

    def next(self, frame):
        self.current_group = None
        while True:                      # skip what is left of the current group
            if self.current_key is not None:
                if self.target is None or not equal(frame, self.target, self.current_key):
                    break
            if not self.step(frame):
                return None
        self.target = self.current_key
        self.current_group = GrouperIterator(self, self.target)
        return SeqValue([self.current_key, self.current_group], tuple)

    def children(self):
        return tuple(v for v in (self.iterator, self.keyfunc, self.target, self.current_key, self.current_value)
                     if v is not None)

    def rebuild(self, em):
        """Handed on at a graph break: a new groupby over the same iterator and key function, in
        the state this one is in (`runtime.groupby_at`); its groups are not handed on."""
        keyfunc = (lambda: em.value(self.keyfunc)) if self.keyfunc is not None else (lambda: em.const(None))
        if self.target is None:
            em.call_const(itertools.groupby, [lambda: em.value(self.iterator), keyfunc])
            return
        has_value = self.current_value is not None
        em.call_const(groupby_at, [lambda: em.value(self.iterator), keyfunc, lambda: em.value(self.target),
                                   lambda: em.value(self.current_key) if has_value else em.const(None),
                                   lambda: em.value(self.current_value) if has_value else em.const(None),
                                   lambda: em.const(has_value)])


class GrouperIterator(LazyIterator):
    """One group of a groupby: items while their key equals the group's, and only while the
    groupby has not moved on to the next group."""
    __slots__ = ("parent", "key")

    def __init__(self, parent: GroupbyIterator, key: Value, source=None):
        super().__init__(source)
        self.parent, self.key = parent, key

    def python_type(self):
        return _GROUPER

    def next(self, frame):
        parent = self.parent
        if parent.current_group is not self:
            return None
        if parent.current_value is None and not parent.step(frame):
            return None
        if not equal(frame, self.key, parent.current_key):
            return None
        value, parent.current_value = parent.current_value, None
        return value


_GROUPER = type(next(itertools.groupby([0]))[1])


@models(itertools.groupby)
def _groupby(frame, args, kwargs):
    params = {**dict(zip(("iterable", "key"), args)), **kwargs}
    if len(args) > 2 or set(kwargs) - {"iterable", "key"} or "iterable" not in params:
        fold(itertools.groupby, *[()] * len(args), **{k: () for k in kwargs})
    keyfunc = None if _none(params.get("key")) else params["key"]
    return GroupbyIterator(get_iter(frame, params["iterable"]), keyfunc)


# ============================================================================================
# tee
# ============================================================================================

class TeeIterator(LazyIterator):
    """One of tee(iterable, n)'s iterators: they share the source and the items pulled from it
    (`buffer`), each at its own position."""
    __slots__ = ("shared", "index")

    def __init__(self, shared: dict, source=None):
        super().__init__(source)
        self.shared, self.index = shared, 0

    def python_type(self):
        return type(itertools.tee(())[0])

    def next(self, frame):
        buffer = self.shared["buffer"]
        if self.index == len(buffer):
            item = self.shared["iterator"].next(frame)
            if item is None:
                return None
            buffer.append(item)
        self.index += 1
        return buffer[self.index - 1]


@models(itertools.tee)
def _tee(frame, args, kwargs):
    _no_kwargs(itertools.tee, kwargs)
    n = _constant(args[1], "tee() count") if len(args) > 1 else 2
    fold(itertools.tee, (), n, *args[2:])              # eager's ValueError / TypeError
    shared = {"iterator": get_iter(frame, args[0]), "buffer": []}
    return SeqValue([TeeIterator(shared) for _ in range(n)], tuple)


# ============================================================================================
# combinatorics: product, combinations, combinations_with_replacement, permutations
# ============================================================================================

class CombinatoricIterator(LazyIterator):
    """product / combinations / combinations_with_replacement / permutations: the pools are
    materialized when it is made (as CPython does); the real itertools function, run on index
    ranges, orders the tuples, made only as they are asked for."""
    __slots__ = ("cls", "pools", "indices")

    def __init__(self, cls: type, pools: list, indices, source=None):
        super().__init__(source)
        self.cls, self.pools, self.indices = cls, pools, indices

    def python_type(self):
        return self.cls

    def next(self, frame):
        chosen = next(self.indices, None)
        if chosen is None:
            return None
        if self.cls is itertools.product:
            return SeqValue([pool[i] for pool, i in zip(self.pools, chosen)], tuple)
        return SeqValue([self.pools[0][i] for i in chosen], tuple)


@models(itertools.product)
def _product(frame, args, kwargs):
    if set(kwargs) - {"repeat"}:
        fold(itertools.product, **{k: None for k in kwargs})
    repeat = _constant(kwargs["repeat"], "product() repeat") if "repeat" in kwargs else 1
    fold(itertools.product, repeat=repeat)           # eager's ValueError for a negative repeat
    pools = [drain(frame, get_iter(frame, a)) for a in args] * repeat
    return CombinatoricIterator(itertools.product, pools, itertools.product(*[range(len(p)) for p in pools]))


def _choices(fn, r_required: bool):
    def handler(frame, args, kwargs):
        params = {**dict(zip(("iterable", "r"), args)), **kwargs}
        if len(args) > 2 or set(kwargs) - {"iterable", "r"} or "iterable" not in params \
                or r_required and "r" not in params:
            fold(fn, *[()] * len(args), **{k: () for k in kwargs})
        r = None if _none(params.get("r")) else _constant(params["r"], f"{fn.__name__}() r")
        pool = drain(frame, get_iter(frame, params["iterable"]))
        if r is not None:
            fold(fn, (), r)                          # eager's TypeError / ValueError for a bad r
        indices = fn(range(len(pool))) if r is None else fn(range(len(pool)), r)
        return CombinatoricIterator(fn, [pool], indices)
    return handler


models(itertools.combinations)(_choices(itertools.combinations, True))
models(itertools.combinations_with_replacement)(_choices(itertools.combinations_with_replacement, True))
models(itertools.permutations)(_choices(itertools.permutations, False))
