"""What happened to each frame we looked at: captured (with graphs, guards and the replacement
code), or run eagerly and why, and for a recapture which guard failed on what. explain(), logging
and the trace directory (`DYNAMO_LITE_TRACE`, a sink of `add`) read these records."""
from __future__ import annotations

import collections
import itertools
import linecache
import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import config
from ..breaks import BreakKind

log = logging.getLogger("dynamo_lite")


_SEQUENCE = itertools.count()


@dataclass
class Recapture:
    """Why a code object was captured again: the guard of the cached entry that came closest,
    the value it held on to (`old`) and the one it met (`new`), and its reason sentence."""
    guard: str        # the guard as Python, with the frame's names (`type(n) is int and n == 2`)
    old: str
    new: str
    reason: str


@dataclass
class FrameRecord:
    name: str
    filename: str
    firstlineno: int
    status: str                                   # "captured", "fallback" (ran eagerly), "error"
    kind: Optional[BreakKind] = None
    detail: str = ""
    user_stack: list = field(default_factory=list)   # [(filename, lineno, function)], outermost first
    graphs: list = field(default_factory=list)       # fx GraphModules handed to the backend
    guards: Any = None                               # CompiledGuards
    recompile_reason: Optional[str] = None
    recapture: Optional[Recapture] = None
    code_ref: Any = None                             # weakref to the replacement code; None: the frame's own code runs
    capture_seconds: float = 0.0
    op_count: int = 0
    ops_as_is: int = 0                               # a loop stretch's single op run without a backend (no graph)
    graphs_shared: int = 0                           # graphs served by one compiled for another resume function
    break_offset: Optional[int] = None              # status "break": the instruction run eagerly
    fallback_reason: str = ""                        # status "fallback": why the break could not resume
    fallback_kind: Optional[BreakKind] = None        # ... as a kind of the registry (None: `kind` itself)
    qualname: str = ""
    backend: str = ""
    code_id: int = 0                                 # id() of the code object (resume functions share names)
    seq: int = field(default_factory=lambda: next(_SEQUENCE))   # order of creation, for explain()

    @property
    def location(self) -> str:
        if self.user_stack:
            f, line, _ = self.user_stack[-1]
            return f"{f}:{line}"
        return f"{self.filename}:{self.firstlineno}"

    @property
    def code(self):
        """The replacement code while its cache entry lives (a record must not keep it alive), else None."""
        return self.code_ref() if self.code_ref is not None else None

    @property
    def source_line(self) -> str:
        if self.user_stack:
            f, line, _ = self.user_stack[-1]
            return linecache.getline(f, line).strip()
        return ""


RECORDS: "collections.deque[FrameRecord]" = collections.deque(maxlen=10_000)
_warned: set = set()
# Called with each record added; they must not raise (the trace directory's writer).
SINKS: "list[Callable[[FrameRecord], None]]" = []


def add(record: FrameRecord) -> None:
    RECORDS.append(record)
    for sink in SINKS:
        sink(record)
    if record.status in ("fallback", "break") and "graph_breaks" in config.log:
        kind = f"[{record.kind.id} {record.kind.name}]" if record.kind else ""
        what = "graph break" if record.status == "break" else f"frame ran eagerly ({record.fallback_reason})"
        log.info("%s in %s at %s: %s %s", what, record.qualname or record.name, record.location, kind, record.detail)
    if record.recompile_reason and "recompiles" in config.log:
        log.info("recapturing %s (%s:%d): %s", record.name, record.filename, record.firstlineno,
                 record.recompile_reason)


def warn_once(key, message: str, stacklevel: int = 2) -> None:
    """Warn once per key (until reset()); `stacklevel` counts from the caller, as warnings.warn's."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)


def clear() -> None:
    RECORDS.clear()
    _warned.clear()
