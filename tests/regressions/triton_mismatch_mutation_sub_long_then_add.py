# dynamo_lite fuzz regression: program 3000006 of bench/fuzz.py --seed 3 --backend triton --device cuda (H200), shrunk to 19 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][0]: 1 / 3 elements of x off by 1.0
# backend: triton
import torch

def f(x, y, s, idx):
    y -= idx
    x += y

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape).to(device)
    x = rand(3)
    y = rand(3)
    s = torch.rand
    idx = torch.randint(3, (3,), generator=g).to(device)
    return ((x, y, s, idx), {})
