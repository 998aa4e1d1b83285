# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 13, 18, 107, 129, 269, 278 and more), shrunk, cleaned by hand
# failure: mismatch:value: call 2 (make_inputs(0)) after between_calls(1): result: Tensor-likes are not close! Mismatched elements: 8 / 8 (100.0%) Greatest absolute difference: 4.357579231262207 at index (0, 2) (up to 1e-05 allowed) Greatest relative difference: 0.66...
# eager: after `Layer.forward = scaled_forward` (between the calls) the second call returns x * 3.
# captured: the second call reuses the graph of the first call and returns x (the old Layer.forward).
# cause: inlining obj.forward(t) reads the method from the class but adds no guard on it: the guards are only `type(o) is Layer` (and G['Layer'] is the same object); replacing a class attribute (a method) does not change the class's identity. Class attributes that were read need a guard on their identity (or on the class's __dict__ version).
import torch


class Layer:
    def __init__(self, w):
        self.w = w

    def forward(self, t):
        return t


def scaled_forward(self, t):
    return t * self.w


def f(x):
    t = x
    for layer in [Layer(3.0)]:
        t = layer.forward(t)
    return t


def make_target():
    return f


def between_calls(i):
    Layer.forward = scaled_forward


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 4, generator=g).to(device),), {}
