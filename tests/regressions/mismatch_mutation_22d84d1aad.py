# dynamo_lite fuzz regression: program 1001669 of bench/fuzz.py --seed 1, shrunk from 75 to 29 lines
# failure: mismatch:mutation: call 1 (make_inputs(0)): inputs after the call[0][2]: keys ['a', 'b'] != ['a', 'b', 'z']
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.layers = [torch.nn.Linear(4, 4)]

class Model(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.mod = Mod()

    def forward(self, x, y, d, flag, s):
        d.setdefault('z')
        w2_m2 = self.mod.layers[0](torch.full((4,), 2))

def make_target():
    model = Model()
    return model

def make_inputs(seed, device='cpu'):
    x = 3
    y = 3
    d = {}
    flag = True
    s = torch.rand
    return ((x, y, d, flag, s), {})
