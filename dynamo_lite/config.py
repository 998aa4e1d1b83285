"""Typed settings, read once from the environment.

`dynamo_lite.config.cache_size_limit = 4` at run time, or DYNAMO_LITE_LOG=graph_breaks,recompiles
in the environment for logging, DYNAMO_LITE_TRACE=DIR for a trace directory (trace_dir.py).
"""
from __future__ import annotations

import os
from typing import Optional

LOG_ARTIFACTS = ("graph_breaks", "guards", "recompiles", "bytecode", "graph", "fallbacks")


def _log_from_env() -> frozenset[str]:
    raw = os.environ.get("DYNAMO_LITE_LOG", "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    if "all" in names:
        return frozenset(LOG_ARTIFACTS)
    if names - set(LOG_ARTIFACTS):
        import warnings
        warnings.warn(f"DYNAMO_LITE_LOG: unknown artifacts {sorted(names - set(LOG_ARTIFACTS))} ignored; "
                      f"choose from all, {', '.join(LOG_ARTIFACTS)}", stacklevel=2)
    return frozenset(names & set(LOG_ARTIFACTS))


#: Entries kept per code object before it runs eagerly from then on.
cache_size_limit: int = 8
#: Graphs kept for one stretch of a loop body between graph breaks before the loop runs eagerly
#: from there on (the iterations differ in what the guards check: a new graph each time).
loop_stretch_limit: int = 3
#: A stretch of a loop with a break inside whose graph is one op that is one kernel anyway (a
#: pointwise op, a cast, a linear) runs that op as it is, not handed to the backend: there is
#: nothing to fuse (TorchDynamo runs such loops eagerly). So does, in any frame, a graph whose only
#: work is checks on tensor values (`assert`, torch._check_tensor_all). False: every graph goes to
#: the backend.
loop_single_ops_as_is: bool = True
#: How deep user-function calls are inlined before we give up on the frame.
inline_depth_limit: int = 40
#: Instructions symbolically executed per frame (with inlining) before we give up.
instruction_limit: int = 200_000
#: Split graphs captured inside a DistributedDataParallel forward at its gradient buckets, so that
#: the all-reduce of each bucket overlaps the backward of the pieces before it (backends/ddp_split.py).
optimize_ddp: bool = True
#: What DYNAMO_LITE_LOG asked for.
log: frozenset[str] = _log_from_env()
#: Where each captured frame's graphs, guards, breaks and code are written (DYNAMO_LITE_TRACE); None: nowhere.
trace_dir: Optional[str] = os.environ.get("DYNAMO_LITE_TRACE") or None


_LIMITS = {"cache_size_limit": 1, "inline_depth_limit": 0, "instruction_limit": 1, "loop_stretch_limit": 1}


def _route_logs(artifacts) -> None:
    """Asking for log artifacts should print them, as TORCH_LOGS does: the "dynamo_lite" logger
    gets a stderr handler at INFO unless the application configured one itself."""
    import logging
    logger = logging.getLogger("dynamo_lite")
    if not artifacts:
        return
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[dynamo_lite] %(message)s"))
        logger.addHandler(handler)


_route_logs(log)


class _ValidatedConfig(__import__("types").ModuleType):
    """`dynamo_lite.config.cache_size_limit = "8"` fails here, naming the setting, instead of
    breaking the user's next call."""

    def __setattr__(self, name, value):
        if name in _LIMITS and (type(value) is not int or value < _LIMITS[name]):
            raise ValueError(f"dynamo_lite.config.{name} must be an int >= {_LIMITS[name]}, got {value!r}")
        if name == "log" and not isinstance(value, (set, frozenset)):
            raise TypeError("dynamo_lite.config.log must be a set of artifact names, e.g. {'graph_breaks'}")
        if name == "log":
            unknown = set(value) - set(LOG_ARTIFACTS)
            if unknown:
                raise ValueError(f"unknown log artifacts {sorted(unknown)}; choose from {', '.join(LOG_ARTIFACTS)}")
            _route_logs(value)
        if name == "trace_dir" and value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"dynamo_lite.config.trace_dir must be a folder's path or None, got {value!r}")
        super().__setattr__(name, value)


__import__("sys").modules[__name__].__class__ = _ValidatedConfig
