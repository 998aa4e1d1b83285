"""Unary, binary, comparison, identity and membership operators."""
from __future__ import annotations

import operator

from ..breaks import UNSUPPORTED_OPCODE, Unsupported
from ..compat import INTRINSIC_1
from ..pyops import BINARY_OPS, COMPARE_OPS
from ..semantics import binary, compare, contains, is_op, truthy, unary
from ..values.base import Const
from ..values.containers import SeqValue
from ..values.iterators import stop_iteration_error
from ..values.objects import NewExceptionValue
from .registry import handler


@handler("BINARY_OP")
def binary_op(frame, inst):
    b, a = frame.pop(), frame.pop()
    frame.push(binary(frame, BINARY_OPS[inst.argrepr], a, b))


def _unary(fn):
    def handle(frame, inst):
        frame.push(unary(frame, fn, frame.pop()))
    return handle


handler("UNARY_NEGATIVE")(_unary(operator.neg))
handler("UNARY_POSITIVE")(_unary(operator.pos))
handler("UNARY_INVERT")(_unary(operator.invert))


# The instructions that take a truth value themselves (TO_BOOL before them may leave it to them).
_TAKE_TRUTH = {"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "UNARY_NOT"}


@handler("TO_BOOL", min_version=(3, 13))
def to_bool(frame, inst):
    """3.13 makes a bool before a conditional jump or `not`. Those handlers decide truth
    themselves (a tensor's included: an assert on it becomes a graph node, a branch on it a graph
    break at the jump), so the value stays as it is for them; anywhere else it becomes its truth."""
    following = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
    if following is None or following.opname not in _TAKE_TRUTH:
        frame.push(Const(truthy(frame, frame.pop())))


@handler("UNARY_NOT")
def unary_not(frame, inst):
    frame.push(Const(not truthy(frame, frame.pop())))


@handler("COMPARE_OP")
def compare_op(frame, inst):
    b, a = frame.pop(), frame.pop()
    frame.push(compare(frame, COMPARE_OPS[inst.argval], a, b))


@handler("IS_OP")
def is_op_handler(frame, inst):
    b, a = frame.pop(), frame.pop()
    frame.push(Const(is_op(a, b) != bool(inst.arg)))


@handler("CONTAINS_OP")
def contains_op(frame, inst):
    container, item = frame.pop(), frame.pop()
    frame.push(Const(contains(frame, container, item) != bool(inst.arg)))


@handler("CALL_INTRINSIC_1", min_version=(3, 12))
def call_intrinsic_1(frame, inst):
    name = INTRINSIC_1.get(inst.arg, "")
    if name == "INTRINSIC_LIST_TO_TUPLE":
        v = frame.pop()
        frame.push(SeqValue(v.items, tuple))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        frame.push(unary(frame, operator.pos, frame.pop()))
    elif name == "INTRINSIC_STOPITERATION_ERROR":       # a generator body's own handler (PEP 479)
        exc = frame.pop()
        error = stop_iteration_error(exc.obj)
        frame.push(exc if error is exc.obj else NewExceptionValue(error))
    else:
        raise Unsupported(UNSUPPORTED_OPCODE, f"CALL_INTRINSIC_1 {name}")
