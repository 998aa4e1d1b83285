"""Backends: turn a captured fx GraphModule into a callable (torch.compile's contract).

`register_backend`, `lookup_backend` and `list_backends` live in registry.py; the built-in
backends register themselves on import: `eager` (run the fx graph as Python), `inductor`
(hand the graph to torch's compiler, for comparison). `triton` (our own kernels) registers when
first asked for; `dynamo_lite.backends.triton_backend` is that backend's function (importing it
needs neither triton nor a GPU).
"""
from .registry import list_backends, lookup_backend, register_backend
from . import eager, inductor  # noqa: F401  (registration)

__all__ = ["register_backend", "lookup_backend", "list_backends", "triton_backend"]


def __getattr__(name):
    if name == "triton_backend":          # lazy: the triton package imports only what it needs
        from .triton.backend import triton_backend
        return triton_backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
