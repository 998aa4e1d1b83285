# dynamo_lite fuzz regression: program 7840 of bench/fuzz.py --seed 0 (at 55fc66c), shrunk from 56 to 22 lines, then by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result: the captured call returns y * 0.5 instead of the input y
import torch


def f(x, y):
    lst = [y]
    v = y * 0.5
    if x:
        lst.insert(0, v)
    return y


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.tensor(1.0, device=device), torch.randn(2, generator=g).to(device)), {}
