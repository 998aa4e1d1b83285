# dynamo_lite fuzz finding: library style (found by hand from the generator's set pieces, then by the `iterate` op added for it)
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%) Greatest absolute difference: 1.75 at index (0,) (up to 1e-05 allowed) Greatest relative difference: 1.324542760848999 at index (2,) (up to ...
# eager: CPython iterates a set of small ints in hash-table order: {1, 3} plus 0 is [0, 1, 3]; {5, 2} plus 9, 1 is [9, 2, 5, 1]; acc depends on that order.
# captured: the traced set iterates in insertion order: [1, 3, 0] and [5, 2, 9, 1], so acc (and the tensor result) differ.
# cause: values.SetValue keeps its items as an insertion-ordered list and methods._set appends new elements at the end; iteration, list(), pop() and printing of a set must follow CPython's order (e.g. keep a real set of the python values and iterate that, or rebuild the order from a real set after each mutation).
import torch


def f(x):
    s1 = {1, 3}
    s1.add(0)
    s2 = {5, 2}
    s2.update([9, 1])
    acc = 0.0
    for v in s1:
        acc = acc * 0.5 + v
    return x + acc, list(s1), list(s2)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
