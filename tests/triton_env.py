"""What the Triton backend's tests share: the interpreter where there is no GPU (TRITON_INTERPRET=1
must be set before triton is first imported, so import this module first), the device the tensors
go on, and `strict`, an autouse fixture for modules that import it: a compile error fails the test
instead of falling back, kernels go to a fresh cache, and the backend's record of recent graphs
starts empty. Under the interpreter, fp32 -> bf16 conversions round to nearest even, as the
GPU's (`cvt.rn.bf16.f32`) and eager's do: Triton's interpreter truncates them, which made every
bf16 result up to one unit in the last place off the GPU's (`_round_bf16_to_nearest_even`)."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


def _round_bf16_to_nearest_even():
    """Make the interpreter's fp32 -> bf16 casts round to nearest, ties to even (NaN stays a
    quiet NaN of its sign, overflow rounds to infinity), as the GPU does."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or getattr(builder.cast_impl, "rounds_bf16", False):
        return
    truncating = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            quiet_nan = (bits >> 16) | 0x40
            out = np.where(np.isnan(src.data), quiet_nan, rounded).astype(np.uint16)
            return interpreter.TensorHandle(out, dst_type.scalar)
        return truncating(self, src, dst_type)
    cast_impl.rounds_bf16 = True
    builder.cast_impl = cast_impl


if INTERPRET:
    _round_bf16_to_nearest_even()


@pytest.fixture(autouse=True)
def strict(monkeypatch, tmp_path_factory):
    from dynamo_lite.backends.triton import backend, settings
    monkeypatch.setattr(settings, "strict", True)       # a compile error fails the test
    monkeypatch.setenv("DYNAMO_LITE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dl-cache"))
    backend.recent.clear()
