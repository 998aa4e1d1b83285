"""The one place that knows which CPython we run on.

Everything version-dependent is a module-level flag or a table derived here, so the rest of the
code asks "what does this opcode do?" and never "which Python is this?".
"""
from __future__ import annotations

import dis
import sys
import sysconfig
import types

PY_VERSION = sys.version_info[:2]
PY311 = PY_VERSION == (3, 11)
PY312 = PY_VERSION >= (3, 12)
PY313 = PY_VERSION >= (3, 13)
# A free-threaded build (3.13t) has another frame and object layout: not supported.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
SUPPORTED = (3, 11) <= PY_VERSION < (3, 14) and not FREE_THREADED
# Py_TPFLAGS_HEAPTYPE in a class's __flags__: the class was made by a class statement (Python code).
HEAPTYPE = 1 << 9

# 3.11 calls need PRECALL before CALL; 3.12 dropped it.
CALL_NEEDS_PRECALL = PY311
# When FOR_ITER is exhausted it pops the iterator and jumps to its target, skipping this many
# instructions there: 3.12 its END_FOR (which pops two), 3.13 its END_FOR and POP_TOP (one each).
FOR_ITER_EXIT_SKIPS = {(3, 11): 0, (3, 12): 1}.get(PY_VERSION, 2)
END_FOR_POPS = 2 if PY_VERSION == (3, 12) else 1
# 3.13: a call's NULL goes after the callable (callable, self-or-NULL, args...): LOAD_GLOBAL and
# LOAD_ATTR push it after, PUSH_NULL follows the callable. 3.11 and 3.12 put it before.
NULL_AFTER_CALLABLE = PY313
# 3.13: MAKE_FUNCTION takes the code only; SET_FUNCTION_ATTRIBUTE adds defaults, closure, ...
MAKE_FUNCTION_HAS_FLAGS = not PY313
# 3.13: POP_JUMP_IF_TRUE/FALSE test an exact bool (the compiler puts TO_BOOL before them).
JUMP_NEEDS_BOOL = PY313
# 3.13: LOAD_CLOSURE is a pseudo-instruction; a cell itself is pushed by LOAD_FAST of its slot.
LOAD_CELL_OPNAME = "LOAD_FAST" if PY313 else "LOAD_CLOSURE"
# 3.13's super-instructions on two locals (argval names both): what each does to them, in order
# ('r' pushes the local, 'w' pops into it).
LOCAL_PAIR_OPS = {name: steps for name, steps in (("LOAD_FAST_LOAD_FAST", "rr"), ("STORE_FAST_STORE_FAST", "ww"),
                                                  ("STORE_FAST_LOAD_FAST", "wr")) if name in dis.opmap}
# The `bytecode` library accepts a cell or free variable as the argument of LOAD_FAST, STORE_FAST
# and LOAD_FAST_AND_CLEAR on 3.13 (where LOAD_FAST pushes cells), not on 3.11 and 3.12.
LOCAL_OPS_NAME_CELLS = PY313
# MAKE_FUNCTION / SET_FUNCTION_ATTRIBUTE flag bits.
FUNCTION_DEFAULTS, FUNCTION_KWDEFAULTS, FUNCTION_ANNOTATIONS, FUNCTION_CLOSURE = 0x01, 0x02, 0x04, 0x08
# 3.12: SEND leaves the sub-iterator under its return value for END_SEND (3.11 replaces it).
SEND_KEEPS_RECEIVER = PY312
# 3.12: LOAD_ATTR's low oparg bit asks for a method load (3.11 has LOAD_METHOD for that).
LOAD_ATTR_HAS_METHOD_BIT = PY312

# Conditional jumps, by what they test and whether they pop.
POP_JUMP_IF_TRUE = {name for name in dis.opmap if name.startswith("POP_JUMP") and name.endswith("IF_TRUE")}
POP_JUMP_IF_FALSE = {name for name in dis.opmap if name.startswith("POP_JUMP") and name.endswith("IF_FALSE")}
POP_JUMP_IF_NONE = {name for name in dis.opmap if name.startswith("POP_JUMP") and name.endswith("IF_NONE")}
POP_JUMP_IF_NOT_NONE = {name for name in dis.opmap if name.startswith("POP_JUMP") and name.endswith("IF_NOT_NONE")}
UNCONDITIONAL_JUMPS = {name for name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                                         "JUMP_ABSOLUTE", "JUMP") if name in dis.opmap}
JUMP_OPS = POP_JUMP_IF_TRUE | POP_JUMP_IF_FALSE | POP_JUMP_IF_NONE | POP_JUMP_IF_NOT_NONE | UNCONDITIONAL_JUMPS
# Every opcode whose `dis` argval is the offset it may jump to (FOR_ITER, SEND, ... included):
# 3.13 lists them in dis.hasjump, earlier versions in hasjrel and hasjabs.
JUMP_TARGET_OPCODES = frozenset(getattr(dis, "hasjump", ())) | frozenset(dis.hasjrel) | frozenset(dis.hasjabs)

# CALL_INTRINSIC_1 operands (3.12), by name.
INTRINSIC_1 = {i: name for i, name in enumerate(getattr(dis, "_intrinsic_1_descs", []))}

GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR


def unsupported_version_message() -> str:
    this = sys.version.split()[0] + (" (free-threaded)" if FREE_THREADED else "")
    return (f"dynamo_lite supports CPython 3.11, 3.12 and 3.13 (with the GIL); this is {this}. "
            "Functions and modules given to dynamo_lite.capture run eagerly, uncaptured.")


# ---- bytecode emission (the `bytecode` library's spelling differs per version) ---------------
def instr_load_attr(name: str, lineno: int):
    from bytecode import Instr
    return Instr("LOAD_ATTR", (False, name) if PY312 else name, lineno=lineno)


def instrs_call(nargs: int, lineno: int) -> list:
    """Call a callable pushed as NULL + fn with `nargs` positional arguments."""
    from bytecode import Instr
    if CALL_NEEDS_PRECALL:
        return [Instr("PRECALL", nargs, lineno=lineno), Instr("CALL", nargs, lineno=lineno)]
    return [Instr("CALL", nargs, lineno=lineno)]


def instrs_jump_if(test: str, target, lineno: int) -> list:
    """A forward conditional jump popping its operand: test is TRUE/FALSE/NONE/NOT_NONE (on 3.13
    the operand of a TRUE/FALSE test is made a bool first, as the compiler does)."""
    from bytecode import Instr
    jump = Instr(f"POP_JUMP_FORWARD_IF_{test}" if PY311 else f"POP_JUMP_IF_{test}", target, lineno=lineno)
    if JUMP_NEEDS_BOOL and test in ("TRUE", "FALSE"):
        return [Instr("TO_BOOL", lineno=lineno), jump]
    return [jump]


def instrs_make_closure(lineno: int) -> list:
    """Make a function from the code object on top of the stack and the closure tuple below it."""
    from bytecode import Instr
    if MAKE_FUNCTION_HAS_FLAGS:
        return [Instr("MAKE_FUNCTION", FUNCTION_CLOSURE, lineno=lineno)]
    return [Instr("MAKE_FUNCTION", lineno=lineno), Instr("SET_FUNCTION_ATTRIBUTE", FUNCTION_CLOSURE, lineno=lineno)]


def ending_code(layout: types.CodeType, value, raising: bool) -> types.CodeType:
    """Code with `layout`'s locals, cells and name whose one instruction returns `value` (or raises
    it): RESUME; LOAD_CONST 0; RETURN_VALUE or RAISE_VARARGS 1 -- none has inline caches on
    3.11-3.13 -- and one location entry (no columns, the def line) covering the three code units."""
    ops = (("RESUME", 0), ("LOAD_CONST", 0), ("RAISE_VARARGS", 1) if raising else ("RETURN_VALUE", 0))
    no_columns = 13                  # the location-table entry kind "line only"
    return layout.replace(co_code=bytes(b for name, arg in ops for b in (dis.opmap[name], arg)),
                          co_consts=(value,), co_stacksize=1, co_exceptiontable=b"",
                          co_linetable=bytes((0x80 | (no_columns << 3) | (len(ops) - 1), 0)))
