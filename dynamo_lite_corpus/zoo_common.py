"""What the zoo suites (timm, torchvision, diffusers, hf) share: importing a model library, seeding,
the parameter limit, counting parameters without allocating them, and finding the smallest input a
model accepts.

A zoo suite registers one entry per model its library lists, at import, without building anything
(`listing_import` tells the registry why a suite is empty when its library is missing). The builders
then build lazily, in the report's process:

- `check_parameters` counts the parameters of a model built on the meta device (no memory, no
  initialisation) and raises `CannotBuild` over the limit (`max_parameters`, `DL_ZOO_MAX_PARAMS`),
  so a 600M-parameter model costs a fraction of a second to skip;
- `first_that_works` tries candidates (input sizes, smallest first), which the zoos check by calling
  the meta-built model on meta tensors (`on_meta`): shape errors surface, no arithmetic is done.

Everything here is generic: nothing names a model.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import random
from typing import Callable, Iterable, Optional

import torch
import torch.nn as nn

from dynamo_lite.report.registry import CannotBuild, MissingDependency, model, suite_problems

BATCH = 2
MAX_PARAMS_ENV = "DL_ZOO_MAX_PARAMS"
# Millions of parameters. 12M builds timm 330 of 1371, torchvision 38 of 121 and every diffusers class the
# generic recipe can make: resnet18, densenet121, efficientnet_b0-b2, convnext atto-pico, regnety_016,
# levit_128, the mobile families, tiny ViTs; not efficientnet_b3 (12.2M) or resnet26 (16M). Measured on
# 2 cores, a built zoo model costs about 4 s of a report with --jobs 2 and TorchDynamo compared (capture
# time grows with the op count, not the parameters); 20M would build 556 zoo models (+129) and add about
# 8 minutes, which the hour for every suite has no room for.
DEFAULT_MAX_PARAMS_M = 12.0


class BrokenLibrary(MissingDependency):
    """A model library is installed but its import fails (e.g. C extensions built for another torch)."""

    def __init__(self, package: str, error: BaseException):
        super().__init__(package)
        first = str(error).strip().splitlines()
        self.args = (f"optional dependency {package!r} is installed but fails to import: "
                     f"{type(error).__name__}: {first[0] if first else ''}",)


def library(package: str):
    """Import `package` inside a builder: `MissingDependency` when absent, `BrokenLibrary` when its import fails."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependency(package) from exc
    except Exception as exc:        # noqa: BLE001 - e.g. RuntimeError from a C extension
        raise BrokenLibrary(package, exc) from exc


def listing_import(suite: str, package: str):
    """Import `package` to list a suite's models; on failure return None and say why in `suite_problems`."""
    try:
        return library(package)
    except MissingDependency as exc:
        suite_problems[suite] = str(exc)
        return None


def register(name: str, tags: tuple, requires: str, doc: str, builder: Callable) -> None:
    """Register `builder` as the zoo model `name` (tags get "zoo" and the suite's library first)."""
    builder.__doc__ = doc
    builder.__name__ = builder.__qualname__ = "build_" + "".join(c if c.isalnum() else "_" for c in name)
    model(name, tags=(requires, "zoo") + tuple(tags), requires=requires)(builder)


def seed(value: int = 0) -> None:
    """Seed every RNG a model's constructor or inputs may draw from."""
    random.seed(value)
    torch.manual_seed(value)
    try:
        import numpy
        numpy.random.seed(value)
    except ImportError:
        pass


# --------------------------------------------------------------------------------------------
# the parameter limit
# --------------------------------------------------------------------------------------------

def max_parameters() -> int:
    """The largest parameter count a zoo builds: `DL_ZOO_MAX_PARAMS` (millions) or the default."""
    text = os.environ.get(MAX_PARAMS_ENV, "").strip().upper().removesuffix("M")
    try:
        millions = float(text) if text else DEFAULT_MAX_PARAMS_M
    except ValueError:
        raise ValueError(f"{MAX_PARAMS_ENV}={os.environ[MAX_PARAMS_ENV]!r}: expected millions of parameters, "
                         f"e.g. {MAX_PARAMS_ENV}=100") from None
    return int(millions * 1e6)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@contextlib.contextmanager
def _parameters_on_meta():
    """Constructors that compute their layout with tensors (torchvision's RegNet rounds widths with
    torch ops) fail under ``torch.device("meta")``; this instead moves each parameter and buffer to
    the meta device as it is registered, so initialisation costs nothing and the layout maths runs
    on the CPU."""
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(self, name, param):
        if param is not None:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register_parameter(self, name, param)

    def buffer(self, name, tensor, persistent=True):
        register_buffer(self, name, tensor.to("meta") if tensor is not None else None, persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


def build_on_meta(make: Callable[[], nn.Module]) -> Optional[nn.Module]:
    """`make()` with its parameters on the meta device, or None when the constructor cannot run so."""
    for context in (lambda: torch.device("meta"), _parameters_on_meta):
        try:
            with context():
                return make()
        except CannotBuild:
            raise
        except Exception:       # noqa: BLE001 - the constructor needs real tensors: try the next way
            continue
    return None


def check_parameters(count: int) -> None:
    """Raise `CannotBuild` when `count` parameters are over the limit."""
    limit = max_parameters()
    if count > limit:
        raise CannotBuild(f"{count / 1e6:.1f}M parameters, over the CPU report's limit of "
                          f"{limit / 1e6:g}M; {MAX_PARAMS_ENV} (millions) raises it")


def build_within_limit(make: Callable[[], nn.Module], meta: Optional[nn.Module] = None) -> nn.Module:
    """Check the parameter count on a meta build (`meta`, or one made here), then seed and build for
    real, in eval mode. A constructor that cannot run on meta is built for real and checked after."""
    meta = meta if meta is not None else build_on_meta(make)
    if meta is not None:
        check_parameters(parameter_count(meta))
    seed()
    built = make()
    if meta is None:
        check_parameters(parameter_count(built))
    return built.eval() if isinstance(built, nn.Module) else built


# --------------------------------------------------------------------------------------------
# the smallest input
# --------------------------------------------------------------------------------------------

def first_that_works(candidates: Iterable, attempt: Callable) -> tuple:
    """(candidate, None) for the first candidate `attempt(candidate)` accepts without raising, else
    (None, the last exception)."""
    error = None
    for candidate in candidates:
        try:
            attempt(candidate)
            return candidate, None
        except Exception as exc:    # noqa: BLE001 - a rejected candidate: try the next one
            error = exc
    return None, error


def on_meta(value):
    """`value` with every tensor (in lists, tuples and dicts) moved to the meta device."""
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    if isinstance(value, (list, tuple)):
        return type(value)(on_meta(v) for v in value)
    if isinstance(value, dict):
        return {k: on_meta(v) for k, v in value.items()}
    return value


def call_quietly(fn: Callable, *args, **kwargs):
    """Call without autograd and with warnings off (a trial call, not the one the report measures)."""
    import warnings
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def describe_error(exc: Optional[BaseException]) -> str:
    if exc is None:
        return "no candidate"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"
