# dynamo_lite fuzz regression: program 305 of bench/fuzz.py --seed 11 (not shrunk: the bug needs a long else branch)
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised UnboundLocalError: cannot access local variable 'n' (a loop's exit jumped onto an EXTENDED_ARG the liveness analysis did not know, so n was not passed to the resume function)
import torch
import dynamo_lite as dl

K = 2

class FuzzError(ValueError):
    def __init__(self, k):
        super().__init__(f'fuzz error {k}')
        self.k = k

class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.GELU()])
        self.register_buffer('buf', torch.zeros(4))
        self.scale = -1.0
        self.count = 0
        self.use_act = True

    def forward(self, t):
        dd1_f2 = {'a': torch.mul(t, t), 'b': torch.mul(t, t) + 1}
        t.sub_(t, alpha=2)
        return t

def f(x, n, lst, d, flag, idx, m):
    if x.abs().sum() > 0.5:
        for e2_m2, e3_m2 in zip(lst, lst):
            v4_m3 = torch.sign(torch.tensor(1e-3, device=x.device)).float()
            assert x.shape == (2, 4)
            print('p5_m3', idx)
    else:
        if 'b' in d:
            assert idx.dim() == 1, 'rank changed'
            x = torch.nn.functional.linear(x, m.lin.weight).exp()
            lst[0] = torch.arange(4, device=x.device).float().sin()
        elif m.training:
            v6_m3 = torch.where(x > 0, x, x)
        else:
            tp7_m3 = (torch.mul(idx, idx), torch.full((2, 4), 0.25, device=x.device))
            q9_m3, p8_m3 = tp7_m3[1], tp7_m3[0]
    return {'idx0': idx, 'x1': x, 'n2': n, 'x3': x}


def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape, generator=g).to(device)

    torch.manual_seed(0)
    x = rand(2, 4)
    n = 0
    lst = [rand(4) for _ in range(2)]
    d = {'a': rand(2, 1), 'b': rand(2, 1)}
    flag = True
    idx = torch.randint(0, 2, (2,), generator=g).to(device)
    m = Mod().to(device)
    return (x, n, lst, d, flag, idx, m,), {}
