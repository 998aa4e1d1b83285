# dynamo_lite fuzz regression: program 12001184 of bench/fuzz.py --seed 12, shrunk from 69 to 26 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][2].__dict__['count']: 0 != 1
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.count = 0

def f(x, z, m, *, lst=None, d=None, flag=True):
    w1_m1 = lst[0]
    m.count += 1
    w1_m1 *= w1_m1[0]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 2
    z = 2
    m = Mod()
    lst = [rand(3) for _ in range(3)]
    return ((x, z, m), {'lst': lst})
