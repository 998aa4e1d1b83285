# dynamo_lite fuzz regression: program 3000044 of bench/fuzz.py --seed 3 --backend triton --device cuda (H200), shrunk from 62 to 23 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%)
# backend: triton
import torch

def f(x, y, n, lst, s, z):
    lst[0].addcmul_(y.squeeze(), y.squeeze())
    v2_m1 = y
    for e4_m1, e5_m1 in zip(lst, lst):
        v2_m1 *= e4_m1
    return y

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g).to(device)
    x = 2
    y = rand(3)
    n = 1
    lst = [rand(3) for _ in range(2)]
    s = torch.rand
    z = 2
    return ((x, y, n, lst, s, z), {})
