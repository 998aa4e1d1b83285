"""Opcode handlers: one small function per opname, registered in `HANDLERS` with version bounds.

A handler takes (frame, instruction) and updates the frame's symbolic stack, locals and
instruction pointer. Opcodes with no handler make the interpreter raise a structured
`Unsupported` break. Families of opcodes are registered together by small factories.
"""
from __future__ import annotations

import dis
from typing import Callable

from ..compat import PY_VERSION

HANDLERS: dict[str, Callable] = {}


def handler(*opnames: str, min_version: tuple = (3, 11), max_version: tuple = (3, 99)):
    def register(fn: Callable) -> Callable:
        if min_version <= PY_VERSION <= max_version:
            for name in opnames:
                if name in dis.opmap:
                    HANDLERS[name] = fn
        return fn
    return register


from . import calls, containers, control, names, operators  # noqa: E402,F401  (they register themselves)
