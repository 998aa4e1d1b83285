"""dynamo_lite: a Python bytecode tracer with guarded graph capture for PyTorch.

    import dynamo_lite as dl

    @dl.capture                       # backend="eager"
    def f(x, y):
        return torch.relu(x @ y + 1).sum(dim=-1)
"""
from . import config
from .backends import list_backends, register_backend
from .breaks import GraphBreakError
from .eval_frame import capture, graph_break, reset
from .explain import ExplainReport, explain
from .fallback.skip import allow_in_graph, disable
from .notebook import load_ipython_extension

__all__ = ["capture", "explain", "ExplainReport", "reset", "register_backend", "list_backends", "graph_break", "disable", "allow_in_graph",
           "GraphBreakError", "config"]
__version__ = "0.1.0"
