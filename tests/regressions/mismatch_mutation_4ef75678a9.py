# dynamo_lite fuzz regression: program 12000973 of bench/fuzz.py --seed 12, shrunk from 47 to 19 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][1]: length 1 != 3
import torch

def f(x, lst, d):
    lst.append(x)
    w1_m1 = d['a'][0]
    d['a'].add_(w1_m1)

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 3
    lst = [5 for _ in range(1)]
    d = {'a': rand(1)}
    return ((x, lst, d), {})
