"""Loads and stores of locals, globals, cells, attributes and constants; stack shuffles."""
from __future__ import annotations

from .. import breaks
from ..attributes import load_attr, store_attr
from ..breaks import Unsupported
from ..compat import LOAD_ATTR_HAS_METHOD_BIT
from ..interpreter import LazyValue
from ..values import NULL, UNDEFINED, CellValue, Const, UndefinedValue
from ..wrap import wrap
from . import handler


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
    frame.push(wrap(frame.tracer, inst.argval, None))


def read_local(frame, name):
    value = frame.locals.get(name)
    if value is None:
        raise Unsupported(breaks.USER_EXCEPTION, f"UnboundLocalError: {name!r}")
    if isinstance(value, LazyValue):
        value = frame.locals[name] = wrap(frame.tracer, value.value, value.source)
    return value


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(frame, inst):
    frame.push(read_local(frame, inst.argval))


@handler("LOAD_FAST_AND_CLEAR", min_version=(3, 12))
def load_fast_and_clear(frame, inst):
    value = frame.locals.pop(inst.argval, None)
    if isinstance(value, LazyValue):
        value = wrap(frame.tracer, value.value, value.source)
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
        raise Unsupported(breaks.USER_EXCEPTION, f"UnboundLocalError: {inst.argval!r}")


@handler("LOAD_GLOBAL")
def load_global(frame, inst):
    name = inst.argval
    if inst.arg & 1:
        frame.push(NULL)
    tracer = frame.tracer
    if frame.globals is tracer.root_globals and name in tracer.global_writes:
        frame.push(tracer.global_writes[name])
    elif name in frame.globals:
        frame.push(wrap(tracer, frame.globals[name], frame.global_source(name)))
    elif name in frame.builtins:
        frame.push(wrap(tracer, frame.builtins[name], None))
    else:
        raise Unsupported(breaks.USER_EXCEPTION, f"NameError: name {name!r} is not defined")


@handler("STORE_GLOBAL")
def store_global(frame, inst):
    tracer = frame.tracer
    if frame.globals is not tracer.root_globals:
        raise Unsupported(breaks.UNSUPPORTED_MUTATION, f"global {inst.argval!r} of another module")
    value = frame.pop()
    tracer.global_writes[inst.argval] = value
    tracer.side_effects.append(("global", inst.argval, value))


@handler("MAKE_CELL")
def make_cell(frame, inst):
    name = inst.argval
    initial = frame.locals.pop(name, None)
    frame.cells[name] = CellValue(initial)


def cell_contents(frame, cell: CellValue, name: str):
    value = cell.contents
    if value is None:
        raise Unsupported(breaks.USER_EXCEPTION, f"NameError: free variable {name!r} referenced before assignment")
    if isinstance(value, LazyValue):
        value = cell.contents = wrap(frame.tracer, value.value, value.source)
    return value


@handler("LOAD_DEREF", "LOAD_CLASSDEREF")
def load_deref(frame, inst):
    frame.push(cell_contents(frame, frame.cells[inst.argval], inst.argval))


@handler("STORE_DEREF")
def store_deref(frame, inst):
    cell = frame.cells[inst.argval]
    value = frame.pop()
    if cell.source is not None or (frame.parent is None and inst.argval in frame.code.co_freevars):
        frame.tracer.side_effects.append(("cell", cell, inst.argval, frame.parent is None))
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


@handler("LOAD_SUPER_ATTR", min_version=(3, 12))
def load_super_attr(frame, inst):
    from ..builtins_table import real_class_arg
    from ..values import SuperValue
    obj, cls, _super_fn = frame.pop(), frame.pop(), frame.pop()
    if inst.arg & 1:
        frame.push(NULL)
    frame.push(load_attr(frame, SuperValue(real_class_arg(cls), obj), inst.argval))


@handler("KW_NAMES")
def kw_names(frame, inst):
    names = inst.argval
    frame.kwnames = names if isinstance(names, tuple) else frame.code.co_consts[inst.arg]


@handler("IMPORT_NAME")
def import_name(frame, inst):
    fromlist, level = frame.pop(), frame.pop()
    try:
        module = __import__(inst.argval, frame.globals, None, fromlist.value if isinstance(fromlist, Const) else None,
                            level.value if isinstance(level, Const) else 0)
    except Exception as e:
        raise Unsupported(breaks.USER_EXCEPTION, f"import {inst.argval}: {e}")
    from ..values import ObjectValue
    frame.push(ObjectValue(module))


@handler("IMPORT_FROM")
def import_from(frame, inst):
    frame.push(load_attr(frame, frame.peek(), inst.argval))
