# dynamo_lite fuzz regression: program 1001679 of bench/fuzz.py --seed 1, shrunk from 65 to 22 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][1]: length 3 != 4
import torch

class Mod(torch.nn.Module):
    pass

def f(x, lst, d, m, *, flag=False):
    lst.insert(0, torch)
    x.add_(x[0])

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(2)
    lst = [3 for _ in range(3)]
    d = 'a'
    m = Mod()
    return ((x, lst, d, m), {})
