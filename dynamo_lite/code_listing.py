"""The replacement code of a frame as a labelled listing, for explain and the trace directory.

One instruction a line as `dis` reads it, but with labels (`L1:`) where jumps land instead of
byte offsets, the user's source line as a heading where the line changes, the exception table
as label ranges, and the objects the generated code calls named for what they are: the compiled
graph (`graph 1`), a resume function (`resume M.forward.<resume at line 9>`), a runtime helper
(`FrameRun.rerun`). Addresses (`at 0x7f...`) never appear, so two listings of one capture agree.
"""
from __future__ import annotations

import dis
import linecache
import re
import types
from typing import Optional

from . import _evalframe
from .compat import JUMP_TARGET_OPCODES

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def listing(code: types.CodeType, graph_name: Optional[str] = None) -> str:
    """`code` as labelled bytecode; `graph_name` names the compiled graph it calls ("graph 1")."""
    instructions = list(dis.get_instructions(code))
    table = dis.Bytecode(code).exception_entries
    targets = {i.argval for i in instructions if i.opcode in JUMP_TARGET_OPCODES}
    targets |= {offset for e in table for offset in (e.start, e.end, e.target)}
    labels = {offset: f"L{n}" for n, offset in enumerate(sorted(targets), 1)}
    lines, line = [], None
    for inst in instructions:
        lineno = inst.positions.lineno if inst.positions else None
        if lineno is not None and lineno != line:
            line = lineno
            text = linecache.getline(code.co_filename, lineno).strip()
            lines.append(f"# line {lineno}: {text}" if text else f"# line {lineno}")
        label = f"{labels[inst.offset]}:" if inst.offset in labels else ""
        lines.append(f"{label:<6}{inst.opname:<21} {_argument(inst, labels, graph_name)}".rstrip())
    if len(table):
        lines.append("# exception table: a raise in [from, to) goes to the handler, stack cut to depth")
    end = f"L{len(labels) + 1}"
    for e in table:
        lasti = ", pushes the offset" if e.lasti else ""
        lines.append(f"#   {labels[e.start]} to {labels.get(e.end, end)} -> {labels[e.target]} "
                     f"(depth {e.depth}{lasti})")
    return "\n".join(lines)


def _argument(inst, labels: dict, graph_name: Optional[str]) -> str:
    if inst.opcode in JUMP_TARGET_OPCODES:
        return f"-> {labels[inst.argval]}"
    if inst.opname == "LOAD_CONST":
        return object_name(inst.argval, graph_name)
    if inst.arg is None:
        return ""
    return _ADDRESS.sub("", inst.argrepr) if inst.argrepr else str(inst.arg)


def object_name(value, graph_name: Optional[str] = None) -> str:
    """What a constant of generated code is, in words."""
    if isinstance(value, _evalframe.DisabledCall):
        return graph_name or "a compiled graph"
    if isinstance(value, types.CodeType):
        return f"code {value.co_qualname}"
    if isinstance(value, types.FunctionType):
        kind = "resume" if "<resume at line" in value.__qualname__ else "function"
        return f"{kind} {value.__qualname__}"
    if isinstance(value, types.MethodType):
        return getattr(value.__func__, "__qualname__", "a method")
    if isinstance(value, types.BuiltinFunctionType):
        return value.__qualname__
    if isinstance(value, type):
        return f"class {value.__qualname__}"
    text = _ADDRESS.sub("", repr(value))
    return text if len(text) <= 60 else text[:57] + "..."
