# dynamo_lite fuzz regression: program 1000066 of bench/fuzz.py --seed 1, shrunk from 53 to 21 lines
# failure: internal-error: call 1 (make_inputs(0)): dynamo_lite: internal error while capturing f (<fuzz-1000066>:14); it runs eagerly. KeyError: iadd
import torch

def f(x, idx, *, flag=True, s=None):
    x += 2
    if x > 0:
        pass

    def inner2_m1(t):
        tp1_c3 = x

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape)
    x = rand()
    idx = torch.randint
    return ((x, idx), {})
