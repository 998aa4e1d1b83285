# dynamo_lite fuzz regression: hand-minimized from program 45 of bench/fuzz.py --seed 0 (first generator version)
# failure: mismatch:value: call 1 (make_inputs(0)): result: the captured call returns the value stored into lst[0] after it was read
import torch


def f(lst, w):
    old = lst[0]
    lst[0] = w * 2
    return old


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return ([torch.randn(3, generator=g).to(device)], torch.randn(3, generator=g).to(device)), {}
