# dynamo_lite fuzz regression: program 12000028 of bench/fuzz.py --seed 12, shrunk from 62 to 22 lines
# failure: internal-error: call 1 (make_inputs(0)): dynamo_lite: internal error while capturing f (<fuzz-12000028>:25); it runs eagerly. KeyError: narrow
import torch

def f(x, lst, flag, idx):
    w1_m1 = lst[0].narrow(0, 0, 1)
    kk2_m1 = int(x)

    def inner6_m1(t):
        w1_m1[1] = 0

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand()
    lst = [rand(3) for _ in range(2)]
    flag = False
    idx = torch.randint
    return ((x, lst, flag, idx), {})
