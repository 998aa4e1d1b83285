# dynamo_lite fuzz regression: program 1035 of bench/fuzz.py --seed 0, shrunk from 76 to 29 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][3].__dict__['count']: 0 != 1
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.count = 0

def f(x, flag, s, m, *, y=None, d=None):
    d['a'] += y
    m.count += 1
    v6_m1 = x
    v9_m1 = torch.full((3, 3), 2) @ v6_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3)
    flag = True
    s = torch
    m = Mod()
    y = rand()
    d = {'a': rand()}
    return ((x, flag, s, m), {'y': y, 'd': d})
