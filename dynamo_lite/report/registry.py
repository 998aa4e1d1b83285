"""The model registry of `dynamo-lite report`: every model is a builder function registered with `@model`.

    from dynamo_lite.report.registry import model

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

Models come in *suites* (`SUITES`): our own models ("own"), hand-picked models of the installed
libraries ("lib"), and suites enumerated from the installed model zoos ("timm", "torchvision", "hf",
"diffusers"). A suite is a list of modules of the separate `dynamo_lite_corpus` package; `all_models`
imports only the suites asked for (default: `DEFAULT_SUITES`). dynamo_lite itself never imports
the corpus: a user's model files given to the report as paths register with `model` here and need
no corpus installed. Listing a suite never needs an optional package (a zoo suite whose package is
missing lists nothing and says so in `suite_problems`).

A builder that cannot make its model (too large for a CPU report, needs inputs no generic recipe
gives, ...) raises `CannotBuild(reason)`: the model is reported as skipped with that reason.
"""
from __future__ import annotations

import fnmatch
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional


@dataclass(frozen=True)
class Suite:
    name: str
    modules: tuple          # modules of dynamo_lite_corpus that register the suite's models
    doc: str


SUITES = {s.name: s for s in (
    Suite("own", ("vision", "language", "misc", "generative", "breaks"),
          "models written for this corpus: common architectures and every kind of graph break"),
    Suite("lib", ("hf", "libraries"),
          "hand-picked models of the installed libraries (transformers, einops, x-transformers, ...), "
          "default arguments"),
    Suite("timm", ("zoo_timm",), "every architecture of timm.list_models()"),
    Suite("torchvision", ("zoo_torchvision",), "every torchvision classification, segmentation, detection, "
                                               "video and optical-flow model"),
    Suite("hf", ("zoo_hf",), "every transformers architecture whose config can be made tiny generically"),
    Suite("diffusers", ("zoo_diffusers",), "diffusers model classes, tiny configs"),
)}
DEFAULT_SUITES = ("own", "lib")
CORPUS_PACKAGE = "dynamo_lite_corpus"
# Corpus modules of the default suites, imported by `all_models()`.
CORPUS_MODULES = tuple(f"{CORPUS_PACKAGE}.{m}" for s in DEFAULT_SUITES for m in SUITES[s].modules)


def parse_suites(text: Optional[str]) -> tuple:
    """"timm,hf" -> ("timm", "hf"); "all" -> every suite; None -> the defaults. ValueError on an unknown name."""
    if not text:
        return DEFAULT_SUITES
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return tuple(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; the suites are {', '.join(SUITES)} (or all)")
    return tuple(dict.fromkeys(names))


class ModelSkipped(Exception):
    """The model cannot be built here: it is reported as skipped, with this exception's message."""


class CannotBuild(ModelSkipped):
    """A builder cannot make its model small enough, or does not know how to call it: skipped, with the reason."""


class MissingDependency(ModelSkipped):
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


# suite -> why it listed no models (its zoo package is not installed or fails to import)
suite_problems: dict[str, str] = {}
_SUITE_OF: dict[str, str] = {}           # model name -> suite


class CorpusNotInstalled(ImportError):
    """The bundled corpus (package dynamo_lite_corpus) is not importable."""


def load_suites(suites: Iterable[str] = DEFAULT_SUITES) -> None:
    """Import the modules of `suites` (each once), so that their models are registered."""
    for suite in suites:
        for module in SUITES[suite].modules:
            name = f"{CORPUS_PACKAGE}.{module}"
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name in (CORPUS_PACKAGE, name):
                    raise CorpusNotInstalled(
                        f"the model corpus ({CORPUS_PACKAGE}) is not installed: install dynamo_lite from its "
                        f"repository, or give the report your own model files as paths") from exc
                raise
    owner = {f"{CORPUS_PACKAGE}.{m}": s.name for s in SUITES.values() for m in s.modules}
    for entry in _REGISTRY.values():      # by the module that registered it, whoever imported that
        if entry.module in owner:
            _SUITE_OF[entry.name] = owner[entry.module]


def load_all() -> None:
    load_suites(DEFAULT_SUITES)


def suite_of(entry: "ModelEntry") -> Optional[str]:
    """The suite that registered `entry` (None for a user's model file)."""
    return _SUITE_OF.get(entry.name)


def suite_of_name(name: str) -> Optional[str]:
    """The suite that registered the model called `name`, if one of the loaded suites did."""
    return _SUITE_OF.get(name)


def suite_modules(suites: Iterable[str]) -> list:
    """The importable names of the corpus modules of `suites`."""
    return [f"{CORPUS_PACKAGE}.{m}" for s in suites for m in SUITES[s].modules]


def all_models(pattern: Optional[str] = None, tags: Iterable[str] = (),
               suites: Iterable[str] = DEFAULT_SUITES) -> list[ModelEntry]:
    """Every registered model of `suites` (in registration order), optionally filtered by `-k` pattern and tags.

    Models whose optional dependency is missing are included; check `entry.skip_reason()`.
    """
    suites = tuple(suites)
    load_suites(suites)
    wanted = set(tags)
    return [e for e in _REGISTRY.values() if _SUITE_OF.get(e.name) in suites and e.matches(pattern)
            and wanted.issubset(e.tags)]


def get(name: str, suites: Iterable[str] = DEFAULT_SUITES) -> ModelEntry:
    if name not in _REGISTRY:
        load_suites(suites)
    return _REGISTRY[name]


def failed_row(name: str, status: str, detail: str) -> dict:
    """The row of a model whose survey gave none (its process crashed or hung, its Ray task failed)."""
    return {"name": name, "tags": (), "status": status, "detail": detail}


def describe(entry: ModelEntry) -> dict[str, Any]:
    """A JSON-friendly summary of an entry (for reports)."""
    return {"name": entry.name, "tags": list(entry.tags), "requires": entry.requires, "module": entry.module,
            "doc": entry.doc, "breaks": list(entry.breaks), "skip_reason": entry.skip_reason()}
