"""When a compiled graph raises at run time, run the frame eagerly instead.

A captured frame's replacement code calls the graph first and replays the recorded side effects
(list/dict contents, attribute, global and cell writes) after it. If the graph raises (a shape
or dtype error the example values did not show, overlapping memory in an in-place op), the
replay never happens, yet in eager the mutations the program made before the failing op are
visible. So for frames with side effects the graph is called through `RerunOnFailure`: when the
graph raises and has not written into any of its inputs, nothing the user can observe has
happened yet (everything before the graph call only loads values), and running the frame's code
eagerly from its start gives exactly eager's state, exception and traceback. When the graph did
write into an input before raising (its version counter moved), running again would apply those
writes twice, so the graph's error propagates as it is (the replay is lost, as before).

The eager run has the frame hook off (DisabledCall), so it cannot come back to the same graph.
"""
from __future__ import annotations

import types

import torch

from . import _evalframe

_VARARGS, _VARKEYWORDS = 0x04, 0x08


class EagerResult:
    """What the frame returned when it ran eagerly after its graph raised."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class RerunOnFailure:
    """Call `graph(*inputs)`; if it raises without having written into an input, run `code`
    eagerly on the frame's arguments and hand back its result as an EagerResult."""

    def __init__(self, graph, code: types.CodeType, globals_: dict, graph_writes_inputs: bool):
        self.graph = graph
        self.code = code
        self.globals = globals_
        self.graph_writes_inputs = graph_writes_inputs

    def __call__(self, closure, frame_args: tuple, *inputs):
        versions = _versions(inputs) if self.graph_writes_inputs else None
        try:
            return self.graph(*inputs)
        except Exception:
            if versions is not None and versions != _versions(inputs):
                raise
        fn = types.FunctionType(self.code, self.globals, self.code.co_name, None, closure)
        args, kwargs = call_arguments(self.code, frame_args)
        return EagerResult(_evalframe.DisabledCall(fn)(*args, **kwargs))


def _versions(inputs) -> list:
    return [t._version for t in inputs if isinstance(t, torch.Tensor)]


def call_arguments(code: types.CodeType, values: tuple) -> tuple[list, dict]:
    """The frame's argument values (in co_varnames order) as a call's positional and keyword arguments."""
    nargs, nkw = code.co_argcount, code.co_kwonlyargcount
    args = list(values[:nargs])
    kwargs = dict(zip(code.co_varnames[nargs:nargs + nkw], values[nargs:nargs + nkw]))
    i = nargs + nkw
    if code.co_flags & _VARARGS:
        args.extend(values[i])
        i += 1
    if code.co_flags & _VARKEYWORDS:
        kwargs.update(values[i])
    return args, kwargs
