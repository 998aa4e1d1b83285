# dynamo_lite fuzz regression: program 940 of bench/fuzz.py --seed 0, shrunk from 47 to 17 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised UnboundLocalError: cannot access local variable 'v1_m1' where it is not associated with a value but eager returned
import torch

def f(x, n, flag, s, z):
    v1_m1 = torch
    print()
    del v1_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    x = 3
    n = 3
    flag = True
    s = torch.rand
    z = 2
    return ((x, n, flag, s, z), {})
