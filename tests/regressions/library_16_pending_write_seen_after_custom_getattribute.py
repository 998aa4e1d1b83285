# dynamo_lite fuzz regression: program 17 of bench/fuzz.py --style library --seed 0, shrunk from 104 to 36 lines
# failure: mismatch:globals: call 1 (make_inputs(0)): program globals['Scaler1.<class attributes>']['reads']: 4 != 6
import torch

class Scaler1:
    reads = 0

    def __init__(self, gain, bias):
        self.gain = gain
        self._bias = bias

    @property
    def bias(self):
        return self._bias

    def apply(self, t):
        return self.gain + self.bias

    def __getattribute__(self, name):
        if not name.startswith('_'):
            type(self).reads += 1
        return object.__getattribute__(self, name)

def f(x, n, sc1):
    t = x
    t = sc1.apply(t)
    has = hasattr(sc1, 'bias')
    sc1.tmp = 1.0
    t = hasattr(sc1, 'tmp')

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    x = torch
    n = 2
    sc1 = Scaler1(1.0, 0.5)
    return ((x, n, sc1), {})
