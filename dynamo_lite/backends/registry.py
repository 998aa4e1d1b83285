"""Name -> backend table. A backend is `fn(gm, example_inputs) -> callable`, called once per graph."""
from __future__ import annotations

from typing import Callable, Optional

_BACKENDS: dict[str, Callable] = {}


def register_backend(name: Optional[str] = None, fn: Optional[Callable] = None):
    """Register `fn` under `name`; usable as `@register_backend` or `@register_backend("name")`."""
    if callable(name) and fn is None:          # @register_backend without arguments
        fn, name = name, None
    if fn is not None:
        _check_callable(fn)
        _BACKENDS[name or fn.__name__] = fn
        return fn

    def decorator(f):
        _check_callable(f)
        _BACKENDS[name or f.__name__] = f
        return f
    return decorator


def _check_callable(fn) -> None:
    if not callable(fn):
        raise TypeError(f"a backend must be callable as backend(gm, example_inputs) -> callable, "
                        f"got {type(fn).__name__}")


def lookup_backend(backend) -> Callable:
    if callable(backend):
        return backend
    if isinstance(backend, str):
        if backend in _LAZY and backend not in _BACKENDS:
            try:
                from .triton.backend import triton_backend, triton_cudagraphs_backend
                register_backend("triton", triton_backend)
                register_backend("triton_cudagraphs", triton_cudagraphs_backend)
            except ImportError as e:
                raise ValueError(f"backend {backend!r} is not available: {e}") from None
        if backend in _BACKENDS:
            return _BACKENDS[backend]
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(list_backends())} "
                         "(or pass any callable fn(gm, example_inputs) -> callable)")
    raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")


#: the triton backends, registered on first use (importing them needs neither triton nor a GPU)
_LAZY = ("triton", "triton_cudagraphs")


def list_backends() -> list[str]:
    return sorted(set(_BACKENDS) | set(_LAZY))
