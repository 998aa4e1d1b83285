"""Can the triton backend run here? Importing dynamo_lite never needs triton or a GPU; compiling
a graph does, and says so plainly when it is missing."""
from __future__ import annotations

import importlib.util
import os

import torch


def interpreting() -> bool:
    """TRITON_INTERPRET=1: Triton runs kernels on the CPU with numpy (slow; for tests)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def require() -> None:
    if not triton_installed():
        raise RuntimeError("dynamo_lite's 'triton' backend needs the triton package "
                           "(pip install triton==3.6.0); use backend='eager' or 'inductor' otherwise")
    if not interpreting() and not torch.cuda.is_available():
        raise RuntimeError("dynamo_lite's 'triton' backend needs a CUDA GPU, or TRITON_INTERPRET=1 in the "
                           "environment (set before triton is imported) to run its kernels on the CPU "
                           "with Triton's interpreter (slow; meant for tests)")


def can_run_on(device: torch.device) -> bool:
    return device.type == "cuda" or (device.type == "cpu" and interpreting())
