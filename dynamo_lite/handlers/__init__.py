"""Opcode handlers: one small function per opname, registered in `HANDLERS` with version bounds.

A handler takes (frame, instruction) and updates the frame's symbolic stack, locals and
instruction pointer. Opcodes with no handler make the interpreter raise a structured
`Unsupported` break. Families of opcodes are registered together by small factories.
"""
from __future__ import annotations

from . import call_ops, container_ops, control_ops, name_ops, operator_ops  # noqa: F401  (they register themselves)
from .registry import HANDLERS, handler  # noqa: F401
