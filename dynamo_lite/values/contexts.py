"""Context managers the tracer models: grad modes (`torch.no_grad()`, `enable_grad()`,
`set_grad_enabled(b)`, `contextlib.nullcontext()`, profiler ranges that do nothing to the program:
`torch.autograd.profiler.record_function(name)`) and `torch.autocast(...)`.

Entering and leaving one changes the traced state (grad mode, autocast per device), which the
graph records as nodes. When a graph break interrupts such a block, its `__exit__` on the stack
is rebuilt as the `__exit__` of a runtime block object (runtime.GradModeBlock / AutocastBlock)
that restores the state the block entered from.
"""
from __future__ import annotations

import torch

from ..breaks import UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE, Unsupported
from ..runtime import enter_autocast_block, grad_mode_exit
from .base import Const, MethodValue, Value


class _Block(Value):
    __slots__ = ()

    def identity(self):
        return id(self)

    def load_attr(self, frame, name):
        if name in ("__enter__", "__exit__"):
            return MethodValue(self, name)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"{type(self).__name__}.{name}")

    def call(self, frame, args, kwargs):
        # `@torch.no_grad()` used as a decorator inside traced code is not modelled.
        raise Unsupported(UNKNOWN_CALL, f"calling a {type(self).__name__} (as a decorator)")

    def call_method(self, frame, method, args, kwargs):
        if method == "__enter__":
            self.enter(frame)
            return Const(None)
        if method == "__exit__":
            self.exit(frame)
            return Const(False)
        raise Unsupported(UNKNOWN_CALL, f"{type(self).__name__}.{method}")

    def enter(self, frame):
        raise NotImplementedError

    def exit(self, frame):
        raise NotImplementedError


class GradModeValue(_Block):
    """torch.no_grad() / torch.enable_grad() / torch.set_grad_enabled(b) as a context manager
    (`enabled=None`: contextlib.nullcontext(), which does nothing).

    `torch.set_grad_enabled(b)` switches the mode when it is made, as torch's does (it is also a
    plain function call: `torch.set_grad_enabled(False)` as a statement); entering it then does
    nothing and leaving it restores the mode it was made in (`applied`)."""
    __slots__ = ("enabled", "previous", "applied")

    def __init__(self, enabled, source=None):
        super().__init__(source)
        self.enabled = enabled
        self.previous = None
        self.applied = False

    @classmethod
    def switched_now(cls, frame, enabled: bool) -> "GradModeValue":
        block = cls(enabled)
        block.enter(frame)
        block.applied = True
        return block

    def python_type(self):
        return object

    def enter(self, frame):
        if self.enabled is not None and not self.applied:
            self.previous = frame.tracer.graph.grad_enabled
            frame.tracer.set_grad_enabled(self.enabled)

    def exit(self, frame):
        if self.enabled is not None:
            previous = self.previous if self.previous is not None else frame.tracer.graph.grad_enabled
            frame.tracer.set_grad_enabled(previous)

    def rebuild_method(self, em, method):
        if method.fn == "__exit__" and method.source is None:   # a block a graph break interrupts
            em.call_const(grad_mode_exit, [lambda: em.const(self.enabled), lambda: em.const(self.previous)])
        else:
            super().rebuild_method(em, method)


class AutocastValue(_Block):
    """torch.autocast(...) as a context manager: the state it switches `device` to, and (once
    entered) the traced state it restores on exit."""
    __slots__ = ("device", "enabled", "dtype", "cache", "previous")

    def __init__(self, device: str, enabled: bool, dtype, cache: bool, source=None):
        super().__init__(source)
        self.device, self.enabled, self.dtype, self.cache = device, enabled, dtype, cache
        self.previous = None

    def python_type(self):
        return torch.autocast

    def enter(self, frame):
        graph = frame.tracer.graph
        self.previous = (*graph.autocast[self.device], graph.autocast_cache)
        graph.set_autocast(self.device, self.enabled, self.dtype, self.cache, entering=True)

    def exit(self, frame):
        if self.previous is None:
            raise Unsupported(UNKNOWN_CALL, "autocast.__exit__ of a block not entered")
        frame.tracer.graph.set_autocast(self.device, *self.previous, entering=False)

    def rebuild_method(self, em, method):
        if method.fn == "__exit__" and method.source is None:
            # entered by this trace, left at the graph's end (convert_frame): enter it for real
            state = (self.device, self.enabled, self.dtype, self.cache)
            em.call_const(enter_autocast_block, [lambda: em.const(state), lambda: em.const(self.previous)])
        else:
            super().rebuild_method(em, method)


def block_exit(v: Value):
    """The block whose `__exit__` `v` is (a grad mode or autocast `with` block on the stack), else None."""
    if isinstance(v, MethodValue) and isinstance(v.obj, _Block) and v.fn == "__exit__":
        return v.obj
    return None
