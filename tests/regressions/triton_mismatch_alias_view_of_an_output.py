# dynamo_lite fuzz regression: program 25000051 of bench/fuzz.py --seed 25 --backend triton (TRITON_INTERPRET=1), shrunk from 62 to 20 lines
# failure: mismatch:alias: call 1 (make_inputs(0)): output aliasing (same input, shares storage with inputs, shares with output #) [((), (), None), ((), (), None)] != eager [((), (), None), ((), (), 0)]: an output that is a view of another came out of the kernels as a buffer of its own
# backend: triton
import torch

def f(x, lst, d, s):
    v1_m1 = x > x
    w2_m1 = v1_m1.unsqueeze(0)
    return [w2_m1, v1_m1]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand()
    lst = 5
    d = 'a'
    s = torch
    return ((x, lst, d, s), {})
