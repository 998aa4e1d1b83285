"""Capture on a CUDA device (skipped where there is no GPU): modules and functions produce the
same values on the GPU, and device changes recapture."""
import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl
from harness import CountingBackend

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_mlp_on_cuda_matches_eager():
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)).cuda().eval()
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    x = torch.randn(8, 16, device="cuda")
    torch.testing.assert_close(captured(x), model(x))
    torch.testing.assert_close(captured(x), model(x))
    assert backend.count == 1


def test_device_change_recaptures():
    backend = CountingBackend()
    f = dl.capture(lambda x: (x * 2).softmax(-1), backend=backend)
    for device in ("cpu", "cuda", "cpu"):
        x = torch.randn(4, 8, device=device)
        torch.testing.assert_close(f(x), (x * 2).softmax(-1))
    assert backend.count == 2
