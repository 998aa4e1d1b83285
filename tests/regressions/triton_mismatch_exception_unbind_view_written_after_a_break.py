# dynamo_lite fuzz regression: program 70500000063 of bench/fuzz.py --seed 70500 --backend triton (TRITON_INTERPRET=1), shrunk by hand from 71 to 22 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised RuntimeError: Output 0 of Unbind is a view and is being modified inplace. [...] but captured returned (tensor(0.),)
# backend: triton
import torch


class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.GELU()])


def f(x, m):
    for layer in m.layers:
        x = layer(x)
    for row in x:
        row *= row * 2.0
    return (x.sum(),)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(0)
    x = torch.randn((3, 8), generator=g).to(device)[:, ::2]
    return (x, torch.nn.Module.to(Mod(), device)), {}
