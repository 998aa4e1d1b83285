"""Typed settings, read once from the environment.

`dynamo_lite.config.cache_size_limit = 4` at run time, or DYNAMO_LITE_LOG=graph_breaks,recompiles
in the environment for logging.
"""
from __future__ import annotations

import os

LOG_ARTIFACTS = ("graph_breaks", "guards", "recompiles", "bytecode", "graph", "fallbacks")


def _log_from_env() -> frozenset[str]:
    raw = os.environ.get("DYNAMO_LITE_LOG", "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    if "all" in names:
        return frozenset(LOG_ARTIFACTS)
    return frozenset(names & set(LOG_ARTIFACTS))


#: Entries kept per code object before it runs eagerly from then on.
cache_size_limit: int = 8
#: How deep user-function calls are inlined before we give up on the frame.
inline_depth_limit: int = 40
#: Instructions symbolically executed per frame (with inlining) before we give up.
instruction_limit: int = 200_000
#: What DYNAMO_LITE_LOG asked for.
log: frozenset[str] = _log_from_env()
