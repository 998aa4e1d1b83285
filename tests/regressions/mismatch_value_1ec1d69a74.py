# dynamo_lite fuzz regression: program 70100000332 of bench/fuzz.py --backend triton --seed 70100, shrunk from 86 to 20 lines
# failure: mismatch:value: call 1 (make_inputs(0)): result[3]: 0.020224353298544884 != 0.020224332809448242
# backend: triton
import torch

def f(x, y, lst, flag, idx):
    val1_m1 = float(y.mean())
    return val1_m1

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.manual_seed(seed)

    def rand(*shape):
        return torch.randn(shape)
    x = rand(4, 3)
    y = rand(3, 4)
    lst = 4
    flag = False
    idx = torch
    return ((x, y, lst, flag, idx), {})
