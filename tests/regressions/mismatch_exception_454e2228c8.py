# dynamo_lite fuzz regression: program 70023000030 of bench/fuzz.py --backend triton --seed 70023, shrunk from 98 to 22 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised IndexError: index 4 is out of bounds for dimension 0 with size 3 but captured returned [tensor([[    nan, -0.2475,     nan,     nan,     nan],
# xfail: open: a gather with an index outside the tensor reads NaN (documented in the README) where eager raises IndexError; the kernel has no cheap way to raise (a flag read back would sync every call)
# xfail-device: cpu
# backend: triton
import torch

class Mod(torch.nn.Module):
    pass

def f(x, y, n, d, s, idx, m):
    v1_m1 = idx * idx
    v3_m2 = v1_m1[v1_m1]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()
    x = 3
    y = 3
    n = 1
    d = 'a'
    s = torch
    idx = torch.randint(3, (3,), generator=g)
    m = Mod()
    return ((x, y, n, d, s, idx, m), {})
