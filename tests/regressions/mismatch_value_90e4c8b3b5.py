# dynamo_lite fuzz regression: program 70001000167 of bench/fuzz.py --seed 70001, shrunk from 87 to 20 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[3]: Tensor-likes are not close! Mismatched elements: 4 / 12 (33.3%) Greatest absolute difference: 4.0 at index (1, 0) (up to 0.0001 allowed) Greatest relative difference: 0.5 at index (1, 0) (up to 0.001 allowed)
# backend: triton
import torch

def f(x, d, flag):
    tp4_m1 = (lambda v: v.as_strided((2, 2, 4), (v.stride(0),) + v.stride()))(x)
    q6_m1 = tp4_m1
    q6_m1 += q6_m1
    return x

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape)
    x = rand(4, 3)
    d = 'a'
    flag = False
    return ((x, d, flag), {})
