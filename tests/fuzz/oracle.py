"""Run one generated program eagerly and captured, and say whether they agree.

A program (see generator.py) defines `make_target()` and `make_inputs(seed, device)`. It is
executed twice, into two fresh namespaces, so the eager and the captured side each have their
own globals, classes and module state. Then each side makes the same calls:

    1. make_inputs(0)   first call: the captured side captures
    2. make_inputs(0)   the same inputs again: the captured side should reuse its cache
    3. make_inputs(1)   new values of the same shapes

A program may also define `FUZZ_CALLS` (the seeds of its calls, instead of 0, 0, 1; library.py's
programs use seeds whose inputs have other shapes) and `between_calls(i)`, run on each side before
call i (i >= 1) to mutate the program's globals (a config attribute, a class attribute, a global
dict entry): the captured side's guards must notice.

and after every call the sides must agree on the return value or exception (type and message),
what was printed, the inputs afterwards (in-place changes, appended list items, module state),
the program's globals (with the state of its own objects and the plain data of its classes),
the module under test, which outputs alias which inputs, and which returned Python objects are
the very same object as an input, a global or another output (`compare.identity_signature`). A warning
"dynamo_lite: internal error" or a record with status "error" fails the program even when the
values agree: the engine hid a bug of its own by running the frame eagerly.

`check_source(source)` returns a `Verdict`; it never raises for a failing program.
`check_function(fn, *args)` is the same comparison for a function at hand (hand-written tests):
it raises `Mismatch` on the first difference.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import io
import linecache
import math
import re
import traceback
import types
import warnings
from typing import Any, Optional

import torch

import dynamo_lite as dl
from dynamo_lite.fallback import records

from .compare import (PROGRAM_MODULE, Mismatch, alias_signature, assert_same, identity_signature,
                      is_program_object, same_class)

#: tolerances per backend: the eager backend runs the very same ops; Triton fuses and reorders
TOLERANCES = {"eager": (None, None), "triton": (1e-3, 1e-4), "inductor": (1e-3, 1e-4)}
CALL_SEEDS = (0, 0, 1)
INTERNAL_ERROR = "dynamo_lite: internal error"


@dataclasses.dataclass
class Verdict:
    """The outcome of one program. `category` is "" when the runs agree, else one of
    mismatch:<value|exception|stdout|mutation|globals|module|alias>, internal-error, harness
    (the program itself is broken), crash, hang (the last two come from worker.py)."""
    category: str = ""
    message: str = ""
    eager_error: str = ""                           # exception type of eager's first call, if any
    statuses: dict = dataclasses.field(default_factory=dict)   # FrameRecord status -> count
    graphs: int = 0                                 # graphs captured over all calls (0: all ran eagerly)
    breaks: dict = dataclasses.field(default_factory=dict)     # "DL00x kind: detail" -> count

    @property
    def ok(self) -> bool:
        return not self.category


@dataclasses.dataclass
class Outcome:
    value: Any = None
    exc: Optional[BaseException] = None
    stdout: str = ""
    warnings: list = dataclasses.field(default_factory=list)


def triton_runnable(device: Optional[str] = None) -> tuple[bool, str]:
    """Can dynamo_lite's triton backend compile and run graphs here (on `device`)? And if not, why."""
    try:
        from dynamo_lite.backends.triton import availability
        availability.require()
    except Exception as e:  # noqa: BLE001 -- not importable, no triton, no GPU and no TRITON_INTERPRET
        return False, f"{type(e).__name__}: {e}"
    if device is not None and not availability.can_run_on(torch.device(device)):
        return False, f"the triton backend cannot run on {device}"
    return True, ""


def load(source: str, filename: str) -> dict:
    """Execute program text into a fresh namespace (its source registered for tracebacks)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__fuzz__", "__file__": filename}
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)   # not this file's __future__ flags
    return namespace


def call(fn, args: tuple, kwargs: dict) -> Outcome:
    out = Outcome()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out.value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 -- compared with the other side
            out.exc = e
    out.stdout = buf.getvalue()
    out.warnings = [str(w.message) for w in caught]
    return out


_PLAIN = (int, float, bool, str, list, dict, tuple, torch.Tensor, set, frozenset, collections.deque)


def _globals(namespace: dict) -> dict:
    """The program's global data (counters, histories, configs: plain values and instances of its
    own classes; its closures, with their cells) and the plain data of its classes (class
    attributes, counters, registries; the functions they hold, by name), compared after every call."""
    out = {}
    for k, v in namespace.items():
        if k.startswith("__"):
            continue
        if isinstance(v, _PLAIN) or is_program_object(v) or \
                isinstance(v, types.FunctionType) and v.__module__ == PROGRAM_MODULE and v.__closure__:
            out[k] = v                      # (a function: by name and closure cells, e.g. a global counter closure)
        elif isinstance(v, type) and v.__module__ == PROGRAM_MODULE:
            state = {a: w for a, w in vars(v).items() if not a.startswith("__")
                     and (isinstance(w, _PLAIN) or is_program_object(w) or isinstance(w, types.FunctionType))}
            if state:
                out[f"{k}.<class attributes>"] = state
    return out


def _raise_internal_errors(label: str, got: Outcome) -> None:
    """An error of dynamo_lite's own that it hid by running the frame eagerly is a failure too."""
    internal = [w for w in got.warnings if w.startswith(INTERNAL_ERROR)]
    errors = [r for r in records.RECORDS if r.status == "error"]
    if internal or errors:
        detail = internal[0] if internal else f"{errors[0].name}: {errors[0].detail}"
        raise Mismatch("internal-error", f"{label}: {detail}")


_FLOAT_TEXT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


_GRAD_FN = re.compile(r",\s*grad_fn=<\w+>")      # (a long name wraps onto a line of its own)


def same_printed(eager: str, got: str, rtol: Optional[float], atol: Optional[float]) -> bool:
    """The same text; where the backend has a tolerance (its kernels sum in another order), a
    printed float may differ within it (`print(x.sum().item())` shows a float's last bits), and
    a printed tensor's `grad_fn=<...>` names the compiled graph's autograd function
    (`CompiledFunctionBackward`, as under torch.compile) where eager names its last op's.
    Integers, and everything around the numbers, must be the same."""
    if eager == got:
        return True
    if rtol is not None:
        eager, got = _GRAD_FN.sub(", grad_fn=<fn>", eager), _GRAD_FN.sub(", grad_fn=<fn>", got)
    if rtol is None or _FLOAT_TEXT.split(eager) != _FLOAT_TEXT.split(got):
        return False
    for a, b in zip(_FLOAT_TEXT.findall(eager), _FLOAT_TEXT.findall(got)):
        if a == b:
            continue
        if not any(c in a + b for c in ".eE") or not math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol):
            return False
    return True


_AUTOGRAD_NODE = re.compile(r"\b(Output \d+ of )\w+( is a view)")


def same_message(eager: str, got: str, rtol: Optional[float]) -> bool:
    """The same exception message; a compiling backend (one with a tolerance) runs a graph as one
    autograd function, so autograd's errors name it (`Output 0 of CompiledFunction is a view and
    is being modified inplace`) where eager names its own op's (`of Unbind`)."""
    if eager == got:
        return True
    return rtol is not None and _AUTOGRAD_NODE.sub(r"\1<fn>\2", eager) == _AUTOGRAD_NODE.sub(r"\1<fn>\2", got)


def compare_calls(label: str, eager: Outcome, got: Outcome, e_in: Any, c_in: Any, rtol, atol,
                  e_globals: Optional[dict] = None, c_globals: Optional[dict] = None) -> None:
    """Raise Mismatch for the first difference between two calls (inputs given after the call)."""
    if eager.exc is not None or got.exc is not None:
        if got.exc is None:
            raise Mismatch("exception", f"{label}: eager raised {type(eager.exc).__name__}: {eager.exc} "
                                        f"but captured returned {str(got.value)[:200]}")
        if eager.exc is None:
            raise Mismatch("exception", f"{label}: captured raised {type(got.exc).__name__}: {got.exc} "
                                        f"but eager returned\n{''.join(traceback.format_exception(got.exc))[-3000:]}")
        if not same_class(eager.exc, got.exc) or not same_message(str(eager.exc), str(got.exc), rtol):
            raise Mismatch("exception", f"{label}: captured raised {type(got.exc).__name__}: {got.exc!s:.300}; "
                                        f"eager raised {type(eager.exc).__name__}: {eager.exc!s:.300}")
    else:
        assert_same(eager.value, got.value, f"{label}: result", rtol=rtol, atol=atol)
    if not same_printed(eager.stdout, got.stdout, rtol, atol):
        raise Mismatch("stdout", f"{label}: printed {got.stdout[:300]!r}, eager printed {eager.stdout[:300]!r}")
    assert_same(e_in, c_in, f"{label}: inputs after the call", kind="mutation", rtol=rtol, atol=atol)
    if eager.exc is None:
        e_sig, c_sig = alias_signature(eager.value, e_in), alias_signature(got.value, c_in)
        if e_sig != c_sig:
            raise Mismatch("alias", f"{label}: output aliasing (same input, shares storage with inputs, "
                                    f"shares with output #) {c_sig} != eager {e_sig}")
        if e_globals is not None:
            e_ids = identity_signature(eager.value, e_in, e_globals)
            c_ids = identity_signature(got.value, c_in, c_globals)
            if e_ids != c_ids:
                diff = next((c, e) for c, e in zip(c_ids, e_ids) if c != e) if len(e_ids) == len(c_ids) else (c_ids, e_ids)
                raise Mismatch("identity", f"{label}: returned objects (path, same as earlier output, input, global) "
                                           f"{diff[0]} != eager {diff[1]}")


def check_source(source: str, filename: str = "<fuzz>", *, backend: str = "eager", device: str = "cpu",
                 calls: tuple = CALL_SEEDS) -> Verdict:
    """Run `source` eagerly and captured with `backend`; the Verdict says how they compare."""
    verdict = Verdict()
    rtol, atol = TOLERANCES.get(backend, (1e-3, 1e-4))
    try:
        eager_ns, captured_ns = load(source, filename), load(source, filename)
        eager_fn, target = eager_ns["make_target"](), captured_ns["make_target"]()
        if not callable(eager_fn):
            return Verdict("harness", f"make_target() returned {type(eager_fn).__name__}, not a callable")
        if isinstance(eager_fn, torch.nn.Module):
            eager_fn, target = eager_fn.to(device), target.to(device)
    except Exception as e:  # noqa: BLE001
        return Verdict("harness", f"the program does not load: {type(e).__name__}: {e}")
    dl.reset()
    try:
        captured = dl.capture(target, backend=backend)
    except Exception as e:  # noqa: BLE001
        return Verdict("harness", f"dl.capture failed: {type(e).__name__}: {e}")
    if calls is CALL_SEEDS and eager_ns.get("FUZZ_CALLS"):
        calls = tuple(eager_ns["FUZZ_CALLS"])
    between = (eager_ns.get("between_calls"), captured_ns.get("between_calls"))
    try:
        for i, seed in enumerate(calls):
            label = f"call {i + 1} (make_inputs({seed}))"
            if i and callable(between[0]):
                try:
                    between[0](i)
                    between[1](i)
                except Exception as e:  # noqa: BLE001 -- the program's own mutation is broken
                    return Verdict("harness", f"between_calls({i}) failed: {type(e).__name__}: {e}")
                label += f" after between_calls({i})"
            e_args, e_kwargs = eager_ns["make_inputs"](seed, device)
            c_args, c_kwargs = captured_ns["make_inputs"](seed, device)
            try:
                assert_same((e_args, e_kwargs), (c_args, c_kwargs), f"{label}: inputs")
            except Mismatch as m:           # e.g. a shrunk program that lost its random generator
                return Verdict("harness", f"make_inputs is not deterministic: {m}")
            eager = call(eager_fn, e_args, e_kwargs)
            got = call(captured, c_args, c_kwargs)
            if i == 0 and eager.exc is not None:
                verdict.eager_error = type(eager.exc).__name__
            _raise_internal_errors(label, got)
            e_globals, c_globals = _globals(eager_ns), _globals(captured_ns)
            compare_calls(label, eager, got, (e_args, e_kwargs), (c_args, c_kwargs), rtol, atol, e_globals, c_globals)
            assert_same(e_globals, c_globals, f"{label}: program globals", kind="globals", rtol=rtol, atol=atol)
            if isinstance(eager_fn, torch.nn.Module):
                assert_same(eager_fn, target, f"{label}: module under test", kind="module", rtol=rtol, atol=atol)
    except Mismatch as m:
        verdict.category = m.kind if m.kind == "internal-error" else f"mismatch:{m.kind}"
        verdict.message = str(m)
    except Exception as e:  # noqa: BLE001 -- make_inputs or a comparison itself failed
        verdict.category = "harness"
        verdict.message = "".join(traceback.format_exception(e))[-2000:]
    verdict.statuses = dict(collections.Counter(r.status for r in records.RECORDS))
    verdict.graphs = sum(len(r.graphs) for r in records.RECORDS)
    verdict.breaks = dict(collections.Counter(break_reason(r) for r in records.RECORDS
                                              if r.status in ("break", "fallback")))
    dl.reset()
    return verdict


def break_reason(record) -> str:
    """A graph break or fallback as `DL00x kind: detail`, with the generated names' numbers taken
    out (Vec12 -> Vec#) so that the same reason counts once over many programs."""
    kind = f"{record.kind.id} {record.kind.name}" if record.kind else "?"
    detail = record.detail or record.fallback_reason or ""
    detail = re.sub(r"(?<=[A-Za-z_])\d+", "#", " ".join(detail.split()))
    detail = re.sub(r"0x[0-9a-f]+", "0x#", detail)
    return f"{kind}: {detail[:120]}"


def check_function(fn, *args, calls: int = 2, backend="eager", rtol=None, atol=None, **kwargs) -> Outcome:
    """Call `fn` eagerly and captured (`calls` times each, on deep copies of the arguments) and
    raise `Mismatch` unless they agree as in check_source; returns the captured side's last Outcome."""
    dl.reset()
    captured = dl.capture(fn, backend=backend)
    got = None
    for i in range(calls):
        label = f"call {i + 1}"
        e_args, e_kwargs = copy.deepcopy((args, kwargs))
        c_args, c_kwargs = copy.deepcopy((args, kwargs))
        eager = call(fn, e_args, e_kwargs)
        got = call(captured, c_args, c_kwargs)
        _raise_internal_errors(label, got)
        compare_calls(label, eager, got, (e_args, e_kwargs), (c_args, c_kwargs), rtol, atol)
    return got
