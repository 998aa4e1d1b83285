"""Continuation ("resume") functions for graph breaks.

A resume function is the original code with a new prologue: it takes the value stack left after
the break instruction (`___stack0`, ...) and the live locals as arguments, pushes the stack
back (NULLs included), and jumps to the offset where execution continues. It is cached per
(code, offset, stack layout, live locals, driven), and the hook captures it like any other frame.

Resume functions are always made from the user's original code: a break inside a resume
function continues in a resume function of the original (its offsets mapped back), so a break
met again — the same line in the next iteration of a loop — continues in the same code object,
whose graphs are cached.

A *driven* resume function belongs to a loop with a break inside: rather than call the next
resume function (one Python frame deeper per iteration), its replacement code returns a
`runtime.Continue` to `runtime.drive`, which calls it. Run without capture it is plain Python
and returns the function's own result, which `drive` hands back unchanged.
"""
from __future__ import annotations

import types
import weakref

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .breaks import UNSUPPORTED_VALUE, Unsupported
from .code_facts import STACK_ARG_PREFIX, facts
from .compat import LOCAL_OPS_NAME_CELLS, LOCAL_PAIR_OPS

_RESUME_CODES: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()
# A resume function's original code and its offsets there: {resume code: (code, {offset: offset})}.
_ORIGINS: "weakref.WeakKeyDictionary[types.CodeType, tuple]" = weakref.WeakKeyDictionary()
_DRIVEN: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
# A resume function -> where it enters the user's code: (that code, the offset).
_ENTRIES: "weakref.WeakKeyDictionary[types.CodeType, tuple]" = weakref.WeakKeyDictionary()


def original_of(code: types.CodeType, offset: int) -> tuple[types.CodeType, int]:
    """(the user's code, the offset there) for an offset of `code`, a resume function or not."""
    origin = _ORIGINS.get(code)
    if origin is None:
        return code, offset
    return origin[0], origin[1][offset]


def is_resume(code: types.CodeType) -> bool:
    """Is `code` a resume function (made here from a user's code)?"""
    return code in _ORIGINS


def entry_of(code: types.CodeType):
    """(the user's code, the offset) where resume function `code` enters it; None for other code.
    Resume functions with one entry differ only in which locals they are handed (bound or not)."""
    return _ENTRIES.get(code)


def is_driven(code: types.CodeType) -> bool:
    """Is `code` a resume function that `runtime.drive` calls (it returns Continue at breaks)?"""
    return code in _DRIVEN


def resume_code(code: types.CodeType, offset: int, stack_nulls: tuple, live: tuple,
                shared: tuple = (), first: str = "", driven: bool = False) -> types.CodeType:
    """The continuation of `code` at `offset`, taking (`first`, the non-NULL stack items, the `live`
    locals) as arguments. The cell variables in `shared` are not made anew: they become free
    variables of the continuation, which is given the broken frame's own cells, so functions made
    before the break that close over them and the code after it see one variable.

    `first` is the original first argument when the code uses zero-argument super(), which
    CPython resolves from the frame's first local. `code` may be a resume function: the
    continuation is made from its original code. `driven`: see the module docstring."""
    code, offset = original_of(code, offset)
    key = (offset, stack_nulls, live, shared, first, driven)
    per_code = _RESUME_CODES.setdefault(code, {})
    if key in per_code:
        return per_code[key]
    # Every original instruction sees the same stack in the resume function (the prologue pushes
    # what was on it at `offset`), so the try blocks keep the original's stack depths, which the
    # `bytecode` library would otherwise recompute from this code's unusual entry (and get wrong).
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    target_index = facts(code).index_of[offset]
    body, seen, label = [], -1, Label()
    origin = {}              # id(instruction in the body) -> (it, its offset in `code`)
    insts = facts(code).insts
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
            origin[id(item)] = (item, insts[seen].offset)
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
    body = _slots_by_kind(code, body, shared, origin)
    own_cells = [name for name in code.co_cellvars if name not in shared]
    freevars = list(code.co_freevars) + list(shared)
    prologue = [Instr("MAKE_CELL", CellVar(name), lineno=lineno) for name in own_cells]
    if freevars:
        prologue.append(Instr("COPY_FREE_VARS", len(freevars), lineno=lineno))
    prologue.append(Instr("RESUME", 0, lineno=lineno))
    args = []
    for i, is_null in enumerate(stack_nulls):
        if is_null:
            prologue.append(Instr("PUSH_NULL", lineno=lineno))
        else:
            args.append(f"{STACK_ARG_PREFIX}{i}")
            prologue.append(Instr("LOAD_FAST", args[-1], lineno=lineno))
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))
    bc.clear()
    bc.extend(prologue + body)
    bc.cellvars = own_cells
    bc.freevars = freevars
    bc.argnames = ([first] if first else []) + args + list(live)
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(0x04 | 0x08)         # no *args / **kwargs: everything is positional now
    bc.qualname = resume_name(code, offset)
    new = bc.to_code(compute_exception_stack_depths=False)
    emitted = [i for i in bc if isinstance(i, Instr)]
    made = facts(new).insts
    if len(emitted) != len(made):
        raise Unsupported(UNSUPPORTED_VALUE, "the resume function's instructions do not line up with the original's")
    _ORIGINS[new] = (code, {inst.offset: origin[id(instr)][1] for instr, inst in zip(emitted, made)
                            if id(instr) in origin})
    if driven:
        _DRIVEN.add(new)
    _ENTRIES[new] = (code, offset)
    per_code[key] = new
    return new


_LOCAL_SLOT_OPS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "STORE_FAST", "DELETE_FAST"}


def _slots_by_kind(code: types.CodeType, body: list, shared: tuple, origin: dict) -> list:
    """Name the cell and free-variable slots the body touches as cells, the `shared` cells (handed
    in by the broken frame) as free variables.

    A slot may hold a cell: 3.13 pushes one for a closure with LOAD_FAST, and an inlined
    comprehension (3.12+) saves and restores the enclosing cell with LOAD_FAST_AND_CLEAR /
    STORE_FAST. The `bytecode` library names such a slot by its plain name when the name is also a
    local (an argument, a comprehension variable), which in the resume function would be a new,
    separate local. Where the library cannot name the slot as a cell (3.12), no resume function
    is made: the break is not resumable (the frame runs eagerly).

    3.13's two-local instructions are split into single loads and stores: they hold each local's
    index in 4 bits, and the resume function numbers its locals anew (its arguments first).
    `origin` (id -> (instruction, original offset)) learns the new instructions' offsets."""
    special = {name: FreeVar(name) if name in shared else CellVar(name) for name in code.co_cellvars}
    special.update({name: FreeVar(name) for name in code.co_freevars})
    out = []
    for item in body:
        if isinstance(item, Instr) and item.name in LOCAL_PAIR_OPS:
            singles = [Instr("LOAD_FAST" if step == "r" else "STORE_FAST", name, location=item.location)
                       for step, name in zip(LOCAL_PAIR_OPS[item.name], item.arg)]
        else:
            singles = [item]
        where = origin.get(id(item))
        for instr in singles:
            if isinstance(instr, Instr) and instr.name in _LOCAL_SLOT_OPS and isinstance(instr.arg, str) \
                    and instr.arg in special:
                if not LOCAL_OPS_NAME_CELLS:
                    raise Unsupported(UNSUPPORTED_VALUE, f"resuming code that moves the cell {instr.arg!r} "
                                                         f"through its slot ({instr.name}) on this Python")
                instr = instr.copy()
                instr.arg = special[instr.arg]
            elif isinstance(instr, Instr) and isinstance(instr.arg, CellVar) and instr.arg.name in shared:
                instr = instr.copy()
                instr.arg = special[instr.arg.name]
            if where is not None:
                origin[id(instr)] = (instr, where[1])
            out.append(instr)
    return out


def resume_name(code: types.CodeType, offset: int) -> str:
    """`f.<resume at line N>`: named after the user's function (`code` is always the user's: resume
    functions are made from it) and the source line it continues at."""
    base = code.co_qualname
    line = facts(code).line_of(offset)
    return f"{base}.<resume at line {line}>" if line else f"{base}.<resume>"


def first_argument_for_super(code: types.CodeType) -> str:
    """The name resume functions must keep as their first argument, or ''. Zero-argument super()
    reads the frame's first local (through its cell if it is one), so with a `__class__` cell the
    original first argument stays first in every resume function, resumes of resumes included."""
    if "__class__" in code.co_freevars and code.co_argcount > 0:
        return code.co_varnames[0]
    return ""
