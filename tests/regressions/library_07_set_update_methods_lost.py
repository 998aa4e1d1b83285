# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 47, 461, 1542 and more), shrunk, cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 12 / 12 (100.0%) Greatest absolute difference: 6.000000476837158 at index (0, 0) (up to 1e-05 allowed) Greatest relative difference: 70.98712921142578 at i...
# eager: s1 == {0, 1}, s2 == {1}, s3 == {3}, s4 == {1, 2, 3, 7}; the result is x + 1 (sum(s2)).
# captured: the sets are unchanged ({1, 3}, {1, 6}, {3, 4}, {1, 2}) and the tensor result uses the old s2.
# cause: methods._set mutates only for add/update/discard/remove/clear/pop; every other method (intersection_update, difference_update, symmetric_difference_update, and __ior__/__iand__/... when called as methods) runs on a temporary copy `obj.cls(values)` and its effect is dropped. (The augmented operators s |= ... go through operators.binary, which returns a new set: the object identity is lost there as well.)
import torch


def f(x):
    s1 = {1, 3}
    s1.symmetric_difference_update({0, 3})
    s2 = {1, 6}
    s2.intersection_update(range(4))
    s3 = {3, 4}
    s3.difference_update([4])
    s4 = {1, 2}
    alias = s4
    s4 |= {3, 7}
    return x + sum(s2), s1, s2, s3, alias


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
