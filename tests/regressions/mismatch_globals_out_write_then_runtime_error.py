# dynamo_lite fuzz regression: program 21000472 of bench/fuzz.py --seed 21, shrunk from 50 to 23 lines
# failure: mismatch:globals: call 1 (make_inputs(0)): program globals['HISTORY']: length 0 != 1
# cause: an input written through `out=` made the graph's written inputs "unknown", so a graph
# failing at run time (x -= x[1]: overlapping memory) could not be undone and rerun eagerly:
# the exception was re-raised without the HISTORY.append that eager runs before it.
import torch
HISTORY = []

def f(x, y, n, d, *, idx=None):
    torch.add(d['a'], 1, out=d['a'])
    HISTORY.append(x)
    w1_m1 = x
    w3_m1 = w1_m1[1]
    x -= w3_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(2)
    y = 5
    n = 2
    d = {'a': rand()}
    return ((x, y, n, d), {})
