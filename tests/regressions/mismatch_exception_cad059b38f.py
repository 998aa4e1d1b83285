# dynamo_lite fuzz regression: program 967 of bench/fuzz.py --seed 0, shrunk from 68 to 22 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised UnboundLocalError: cannot access local variable 'v2_m1' where it is not associated with a value; eager raised RuntimeError: unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() th
import torch

def f(x, y, n, lst):
    v2_m1 = y
    w4_m1 = y[-1]
    kk7_m1 = int(v2_m1)
    del v2_m1
    y -= w4_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 2
    y = rand(1)
    n = 3
    lst = 3
    return ((x, y, n, lst), {})
