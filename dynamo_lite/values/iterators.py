"""Iterators whose items are computed as they are consumed: generators (one suspended frame per
generator), the old sequence protocol (`__getitem__` until IndexError), `iter(callable,
sentinel)`, `reversed()` of a user sequence, and the lazy builtins `map`, `filter`, `zip` and
`enumerate`. The itertools live in `itertools_values.py`.

Python's iterators are lazy: an item exists only once the consumer asks for it, and so do the
effects of computing it (a generator body's prints and appends, a map's function). Each kind
here follows its C implementation's `tp_iternext` step by step: `next(frame)` computes one item,
or returns None when the iterator is exhausted; an exception raised by the code it runs
(StopIteration included) propagates as it would in eager. Consumers take their steps through
`semantics.next_item`, which ends the iteration on a StopIteration as CPython's consumers do.
Iterators over items known in advance (a list's, a tuple's, a tensor's rows) are
`base.IteratorValue`.

A generator's state is its suspended frame, which generated code cannot rebuild: a generator
that outlives the trace part-way is refused (GENERATOR_STATE). The builtin iterators are rebuilt
from what they hold (`map(fn, *iterators)`) when all of that is rebuildable.
"""
from __future__ import annotations

import functools
import types
from typing import Optional

from ..breaks import GENERATOR_STATE, UNSUPPORTED_ATTRIBUTE, UNSUPPORTED_VALUE, TracedException, Unsupported, user_error
from ..runtime import generator_again, reversed_at
from ..semantics import drain, equal, get_iter, load_attr, next_item
from .base import Const, IteratorValue, MethodValue, SelfIterator, Value, fold, is_constant, missing_attribute
from .containers import SeqValue

CO_GENERATOR = 0x20


def _method_name(method) -> str:
    return method if isinstance(method, str) else getattr(method, "__name__", "")


def _is_none(v: Value) -> bool:
    return isinstance(v, Const) and v.value is None


class LazyIterator(SelfIterator):
    """What the iterator kinds here share: `iter(it)` is `it`, `it.__next__()`, no `len()`, `in`
    consumes it up to the item found, and it is rebuilt only where a kind knows how."""
    __slots__ = ()

    def unpack(self, frame):
        return drain(frame, self)

    def length(self, frame):
        raise user_error(TypeError, f"object of type '{self.python_type().__name__}' has no len()")

    def contains(self, frame, item):
        while (x := next_item(frame, self)) is not None:
            if equal(frame, x, item):
                return True
        return False

    def stop_iteration(self) -> BaseException:
        """The StopIteration `next(it)` raises when `next` found the iterator exhausted."""
        return StopIteration()

    METHODS = ("__next__", "__iter__")

    def load_attr(self, frame, name):
        if name in self.METHODS:
            return MethodValue(self, name)
        if not hasattr(self.python_type(), name):
            raise missing_attribute(frame, self, name)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{self.python_type().__name__}.{name}")

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if name == "__iter__":
            return self
        if name == "__next__":
            item = self.next(frame)
            if item is None:
                raise TracedException(self.stop_iteration())
            return item
        return super().call_method(frame, method, args, kwargs)

    def rebuild(self, em):
        raise Unsupported(GENERATOR_STATE, f"a {self.python_type().__name__} made in captured code outlives it")


def _rebuild_call(em, fn, args: list) -> None:
    """Emit `fn(*args)` for values `args` (each rebuilt; one that cannot be refuses the whole)."""
    em.call_const(fn, [lambda a=a: em.value(a) for a in args])


# ============================================================================================
# generators
# ============================================================================================

CREATED, SUSPENDED, RUNNING, FINISHED = "created", "suspended", "running", "finished"


def stop_iteration_error(exc: BaseException) -> BaseException:
    """PEP 479: a StopIteration leaving a generator's body becomes a RuntimeError (3.11 does it in
    the generator machinery, 3.12 in the body's own exception handler)."""
    if not isinstance(exc, StopIteration):
        return exc
    error = RuntimeError("generator raised StopIteration")
    error.__cause__ = error.__context__ = exc
    return error


class GeneratorValue(LazyIterator):
    """A generator made by calling a generator function (or evaluating a generator expression)
    in traced code. Its body runs in a child frame (`frame`) that suspends at each yield: an
    item is computed only when the consumer asks for it, so the body's effects interleave with
    the consumer's exactly as in eager, and an infinite generator is fine as long as the
    consumer stops. `state` is CREATED (stopped at RETURN_GENERATOR), SUSPENDED (at a yield),
    RUNNING or FINISHED. Like CPython's generators it has an exception state of its own
    (`handling`: the exception its body is handling, kept while it is suspended inside an except
    block), swapped in while the body runs."""
    __slots__ = ("frame", "state", "returned", "handling")

    def __init__(self, gen_frame, source=None):
        super().__init__(source)
        self.frame = gen_frame
        self.state = CREATED
        self.returned: Optional[Value] = None     # what the body returned at the step that finished it
        self.handling: Optional[Value] = None

    def python_type(self):
        return types.GeneratorType

    def children(self):
        """Not started: the arguments and cells it is made again from (rebuild)."""
        if self.state != CREATED:
            return ()
        return (*[v for v in self.frame.locals.values() if isinstance(v, Value)], *self.frame.cells.values())

    def rebuild(self, em):
        """A generator not started yet (a generator expression made but not iterated when a graph
        break comes, `a, b = (int(v) for v in t)` breaking inside): made again by calling its
        function on the same arguments over the same cells. One that ran cannot be rebuilt."""
        code, frame = self.frame.code, self.frame
        positional = code.co_varnames[:code.co_argcount]
        if self.state != CREATED or code.co_flags & 0x0C or code.co_kwonlyargcount \
                or set(positional) & set(code.co_cellvars) or not all(n in frame.locals for n in positional):
            raise Unsupported(GENERATOR_STATE, f"generator {code.co_qualname} made in captured code outlives it "
                                               f"({self.state})")
        args = [frame.locals[n] for n in positional]
        closure = [frame.cells[n] for n in code.co_freevars]
        em.call_const(generator_again, [lambda: em.const(code), lambda: em.const(frame.globals),
                                        lambda: em.build_tuple(closure), lambda: em.build_tuple(args)])

    def next(self, frame):
        return self.send(frame, Const(None))

    def send(self, frame, value: Value) -> Optional[Value]:
        """Resume the body with `value` as the result of the yield it stopped at: the next item it
        yields, or None when it returns (its return value is then in `returned`)."""
        if self.state == RUNNING:
            raise user_error(ValueError, "generator already executing")
        self.returned = None
        if self.state == FINISHED:
            return None
        if self.state == CREATED and not _is_none(value):
            raise user_error(TypeError, "can't send non-None value to a just-started generator")
        self.frame.push(value)
        return self._run(frame)

    def throw(self, frame, exc: BaseException) -> Optional[Value]:
        """generator.throw(exc): `exc` is raised at the yield the body stopped at (its handlers
        may catch it and yield again); None when the body then returns."""
        if self.state == RUNNING:
            raise user_error(ValueError, "generator already executing")
        self.returned = None
        if self.state == FINISHED:
            raise TracedException(exc)
        if self.state == CREATED:         # raised before the body's first line: nothing catches it
            self.state = FINISHED
            raise TracedException(stop_iteration_error(exc))
        if self.delegating():
            raise Unsupported(UNSUPPORTED_VALUE, "throw() or close() of a generator suspended in `yield from`")
        self.state = RUNNING
        if not frame.tracer.throw_into(self.frame, exc):
            self.state = FINISHED
            raise TracedException(stop_iteration_error(exc))
        return self._run(frame)

    def close(self, frame) -> None:
        """generator.close(): GeneratorExit at the yield; the body may clean up, not yield again."""
        if self.state != SUSPENDED:
            self.state = FINISHED
            return
        try:
            item = self.throw(frame, GeneratorExit())
        except TracedException as e:
            if isinstance(e.exc, (GeneratorExit, StopIteration)):
                return
            raise
        if item is not None:
            raise user_error(RuntimeError, "generator ignored GeneratorExit")

    def _run(self, frame) -> Optional[Value]:
        child, tracer = self.frame, frame.tracer
        self.state = RUNNING
        outer, tracer.exc_info = tracer.exc_info, self.handling
        try:
            tracer.run(child)
        except TracedException as e:
            self.state = FINISHED
            error = stop_iteration_error(e.exc)
            if error is e.exc:
                raise
            raise TracedException(error) from None
        finally:
            self.handling, tracer.exc_info = tracer.exc_info, outer
        if child.done:
            self.state = FINISHED
            self.returned = child.return_value
            return None
        child.suspended = False
        self.state = SUSPENDED
        return child.yielded

    def stop_iteration(self):
        if self.returned is None or _is_none(self.returned):
            return StopIteration()
        value = self.returned.as_python()
        if not is_constant(value):
            raise Unsupported(UNSUPPORTED_VALUE, "a generator's return value (carried by StopIteration) that is "
                                                 "not a constant")
        return StopIteration(value)

    # ---- yield from, close at drop -------------------------------------------------------------
    def delegating(self) -> bool:
        """Is the body suspended inside `yield from` (the sub-iterator is on its stack)? CPython
        tells it the same way: the RESUME after the yield says "after yield from" or "after await"
        (2, 3) in its low two bits (3.13 keeps a flag above them)."""
        child = self.frame
        after = child.instructions[child.ip] if child.ip < len(child.instructions) else None
        return self.state == SUSPENDED and after is not None and after.opname == "RESUME" and after.arg & 3 >= 2

    def cleanup_at_close(self) -> bool:
        """Would closing it now run code of the program: a finally, an except, a `with` block's
        exit, a sub-iterator's close()? Eager closes a generator when its last reference goes,
        at a time the trace does not know: one left suspended like this must not be dropped."""
        if self.state != SUSPENDED:
            return False
        if self.delegating():
            inner = self.frame.stack[-1]
            if isinstance(inner, GeneratorValue):
                if inner.cleanup_at_close():
                    return True
            elif not isinstance(inner, (LazyIterator, IteratorValue)):
                return True              # a user iterator's close() would run
        return self.frame.cleanup_on_exception()

    # ---- methods ---------------------------------------------------------------------------------
    METHODS = ("__next__", "__iter__", "send", "throw", "close")

    def load_attr(self, frame, name):
        code = self.frame.code
        if name == "__name__":
            return Const(code.co_name)
        if name == "__qualname__":
            return Const(code.co_qualname)
        if name == "gi_code":
            return Const(code)
        if name == "gi_running":
            return Const(self.state == RUNNING)
        return super().load_attr(frame, name)

    def call_method(self, frame, method, args, kwargs):
        name = _method_name(method)
        if name in ("send", "throw"):
            item = self.send(frame, args[0]) if name == "send" else self.throw(frame, _thrown(args))
            if item is None:
                raise TracedException(self.stop_iteration())
            return item
        if name == "close":
            self.close(frame)
            return Const(None)
        return super().call_method(frame, method, args, kwargs)


def send_to(frame, receiver: Value, value: Value) -> tuple[Optional[Value], Optional[Value]]:
    """One step of `yield from` (CPython's PyIter_Send): (the item the sub-iterator yields, None),
    or (None, the value it returned) once it is done."""
    if isinstance(receiver, GeneratorValue):
        item = receiver.send(frame, value)
        return (item, None) if item is not None else (None, receiver.returned or Const(None))
    try:
        if _is_none(value):
            item = receiver.next(frame)
        else:
            item = load_attr(frame, receiver, "send").call(frame, [value], {})
    except TracedException as e:
        if isinstance(e.exc, StopIteration):
            return None, frame.wrap(e.exc.value, None)
        raise
    return (item, None) if item is not None else (None, Const(None))


def _thrown(args: list) -> BaseException:
    """The exception `gen.throw(exc)` or `gen.throw(cls)` raises."""
    real = args[0].real_object() if len(args) == 1 else None
    if isinstance(real, BaseException):
        return real
    if isinstance(real, type) and issubclass(real, BaseException) and real.__module__ == "builtins":
        return real()
    raise Unsupported(UNSUPPORTED_VALUE, "generator.throw() of an exception the tracer cannot make")


# ============================================================================================
# the sequence protocols: __getitem__ until IndexError, reversed(), iter(callable, sentinel)
# ============================================================================================

class _OldStyleSequence:
    def __getitem__(self, index):
        raise IndexError(index)


class SequenceIterator(LazyIterator):
    """`iter(obj)` of an object with `__getitem__` and no `__iter__` (the old sequence protocol):
    obj[0], obj[1], ... until an IndexError or StopIteration, after which it stays exhausted."""
    __slots__ = ("seq", "index")

    def __init__(self, seq: Value, source=None):
        super().__init__(source)
        self.seq, self.index = seq, 0

    def python_type(self):
        return type(iter(_OldStyleSequence()))

    def children(self):
        return () if self.seq is None else (self.seq,)

    def next(self, frame):
        if self.seq is None:
            return None
        try:
            item = self.seq.getitem(frame, Const(self.index))
        except TracedException as e:
            if isinstance(e.exc, (IndexError, StopIteration)):
                self.seq = None
                return None
            raise
        self.index += 1
        return item


class ReversedSequenceIterator(LazyIterator):
    """`reversed(obj)` of an object with `__len__` and `__getitem__` but no `__reversed__`:
    obj[len-1], ..., obj[0]; an IndexError or StopIteration ends it early."""
    __slots__ = ("seq", "index")

    def __init__(self, seq: Value, length: int, source=None):
        super().__init__(source)
        self.seq, self.index = seq, length - 1

    def python_type(self):
        return reversed

    def children(self):
        return () if self.seq is None else (self.seq,)

    def next(self, frame):
        if self.index >= 0 and self.seq is not None:
            try:
                item = self.seq.getitem(frame, Const(self.index))
                self.index -= 1
                return item
            except TracedException as e:
                if not isinstance(e.exc, (IndexError, StopIteration)):
                    raise
        self.index, self.seq = -1, None
        return None

    def rebuild(self, em):
        if self.seq is None:
            em.call_const(iter, [lambda: em.build_tuple([])])
        else:
            em.call_const(reversed_at, [lambda: em.value(self.seq), lambda: em.const(self.index)])


class CallIterator(LazyIterator):
    """`iter(fn, sentinel)`: fn() until it returns something equal to the sentinel (or raises
    StopIteration); then exhausted for good."""
    __slots__ = ("fn", "sentinel")

    def __init__(self, fn: Value, sentinel: Value, source=None):
        super().__init__(source)
        self.fn, self.sentinel = fn, sentinel

    def python_type(self):
        return type(iter(int, 0))

    def children(self):
        return () if self.fn is None else (self.fn, self.sentinel)

    def next(self, frame):
        if self.fn is None:
            return None
        try:
            result = self.fn.call(frame, [], {})
        except TracedException as e:
            if isinstance(e.exc, StopIteration):
                self.fn = None
            raise
        if equal(frame, self.sentinel, result):
            self.fn = None
            return None
        return result


# ============================================================================================
# map, filter, zip, enumerate
# ============================================================================================

class MapIterator(LazyIterator):
    """`map(fn, *iterables)`: one item of each iterator, then fn(*items) — only when asked."""
    __slots__ = ("fn", "iterators")

    def __init__(self, fn: Value, iterators: list, source=None):
        super().__init__(source)
        self.fn, self.iterators = fn, list(iterators)

    def python_type(self):
        return map

    def children(self):
        return (self.fn, *self.iterators)

    def next(self, frame):
        args = []
        for it in self.iterators:
            item = it.next(frame)
            if item is None:
                return None
            args.append(item)
        return self.fn.call(frame, args, {})

    def rebuild(self, em):
        _rebuild_call(em, map, [self.fn, *self.iterators])


class FilterIterator(LazyIterator):
    """`filter(fn, iterable)`: the next item whose fn(item) (or the item itself, for fn None)
    is true."""
    __slots__ = ("fn", "iterator")

    def __init__(self, fn: Value, iterator: Value, source=None):
        super().__init__(source)
        self.fn, self.iterator = fn, iterator

    def python_type(self):
        return filter

    def children(self):
        return (self.fn, self.iterator)

    def next(self, frame):
        by_truth = _is_none(self.fn) or self.fn.real_object() is bool
        while (item := self.iterator.next(frame)) is not None:
            test = item if by_truth else self.fn.call(frame, [item], {})
            if test.truthy(frame):
                return item
        return None

    def rebuild(self, em):
        _rebuild_call(em, filter, [self.fn, self.iterator])


class ZipIterator(LazyIterator):
    """`zip(*iterables, strict=...)`: a tuple of one item of each, until the first is exhausted
    (with strict=True, all must end together, checked as CPython checks it)."""
    __slots__ = ("iterators", "strict")

    def __init__(self, iterators: list, strict: bool, source=None):
        super().__init__(source)
        self.iterators, self.strict = list(iterators), strict

    def python_type(self):
        return zip

    def children(self):
        return tuple(self.iterators)

    def next(self, frame):
        if not self.iterators:
            return None
        items = []
        for i, it in enumerate(self.iterators):
            try:
                item = it.next(frame)
            except TracedException as e:
                if not self.strict or not isinstance(e.exc, StopIteration):
                    raise
                item = None
            if item is None:
                if self.strict:
                    self._check_lengths(frame, i)
                return None
            items.append(item)
        return SeqValue(items, tuple)

    def _check_lengths(self, frame, exhausted: int) -> None:
        """zip(strict=True) after iterator `exhausted` ended: the others must end now too."""
        if exhausted:
            plural = " " if exhausted == 1 else "s 1-"
            raise user_error(ValueError, f"zip() argument {exhausted + 1} is shorter than argument{plural}{exhausted}")
        for i, it in enumerate(self.iterators[1:], start=1):
            if next_item(frame, it) is not None:
                plural = " " if i == 1 else "s 1-"
                raise user_error(ValueError, f"zip() argument {i + 1} is longer than argument{plural}{i}")

    def rebuild(self, em):
        _rebuild_call(em, functools.partial(zip, strict=True) if self.strict else zip, self.iterators)


class EnumerateIterator(LazyIterator):
    """`enumerate(iterable, start)`: (count, item), the count advancing with each item."""
    __slots__ = ("iterator", "count")

    def __init__(self, iterator: Value, start: int, source=None):
        super().__init__(source)
        self.iterator, self.count = iterator, start

    def python_type(self):
        return enumerate

    def children(self):
        return (self.iterator,)

    def next(self, frame):
        item = self.iterator.next(frame)
        if item is None:
            return None
        self.count += 1
        return SeqValue([Const(self.count - 1), item], tuple)

    def rebuild(self, em):
        em.call_const(enumerate, [lambda: em.value(self.iterator), lambda: em.const(self.count)])


# ---- constructors (the builtins' handlers call these) -------------------------------------------

def make_map(frame, args: list, kwargs: dict) -> Value:
    if kwargs:
        raise user_error(TypeError, "map() takes no keyword arguments")
    if len(args) < 2:
        raise user_error(TypeError, "map() must have at least two arguments.")
    return MapIterator(args[0], [get_iter(frame, a) for a in args[1:]])


def make_filter(frame, args: list, kwargs: dict) -> Value:
    if kwargs:
        raise user_error(TypeError, "filter() takes no keyword arguments")
    if len(args) != 2:
        raise user_error(TypeError, f"filter expected 2 arguments, got {len(args)}")
    return FilterIterator(args[0], get_iter(frame, args[1]))


def make_zip(frame, args: list, kwargs: dict) -> Value:
    if set(kwargs) - {"strict"}:
        fold(zip, **{k: None for k in kwargs})          # eager's TypeError
    strict = kwargs.get("strict", Const(False)).truthy(frame)
    return ZipIterator([get_iter(frame, a) for a in args], strict)


def make_enumerate(frame, args: list, kwargs: dict) -> Value:
    names = ("iterable", "start")
    stand_ins = {"iterable": (), "start": 0}
    # a wrong signature: eager's TypeError, from the real enumerate called with stand-ins
    fold(enumerate, *[stand_ins[n] for n in names[:len(args)]], *args[len(names):],
         **{k: stand_ins.get(k, 0) for k in kwargs})
    params = {**dict(zip(names, args)), **kwargs}
    start = params.get("start", Const(0)).as_python()
    fold(enumerate, (), start)                       # a start that is not an integer: eager's TypeError
    return EnumerateIterator(get_iter(frame, params["iterable"]), start)
