"""Continuation ("resume") functions for graph breaks.

A resume function is the original code with a new prologue: it takes the value stack left after
the break instruction (`___stack0`, ...) and the live locals as arguments, pushes the stack
back (NULLs included), and jumps to the offset where execution continues. It is cached per
(code, offset, stack layout, live locals), and the hook captures it like any other frame.
"""
from __future__ import annotations

import types
import weakref

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .code_facts import facts

_RESUME_CODES: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()


def resume_code(code: types.CodeType, offset: int, stack_nulls: tuple, live: tuple,
                shared: tuple = (), first: str = "") -> types.CodeType:
    """The continuation of `code` at `offset`, taking (`first`, the non-NULL stack items, the `live`
    locals) as arguments. The cell variables in `shared` are not made anew: they become free
    variables of the continuation, which is given the broken frame's own cells, so functions made
    before the break that close over them and the code after it see one variable.

    `first` is the original first argument when the code uses zero-argument super(), which
    CPython resolves from the frame's first local."""
    key = (offset, stack_nulls, live, shared, first)
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
    # 3.13 pushes a cell with LOAD_FAST of its slot, which the `bytecode` library names by the plain
    # name when the cell is an argument's: here the argument is gone, the name means the cell.
    cells = set(code.co_cellvars)
    body = [_as_cell(i) if isinstance(i, Instr) and i.name == "LOAD_FAST" and isinstance(i.arg, str) and i.arg in cells
            else i for i in body]
    if shared:
        body = [_as_free(i) if isinstance(i, Instr) and isinstance(i.arg, CellVar) and i.arg.name in shared else i
                for i in body]
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
            args.append(f"___stack{i}")
            prologue.append(Instr("LOAD_FAST", f"___stack{i}", lineno=lineno))
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))
    bc.clear()
    bc.extend(prologue + body)
    bc.cellvars = own_cells
    bc.freevars = freevars
    bc.argnames = ([first] if first else []) + args + list(live)
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(0x04 | 0x08)         # no *args / **kwargs: everything is positional now
    bc.qualname = f"{code.co_qualname}.<resume at {offset}>"
    new = bc.to_code()
    per_code[key] = new
    return new


def _as_cell(instr: Instr) -> Instr:
    new = instr.copy()
    new.arg = CellVar(instr.arg)
    return new


def _as_free(instr: Instr) -> Instr:
    new = instr.copy()
    new.arg = FreeVar(instr.arg.name)
    return new


def first_argument_for_super(code: types.CodeType) -> str:
    """The name resume functions must keep as their first argument, or ''. Zero-argument super()
    reads the frame's first local (through its cell if it is one), so with a `__class__` cell the
    original first argument stays first in every resume function, resumes of resumes included."""
    if "__class__" in code.co_freevars and code.co_argcount > 0:
        return code.co_varnames[0]
    return ""
