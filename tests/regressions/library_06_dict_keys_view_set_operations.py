# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 131, 170 and 15 others), shrunk, cleaned by hand
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised TypeError: unsupported operand type(s) for &: 'tuple' and 'set' but eager returned
# eager: d.keys() & {'a', 'c'} == {'a'}, d.keys() - {'a'} == {'b'}, d.keys() | {'z'} == {'a', 'b', 'z'}.
# captured: TypeError: unsupported operand type(s) for &: 'tuple' and 'set' (the user sees an exception eager never raises).
# cause: methods._dict models d.keys() as a tuple (SeqValue(..., tuple)), and operators.binary then folds tuple & set with the real operator; keys views are set-like (and items views too). Same root as 05 (views are not modelled).
import torch


def f(x):
    d = {'a': x, 'b': x * 2}
    both = sorted(d.keys() & {'a', 'c'})
    rest = sorted(d.keys() - {'a'})
    union = sorted(d.keys() | {'z'})
    return x * len(both), both, rest, union


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
