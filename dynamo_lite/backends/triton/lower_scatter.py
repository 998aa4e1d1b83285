"""Lowerings of index_put with accumulate=True: values added at the positions an index tensor
names, as a kernel of atomic adds (ir.ScatterNode) instead of an aten call.

What reaches us is AOTAutograd's decomposition of an embedding's backward,
`_unsafe_masked_index_put_accumulate(zeros, mask, [indices], grad)` (the gradient rows added into
the rows their tokens name, skipping masked positions: the padding index), and the unchecked
`_unsafe_index_put(x, [indices], values, accumulate=True)` some other decompositions leave. The
values are computed where they are added (their producers are inlined into the kernel that adds
them, as into any kernel), and the zeros or the tensor added into are stored by a first kernel.
Eager adds on CUDA in a fixed order (it sorts the indices first); atomic adds do not, so repeated
positions may differ from eager in the last bits of a float, as Inductor's do. With
`torch.use_deterministic_algorithms(True)` these stay aten calls (the guards of the graph check
that setting). The checked `index_put` (eager raises for an index out of range) and integer
tensors stay aten calls.
"""
from __future__ import annotations

import torch

from .ir import Affine, Op, cast, const, domain_vars
from .lowerings import NotLowerable, binary, out_meta, register, where
from .values import Value, broadcast_to

aten = torch.ops.aten

#: destination dtypes the kernel adds into (Triton's atomic add; fp16/bf16 sums would round at
#: every add, and eager's decomposition accumulates an embedding's gradient in fp32 anyway)
ADD_DTYPES = (torch.float32,)


@register(aten._unsafe_masked_index_put_accumulate.default)
def lower_masked_index_put_accumulate(lw, node, x, mask, indices, values):
    """`x.index_put(indices, values * mask, accumulate=True)` with the indices clamped into
    range (torch._decomp's definition), for one index tensor over x's first dim."""
    return _scatter_add(lw, node, x, indices, values, mask, clamp=True)


@register(aten._unsafe_index_put.default)
def lower_unsafe_index_put(lw, node, x, indices, values, accumulate=False):
    if not accumulate:
        raise NotLowerable("index_put without accumulate")
    return _scatter_add(lw, node, x, indices, values, None, clamp=False)


def _scatter_add(lw, node, x, indices, values, mask, clamp: bool) -> Value:
    meta = out_meta(node)
    if torch.are_deterministic_algorithms_enabled():
        raise NotLowerable("atomic adds while deterministic algorithms are asked for")
    if not (isinstance(x, Value) and isinstance(values, Value) and isinstance(indices, (list, tuple))
            and len(indices) == 1 and isinstance(indices[0], Value)) or x.ndim == 0:
        raise NotLowerable("an index_put of this kind (one index tensor over the first dim)")
    index = indices[0]
    if x.dtype not in ADD_DTYPES or meta.dtype != x.dtype or index.dtype not in (torch.int32, torch.int64):
        raise NotLowerable(f"an index_put into {x.dtype} with {index.dtype} indices")
    if mask is not None and not isinstance(mask, Value):
        raise NotLowerable("a mask that is no tensor")
    domain = index.sizes + x.sizes[1:]
    try:
        values = broadcast_to(values, domain)
        mask = broadcast_to(mask, domain) if mask is not None else None
    except ValueError:
        raise NotLowerable("values that do not broadcast to the indexed shape") from None
    rows = x.sizes[0]
    v = domain_vars(len(domain))
    position = cast(index.load(v[:index.ndim]), torch.int64)
    if clamp:             # clamp(min=-rows, max=rows - 1): always a row of x
        position = binary(Op.MIN, binary(Op.MAX, position, const(-rows, torch.int64)), const(rows - 1, torch.int64))
    position = where(binary(Op.LT, position, const(0, torch.int64)),
                     binary(Op.ADD, position, const(rows, torch.int64)), position)
    # an index out of range (undefined in the unchecked op) adds nothing
    ok = binary(Op.AND, binary(Op.GE, position, const(0, torch.int64)), binary(Op.LT, position, const(rows, torch.int64)))
    if mask is not None:
        ok = binary(Op.AND, ok, cast(mask.load(v), torch.bool))
    init = cast(x.load(domain_vars(x.ndim)), x.dtype)
    body = cast(values.load(v), x.dtype)
    return lw.add_scatter(x.sizes, x.dtype, x.device, init, domain, body,
                          (Affine(0),) + tuple(v[index.ndim:]), position, ok)
