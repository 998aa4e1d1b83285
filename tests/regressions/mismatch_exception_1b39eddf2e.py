# dynamo_lite fuzz regression: program 70011000177 of bench/fuzz.py --backend triton --seed 70011, shrunk from 88 to 24 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised RuntimeError: min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument. but captured returned (tensor([[0.3704, 1.4565, 0.9398, 0.7748]]),)
# backend: triton
import torch

class Mod(torch.nn.Module):
    pass

def f(x, y, d, idx, m):
    v1_m1 = y
    w2_m2 = v1_m1[1:]
    v4_m3 = w2_m2.min()

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 3
    y = rand(1)
    d = 'a'
    idx = torch
    m = Mod()
    return ((x, y, d, idx, m), {})
