# dynamo_lite fuzz regression: program 2926 of bench/fuzz.py --seed 0, shrunk from 69 to 25 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 5 / 5 (100.0%) Greatest absolute difference: 1.2282512187957764 at index (1,) (up to 1e-05 allowed) Greatest relative difference: 6.211878299713135 at index (4,) (up to 1.3e-06 allowed)
import torch

class Mod(torch.nn.Module):
    pass

def f(x, y, n, lst, d, m):
    first6_m1, *rest7_m1 = lst
    lst.insert(0, first6_m1 + 0.5)
    return first6_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 3
    y = 5
    n = 1
    lst = [rand(5) for _ in range(3)]
    d = 'a'
    m = Mod()
    return ((x, y, n, lst, d, m), {})
