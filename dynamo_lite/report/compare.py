"""Compare a captured run's outputs with eager's, over nested structures.

`compare(expected, actual)` walks tensors, tuples/lists (incl. namedtuples), dicts and Mappings
(incl. transformers' ModelOutput), dataclasses, instances of plain classes whose equality is
identity (transformers' ``DynamicCache`` and its layers: attribute by attribute), torch.Size and
plain Python values, and raises `Mismatch` naming the path of the first difference
(``out[1]['logits']: ...``). Tensors are compared with `torch.testing.assert_close` (NaNs equal),
plus dtype, shape and device.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch


class Mismatch(AssertionError):
    """Captured output differs from eager output."""


def compare(expected: Any, actual: Any, *, rtol: float | None = None, atol: float | None = None,
            path: str = "out") -> None:
    """Raise `Mismatch` if `actual` differs from `expected` (see module docstring)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: expected a Tensor, got {type(actual).__name__}")
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=True,
                                       check_dtype=True, check_layout=True, check_stride=False)
        except AssertionError as exc:
            raise Mismatch(f"{path}: {_first_line(exc)}") from None
        return
    if type(expected) is not type(actual) and not (_is_number(expected) and _is_number(actual)):
        raise Mismatch(f"{path}: expected {type(expected).__name__}, got {type(actual).__name__}")
    if isinstance(expected, Mapping):
        if list(expected.keys()) != list(actual.keys()):
            raise Mismatch(f"{path}: keys {list(expected.keys())} != {list(actual.keys())}")
        for key in expected:
            compare(expected[key], actual[key], rtol=rtol, atol=atol, path=f"{path}[{key!r}]")
        return
    if isinstance(expected, (tuple, list)) and not isinstance(expected, torch.Size):
        if len(expected) != len(actual):
            raise Mismatch(f"{path}: length {len(expected)} != {len(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, rtol=rtol, atol=atol, path=f"{path}[{i}]")
        return
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for f in dataclasses.fields(expected):
            compare(getattr(expected, f.name), getattr(actual, f.name), rtol=rtol, atol=atol,
                    path=f"{path}.{f.name}")
        return
    if _by_identity(expected):
        for name, value in vars(expected).items():
            if name not in vars(actual):
                raise Mismatch(f"{path}.{name}: missing")
            compare(value, vars(actual)[name], rtol=rtol, atol=atol, path=f"{path}.{name}")
        if set(vars(actual)) - set(vars(expected)):
            raise Mismatch(f"{path}: extra attributes {sorted(set(vars(actual)) - set(vars(expected)))}")
        return
    if isinstance(expected, float) and isinstance(actual, float):
        if math.isnan(expected) and math.isnan(actual):
            return
        if not math.isclose(expected, actual, rel_tol=rtol or 1.3e-6, abs_tol=atol or 1e-5):
            raise Mismatch(f"{path}: {actual!r} != {expected!r}")
        return
    if expected != actual:
        raise Mismatch(f"{path}: {actual!r} != {expected!r}")


def max_abs_diff(expected: Any, actual: Any) -> float:
    """The largest |expected - actual| over all floating tensors in matching structures (0.0 if none)."""
    worst = 0.0
    for e, a in zip(_tensors(expected), _tensors(actual)):
        if e.shape == a.shape and e.is_floating_point() and a.is_floating_point():
            diff = (e.detach().double() - a.detach().double()).abs()
            diff = diff[~torch.isnan(diff)]
            if diff.numel():
                worst = max(worst, diff.max().item())
    return worst


def _tensors(value: Any):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _tensors(getattr(value, f.name))
    elif _by_identity(value):
        for v in vars(value).values():
            yield from _tensors(v)


def _by_identity(value: Any) -> bool:
    """An instance of a plain class whose equality is identity (a KV cache object): two runs'
    results are equal when their attributes are."""
    cls = type(value)
    return (cls.__eq__ is object.__eq__ and isinstance(getattr(value, "__dict__", None), dict)
            and not isinstance(value, (type, torch.nn.Module)) and not callable(value)
            and cls.__module__ not in ("builtins", "types"))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines[:3])
