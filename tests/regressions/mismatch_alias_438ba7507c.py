# dynamo_lite fuzz regression: program 70300000519 of bench/fuzz.py --backend triton --seed 70300, shrunk from 68 to 19 lines
# failure: mismatch:alias: call 1 (make_inputs(0)): output aliasing (same input, shares storage with inputs, shares with output #) [((), (), None), ((), (), None), ((4,), (4,), None)] != eager [((), (), None), ((), (), 0), ((4,), (4,), None)]
# backend: triton
import torch

def f(x, lst, idx):
    v1_m1 = torch.sub(x, x)[::2]
    w2_m1 = v1_m1[1]
    tp4_m1 = w2_m1
    p5_m1 = tp4_m1
    return (v1_m1, p5_m1)

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3, 10)
    return (x, {})
