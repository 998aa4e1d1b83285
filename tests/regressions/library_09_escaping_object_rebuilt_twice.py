# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 2, 71, 199, 233, 450, 758, 828, 1122, 1566 and about 25 more), shrunk, cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[1]: False != True
# eager: the Record made in f is one object: it is store[-1], REGISTRY[-1] and the returned value; `rec.value = ...` after the break changes all three.
# captured: the generated code rebuilds the Record once for the replay of store.append, once for REGISTRY.append and once for the return value (or for the resume function's local): three different objects; the write after dl.graph_break() reaches only the resume function's copy, so store[-1].value is still x + 1 and `store[-1] is rec` is False.
# cause: codegen.Emitter.count_shared (which makes a value reachable twice be built once, kept in a ___tmp) is fed the side effects' values (count_shared_in_effects), the result, and at a break the stack and locals, but not the contents of the mutated containers replayed from tracer.mutated (lists/dicts/sets that existed before the call: store, REGISTRY, an object's list attribute). A value both inside such a container and returned/live is therefore rebuilt per reference.
import torch

import dynamo_lite as dl


class Record:
    def __init__(self, value, name):
        self.value = value
        self.name = name


REGISTRY = []


def f(x, store):
    rec = Record(x + 1, 'r')
    store.append(rec)
    REGISTRY.append(rec)
    dl.graph_break()
    rec.value = rec.value * 2
    return rec, store[-1] is rec


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device), []), {}
