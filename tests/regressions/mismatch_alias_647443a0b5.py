# dynamo_lite fuzz regression: program 9090000032 of bench/fuzz.py --seed 9090, shrunk from 103 to 35 lines
# failure: mismatch:alias: call 1 (make_inputs(0)): output aliasing (same input, shares storage with inputs, shares with output #) [((), (), None), ((), (), None), ((), (), None)] != eager [((), (), None), ((), (), 0), ((), (), None)]
# backend: triton
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layers = [torch.nn.Linear(3, 3), torch.nn.Tanh()]

class Model(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.mod = Mod()

    def forward(self, x, lst, flag):
        with torch.set_grad_enabled(False):
            for layer5_m4 in self.mod.layers:
                x = layer5_m4(x)
        v6_m2 = x
        tp10_m2 = (v6_m2.reshape(3), torch)
        p11_m2 = tp10_m2
        return (p11_m2, v6_m2)

def make_target():
    torch.manual_seed(0)
    model = Model()
    return model

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3, 3)
    return (x, {})
