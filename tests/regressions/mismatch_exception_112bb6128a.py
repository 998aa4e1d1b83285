# dynamo_lite fuzz regression: program 7884 of bench/fuzz.py --seed 0, shrunk from 45 to 21 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised RuntimeError: expected m1 and m2 to have the same dtype, but got: long int != double but eager returned
import torch

def f(x, y, lst, idx):
    try:
        v5_m2 = idx @ x
    except RuntimeError:
        pass

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape)
    x = rand(3, 4)
    y = 4
    lst = 4
    idx = torch.randint(3, (3,))
    return ((x, y, lst, idx), {})
