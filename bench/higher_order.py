"""Graph counts of higher-order functions (torch.cond, torch.func) under dynamo_lite and TorchDynamo
(backend="eager"), and whether dynamo_lite's results equal eager's. Run: python bench/higher_order.py
"""
import os
import sys

# bench/triton.py would shadow the triton package that torch.compile imports.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import dynamo_lite as dl  # noqa: E402
from torch.func import grad, hessian, jacfwd, jacrev, vmap  # noqa: E402
W = torch.randn(3)
def helper(r, s): return torch.sin(r) * s + W
CASES = {
  "cond tensor pred": (lambda x: torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,)), (torch.randn(3),)),
  "cond closure": (lambda x: torch.cond(x.sum() > 0, lambda a: a * W, lambda a: a + W, (x,)), (torch.randn(3),)),
  "cond constant pred": (lambda x: torch.cond(True, lambda a: a + 1, lambda a: a - 1, (x,)), (torch.randn(3),)),
  "cond nested": (lambda x: torch.cond(x.sum() > 0, lambda a: torch.cond(a.max() > 1, lambda q: q * 2, lambda q: q * 3, (a,)), lambda a: a - 1, (x,)), (torch.randn(3),)),
  "vmap": (lambda x: vmap(lambda r: r.sin() * 2)(x), (torch.randn(4, 3),)),
  "vmap in_dims=(1,None)": (lambda x, y: vmap(helper, in_dims=(1, None))(x, y), (torch.randn(3, 5), torch.randn(3))),
  "vmap out_dims=(1,0)": (lambda x: vmap(lambda r: (r * 2, r.sum()), out_dims=(1, 0))(x), (torch.randn(4, 3),)),
  "vmap nested": (lambda x, s: vmap(vmap(helper, in_dims=(0, None)), in_dims=(0, None))(x, s), (torch.randn(2, 4, 3), torch.randn(3))),
  "grad": (lambda x: grad(lambda t: (t.sin() ** 2).sum())(x), (torch.randn(3),)),
  "grad argnums=(0,1)": (lambda x, y: grad(lambda a, b: (a * b.exp()).sum(), argnums=(0, 1))(x, y), (torch.randn(3), torch.randn(3))),
  "grad has_aux": (lambda x: grad(lambda t: ((t ** 2).sum(), t.cos()), has_aux=True)(x), (torch.randn(3),)),
  "jacrev": (lambda x: jacrev(lambda t: t.sin() * W)(x), (torch.randn(3),)),
  "jacfwd": (lambda x: jacfwd(lambda t: t.sin() * W)(x), (torch.randn(3),)),
  "hessian": (lambda x: hessian(lambda t: (t ** 3).sum())(x), (torch.randn(3),)),
  "vmap(grad)": (lambda x: vmap(grad(lambda t: t.sin().sum()))(x), (torch.randn(4, 3),)),
}
def counting():
    gs = []
    def be(gm, ex):
        gs.append(gm); return gm.forward
    return be, gs
print(f"{'case':24} {'TorchDynamo':>11} {'dynamo_lite':>11}  same values")
for name, (f, args) in CASES.items():
    torch._dynamo.reset(); be, tg = counting()
    ref = torch.compile(f, backend=be)(*args)
    dl.reset(); be2, dg = counting()
    got = dl.capture(f, backend=be2)(*args)
    eager = f(*args)
    flat = lambda o: [o] if isinstance(o, torch.Tensor) else [t for i in o for t in flat(i)]
    same = all(torch.allclose(a, b) for a, b in zip(flat(eager), flat(got))) and len(flat(eager)) == len(flat(got))
    print(f"{name:24} {len(tg):>11} {len(dg):>11}  {same}")
