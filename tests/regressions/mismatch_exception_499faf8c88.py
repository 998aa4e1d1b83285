# dynamo_lite fuzz regression: program 3955 of bench/fuzz.py --seed 0, shrunk from 88 to 26 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised RuntimeError: Output 0 of Unbind is a view and is being modified inplace. This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-o
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

def f(x, y, lst, m):
    x = m.lin(x)
    for row2_m1 in x:
        row2_m1.mul_(0.5)

def make_target():
    return f

def make_inputs(seed, device='cpu'):

    def rand(*shape):
        return torch.randn(shape)
    torch.manual_seed(0)
    x = rand(3)
    y = rand()
    lst = 3
    m = Mod()
    return ((x, y, lst, m), {})
