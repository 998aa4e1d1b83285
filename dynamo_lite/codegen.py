"""Emit the replacement bytecode for a captured frame (with the `bytecode` library).

The replacement keeps the original signature, cells and free variables (the C hook runs it in
the original frame), then: loads the graph inputs from their sources, calls the compiled graph,
replays recorded side effects (attribute/global/cell writes, list and dict contents; a graph that
raises first makes the frame run eagerly, see runtime.FrameRun), rebuilds
the Python value the frame returned from graph outputs, constants and reloaded sources, and
returns it.
"""
from __future__ import annotations

import types
from typing import NamedTuple, Optional

import torch
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .breaks import BREAK_IN_HANDLER, BREAK_IN_WITH, UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE, Unsupported
from .code_facts import abstract_instructions, facts
from .compat import (FOR_ITER_EXIT_SKIPS, JUMP_OPS, LOAD_CELL_OPNAME, NULL_AFTER_CALLABLE, UNCONDITIONAL_JUMPS,
                     instr_load_attr, instrs_call, instrs_jump_if, instrs_make_closure)
from .resume import first_argument_for_super, is_driven, original_of, resume_code
from .runtime import Continue, FrameRun, draws_random_numbers, drive, empty_cell, fresh_array_copy
from .sources import LocalSource, Source
from .values.base import Const, LazyValue, NullValue, Value
from .values.contexts import block_exit

GRAPH_OUT = "___graph_out"
RESULT = "___result"


class ResumeCall(NamedTuple):
    """A resume function that a break's code calls: `nulls` says which stack items it takes
    (`___stack{i}` for each False), `live` which locals; the stack items from `fresh_from` on are
    what the break's own instructions left, the others are the traced frame's."""
    code: types.CodeType
    nulls: tuple
    live: tuple
    fresh_from: int


def _shared_paths(sources) -> dict:
    """The sources that two or more of `sources` are reached through (their `read_through`
    chains), the frame's own variables left out: {source: None} (end_pinning fills in locals)."""
    uses: dict = {}
    for src in sources:
        path = src.read_through()
        while path is not None and path.read_through() is not None:
            try:
                uses[path] = uses.get(path, 0) + 1
            except TypeError:
                break
            path = path.read_through()
    return {path: None for path, n in uses.items() if n > 1}


class Emitter:
    """Collects the instructions of one replacement code object. Values, sources and side-effect
    records emit themselves through its primitives (`const`, `load_source`, `value`, `call_const`,
    `build_tuple`...); it keeps what must stay consistent across them: each shared value built
    once, source loads pinned to what the trace read, traced numpy arrays copied once."""

    def __init__(self, code: types.CodeType, lineno: int, output_index: dict, tracer):
        self.code = code
        self.frozen_arrays = tracer.frozen_arrays   # numpy arrays a graph tensor was made from (values/arrays)
        self.arrays: dict[int, tuple] = {}      # id(traced numpy array) -> (array, temporary holding its copy)
        self.lineno = lineno
        self.out: list = []
        self.cellvars = set(code.co_cellvars)
        self.output_index = output_index        # fx node -> position in the graph's output tuple
        self.memo: dict[int, str] = {}
        self.shared: set[int] = set()
        self.instance_dicts = {id(d) for d in tracer.instance_dicts}
        self.pins: list = None                  # (source, local) pairs while sources are pinned
        self.paths: Optional[dict] = None       # while end_pinning loads them: path -> local holding it
        self.temporaries = 0
        self.frame_cells: dict = {}     # id(CellValue) -> CellVar/FreeVar, the frame's own cells at a break
        self.after_replay: list = []    # emitters of code that must run after the replayed side effects

    # ---- pinned sources -----------------------------------------------------------------------
    # Values read from the frame (an input tensor found at `lst[0]`, an object at `self.sub`) are
    # rebuilt by loading their source again. That load must see the objects as they were when the
    # trace read them, i.e. before the replayed side effects (`lst[0] = ...`, `self.sub = ...`)
    # and before an instruction run eagerly at a break. So between begin_pinning() and
    # end_pinning() every source load reads a local, and end_pinning() puts the loads of all
    # those locals where begin_pinning() was called.
    def begin_pinning(self):
        self.pins, self.pin_at = [], len(self.out)

    def end_pinning(self):
        pins, self.pins = self.pins, None
        body, self.out = self.out[self.pin_at:], self.out[:self.pin_at]
        # a path several loads go through (a model's parameters: `self.__dict__['_modules']['blocks']
        # .__dict__['_modules']['0']...`) is read once into a local, at its first load
        self.paths = _shared_paths(src for src, _ in pins)
        try:
            for src, name in pins:
                self.load_source(src)
                self.emit("STORE_FAST", name)
        finally:
            self.paths = None
        self.out.extend(body)

    def _pinned(self, src: Source) -> str:
        for known, name in self.pins:
            if known == src:
                return name
        name = f"___src{len(self.pins)}"
        self.pins.append((src, name))
        return name

    # ---- primitives ---------------------------------------------------------------------------
    def emit(self, name, arg=None):
        self.out.append(Instr(name, arg, lineno=self.lineno) if arg is not None or name in _ARG_OPS
                        else Instr(name, lineno=self.lineno))

    def const(self, value):
        self.emit("LOAD_CONST", value)

    def load_attr(self, name: str):
        self.out.append(instr_load_attr(name, self.lineno))

    def load_local(self, name: str):
        if name in self.cellvars:
            self.emit("LOAD_DEREF", CellVar(name))
        else:
            self.emit("LOAD_FAST", name)

    def load_frame_cell(self, cell) -> bool:
        """Push the frame's own cell object that `cell` (a CellValue) stands for; False when it is
        not one of them (outside a graph break's code, a cell of an inlined call)."""
        var = self.frame_cells.get(id(cell))
        if var is None:
            return False
        self.load_cell(var)
        return True

    def load_cell(self, var):
        """Push the cell object itself (a CellVar or FreeVar of the code), e.g. for a closure tuple."""
        self.emit(LOAD_CELL_OPNAME, var)

    def load_free(self, name: str):
        self.emit("LOAD_DEREF", FreeVar(name))

    def has_freevar(self, name: str) -> bool:
        return name in self.code.co_freevars

    def push_callable(self, emit_callable):
        """Push a callable and the NULL that CALL expects with it, in this version's order."""
        if NULL_AFTER_CALLABLE:
            emit_callable()
            self.emit("PUSH_NULL")
        else:
            self.emit("PUSH_NULL")
            emit_callable()

    def call_const(self, fn, arg_emitters):
        self.push_callable(lambda: self.const(fn))
        for emit_arg in arg_emitters:
            emit_arg()
        self.out.extend(instrs_call(len(arg_emitters), self.lineno))

    def empty_cell(self, push_cell):
        """Leave the cell `push_cell` pushes unbound (a `del` the trace made of it)."""
        self.call_const(empty_cell, [push_cell])
        self.emit("POP_TOP")

    def temporary(self) -> str:
        self.temporaries += 1
        return f"___t{self.temporaries}"

    def convert_top(self, fn):
        """Replace the value on top of the stack by fn(value)."""
        tmp = self.temporary()
        self.emit("STORE_FAST", tmp)
        self.call_const(fn, [lambda: self.emit("LOAD_FAST", tmp)])

    def build_tuple(self, items):
        for item in items:
            self.value(item)
        self.emit("BUILD_TUPLE", len(items))

    def build_list(self, items):
        for item in items:
            self.value(item)
        self.emit("BUILD_LIST", len(items))

    def build_set(self, items):
        for item in items:
            self.value(item)
        self.emit("BUILD_SET", len(items))

    def build_map(self, items: dict):
        for k, item in items.items():
            self.const(k)
            self.value(item)
        self.emit("BUILD_MAP", len(items))

    def check_escapes(self, v: Value):
        if id(v) in self.instance_dicts:
            raise Unsupported(UNSUPPORTED_VALUE, "the __dict__ of an object created in captured code escapes")

    def graph_output(self, node):
        self.emit("LOAD_FAST", GRAPH_OUT)
        self.const(self.output_index[node])
        self.emit("BINARY_SUBSCR")

    def call_graph(self, compiled, inputs: list[Source], tracer, on_internal_error):
        """Call the compiled graph on its inputs (reloaded from their sources), keeping the outputs,
        inside a guarded range that `end_guarded` closes: if the graph or a rebuild in the range
        raises, the frame runs eagerly instead (runtime.FrameRun) and returns what that eager run
        returns. Graphs that write into their inputs or draw random numbers take a snapshot first."""
        written = _undoable(tracer.graph, tracer.graph.written_inputs()) if compiled is not None else []
        random = compiled is not None and draws_random_numbers(tracer.graph.graph)
        # With graph ops inside a try block a failure may be the program's own, handled by its except.
        report = on_internal_error if tracer.op_in_try is None else None
        self.frame_run = FrameRun(self.code, tracer.root_globals, written, random, report,
                                  rerun_always=tracer.graph.checks_after_effects)
        self.rerun_label, self.snapshot = Label(), None
        if compiled is not None and self.frame_run.needs_snapshot:
            temps = []
            for src in inputs:
                self.load_source(src)
                temps.append(self.temporary())
                self.emit("STORE_FAST", temps[-1])
            loads = [lambda t=t: self.emit("LOAD_FAST", t) for t in temps]
            self.snapshot = self.temporary()
            self.call_const(self.frame_run.snapshot, loads)
            self.emit("STORE_FAST", self.snapshot)
        else:
            loads = [lambda s=s: self.load_source(s) for s in inputs]
        self.guarded = TryBegin(self.rerun_label, push_lasti=False, stack_depth=0)
        self.out.append(self.guarded)
        if compiled is not None:
            self.call_const(compiled, loads)
            self.emit("STORE_FAST", GRAPH_OUT)

    def end_guarded(self):
        self.out.append(TryEnd(self.guarded))

    def rerun_handler(self):
        """The guarded range's handler: the exception is on the stack."""
        self.out.append(self.rerun_label)
        exc = self.temporary()
        self.emit("STORE_FAST", exc)
        snapshot = self.snapshot
        self.call_const(self.frame_run.rerun, [lambda: self.emit("LOAD_FAST", exc),
                                               lambda: self.emit("LOAD_FAST", snapshot) if snapshot else self.const(None),
                                               self.closure_tuple, self.frame_arguments])
        self.emit("RETURN_VALUE")

    def closure_tuple(self):
        if not self.code.co_freevars:
            self.const(None)
            return
        for name in self.code.co_freevars:
            self.load_cell(FreeVar(name))
        self.emit("BUILD_TUPLE", len(self.code.co_freevars))

    def frame_arguments(self):
        code = self.code
        nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        for name in code.co_varnames[:nargs]:
            self.load_source(LocalSource(name))
        self.emit("BUILD_TUPLE", nargs)

    # ---- sources and values -------------------------------------------------------------------
    def load_source(self, src: Source):
        if self.pins is not None:
            self.emit("LOAD_FAST", self._pinned(src))
            return
        try:
            shared = self.paths is not None and src in self.paths
        except TypeError:                     # a source holding an unhashable key
            shared = False
        if not shared:
            src.reload(self)
        elif self.paths[src] is not None:
            self.emit("LOAD_FAST", self.paths[src])
        else:
            src.reload(self)
            self.paths[src] = name = self.temporary()
            self.emit("COPY", 1)
            self.emit("STORE_FAST", name)

    def count_shared(self, v: Value, seen: set):
        """Mark values reachable twice that are built anew (not reloaded, not constants or graph
        outputs), so they are built once and stay one object."""
        if not isinstance(v, Value) or v.source is not None or isinstance(v, (Const, NullValue)) or v.is_graph_value:
            return
        if id(v) in seen:
            self.shared.add(id(v))
            return
        seen.add(id(v))
        for child in v.children():
            self.count_shared(child, seen)

    def value(self, v: Value):
        key = id(v)
        if key in self.memo:
            self.emit("LOAD_FAST", self.memo[key])
            return
        v.rebuild(self)
        if key in self.shared:
            name = f"___tmp{len(self.memo)}"
            self.memo[key] = name
            self.emit("COPY", 1)
            self.emit("STORE_FAST", name)

    def traced_array(self, array):
        """A numpy array made while tracing, rebuilt as a copy on each call (one copy per array,
        so two references stay one object). Arrays sharing memory (views) or shared with a
        graph tensor cannot be rebuilt faithfully."""
        known = self.arrays.get(id(array))
        if known is not None:
            self.emit("LOAD_FAST", known[1])
            return
        import numpy as np
        others = [a for a, _ in self.arrays.values()] + [a for a, _ in self.frozen_arrays]
        if any(np.shares_memory(array, other) for other in others):
            raise Unsupported(UNSUPPORTED_VALUE, "a numpy array sharing memory with another leaves the graph")
        name = f"___array{len(self.arrays)}"
        self.arrays[id(array)] = (array, name)
        self.call_const(fresh_array_copy, [lambda: self.const(array)])
        self.emit("COPY", 1)
        self.emit("STORE_FAST", name)

    # ---- side effects -------------------------------------------------------------------------
    def replace_contents(self, container: Value):
        """A list/dict/set/deque with a source gets the contents the trace left it with."""
        container.replace_contents(self)

    def replay(self, tracer):
        if tracer.context_vars.pending:
            raise Unsupported(UNSUPPORTED_MUTATION, "a ContextVar set in captured code is not reset in it")
        tracer.effects.replay(self)
        for fixup in self.after_replay:
            fixup()

    def after_effects(self, emit) -> None:
        """Emit `emit()`'s code once the side effects are replayed: for a rebuilt value that depends
        on another's contents (an iterator part-way through a list the trace filled)."""
        self.after_replay.append(emit)


def _undoable(graph, written: Optional[list]) -> Optional[list]:
    """The written input positions whose writes a failed graph's rerun must undo: not a tensor
    whose elements share memory (an expand), which torch refuses to write before writing anything
    (and copying back into it would raise that refusal). Strides are guarded: decided once here."""
    if not written:
        return written
    real = {node: value for node, value, _ in graph.inputs}
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    return [i for i in written if not (isinstance(real.get(placeholders[i]), torch.Tensor)
                                       and torch._debug_has_internal_overlap(real[placeholders[i]]) == 1)]


_ARG_OPS = {"LOAD_CONST"}


def tensors_needed(tracer, *roots) -> list:
    """Non-input tensors (and sizes) that rebuilding `roots` and the side effects needs, in a stable order."""
    found: dict = {}
    seen: set = set()

    def visit(v):
        if not isinstance(v, Value) or id(v) in seen:
            return
        seen.add(id(v))
        if v.is_graph_value:
            if v.node.op != "placeholder":
                found.setdefault(v.node, v)
            return
        for child in v.children():
            visit(child)

    for v in tracer.effects.values():
        visit(v)
    for root in roots:
        visit(root)
    return list(found.values())


def _prologue(original: Bytecode) -> list:
    """The original code's first instructions up to RESUME (MAKE_CELL, COPY_FREE_VARS): the
    replacement sets up cells and free variables exactly as the original does."""
    prologue = []
    for instr in original:
        prologue.append(instr)
        if isinstance(instr, Instr) and instr.name == "RESUME":
            break
    return prologue


def _frame_cells(code: types.CodeType, cells: dict) -> dict:
    """id(CellValue) -> the frame's own cell variable it stands for (Emitter.frame_cells)."""
    return {id(cell): CellVar(name) if name in code.co_cellvars else FreeVar(name) for name, cell in cells.items()}


def make_code(code: types.CodeType, tracer, result: Value, compiled, inputs: list[Source],
              outputs: list, lineno: int, on_internal_error=None, cells: Optional[dict] = None) -> types.CodeType:
    """Code that runs the graph and returns `result`. `cells`: the root frame's cells (name ->
    CellValue); a function rebuilt over one of its free variables, or over a cell variable the
    trace left as it found it, gets the frame's real cell (the prologue made it)."""
    original = Bytecode.from_code(code)
    prologue = _prologue(original)
    emitter = Emitter(code, lineno, {v.node: i for i, v in enumerate(outputs)}, tracer)
    emitter.frame_cells = _frame_cells(code, {name: cell for name, cell in (cells or {}).items()
                                              if name in code.co_freevars or cell.contents is None
                                              or isinstance(cell.contents, LazyValue)})
    seen: set = set()
    for v in tracer.effects.values():
        emitter.count_shared(v, seen)
    emitter.count_shared(result, seen)
    emitter.begin_pinning()
    emitter.call_graph(compiled, inputs, tracer, on_internal_error)
    emitter.value(result)
    emitter.emit("STORE_FAST", RESULT)
    emitter.end_guarded()
    emitter.replay(tracer)
    emitter.end_pinning()
    emitter.emit("LOAD_FAST", RESULT)
    emitter.emit("RETURN_VALUE")
    emitter.rerun_handler()
    original.clear()
    original.extend(prologue + emitter.out)
    new_code = original.to_code()
    _check_layout(code, new_code)
    return new_code


# Instructions that cannot be the break point: they touch locals or cells, steer control flow, or
# push a NULL we cannot predict.
_NOT_BREAKABLE = {"NOP", "RESUME", "EXTENDED_ARG", "CACHE", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
                  "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "SET_FUNCTION_ATTRIBUTE",
                  "STORE_FAST", "DELETE_FAST", "LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "MAKE_CELL",
                  "COPY_FREE_VARS", "LOAD_CLASSDEREF", "END_FOR", "RETURN_VALUE", "RETURN_CONST",
                  "RETURN_GENERATOR", "YIELD_VALUE", "SEND", "PUSH_EXC_INFO", "POP_EXCEPT",
                  "CHECK_EXC_MATCH", "WITH_EXCEPT_START", "LOAD_METHOD", "JUMP_IF_TRUE_OR_POP",
                  "JUMP_IF_FALSE_OR_POP", "KW_NAMES", "PRECALL", "GET_AWAITABLE", "SETUP_ANNOTATIONS",
                  "CALL_INTRINSIC_2"} | UNCONDITIONAL_JUMPS
_NO_RESUME_AFTER = {"RAISE_VARARGS", "RERAISE"}
# With the low oparg bit set these push a NULL or not depending on what they find (3.12's
# LOAD_SUPER_ATTR even on whether it is specialized), so the stack after them is unknown.
_NULL_BIT_OPS = {"LOAD_ATTR", "LOAD_GLOBAL", "LOAD_SUPER_ATTR"}


def break_start(code: types.CodeType, index: int) -> tuple[int, str]:
    """Where a break at dis instruction `index` starts (a CALL takes its KW_NAMES/PRECALL along),
    or -1 and the reason it cannot be a break point."""
    insts = facts(code).insts
    inst = insts[index]
    if inst.opname in _NOT_BREAKABLE or (inst.opname in _NULL_BIT_OPS and inst.arg & 1):
        return -1, f"cannot resume after {inst.opname}"
    start = index
    while inst.opname == "CALL" and start > 0 and insts[start - 1].opname in ("PRECALL", "KW_NAMES"):
        start -= 1
    return start, ""


def make_break_code(code: types.CodeType, tracer, frame, compiled, inputs: list[Source],
                    outputs: list, start: int, end: int, on_internal_error=None,
                    resumes: Optional[list] = None) -> types.CodeType:
    """Code that runs the graph captured so far, rebuilds the stack and live locals, runs the
    instructions [start, end] as CPython would, and continues in a resume function. `resumes`,
    if given, receives a `ResumeCall` for each resume function the code may call."""
    code_facts = facts(code)
    last = code_facts.insts[end]
    lineno = code_facts.line_of(last.offset) or code.co_firstlineno
    original = Bytecode.from_code(code)
    prologue = _prologue(original)
    emitter = Emitter(code, lineno, {v.node: i for i, v in enumerate(outputs)}, tracer)
    first = first_argument_for_super(code)
    # The frame's cells are handed to the resume function as they are (resume.resume_code): a
    # function made in the trace over one of them is rebuilt over the frame's real cell.
    emitter.frame_cells = _frame_cells(code, {name: cell for name, cell in frame.cells.items() if name != first})
    seen: set = set()
    for v in tracer.effects.values():
        emitter.count_shared(v, seen)
    for v in frame.stack:
        emitter.count_shared(v, seen)
    for v in list(frame.locals.values()) + [cell.contents for cell in frame.cells.values()]:
        if isinstance(v, Value):
            emitter.count_shared(v, seen)
    emitter.begin_pinning()
    emitter.call_graph(compiled, inputs, tracer, on_internal_error)
    # Inside grad-mode / autocast `with` blocks (in force at the break: the graph entered them, or
    # an earlier frame did), their `__exit__`s on the stack are rebuilt as callables that leave
    # them; an exception from the break's own instructions must leave them (innermost first) as
    # eager would: kept in temporaries for the handler. Rebuilding one enters the block for real,
    # so it is not in the guarded range (an eager rerun would enter it a second time).
    exits = check_resumable(tracer, frame, code_facts, code_facts.insts[end].offset)
    if exits:
        emitter.end_guarded()
    for v in frame.stack:
        emitter.value(v)
        if not isinstance(v, NullValue):
            k = next((i for i, e in enumerate(exits) if e is v), None)
            if k is not None:
                emitter.emit("COPY", 1)
                emitter.emit("STORE_FAST", f"___block_exit{k}")

    original_instrs = abstract_instructions(code)
    run = [original_instrs[i].copy() for i in range(start, end + 1)]   # keep their own source locations
    untouched, remaining = _run_depths(run, len(frame.stack))
    nulls = nulls_at_depth(frame.stack, untouched) + (False,) * (remaining - untouched)

    # What the resume function(s) get besides the stack — the first argument for super(), live
    # locals, cells — is rebuilt now, inside the guarded range (before any effect is replayed and
    # before the break's instructions run), into temporaries.
    first_value = frame.cells[first].contents if first in frame.cells else frame.locals.get(first)
    first = first if first_value is not None else ""
    offsets = [code_facts.insts[end + 1].offset] if last.opname not in _NO_RESUME_AFTER else []
    if last.opname in JUMP_OPS or last.opname == "FOR_ITER":
        offsets.append(_jump_lands(code_facts, last))
    # Inside a try block (or another handler's range but a `with` block's): an exception from the
    # break's instructions continues in a resume function at the handler, with the handler's stack.
    # Grad-mode / autocast blocks together with `with` blocks entered for real (a resume
    # function's): the handler of the innermost block takes the exception as in eager, and the
    # rebuilt `__exit__`s of the others (real callables on the handler's stack) leave them there.
    mixed = bool(exits) and code_facts.with_depth(last.offset) > len(exits)
    catching = code_facts.handler_at(last.offset) if not exits or mixed else None
    if catching is not None:
        offsets.append(catching.target)
    lives = {offset: tuple(sorted(name for name in code_facts.live_at(offset) if name in frame.locals
                                  and name != first and not isinstance(frame.locals[name], NullValue)))
             for offset in offsets}
    # Resume functions are made from the user's original code (resume.py): its cells are the
    # ones they close over, found in this frame as cells or (in a resume function) free variables.
    root = original_of(code, last.offset)[0]
    shared = tuple(name for name in root.co_cellvars if name != first)

    def cell_var(name):
        return CellVar(name) if name in code.co_cellvars else FreeVar(name)
    written = tuple(name for name in shared if frame.cells.get(name) is not None
                    and frame.cells[name].contents is not None)
    arguments = {}          # what a resume argument is -> the temporary holding it
    for kind, name, value in ([("first", first, first_value)] if first else []) + \
            [("local", n, frame.locals[n]) for n in sorted(set().union(*lives.values()))] + \
            [("cell", n, frame.cells[n].contents) for n in written]:
        if isinstance(value, Value):
            emitter.value(value)
        else:                                       # an argument the trace never read
            emitter.load_source(value.source)
        arguments[kind, name] = emitter.temporary()
        emitter.emit("STORE_FAST", arguments[kind, name])
    if not exits:
        emitter.end_guarded()
    for name in written:                 # the trace's writes to the frame's cells, into the real ones
        emitter.emit("LOAD_FAST", arguments["cell", name])
        emitter.emit("STORE_DEREF", cell_var(name))
    for name in shared:                  # ... and its `del`s (an unbound cell of the trace is unbound)
        if frame.cells.get(name) is not None and frame.cells[name].contents is None:
            emitter.empty_cell(lambda name=name: emitter.load_cell(cell_var(name)))
    emitter.replay(tracer)

    # How the frame goes on: call the resume function; inside a loop, hand it to runtime.drive
    # (so the next break in the loop need not nest one Python frame deeper); in a resume function
    # that drive called, return it to drive as a Continue.
    if is_driven(code):
        how = Continue
    elif code_facts.in_loop(last.offset):
        how = drive
    else:
        how = None

    def call_resume(offset, nulls):
        for i in reversed(range(len(nulls))):
            emitter.emit("STORE_FAST", f"___break_stack{i}")
        live = lives[offset]
        resume = resume_code(code, offset, nulls, live, shared, first, driven=how is not None)
        if resumes is not None:
            resumes.append(ResumeCall(resume, nulls, live, untouched))
        cells = root.co_freevars + shared

        def push_resume_function():
            if cells:
                for name in cells:
                    emitter.load_cell(cell_var(name))
                emitter.emit("BUILD_TUPLE", len(cells))
                emitter.const(resume)
                emitter.out.extend(instrs_make_closure(lineno))
            else:
                emitter.const(types.FunctionType(resume, tracer.root_globals, code.co_name))
        if how is None:
            emitter.push_callable(push_resume_function)
        else:
            emitter.push_callable(lambda: emitter.const(how))
            push_resume_function()
        if first:
            emitter.emit("LOAD_FAST", arguments["first", first])
        for i, is_null in enumerate(nulls):
            if not is_null:
                emitter.emit("LOAD_FAST", f"___break_stack{i}")
        for name in live:
            emitter.emit("LOAD_FAST", arguments["local", name])
        count = bool(first) + len(live) + nulls.count(False)
        if how is Continue:
            emitter.emit("BUILD_TUPLE", count + 1)
            count = 1
        elif how is drive:
            count += 1
        emitter.out.extend(instrs_call(count, lineno))
        emitter.emit("RETURN_VALUE")

    handler = Label() if exits or catching is not None else None
    try_begin = None
    if exits and not mixed:
        try_begin = TryBegin(handler, push_lasti=False, stack_depth=len(frame.stack))
    elif catching is not None:
        try_begin = TryBegin(handler, push_lasti=catching.lasti, stack_depth=catching.depth)
    if try_begin is not None:
        emitter.out.append(try_begin)

    if last.opname in JUMP_OPS:                      # a branch on a tensor: resume on both sides
        test = last.opname.rsplit("_IF_", 1)[1]
        taken = Label()
        emitter.out.extend(instrs_jump_if(test, taken, lineno))
        if try_begin is not None:
            emitter.out.append(TryEnd(try_begin))
        call_resume(code_facts.insts[end + 1].offset, nulls)
        emitter.out.append(taken)
        call_resume(last.argval, nulls)
    elif last.opname == "FOR_ITER":                  # an iterator from outside: its next item, for real
        exhausted = Label()
        emitter.out.append(Instr("FOR_ITER", exhausted, lineno=lineno))
        if try_begin is not None:
            emitter.out.append(TryEnd(try_begin))
        call_resume(code_facts.insts[end + 1].offset, nulls)
        emitter.out.append(exhausted)
        # what the exhausted FOR_ITER skips at its target (3.12+), as the original has it
        target = code_facts.index_of[last.argval]
        emitter.out.extend(original_instrs[i].copy() for i in range(target, target + FOR_ITER_EXIT_SKIPS))
        call_resume(_jump_lands(code_facts, last), nulls[:-2])
    else:
        emitter.out.extend(run)
        if try_begin is not None:
            emitter.out.append(TryEnd(try_begin))
        if last.opname not in _NO_RESUME_AFTER:
            call_resume(code_facts.insts[end + 1].offset, nulls)
    if catching is not None:          # the exception (and lasti) on the handler's stack: go on there
        emitter.out.append(handler)
        handler_nulls = nulls_at_depth(frame.stack, catching.depth) + (False,) * (1 + catching.lasti)
        call_resume(catching.target, handler_nulls)
    elif handler is not None:                        # the exception is on the stack: leave the blocks, re-raise
        emitter.out.append(handler)
        for k in reversed(range(len(exits))):
            emitter.push_callable(lambda k=k: emitter.emit("LOAD_FAST", f"___block_exit{k}"))
            emitter.out.extend(instrs_call(0, lineno))
            emitter.emit("POP_TOP")
        emitter.emit("RERAISE", 0)
    emitter.rerun_handler()
    emitter.end_pinning()
    original.clear()
    original.extend(prologue + emitter.out)
    new_code = original.to_code(compute_exception_stack_depths=False)   # each TryBegin says its depth
    _check_layout(code, new_code)
    return new_code


# (pops, pushes) where the `bytecode` library's pre/post split says otherwise
_POPS_PUSHES = {"BEFORE_WITH": (1, 2)}


def _run_depths(run: list, depth: int) -> tuple[int, int]:
    """(how many items at the bottom of a `depth`-deep stack the instructions `run` leave alone,
    the depth after them): what they push is a real object, never a NULL."""
    lowest = depth
    for instr in run:
        if instr.name in _POPS_PUSHES:
            pops, pushes = _POPS_PUSHES[instr.name]
        else:
            pre, post = instr.pre_and_post_stack_effect(jump=False)
            pops, pushes = max(-pre, 0), max(post, 0) + max(pre, 0)
        depth -= pops
        lowest = min(lowest, depth)
        depth += pushes
    return lowest, depth


def nulls_at_depth(stack: list, depth: int) -> tuple:
    """Which of the bottom `depth` stack items are NULLs (what a resume function pushes back as
    NULL rather than take as an argument)."""
    return tuple(isinstance(v, NullValue) for v in stack[:depth])


def _jump_lands(code_facts, inst) -> int:
    """Where a jump (or an exhausted FOR_ITER, which skips instructions at its target) goes on."""
    if inst.opname != "FOR_ITER":
        return inst.argval
    return code_facts.insts[code_facts.index_of[inst.argval] + FOR_ITER_EXIT_SKIPS].offset


def check_resumable(tracer, frame, code_facts, offset: int) -> list:
    """The `__exit__`s of the grad-mode / autocast `with` blocks around a break at `offset`,
    outermost first; Unsupported when the code after the break cannot be resumed: another kind
    of `with` block encloses it, or a try block encloses such a block, or the break is in an
    except/finally block handling an exception."""
    exits = [v for v in frame.stack if block_exit(v) is not None]
    # A `with` block entered for real before this frame's trace began (a resume function's: the
    # break before it ran the `with` statement for real) is handed on like any input: its
    # `__exit__` is an argument, and its handler, like a try block's, takes an exception from
    # the break's instructions (make_break_code's `catching`).
    entered = [depth for _, depth in code_facts.with_blocks_at(offset)
               if depth <= len(frame.stack) and _entered_for_real(frame.stack[depth - 1])]
    if len(exits) + len(entered) != code_facts.with_depth(offset):
        raise Unsupported(BREAK_IN_WITH, "the break is inside a `with` block on a context manager "
                                         "other than a grad mode or autocast, entered in the captured code")
    if exits and code_facts.in_other_span(offset):
        raise Unsupported(BREAK_IN_WITH, "the break is inside both a grad-mode/autocast `with` block and a try block")
    if tracer.exc_info is not None:
        raise Unsupported(BREAK_IN_HANDLER, "the break is inside an except/finally block handling an exception")
    return exits


def _entered_for_real(exit_value) -> bool:
    """Is a `with` block's `__exit__` on the stack one from outside the trace (a real object the
    frame was handed), rather than one the trace made by entering the block symbolically?"""
    return isinstance(exit_value, Value) and exit_value.source is not None and block_exit(exit_value) is None


def _check_layout(old: types.CodeType, new: types.CodeType):
    """The C hook runs `new` in a frame laid out for `old`: the arguments, cells and free variables
    must line up exactly."""
    nargs = old.co_argcount + old.co_kwonlyargcount + bool(old.co_flags & 0x04) + bool(old.co_flags & 0x08)
    same = (old.co_argcount == new.co_argcount and old.co_kwonlyargcount == new.co_kwonlyargcount
            and old.co_posonlyargcount == new.co_posonlyargcount
            and (old.co_flags & 0x0C) == (new.co_flags & 0x0C)
            and old.co_varnames[:nargs] == new.co_varnames[:nargs]
            and old.co_freevars == new.co_freevars and set(old.co_cellvars) <= set(new.co_cellvars) | set(old.co_varnames))
    if not same:
        raise RuntimeError(f"generated code for {old.co_name} does not keep the frame layout")
