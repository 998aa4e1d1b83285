"""Continuation ("resume") functions for graph breaks, and the facts about a code object a break
needs: which locals are live at an offset, whether an offset sits in a loop or a try block.

A resume function is the original code with a new prologue: it takes the value stack left after
the break instruction (`___stack0`, ...) and the live locals as arguments, pushes the stack
back (NULLs included), and jumps to the offset where execution continues. It is cached per
(code, offset, stack layout, live locals), and the hook captures it like any other frame.
"""
from __future__ import annotations

import dis
import types
import weakref

import torch
from bytecode import Bytecode, CellVar, Instr, Label, TryBegin, TryEnd

from .compat import JUMP_OPS, UNCONDITIONAL_JUMPS

_ENDS_BLOCK = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"} | UNCONDITIONAL_JUMPS
_READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"}   # `del v` needs v bound
_WRITES = {"STORE_FAST"}
_FACTS: "weakref.WeakKeyDictionary[types.CodeType, CodeFacts]" = weakref.WeakKeyDictionary()
_RESUME_CODES: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()


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
        self.loop_ranges = [(inst.argval, inst.offset) for inst in self.insts
                            if inst.opname in JUMP_OPS and isinstance(inst.argval, int) and inst.argval <= inst.offset]
        # Each handler's protected span, from its first to its last protected offset (the flat
        # exception table splits a block around the blocks nested in it): `with` blocks (their
        # handler runs WITH_EXCEPT_START) and every other handler.
        spans: dict = {}
        for e in self.exception_table:
            lo, hi = spans.get(e.target, (e.start, e.end))
            spans[e.target] = (min(lo, e.start), max(hi, e.end))
        self.with_spans = [span for target, span in spans.items() if self._with_handler(target)]
        self.other_spans = [span for target, span in spans.items() if not self._with_handler(target)]
        self.live_in = self._liveness(handlers)

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
        return sum(1 for lo, hi in self.with_spans if lo <= offset < hi)

    def handler_at(self, offset: int):
        """The exception table entry (target, depth, lasti) covering `offset`, or None."""
        for entry in self.exception_table:
            if entry.start <= offset < entry.end:
                return entry
        return None

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
                out = frozenset().union(*(live[s] for s in succ[i])) if succ[i] else frozenset()
                if inst.opname in _WRITES:
                    new = out - {inst.argval}
                elif inst.opname in _READS:
                    new = out | {inst.argval}
                else:
                    new = out
                if new != live[i]:
                    live[i], changed = new, True
        return live

    def live_at(self, offset: int) -> frozenset:
        return self.live_in[self.index_of[offset]]

    def why_not_breakable(self, offset: int) -> str:
        """'' if a break at `offset` can resume, else the reason the frame must run eagerly."""
        if any(start <= offset <= end for start, end in self.loop_ranges):
            return "the break is inside a for/while loop"
        if any(start <= offset < end for start, end in self.other_spans):
            return "the break is inside a try/except block"
        return ""        # inside `with` blocks: codegen resumes when they are grad modes (GradModeBlock)


class GradModeBlock:
    """A grad-mode `with` block (no_grad, enable_grad, set_grad_enabled) that a graph break
    interrupted. At the break the block is in force already (the graph before it switched the
    mode, or an earlier frame did); the break's code pushes `GradModeBlock(...).__exit__` where
    the block's own `__exit__` was on the stack, so the resume function leaves (or unwinds) the
    block as the original code would. `enabled=None` is a contextlib.nullcontext()."""
    __slots__ = ("enabled", "previous")

    def __init__(self, enabled, previous):
        self.enabled, self.previous = enabled, previous
        if enabled is not None:       # in force already with our backends; a backend that folded the
            torch._C._set_grad_enabled(enabled)      # graph's mode switches away may not have left it set

    def __exit__(self, *exc_info):
        if self.enabled is not None:
            torch._C._set_grad_enabled(self.previous)
        return False


def grad_mode_exit(enabled, previous):
    return GradModeBlock(enabled, previous).__exit__


class AutocastBlock:
    """Likewise for a `torch.autocast` block: `state` is what it switches to (device, enabled,
    dtype, cache), `previous` what its exit restores (enabled, dtype, cache). Entering changes
    autocast's nesting count, so a block is entered exactly once: the graph before the break
    leaves the blocks its trace entered (convert_frame), and the break's code enters them here;
    a block entered by an earlier frame is passed on as it is."""
    __slots__ = ("device", "enabled", "dtype", "cache", "previous")

    def __init__(self, state: tuple, previous: tuple):
        from .graph_builder import enter_autocast
        self.device, self.enabled, self.dtype, self.cache = state
        self.previous = previous
        enter_autocast(*state)

    def __exit__(self, *exc_info):
        from .graph_builder import exit_autocast
        exit_autocast(self.device, *self.previous)
        return False


def enter_autocast_block(state, previous):
    return AutocastBlock(state, previous).__exit__


def facts(code: types.CodeType) -> CodeFacts:
    found = _FACTS.get(code)
    if found is None:
        found = _FACTS[code] = CodeFacts(code)
    return found


def abstract_instructions(code: types.CodeType) -> list[Instr]:
    """The `bytecode` library's instructions of `code`, one per dis instruction (no EXTENDED_ARG)."""
    return [i for i in Bytecode.from_code(code) if isinstance(i, Instr)]


def resume_code(code: types.CodeType, offset: int, stack_nulls: tuple, live: tuple,
                cells: tuple = (), first: str = "") -> types.CodeType:
    """The continuation of `code` at `offset`, taking (`first`, the non-NULL stack items, the `live`
    locals, then the contents of the cell variables in `cells` (fresh cells are made for them).

    `first` is the original first argument when the code uses zero-argument super(), which
    CPython resolves from the frame's first local."""
    key = (offset, stack_nulls, live, cells, first)
    per_code = _RESUME_CODES.setdefault(code, {})
    if key in per_code:
        return per_code[key]
    bc = Bytecode.from_code(code)
    target_index = facts(code).index_of[offset]
    body, seen, label = [], -1, Label()
    started = False
    open_try, reopened = None, {}
    for item in bc:
        if isinstance(item, Instr):
            seen += 1
            if not started:            # drop the original prologue (MAKE_CELL / COPY_FREE_VARS / RESUME)
                if item.name == "RESUME":
                    started = True
                continue
            if seen == target_index:
                if open_try is None:
                    body.append(label)
                else:
                    # The jump lands inside a protected range (a `with` block): end the range
                    # before the landing point and open it again there, so the entry into it is
                    # on the prologue's path (the stack-size computation follows TryBegin).
                    again = TryBegin(open_try.target, open_try.push_lasti, open_try.stack_depth)
                    reopened[id(open_try)] = again
                    body.extend([TryEnd(open_try), label, again])
        elif not started:
            continue
        elif isinstance(item, TryBegin):
            open_try = item
        elif isinstance(item, TryEnd):
            open_try = None
            if id(item.entry) in reopened:
                item = TryEnd(reopened[id(item.entry)])
        body.append(item)
    lineno = next((i.lineno for i in body if isinstance(i, Instr) and i.lineno), code.co_firstlineno)
    prologue = [Instr("MAKE_CELL", CellVar(name), lineno=lineno) for name in code.co_cellvars]
    if code.co_freevars:
        prologue.append(Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=lineno))
    prologue.append(Instr("RESUME", 0, lineno=lineno))
    args = []
    for i, is_null in enumerate(stack_nulls):
        if is_null:
            prologue.append(Instr("PUSH_NULL", lineno=lineno))
        else:
            args.append(f"___stack{i}")
            prologue.append(Instr("LOAD_FAST", f"___stack{i}", lineno=lineno))
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))
    bc.clear()
    bc.extend(prologue + body)
    bc.argnames = ([first] if first else []) + args + list(live) + list(cells)
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(0x04 | 0x08)         # no *args / **kwargs: everything is positional now
    bc.qualname = f"{code.co_qualname}.<resume at {offset}>"
    new = bc.to_code()
    per_code[key] = new
    return new


def first_argument_for_super(code: types.CodeType) -> str:
    """The name resume functions must keep as their first argument, or ''. Zero-argument super()
    reads the frame's first local (through its cell if it is one), so with a `__class__` cell the
    original first argument stays first in every resume function, resumes of resumes included."""
    if "__class__" in code.co_freevars and code.co_argcount > 0:
        return code.co_varnames[0]
    return ""
