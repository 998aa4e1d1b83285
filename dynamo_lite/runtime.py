"""What generated code and compiled graphs call at run time.

Everything here runs in the user's program, after capture: the wrappers around a compiled
graph (grad mode and autocast restored when it raises, `FrameRun`), the graph nodes that
switch autocast or check an `assert`, the `__exit__`s of `with` blocks a graph break
interrupted, and the helpers that rebuild Python objects made while tracing. Backends may import
this module; it imports nothing of the engine but the C hook and compat.

**Running a frame eagerly when its graph fails (`FrameRun`).** A captured frame's replacement
code calls the graph, rebuilds the Python values it returns (or leaves on the stack at a break),
then replays the recorded side effects (list/dict contents, attribute, global and cell writes).
If the graph or a rebuild raises — a shape error the example values did not show, overlapping
memory in an in-place op, a bug of ours — nothing the user can observe has happened yet
(everything before only loads values and computes) except what the graph wrote into its inputs
and the random numbers it drew. Those inputs are copied and the generators' states saved before
the call (only for graphs that do either), put back after a failure, and running the frame's
code eagerly from its start then gives exactly eager's result, or eager's exception and
traceback: the user's except/finally sees it, and an error of ours never reaches the user.
Where writes cannot be undone (unknown targets, an input that requires grad), the graph's error
propagates as it is. The eager run has the frame hook off (DisabledCall), so it cannot come back
to the same graph.

The copies are taken until the graph has once run to the end: a graph that failed for a reason
of ours (a lowering, a kernel that does not compile) fails on its first call; after that, under
the same guards, what can still fail fails in eager too (out of memory, an index out of range),
and the error propagates as TorchDynamo's does, instead of every optimizer step copying p, m and v.
"""
from __future__ import annotations

import builtins
import sys
import types
from collections import OrderedDict
from typing import Optional

import torch
import torch.fx

from . import _evalframe
from .compat import ending_code

DisabledCall = _evalframe.DisabledCall
_VARARGS, _VARKEYWORDS = 0x04, 0x08


# ============================================================================================
# loops with a graph break inside
# ============================================================================================
class Continue(tuple):
    """(resume function, its arguments...): what a driven resume function's replacement code
    returns at a graph break instead of calling the next resume function (resume.py)."""
    __slots__ = ()


def drive(fn, *args):
    """Run the resume functions of a loop with a break inside, one after another, until one
    returns the frame's result: the loop runs as Python here, each stretch between breaks from
    its cached graphs, and the Python stack stays one frame deep whatever the iteration count."""
    result = fn(*args)
    while type(result) is Continue:
        result = result[0](*result[1:])
    return result


# ============================================================================================
# calling a compiled graph
# ============================================================================================


class FrameRun:
    """What the replacement code of one frame needs when its graph, or the rebuilding of its
    Python values after the graph, raises: the frame's code and globals, to run it eagerly; which
    graph inputs the graph writes into (`written`: positions, or None when unknown), to undo those
    writes first; whether the graph draws random numbers, to put the generators back;
    `rerun_always`: a failure after the graph has once run to the end is rerun too (a check
    made while Python side effects were pending, which must happen before its exception).

    The replacement code calls the graph inside an exception-table range whose handler calls
    `rerun` (no cost while nothing raises). Before the call it takes a `snapshot` only when the
    graph writes into its inputs or draws random numbers. `on_internal_error(code, exc)` is told
    when the eager run succeeds where the graph failed: that failure was ours, not the user's."""

    def __init__(self, code: types.CodeType, globals_: dict, written: Optional[list], random: bool,
                 on_internal_error=None, rerun_always: bool = False):
        self.code = code
        self.rerun_always = rerun_always
        self.globals = globals_
        self.written = written
        self.random = random
        self.on_internal_error = on_internal_error
        self.snapshots = 0              # taken so far; one more than the graph's failures: it has run once
        self.failures = 0

    @property
    def needs_snapshot(self) -> bool:
        return self.written != [] or self.random

    def snapshot(self, *inputs):
        """(copies of the written inputs, their versions, random generator states); _PROVEN once the
        graph has run to the end once (nothing is copied: a failure propagates) unless `rerun_always`."""
        if self.snapshots > self.failures and not self.rerun_always:
            return _PROVEN
        self.snapshots += 1
        rng = _rng_states() if self.random else None
        if self.written == []:
            return None, None, rng
        versions = [(t, t._version) for t in inputs if isinstance(t, torch.Tensor)]
        if self.written is None:
            return None, versions, rng
        written = [inputs[i] for i in self.written]
        if any(not isinstance(t, torch.Tensor) or t.requires_grad for t in written):
            return None, versions, rng
        return [(t, t.clone()) for t in written], versions, rng

    def rerun(self, exc: BaseException, snapshot, closure, frame_args: tuple):
        """The graph (or a rebuild after it) raised `exc`: undo what the graph wrote, run the frame's
        code eagerly and return its result; re-raise `exc` when the writes cannot be undone."""
        if not isinstance(exc, Exception) or _stops_recomputation(exc) or snapshot is _PROVEN:   # never retried
            raise exc
        self.failures += 1
        saved, versions, rng = snapshot if snapshot is not None else (None, None, None)
        if versions is not None and any(t._version != v for t, v in versions):
            if saved is None:
                raise exc
            with torch.no_grad():
                for tensor, copy in saved:
                    tensor.copy_(copy)
        if rng is not None:
            _restore_rng_states(rng)
        fn = types.FunctionType(self.code, self.globals, self.code.co_name, None, closure)
        args, kwargs = call_arguments(self.code, frame_args)
        result = DisabledCall(fn)(*args, **kwargs)
        if self.on_internal_error is not None:     # eager succeeded: the failure was the graph's, not the program's
            self.on_internal_error(self.code, exc)
        return result


_PROVEN = ("proven",)         # FrameRun.snapshot's answer once its graph has run to the end


def _stops_recomputation(exc: BaseException) -> bool:
    """torch.utils.checkpoint (non-reentrant) ends a recomputation early by raising
    _StopRecomputationError from its saved-tensor hook once it has every tensor backward needs:
    control flow of the program, raised at the same op in eager. Rerunning the frame would
    recompute into a checkpoint that has already stopped."""
    checkpoint = sys.modules.get("torch.utils.checkpoint")
    stop = getattr(checkpoint, "_StopRecomputationError", None)
    return stop is not None and isinstance(exc, stop)


def _rng_states():
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.random.get_rng_state(), cuda


def _restore_rng_states(states) -> None:
    cpu, cuda = states
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


# Graph ops that draw from a random number generator (functional and in-place forms).
RANDOM_OPS = frozenset({
    "dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
    "native_dropout", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "normal_", "uniform_", "bernoulli", "bernoulli_", "multinomial", "exponential_", "geometric_", "cauchy_",
    "log_normal_", "random_", "poisson", "rrelu", "rrelu_", "rrelu_with_noise", "gumbel_softmax"})


def draws_random_numbers(graph: torch.fx.Graph) -> bool:
    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            if name in RANDOM_OPS:
                return True
    return False


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


def run_in_new_frame(code: types.CodeType, func, frame_args: tuple, frame_code: types.CodeType) -> types.CodeType:
    """The C hook's way out when replacement `code` does not fit the frame's data-stack chunk (its
    graph has hundreds of parameters, each a local; or the call stack is deep): run `code` as a
    function of its own, with the frame's function's globals and closure (the replacement has the
    original's argument layout and free variables), and return code of `frame_code`'s layout whose
    one instruction returns the value or raises the exception, for the frame itself to run."""
    _evalframe.set_code_extra(code, _evalframe.SKIP)       # the replacement itself is never captured
    try:
        fn = types.FunctionType(code, func.__globals__, code.co_name, None, func.__closure__)
        args, kwargs = call_arguments(code, frame_args)
        value, raising = fn(*args, **kwargs), False
    except BaseException as exc:
        value, raising = exc, True
    return ending_code(frame_code, value, raising)


_evalframe.set_frame_runner(run_in_new_frame)


def restoring_grad_mode(fn):
    """A graph that switches grad mode and then raises must not leave the mode switched."""
    def run(*args):
        prior = torch.is_grad_enabled()
        try:
            return fn(*args)
        except BaseException:
            torch._C._set_grad_enabled(prior)
            raise
    return run


def autocast_as_traced(fn, final: dict, cache: bool, delta: int):
    """A graph that enters or leaves autocast blocks: after it, the autocast state is the one
    traced at its end (nesting moved by `delta`), also under a backend that compiled the enter
    and exit nodes away (their casts are baked in, the switch itself would not happen); when it
    raises, the state it started from."""
    def run(*args):
        before = autocast_snapshot()
        try:
            out = fn(*args)
        except BaseException:
            restore_autocast(before)
            raise
        restore_autocast((final, cache, before[2] + delta))
        return out
    return run


# ============================================================================================
# graph nodes with an effect: autocast switches, assertions
# ============================================================================================

AUTOCAST_DEVICES = ("cpu", "cuda")


@torch.fx.node.has_side_effect
def enter_autocast(device, enabled, dtype, cache):
    """torch.autocast(device, dtype, enabled, cache).__enter__(), as a graph node."""
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache)


@torch.fx.node.has_side_effect
def exit_autocast(device, enabled, dtype, cache):
    """Its __exit__: back to the state (enabled, dtype, cache) it entered from."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)


def autocast_devices() -> dict:
    """The real autocast state per device type: {device: (enabled, dtype)}."""
    return {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES}


def set_autocast_devices(state: dict) -> None:
    for device, (enabled, dtype) in state.items():
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)


def autocast_nesting() -> int:
    depth = torch.autocast_increment_nesting() - 1      # torch has no getter
    torch.autocast_decrement_nesting()
    return depth


def autocast_snapshot() -> tuple:
    """Everything autocast's enter and exit change: (devices, cache flag, nesting)."""
    return autocast_devices(), torch.is_autocast_cache_enabled(), autocast_nesting()


def restore_autocast(snapshot: tuple) -> None:
    devices, cache, nesting = snapshot
    set_autocast_devices(devices)
    torch.set_autocast_cache_enabled(cache)
    now = autocast_nesting()
    for _ in range(now - nesting):
        torch.autocast_decrement_nesting()
    for _ in range(nesting - now):
        torch.autocast_increment_nesting()


def power(base, exponent):
    """`base ** exponent` as a graph node when `base` is a negative constant: fx writes
    operator.pow infix, and `-1 ** x` is `-(1 ** x)` in Python (TorchDynamo's graphs have that bug)."""
    return base ** exponent


@torch.fx.node.has_side_effect
def check_assertion(cond, expected, *message):
    if bool(cond) is not expected:
        raise AssertionError(*message)


# an f-string field's conversion: none, !s, !r, !a (FORMAT_VALUE's low bits, CONVERT_VALUE's arg)
CONVERSIONS = {0: lambda v: v, 1: str, 2: repr, 3: ascii}


def format_fields(layout: tuple, *values) -> str:
    """An f-string formatted after the graph (values.strings.FormattedString): `layout` holds its
    literal parts and, for each field, (conversion, spec); `values` the fields' values in order."""
    out, fields = [], iter(values)
    for piece in layout:
        if isinstance(piece, str):
            out.append(piece)
        else:
            conversion, spec = piece
            out.append(format(CONVERSIONS[conversion](next(fields)), spec))
    return "".join(out)


# what torch._check_with says when it is given no message
CHECK_DEFAULT_MESSAGE = ("Expected cond to be True, but got False. (Could this error message be improved? If so, "
                         "please report an enhancement request to PyTorch.)")


@torch.fx.node.has_side_effect
def check_all_true(cond, error_name: str):
    """`torch._check_tensor_all(cond)` as a graph node: raises the builtin exception `error_name`
    with torch's default message unless every element of the bool tensor `cond` is true."""
    if not bool(cond.all()):
        raise getattr(builtins, error_name)(CHECK_DEFAULT_MESSAGE)


# graph nodes that raise the program's exception on a tensor's values (side-effectful, no result)
GRAPH_CHECKS = (check_assertion, check_all_true)


# The torch.func transforms a graph node may apply to a traced subgraph (func_transforms.py).
FUNC_TRANSFORMS = {"vmap": torch.func.vmap, "grad": torch.func.grad, "grad_and_value": torch.func.grad_and_value,
                   "jacrev": torch.func.jacrev, "jacfwd": torch.func.jacfwd, "hessian": torch.func.hessian}


def func_transform(name: str, body, options: dict, *args):
    """The graph node of `torch.func.<name>(fn, **options)(*args)`: the transform applied to
    `body`, fn traced into a subgraph (its lifted inputs come last in `args`)."""
    return FUNC_TRANSFORMS[name](body, **options)(*args)


def remake_func_transform(name: str, fn, options: tuple):
    """`torch.func.<name>(fn, **options)` rebuilt after a graph (it was made in captured code)."""
    return FUNC_TRANSFORMS[name](fn, **dict(options))


# ============================================================================================
# `with` blocks a graph break interrupted
# ============================================================================================

class GradModeBlock:
    """A grad-mode `with` block (no_grad, enable_grad, set_grad_enabled) that a graph break
    interrupted. At the break the block is in force already (the graph before it switched the
    mode, or an earlier frame did); the break's code pushes `GradModeBlock(...).__exit__` where
    the block's own `__exit__` was on the stack, so the resume function leaves (or unwinds) the
    block as the original code would. `enabled=None` is a contextlib.nullcontext()."""
    __slots__ = ("enabled", "previous")

    def __init__(self, enabled, previous):
        self.enabled, self.previous = enabled, previous
        if enabled is not None:       # in force already with our backends; a backend that folded the
            torch._C._set_grad_enabled(enabled)      # graph's mode switches away may not have left it set

    def __exit__(self, *exc_info):
        if self.enabled is not None:
            torch._C._set_grad_enabled(self.previous)
        return False


def empty_cell(cell) -> None:
    """Leave a closure cell unbound (what `del v` did to it in the trace), whether or not it is."""
    try:
        del cell.cell_contents
    except ValueError:
        pass


def grad_mode_exit(enabled, previous):
    return GradModeBlock(enabled, previous).__exit__


class AutocastBlock:
    """Likewise for a `torch.autocast` block: `state` is what it switches to (device, enabled,
    dtype, cache), `previous` what its exit restores (enabled, dtype, cache). Entering changes
    autocast's nesting count, so a block is entered exactly once: the graph before the break
    leaves the blocks its trace entered (convert_frame), and the break's code enters them here;
    a block entered by an earlier frame is passed on as it is."""
    __slots__ = ("device", "enabled", "dtype", "cache", "previous")

    def __init__(self, state: tuple, previous: tuple):
        self.device, self.enabled, self.dtype, self.cache = state
        self.previous = previous
        enter_autocast(*state)

    def __exit__(self, *exc_info):
        exit_autocast(self.device, *self.previous)
        return False


def enter_autocast_block(state, previous):
    return AutocastBlock(state, previous).__exit__



# ============================================================================================
# rebuilding values made while tracing
# ============================================================================================

def sequential_of(keys: tuple, modules: tuple) -> torch.nn.Sequential:
    """A slice of an nn.Sequential made while tracing, as eager makes it: the modules under their keys."""
    return torch.nn.Sequential(OrderedDict(zip(keys, modules)))


def rebuild_object(cls, attrs, items=None):
    """An object created while tracing, made for real without running its __init__ again: its
    dict contents first (dict / OrderedDict subclasses, through the base's own __setitem__, so
    the order is kept), then its state as copy and pickle restore it: `attrs` is what its
    instance dict and slots held, so slots are set through their member descriptors and the
    rest goes straight into `__dict__` (no custom __setattr__, property setter or descriptor's
    __set__ runs again: they ran while tracing, and what they stored is in `attrs`)."""
    if items is None:
        # a C class's own __new__ (types.SimpleNamespace refuses object.__new__); never a Python one
        obj = object.__new__(cls) if not isinstance(cls.__new__, types.BuiltinMethodType) \
            or cls.__new__ is object.__new__ else cls.__new__(cls)
    else:
        base = OrderedDict if issubclass(cls, OrderedDict) else dict
        obj = base.__new__(cls)
        for key, value in items.items():
            base.__setitem__(obj, key, value)
    try:                                    # never through a class's own __getattribute__
        instance_dict = object.__getattribute__(obj, "__dict__")
    except AttributeError:                  # slots only
        instance_dict = None
    for name, value in attrs.items():
        member = slot_member(cls, name)
        if member is not None:
            member.__set__(obj, value)
        else:
            instance_dict[name] = value
    return obj


def slot_member(cls, name: str):
    """The __slots__ member descriptor for `name` on cls, or None."""
    for klass in cls.__mro__:
        attr = klass.__dict__.get(name)
        if isinstance(attr, types.MemberDescriptorType):
            return attr
    return None


def rebuild_exception(cls, args, attrs=None):
    """An exception made while tracing: `cls(*args)` for a plain class; for one with its own
    __init__ (which ran while tracing), its builtin __new__ with the final args, then its state."""
    if attrs is None:
        return cls(*args)
    exc = cls.__new__(cls, *args)
    exc.__dict__.update(attrs)
    return exc


def replace_contents(target, new):
    """A dict, set or deque that exists outside the frame gets the contents the trace left it with."""
    target.clear()
    if hasattr(target, "update"):
        target.update(new)
    else:
        target.extend(new)


def dict_view(mapping, kind: str):
    """`mapping.keys()` / `.values()` / `.items()`: a view made while tracing, live on the mapping."""
    return getattr(mapping, kind)()


def dereference(ref):
    return ref()


def fresh_array_copy(array):
    """A numpy array made while tracing, rebuilt for one call (no call sees another's writes)."""
    return array.copy()


class _NothingAhead:
    """What `iterator_ahead` gives where the iterator has no item: every guard on it fails."""
    __slots__ = ()

    def __repr__(self):
        return "<no item>"


NOTHING_AHEAD = _NothingAhead()


def iterator_ahead(it, j: int):
    """The item an iterator yields after the next `j` (without moving it), or NOTHING_AHEAD: an
    iterator of a list, tuple or range, a `reversed` over a list, tuple or module list, or an
    enumerate / zip over such iterators (whatever `reads_ahead` accepts). (A range iterator
    reduces to its position on 3.11 and to the range still ahead, position None, from 3.12 on; an
    exhausted one to no position at all.)"""
    cls = type(it)
    if cls in REVERSED_ITERATORS:      # (reversed, (seq,), index of the next item; -1 when run out)
        _, (seq,), index = it.__reduce__()
        return seq[index - j] if 0 <= index - j < len(seq) else NOTHING_AHEAD
    if cls is enumerate:
        inner, count = it.__reduce__()[1]
        item = iterator_ahead(inner, j)
        return item if item is NOTHING_AHEAD else (count + j, item)
    if cls is zip:
        items = tuple(iterator_ahead(part, j) for part in it.__reduce__()[1])
        return NOTHING_AHEAD if not items or any(x is NOTHING_AHEAD for x in items) else items
    state = it.__reduce__()
    seq = state[1][0]
    pos = state[2] if len(state) > 2 and state[2] is not None else 0
    return seq[pos + j] if 0 <= pos + j < len(seq) else NOTHING_AHEAD


def items_left(it) -> int:
    """How many items an iterator `iterator_ahead` reads has left."""
    cls = type(it)
    if cls is enumerate:
        return items_left(it.__reduce__()[1][0])
    if cls is zip:
        return min((items_left(part) for part in it.__reduce__()[1]), default=0)
    return it.__length_hint__()


SEQUENCE_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))
REVERSED_ITERATORS = (reversed, type(reversed([])))
# What a `reversed` read ahead may run over: sequences whose item access is pure.
_REVERSIBLE = (list, tuple, range, torch.nn.ModuleList, torch.nn.Sequential)


def generator_again(code, globals_, closure: tuple, args: tuple):
    """A generator made in captured code and not started when a graph break came, made again:
    its function called on the same arguments, over the same cells."""
    fn = types.FunctionType(code, globals_, code.co_name, None, closure or None)
    fn.__qualname__ = getattr(code, "co_qualname", code.co_name)
    return fn(*args)


def groupby_at(iterator, keyfunc, target, key, value, has_value: bool):
    """`itertools.groupby(iterator, keyfunc)` in the state a groupby made in captured code was left
    in at a graph break, part-way: `target` the current group's key, `key`/`value` the item read
    ahead (`has_value`), or, when the group took it, none: the next group then starts past the
    items of key `target`, as CPython's would. (itertools' own state protocol; deprecated from
    3.12, removed in 3.14, where the hook is not installed.)"""
    import itertools
    import warnings
    it = itertools.groupby(iterator, keyfunc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        it.__setstate__((key, value, target) if has_value else (target, None, target))
    return it


def reversed_at(seq, index: int):
    """`reversed(seq)` standing at `index` (its next item is seq[index]; -1: run out): a reversed
    iterator made in captured code, handed on at a graph break."""
    it = reversed(seq)
    it.__setstate__(index)
    return it


def reads_ahead(it) -> bool:
    """Can `iterator_ahead` read this iterator's items: a list's, tuple's or range's iterator, an
    enumerate or a (non-strict) zip of such ones."""
    cls = type(it)
    if cls in SEQUENCE_ITERATORS:
        return True
    if cls in REVERSED_ITERATORS:
        return type(it.__reduce__()[1][0]) in _REVERSIBLE
    if cls is enumerate:
        return reads_ahead(it.__reduce__()[1][0])
    if cls is zip:
        state = it.__reduce__()
        return len(state) == 2 and all(reads_ahead(part) for part in state[1])
    return False


def sequences_under(it) -> list:
    """The lists, tuples and ranges an iterator `reads_ahead` accepts runs over."""
    cls = type(it)
    if cls is enumerate:
        return sequences_under(it.__reduce__()[1][0])
    if cls is zip:
        return [seq for part in it.__reduce__()[1] for seq in sequences_under(part)]
    return [it.__reduce__()[1][0]]


def advance_iterator(it, steps: int, exhaust: bool) -> None:
    """Move an iterator the frame was given on by the `steps` items the captured code took, and to
    its end (for good, as a loop that ran out leaves it) when the captured code ran out of items."""
    for _ in range(steps):
        next(it)
    if exhaust:
        for _ in it:
            pass
