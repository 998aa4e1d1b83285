# dynamo_lite fuzz regression: program 12001455 of bench/fuzz.py --seed 12, shrunk from 75 to 33 lines
# failure: mismatch:exception: call 1 (make_inputs(0)): eager raised RuntimeError: A view was created in no_grad mode and is being modified inplace with grad mode enabled. This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the 
import torch

class Mod(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

class Model(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.mod = Mod()

    def forward(self, x, d, s, z):
        v1_m2 = x
        for row3_m2 in v1_m2:
            row3_m2 += self.mod.lin(row3_m2)

def make_target():
    torch.manual_seed(0)
    model = Model()
    return model

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3, 4)
    d = 'a'
    s = torch.rand
    z = 2
    return ((x, d, s, z), {})
