"""TorchFunctionModes entered in captured code: `with Mode():`, `Mode` a subclass of
`torch.overrides.TorchFunctionMode` (transformers wraps its vmapped mask functions in torch's own
`TransformGetItemToIndex`, which turns `mask[b, kv]` with 0-d tensor indices into `aten.index`).

While a mode is on torch's stack, every call of torch's overridable API (a torch function, a
tensor method, an operator, a property such as `.shape`) goes to the mode's
`__torch_function__(func, types, args, kwargs)`, with the mode taken off the stack while it runs:
its own `func(*args)` reaches the mode below it, or torch. The tracer does the same:

* entering and leaving the mode (`TorchFunctionMode.__enter__` / `__exit__`, modelled here) push
  and pop the mode's value on the traced stack, `GraphBuilder.function_modes`;
* each tensor operation met while that stack is not empty is *dispatched* (`dispatch`): torch
  itself is asked which `(func, types, args, kwargs)` eager hands the mode (the operation is
  replayed on the example values under a probe mode that records the call and stops it before
  anything runs), and the mode's `__torch_function__` is inlined on those, with the mode off the
  stack; what it returns is the operation's result.

So the graph holds what the mode did, and nothing of the mode runs with it. `GraphBuilder.call`
refuses an op recorded while a mode is on the traced stack (DL039): a path to the graph that
does not dispatch stops the capture instead of skipping the mode. A break inside the mode's
`with` block runs the frame eagerly (DL023), as for every context manager whose methods are
inlined.
"""
from __future__ import annotations

import functools
import inspect
import types

import torch
from torch.overrides import TorchFunctionMode

from .breaks import FUNCTION_MODE, Unsupported, user_error
from . import semantics
from .modelled import models, models_family
from .subgraphs import OuterState
from .values.base import Const, Value, is_constant, kind_name
from .values.callables import CallableValue
from .values.containers import DictValue, SeqValue
from .values.functions import FunctionValue
from .values.tensors import SliceValue, SymValue, TensorValue, make_slice


# ---- entering and leaving -------------------------------------------------------------------

def is_mode_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, TorchFunctionMode)


@models(TorchFunctionMode.__init__)
def _init(frame, args, kwargs):
    if len(args) != 1 or kwargs:
        raise user_error(TypeError, "TorchFunctionMode.__init__() takes 1 positional argument")
    return Const(None)


@models(TorchFunctionMode.__enter__)
def _enter(frame, args, kwargs):
    mode = args[0]
    if not is_mode_class(mode.python_type()):
        raise Unsupported(FUNCTION_MODE, f"TorchFunctionMode.__enter__ on {kind_name(mode)}")
    frame.tracer.graph.function_modes.append(mode)
    return mode


@models(TorchFunctionMode.__exit__)
def _exit(frame, args, kwargs):
    modes = frame.tracer.graph.function_modes
    if not modes:
        raise Unsupported(FUNCTION_MODE, "leaving a TorchFunctionMode the captured code did not enter")
    modes.pop()                      # torch's _pop_mode: the top of the stack, whichever it is
    return Const(None)


# ---- dispatching an operation to the mode ------------------------------------------------------

# The namespaces of functions torch generates from its native ops: each one goes to an active
# mode, factories (`torch.zeros`) included, which torch.overrides lists as not overridable (no
# tensor argument a subclass could override them through).
_GENERATED = ("_VariableFunctions", "_nn", "_fft", "_linalg", "_special", "_nested", "_sparse")


@functools.cache
def _overridable() -> dict:
    """id -> function, for every function torch hands to TorchFunctionModes (kept alive here)."""
    found = {}
    for fns in torch.overrides.get_overridable_functions().values():
        found.update((id(f), f) for f in fns)
    for namespace in _GENERATED:
        module = getattr(torch._C, namespace, None)
        for name in dir(module) if module is not None else ():
            f = getattr(module, name, None)
            if isinstance(f, types.BuiltinFunctionType) and not name.startswith("__"):
                found[id(f)] = f
    return found


def overridable(fn) -> bool:
    """Does calling `fn` go to the active TorchFunctionMode (a function of torch's API)?"""
    return _overridable().get(id(fn)) is fn


class _Seen(Exception):
    def __init__(self, call: tuple):
        super().__init__("probed")
        self.call = call


class _Probe(TorchFunctionMode):
    """Records the first call torch hands a mode and stops it there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise _Seen((func, types, args, kwargs))


def _eager_call(operation, args: list, kwargs: dict):
    """(func, types, args, kwargs) that torch hands the top mode for `operation(*args, **kwargs)`,
    or None when it hands it nothing (getting a method, a function outside torch's API)."""
    try:
        with _Probe():
            operation(*args, **kwargs)
    except _Seen as seen:
        return seen.call
    except Exception:                # noqa: BLE001 -- it fails before reaching a mode: the normal path says how
        return None
    return None


class _Examples:
    """Values shown to torch as the example objects they stand for, and the objects torch hands
    back turned into values again: the same object gives the same value (a tensor, a list the
    program passed), a container torch made gives a new one over the same items."""

    def __init__(self):
        self.known: dict[int, tuple] = {}        # id(example object) -> (object, value)

    def example(self, v: Value):
        if isinstance(v, (TensorValue, SymValue)):
            obj = v.example
        elif isinstance(v, Const):
            return v.value
        elif isinstance(v, SeqValue) and v.cls in (tuple, list):
            obj = v.cls(self.example(item) for item in v.items)
        elif isinstance(v, DictValue) and v.cls is dict:
            obj = {k: self.example(item) for k, item in v.items.items()}
        elif isinstance(v, SliceValue):
            obj = slice(*(self.example(p) for p in v.children()))
        elif v.is_python_constant():
            return v.as_python()
        else:
            raise Unsupported(FUNCTION_MODE, f"{kind_name(v)} handed to a TorchFunctionMode")
        self.known[id(obj)] = (obj, v)
        return obj

    def value(self, frame, obj) -> Value:
        known = self.known.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1]
        if type(obj) in (tuple, list):
            return SeqValue([self.value(frame, item) for item in obj], type(obj))
        if type(obj) is dict:
            return DictValue({k: self.value(frame, item) for k, item in obj.items()})
        if type(obj) is slice:
            return make_slice(*(self.value(frame, p) for p in (obj.start, obj.stop, obj.step)))
        if isinstance(obj, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unsupported(FUNCTION_MODE, "torch hands the mode a tensor the traced code did not")
        return frame.wrap(obj, None)


def _handler(frame, mode: Value) -> tuple:
    """The mode's `__torch_function__` as (function value, what it is called on)."""
    cls = mode.python_type()
    fn = inspect.getattr_static(cls, "__torch_function__", None)
    if isinstance(fn, types.FunctionType):
        return FunctionValue(fn), mode
    if isinstance(fn, classmethod) and isinstance(fn.__func__, types.FunctionType):
        return FunctionValue(fn.__func__), frame.wrap(cls, None)
    raise Unsupported(FUNCTION_MODE, f"{cls.__qualname__}.__torch_function__ is a {type(fn).__name__}")


def dispatch(frame, operation, args: list, kwargs: dict) -> Value:
    """`operation(*args, **kwargs)` on values, as the top TorchFunctionMode on the traced stack
    sees it: its `__torch_function__` inlined, the mode off the stack meanwhile; NotImplemented
    when torch would not hand the operation to a mode (the caller goes on as usual)."""
    examples = _Examples()
    seen = _eager_call(operation, [examples.example(a) for a in args],
                       {k: examples.example(v) for k, v in kwargs.items()})
    if seen is None:
        return NotImplemented
    func, overloaded, call_args, call_kwargs = seen
    return _inline_handler(frame, frame.wrap(func, None), examples.value(frame, tuple(overloaded)),
                           examples.value(frame, tuple(call_args)), examples.value(frame, call_kwargs))


def _inline_handler(frame, func: Value, overloaded: Value, call_args: Value, call_kwargs: Value) -> Value:
    """The top mode's `__torch_function__(func, types, args, kwargs)`, inlined with the mode off
    the traced stack."""
    fn, first = _handler(frame, frame.tracer.graph.function_modes[-1])
    handed = [first, func, overloaded, call_args, call_kwargs]
    modes = frame.tracer.graph.function_modes
    mode = modes.pop()
    try:
        return fn.inline_call(frame, handed, {})
    finally:
        modes.append(mode)


def dispatch_call(frame, fn, args: list, kwargs: dict) -> Value:
    """A call of `fn` while a mode is on the traced stack: dispatched when `fn` is torch's API."""
    if not overridable(fn):
        return NotImplemented
    return dispatch(frame, fn, args, kwargs)


# ---- higher-order ops under a mode -----------------------------------------------------------------
# Eager vmap hands the mode calls of its own (the inputs' `dim()` and `size()` before it calls the
# function), which the traced subgraph does not make. They are replayed here through the mode's
# handler: when it passes each one through unchanged and touches nothing, leaving them out of the
# trace changes nothing the program can see; otherwise the op is refused.

class _Recorder(TorchFunctionMode):
    """Passes every call through, recording those made while `recording`."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []
        self.recording = True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if self.recording:
            self.calls.append((func, types, args, kwargs, result))
        return result


def _machinery_calls(frame, run, args: list, returned: int) -> list:
    """The calls `run(body, *args)` hands a mode while outside `body` (which returns its argument
    number `returned`, as it gets it), on the example values."""
    recorder = _Recorder()

    def body(*inner, **kwargs):
        recorder.recording = False
        try:
            return inner[returned]
        finally:
            recorder.recording = True
    with frame.tracer.graph.fake_mode, recorder:
        run(body, *args)
    return recorder.calls


class _Replayed(CallableValue):
    """A call the op's machinery made, handed to the mode as eager hands it: the real function
    (for the handler's `func is ...` tests and attribute reads), which, called on the arguments
    it was handed, returns what the real call returned."""
    __slots__ = ("handed", "handed_kwargs", "result")

    def __init__(self, fn, handed: list, handed_kwargs: dict, result: Value):
        super().__init__(fn)
        self.handed, self.handed_kwargs, self.result = handed, handed_kwargs, result

    def call(self, frame, args, kwargs):
        if len(args) != len(self.handed) or set(kwargs) != set(self.handed_kwargs) \
                or not all(_same(a, b) for a, b in zip(args, self.handed)) \
                or not all(_same(kwargs[k], v) for k, v in self.handed_kwargs.items()):
            raise Unsupported(FUNCTION_MODE, f"the mode calls {getattr(self.fn, '__name__', self.fn)} on other "
                                             f"arguments than it was handed")
        return self.result


def _same(a: Value, b: Value) -> bool:
    return a is b or isinstance(a, Const) and isinstance(b, Const) and type(a.value) is type(b.value) \
        and a.value == b.value


def check_machinery(frame, run, args: list, what: str, returned: int = 0) -> None:
    """Refuse `what` (a higher-order op called while a mode is on the traced stack) unless the
    mode passes every call the op's own machinery hands it through unchanged and without effects.
    `run(body, *examples)` runs the op for real on example values, `body` returning its argument
    number `returned`."""
    if not frame.tracer.graph.function_modes:
        return
    examples = _Examples()
    try:
        calls = _machinery_calls(frame, run, [examples.example(a) for a in args], returned)
    except Exception as e:                   # noqa: BLE001 -- the op itself refuses the examples
        raise Unsupported(FUNCTION_MODE, f"{what} inside a TorchFunctionMode block ({type(e).__name__})") from None
    for func, overloaded, call_args, call_kwargs, result in calls:
        name = getattr(func, "__name__", type(func).__name__)
        if isinstance(result, torch.Tensor):
            raise Unsupported(FUNCTION_MODE, f"{what} hands the mode {name}, which makes a tensor")
        handed = examples.value(frame, tuple(call_args))
        handed_kwargs = examples.value(frame, call_kwargs) if call_kwargs is not None else Const(None)
        expected = Const(result) if is_constant(result) else frame.wrap(result, None)   # a storage: by identity
        replayed = _Replayed(func, handed.items, getattr(handed_kwargs, "items", {}), expected)
        outer = OuterState(frame, list(frame.tracer.graph.function_modes))
        got = _inline_handler(frame, replayed, examples.value(frame, tuple(overloaded)), handed, handed_kwargs)
        try:
            outer.check(what)
        except Unsupported:
            raise Unsupported(FUNCTION_MODE, f"the mode has an effect on {what}'s own call of {name}") from None
        if got is not expected:
            raise Unsupported(FUNCTION_MODE, f"the mode does not pass {what}'s own call of {name} through unchanged")


def refuse_under_mode(frame, what: str) -> None:
    """A higher-order op whose machinery's calls to a mode are not replayed: refused under one."""
    if frame.tracer.graph.function_modes:
        raise Unsupported(FUNCTION_MODE, f"{what} inside a TorchFunctionMode block")


# ---- what torch hands a mode for a property: `Tensor.shape.__get__` ----------------------------

def _is_property_getter(fn) -> bool:
    owner = getattr(fn, "__self__", None)
    return (type(fn).__name__ == "method-wrapper" and getattr(fn, "__name__", "") == "__get__"
            and isinstance(owner, types.GetSetDescriptorType)
            and issubclass(torch.Tensor, getattr(owner, "__objclass__", object)))


def _property_getter(fn):
    name = fn.__self__.__name__

    def handler(frame, args, kwargs):
        if len(args) != 1 or kwargs:
            return NotImplemented
        return semantics.load_attr(frame, args[0], name)
    return handler


models_family(_is_property_getter, _property_getter)
