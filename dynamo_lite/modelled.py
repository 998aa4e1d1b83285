"""The registry of *modelled callables*: functions whose effect on symbolic values the tracer
knows without inlining or running them (builtins such as `len`, library functions such as
`dataclasses.fields`, torch higher-order ops, methods of C types).

Modules that model something register a handler with `@models(fn)`; a call looks its callee up
here first (`modelled(fn)`). A handler takes `(frame, args, kwargs)` and returns a value, or
NotImplemented when this call is not one it models (the call then proceeds as if unmodelled).
Open-ended families (every numpy function) register a predicate with `models_family`. This
module imports nothing, so the lowest layer of values can consult it.
"""
from __future__ import annotations

from typing import Callable, Optional

Handler = Callable[..., object]         # handler(frame, args: list, kwargs: dict) -> Value | NotImplemented

_MODELLED: dict = {}                    # the real callable -> its handler
_FAMILIES: list = []                    # (predicate(fn), factory(fn) -> handler)


def models(*fns) -> Callable[[Handler], Handler]:
    """Register the decorated handler as what calling each of `fns` does while tracing."""
    def register(handler: Handler) -> Handler:
        for fn in fns:
            if fn is not None:
                _MODELLED[fn] = handler
        return handler
    return register


def models_family(predicate: Callable[[object], bool], factory: Callable[[object], Handler]) -> None:
    """Register a family of callables by predicate; `factory(fn)` makes the handler for one."""
    _FAMILIES.append((predicate, factory))


def modelled(fn) -> Optional[Handler]:
    try:
        handler = _MODELLED.get(fn)
    except TypeError:                   # an unhashable callable
        handler = None
    if handler is not None:
        return handler
    for predicate, factory in _FAMILIES:
        if predicate(fn):
            return factory(fn)
    return None


def call_modelled(fn, frame, args: list, kwargs: dict):
    """The modelled result of `fn(*args, **kwargs)`, or NotImplemented."""
    handler = modelled(fn)
    return NotImplemented if handler is None else handler(frame, args, kwargs)
