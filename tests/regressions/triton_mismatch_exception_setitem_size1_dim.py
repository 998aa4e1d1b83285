# dynamo_lite fuzz regression: program 3000023 of bench/fuzz.py --seed 3 --backend triton (H200), and 5000005 under TRITON_INTERPRET=1; hand-minimized
# failure: mismatch:exception: captured raised CompilationError: ... tmp0 = (0).to(tl.int64) ... AttributeError("'int' object has no attribute 'to'") but eager returned
# backend: triton
import torch


def f(x):
    x[0, 0] = -2.0
    return x


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 1, generator=g).to(device),), {}
