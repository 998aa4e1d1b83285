# dynamo_lite fuzz regression: program 5260 of bench/fuzz.py --seed 0 (at 55fc66c), shrunk from 61 to 24 lines, then by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[0], the old element, is not incremented (by hand: lst[0] keeps the old element too)
import torch


def f(lst, p):
    snapshot = list(lst)
    lst[0] = torch.zeros(2, device=p.device)
    if p:
        snapshot[0].add_(1)
    return snapshot


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return ([torch.randn(2, generator=g).to(device)], torch.tensor(1.0, device=device)), {}
