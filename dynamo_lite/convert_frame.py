"""One frame -> a cache entry: trace it, compile the graph with the backend, generate the
replacement code and compile its guards. Or, when something cannot be captured, an entry that
runs the original code (eagerly) under the guards seen so far, with the reason recorded.

This is the Python callback the C hook calls on a cache miss. It never lets an internal error
reach the user's program: the frame then runs eagerly and we warn once. With fullgraph=True a
capture failure raises GraphBreakError instead.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import math
import operator
import os
import sys
import threading
import time

import torch
import traceback
import types
import warnings
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, NamedTuple, Optional

from torch.utils._device import DeviceContext

from . import _evalframe, breaks, config
from .backends.ddp_split import active_ddp_module, ddp_split
from .breaks import GraphBreakError, TracedException, Unsupported
from .code_facts import STACK_ARG_PREFIX, facts
from .codegen import ResumeCall, break_start, check_resumable, make_break_code, make_code, tensors_needed
from .graph_builder import graph_structure, keep_saved_tensor, tracing_saved_tensor_hooks_lifted
from .resume import entry_of, is_driven, is_resume
from .fallback import records, skip
from .fallback.records import FrameRecord
from .guards import (ClassAttrsMatch, ClassVersionMatch, ConstantMatch, DictKeysMatch, DistinctMatch, IdMatch, RemainingMatch, ShapeEnvMatch, TensorMatch,
                     compile_guards)
from .interpreter import DATA_DEPENDENT, SCALARS, Tracer
from .runtime import (GRAPH_CHECKS, autocast_as_traced, autocast_snapshot, enter_autocast, exit_autocast,
                      func_transform, restore_autocast, restoring_grad_mode)
from .sources import AttrSource, FromNumpySource, GenericAttrSource, ItemSource, LocalSource
from .values.base import LazyValue, Value
from .values.tensors import TensorValue
from .values.containers import DictValue, IdentityKey
from .values.contexts import AutocastValue, block_exit

log = logging.getLogger("dynamo_lite")


# Code objects whose co_extra slot we filled (code objects are not tracked by the GC, so reset()
# cannot find them any other way).
TOUCHED_CODES: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


def set_extra(code: types.CodeType, value) -> None:
    TOUCHED_CODES.add(code)
    _evalframe.set_code_extra(code, value)


# Threads capturing one code object at once must share its one entries list: each reads it,
# captures (other threads run meanwhile) and inserts into it; a list made by one and stored over
# another's would drop that one's entries. list.insert itself is atomic under the GIL.
_ENTRIES_LOCK = threading.Lock()


class CacheEntry(NamedTuple):
    """One entry of a code object's cache (a tuple: the C hook reads `check` and `code` by position).
    `record` is None for entries that were not captured (they run the original code eagerly)."""
    check: Callable[..., bool]          # the guard function, called with (fn, *frame arguments)
    code: types.CodeType                # what runs when the guards pass
    guards: Any                         # CompiledGuards (or _RunsEagerly): explain and recapture reasons
    record: Optional[FrameRecord]


def cache_entries(code: types.CodeType) -> list:
    """The code object's list of cache entries, made and stored on first use."""
    with _ENTRIES_LOCK:
        entries = _evalframe.get_code_extra(code)
        if not isinstance(entries, list):
            entries = []
            set_extra(code, entries)
        return entries


@dataclass(frozen=True)
class CaptureOptions:
    backend: Callable
    backend_name: str
    fullgraph: bool = False
    dynamic: Optional[bool] = None     # None: static first, symbolic for dims seen changing
    # What torch.compiler.is_compiling() answers in the trace: True, as TorchDynamo, so libraries
    # take their compile paths; False for a capture again after such a path raised (_capture)
    compiling: bool = True

    @property
    def scalar_inputs(self) -> tuple:
        """The Python number types the backend takes as graph inputs (dynamic scalars): int and
        float unless it says otherwise with `fn.accepts_scalar_inputs` (False: none; or a tuple of
        the types it takes)."""
        accepts = getattr(self.backend, "accepts_scalar_inputs", True)
        if accepts is True:
            return (int, float)
        return tuple(accepts) if accepts else ()


# Automatic dynamic shapes: per code object, the input dims seen changing between captures.
AUTO_DYNAMIC: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()


def note_changed_inputs(code, entries, func, args) -> None:
    """Automatic dynamic: the tensor dims, and the Python ints and floats, whose guards failed
    because they changed (a number that changes becomes a graph input, as a dim that changes
    becomes symbolic)."""
    state = AUTO_DYNAMIC.setdefault(code, {})
    for entry in entries:
        guards = entry.guards
        for guard in getattr(guards, "guards", ()):
            is_scalar = isinstance(guard, ConstantMatch) and type(guard.value) in (int, float)
            is_tuple = isinstance(guard, ConstantMatch) and type(guard.value) is tuple
            if not isinstance(guard, TensorMatch) and not is_scalar and not is_tuple:
                continue
            try:
                value = guards._value_of(guard.source, func, args)
            except Exception:
                continue
            if is_scalar:
                if type(value) is type(guard.value) and value != guard.value:
                    state.setdefault(SCALARS, set()).add(guard.source)
                continue
            if is_tuple:      # a tuple of numbers whose items changed: those items become inputs
                if type(value) is tuple and len(value) == len(guard.value):
                    state.setdefault(SCALARS, set()).update(
                        ItemSource(guard.source, i) for i, (old, new) in enumerate(zip(guard.value, value))
                        if type(old) in (int, float) and type(new) is type(old) and new != old)
                continue
            if isinstance(value, torch.Tensor) and value.dim() == len(guard.shape) and value.dtype == guard.dtype:
                changed = {i for i, (a, b) in enumerate(zip(guard.shape, value.shape)) if a is not None and a != b}
                if changed:
                    state.setdefault(guard.source, set()).update(changed)


def _generalizes(code, failing, checked, func, args) -> bool:
    """Is a loop stretch's miss one that the next capture covers for all later iterations, not a
    sign of a graph per iteration? The loop's last stretch, where its iterator runs out (an
    iterator's items left), a number just seen changing, which the next capture makes a graph
    input, and a tensor that changed only in ways the next capture covers are such misses."""
    if isinstance(failing, RemainingMatch):
        return True
    if isinstance(failing, TensorMatch):
        try:
            value = checked._value_of(failing.source, func, args)
        except Exception:                  # noqa: BLE001 -- unreadable now: count the miss
            return False
        return _tensor_miss_generalizes(code, failing, value)
    return isinstance(failing, ConstantMatch) and type(failing.value) in (int, float) \
        and failing.source in AUTO_DYNAMIC.get(code, {}).get(SCALARS, ())


def _tensor_miss_generalizes(code, guard: "TensorMatch", value) -> bool:
    """A tensor of the same kind whose requires_grad changed (an accumulator once values that do
    were written into it: two variants at most) or whose sizes changed only in dims now dynamic
    (the next capture makes them symbolic): not a graph per iteration."""
    if type(value) is not guard.cls or value.dtype != guard.dtype or value.device != guard.device \
            or value.dim() != len(guard.shape):
        return False
    dynamic = AUTO_DYNAMIC.get(code, {}).get(guard.source, set())
    resized = {i for i, (old, new) in enumerate(zip(guard.shape, value.shape)) if old is not None and old != new}
    if not resized <= dynamic:
        return False
    if not resized and tuple(value.stride()) != tuple(s if s is not None else n
                                                     for s, n in zip(guard.stride, value.stride())):
        return False                       # laid out differently at the same sizes
    return bool(resized) or value.requires_grad != guard.requires_grad


def _accept_all(*args) -> bool:
    return True


class _RunsEagerly:
    """The guards object of an entry whose code is the original (the frame runs eagerly): its
    check is a plain function; explain and recapture reasons see no guards."""
    guards: list = []

    def __init__(self, source_code: str):
        self.source_code = source_code

    def first_failure(self, fn, args):
        return None

    def failure(self, fn, args):
        return 0, None


_ACCEPT_ALL_GUARDS = _RunsEagerly("def ___guard(*args):\n    return True   # cache_size_limit reached: run eagerly\n")
_LOOP_EAGER_GUARDS = _RunsEagerly("def ___guard(*args):\n    return True   # loop_stretch_limit reached: the loop "
                                  "runs eagerly\n")


_TORCH_LOGGERS = ("torch._subclasses.fake_tensor", "torch.fx.experimental.symbolic_shapes")


@contextlib.contextmanager
def _quiet_torch_logs():
    """FakeTensor logs an error when an op fails on example values; for us that is an expected
    outcome (the frame runs eagerly and the user's own error surfaces there)."""
    loggers = [logging.getLogger(name) for name in _TORCH_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def make_callback(options: CaptureOptions):
    def callback(code: types.CodeType, func, args: tuple):
        return convert_frame(code, func, args, options)
    callback.options = options
    return callback


def _arg_names(code: types.CodeType) -> list[str]:
    n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return list(code.co_varnames[:n])


_CAPTURE_LOCK = threading.RLock()


# The code of the function `capture` returns (eval_frame.py registers it): a frame it calls
# directly is the captured entry point.
WRAPPER_CODES: dict = {}        # id(code) -> code (kept alive here): looked up by identity, never hashed


def _called_from_wrapper(frame) -> bool:
    """Whether `frame` (the caller of the frame being evaluated) is a `capture` wrapper."""
    # (address(), not id(): no audit event per call; guards/guards.py says why)
    return frame is not None and _evalframe.address(frame.f_code) in WRAPPER_CODES


def _runs_eagerly_nested(caller, module) -> bool:
    """A torch.nn forward reached from eager code runs eagerly (see skip.py) unless a `capture`
    wrapper calls it, the module holds user modules, or it is the model a DistributedDataParallel
    forward is running (DDP's own forward is torch's code, run eagerly; the model inside is what
    the user trains)."""
    if _called_from_wrapper(caller) or not skip.builtin_subtree(module):
        return False
    ddp_module = active_ddp_module()
    return ddp_module is None or getattr(ddp_module, "module", None) is not module


def _nested_builtin_module(func, self=None, *rest) -> bool:
    """The cache check for that: the C hook calls it with (function, *arguments) while the
    caller's frame is current."""
    return _runs_eagerly_nested(sys._getframe(1), self)


_NESTED_BUILTIN_GUARDS = _RunsEagerly("def ___guard(fn, self, *args):\n    return True   # torch.nn layers called "
                                      "from eager code run eagerly\n")


def _saved_tensor_hooks_see_no_tracing() -> contextlib.ExitStack:
    """Tracing runs the ops on fake tensors under autograd, which saves them for backward. The
    program's saved-tensor hooks (activation checkpointing's, offloading) must see only the real
    ops, as in eager: identity hooks take the fake saves. Where the program disabled registering
    hooks, there are none to hide from."""
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(keep_saved_tensor, keep_saved_tensor))
    except RuntimeError:
        pass
    return stack


def convert_frame(code: types.CodeType, func, args: tuple, options: CaptureOptions):
    """The hook's callback on a cache miss: the code to run (new or the original), or None to run
    the frame as it is. Nothing raised inside reaches the user's program, but GraphBreakError
    (fullgraph=True) and KeyboardInterrupt: an error of ours makes the frame run eagerly."""
    try:
        return _convert_frame(code, func, args, options)
    except (GraphBreakError, KeyboardInterrupt, SystemExit):
        raise
    except RecursionError:   # captured from deep in the user's stack: run eagerly now, capture another time
        if options.fullgraph:
            raise
        return None
    except BackendError as e:   # the backend's failure, not ours: run eagerly, say so once
        if options.fullgraph:
            raise
        records.add(FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "error", breaks.BACKEND_ERROR,
                                detail=str(e)))
        records.warn_once(("backend", code), f"dynamo_lite: {e}; {code.co_name} ({code.co_filename}:"
                                             f"{code.co_firstlineno}) runs eagerly")
        _mark_skip(code)
        return None
    except Exception as e:   # a bug of ours: never the user's problem
        if options.fullgraph:
            raise
        _internal_error(code, e)
        return None


def _internal_error(code, e: BaseException) -> None:
    """Record an error of ours, warn once, and never capture this code again."""
    try:
        records.add(FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "error", breaks.INTERNAL_ERROR,
                                detail=f"{type(e).__name__}: {e}"))
        records.warn_once(("internal", code),
                          f"dynamo_lite: internal error while capturing {code.co_name} "
                          f"({code.co_filename}:{code.co_firstlineno}); it runs eagerly. "
                          f"{type(e).__name__}: {e}")
        log.debug("internal capture error:\n%s", traceback.format_exc())
    finally:
        _mark_skip(code)


def graph_failed_for_us(code, exc: BaseException) -> None:
    """A captured graph (or the rebuild after it) raised where the frame, run eagerly, did not: a
    failure of ours, hidden from the user. Record it, warn once, and capture this code no more."""
    try:
        records.add(FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "error", breaks.INTERNAL_ERROR,
                                detail=f"the captured code failed at run time ({type(exc).__name__}: {exc}); "
                                       f"the frame ran eagerly"))
        records.warn_once(("run", code), f"dynamo_lite: the captured code of {code.co_name} ({code.co_filename}:"
                                         f"{code.co_firstlineno}) raised {type(exc).__name__}: {exc}, where eager "
                                         f"did not; it runs eagerly from now on")
    finally:
        _mark_skip(code)


def _mark_skip(code) -> None:
    try:
        set_extra(code, _evalframe.SKIP)
    except Exception:           # the code object refuses extra data: it simply stays uncaptured
        pass


def _under_foreign_mode(code: types.CodeType) -> bool:
    """A TorchFunctionMode other than torch's default-device one (`torch.set_default_device`,
    `with torch.device(...)`) is active as the frame is called: it would see every torch call our
    guards and runtime make, and a compiling backend's kernels would bypass it. The frame runs
    eagerly this call, recorded once per code (a mode the captured code enters itself is traced:
    function_modes.py)."""
    modes = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
    foreign = [m for m in modes if not isinstance(m, DeviceContext)]
    if foreign and code not in _NOTED_UNDER_MODE:
        _NOTED_UNDER_MODE.add(code)
        records.add(FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "fallback", breaks.FUNCTION_MODE,
                                detail=f"a {type(foreign[-1]).__name__} (TorchFunctionMode) is active when the frame "
                                       f"is called: it runs eagerly while one is"))
    return bool(foreign)


_NOTED_UNDER_MODE: "weakref.WeakSet" = weakref.WeakSet()


def _convert_frame(code: types.CodeType, func, args: tuple, options: CaptureOptions):
    if skip.is_torch_machinery(code):
        set_extra(code, _evalframe.NOHOOK)
        return _evalframe.NOHOOK          # this run too: the hook is off until the frame returns
    if skip.skip_frame(code):
        set_extra(code, _evalframe.SKIP)
        return None
    caller = sys._getframe(3)           # the frame calling the one being evaluated
    if skip.called_through_torch_disable(code, caller):
        for inner in skip.with_nested_codes(code):
            _mark_skip(inner)
        return None
    if not skip.may_use_torch(code, func, args) and not is_resume(code) and not _called_from_wrapper(caller):
        return None                       # no tensor in reach: runs as it is (asked again next call)
    if torch._C._len_torch_function_stack() and _under_foreign_mode(code):
        return None                       # this call runs eagerly; its guards are not even checked
    entries = cache_entries(code)
    if skip.is_torch_nn_forward(code) and args and _runs_eagerly_nested(caller, args[0]) \
            and not any(e.guards is _NESTED_BUILTIN_GUARDS for e in entries):
        entries.append(CacheEntry(_nested_builtin_module, code, _NESTED_BUILTIN_GUARDS, None))
        return None
    recompile_reason = recapture = None
    if entries:
        recompile_reason, failing, checked = _closest_failure(entries, func, args)
        if failing is not None:
            recapture = records.Recapture(checked.readable_guard(failing), *checked.old_and_new(failing, func, args),
                                          recompile_reason)
        _note_recapture(code, failing, recompile_reason)
        if options.dynamic is None:
            note_changed_inputs(code, entries, func, args)
        if len(entries) >= config.cache_size_limit:
            reasons = "; ".join(filter(None, (_first_failure(e, func, args) for e in entries[:3])))
            records.warn_once(("cache_limit", code),
                              f"dynamo_lite: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) was captured "
                              f"{len(entries)} times (config.cache_size_limit={config.cache_size_limit}); from now "
                              f"on, inputs matching no captured variant run eagerly. Last reasons: {reasons}. "
                              f"Raise dynamo_lite.config.cache_size_limit or make the varying input a tensor.")
            # A last entry that accepts everything and runs the original code: later misses cost
            # the guard checks and no capture attempt.
            entries.append(CacheEntry(_accept_all, code, _ACCEPT_ALL_GUARDS, None))
            return None
        if is_driven(code) and len(entries) >= config.loop_stretch_limit \
                and not _generalizes(code, failing, checked, func, args):
            # A loop's stretch specialized per iteration: like TorchDynamo, run the loop from here
            # eagerly (its calls are captured on their own) rather than a graph per iteration.
            records.add(FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "fallback",
                                    breaks.LOOP_SPECIALIZED, detail=recompile_reason or "", qualname=code.co_qualname,
                                    code_id=id(code), backend=options.backend_name))
            entries.append(CacheEntry(_accept_all, code, _LOOP_EAGER_GUARDS, None))
            return None
    # One capture at a time across threads: tracing touches process-wide state that is not
    # thread-safe (sympy's caches under ShapeEnv, warnings filters, torch loggers). Captures
    # are rare; calls of captured code never take this lock.
    # (the saved-tensor hooks only around capturing: a frame asked about and left as it is, every
    # call, costs no hooks pushed and popped)
    with _CAPTURE_LOCK, warnings.catch_warnings(), _quiet_torch_logs(), _saved_tensor_hooks_see_no_tracing():
        warnings.simplefilter("ignore")    # tracing must not print into the user's program
        return _capture(code, func, args, options, entries, recompile_reason, recapture)


def _new_tracer(code, func, args, options) -> Tracer:
    return Tracer(code, func, args, options.dynamic, AUTO_DYNAMIC.get(code), options.scalar_inputs,
                  compiling=options.compiling)


def _capture(code, func, args, options, entries, recompile_reason, recapture=None):
    start = time.perf_counter()
    tracer = _new_tracer(code, func, args, options)
    record = FrameRecord(code.co_name, code.co_filename, code.co_firstlineno, "captured",
                         recompile_reason=recompile_reason, recapture=recapture, qualname=code.co_qualname,
                         code_id=id(code), backend=options.backend_name)
    try:
        frame = tracer.root_frame()
        result = tracer.run(frame)
        lineno = frame.location()[1]
        outputs = tensors_needed(tracer, result)
        graph = tracer.graph
        gm = graph.finish(outputs)
        compiled = None
        _check_ops_in_try(tracer)
        # (not under fullgraph=True: there the first call must be the captured graph too)
        invalidated = _invalidates_own_guards(tracer) \
            if not options.fullgraph and DEFERRED.get(code, 0) < config.cache_size_limit else ""
        if invalidated:
            # A graph that can never run again is not worth compiling: run the frame eagerly this
            # once (each optimizer's first step; a frame that does this on every call is captured
            # as before once it has run eagerly cache_size_limit times)
            DEFERRED[code] = DEFERRED.get(code, 0) + 1
            record.status, record.kind, record.detail = "fallback", breaks.SELF_INVALIDATING, invalidated
            record.fallback_reason = invalidated
            record.capture_seconds = time.perf_counter() - start
            records.add(record)
            return _evalframe.NOHOOK       # eagerly indeed: the frames it calls are not captured either
        if graph.op_count() > 0:
            compiled = _graph_callable(gm, graph, options, code, record)
            inputs = [src for (_, _, src) in graph.inputs]
        else:
            outputs, inputs = [], []
        new_code = make_code(code, tracer, result, compiled, inputs, outputs, lineno, graph_failed_for_us,
                             cells=frame.cells)
    except Unsupported as e:
        if isinstance(e, TracedException) and tracer.asked_compiling and options.compiling:
            # The traced code raises, and took paths for being compiled (it asked
            # torch.compiler.is_compiling(): True). Eager code, told False, may never raise here
            # (transformers' T5-style stacks skip making a default attention mask when compiling,
            # then index it): the breaks would run a compile path's state eagerly and raise for
            # real. Captured again as eager code sees itself; an exception that trace raises too
            # is the code's own.
            return _capture(code, func, args, replace(options, compiling=False), entries,
                            recompile_reason, recapture)
        if options.fullgraph:
            raise _graph_break_error(e) from None
        if _raises_before_any_op(tracer, e):
            # Nothing to capture: the frame raises (AttributeError from a __getattr__, say) before
            # any tensor op. Its original code runs under the guards seen, without a break.
            new_code = code
            record.detail = f"raises {type(e.exc).__name__} before any tensor op"
        else:
            record.kind, record.detail, record.user_stack = e.kind, e.detail, e.user_stack
            new_code, tracer = _graph_break(code, func, args, options, tracer, record)
    _guard_distinct_inputs(tracer)
    shape_guards = tracer.graph.shape_guards()
    if shape_guards and new_code is not code:
        tracer.add_guard(ShapeEnvMatch(tuple(shape_guards)))
    record.capture_seconds = time.perf_counter() - start
    _drop_versions_of_written_classes(tracer)
    guards = compile_guards(tracer.guards, _arg_names(code), func.__globals__, code.co_name,
                            frozenset(tracer.instance_attrs))
    record.guards, record.code_ref = guards, (weakref.ref(new_code) if new_code is not code else None)
    records.add(record)
    entries.insert(0, CacheEntry(guards.check, new_code, guards, record))
    _drop_entry_when_objects_die(code, guards)
    if "bytecode" in config.log and new_code is not code:
        import dis, io
        buf = io.StringIO()
        dis.dis(new_code, file=buf)
        log.info("replacement bytecode for %s:\n%s", code.co_name, buf.getvalue())
    if "guards" in config.log:
        log.info("guards for %s (%s:%d):\n%s", code.co_name, code.co_filename, code.co_firstlineno,
                 "\n".join(f"  {g.describe()}" for g in guards.guards))
    if "graph" in config.log and record.graphs:
        log.info("graph for %s:\n%s", code.co_name, record.graphs[0].code)
    return new_code


# Code object -> how many times it ran eagerly because its capture invalidated its own guards.
DEFERRED: "weakref.WeakKeyDictionary[types.CodeType, int]" = weakref.WeakKeyDictionary()


def _invalidates_own_guards(tracer) -> str:
    """Would the trace's own side effects fail its guards on the next call? Per-tensor state kept by
    an object says so: a dict attribute (an optimizer's `state`, any object's `self.state[p]`) whose
    keys are guarded and to which the trace adds entries keyed by tensors (the parameters, whose
    state the first step makes). What it says is returned, '' when nothing does. Other containers
    the trace grows do not count: the next call may well bring a fresh one (`**kwargs`, a list
    argument, state reset between calls), and capturing it on the first call is then right."""
    grown = {c.source: c for c in tracer.effects.mutated
             if isinstance(c.source, (AttrSource, GenericAttrSource)) and c.source.attr != "__dict__"
             and isinstance(c, DictValue)}      # (reading a lazy list's `items` would guard it)
    for guard in tracer.guards:
        if not isinstance(guard, DictKeysMatch) or guard.source not in grown:
            continue
        keys = grown[guard.source].items
        if len(keys) != len(guard.keys) and any(isinstance(k, IdentityKey) and k not in guard.keys
                                                and issubclass(k.value.python_type(), torch.Tensor) for k in keys):
            return f"it adds entries keyed by tensors to {guard.source.name()} ({len(guard.keys)} -> {len(keys)} keys)"
    return ""


def _drop_versions_of_written_classes(tracer) -> None:
    """A class the trace writes to (`type(self).counter += 1`), and its subclasses, get a new version
    tag when the write is replayed: a version guard on them would fail on every call. Each such
    guard becomes a ClassAttrsMatch, which checks the class's attributes but the written ones."""
    written: dict = {}
    for r in tracer.effects.records:
        obj = getattr(r, "obj", None)
        if isinstance(obj, Value) and isinstance(obj.real_object(), type):
            written.setdefault(obj.real_object(), set()).add(getattr(r, "name", None))
    if written:
        tracer.guards = [ClassAttrsMatch.of(g.key, written)
                         if isinstance(g, ClassVersionMatch) and any(k in written for k in g.key.__mro__) else g
                         for g in tracer.guards]


def _raises_before_any_op(tracer, e: Unsupported) -> bool:
    return isinstance(e, TracedException) and tracer.graph.op_count() == 0 and not tracer.effects


def recapture_reason(entries, func, args) -> Optional[str]:
    """Why no entry matched, told for the entry that came closest (passed the most guards)."""
    return _closest_failure(entries, func, args)[0]


def _closest_failure(entries, func, args) -> tuple:
    """(reason, the guard that failed, its entry's CompiledGuards) for the entry that came closest
    (passed the most guards)."""
    best, guard, checked = None, None, None
    for entry in entries:
        if entry.record is None:
            continue
        passed, reason = entry.guards.failure(func, args)
        if best is None or passed > best[0]:
            best, checked = (passed, reason), entry.guards
            guard = entry.guards.guards[passed] if passed < len(entry.guards.guards) else None
    return (best[1] if best else None), guard, checked


# How often each code object was recaptured because of one guard: {code: {guard key: count}}.
RECAPTURES: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()
STORM_AFTER = 3


def _note_recapture(code, guard, reason: Optional[str]) -> None:
    """One warning when a code object keeps being recaptured for the same guard: the user can fix
    that (the value it checks changes on every call), and it is the costliest pattern there is.
    An identity guard that fails on another live object is no such pattern: the entry of an object
    that dies is dropped with it, so the objects the entries pin are all alive, and the code serves
    each of them with a graph of its own (a decorator's wrapper whose closure holds each decorated
    class's function: one entry per model class), bounded by `config.cache_size_limit`."""
    if guard is None or isinstance(guard, IdMatch) and guard.weak:
        return
    source = getattr(guard, "source", None)
    key = (type(guard).__name__, source.name() if source is not None else guard.describe())
    counts = RECAPTURES.setdefault(code, {})
    counts[key] = counts.get(key, 0) + 1
    if counts[key] == STORM_AFTER:
        records.warn_once(("storm", code, key),
                          f"dynamo_lite: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) keeps being "
                          f"recaptured: its guard `{guard.describe()}` failed on {STORM_AFTER} calls in a row "
                          f"(last: {reason}). Each new value makes a new graph; pass the changing value as a "
                          f"tensor, or keep it the same between calls.")


def _first_failure(entry, func, args) -> Optional[str]:
    return entry.guards.first_failure(func, args)


def _drop_entry_when_objects_die(code, guards):
    """Identity guards compare ids and hold their objects weakly: when such an object dies, its
    id could be reused, so the entry is removed right then."""
    code_ref, check_ref = weakref.ref(code), weakref.ref(guards.check)
    for guard in guards.guards:
        if isinstance(guard, IdMatch) and guard.weak and guard.obj is not None:
            weakref.finalize(guard.obj, _drop_entry, code_ref, check_ref)


def _drop_entry(code_ref, check_ref):
    code, check = code_ref(), check_ref()
    if code is None or check is None:
        return
    entries = _evalframe.get_code_extra(code)
    if isinstance(entries, list):
        for entry in [e for e in entries if e.check is check]:   # one remove() each: other threads may insert
            with contextlib.suppress(ValueError):
                entries.remove(entry)


def _graph_break(code, func, args, options, failed: Tracer, record: FrameRecord):
    """Compile what came before the unsupported instruction, run that instruction as CPython
    would and continue in a resume function. Returns (code, tracer whose guards to use); the
    original code (run eagerly) when the break cannot resume.

    A break inside a `for` loop whose head this trace ran moves to that head (`_split_at_loop_head`)."""
    record.status = "fallback"
    if failed.failed_at is None or record.kind in (breaks.INSTRUCTION_LIMIT,):
        return code, failed
    code_facts = facts(code)
    end = code_facts.index_of[failed.failed_at]
    start, why = break_start(code, end)
    if why:
        record.fallback_kind, record.fallback_reason = breaks.UNRESUMABLE_INSTRUCTION, why
        return code, failed
    split = _split_at_loop_head(code, func, args, options, failed, record)
    if split is not None:
        return split
    new_code, tracer = _break_before(code, func, args, options, failed, record, start, end,
                                     data_dependent=record.kind is breaks.DYNAMIC_OUTPUT_SHAPE
                                     and len(record.user_stack) <= 1)     # the op itself, not a call of it
    if new_code is code and record.fallback_kind in (breaks.BREAK_IN_WITH, breaks.RETRACE_MISMATCH):
        split = _split_at_with(code, func, args, options, failed, record)
        if split is not None:
            return split
    return new_code, tracer


def _split_at_with(code, func, args, options, failed: Tracer, record: FrameRecord):
    """A break that cannot resume inside a `with` block the trace entered on a context manager
    it cannot hand on (a generator-based @contextmanager suspended at its yield, an object made
    in the trace): the break moves to the `with` statement, which runs as Python (the context
    manager's call, if the statement makes it, and BEFORE_WITH), and the block's body resumes in
    a function handed the real `__exit__`, whose handler takes exceptions like a try block's
    (codegen.check_resumable). Innermost block first; None, and nothing compiled, where no
    block's statement can be the break."""
    code_facts = facts(code)
    saved = (record.kind, record.detail, record.user_stack, record.fallback_kind, record.fallback_reason)
    why = _moved_break(code, failed, record)
    for before_with, _ in code_facts.with_blocks_at(failed.failed_at):
        starts = [before_with]
        if before_with > 0 and code_facts.insts[before_with - 1].opname == "CALL":
            starts.insert(0, break_start(code, before_with - 1)[0])    # `with make_cm(...):`: made for real too
        line = code_facts.line_of(code_facts.insts[before_with].offset) or code.co_firstlineno
        record.kind, record.detail, record.user_stack = breaks.WITH_ENTERED_FOR_REAL, why, \
            [(code.co_filename, line, code.co_name)]
        for start in starts:
            new_code, tracer = _break_before(code, func, args, options, failed, record, start, before_with,
                                             quiet=True)
            if new_code is not code:
                return new_code, tracer
    record.kind, record.detail, record.user_stack, record.fallback_kind, record.fallback_reason = saved
    return None


def _moved_break(code, failed: Tracer, record: FrameRecord) -> str:
    """The detail of a break moved earlier (to a loop's head, to a `with` statement): the kind,
    line and detail of the break that made it move."""
    line = facts(code).line_of(failed.failed_at) or code.co_firstlineno
    return f"{record.kind.id} {record.kind.name} at line {line}: {record.detail}"


def _split_at_loop_head(code, func, args, options, failed: Tracer, record: FrameRecord):
    """A break inside a `for` loop whose FOR_ITER this trace ran (the loop was entered here, or
    came round again after a resume), with nothing worth a graph of its own before that FOR_ITER
    (no op, or in a loop stretch one op run as is) or after it (the ops from the head to the
    break would run as is): the stretch ends right before the FOR_ITER instead, which then runs
    as Python. The loop body's stretches start at the loop head each iteration, so their graph is
    the same for every iteration rather than one glued to the code before the loop and another
    to the end of the previous iteration, and the end of an iteration is the same graph whether
    the loop goes round again or ends (glued to the next head, the last iteration's end is
    another graph, glued to the code after the loop). TorchDynamo runs such a frame eagerly and
    captures only its calls. Where real ops come both before the head and after it they stay
    glued (one graph call fewer per iteration, and no more graphs).

    None, and nothing compiled, where that cannot be done (the iterator cannot be rebuilt for
    real, the head sits in a `with` or try block): the break stays where it is."""
    code_facts = facts(code)
    head = code_facts.for_loop_head(failed.failed_at)
    if head is None or head == failed.failed_at or head not in failed.root_for_iters:
        return None
    ops_before = failed.root_for_iters[head]
    ops = failed.graph.ops()
    if ops_before and not _runs_as_is(code, ops[:ops_before]) \
            and not (config.loop_single_ops_as_is and _kernels(ops[ops_before:]) <= 1):
        return None
    why = _moved_break(code, failed, record)
    saved = (record.kind, record.detail, record.user_stack)
    where = (code.co_filename, code_facts.line_of(head) or code.co_firstlineno, code.co_name)
    record.kind, record.detail, record.user_stack = breaks.LOOP_HEAD, why, [where]
    index = code_facts.index_of[head]
    new_code, tracer = _break_before(code, func, args, options, failed, record, index, index, quiet=True)
    if new_code is code:
        record.kind, record.detail, record.user_stack = saved
        record.status, record.fallback_kind, record.fallback_reason = "fallback", None, ""
        return None
    return new_code, tracer


def _break_before(code, func, args, options, failed: Tracer, record: FrameRecord, start: int, end: int,
                  quiet: bool = False, data_dependent: bool = False):
    """The break's code: a trace again from the top, stopped right before instruction `start`, its
    graph compiled, then instructions [start, end] run as CPython would and a resume function
    called. (code, failed) where it cannot resume; `quiet`: compile nothing in that case (the
    caller tries another break point, so nothing may be handed to the backend in vain).
    `data_dependent`: the break's instructions make tensors whose sizes depend on tensor data
    (`_hand_on_dynamic_sizes`)."""
    code_facts = facts(code)
    # Trace again from the top and stop right before the break: tracing is deterministic for
    # the same inputs, so the state there is exactly what the first attempt saw.
    tracer = _new_tracer(code, func, args, options)
    tracer.stop_at = code_facts.insts[start].offset
    try:
        frame = tracer.root_frame()
        tracer.run(frame)
    except Unsupported as e:
        record.fallback_kind, record.fallback_reason = breaks.RETRACE_MISMATCH, f"tracing up to the break failed: {e}"
        return code, failed
    if not frame.stopped:
        record.fallback_kind = breaks.RETRACE_MISMATCH
        record.fallback_reason = "the second trace did not reach the break"
        return code, failed
    roots = [v for v in frame.stack] + [v for v in frame.locals.values() if not isinstance(v, LazyValue)]
    roots += [cell.contents for cell in frame.cells.values() if isinstance(cell.contents, Value)]   # passed on too
    outputs = tensors_needed(tracer, *roots)
    graph = tracer.graph
    _leave_autocast_blocks_entered_here(frame, graph)
    gm = graph.finish(outputs)
    compiled, inputs = None, []
    try:
        _check_ops_in_try(tracer)
    except Unsupported as e:
        if quiet:
            return code, failed
        if tracer.failed_at is not None and code_facts.index_of.get(tracer.failed_at, end) < end:
            # an earlier call's inlined ops sit in a try block (optimizer.step() before a print):
            # the break moves to that call, which runs eagerly, as when nothing breaks after it
            record.kind, record.detail, record.user_stack = e.kind, e.detail, e.user_stack
            return _graph_break(code, func, args, options, tracer, record)
        record.fallback_kind, record.fallback_reason = e.kind, e.detail
        return code, failed
    try:
        check_resumable(tracer, frame, code_facts, code_facts.insts[end].offset)     # before compiling anything
        if quiet:           # everything the break's code needs can be rebuilt: only then compile
            some = graph.op_count() > 0
            make_break_code(code, tracer, frame, _NOT_YET_COMPILED if some else None, [],
                            outputs if some else [], start, end, graph_failed_for_us)
    except Unsupported as e:
        record.fallback_kind, record.fallback_reason = e.kind, e.detail
        return code, failed
    if quiet:
        # ... and so can its guards: ShapeEnv words them over the inputs the shortened trace has
        # (it can meet a symbol none of them carries: then the break stays where it was)
        try:
            graph.shape_guards()
        except Exception:                  # noqa: BLE001 -- not this break point; the caller tries another
            return code, failed
    if graph.op_count() > 0:
        compiled = _graph_callable(gm, graph, options, code, record)
        inputs = [src for (_, _, src) in graph.inputs]
    else:
        outputs = []
    resumes: list = []
    try:
        new_code = make_break_code(code, tracer, frame, compiled, inputs, outputs, start, end, graph_failed_for_us,
                                   resumes)
    except Unsupported as e:
        record.graphs.clear()
        record.graphs_shared = 0
        record.fallback_kind, record.fallback_reason = e.kind, f"cannot resume: {e.detail}"
        return code, failed
    record.status, record.fallback_kind, record.fallback_reason = "break", None, ""   # (an earlier try's)
    record.break_offset = code_facts.insts[end].offset
    _hand_on_dynamic_sizes(code, resumes, frame, data_dependent)
    return new_code, tracer


def _hand_on_dynamic_sizes(code, resumes: "list[ResumeCall]", frame, data_dependent: bool) -> None:
    """Automatic dynamic across a break: a tensor whose size is symbolic in this trace is handed to
    the resume function with those dims symbolic from its first capture on, and so is every dim
    of what the break's own instructions made when their output shape depends on tensor data
    (`data_dependent`: nonzero, a boolean mask). Such sizes change from call to call (each
    iteration of a loop, each batch): a first static capture would only be recaptured."""
    here = AUTO_DYNAMIC.get(code, {})
    for resume in resumes:
        state: dict = {}
        items = [(i, LocalSource(f"{STACK_ARG_PREFIX}{i}")) for i, null in enumerate(resume.nulls) if not null]
        for i, source in items:
            if i >= resume.fresh_from:
                if data_dependent:
                    state.setdefault(DATA_DEPENDENT, set()).add(source)
            elif i < len(frame.stack):
                _note_symbolic_dims(state, source, frame.stack[i], here)
        for name in resume.live:
            _note_symbolic_dims(state, LocalSource(name), frame.locals.get(name), here)
        if state:
            into = AUTO_DYNAMIC.setdefault(resume.code, {})
            for key, dims in state.items():
                into.setdefault(key, set()).update(dims)


def _note_symbolic_dims(state: dict, source, value, here: dict) -> None:
    """`value`'s symbolic dims, as dims of `source` in the resume function's `state`; an argument
    the trace never read (a LazyValue) keeps the dims it had here (`here`: this code's state)."""
    if isinstance(value, LazyValue) and isinstance(value.value, torch.Tensor) and value.source is not None:
        if value.source in here.get(DATA_DEPENDENT, ()):
            state.setdefault(DATA_DEPENDENT, set()).add(source)
        elif here.get(value.source):
            state.setdefault(source, set()).update(here[value.source])
        return
    example = value.example if isinstance(value, TensorValue) else None
    if isinstance(example, torch.Tensor):
        dims = {d for d, size in enumerate(example.shape) if isinstance(size, torch.SymInt)}
        if dims:
            state.setdefault(source, set()).update(dims)


def _leave_autocast_blocks_entered_here(frame, graph) -> None:
    """The graph before a break inside autocast blocks this trace entered leaves them again at its
    end (innermost first), and the break's code enters them for real (codegen, resume.py): so
    the state at the break does not depend on a backend running the graph's enter node at run
    time (a compiling backend bakes the casts in and drops it)."""
    entered = [block_exit(v) for v in frame.stack if isinstance(block_exit(v), AutocastValue) and v.source is None
               and block_exit(v).previous is not None]
    for block in reversed(entered):
        graph.set_autocast(block.device, *block.previous, entering=False)


def _check_ops_in_try(tracer) -> None:
    """A run-time error of a graph op inside a try block reruns the frame eagerly (runtime.FrameRun),
    so the except/finally sees it; undoing the graph's writes first must be possible, so the graph
    must not write into its inputs. When the try block is a called function's, the break is at
    the root frame's call of it: that call runs eagerly, the hook captures the callee's frame (and
    those it calls) on its own, and the root frame resumes after it."""
    if tracer.op_in_try is not None and tracer.graph.writes_into_inputs():
        file, line, _ = tracer.op_in_try
        tracer.failed_at = tracer.op_in_try_call
        raise Unsupported(breaks.TRY_BLOCK, f"a tensor op inside a try block ({os.path.basename(file)}:{line}) "
                                            f"in a graph that writes into its inputs")


class BackendError(RuntimeError):
    """The backend failed to compile a graph: the frame runs eagerly (fullgraph=True raises this)."""

    def __init__(self, backend: str, error: BaseException):
        super().__init__(f"backend {backend!r} failed to compile a graph: {type(error).__name__}: {error}")
        self.backend, self.error = backend, error


def _guard_distinct_inputs(tracer) -> None:
    # a tensor over a numpy array is made afresh on each reload: the array is what must be distinct;
    # a float input is immutable, so which float object it is does not matter (a learning rate and
    # the `initial_lr` it started from are often the same one). Only where a write lands in an input
    # (or may: written_inputs cannot tell): in-place ops on the graph's own intermediates (a
    # ResNet's `relu(inplace=True)`) make no input's value depend on another's identity.
    sources = tuple(src.owner if isinstance(src, FromNumpySource) else src
                    for (_, real, src) in tracer.graph.inputs if src is not None and isinstance(real, torch.Tensor))
    if len(sources) > 1 and tracer.graph.writes_into_inputs():
        tracer.add_guard(DistinctMatch(sources))


def _backend_for_this_frame(options):
    """The user's backend, or inside a DistributedDataParallel forward that backend around each
    gradient bucket's piece of the graph (backends/ddp_split.py)."""
    ddp_module = active_ddp_module() if config.optimize_ddp else None
    return options.backend if ddp_module is None else ddp_split(options.backend, ddp_module)


_NOT_YET_COMPILED = object()     # stands for the compiled graph in a trial run of make_break_code

# One op of these is one kernel whatever a backend does (a pointwise op, a comparison, a cast, a
# copy, a matmul, a factory, a full reduction), and these others are free (views, detach): a graph
# of one such op has nothing to fuse.
_ONE_KERNEL_FUNCTIONS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
                         operator.neg, operator.matmul, operator.eq, operator.ne, operator.lt, operator.le,
                         operator.gt, operator.ge, operator.and_, operator.or_, operator.invert,
                         torch.add, torch.sub, torch.mul, torch.div, torch.matmul, torch._C._nn.linear,
                         torch.arange, torch.zeros, torch.ones, torch.full, torch.empty, torch.cat,
                         operator.setitem, torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.greater,
                         torch.less, torch.any, torch.all, torch.sum, torch.amax, torch.amin, torch.prod,
                         torch.count_nonzero}
# ... and an elementwise function of one tensor (an activation, a math function): one kernel too
_POINTWISE = ("relu", "sigmoid", "tanh", "exp", "log", "sin", "cos", "abs", "neg", "sqrt", "rsqrt", "square",
              "reciprocal", "gelu", "silu", "mish", "elu", "leaky_relu", "softplus", "hardtanh", "relu6")
_ONE_KERNEL_FUNCTIONS |= {f for name in _POINTWISE for module in (torch, torch.nn.functional)
                          if callable(f := getattr(module, name, None))}
_ONE_KERNEL_METHODS = {"add", "sub", "mul", "div", "float", "half", "bfloat16", "double", "bool", "int", "long",
                       "to", "type", "type_as", "contiguous", "clone", "matmul", "eq", "ne", "lt", "le", "gt", "ge",
                       "any", "all", "sum", "amax", "amin", "prod", "count_nonzero", *_POINTWISE}
# A loop stretch of a few such ops each of whose results is used after the graph (nothing kept
# from memory by fusing: a comparison and the reduction the break reads, `mask = ids == k` then
# `if mask.any():`) runs as is too.
_MAX_KERNELS_AS_IS = 3
_FREE_FUNCTIONS = {operator.getitem, torch.split, torch.functional.split, torch.chunk, torch.unbind, torch.narrow,
                   torch.select, torch.permute, torch.flatten, torch.squeeze, torch.unsqueeze, torch.transpose,
                   torch.t, torch.movedim, torch.ops.aten.sym_size.int}      # (a symbolic size read: no kernel)
_FREE_METHODS = {"detach", "view", "reshape", "view_as", "unsqueeze", "squeeze", "transpose", "t", "split", "chunk",
                 "unbind", "narrow", "select", "expand", "expand_as", "permute", "flatten", "unflatten", "movedim",
                 "size", "dim"}


def _runs_as_is(code, nodes) -> bool:
    """Would a graph of these nodes in `code` run as is (`_graph_callable`)? A loop stretch of one
    op, or of a few whose results are all used after the graph; in any resume function a graph of
    views only; in any frame a graph whose only work is checks on tensor values (an `assert`, a
    torch._check_tensor_all after a break): nothing for a backend to do. (A function of the
    user's that only takes views stays a graph.)"""
    if not config.loop_single_ops_as_is:
        return False
    kernels = _kernels(nodes)
    if is_driven(code) and (kernels <= 1 or kernels <= _MAX_KERNELS_AS_IS and _every_result_leaves(nodes)):
        return True
    return kernels == 0 and (is_resume(code) or any(n.op == "call_function" and n.target in GRAPH_CHECKS
                                                    for n in nodes))


def _every_result_leaves(nodes) -> bool:
    """Is every op's result an output of the graph, itself or through views (no intermediate a
    backend could keep out of memory)?"""
    nodes = list(nodes)
    output = next((n for n in nodes if n.op == "output"), None)
    if output is None:                     # a stretch cut short (ops before a loop's head): not known
        return False
    leaving = set(output.all_input_nodes)

    def leaves(node) -> bool:
        return node in leaving or bool(node.users) and all(_is_free(u) and leaves(u) for u in node.users)
    return all(leaves(n) for n in nodes if n.op in ("call_function", "call_method") and not _is_free(n))


def _is_free(node) -> bool:
    return node.op == "call_function" and (node.target in _FREE_FUNCTIONS or node.target in GRAPH_CHECKS) or \
        node.op == "call_method" and node.target in _FREE_METHODS


def _kernels(nodes) -> float:
    """How many kernels the nodes make, counting the ops known to be one kernel anyway; views,
    detach and checks on tensor values count none, and any other op makes it inf."""
    kernels = 0
    for node in nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if _is_free(node):
            continue
        if node.op == "call_function" and node.target in _ONE_KERNEL_FUNCTIONS or \
                node.op == "call_method" and node.target in _ONE_KERNEL_METHODS:
            kernels += 1
            continue
        return math.inf
    return kernels


def _graph_callable(gm, graph, options, code, record: FrameRecord):
    """What the replacement code calls for the graph: the backend's compiled graph, or, for a
    stretch of a loop with a break inside (a driven resume function) that has nothing to fuse (one
    op, or a few whose results all outlive the graph), the graph's own code
    (`config.loop_single_ops_as_is`; TorchDynamo runs such a loop eagerly: the backend sees only
    what it can improve, and compiles nothing in vain)."""
    record.op_count = graph.op_count()
    if _runs_as_is(code, gm.graph.nodes):
        record.ops_as_is = graph.op_count()
        return _evalframe.DisabledCall(gm.forward)
    compiled, shared = _compile(gm, graph, options, code)
    if shared:
        record.graphs_shared += 1
    else:
        record.graphs.append(gm)
    return compiled


# (backend, where a resume function enters the user's code, the graph's structure, what its inputs
# are, global state) -> (backend, the resume function that compiled it, what the backend made of it)
COMPILED: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_COMPILED_KEPT = 256


def _input_key(node, real) -> tuple:
    if isinstance(real, torch.Tensor):
        # the placeholder's fake value says which dims are symbolic
        return (type(real), real.dtype, real.device, tuple(real.shape), real.stride(), real.storage_offset(),
                real.requires_grad, real.is_leaf, str(node.meta.get("val", "")))
    return (type(real), str(node.meta.get("val", "")))


def _compiled_key(gm, graph, backend, code) -> Optional[tuple]:
    """What decides the backend's result for the graph of resume function `code`, for the same
    graph of another resume function entering the user's code at the same place (they differ only
    in which locals are bound: a loop body's stretch reached from before the loop, where a local
    is not yet assigned, and from the previous iteration). None for other code, and when the
    graph's code does not say all (constants or subgraphs held as attributes of the module)."""
    entry = entry_of(code) if code is not None else None
    if entry is None or any(n.op in ("get_attr", "call_module") for n in gm.graph.nodes):
        return None
    try:
        key = (id(backend), entry, graph_structure(gm), tuple(_input_key(node, real) for (node, real, _) in graph.inputs),
               repr(autocast_snapshot()), torch.is_grad_enabled(), torch.get_default_dtype())
        hash(key)
        return key
    except Exception:                  # noqa: BLE001 -- an input whose description fails: compile anew
        return None


def _compile(gm, graph, options, code=None):
    """(what the replacement code calls, whether it is the backend's result for an equal graph
    compiled before: `COMPILED`)."""
    example_inputs = [real for (_, real, _) in graph.inputs]
    backend = _backend_for_this_frame(options)
    switches = [n.target for n in gm.graph.nodes if n.target in (enter_autocast, exit_autocast)]
    key = _compiled_key(gm, graph, backend, code) if backend is options.backend else None
    # (the same code capturing an equal graph again is a recapture: compiled again, as reported)
    if key is not None and key in COMPILED and COMPILED[key][1]() is not code:
        COMPILED.move_to_end(key)
        return _wrap_compiled(COMPILED[key][2], gm, graph, switches), True
    # a backend that retraces the graph (inductor) runs its autocast switches for real
    before = autocast_snapshot() if switches else None
    with warnings.catch_warnings():      # the backend's own warnings reach the user (tracing's do not)
        warnings.simplefilter("default")
        try:
            # torch.func's autograd transforms refuse saved-tensor hooks: a backend retracing them
            # (inductor) must not run under tracing's own
            transforms = any(n.target is func_transform for n in gm.graph.nodes)
            with tracing_saved_tensor_hooks_lifted() if transforms else contextlib.nullcontext():
                fn = backend(gm, example_inputs)
        except Exception as e:
            raise BackendError(options.backend_name, e) from e
        finally:
            if before is not None:
                restore_autocast(before)
    if not callable(fn):
        raise BackendError(options.backend_name, TypeError(f"it returned {type(fn).__name__}, not a callable"))
    if key is not None:
        COMPILED[key] = (backend, weakref.ref(code), fn)
        while len(COMPILED) > _COMPILED_KEPT:
            COMPILED.popitem(last=False)
    return _wrap_compiled(fn, gm, graph, switches), False


def _wrap_compiled(fn, gm, graph, switches: list):
    """The backend's callable with what the graph's own switches (its autocast enters and exits,
    `switches`, and grad-mode sets) need around it."""
    if any(n.target is torch._C._set_grad_enabled for n in gm.graph.nodes):
        fn = restoring_grad_mode(fn)
    if switches:
        fn = autocast_as_traced(fn, dict(graph.autocast), graph.autocast_cache,
                                 switches.count(enter_autocast) - switches.count(exit_autocast))
    return _evalframe.DisabledCall(fn)


def _graph_break_error(e: Unsupported) -> GraphBreakError:
    location, source_line = "", ""
    if e.user_stack:
        import linecache
        filename, line, _ = e.user_stack[-1]
        location, source_line = f"{filename}:{line}", linecache.getline(filename, line)
    return GraphBreakError(e.kind, e.detail, location, source_line, list(e.user_stack))
