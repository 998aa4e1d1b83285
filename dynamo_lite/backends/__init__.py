"""Backends: turn a captured fx GraphModule into a callable (torch.compile's contract).

`register_backend`, `lookup_backend` and `list_backends` live in registry.py; the built-in
backends register themselves on import: `eager` (run the fx graph as Python), `inductor`
(hand the graph to torch's compiler, for comparison).
"""
from .registry import list_backends, lookup_backend, register_backend
from . import eager, inductor  # noqa: F401  (registration)

__all__ = ["register_backend", "lookup_backend", "list_backends"]
