# dynamo_lite fuzz regression: program 12000909 of bench/fuzz.py --seed 12, shrunk from 55 to 20 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[1]: Tensor-likes are not close! Mismatched elements: 4 / 4 (100.0%) Greatest absolute difference: 1.5039477348327637 at index (1,) (up to 1e-05 allowed) Greatest relative difference: 3.7287018299102783 at index (1,) (up to 1.3e-06 allowed)
import torch

def f(x, n, lst, idx):
    first5_m1, rest6_m1 = lst
    del lst[0]
    return first5_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 2
    n = 1
    lst = [rand(4) for _ in range(2)]
    idx = torch.randint
    return ((x, n, lst, idx), {})
