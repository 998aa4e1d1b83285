# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, program 48 and 137 others), shrunk, cleaned by hand
# failure: internal-error: call 1 (make_inputs(0)): dynamo_lite: internal error while capturing __new__; it runs eagerly. ValueError: tuple.index(x): x not in tuple
# eager: Interned('k') returns the cached instance, the result is x + 2 (hits == 2).
# captured: same value, but capturing Interned.__new__ fails inside the engine (the frame runs eagerly and warns "internal error").
# cause: attributes._super_attr looks the attribute up in python_class(obj.obj).__mro__; in __new__ (and in classmethods) super()'s second argument is the class itself, so that is type.__mro__ and mro.index(Interned) raises ValueError. CPython uses cls.__mro__ when the second argument is a subclass (super(C, cls)).
import torch


class Interned:
    _cache = {}

    def __new__(cls, key):
        if key in cls._cache:
            return cls._cache[key]
        obj = super().__new__(cls)
        obj.hits = 0
        cls._cache[key] = obj
        return obj

    def __init__(self, key):
        self.hits += 1


def f(x):
    a = Interned('k')
    b = Interned('k')
    return x + a.hits + (a is b)


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
