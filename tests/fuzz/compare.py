"""Recursive comparison of what an eager run and a captured run produced.

`assert_same` raises `Mismatch` naming the first difference by path (`result[1]['a']`). Tensors
must agree in type, shape, dtype, device, requires_grad and values (`torch.testing.assert_close`,
NaNs equal). The two runs execute separate copies of a program (two module namespaces), so
instances of the program's own classes are compared by class name and state, not class identity.

`alias_signature` describes which output tensors share storage with which inputs (or are the
very same object): eager and captured runs must agree, since a caller who writes into an output
that is a view of an input expects the input to change.
"""
from __future__ import annotations

import collections
import functools
import math
import types
from typing import Any, Optional

import torch

PROGRAM_MODULE = "__fuzz__"       # oracle.load runs each program as a module of this name
_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))
_UNSET = "<unset slot>"


class Mismatch(AssertionError):
    """A difference between the eager and the captured run; `kind` is its category suffix."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def same_class(e: Any, a: Any) -> bool:
    """Same type, or the same class of the program defined once in each namespace."""
    if type(e) is type(a):
        return True
    te, ta = type(e), type(a)       # the program's own classes: one per namespace
    return te.__qualname__ == ta.__qualname__ and te.__module__ == ta.__module__ == PROGRAM_MODULE


def is_program_object(x: Any) -> bool:
    """An instance of a class the program defines (not the class itself)."""
    return type(x).__module__ == PROGRAM_MODULE and not isinstance(x, type)


def instance_state(x: Any) -> dict:
    """An object's observable state: its instance __dict__ and its __slots__ (unset ones marked),
    read with object.__getattribute__ so that a custom __getattribute__/__getattr__ is not run."""
    state = {}
    try:
        d = object.__getattribute__(x, "__dict__")
    except (AttributeError, TypeError):
        d = None
    if isinstance(d, dict):
        state.update(d)
    for klass in type(x).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in ((slots,) if isinstance(slots, str) else slots):
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                state[f"<slot {name}>"] = object.__getattribute__(x, name)
            except AttributeError:
                state[f"<slot {name}>"] = _UNSET
    return state


def assert_same(expected: Any, actual: Any, path: str, *, kind: str = "value", rtol: Optional[float] = None,
                atol: Optional[float] = None, _seen: Optional[set] = None) -> None:
    seen = set() if _seen is None else _seen
    if expected is actual:           # one object both sides reach (a module such as torch): nothing to compare
        return
    if id(expected) in seen:         # cycles (a module's children, an object holding itself)
        return
    if not isinstance(expected, (int, float, str, bool, type(None))):
        seen.add(id(expected))

    def fail(msg: str) -> None:
        raise Mismatch(kind, f"{path}: {msg}")

    def same(e, a, p):
        assert_same(e, a, p, kind=kind, rtol=rtol, atol=atol, _seen=seen)

    if not same_class(expected, actual):
        fail(f"type {type(actual).__name__} != {type(expected).__name__} (got {_short(actual)}, expected {_short(expected)})")
    if isinstance(expected, torch.Tensor):
        for attr in ("shape", "dtype", "device", "requires_grad"):
            if getattr(actual, attr) != getattr(expected, attr):
                fail(f"{attr} {getattr(actual, attr)} != {getattr(expected, attr)}")
        try:
            torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            fail(" ".join(str(e).split())[:400])
        return
    if isinstance(expected, torch.nn.Module):
        if actual.training != expected.training:
            fail(f"training {actual.training} != {expected.training}")
        same(dict(expected.state_dict(keep_vars=True)), dict(actual.state_dict(keep_vars=True)), f"{path}.state_dict()")
        for name, sub in expected.named_modules():
            a_sub = actual.get_submodule(name)
            same(_plain_attrs(sub), _plain_attrs(a_sub), f"{path}{'.' + name if name else ''}.__dict__")
        return
    if isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            fail(f"length {len(actual)} != {len(expected)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            same(e, a, f"{path}[{i}]")
        return
    if isinstance(expected, dict):
        if list(map(_key, actual)) != list(map(_key, expected)):
            fail(f"keys {list(actual)} != {list(expected)}")
        for ke, ka in zip(expected, actual):
            same(dict.__getitem__(expected, ke), dict.__getitem__(actual, ka), f"{path}[{ke!r}]")
        if isinstance(expected, collections.defaultdict):
            same(expected.default_factory, actual.default_factory, f"{path}.default_factory")
        return
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(actual):
            return
        # (a float read out of a tensor, `float(y.mean())`, carries the backend's rounding: a
        # compiling backend's tolerance, as its tensors get)
        rel, tiny = max(rtol or 0.0, 1e-6), max(atol or 0.0, 1e-9)
        if not (actual == expected or math.isclose(actual, expected, rel_tol=rel, abs_tol=tiny)):
            fail(f"{actual!r} != {expected!r}")
        return
    if isinstance(expected, (int, str, bool, type(None), torch.dtype, torch.device, torch.Size, complex, bytes)):
        if actual != expected:
            fail(f"{actual!r} != {expected!r}")
        return
    if isinstance(expected, BaseException):
        if str(actual) != str(expected):
            fail(f"exception message {str(actual)!r} != {str(expected)!r}")
        same(list(expected.args), list(actual.args), f"{path}.args")
        same(instance_state(expected), instance_state(actual), f"{path}.__dict__")
        return
    if isinstance(expected, (set, frozenset)):
        if len(actual) != len(expected):
            fail(f"length {len(actual)} != {len(expected)} ({_short(actual)} vs {_short(expected)})")
        if actual != expected and sorted(map(repr, actual)) != sorted(map(repr, expected)):
            fail(f"{_short(actual)} != {_short(expected)}")
        return
    if isinstance(expected, collections.deque):
        if actual.maxlen != expected.maxlen:
            fail(f"maxlen {actual.maxlen} != {expected.maxlen}")
        same(list(expected), list(actual), f"{path}")
        return
    if isinstance(expected, _VIEWS):
        same(list(expected), list(actual), f"{path}")
        return
    if isinstance(expected, functools.partial):
        same(expected.func, actual.func, f"{path}.func")
        same(expected.args, actual.args, f"{path}.args")
        same(expected.keywords, actual.keywords, f"{path}.keywords")
        return
    if is_program_object(expected):   # compared by class name and state, never by identity or __eq__
        same(instance_state(expected), instance_state(actual), f"{path}.__dict__")
        return
    if hasattr(expected, "__dict__") and not callable(expected):
        same(vars(expected), vars(actual), f"{path}.__dict__")
        return
    if callable(expected):            # functions, classes: same name is all one can ask across namespaces
        if getattr(actual, "__qualname__", None) != getattr(expected, "__qualname__", None):
            fail(f"{actual!r} != {expected!r}")
        if isinstance(expected, types.FunctionType) and expected.__module__ == PROGRAM_MODULE:
            same(_cells(expected), _cells(actual), f"{path}.__closure__")   # e.g. a nonlocal counter
        return
    if actual != expected:
        fail(f"{actual!r} != {expected!r}")


def _key(k: Any) -> Any:
    """A dict key as comparable across the two namespaces (the program's classes, enum members
    and instances differ by identity there)."""
    if isinstance(k, type) and k.__module__ == PROGRAM_MODULE:
        return ("<class>", k.__qualname__)
    if is_program_object(k):
        return ("<object>", type(k).__qualname__, repr(k) if type(k).__repr__ is not object.__repr__ else "")
    if isinstance(k, tuple):
        return tuple(map(_key, k))
    if isinstance(k, frozenset):
        return ("<frozenset>", tuple(sorted(map(repr, k))))
    return k


def _cells(fn: types.FunctionType) -> list:
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(_UNSET)
    return out


def _plain_attrs(module: torch.nn.Module) -> dict:
    """A module's own Python attributes (not parameters, buffers, submodules or hooks)."""
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and k != "training"
            and isinstance(v, (int, float, bool, str, list, tuple, dict, type(None)))}


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) < 120 else r[:117] + "..."


def tensor_leaves(x: Any, out: Optional[list] = None, seen: Optional[set] = None) -> list:
    """Every tensor reachable from x (containers, modules' parameters/buffers, objects), in order."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if id(x) in seen:
        return out
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, torch.nn.Module):
        for t in list(x.parameters()) + list(x.buffers()):
            tensor_leaves(t, out, seen)
    elif isinstance(x, (tuple, list, collections.deque)):
        for e in x:
            tensor_leaves(e, out, seen)
    elif isinstance(x, dict):
        for e in dict.values(x):
            tensor_leaves(e, out, seen)
    elif isinstance(x, functools.partial):
        tensor_leaves((x.args, x.keywords), out, seen)
    elif is_program_object(x):
        tensor_leaves(instance_state(x), out, seen)
    elif hasattr(x, "__dict__") and not callable(x) and not isinstance(x, type):
        tensor_leaves(vars(x), out, seen)
    return out


def _walk_objects(x: Any, path: str, out: list, seen: set, depth: int = 0) -> None:
    """(path, object) for every mutable Python object reachable from x (lists, dicts, sets, deques,
    instances of the program's classes), depth first, each object once."""
    if depth > 12 or isinstance(x, (torch.Tensor, torch.nn.Module, type, types.ModuleType, types.FunctionType)):
        return
    mutable = isinstance(x, (list, dict, set, collections.deque)) or is_program_object(x)
    if mutable:
        if id(x) in seen:
            return
        seen.add(id(x))
        out.append((path, x))
    if isinstance(x, (tuple, list, collections.deque)):
        for i, e in enumerate(x):
            _walk_objects(e, f"{path}[{i}]", out, seen, depth + 1)
    elif isinstance(x, dict):
        for i, (k, e) in enumerate(dict.items(x)):
            _walk_objects(e, f"{path}[{_kpath(k, i)}]", out, seen, depth + 1)
    elif isinstance(x, functools.partial):
        _walk_objects((x.args, x.keywords), f"{path}.partial", out, seen, depth + 1)
    elif is_program_object(x) and not isinstance(x, BaseException):
        for k, e in instance_state(x).items():
            _walk_objects(e, f"{path}.{k}", out, seen, depth + 1)


def _kpath(k: Any, i: int) -> str:
    return repr(k) if isinstance(k, (str, int)) else f"#{i}"


def identity_signature(outputs: Any, inputs: Any, program_globals: dict) -> list:
    """For each mutable Python object the outputs reach (depth first): where else it is the very
    same object -- the earlier output path, the input path, the global path. Eager and captured
    runs must agree: an object the function stores into a container and also returns is one
    object, not two copies."""
    ins: list = []
    _walk_objects(inputs, "in", ins, set())
    gl: list = []
    _walk_objects(program_globals, "G", gl, set())
    in_paths = {id(o): p for p, o in ins}
    gl_paths = {id(o): p for p, o in gl}
    sig, first = [], {}
    for path, obj in _iter_output_objects(outputs):
        sig.append((path, first.get(id(obj)), in_paths.get(id(obj)), gl_paths.get(id(obj))))
        first.setdefault(id(obj), path)
    return sig


def _iter_output_objects(outputs: Any) -> list:
    """Like _walk_objects, but an object reached twice is listed each time it is reached
    (its contents once)."""
    out, seen = [], set()

    def walk(x, path, depth=0):
        if depth > 12 or isinstance(x, (torch.Tensor, torch.nn.Module, type, types.ModuleType, types.FunctionType)):
            return
        if isinstance(x, (list, dict, set, collections.deque)) or is_program_object(x):
            out.append((path, x))
            if id(x) in seen:
                return
            seen.add(id(x))
        if isinstance(x, (tuple, list, collections.deque)):
            for i, e in enumerate(x):
                walk(e, f"{path}[{i}]", depth + 1)
        elif isinstance(x, dict):
            for i, (k, e) in enumerate(dict.items(x)):
                walk(e, f"{path}[{_kpath(k, i)}]", depth + 1)
        elif isinstance(x, functools.partial):
            walk((x.args, x.keywords), f"{path}.partial", depth + 1)
        elif is_program_object(x) and not isinstance(x, BaseException):
            for k, e in instance_state(x).items():
                walk(e, f"{path}.{k}", depth + 1)
    walk(outputs, "out")
    return out


def _storage(t: torch.Tensor) -> Optional[int]:
    try:
        if t.untyped_storage().nbytes() == 0:
            return None
        return t.untyped_storage().data_ptr()
    except Exception:                  # noqa: BLE001 -- tensors without storage (none expected)
        return None


def alias_signature(outputs: Any, inputs: Any) -> list:
    """For each output tensor: which input tensors it is (`is`) or shares storage with, and the
    first earlier output it shares storage with."""
    ins = tensor_leaves(inputs)
    in_storage = [_storage(t) for t in ins]
    sig, seen_out = [], []
    for t in tensor_leaves(outputs):
        st = _storage(t)
        same = tuple(i for i, u in enumerate(ins) if u is t)
        shares = tuple(i for i, s in enumerate(in_storage) if st is not None and s == st)
        earlier = next((j for j, s in enumerate(seen_out) if st is not None and s == st), None)
        sig.append((same, shares, earlier))
        seen_out.append(st)
    return sig
