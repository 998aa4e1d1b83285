# dynamo_lite fuzz regression: program 22000235 of bench/fuzz.py --style library --seed 22, shrunk from 88 to 30 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[1]: 'inner' != 'bump'
import functools
import torch

def f(x, store, reg):
    t = x

    def deco(fn):

        @functools.wraps(fn)
        def inner(v):
            pass
        return inner

    @deco
    def bump(v):
        pass
    scalar = t.mean().item()
    out0_0 = bump.__name__
    return out0_0

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()
    rows = 4
    x = torch.randn(rows, generator=g)
    store = seed
    reg = 'count'
    return ((x, store, reg), {})
