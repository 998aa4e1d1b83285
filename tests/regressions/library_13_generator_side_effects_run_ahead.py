# dynamo_lite fuzz finding: library style (found by hand while diagnosing seed 1 program 1001517 at commit eef85ef, then by the generator pieces' GEN_LOG), cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[1]: length 2 != 1
# eager: a generator runs only as far as it is consumed: after one next(), LOG == ['start'].
# captured: LOG == ['start', 'rest'] (and the global LOG keeps both entries): the whole generator body ran at the call.
# cause: calls.py inlines a call of a generator function by running it to the end and returning IteratorValue(items) ("generator functions such as genexprs are run to completion", docs/architecture.md), so all of its side effects happen at the call, even those after the last value the program consumes (or never, after an early break). A generator whose body has side effects must run lazily (one step per next()) or graph-break (DL015) at the call.
import torch

LOG = []


def gen(t):
    LOG.append('start')
    yield t * 2
    LOG.append('rest')
    yield t * 3


def f(x):
    g = gen(x)
    first = next(g)
    return first, list(LOG)


def make_target():
    return f


def between_calls(i):
    LOG.clear()


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
