"""Loads and stores of locals, globals, cells, attributes and constants; stack shuffles."""
from __future__ import annotations

from .. import breaks
from ..breaks import Unsupported, user_error
from ..compat import LOAD_ATTR_HAS_METHOD_BIT
from ..semantics import del_attr, load_attr, store_attr
from ..values.base import NULL, UNDEFINED, LazyValue, UndefinedValue
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


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(frame, inst):
    frame.push(frame.read_local(inst.argval))


@handler("LOAD_FAST_AND_CLEAR", min_version=(3, 12))
def load_fast_and_clear(frame, inst):
    value = frame.locals.pop(inst.argval, None)
    if isinstance(value, LazyValue):
        value = frame.wrap(value.value, value.source)
    frame.push(UNDEFINED if value is None else value)


@handler("STORE_FAST")
def store_fast(frame, inst):
    value = frame.pop()
    if isinstance(value, UndefinedValue):
        frame.locals.pop(inst.argval, None)
    else:
        frame.locals[inst.argval] = value


@handler("DELETE_FAST")
def delete_fast(frame, inst):
    if frame.locals.pop(inst.argval, None) is None:
        raise user_error(UnboundLocalError, f"cannot access local variable {inst.argval!r} where it is not "
                                             f"associated with a value")


@handler("LOAD_GLOBAL")
def load_global(frame, inst):
    name = inst.argval
    if inst.arg & 1:
        frame.push(NULL)
    tracer = frame.tracer
    if frame.globals is tracer.root_globals and name in tracer.effects.global_writes:
        frame.push(tracer.effects.global_writes[name])
    elif name in frame.globals:
        frame.push(frame.wrap(frame.globals[name], frame.global_source(name)))
    elif name in frame.builtins:
        frame.push(frame.wrap(frame.builtins[name], None))
    else:
        raise user_error(NameError, f"name {name!r} is not defined")


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


@handler("STORE_DEREF")
def store_deref(frame, inst):
    cell = frame.cells[inst.argval]
    value = frame.pop()
    if cell.root_name is not None:               # a free variable of the captured frame
        frame.tracer.effects.store_cell(cell, cell.root_name, True)
    elif cell.source is not None:
        frame.tracer.effects.store_cell(cell, inst.argval, False)
    cell.contents = value


@handler("LOAD_CLOSURE")
def load_closure(frame, inst):
    frame.push(frame.cells[inst.argval])


@handler("LOAD_ATTR")
def load_attr_op(frame, inst):
    obj = frame.pop()
    name = inst.argval
    if LOAD_ATTR_HAS_METHOD_BIT and inst.arg & 1:
        frame.push(NULL)
    frame.push(load_attr(frame, obj, name))


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
    if inst.arg & 1:
        frame.push(NULL)
    real = cls.real_object()
    if not isinstance(real, type):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, "super() with a non-class first argument")
    frame.push(load_attr(frame, SuperValue(real, obj), inst.argval))


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
