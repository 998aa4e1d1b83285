"""Captured fx graph -> functional aten graph over a small op set.

`make_fx` retraces the graph at the aten level under a FakeTensorMode with `functionalize`, so
in-place ops (`add_`, `+=`, `x[0] = 3`) become pure ops plus a final `copy_` into each mutated
graph input, and `torch._C._set_grad_enabled` calls and autocast switches (`runtime.enter_autocast` /
`exit_autocast`) run during tracing instead of staying in the graph: the ops between them are
dispatched under autocast, so its casts are recorded as explicit `_to_copy` ops. Composite ops go through the decomposition table below (torch._decomp entries plus our
own `native_layer_norm`, which emits `var_mean` instead of prims, and `_foreach_*` ops, one op per
tensor) so the lowering table stays small. The few in-place ops decompositions leave behind are rewritten to their functional form.
Repeated pure ops of the same arguments are then merged (`merge_repeated_ops`: the same slice of
one attention mask taken by every layer is stored once, not once per layer).
"""
from __future__ import annotations

import copy
import functools
import operator
from typing import Optional

import torch
import torch._guards
import torch.fx
from torch._decomp import get_decompositions
from torch.fx.experimental.proxy_tensor import make_fx

from .lowerings import GraphNotLowerable

aten = torch.ops.aten

#: composite ops decomposed before lowering (into ops lowerings.py knows). Random ops (dropout)
#: stay aten calls, so they draw the same random numbers as eager.
DECOMPOSED = [
    "_softmax", "_log_softmax", "_safe_softmax", "gelu", "silu", "silu_", "gelu_", "hardswish",
    "hardsigmoid", "mish", "elu", "celu", "leaky_relu", "hardtanh", "softplus", "logsumexp", "addcmul",
    "addcdiv", "lerp", "rsub", "_native_batch_norm_legit_no_training",
    "_fused_rms_norm", "threshold", "tril", "triu", "zeros_like", "ones_like", "new_zeros",
    "new_ones", "new_full", "empty_like", "std", "glu", "logit", "erfc", "frac", "stack",
    "nan_to_num", "clamp_min", "clamp_max", "square", "full_like", "native_batch_norm",
    "_native_batch_norm_legit", "_native_batch_norm_legit_functional", "_batch_norm_no_update",
    "_batch_norm_with_update", "cudnn_batch_norm", "miopen_batch_norm", "linalg_vector_norm", "repeat", "expand_copy",
    # losses, activations, reductions and rearrangements that are aten calls of their own: their
    # decompositions are ops lowered here, fused with their neighbours
    "mse_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy", "_prelu_kernel", "hardshrink",
    "softshrink", "log_sigmoid_forward", "aminmax", "nansum", "std_mean", "renorm", "diag_embed",
    "index_fill", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "_weight_norm_interface",
    "im2col", "col2im", "upsample_bicubic2d", "logaddexp2", "special_xlog1py",
    "affine_grid_generator", "grid_sampler_2d",
    # backward graphs (training through AOTAutograd)
    "mse_loss_backward", "huber_loss_backward", "smooth_l1_loss_backward", "binary_cross_entropy_backward",
    "_prelu_kernel_backward", "log_sigmoid_backward",
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward",
    "hardtanh_backward", "leaky_relu_backward", "elu_backward", "softplus_backward", "mish_backward",
    "hardswish_backward", "hardsigmoid_backward", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm_backward", "native_group_norm_backward", "native_batch_norm_backward",
    "embedding_dense_backward", "slice_backward", "select_backward",
]


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xa = x.to(acc)
    var, mean = torch.var_mean(xa, dims, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = (xa - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    out = out.to(x.dtype)
    if x.device.type == "cpu":
        mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
    return out, mean, rstd


def _native_group_norm(x, weight, bias, N, C, HxW, group, eps):
    """Statistics over `x` viewed as (N, group, C/group, *spatial) (a split of C: an index
    rewrite, never a copy), and the normalize `x * a + b` in that same view, with one scale and
    shift per (sample, group, channel) computed where it is used: the normalize is in the
    statistics' domain, so one kernel reads x, reduces and writes the result (the scheduler fits
    ops that follow in x's own shape into that domain as well)."""
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    per_group = C // group
    spatial = list(x.shape[2:])
    xg = x.reshape(N, group, per_group, *spatial).to(acc)
    var, mean = torch.var_mean(xg, list(range(2, xg.dim())), correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    channel = [1, group, per_group] + [1] * len(spatial)
    scale = rstd if weight is None else rstd * weight.reshape(channel)
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias.reshape(channel)
    out = (xg * scale + shift).to(x.dtype).reshape(x.shape)
    return out, mean.reshape(N, group).to(x.dtype), rstd.reshape(N, group).to(x.dtype)


#: `torch._foreach_<op>(tensors, ...)` (functionalized from `_foreach_<op>_`, what optimizers
#: call) decomposes into one `<op>` per tensor, so the updates fuse like any pointwise op
FOREACH = [
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "maximum", "minimum", "clamp_min",
    "clamp_max", "pow", "copy", "zero", "neg", "abs", "sqrt", "rsqrt", "exp", "log", "log1p",
    "expm1", "reciprocal", "sigmoid", "tanh", "sign", "sin", "cos", "erf", "floor", "ceil",
    "trunc", "frac", "round",
]


def _foreach_decomposition(op: torch._ops.OpOverload, base: torch._ops.OpOverloadPacket):
    # arguments keyword-only in the per-tensor op are passed by name (`addcmul(..., value=)`,
    # which the foreach op takes by position as `value`, `scalar` or `scalars`)
    keyword_only = {a.name for o in base.overloads() for a in getattr(base, o)._schema.arguments if a.kwarg_only}
    names = []
    for a in op._schema.arguments:
        name = "value" if a.name in ("scalar", "scalars") and "value" in keyword_only else a.name
        names.append(name if name in keyword_only else None)

    def decomposed(*args, **kwargs):
        n = next(len(a) for a in args if isinstance(a, (list, tuple)))
        out = []
        for i in range(n):
            each = [a[i] if isinstance(a, (list, tuple)) else a for a in args]
            positional = [a for a, name in zip(each, names) if name is None]
            by_name = {name: a for a, name in zip(each, names) if name is not None}
            out.append(base(*positional, **by_name, **kwargs))
        return out
    decomposed.__name__ = f"foreach_{base.__name__}"
    return decomposed


def _foreach_table() -> dict:
    table = {}
    for name in FOREACH:
        packet, base = getattr(aten, f"_foreach_{name}", None), getattr(aten, name, None)
        if packet is None or base is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            schema = op._schema
            if overload.endswith("out") or schema.is_mutable:
                continue
            if any(a.name == "scalars" and str(a.type) == "Tensor" for a in schema.arguments):
                continue            # one scalar per tensor held in a tensor: stays an aten call
            table[op] = _foreach_decomposition(op, base)
    return table


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    packets = [getattr(aten, name) for name in DECOMPOSED if hasattr(aten, name)]
    table = dict(get_decompositions(packets))
    table[aten.native_layer_norm.default] = _native_layer_norm
    table[aten.native_group_norm.default] = _native_group_norm
    table.update(_foreach_table())
    return table


def grad_mode_after(gm: torch.fx.GraphModule) -> Optional[bool]:
    """The grad mode a graph leaves behind (its last `_set_grad_enabled`), or None."""
    last = None
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            last = bool(node.args[0])
    return last


def to_aten(gm: torch.fx.GraphModule, example_inputs: list) -> torch.fx.GraphModule:
    """Functional aten graph of `gm` for inputs like `example_inputs` (real tensors or ints)."""
    def run(*args):
        return _Runner(gm).run(*args)

    inputs = [int(x) if isinstance(x, torch.SymInt) else x for x in example_inputs]
    # no grad (restored on exit); no ambient torch.compile tracing context, whose fake mode
    # would hand us symbolic sizes for our static specialization
    with torch.no_grad(), torch._guards.tracing(None):
        traced = make_fx(torch.func.functionalize(run), decomposition_table=decomposition_table(),
                         tracing_mode="fake", _allow_non_fake_inputs=True)(*inputs)
    functionalize_leftovers(traced)
    merge_repeated_ops(traced)
    _refuse_raising_reductions(traced.graph)
    traced.graph.eliminate_dead_code()
    traced.recompile()
    return traced


def from_aten(gm: torch.fx.GraphModule, example_inputs: list) -> torch.fx.GraphModule:
    """`to_aten`'s result for a graph that is already one: a part AOTAutograd traced through the
    same decomposition table, functionalized. Tracing it again (make_fx: ~40% of a ResNet-50
    training graph's compile on the CPU) would only refresh its nodes' fake values, which is all
    that is done here, for the example inputs as they come (a backward's saved activations in the
    layouts our forward gave them, not the ones AOTAutograd assumed: GraphLowering reads strides
    there)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))      # (the caller's graph keeps its values)
    modes = {x.fake_mode for x in example_inputs if getattr(x, "fake_mode", None) is not None}
    mode = modes.pop() if len(modes) == 1 else FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [int(x) if isinstance(x, torch.SymInt) else x for x in example_inputs]
    with torch.no_grad(), torch._guards.tracing(None):
        FakeTensorProp(gm, mode).propagate(*inputs)
    functionalize_leftovers(gm)
    merge_repeated_ops(gm)
    _refuse_raising_reductions(gm.graph)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


#: reductions without an identity: over an empty dim eager raises, their fake kernels do not
_NO_IDENTITY = {aten.max.default, aten.min.default, aten.amax.default, aten.amin.default, aten.argmax.default,
                aten.argmin.default, aten.max.dim, aten.min.dim}


def _refuse_raising_reductions(graph: torch.fx.Graph) -> None:
    """A max, min or pick over an empty dim raises in eager, even where its result is never used
    (the dead-code pass would drop it, a kernel would have nothing to compute): such a graph runs
    as captured, raising eager's error."""
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _NO_IDENTITY:
            continue
        x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if not isinstance(x, torch.Tensor) or x.numel() != 0:
            continue
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dims = range(x.dim()) if dims is None or dims == [] else [dims] if isinstance(dims, int) else dims
        if x.dim() == 0 or any(x.shape[d] == 0 for d in dims):
            raise GraphNotLowerable(f"{node.target.overloadpacket.__name__} over an empty dim (eager raises)")


#: what a pure op may not be tagged with: its result differs between two calls
_IMPURE_TAGS = (torch.Tag.nondeterministic_seeded,)


def _pure(target) -> bool:
    """An aten op whose result depends on its arguments alone: writes none of them, draws no
    random numbers."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    return not schema.is_mutable and not any(tag in target.tags for tag in _IMPURE_TAGS) \
        and not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _key(x):
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *map(_key, x))
    if isinstance(x, dict):
        return ("dict", *((k, _key(v)) for k, v in sorted(x.items())))
    if isinstance(x, float) and x != x:
        raise TypeError("NaN")                  # (never equal to itself: no merge)
    hash(x)
    return (type(x).__name__, x)


def merge_repeated_ops(gm: torch.fx.GraphModule) -> None:
    """Nodes that apply the same pure op to the same arguments become one: each layer of a
    transformer slices the model's one attention mask the same way, and an attention mask is an
    argument of an aten call, so every copy of the slice would be computed by a kernel of its own.
    Values that are returned, or viewed by a returned value, are left alone (two outputs that eager
    returns as two tensors stay two)."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    returned, todo = set(), [a for a in output.all_input_nodes]
    while todo:                                 # the outputs and what they view
        n = todo.pop()
        if n in returned:
            continue
        returned.add(n)
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                and n.target._schema.returns and n.target._schema.returns[0].alias_info is not None:
            todo.extend(n.all_input_nodes)
    first: dict = {}
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node in returned or not _pure(node.target):
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
        except TypeError:
            continue
        if key in first:
            node.replace_all_uses_with(first[key])
            gm.graph.erase_node(node)
        else:
            first[key] = node


#: `a |= b` on tensors calls aten::__ior__, which functionalization rejects: use the method
_INPLACE_BITWISE = {
    operator.iand: torch.Tensor.bitwise_and_, operator.ior: torch.Tensor.bitwise_or_,
    operator.ixor: torch.Tensor.bitwise_xor_, operator.ilshift: torch.Tensor.bitwise_left_shift_,
    operator.irshift: torch.Tensor.bitwise_right_shift_,
}


#: `_foreach_addcdiv(_)` / `_foreach_addcmul(_)` with one scalar per tensor held in a tensor
#: (torch.optim's foreach Adam/AdamW stack their step sizes so under a compiler): the op's own
#: kernel reads the scalars' values, which a fake tensor has not ("Expected scalars to be on CPU,
#: got meta"). Spelled per tensor, `self + scalars[i] * (t1 <op> t2)`, as the op computes it. The
#: scalars stay where they are (the CPU next to CUDA tensors): the kernels read each as an argument.
_TENSOR_SCALED = {torch._foreach_addcdiv_: (torch.div, True), torch._foreach_addcmul_: (torch.mul, True),
                  torch._foreach_addcdiv: (torch.div, False), torch._foreach_addcmul: (torch.mul, False)}


def _foreach_with_tensor_scalars(product, in_place: bool, self, tensor1, tensor2, scalars):
    terms = [scalars[i] * product(b, c) for i, (b, c) in enumerate(zip(tensor1, tensor2))]
    if in_place:
        for a, term in zip(self, terms):
            a.add_(term)
        return list(self)           # what the graph's (dead) readers of the in-place op's result index
    return [a + term for a, term in zip(self, terms)]


class _Runner(torch.fx.Interpreter):
    """Runs the captured graph for make_fx, with in-place bitwise operators made traceable and
    foreach ops with a tensor of scalars spelled per tensor."""

    def call_function(self, target, args, kwargs):
        if target in _INPLACE_BITWISE and args and isinstance(args[0], torch.Tensor):
            target = _INPLACE_BITWISE[target]
        if target in _TENSOR_SCALED:
            call = dict(zip(("self", "tensor1", "tensor2", "scalars"), args), **kwargs)
            if isinstance(call.get("scalars"), torch.Tensor) and len(call) == 4:
                return _foreach_with_tensor_scalars(*_TENSOR_SCALED[target], **call)
        return super().call_function(target, args, kwargs)


def _is_view(target) -> bool:
    return any(r.alias_info is not None for r in target._schema.returns)


def _functional_variant(target):
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_"):
        return None
    packet = getattr(aten, name[:-1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def functionalize_leftovers(gm: torch.fx.GraphModule) -> None:
    """Rewrite in-place ops left by decompositions (`mean.add_(eps)`) to functional ones; only
    where that is safe: the mutated value is an intermediate, not a view, with no later reader."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in list(gm.graph.nodes):
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if not target._schema.is_mutable or target is aten.copy_.default:
            continue
        mutated = node.args[0] if node.args else None
        functional = _functional_variant(target)
        safe = (functional is not None and isinstance(mutated, torch.fx.Node)
                and mutated.op == "call_function" and isinstance(mutated.target, torch._ops.OpOverload)
                and not _is_view(mutated.target))
        if not safe:
            raise NotImplementedError(f"in-place {target} on a graph input or view after functionalization")
        later = [u for u in mutated.users if u is not node and order[u] > order[node]]
        node.target = functional
        for user in later:
            user.replace_input_with(mutated, node)
