# dynamo_lite regression: corpus model numpy_mask_roundtrip (found by `python -m dynamo_lite.report.survey`)
# failure: crash:NameError: a numpy array computed after a graph break was folded into the next graph as a constant (and would be stale for other inputs)
import numpy as np
import torch


def f(x, lengths):
    mask = np.arange(x.size(1))[None, :] < lengths.cpu().numpy()[:, None]
    mask = torch.from_numpy(mask)
    return x.masked_fill(~mask.unsqueeze(-1), 0.0).sum(1)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 6, (3,), generator=g)
    return (torch.randn(3, 5, 6, generator=g).to(device), lengths.to(device)), {}
