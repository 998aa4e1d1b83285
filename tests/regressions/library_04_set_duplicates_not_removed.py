# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 21, 402 and more), shrunk, cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%) Greatest absolute difference: 5.191035270690918 at index (1,) (up to 1e-05 allowed) Greatest relative difference: 2.6079087257385254 at inde...
# eager: set([1, 1, 2]) == {1, 2}: idx == [1, 2], len(s) == 2, the result is x[:, [1, 2]].sum(1) * 2.
# captured: the traced set keeps the duplicates: idx == [1, 1, 2], len(s) == 3 (wrong values, and (3, [1, 1, 2]) returned).
# cause: values.SetValue.__init__ de-duplicates with dict.fromkeys(items), but the items are Value wrappers (a new Const per element), so equal constants are never merged; builtins_table._set and BUILD_SET (handlers/containers.py) both go through it. It should de-duplicate by python_value.
import torch


def f(x):
    s = set([1, 1, 2])
    idx = sorted(s)
    return x[:, idx].sum(1) * len(s), (len(s), idx)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
