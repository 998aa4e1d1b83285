# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 1 at commit eef85ef, program 1001517), shrunk, cleaned by hand
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised AttributeError: 'tuple_iterator' object has no attribute 'send' but eager returned
# eager: the generator object lives across print(); acc.send(2.0) returns the running total 2.0; the result is x * 2.
# captured: AttributeError: 'tuple_iterator' object has no attribute 'send' (raised in the resume function).
# cause: same root as 13: the traced generator is an IteratorValue (its values computed ahead), and at the print() break codegen rebuilds it as iter(tuple) for the resume function; a generator's own methods (send, throw, close, gi_*) and its laziness are gone. A generator object live at a break cannot be rebuilt: break before creating it (or keep the real generator).
import torch


def accumulate():
    total = 0.0
    while True:
        v = yield total
        if v is None:
            return
        total += v


def f(x):
    acc = accumulate()
    next(acc)
    print('checkpoint')
    total = acc.send(2.0)
    return x * total


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
