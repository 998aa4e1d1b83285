"""The one place that knows which CPython we run on.

Everything version-dependent is a module-level flag or a table derived here, so the rest of the
code asks "what does this opcode do?" and never "which Python is this?".
"""
from __future__ import annotations

import dis
import sys

PY_VERSION = sys.version_info[:2]
PY311 = PY_VERSION == (3, 11)
PY312 = PY_VERSION >= (3, 12)
SUPPORTED = (3, 11) <= PY_VERSION < (3, 13)

# 3.11 calls need PRECALL before CALL; 3.12 dropped it.
CALL_NEEDS_PRECALL = PY311
# 3.12: when FOR_ITER is exhausted it jumps to its target, which is an END_FOR it skips.
FOR_ITER_SKIPS_END_FOR = PY312
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

# CALL_INTRINSIC_1 operands (3.12), by name.
INTRINSIC_1 = {i: name for i, name in enumerate(getattr(dis, "_intrinsic_1_descs", []))}

GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR


def unsupported_version_message() -> str:
    return (f"dynamo_lite supports CPython 3.11 and 3.12; this is {sys.version.split()[0]}. "
            "Functions wrapped with dynamo_lite.capture run eagerly.")


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


def jump_if_opname(test: str) -> str:
    """Opcode for a forward conditional jump popping its operand: test is TRUE/FALSE/NONE/NOT_NONE."""
    return f"POP_JUMP_FORWARD_IF_{test}" if PY311 else f"POP_JUMP_IF_{test}"
