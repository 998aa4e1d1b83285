# dynamo_lite fuzz regression: program 12000144 of bench/fuzz.py --seed 12, shrunk from 37 to 20 lines
# failure: crash: the worker process died (signal SIGSEGV); stderr tail:
import torch

class FuzzError(ValueError):

    def __init__(self, k):
        super().__init__()

def f(x):
    raise FuzzError(x)

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn
    x = 2
    return ((x,), {})
