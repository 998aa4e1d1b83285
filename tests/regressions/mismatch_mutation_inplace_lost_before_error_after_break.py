# dynamo_lite fuzz regression: hand-minimized from program 1000527 of bench/fuzz.py --seed 1 (earlier generator)
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][0]: x is not decremented by y
import torch


def f(x, y, lst):
    lst1 = lst + lst
    del lst[0]
    k = int(y)
    x -= y
    bad = lst1[42]


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, generator=g).to(device)
    y = torch.randn((), generator=g).to(device)
    return (x, y, [torch.ones(()), torch.ones(())]), {}
