# dynamo_lite fuzz regression: program 1000799 of bench/fuzz.py --style library --seed 1, shrunk from 137 to 38 lines
# cause: guards and the tracer read the instance's attributes with getattr, running its class's
# counting __getattribute__ (now they use object.__getattribute__ / GenericAttrSource).
# failure: mismatch:globals: call 2 (make_inputs(0)) after between_calls(1): program globals['Scaler2.<class attributes>']['reads']: 12 != 8
import torch

class Scaler2:
    reads = 0

    def __init__(self, gain, bias):
        self.gain = gain
        self._bias = bias

    @property
    def bias(self):
        return self._bias

    def apply(self, t):
        return t * self.gain + self.bias

    def __getattribute__(self, name):
        if not name.startswith('_'):
            Scaler2.reads += 1
        return object.__getattribute__(self, name)

def f(x):
    t = x
    sc2 = Scaler2(2.0, 3.0)
    t = sc2.apply(t)
    sc2.tmp = 1.0
    if t.sum():
        pass
    delattr(sc2, 'tmp')
    t = hasattr(sc2, 'tmp')

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    rows = seed
    x = torch.randn(rows, generator=torch.Generator().manual_seed(seed))
    return ((x,), {})
