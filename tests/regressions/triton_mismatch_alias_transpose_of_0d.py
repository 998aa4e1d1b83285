# dynamo_lite fuzz regression: program 7000053 of bench/fuzz.py --seed 7 --backend triton (TRITON_INTERPRET=1), shrunk from 41 to 16 lines
# failure: mismatch:alias: call 1 (make_inputs(0)): output aliasing [((0,), (0,), None)] != eager [((), (0,), None)]: the output IS the input x instead of a view of it
# backend: triton
import torch

def f(x):
    w2_m1 = x.t()
    return w2_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g).to(device)
    x = rand()
    return ((x,), {})
