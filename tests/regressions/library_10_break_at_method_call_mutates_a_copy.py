# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 184, 201, 314, 340, 805, 926 and more), shrunk, cleaned by hand
# failure: mismatch:value: call 1 (make_inputs(0)): result[0]: Tensor-likes are not close! Mismatched elements: 3 / 3 (100.0%) Greatest absolute difference: 4.357579231262207 at index (2,) (up to 1e-05 allowed) Greatest relative difference: 2.000000238418579 at index...
# eager: d.popitem() removes 'b', so len(d) == 1 and sum(d.values()) == x.
# captured: dict.popitem is not modelled (a graph break, DL006), and the break code builds the dict twice: once as the receiver of `d.popitem` on the stack (the instruction runs on it) and once as the local `d` handed to the resume function, which still has 'b': len(d) == 2 and the sum is x + x * 2.
# cause: codegen.make_break_code calls count_shared on the stack values, but count_shared does not look into a MethodValue (the bound `d.popitem` on the stack holds d as .obj), so the DictValue reachable from the stack and from the locals is not recognised as shared and is rebuilt twice.
import torch


def f(x):
    d = {'a': x, 'b': x * 2}
    last = d.popitem()
    return sum(d.values()), len(d), last[0]


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
