"""The Python side of the hook: `capture` turns the hook on around a call, `reset` forgets every
capture, `disable` marks functions never to capture."""
from __future__ import annotations

import functools
import types
import warnings
from typing import Callable, Optional

import torch

from . import _evalframe
from .backends import lookup_backend
from .compat import SUPPORTED, unsupported_version_message
from .convert_frame import AUTO_DYNAMIC, RECAPTURES, TOUCHED_CODES, WRAPPER_CODES, CaptureOptions, make_callback
from .fallback import records


def capture(fn_or_module=None, *, backend="eager", fullgraph: bool = False, dynamic: Optional[bool] = None):
    """Capture `fn_or_module` into graphs run by `backend`.

    Use as `@capture`, `@capture(backend=...)` or `capture(fn, ...)`. A module comes back as a
    module of the same class (sharing its parameters, buffers and state) whose forward is captured.
    """
    if fn_or_module is None:
        return functools.partial(capture, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    compiler = lookup_backend(backend)
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    options = CaptureOptions(compiler, name, fullgraph, dynamic)
    if isinstance(fn_or_module, torch.nn.Module):
        return _capture_module(fn_or_module, options)
    if not callable(fn_or_module):
        raise TypeError(f"dynamo_lite.capture expects a function or nn.Module, got {type(fn_or_module).__name__}")
    return _capture_function(fn_or_module, options)


_warned_unsupported = False


def _capture_function(fn: Callable, options: CaptureOptions, stacklevel: int = 3) -> Callable:
    if not SUPPORTED:
        global _warned_unsupported
        if not _warned_unsupported:          # once per process: every capture() would say the same
            _warned_unsupported = True
            warnings.warn(unsupported_version_message(), RuntimeWarning, stacklevel=stacklevel)
        return fn
    callback = make_callback(options)
    set_callback = _evalframe.set_callback

    @functools.wraps(fn)
    def captured(*args, **kwargs):
        prior = set_callback(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_callback(prior)

    WRAPPER_CODES.add(captured.__code__)
    captured.__dynamo_lite_captured__ = fn
    captured.__dynamo_lite_options__ = options
    return captured


def _capture_module(module: torch.nn.Module, options: CaptureOptions) -> torch.nn.Module:
    cls = type(module)
    forward = module.__dict__.get("forward") or cls.forward
    captured_forward = _capture_function(forward, options, stacklevel=4)   # the user's capture(module)
    if isinstance(forward, types.FunctionType) and "forward" not in module.__dict__:
        def call_forward(self, *args, **kwargs):
            return captured_forward(self, *args, **kwargs)
        call_forward.__dynamo_lite_captured__ = forward     # `self.forward(...)` in traced code: the original
    else:
        def call_forward(self, *args, **kwargs):
            return captured_forward(*args, **kwargs)
    functools.update_wrapper(call_forward, forward)
    captured_cls = type(cls.__name__, (cls,), {"forward": call_forward, "__module__": cls.__module__,
                                               "__qualname__": cls.__qualname__, "_dynamo_lite_original": module})
    wrapper = captured_cls.__new__(captured_cls)
    wrapper.__dict__ = module.__dict__      # one state: parameters, buffers, submodules, flags
    return wrapper


def reset() -> None:
    """Forget every capture: cache entries, records, warnings."""
    while True:                      # another thread may add codes while we copy the set
        try:
            codes = list(TOUCHED_CODES)
            break
        except RuntimeError:
            continue
    for code in codes:
        _evalframe.set_code_extra(code, None)
    TOUCHED_CODES.clear()
    AUTO_DYNAMIC.clear()
    RECAPTURES.clear()
    records.clear()


def graph_break():
    """Force a graph break here (no-op when run eagerly)."""


graph_break.__dynamo_lite_break__ = True
