"""Build script for the C extensions; all metadata lives in pyproject.toml.

`_evalframe` (the frame hook) is plain C against CPython. `_tensorguard` (fast tensor guards) is
C++ against the installed torch's headers: it is built when torch is importable at build time
(our set-up scripts install with --no-build-isolation) and skipped otherwise; dynamo_lite then
uses generated Python for tensor guards.

`_launcher` (the triton backend's one launcher for all kernels) is plain C that finds the CUDA
driver at run time (dlopen): it builds without CUDA and without a GPU. It is optional: where it
does not build, the backend launches through Triton's own launchers.

On a Python the hook does not support (dynamo_lite/compat.py says which: 3.14, free-threaded
builds) neither is built: the package installs, and `capture` says so once and runs code eagerly.
"""
import os
import runpy
import sys

from setuptools import Extension, setup

# compat.py imports only the standard library: read the supported versions from there.
SUPPORTED = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamo_lite", "compat.py"))["SUPPORTED"]


def tensorguard_extensions() -> list:
    try:
        import torch
        from torch.utils.cpp_extension import include_paths, library_paths
    except Exception as exc:  # no torch while building: the fast tensor guard is optional
        print(f"dynamo_lite: not building _tensorguard ({exc})", file=sys.stderr)
        return []
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    return [Extension(
        "dynamo_lite._tensorguard",
        sources=["dynamo_lite/_tensorguard.cpp"],
        include_dirs=include_paths(),
        library_dirs=library_paths(),
        libraries=["c10", "torch", "torch_cpu", "torch_python"],
        runtime_library_dirs=library_paths(),
        language="c++",
        extra_compile_args=["-O2", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-Wno-c++20-extensions", "-w"],
    )]


if SUPPORTED:
    extensions = [Extension("dynamo_lite._evalframe", sources=["dynamo_lite/_evalframe.c"],
                            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"])]
    extensions += tensorguard_extensions()
else:
    print(f"dynamo_lite: Python {sys.version.split()[0]} is not supported: no frame hook is built, "
          "capture() will run code eagerly", file=sys.stderr)
    extensions = []

# built on every Python: it does not depend on the frame hook
extensions.append(Extension("dynamo_lite._launcher", sources=["dynamo_lite/_launcher.c"], libraries=["dl"],
                            extra_compile_args=["-O2", "-Wall"], optional=True))

setup(ext_modules=extensions)
