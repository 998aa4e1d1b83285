# dynamo_lite fuzz finding: library style (bench/fuzz.py --style library --seed 0 at commit 32bb2b6, programs 152, 293, 1217, 1225, 1626, 1771), shrunk, cleaned by hand
# failure: mismatch:exception: call 1 (make_inputs(0)): captured raised UnboundLocalError: cannot access local variable '___tmp0' where it is not associated with a value but eager returned
# eager: Flag(x, '') is false, so the result is (x * 0.5, 'v').
# captured: UnboundLocalError: cannot access local variable '___tmp0' where it is not associated with a value.
# cause: the truth value of a user object breaks the graph (DL009) at POP_JUMP_IF_FALSE; codegen.make_break_code emits the call of the resume function twice, once per branch. `b` (a new object reachable twice: locals b and e) is rebuilt in the first arm and kept in ___tmp0 (Emitter.memo); the second arm finds it in the memo and emits LOAD_FAST ___tmp0, which that arm never stored. Values shared by both arms must be built before the jump (or the memo must be per arm).
import torch


class Flag:
    def __init__(self, t, tag='v'):
        self.t = t
        self.tag = tag

    def __bool__(self):
        return self.tag != ''


def f(x):
    b = Flag(x)
    e = b
    k = 2.0 if Flag(x, '') else 0.5
    return x * k, e.tag


def make_target():
    return f


def make_inputs(seed, device='cpu'):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=g).to(device),), {}
