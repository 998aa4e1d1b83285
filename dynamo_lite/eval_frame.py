"""The Python side of the hook: `capture` turns the hook on around a call, `reset` forgets every
capture, `disable` marks functions never to capture. It also wires the trace directory's writer
to the capture records."""
from __future__ import annotations

import functools
import types
from typing import Callable, Optional

import torch

from . import _evalframe
from .backends import lookup_backend
from .compat import SUPPORTED, unsupported_version_message
from .convert_frame import AUTO_DYNAMIC, COMPILED, DEFERRED, RECAPTURES, TOUCHED_CODES, WRAPPER_CODES, CaptureOptions, make_callback
from .fallback import records
from .trace_dir import write_record

# Each record of a capture also goes to the trace directory, when config.trace_dir names one.
if write_record not in records.SINKS:
    records.SINKS.append(write_record)


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


def _capture_function(fn: Callable, options: CaptureOptions, stacklevel: int = 3) -> Callable:
    if not SUPPORTED:       # said once: every capture() would say the same
        records.warn_once("unsupported-python", unsupported_version_message(), stacklevel=stacklevel)
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

    WRAPPER_CODES[id(captured.__code__)] = captured.__code__
    captured.__dynamo_lite_captured__ = fn
    captured.__dynamo_lite_options__ = options
    return captured


def _capture_module(module: torch.nn.Module, options: CaptureOptions) -> torch.nn.Module:
    cls = type(module)
    forward = module.__dict__.get("forward") or cls.forward
    captured_forward = _capture_function(forward, options, stacklevel=4)   # the user's capture(module)
    if isinstance(forward, types.FunctionType) and "forward" not in module.__dict__:
        def call_forward(self, *args, **kwargs):
            # The wrapper shares the module's __dict__ but is another object: forward runs on the
            # module itself, which closures, hooks and globals of the program refer to (two objects
            # with one state would be two objects to the tracer). A copy of the wrapper is its own.
            original = getattr(type(self), "_dynamo_lite_original", self)
            return captured_forward(original if original.__dict__ is self.__dict__ else self, *args, **kwargs)
        call_forward.__dynamo_lite_captured__ = forward     # `self.forward(...)` in traced code: the original
    else:
        def call_forward(self, *args, **kwargs):
            return captured_forward(*args, **kwargs)
    functools.update_wrapper(call_forward, forward)
    try:
        captured_cls = type(cls.__name__, (cls,), {"forward": call_forward, "__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__, "_dynamo_lite_original": module})
        # object.__new__, not the class's own __new__: classes made at run time (FSDP2's
        # fully_shard swaps in one whose __new__ finds the user's class by its place in the MRO)
        # need not expect a subclass of theirs. No __init__ runs: the state is the module's.
        wrapper = object.__new__(captured_cls)
        wrapper.__dict__ = module.__dict__      # one state: parameters, buffers, submodules, flags
    except Exception as e:     # a class that cannot be subclassed or made this way (C layout, metaclass)
        records.warn_once(("module-class", cls), f"dynamo_lite: capture({cls.__qualname__}) cannot return a module "
                                                 f"of the same class ({type(e).__name__}: {e}); it returns a "
                                                 f"wrapper module whose forward is captured, holding the module "
                                                 f"as `_orig_mod` (state_dict keys get that prefix)")
        return CapturedModule(module, call_forward)
    return wrapper


class CapturedModule(torch.nn.Module):
    """What `capture(module)` returns when it cannot return a module of the module's own class:
    the module as the submodule `_orig_mod` (as torch.compile's OptimizedModule holds it), and
    a forward that runs the captured one on it."""

    def __init__(self, module: torch.nn.Module, call_forward: Callable):
        super().__init__()
        self._orig_mod = module
        self._call_forward = call_forward

    def forward(self, *args, **kwargs):
        return self._call_forward(self._orig_mod, *args, **kwargs)


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
    DEFERRED.clear()
    COMPILED.clear()
    RECAPTURES.clear()
    records.clear()


def graph_break():
    """Force a graph break here (no-op when run eagerly)."""


graph_break.__dynamo_lite_break__ = True
