"""CALL, CALL_KW, CALL_FUNCTION_EX, MAKE_FUNCTION and SET_FUNCTION_ATTRIBUTE.

A call finds its callable and a NULL-or-self next to each other below the arguments; which one is
lower depends on the version (compat.NULL_AFTER_CALLABLE), but a NULL never stands for a value,
so the handlers tell them apart by looking.
"""
from __future__ import annotations

import types

from ..breaks import UNSUPPORTED_VALUE, Unsupported
from ..compat import (FUNCTION_ANNOTATIONS, FUNCTION_CLOSURE, FUNCTION_DEFAULTS, FUNCTION_KWDEFAULTS,
                      MAKE_FUNCTION_HAS_FLAGS)
from ..semantics import call, unpack
from ..values.base import NullValue
from ..values.containers import DictValue
from ..values.functions import ClosureValue
from .registry import handler


def _call(frame, nargs: int, kwnames: tuple):
    args = frame.popn(nargs)
    b, a = frame.pop(), frame.pop()
    if isinstance(a, NullValue):          # NULL, callable (3.11, 3.12)
        fn = b
    elif isinstance(b, NullValue):        # callable, NULL (3.13)
        fn = a
    else:                                 # method, self
        fn, args = a, [b, *args]
    kwargs = {}
    if kwnames:
        kwargs = dict(zip(kwnames, args[len(args) - len(kwnames):]))
        args = args[:len(args) - len(kwnames)]
    frame.push(call(frame, fn, args, kwargs))


@handler("CALL")
def call_op(frame, inst):
    kwnames, frame.kwnames = frame.kwnames, None     # set by KW_NAMES (3.12)
    _call(frame, inst.arg, kwnames)


@handler("CALL_KW", min_version=(3, 13))
def call_kw(frame, inst):
    """3.13: the keyword names are a tuple on top of the arguments."""
    kwnames = frame.pop().as_python()
    _call(frame, inst.arg, kwnames)


@handler("CALL_FUNCTION_EX")
def call_function_ex(frame, inst):
    kwargs = frame.pop().as_mapping(frame) if inst.arg & 1 else {}
    args = frame.pop()
    fn = frame.pop()
    if isinstance(fn, NullValue):        # callable, NULL (3.13)
        fn = frame.pop()
    elif frame.stack and isinstance(frame.peek(), NullValue):   # NULL, callable (3.11, 3.12)
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
    function = ClosureValue(code, frame.globals, qualname=code.co_qualname)
    if MAKE_FUNCTION_HAS_FLAGS:       # the attributes are below the code, last flag on top
        for flag in (FUNCTION_CLOSURE, FUNCTION_ANNOTATIONS, FUNCTION_KWDEFAULTS, FUNCTION_DEFAULTS):
            if inst.arg & flag:
                _set_function_attribute(frame, function, flag, frame.pop())
    frame.push(function)


@handler("SET_FUNCTION_ATTRIBUTE", min_version=(3, 13))
def set_function_attribute(frame, inst):
    function = frame.pop()
    _set_function_attribute(frame, function, inst.arg, frame.pop())
    frame.push(function)


def _set_function_attribute(frame, function: ClosureValue, flag: int, value):
    if flag == FUNCTION_CLOSURE:
        function.closure = tuple(value.items)
    elif flag == FUNCTION_KWDEFAULTS:
        function.kwdefaults = _mapping(frame, value)
    elif flag == FUNCTION_DEFAULTS:
        function.defaults = tuple(unpack(frame, value))
    # annotations (and 3.14's annotate function) are not needed to run the function
