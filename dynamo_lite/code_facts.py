"""Facts about a code object that tracing, graph breaks and resume functions need, computed once
per code object: its instructions, exception table, which locals are live at each offset, and
whether an offset sits inside a loop, a try block or `with` blocks.
"""
from __future__ import annotations

import dis
import types
import weakref
from typing import Optional

from bytecode import Bytecode, Instr

from .compat import JUMP_OPS, LOCAL_PAIR_OPS, UNCONDITIONAL_JUMPS

_ENDS_BLOCK = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"} | UNCONDITIONAL_JUMPS
# How each instruction touching locals uses them, in its argval's order ('r' read, 'w' write;
# `del v` needs v bound, so it reads). 3.13's super-instructions name two locals.
_LOCAL_ACCESS = {"LOAD_FAST": "r", "LOAD_FAST_CHECK": "r", "LOAD_FAST_AND_CLEAR": "r", "DELETE_FAST": "r",
                 "STORE_FAST": "w", **LOCAL_PAIR_OPS}
_READ_ALL_LOCALS = {"locals", "vars", "dir", "eval", "exec"}
# How resume functions (resume.py) name the stack items they take as arguments: not variables of
# the program.
STACK_ARG_PREFIX = "___stack"


def shown_local(name: str) -> str:
    """A local variable as users read it: a resume function's stack item `___stack0` is `stack0`."""
    return "stack" + name[len(STACK_ARG_PREFIX):] if name.startswith(STACK_ARG_PREFIX) else name


_FACTS: "weakref.WeakKeyDictionary[types.CodeType, CodeFacts]" = weakref.WeakKeyDictionary()


class CodeFacts:
    """Liveness, loops and try blocks of one code object (computed once)."""

    def __init__(self, code: types.CodeType):
        self.code = code
        every = list(dis.get_instructions(code))
        self.insts = [i for i in every if i.opname != "EXTENDED_ARG"]
        self.index_of = {inst.offset: i for i, inst in enumerate(self.insts)}
        # A jump may land on the EXTENDED_ARG prefix of its target (a loop's exit onto a long
        # JUMP_FORWARD): that offset means the instruction it prefixes.
        pending = []
        for inst in every:
            if inst.opname == "EXTENDED_ARG":
                pending.append(inst.offset)
            else:
                for offset in pending:
                    self.index_of[offset] = self.index_of[inst.offset]
                pending = []
        self.exception_table = dis._parse_exception_table(code)
        self.catching_ranges = [(e.start, e.end) for e in self.exception_table if self._handler_catches(e.target)]
        handlers = [(e.start, e.end, e.target) for e in self.exception_table]
        # (a backward jump's target, by the offset of the instruction there, not of its prefix)
        self.loop_ranges = [(self.insts[self.index_of[inst.argval]].offset, inst.offset) for inst in self.insts
                            if inst.opname in JUMP_OPS and isinstance(inst.argval, int) and inst.argval <= inst.offset]
        # Each handler's protected span, from its first to its last protected offset (the flat
        # exception table splits a block around the blocks nested in it): `with` blocks (their
        # handler runs WITH_EXCEPT_START) and every other handler.
        spans: dict = {}
        for e in self.exception_table:
            lo, hi = spans.get(e.target, (e.start, e.end))
            spans[e.target] = (min(lo, e.start), max(hi, e.end))
        # `with` blocks as (first, last protected offset, handler depth: the block's `__exit__`
        # is stack item depth - 1 inside it)
        depths = {e.target: e.depth for e in self.exception_table}
        self.with_spans = [(lo, hi, depths[target]) for target, (lo, hi) in spans.items() if self._with_handler(target)]
        self.other_spans = [span for target, span in spans.items() if not self._with_handler(target)]
        self.live_in = self._liveness(handlers)
        # locals() / vars() / dir() / eval() / exec() read every variable by name: a resume function
        # of such code must get all of them, whatever the liveness of each (a guess by name, on the
        # safe side).
        self.reads_all_locals = bool(_READ_ALL_LOCALS & set(code.co_names))

    _CLEANUP_ONLY = {"PUSH_EXC_INFO", "SWAP", "POP_TOP", "COPY", "STORE_FAST", "CALL_INTRINSIC_1", "NOP",
                     "POP_EXCEPT", "LOAD_CONST", "END_FOR"}

    def _handler_catches(self, target: int) -> bool:
        """Does the handler at `target` run user code or swallow the exception? `with` blocks'
        cleanup and compiler-made re-raise handlers (comprehensions, generators) do not."""
        start = self.index_of.get(target)
        if start is None:
            return True
        for inst in self.insts[start:start + 64]:
            if inst.opname == "WITH_EXCEPT_START":
                return False
            if inst.opname in ("RERAISE", "RAISE_VARARGS"):
                return False
            if inst.opname not in self._CLEANUP_ONLY:
                return True
        return True

    def _with_handler(self, target: int) -> bool:
        start = self.index_of.get(target)
        head = [i.opname for i in self.insts[start:start + 3]] if start is not None else []
        return "WITH_EXCEPT_START" in head

    def with_depth(self, offset: int) -> int:
        """How many `with` blocks enclose `offset`."""
        return sum(1 for lo, hi, _ in self.with_spans if lo <= offset < hi)

    def with_blocks_at(self, offset: int) -> list[tuple[int, int]]:
        """The `with` blocks enclosing `offset`, innermost first, as (index of their BEFORE_WITH,
        stack depth of their handler: the block's `__exit__` is stack item depth - 1)."""
        blocks = sorted(((lo, depth) for lo, hi, depth in self.with_spans if lo <= offset < hi), reverse=True)
        return [(self.index_of[lo] - 1, depth) for lo, depth in blocks
                if self.insts[self.index_of[lo] - 1].opname == "BEFORE_WITH"]

    def handler_at(self, offset: int):
        """The exception table entry (target, depth, lasti) covering `offset`, or None."""
        for entry in self.exception_table:
            if entry.start <= offset < entry.end:
                return entry
        return None

    def cleanup_on_exception(self, offset: int) -> bool:
        """Would an exception raised at `offset` run code of the program before leaving the frame:
        an except or finally block, a `with` block's exit? A generator's compiler-made handlers
        do not count: 3.12's StopIteration-to-RuntimeError wrapper (it only re-raises) and a
        `yield from`'s CLEANUP_THROW (it passes the exception on to the handler covering it)."""
        while (entry := self.handler_at(offset)) is not None:
            start = self.index_of.get(entry.target)
            head = [i.opname for i in self.insts[start:start + 2]] if start is not None else []
            if head == ["CALL_INTRINSIC_1", "RERAISE"]:
                return False
            if head[:1] != ["CLEANUP_THROW"]:
                return True
            offset = entry.target
        return False

    def in_catching_block(self, offset: int) -> bool:
        return any(start <= offset < end for start, end in self.catching_ranges)

    def _successors(self, i, handlers):
        inst = self.insts[i]
        out = []
        if inst.opname not in _ENDS_BLOCK and i + 1 < len(self.insts):
            out.append(i + 1)
        if (inst.opname in JUMP_OPS or inst.opname in ("FOR_ITER", "SEND")) and inst.argval in self.index_of:
            out.append(self.index_of[inst.argval])
        for start, end, target in handlers:
            if start <= inst.offset < end and target in self.index_of:
                out.append(self.index_of[target])
        return out

    def _liveness(self, handlers) -> list[frozenset]:
        succ = [self._successors(i, handlers) for i in range(len(self.insts))]
        live = [frozenset()] * len(self.insts)
        changed = True
        while changed:
            changed = False
            for i in reversed(range(len(self.insts))):
                inst = self.insts[i]
                new = frozenset().union(*(live[s] for s in succ[i])) if succ[i] else frozenset()
                access = _LOCAL_ACCESS.get(inst.opname)
                if access:
                    names = inst.argval if len(access) == 2 else (inst.argval,)
                    for kind, name in reversed(list(zip(access, names))):    # backwards through the accesses
                        new = new - {name} if kind == "w" else new | {name}
                if new != live[i]:
                    live[i], changed = new, True
        return live

    def live_at(self, offset: int) -> frozenset:
        if self.reads_all_locals:
            return frozenset(n for n in self.code.co_varnames if not n.startswith(STACK_ARG_PREFIX))
        return self.live_in[self.index_of[offset]]

    def in_loop(self, offset: int) -> bool:
        """Is `offset` inside a for/while loop (between a backward jump's target and the jump)?"""
        return any(start <= offset <= end for start, end in self.loop_ranges)

    def line_of(self, offset: int) -> Optional[int]:
        """The source line of the instruction at `offset`, or None where it has none."""
        inst = self.insts[self.index_of[offset]]
        return inst.positions.lineno if inst.positions and inst.positions.lineno else None

    def for_loop_head(self, offset: int) -> Optional[int]:
        """The offset of the FOR_ITER heading the innermost `for` loop around `offset`, or None.
        (Other backward jumps are not `for` loops: `while` loops, and from 3.12 the jump from a
        `with` block's handler back to the code after the block.)"""
        starts = [start for start, end in self.loop_ranges if start <= offset <= end
                  and self.insts[self.index_of[start]].opname == "FOR_ITER"]
        return max(starts) if starts else None

    def in_other_span(self, offset: int) -> bool:
        """Is `offset` inside a try block (or another handler's range but a `with` block's)?"""
        return any(start <= offset < end for start, end in self.other_spans)


def facts(code: types.CodeType) -> CodeFacts:
    found = _FACTS.get(code)
    if found is None:
        found = _FACTS[code] = CodeFacts(code)
    return found


def abstract_instructions(code: types.CodeType) -> list[Instr]:
    """The `bytecode` library's instructions of `code`, one per dis instruction (no EXTENDED_ARG)."""
    return [i for i in Bytecode.from_code(code) if isinstance(i, Instr)]
