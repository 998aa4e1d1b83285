# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 89, 381 and 6 others), shrunk, cleaned by hand
# failure: internal-error: call 1 (make_inputs(0)): dynamo_lite: internal error while capturing f; it runs eagerly. TypeError: object of type 'int' has no len()
# eager: len(5), sorted([1, ()]) and max([1, ()]) raise TypeError, caught by the program; the result is (x + 3, messages).
# captured: same value, but the TypeError escapes the tracer as an internal error (the frame runs eagerly and warns).
# cause: builtins_table._len (builtin_len), _sorted and _minmax call the real builtin on constants without turning its exception into a TracedException (as _fold and methods._const do), so it is not the user's exception but a crash of the tracer.
import torch


def f(x):
    msgs = []
    try:
        n = len(5)
    except TypeError as err:
        msgs.append(str(err))
        x = x + 1
    try:
        order = sorted([1, ()])
    except TypeError as err:
        msgs.append(str(err))
        x = x + 1
    try:
        top = max([1, ()])
    except TypeError as err:
        msgs.append(str(err))
        x = x + 1
    return x, msgs


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, generator=g).to(device),), {}
