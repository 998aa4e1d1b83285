"""Side effects of one trace on objects that outlive it, as typed records that replay themselves.

Traced code that writes an attribute of an existing object, a global, a closure cell, or changes
the contents of a list/dict/set that exists outside the frame does not do it while tracing: it
is recorded here, later reads in the same trace see the pending value, and the generated code
replays the records in program order after the graph ran (`SideEffects.replay`). Each record
knows which values it needs (`values()`, to find the tensors the graph must output) and how to
emit its own replay.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from bytecode import FreeVar

from .breaks import UNSUPPORTED_MUTATION, Unsupported
from .runtime import advance_iterator
from .values.base import Const, Value


class Effect:
    def values(self) -> tuple:
        raise NotImplementedError

    def replay(self, em) -> None:
        raise NotImplementedError


@dataclass(eq=False)
class AttrWrite(Effect):
    """`obj.name = value` on an existing object (obj has a source)."""
    obj: Value
    name: str
    value: Value

    def values(self):
        return (self.obj, self.value)

    def replay(self, em):
        em.value(self.value)
        em.load_source(self.obj.source)
        em.emit("STORE_ATTR", self.name)


@dataclass(eq=False)
class AttrDelete(Effect):
    """`del obj.name` on an existing object."""
    obj: Value
    name: str

    def values(self):
        return (self.obj,)

    def replay(self, em):
        em.load_source(self.obj.source)
        em.emit("DELETE_ATTR", self.name)


@dataclass(eq=False)
class GlobalWrite(Effect):
    name: str
    value: Value

    def values(self):
        return (self.value,)

    def replay(self, em):
        em.value(self.value)
        em.emit("STORE_GLOBAL", self.name)


@dataclass(eq=False)
class CellWrite(Effect):
    """A closure cell's new contents: the captured frame's own free variable (`is_root`), or a
    cell reached through a source (an inlined function's closure)."""
    cell: Value
    name: str
    is_root: bool

    def values(self):
        return (self.cell.contents,) if isinstance(self.cell.contents, Value) else ()

    def replay(self, em):
        deleted = self.cell.contents is None            # (DELETE_DEREF): emptied for real
        if self.is_root and em.has_freevar(self.name):
            if deleted:
                em.empty_cell(lambda: em.load_cell(FreeVar(self.name)))
            else:
                em.value(self.cell.contents)
                em.emit("STORE_DEREF", FreeVar(self.name))
        elif self.cell.source is not None:
            if deleted:
                em.empty_cell(lambda: em.load_source(self.cell.source))
            else:
                em.value(self.cell.contents)
                em.load_source(self.cell.source)
                em.emit("STORE_ATTR", "cell_contents")
        else:
            raise Unsupported(UNSUPPORTED_MUTATION, f"closure variable {self.name!r}")


@dataclass(eq=False)
class CallEffect(Effect):
    """A C method run on a real object after the graph, e.g. `OrderedDict.__setitem__(obj, k, v)`
    or `object.__setattr__(obj, name, value)` past a custom __setattr__."""
    fn: Any
    args: list

    def values(self):
        return tuple(self.args)

    def replay(self, em):
        em.call_const(self.fn, [lambda a=a: em.value(a) for a in self.args])
        em.emit("POP_TOP")


@dataclass(eq=False)
class IteratorMove(Effect):
    """An iterator the frame was given moved on by `steps` items (and run out, `exhaust`) by the
    trace. Replayed after every other record: values read from the items ahead of it are reloaded
    relative to where it stood when the frame was called (`sources.IteratorAheadSource`)."""
    it: Value
    steps: int = 0
    exhaust: bool = False

    def values(self):
        return (self.it,)

    def replay(self, em):
        em.call_const(advance_iterator, [lambda: em.value(self.it), lambda: em.const(self.steps),
                                         lambda: em.const(self.exhaust)])
        em.emit("POP_TOP")


class SideEffects:
    """The effects of one trace: containers whose contents changed (replaced as a whole, first),
    then the records, in program order, then the moves of iterators the frame was given."""

    def __init__(self):
        self.moves: list[IteratorMove] = []
        self.records: list[Effect] = []
        self.mutated: list[Value] = []              # containers with a source whose contents changed
        self.pending_attrs: dict[int, dict[str, Value]] = {}   # id(obj value) -> name -> value written
        self.global_writes: dict[str, Value] = {}

    def __bool__(self):
        return bool(self.records or self.mutated or self.global_writes or self.moves)

    # ---- recording ------------------------------------------------------------------------------
    def mutate(self, container: Value) -> None:
        """A list/dict/set that exists outside the frame changed: replay its new contents."""
        if container.source is not None and not any(m is container for m in self.mutated):
            self.mutated.append(container)

    def store_attr(self, obj: Value, name: str, value: Value, bypass_setattr: bool = False) -> None:
        self.pending_attrs.setdefault(id(obj), {})[name] = value
        if bypass_setattr:
            self.records.append(CallEffect(object.__setattr__, [obj, Const(name), value]))
        else:
            self.records.append(AttrWrite(obj, name, value))

    def delete_attr(self, obj: Value, name: str, bypass_delattr: bool = False) -> None:
        self.pending_attrs.setdefault(id(obj), {})[name] = DELETED
        if bypass_delattr:
            self.records.append(CallEffect(object.__delattr__, [obj, Const(name)]))
        else:
            self.records.append(AttrDelete(obj, name))

    def pending_attr(self, obj: Value, name: str) -> Optional[Value]:
        """What this trace wrote to `obj.name` and has not replayed (DELETED after a `del`)."""
        pending = self.pending_attrs.get(id(obj))
        return pending.get(name) if pending else None

    def store_global(self, name: str, value: Value) -> None:
        self.global_writes[name] = value
        self.records.append(GlobalWrite(name, value))

    def store_cell(self, cell: Value, name: str, is_root: bool) -> None:
        self.records.append(CellWrite(cell, name, is_root))

    def call(self, fn, args: list) -> None:
        self.records.append(CallEffect(fn, list(args)))

    def move_iterator(self, it: Value, exhaust: bool = False) -> None:
        """`it`, an iterator the frame was given, yielded one more item (or, `exhaust`, ran out)."""
        move = next((m for m in self.moves if m.it is it), None)
        if move is None:
            move = IteratorMove(it)
            self.moves.append(move)
        if exhaust:
            move.exhaust = True
        else:
            move.steps += 1

    # ---- reading ------------------------------------------------------------------------------
    def values(self) -> list[Value]:
        # a changed container is reloaded, but its new contents are built: they count as values
        found = [v for container in self.mutated for v in (container, *container.children())]
        for record in [*self.records, *self.moves]:
            found.extend(record.values())
        return found

    def snapshot(self) -> tuple:
        """Enough to tell later whether anything was recorded meanwhile (`unchanged`)."""
        return (len(self.records), len(self.mutated), dict(self.global_writes),
                {k: dict(v) for k, v in self.pending_attrs.items()},
                [(m.steps, m.exhaust) for m in self.moves])

    def unchanged(self, snapshot: tuple) -> bool:
        return self.snapshot() == snapshot

    # ---- generated code ------------------------------------------------------------------------
    def replay(self, em) -> None:
        for container in self.mutated:
            em.replace_contents(container)
        for record in [*self.records, *self.moves]:
            record.replay(em)


class _Deleted(Value):
    """The pending value of an attribute this trace deleted: reading it is an AttributeError."""
    __slots__ = ()

    def python_type(self):
        return type(None)


DELETED = _Deleted()
