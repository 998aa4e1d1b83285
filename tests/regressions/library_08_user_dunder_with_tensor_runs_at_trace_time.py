# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 31, 65, 88, 92, 189 and more), shrunk, cleaned by hand
# failure: mismatch:value: call 3 (make_inputs(1)): result.__dict__['t']: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%) Greatest absolute difference: 4.48093318939209 at index (2,) (up to 1e-05 allowed) Greatest relative difference: 36.3256530761718...
# eager: Vec.__add__ returns self, so the result is the Vec made in this call: its .t is x * 2 of this call's x.
# captured: call 3 (new input values) returns the Vec object of the first call (its .t is the first call's x * 2), and call 2 returns that same object again.
# cause: `a + a` breaks (add of newobject and newobject); the resume function then traces `e + b` with e an ObjectValue (an argument, with a source) and b a tensor. operators.binary treats e as a Python constant (is_python_constant -> _value_is_stable: default __eq__/__hash__, so "stable"), passes Const(python_value(e)) -- the real object -- to graph.call(operator.add, ...), so Vec.__add__ runs while tracing on fake tensors; its result has no tensor, becomes a constant, and the generated code returns `LOAD_CONST <the Vec object of call 1>` under the guard `type(L['___stack0']) is Vec`. The same happens with a constant operand (`e + 3.0`: both "constants", _fold runs Vec.__add__ for real; seed 1 program 1000021). _value_is_stable must not call an object stable when its class defines the operator's dunders in Python: dispatch to the dunder (inline it) instead of folding.
import torch


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return self


def f(x):
    a = Vec(x * 2)
    b = x
    e = a + a + b
    return e


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
