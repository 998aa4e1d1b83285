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

import math
from typing import Any, Optional

import torch


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
    return te.__qualname__ == ta.__qualname__ and te.__module__ == ta.__module__ == "__fuzz__"


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
        if list(actual) != list(expected):
            fail(f"keys {list(actual)} != {list(expected)}")
        for k in expected:
            same(expected[k], actual[k], f"{path}[{k!r}]")
        return
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(actual):
            return
        if not (actual == expected or math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9)):
            fail(f"{actual!r} != {expected!r}")
        return
    if isinstance(expected, (int, str, bool, type(None), torch.dtype, torch.device, torch.Size, complex, bytes)):
        if actual != expected:
            fail(f"{actual!r} != {expected!r}")
        return
    if hasattr(expected, "__dict__") and not callable(expected):
        same(vars(expected), vars(actual), f"{path}.__dict__")
        return
    if callable(expected):            # functions, classes: same name is all one can ask across namespaces
        if getattr(actual, "__qualname__", None) != getattr(expected, "__qualname__", None):
            fail(f"{actual!r} != {expected!r}")
        return
    if actual != expected:
        fail(f"{actual!r} != {expected!r}")


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
    elif isinstance(x, (tuple, list)):
        for e in x:
            tensor_leaves(e, out, seen)
    elif isinstance(x, dict):
        for e in x.values():
            tensor_leaves(e, out, seen)
    elif hasattr(x, "__dict__") and not callable(x) and not isinstance(x, type):
        tensor_leaves(vars(x), out, seen)
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
