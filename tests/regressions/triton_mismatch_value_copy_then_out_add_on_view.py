# dynamo_lite fuzz regression: program 3000194 of bench/fuzz.py --seed 3 --backend triton --device cuda (H200), shrunk from 52 to 20 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result: every element off by exactly 1.0 (x.copy_(w) reads w after the later torch.add(w, 1, out=w))
# backend: triton
import torch

def f(x, n, lst, d, idx):
    w1_m1 = lst[0]
    x.copy_(w1_m1)
    v6_m1 = x
    torch.add(w1_m1, 1, out=w1_m1)
    return v6_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g).to(device)
    x = rand(3, 8)[:,]
    n = 2
    lst = rand(4)
    d = 'a'
    idx = torch.randint
    return ((x, n, lst, d, idx), {})
