# dynamo_lite fuzz regression: program 92 of bench/fuzz.py --seed 0, shrunk from 47 to 20 lines
# failure: internal-error: call 1 (make_inputs(0)): dynamo_lite: internal error while capturing f (<fuzz-92>:12); it runs eagerly. KeyError: iadd
import torch

def f(x, lst, idx):
    v3_m1 = x > 0
    if v3_m1 > 0:
        pass

    def inner5_m1(t):
        v1_c2 = v3_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape)
    x = rand(3)
    return (x, {})
