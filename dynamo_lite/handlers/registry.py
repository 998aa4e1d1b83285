"""The opcode table: `HANDLERS` maps an opname to its handler; `@handler(...)` registers one,
within version bounds."""
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
