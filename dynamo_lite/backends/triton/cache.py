"""Kernel cache: in memory and on disk, keyed by the kernel's source hash.

Layout under `$DYNAMO_LITE_CACHE_DIR` (default `~/.cache/dynamo_lite`):

    triton/kernels/<hh>/<kernel name>.py     kernel source (the name ends with its source hash)
    triton/configs/<kernel name>.json        launch config chosen by benchmarking, per device
    triton/bin/                              Triton's compiled binaries (its cache dir while we compile,
                                             and the compile workers' of precompile.py)

A second process finds the source file (no codegen work repeated for the import), the tuned
launch config (no re-benchmarking) and the compiled binary (no LLVM/ptxas run).
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

_LOADED: dict[str, Any] = {}           # kernel name -> JITFunction
_LOADED_FROM: dict[str, Path] = {}     # kernel name -> the file its module was imported from
stats = {"memory_hits": 0, "disk_hits": 0, "writes": 0, "config_hits": 0}


def cache_dir() -> Path:
    root = os.environ.get("DYNAMO_LITE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dynamo_lite")
    return Path(root) / "triton"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def kernel_path(name: str) -> Path:
    digest = name.rsplit("_", 1)[-1]
    return cache_dir() / "kernels" / digest[:2] / f"{name}.py"


def load_kernel(name: str, source: str):
    """The `@triton.jit` function `name` defined by `source` (imported from the disk cache)."""
    fn = _LOADED.get(name)
    if fn is not None:
        stats["memory_hits"] += 1
        return fn
    path = kernel_path(name)
    if path.exists() and path.read_text() == source:
        stats["disk_hits"] += 1
    else:
        _atomic_write(path, source)
        stats["writes"] += 1
    module_name = f"dynamo_lite_kernels.{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module          # triton's jit looks functions' modules up
    spec.loader.exec_module(module)
    fn = getattr(module, name)
    _LOADED[name] = fn
    _LOADED_FROM[name] = path
    return fn


def loaded_from(name: str) -> Path:
    """The file kernel `name` was imported from (the cache directory may have changed since)."""
    return _LOADED_FROM.get(name) or kernel_path(name)


def load_config(name: str, device_key: str) -> Optional[dict]:
    path = cache_dir() / "configs" / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    found = data.get(device_key)
    if found is not None:
        stats["config_hits"] += 1
    return found


def store_config(name: str, device_key: str, config: dict) -> None:
    path = cache_dir() / "configs" / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[device_key] = config
    _atomic_write(path, json.dumps(data, indent=1, sort_keys=True))


def binary_dir() -> Optional[str]:
    """Where Triton's binaries go while we compile: ours, or None where the user chose one
    (TRITON_CACHE_DIR), which Triton then uses (compile workers too: they inherit the environment)."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return None
    return str(cache_dir() / "bin")


@contextlib.contextmanager
def triton_binary_cache():
    """Point Triton's own binary cache into ours while we compile (restored afterwards)."""
    try:
        import triton
        knobs = triton.knobs.cache
    except (ImportError, AttributeError):
        yield
        return
    directory = binary_dir()
    if directory is None:
        yield
        return
    with knobs.scope():
        knobs.dir = directory
        yield


def clear_memory() -> None:
    """Forget loaded kernels (the disk cache stays); for tests of the disk path."""
    _LOADED.clear()
    _LOADED_FROM.clear()
