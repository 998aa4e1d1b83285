# dynamo_lite fuzz regression: program 4266 of bench/fuzz.py --seed 0, shrunk from 42 to 21 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised IndexError: list index out of range but eager returned
import torch

def f(x, n, lst, d, flag):
    lst3_m1 = lst + lst
    lst.pop()
    return lst3_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 3
    n = 3
    lst = [rand() for _ in range(3)]
    d = 'a'
    flag = False
    return ((x, n, lst, d, flag), {})
