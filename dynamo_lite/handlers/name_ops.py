"""Loads and stores of locals, globals, cells, attributes and constants; stack shuffles."""
from __future__ import annotations

from .. import breaks
from ..breaks import Unsupported, user_error
from ..compat import LOAD_ATTR_HAS_METHOD_BIT, LOCAL_PAIR_OPS, NULL_AFTER_CALLABLE
from ..semantics import del_attr, load_attr, store_attr
from ..values.base import NULL, UNDEFINED, LazyValue, NullValue
from ..values.functions import CellValue
from ..values.objects import ObjectValue, SuperValue
from .registry import handler


@handler("NOP", "RESUME", "PRECALL", "CACHE", "EXTENDED_ARG", "COPY_FREE_VARS")
def nop(frame, inst):
    pass   # COPY_FREE_VARS: the frame's cells are set up from the closure when it is created


@handler("POP_TOP")
def pop_top(frame, inst):
    frame.pop()


@handler("PUSH_NULL")
def push_null(frame, inst):
    frame.push(NULL)


@handler("COPY")
def copy(frame, inst):
    frame.push(frame.peek(inst.arg))


@handler("SWAP")
def swap(frame, inst):
    stack = frame.stack
    stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]


@handler("LOAD_CONST")
def load_const(frame, inst):
    frame.push(frame.wrap(inst.argval, None))


# A local's slot holds a value (frame.locals) or, after MAKE_CELL, a cell (frame.cells), never
# both. Code moves the cell itself through the slot: 3.13 pushes it for a closure with LOAD_FAST,
# and an inlined comprehension (3.12+) saves the enclosing cell with LOAD_FAST_AND_CLEAR, may use
# the slot for a plain value, and puts the cell back with STORE_FAST.
def _load_fast(frame, name: str):
    if name not in frame.locals and name in frame.cells:
        frame.push(frame.cells[name])
    else:
        frame.push(frame.read_local(name))


def _store_fast(frame, name: str):
    value = frame.pop()
    if isinstance(value, CellValue):
        frame.locals.pop(name, None)
        frame.cells[name] = value
        return
    frame.cells.pop(name, None)
    if isinstance(value, NullValue):       # LOAD_FAST_AND_CLEAR's NULL (or a resume's), stored back: unbound
        frame.locals.pop(name, None)
    else:
        frame.locals[name] = value


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(frame, inst):
    _load_fast(frame, inst.argval)


@handler(*LOCAL_PAIR_OPS)
def local_pair(frame, inst):
    """3.13's super-instructions: two loads, two stores, or a store then a load."""
    for step, name in zip(LOCAL_PAIR_OPS[inst.opname], inst.argval):
        if step == "r":
            _load_fast(frame, name)
        else:
            _store_fast(frame, name)


@handler("LOAD_FAST_AND_CLEAR", min_version=(3, 12))
def load_fast_and_clear(frame, inst):
    if inst.argval not in frame.locals and inst.argval in frame.cells:
        frame.push(frame.cells.pop(inst.argval))
        return
    value = frame.locals.pop(inst.argval, None)
    if isinstance(value, LazyValue):
        value = frame.wrap(value.value, value.source)
    frame.push(UNDEFINED if value is None else value)


@handler("STORE_FAST")
def store_fast(frame, inst):
    _store_fast(frame, inst.argval)


@handler("DELETE_FAST")
def delete_fast(frame, inst):
    if frame.locals.pop(inst.argval, None) is None:
        raise user_error(UnboundLocalError, f"cannot access local variable {inst.argval!r} where it is not "
                                             f"associated with a value")


def _push_with_null(frame, value, null: bool):
    """Push what LOAD_GLOBAL / LOAD_ATTR / LOAD_SUPER_ATTR loaded, with the NULL their low oparg
    bit asks for on the side this version puts it."""
    if null and not NULL_AFTER_CALLABLE:
        frame.push(NULL)
    frame.push(value)
    if null and NULL_AFTER_CALLABLE:
        frame.push(NULL)


@handler("LOAD_GLOBAL")
def load_global(frame, inst):
    name = inst.argval
    tracer = frame.tracer
    if frame.globals is tracer.root_globals and name in tracer.effects.global_writes:
        value = tracer.effects.global_writes[name]
    elif name in frame.globals:
        value = frame.wrap(frame.globals[name], frame.global_source(name))
    elif name in frame.builtins:
        value = frame.wrap(frame.builtins[name], None)
    else:
        raise user_error(NameError, f"name {name!r} is not defined")
    _push_with_null(frame, value, bool(inst.arg & 1))


@handler("STORE_GLOBAL")
def store_global(frame, inst):
    tracer = frame.tracer
    if frame.globals is not tracer.root_globals:
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"global {inst.argval!r} of another module")
    tracer.effects.store_global(inst.argval, frame.pop())


@handler("MAKE_CELL")
def make_cell(frame, inst):
    name = inst.argval
    initial = frame.locals.pop(name, None)
    frame.cells[name] = CellValue(initial)


@handler("LOAD_DEREF", "LOAD_CLASSDEREF")
def load_deref(frame, inst):
    frame.push(frame.cell_contents(inst.argval))


def _write_cell(frame, name: str, contents) -> None:
    """A cell's new contents (None: unbound), written back after the graph where the cell lives
    outside the trace (effects.CellWrite), or at a break (make_break_code)."""
    cell = frame.cells[name]
    if cell.root_name is not None:               # a free variable of the captured frame
        frame.tracer.effects.store_cell(cell, cell.root_name, True)
    elif cell.source is not None:
        frame.tracer.effects.store_cell(cell, name, False)
    cell.contents = contents


@handler("STORE_DEREF")
def store_deref(frame, inst):
    _write_cell(frame, inst.argval, frame.pop())


@handler("DELETE_DEREF")
def delete_deref(frame, inst):
    """`del v` of a variable a nested function closes over: the cell is emptied (its contents
    None, as MAKE_CELL leaves an unbound one)."""
    frame.cell_contents(inst.argval)        # raises NameError as eager does if it is unbound
    _write_cell(frame, inst.argval, None)


@handler("LOAD_CLOSURE")
def load_closure(frame, inst):
    frame.push(frame.cells[inst.argval])


@handler("LOAD_ATTR")
def load_attr_op(frame, inst):
    obj = frame.pop()
    _push_with_null(frame, load_attr(frame, obj, inst.argval), LOAD_ATTR_HAS_METHOD_BIT and bool(inst.arg & 1))


@handler("LOAD_METHOD")
def load_method(frame, inst):
    obj = frame.pop()
    frame.push(NULL)
    frame.push(load_attr(frame, obj, inst.argval))


@handler("STORE_ATTR")
def store_attr_op(frame, inst):
    obj = frame.pop()
    value = frame.pop()
    store_attr(frame, obj, inst.argval, value)


@handler("DELETE_ATTR")
def delete_attr_op(frame, inst):
    del_attr(frame, frame.pop(), inst.argval)


@handler("LOAD_SUPER_ATTR", min_version=(3, 12))
def load_super_attr(frame, inst):
    obj, cls, _super_fn = frame.pop(), frame.pop(), frame.pop()
    real = cls.real_object()
    if not isinstance(real, type):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, "super() with a non-class first argument")
    _push_with_null(frame, load_attr(frame, SuperValue(real, obj), inst.argval), bool(inst.arg & 1))


@handler("KW_NAMES")
def kw_names(frame, inst):
    names = inst.argval
    frame.kwnames = names if isinstance(names, tuple) else frame.code.co_consts[inst.arg]


@handler("IMPORT_NAME")
def import_name(frame, inst):
    fromlist, level = frame.pop(), frame.pop()
    try:
        module = __import__(inst.argval, frame.globals, None, fromlist.as_python(),
                            level.as_python())
    except Exception as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"import {inst.argval}: {e}")
    frame.push(ObjectValue(module))


@handler("IMPORT_FROM")
def import_from(frame, inst):
    frame.push(load_attr(frame, frame.peek(), inst.argval))
