# dynamo_lite fuzz regression: program 26000394 of bench/fuzz.py --seed 26 --backend triton (TRITON_INTERPRET=1), shrunk from 48 to 18 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised RuntimeError: result type Float can't be cast to the desired output type Long but captured returned [tensor([[ 1.5410, -0.2934, -2.1788,  0.5684, -1.0845],
# backend: triton
import torch

def helper0(a, b, k=2):
    v1_h1 = b
    v1_h1.mul_(1.5)

def f(x, y, lst, d):
    dd1_m2 = helper0(torch, torch.full((), 2))

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    x = 3
    y = 3
    lst = 5
    d = 'a'
    return ((x, y, lst, d), {})
