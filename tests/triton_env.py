"""What the Triton backend's tests share: the interpreter where there is no GPU (TRITON_INTERPRET=1
must be set before triton is first imported, so import this module first), the device the tensors
go on, and `strict`, an autouse fixture for modules that import it: a compile error fails the test
instead of falling back, kernels go to a fresh cache, and the backend's record of recent graphs
starts empty."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


@pytest.fixture(autouse=True)
def strict(monkeypatch, tmp_path_factory):
    from dynamo_lite.backends.triton import backend, settings
    monkeypatch.setattr(settings, "strict", True)       # a compile error fails the test
    monkeypatch.setenv("DYNAMO_LITE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dl-cache"))
    backend.recent.clear()
