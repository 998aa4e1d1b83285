"""torch's higher-order ops that take a Python function: `torch.cond`, activation checkpointing
and `associative_scan`.

`torch.cond(pred, true_fn, false_fn, operands)` with a tensor predicate keeps both branches, as
TorchDynamo does: each branch is traced by our tracer into an fx subgraph (subgraphs.py), the
subgraphs become submodules of the graph, and one node calls
`torch.ops.higher_order.cond(pred, cond_true_0, cond_false_0, (operands..., lifted...))`, which
both the eager backend and inductor run. Eager torch.cond would compile the branches with
TorchDynamo; we never get there. With a Python-constant predicate (a bool, or a size that
specializes under a guard) eager torch.cond simply calls the taken branch, and so do we:
it is inlined. Branches must be pure (DL032), take and return tensors with the same structure
and metadata, and not return their inputs (eager refuses aliasing); otherwise the call runs
eagerly, where torch raises the same error eager would.

`torch.utils.checkpoint.checkpoint(fn, *tensors, use_reentrant=..., ...)` (activation
checkpointing, both flavours) traces `fn` into a subgraph the same way and records one node
calling `run_checkpoint`: the real `checkpoint` with the same keyword arguments, on the same
tensors, of a function that runs the subgraph with the tensors `fn` closed over (parameters)
still closed over. So forward, recomputation in backward, which inputs get gradients (reentrant
checkpointing gives none to parameters of a block whose inputs do not require grad), RNG state
and the early stop are eager's. (TorchDynamo's `tag_activation_checkpoint` instead always runs
the non-reentrant flavour and does not preserve the RNG state.)

The torch.func transforms (vmap, grad, jacrev, ...) live in func_transforms.py.

`torch._higher_order_ops.associative_scan(combine_fn, xs, dim)` is what libraries call on their
compile path (transformers' Mamba when `torch.compiler.is_compiling()`). Its eager
implementation either vmaps `combine_fn` or compiles it with TorchDynamo, neither of which we
may put in a graph. Instead the scan is unrolled here: `combine_fn` is inlined once per element
along `dim`, on exactly the per-element slices that vmap would hand it, and the results are
stacked. The values are the scan's own (the combine function is associative by contract), in
the order of a sequential scan. Long scans would unroll into huge graphs, so past
`MAX_UNROLLED_SCAN` elements the call is a graph break instead.
"""
from __future__ import annotations

import torch

from . import breaks, function_modes
from .breaks import Unsupported
from .modelled import models
from .subgraphs import align_lifted, repack, trace_body
from .values.base import Const, Value
from .values.containers import SeqValue
from .values.tensors import SymValue, TensorValue

MAX_UNROLLED_SCAN = 64


# ---- torch.cond ---------------------------------------------------------------------------------
@models(torch.cond)
def _cond(frame, args: list, kwargs: dict) -> Value:
    pred, true_fn, false_fn, operands = _bind_cond(args, kwargs)
    if isinstance(pred, SymValue):       # a Python bool in eager (a comparison of sizes): specialize it
        pred = Const(pred.truthy(frame))
    if pred.is_python_constant():
        taken = true_fn if pred.as_python() else false_fn
        return taken.call(frame, list(operands), {})
    if not isinstance(pred, TensorValue) or pred.example.numel() != 1:
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond with a predicate other than a bool or a one-element tensor")
    if not all(isinstance(o, TensorValue) for o in operands):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond with operands other than tensors")
    return cond(frame, pred, true_fn, false_fn, operands)


def cond(frame, pred: TensorValue, true_fn: Value, false_fn: Value, operands: list) -> Value:
    """Both branches traced into subgraphs and one `torch.ops.higher_order.cond` node."""
    function_modes.refuse_under_mode(frame, "torch.cond")
    examples = [o.example for o in operands]
    branches = [trace_body(frame, fn, examples, what="torch.cond", flatten=True) for fn in (true_fn, false_fn)]
    true_body, false_body = branches
    if not true_body.output_examples():
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond branches that return no tensor")
    _check_branches_agree(true_body, false_body)
    for body in branches:
        _check_no_aliasing(body)
    lifted = align_lifted(branches)
    graph = frame.tracer.graph
    true_gm, false_gm = graph.subgraph(true_body.gm, "cond_true"), graph.subgraph(false_body.gm, "cond_false")
    out = graph.call("call_function", torch.ops.higher_order.cond,
                     (pred, true_gm, false_gm, SeqValue([*operands, *lifted], tuple)), {})
    return repack(true_body.output, out.items)


def _bind_cond(args: list, kwargs: dict) -> tuple:
    names = ("pred", "true_fn", "false_fn", "operands")
    bound = dict(zip(names, args))
    if len(args) > len(names) or set(kwargs) - set(names) or set(kwargs) & set(bound):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond with unexpected arguments")
    bound.update(kwargs)
    if not {"pred", "true_fn", "false_fn"} <= set(bound):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond without pred, true_fn and false_fn")
    operands = bound.get("operands", Const(()))
    if isinstance(operands, SeqValue) and operands.cls in (tuple, list):
        items = list(operands.items)
    elif isinstance(operands, Const) and isinstance(operands.value, (tuple, list)):
        items = [Const(o) for o in operands.value]
    else:
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond with operands that are not a tuple or list")
    return bound["pred"], bound["true_fn"], bound["false_fn"], items


def _check_branches_agree(a, b) -> None:
    """Eager torch.cond refuses branches whose results differ in structure or tensor metadata."""
    same = _structure(a.output) == _structure(b.output) and all(
        (x.shape, x.dtype, x.device, x.requires_grad) == (y.shape, y.dtype, y.device, y.requires_grad)
        for x, y in zip(a.output_examples(), b.output_examples()))
    if not same:
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.cond branches return different structures or tensor metadata")


def _structure(v: Value):
    return "T" if isinstance(v, TensorValue) else (v.cls, tuple(_structure(i) for i in v.items))


def _check_no_aliasing(body) -> None:
    """Eager torch.cond refuses a branch returning (a view of) one of its inputs, or one tensor twice."""
    placeholders = [n.meta.get("example_value") for n in body.gm.graph.nodes if n.op == "placeholder"]
    seen = {_storage(x) for x in placeholders if isinstance(x, torch.Tensor)}
    for x in body.output_examples():
        key = _storage(x)
        if key is None or key in seen:
            raise Unsupported(breaks.UNKNOWN_CALL, "a torch.cond branch returns one of its inputs (or a view of "
                                                   "one, or one tensor twice): torch.cond refuses aliasing")
        seen.add(key)


def _storage(x):
    try:
        return x.untyped_storage()._cdata
    except Exception:      # noqa: BLE001 -- no storage to compare: treated as aliasing (refused)
        return None


# ---- torch.utils.checkpoint ---------------------------------------------------------------------

try:
    import torch.utils.checkpoint as _checkpoint_module
except ImportError:        # a torch without it: nothing to model
    _checkpoint_module = None

# checkpoint's own keyword arguments (the others go to the function, non-reentrant flavour only)
_CHECKPOINT_KWARGS = ("use_reentrant", "preserve_rng_state", "determinism_check", "debug", "early_stop")


@models(getattr(_checkpoint_module, "checkpoint", None))
def _checkpoint(frame, args: list, kwargs: dict) -> Value:
    if not args:
        return NotImplemented
    function_modes.refuse_under_mode(frame, "torch.utils.checkpoint")
    fn, inputs = args[0], args[1:]
    if not inputs or not all(isinstance(x, TensorValue) for x in inputs):
        return NotImplemented          # constants among the inputs: the call runs as it is (a break)
    options = {}
    for name, value in kwargs.items():
        if name == "context_fn" and value.is_python_constant() \
                and value.as_python() is _checkpoint_module.noop_context_fn:
            continue
        if name not in _CHECKPOINT_KWARGS or not value.is_python_constant():
            return NotImplemented      # a context_fn, or arguments for the function itself
        options[name] = value.as_python()
    body = trace_body(frame, fn, [x.example for x in inputs], what="torch.utils.checkpoint", flatten=True)
    if not body.output_examples():
        raise Unsupported(breaks.UNKNOWN_CALL, "a checkpointed function that returns no tensor")
    graph = frame.tracer.graph
    body_gm = graph.subgraph(body.gm, "checkpoint_body")
    out = graph.call("call_function", run_checkpoint,
                     (body_gm, Const(len(inputs)), *inputs, *body.lifted), {k: Const(v) for k, v in options.items()})
    return repack(body.output, out.items)


def run_checkpoint(body, n_inputs: int, *args, **options):
    """`torch.utils.checkpoint.checkpoint` of a traced function (`body`: a subgraph taking the
    checkpointed inputs, then the tensors the function closed over) on `args[:n_inputs]`, the
    closed-over tensors closed over as in eager. The graph node of a checkpoint call."""
    inputs, closed_over = args[:n_inputs], args[n_inputs:]
    return _checkpoint_module.checkpoint(lambda *xs: body(*xs, *closed_over), *inputs, **options)


# ---- associative_scan ---------------------------------------------------------------------------

try:
    from torch._higher_order_ops.associative_scan import associative_scan as _ASSOCIATIVE_SCAN
except ImportError:        # older torch: nothing to model
    _ASSOCIATIVE_SCAN = None


@models(_ASSOCIATIVE_SCAN)
def _associative_scan(frame, args: list, kwargs: dict) -> Value:
    return associative_scan(frame, *_bind(args, kwargs))


def _bind(args, kwargs):
    names = ("combine_fn", "xs", "dim", "reverse", "combine_mode")
    if len(args) > len(names) or set(kwargs) - set(names):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan with unexpected arguments")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound:
            raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan got {k!r} twice")
        bound[k] = v
    if "combine_fn" not in bound or "xs" not in bound or "dim" not in bound:
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan without combine_fn, xs and dim")
    for name in ("dim", "reverse", "combine_mode"):
        if name in bound and not bound[name].is_python_constant():
            raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan with a non-constant {name}")
    return (bound["combine_fn"], bound["xs"], bound["dim"].as_python(),
            bool(bound.get("reverse", Const(False)).as_python()))


def _leaves(xs: Value) -> tuple[list[TensorValue], object]:
    """The tensors of `xs` (a tensor, or a tuple/list of them) and how to repack them."""
    if isinstance(xs, TensorValue):
        return [xs], None
    if isinstance(xs, SeqValue) and xs.items and all(isinstance(x, TensorValue) for x in xs.items):
        return list(xs.items), xs.cls
    raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over something other than a tensor or a tuple of tensors")


def _pack(leaves: list, cls):
    return leaves[0] if cls is None else SeqValue(list(leaves), cls)


def associative_scan(frame, combine_fn: Value, xs: Value, dim: int, reverse: bool) -> Value:
    function_modes.refuse_under_mode(frame, "associative_scan")
    graph = frame.tracer.graph
    leaves, cls = _leaves(xs)
    shape = leaves[0].example.shape
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan over dim {dim!r} of a {len(shape)}-d tensor")
    dim %= len(shape)
    if any(tuple(x.example.shape) != tuple(shape) for x in leaves):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over tensors of different shapes")
    n = shape[dim]
    if not isinstance(n, int):
        raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan over a dimension of symbolic size")
    if n == 0 or n > MAX_UNROLLED_SCAN:
        raise Unsupported(breaks.UNKNOWN_CALL, f"associative_scan over {n} elements (unrolled up to "
                                               f"{MAX_UNROLLED_SCAN})")
    order = range(n - 1, -1, -1) if reverse else range(n)
    results: dict[int, list] = {}
    carry = None
    for i in order:
        element = [graph.call("call_function", torch.select, (x, dim, i), {}) for x in leaves]
        if carry is None:
            carry = element
        else:
            out = combine_fn.call(frame, [_pack(carry, cls), _pack(element, cls)], {})
            carry = _leaves(out)[0] if cls is not None else [out]
            if len(carry) != len(leaves) or not all(isinstance(c, TensorValue) for c in carry):
                raise Unsupported(breaks.UNKNOWN_CALL, "associative_scan's combine_fn must return xs's structure")
        results[i] = carry
    stacked = [graph.call("call_function", torch.stack, (SeqValue([results[i][j] for i in range(n)], list), dim), {})
               for j in range(len(leaves))]
    return _pack(stacked, cls)
