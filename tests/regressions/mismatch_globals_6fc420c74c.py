# dynamo_lite fuzz regression: program 5047 of bench/fuzz.py --seed 0, shrunk from 54 to 23 lines
# failure: mismatch:globals: call 1 (make_inputs(0)): program globals['CALLS']: 0 != 1
import torch
CALLS = 0

def f(x, n, s, idx):
    global CALLS
    x[1] = 0.0
    v2_m1 = x
    CALLS += 1
    v2_m1 += v2_m1[1]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(2)
    n = 0
    s = torch
    idx = torch
    return ((x, n, s, idx), {})
