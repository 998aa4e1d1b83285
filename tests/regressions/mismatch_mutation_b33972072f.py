# dynamo_lite fuzz regression: program 1001093 of bench/fuzz.py --seed 1, shrunk from 73 to 28 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][3][1]: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%) Greatest absolute difference: 1.6972395181655884 at index (1,) (up to 1e-05 allowed) Greatest relative difference: 1.542098045349121 at index (1,) (up to 1.3e-06 allowed)
import torch

class Mod(torch.nn.Module):
    pass

def f(x, y, n, lst, flag, s, m):
    first4_m1, *rest5_m1 = lst
    if first4_m1.max():
        pass
    rest5_m1[0] = first4_m1
    lst.append(first4_m1)

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = 2
    y = 1
    n = 2
    lst = [rand(3) for _ in range(2)]
    flag = False
    s = torch.rand
    m = Mod()
    return ((x, y, n, lst, flag, s, m), {})
