# dynamo_lite fuzz regression: program 27000256 of bench/fuzz.py --seed 27 --backend triton (TRITON_INTERPRET=1), shrunk from 67 to 19 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 4 / 4 (100.0%) Greatest absolute difference: 0.1170196384191513 at index (0,) (up to 0.0001 allowed) Greatest relative difference: 6.3890557289123535 at index (0,) (up to 0.001 allowed)
# cause: x ** 2 of a constant x lowered to x (lower_pow took a constant base for its empty product)
# backend: triton
import torch

class Mod(torch.nn.Module):
    pass

def f(x, lst, flag, s, m):
    v6_m1 = torch.full((4,), 2).exp() ** 2
    return v6_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    x = 3
    lst = 4
    flag = True
    s = torch
    m = Mod()
    return ((x, lst, flag, s, m), {})
