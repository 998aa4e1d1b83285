"""Build script for the C extensions; all metadata lives in pyproject.toml.

`_evalframe` (the frame hook) is plain C against CPython. `_tensorguard` (fast tensor guards) is
C++ against the installed torch's headers: it is built when torch is importable at build time
(our set-up scripts install with --no-build-isolation) and skipped otherwise; dynamo_lite then
uses generated Python for tensor guards.
"""
import os
import sys

from setuptools import Extension, setup

extensions = [
    Extension(
        "dynamo_lite._evalframe",
        sources=["dynamo_lite/_evalframe.c"],
        extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
    )
]

try:
    import torch
    from torch.utils.cpp_extension import include_paths, library_paths
except Exception as exc:  # no torch while building: the fast tensor guard is optional
    print(f"dynamo_lite: not building _tensorguard ({exc})", file=sys.stderr)
else:
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    extensions.append(
        Extension(
            "dynamo_lite._tensorguard",
            sources=["dynamo_lite/_tensorguard.cpp"],
            include_dirs=include_paths(),
            library_dirs=library_paths(),
            libraries=["c10", "torch", "torch_cpu", "torch_python"],
            runtime_library_dirs=library_paths(),
            language="c++",
            extra_compile_args=["-O2", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-Wno-c++20-extensions",
                                "-w"],
        )
    )

setup(ext_modules=extensions)
