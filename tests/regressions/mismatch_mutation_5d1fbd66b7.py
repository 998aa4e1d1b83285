# dynamo_lite fuzz regression: program 8739 of bench/fuzz.py --seed 0, shrunk from 65 to 23 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][1]: length 1 != 3
import torch

class Mod(torch.nn.Module):
    pass

def f(x, lst, flag, m, *, y=None, n=3):
    v1_m1 = lst[-1]
    lst.extend(torch.linspace(1, 1, 4))
    v1_m1 *= v1_m1[0]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 4
    lst = [rand(4) for _ in range(1)]
    flag = True
    m = Mod()
    return ((x, lst, flag, m), {})
