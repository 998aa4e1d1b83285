"""dynamo_lite: a Python bytecode tracer with guarded graph capture for PyTorch.

    import dynamo_lite as dl

    @dl.capture                       # backend="eager"
    def f(x, y):
        return torch.relu(x @ y + 1).sum(dim=-1)

The public API is below (`__all__`). Each name is imported from its module on first use, so
`import dynamo_lite` stays cheap and the package's own modules never import this file's
contents (the engine's modules have no import cycle through it).
"""
from __future__ import annotations

import importlib
import sys

from . import compat

if not compat.SUPPORTED:
    # No frame hook for this Python (setup.py does not build it): a stand-in with its names, so
    # the package imports and `capture` can say so and run the code eagerly.
    from . import _nohook
    sys.modules[f"{__name__}._evalframe"] = _nohook
    _evalframe = _nohook

_API = {
    "capture": "eval_frame", "reset": "eval_frame", "graph_break": "eval_frame",
    "explain": "explain", "ExplainReport": "explain",
    "register_backend": "backends", "list_backends": "backends",
    "disable": "fallback.skip", "allow_in_graph": "fallback.skip",
    "GraphBreakError": "breaks",
    "load_ipython_extension": "notebook",
}
_MODULES = {"config"}

__all__ = ["capture", "explain", "ExplainReport", "reset", "register_backend", "list_backends", "graph_break",
           "disable", "allow_in_graph", "GraphBreakError", "config"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
