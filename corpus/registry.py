"""The corpus registry: every model is a small builder function registered with `@model`.

    from corpus.registry import model

    @model("resnet_tiny", tags=("vision", "cnn"))
    def build():
        torch.manual_seed(0)
        return ResNet().eval(), (torch.randn(2, 3, 32, 32),)

A builder takes no arguments and returns ``(model_or_callable, args)`` or
``(model_or_callable, args, kwargs)``. It must be deterministic (seed inside) and tiny, so that one
eager run takes well under a second on a CPU.

Models that need an optional package name it with ``requires="transformers"``. Their builder
imports the package itself (never at module import time) through `require`, which raises
`MissingDependency` when the package is not installed; `ModelEntry.build` lets that exception
through so that a report can list the model as skipped, with the reason, instead of crashing.

`all_models()` imports every corpus module (vision, language, misc, breaks, hf, libraries), so listing the
corpus never needs an optional package.
"""
from __future__ import annotations

import fnmatch
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

# Corpus modules that register models, imported by `all_models()`.
CORPUS_MODULES = ("corpus.vision", "corpus.language", "corpus.misc", "corpus.generative", "corpus.breaks",
                  "corpus.hf", "corpus.libraries")


class MissingDependency(Exception):
    """A model's optional package is not installed: the model is skipped, not failed."""

    def __init__(self, package: str, model: str = ""):
        self.package = package
        self.model = model
        where = f" for model {model!r}" if model else ""
        super().__init__(f"optional dependency {package!r} is not installed{where} "
                         f"(pip install -r requirements/corpus.txt)")


def require(package: str):
    """Import and return `package`, or raise `MissingDependency`. Use inside builders."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependency(package) from exc


@dataclass
class Example:
    """A built model and the inputs to call it with: ``model(*args, **kwargs)``."""
    model: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def __call__(self, fn: Optional[Callable] = None):
        """Call `fn` (default: the model itself) with the example inputs."""
        return (fn or self.model)(*self.args, **self.kwargs)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    tags: tuple
    builder: Callable[[], tuple]
    requires: Optional[str] = None       # optional package the builder needs, e.g. "transformers"
    module: str = ""                     # the corpus module that registered it
    doc: str = ""                        # first line of the builder's docstring

    @property
    def breaks(self) -> tuple:
        """The intended graph-break kinds, from tags ``break:<kind>`` (empty: should capture whole)."""
        return tuple(t.split(":", 1)[1] for t in self.tags if t.startswith("break:"))

    def available(self) -> bool:
        """Whether the optional dependency (if any) is importable, without importing it."""
        if self.requires is None:
            return True
        try:
            return importlib.util.find_spec(self.requires) is not None
        except (ImportError, ValueError):      # blocked by an import hook, or a None entry in sys.modules
            return False

    def skip_reason(self) -> Optional[str]:
        """Why this model cannot be built here, or None."""
        return None if self.available() else str(MissingDependency(self.requires, self.name))

    def build(self) -> Example:
        """Run the builder. Raises `MissingDependency` when an optional package is missing."""
        if not self.available():
            raise MissingDependency(self.requires, self.name)
        try:
            built = self.builder()
        except MissingDependency as exc:
            exc.model = exc.model or self.name
            raise
        if not isinstance(built, tuple) or len(built) not in (2, 3):
            raise TypeError(f"builder of {self.name!r} must return (model, args) or (model, args, kwargs)")
        fn, args = built[0], tuple(built[1])
        kwargs = dict(built[2]) if len(built) == 3 else {}
        return Example(fn, args, kwargs)

    def matches(self, pattern: Optional[str]) -> bool:
        """pytest-style `-k`: substring of the name or a tag, or a glob on the name."""
        if not pattern:
            return True
        pattern = pattern.lower()
        if any(ch in pattern for ch in "*?["):
            return fnmatch.fnmatch(self.name.lower(), pattern)
        return pattern in self.name.lower() or any(pattern == t.lower() for t in self.tags)


_REGISTRY: dict[str, ModelEntry] = {}


def model(name: str, tags: Iterable[str] = (), requires: Optional[str] = None):
    """Register the decorated builder under `name`. Names must be unique across the corpus."""
    tags = tuple(tags)
    if any(t.startswith("break:") for t in tags) and "breaks" not in tags:
        tags = ("breaks",) + tags
    if requires and requires not in tags:
        tags = tags + (f"requires:{requires}",)

    def register(builder: Callable) -> Callable:
        if name in _REGISTRY:
            raise ValueError(f"corpus model {name!r} registered twice "
                             f"({_REGISTRY[name].module} and {builder.__module__})")
        doc = (builder.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = ModelEntry(name, tags, builder, requires, builder.__module__, doc[0] if doc else "")
        return builder

    return register


def load_all() -> None:
    for module in CORPUS_MODULES:
        importlib.import_module(module)


def all_models(pattern: Optional[str] = None, tags: Iterable[str] = ()) -> list[ModelEntry]:
    """Every registered model (in registration order), optionally filtered by `-k` pattern and tags.

    Models whose optional dependency is missing are included; check `entry.skip_reason()`.
    """
    load_all()
    wanted = set(tags)
    return [e for e in _REGISTRY.values() if e.matches(pattern) and wanted.issubset(e.tags)]


def get(name: str) -> ModelEntry:
    load_all()
    return _REGISTRY[name]


def describe(entry: ModelEntry) -> dict[str, Any]:
    """A JSON-friendly summary of an entry (for reports)."""
    return {"name": entry.name, "tags": list(entry.tags), "requires": entry.requires, "module": entry.module,
            "doc": entry.doc, "breaks": list(entry.breaks), "skip_reason": entry.skip_reason()}
