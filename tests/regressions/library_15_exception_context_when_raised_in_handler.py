# dynamo_lite fuzz regression: program 108 of bench/fuzz.py --style library --seed 0, shrunk from 109 to 21 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[7]: 'NoneType' != 'KeyError'
import torch

def f(x, n, store, reg):
    try:
        try:
            {}['k']
        except KeyError:
            raise ValueError()
    except ValueError as err:
        ctx = type(err.__context__).__name__
    out3_0 = ctx
    return out3_0

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()
    rows = 4
    x = torch.randn(rows, generator=g)
    return (x, {})
