# dynamo_lite fuzz regression: program 1000220 of bench/fuzz.py --seed 1, shrunk from 41 to 18 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised UnboundLocalError: cannot access local variable 'v5_m1' where it is not associated with a value but eager returned
import torch

def f(x, lst, d):
    p2_m1 = 0
    v5_m1 = p2_m1
    print()
    del v5_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3)
    return (x, {})
