# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 35, 73, 135, 280, 607, 825 and about 40 more), shrunk, cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 12 / 12 (100.0%) Greatest absolute difference: 1.0 at index (0, 0) (up to 1e-05 allowed) Greatest relative difference: 8.353290557861328 at index (0, 1) (u...
# eager: views are live: after d['c'] = ... and d.pop('a'), keys == ['b', 'c'], 'a' in kv is False, sum(vv) == x * 2 + (x + 1).
# captured: the views were copied when d.keys()/values()/items() were called: keys == ['a', 'b'], 'a' in kv is True, sum(vv) == x + x * 2.
# cause: methods._dict returns SeqValue(..., tuple) snapshots for "keys", "values" and "items"; a view must keep reading the DictValue (a view value over the dict) so that later mutations show through.
import torch


def f(x):
    d = {'a': x, 'b': x * 2}
    kv = d.keys()
    vv = d.values()
    iv = d.items()
    d['c'] = x + 1
    d.pop('a')
    return sum(vv), list(kv), 'a' in kv, [k for k, _ in iv], len(iv)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
