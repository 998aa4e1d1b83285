"""CALL, CALL_FUNCTION_EX and MAKE_FUNCTION."""
from __future__ import annotations

import types

from ..breaks import UNSUPPORTED_VALUE, Unsupported
from ..semantics import call, unpack
from ..values.base import NullValue
from ..values.containers import DictValue
from ..values.functions import ClosureValue
from .registry import handler


@handler("CALL")
def call_op(frame, inst):
    args = frame.popn(inst.arg)
    b, a = frame.pop(), frame.pop()
    if isinstance(a, NullValue):
        fn = b
    else:
        fn, args = a, [b, *args]
    kwargs = {}
    if frame.kwnames:
        names = frame.kwnames
        frame.kwnames = None
        kwargs = dict(zip(names, args[len(args) - len(names):]))
        args = args[:len(args) - len(names)]
    frame.push(call(frame, fn, args, kwargs))


@handler("CALL_FUNCTION_EX")
def call_function_ex(frame, inst):
    kwargs = frame.pop().as_mapping(frame) if inst.arg & 1 else {}
    args = frame.pop()
    fn = frame.pop()
    if frame.stack and isinstance(frame.peek(), NullValue):
        frame.pop()
    frame.push(call(frame, fn, unpack(frame, args), {str(k): v for k, v in kwargs.items()}))


def _mapping(frame, v) -> dict:
    if isinstance(v, DictValue):
        return dict(v.items)
    return {k: frame.wrap(x, None) for k, x in v.as_python().items()}


@handler("MAKE_FUNCTION")
def make_function(frame, inst):
    code = frame.pop().as_python()
    if not isinstance(code, types.CodeType):
        raise Unsupported(UNSUPPORTED_VALUE, "MAKE_FUNCTION without a code object")
    flags = inst.arg
    closure = tuple(frame.pop().items) if flags & 0x08 else ()
    if flags & 0x04:
        frame.pop()   # annotations: not needed to run the function
    kwdefaults = _mapping(frame, frame.pop()) if flags & 0x02 else {}
    defaults = tuple(unpack(frame, frame.pop())) if flags & 0x01 else ()
    frame.push(ClosureValue(code, frame.globals, defaults, kwdefaults, closure, code.co_qualname))
