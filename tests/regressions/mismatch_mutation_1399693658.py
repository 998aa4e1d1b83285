# dynamo_lite fuzz regression: program 1512 of bench/fuzz.py --seed 0, shrunk from 49 to 22 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][2][0]: Tensor-likes are not close! Mismatched elements: 5 / 5 (100.0%) Greatest absolute difference: 8.50910758972168 at index (4,) (up to 1e-05 allowed) Greatest relative difference: 1.21558678150177 at index (4,) (up to 1.3e-06 allowed)
import torch

def f(x, n, lst, d, flag, s, idx):
    lst[0] = torch.arange(5).float()
    x -= x[1]

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3)
    n = 3
    lst = [rand(5) for _ in range(2)]
    d = 'a'
    flag = True
    s = torch.rand
    idx = torch.randint
    return ((x, n, lst, d, flag, s, idx), {})
