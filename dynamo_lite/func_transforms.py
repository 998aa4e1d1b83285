"""torch.func transforms in captured code: `vmap`, `grad`, `grad_and_value`, `jacrev`, `jacfwd`,
`hessian`.

`torch.func.vmap(f, in_dims, out_dims)` (and the others) makes a `TransformedFunction` value;
calling it traces `f` with our own tracer into an fx subgraph (subgraphs.py) on the inputs the
transform would hand it (for vmap, one example: the inputs with their batch dim selected away;
for the autograd transforms, the inputs as they are, the differentiated ones requiring grad, in
grad mode as torch.func runs them). The call becomes one graph node,
`runtime.func_transform("vmap", body_0, {options}, *tensors, *lifted)`, which applies the real
transform to the traced subgraph at run time: values, gradients, error messages and randomness
rules are torch.func's own, by construction, for every in_dims / out_dims / argnums variant.
Tensors the function closes over are passed as extra inputs the transform does not map over
(vmap in_dim None) or differentiate (not in argnums), which is what torch.func does with
closed-over tensors. The eager backend runs the node as it is; inductor traces through it.

Python constants among the arguments are traced into the subgraph; an argument that is neither
a tensor nor a constant, an in_dims entry that is a nested structure, or an argnums naming a
non-tensor refuses the call (it then runs eagerly).
"""
from __future__ import annotations

import inspect


from . import breaks, function_modes
from .breaks import Unsupported
from .graph_builder import is_symbolic, tracing_saved_tensor_hooks_lifted
from .modelled import models
from .runtime import FUNC_TRANSFORMS, func_transform, remake_func_transform
from .subgraphs import trace_body
from .values.base import Const, Value
from .values.tensors import TensorValue

# The transforms whose function torch.func runs with grad enabled (grad_and_value_impl, vjp).
_GRAD_MODE_ON = {"grad", "grad_and_value", "jacrev", "hessian"}


class TransformedFunction(Value):
    """`torch.func.<name>(fn, **options)` made in captured code; calling it traces `fn`."""
    __slots__ = ("name", "fn", "options")

    def __init__(self, name: str, fn: Value, options: dict):
        super().__init__(None)
        self.name, self.fn, self.options = name, fn, options

    def python_type(self):
        return type(lambda: None)

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return True

    def children(self):
        return (self.fn,)

    def rebuild(self, em):
        em.call_const(remake_func_transform, [lambda: em.const(self.name), lambda: em.value(self.fn),
                                              lambda: em.const(tuple(self.options.items()))])

    def call(self, frame, args: list, kwargs: dict) -> Value:
        if self.name == "vmap":
            return _call_vmap(frame, self, args, kwargs)
        return _call_autograd_transform(frame, self, args, kwargs)


def _make(name: str):
    signature = inspect.signature(FUNC_TRANSFORMS[name])

    def handler(frame, args: list, kwargs: dict) -> Value:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(breaks.USER_EXCEPTION, f"torch.func.{name}: {e}") from None
        bound.apply_defaults()
        options = {}
        for key, value in list(bound.arguments.items())[1:]:
            value = value if isinstance(value, Value) else Const(value)
            if not value.is_python_constant():
                raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.{name} with a non-constant {key}")
            options[key] = value.as_python()
        fn = bound.arguments["func"]
        return TransformedFunction(name, fn if isinstance(fn, Value) else Const(fn), options)
    return handler


for _name, _transform in FUNC_TRANSFORMS.items():
    models(_transform)(_make(_name))


# ---- vmap -----------------------------------------------------------------------------------
def _call_vmap(frame, t: TransformedFunction, args: list, kwargs: dict) -> Value:
    in_dims = t.options["in_dims"]
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    if len(dims) != len(args):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.func.vmap with in_dims not matching the arguments")
    graph = frame.tracer.graph
    inputs, tensors, tensor_dims, batch = [], [], [], []
    for arg, dim in zip(args, dims):
        if dim is None and not isinstance(arg, TensorValue):
            inputs.append(_constant(arg, "vmap"))
            continue
        if not isinstance(arg, TensorValue) or not (dim is None or isinstance(dim, int)):
            raise Unsupported(breaks.UNKNOWN_CALL, "torch.func.vmap over an argument other than a tensor (or with "
                                                   "nested in_dims)")
        example = arg.example
        if dim is not None:
            if not -example.dim() <= dim < example.dim() or not _positive(example.shape[dim]):
                raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.vmap over dim {dim} of a {example.dim()}-d tensor")
            batch.append(example.shape[dim])
            with graph.fake_mode:
                example = example.select(dim, 0)
        inputs.append(example)
        tensors.append(arg)
        tensor_dims.append(dim)
    if not batch or any(str(b) != str(batch[0]) for b in batch):
        raise Unsupported(breaks.UNKNOWN_CALL, "torch.func.vmap with no mapped tensor, or batch sizes that differ")
    function_modes.check_machinery(frame, lambda body, *xs: FUNC_TRANSFORMS["vmap"](body, **t.options)(*xs), args,
                                   "torch.func.vmap", returned=next(i for i, d in enumerate(dims) if d is not None))
    body = trace_body(frame, t.fn, inputs, kwargs, what="torch.func.vmap")
    options = {**t.options, "in_dims": (*tensor_dims, *(None,) * len(body.lifted))}
    return _node(frame, "vmap", body, options, tensors)


def _positive(size) -> bool:
    return is_symbolic(size) or int(size) > 0


# ---- grad, grad_and_value, jacrev, jacfwd, hessian ------------------------------------------------
def _call_autograd_transform(frame, t: TransformedFunction, args: list, kwargs: dict) -> Value:
    function_modes.refuse_under_mode(frame, f"torch.func.{t.name}")
    argnums = t.options["argnums"]
    positions = argnums if isinstance(argnums, tuple) else (argnums,)
    if not positions or not all(isinstance(p, int) and 0 <= p < len(args) for p in positions):
        raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.{t.name} with argnums {argnums!r}")
    graph = frame.tracer.graph
    inputs, tensors, index_of = [], [], {}
    for i, arg in enumerate(args):
        if not isinstance(arg, TensorValue):
            if i in positions:
                raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.{t.name} differentiating a non-tensor argument")
            inputs.append(_constant(arg, t.name))
            continue
        example = arg.example
        with graph.fake_mode:
            example = example.detach()
            if i in positions:
                if not (example.is_floating_point() or example.is_complex()):
                    raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.{t.name} differentiating an integer tensor")
                example.requires_grad_(True)
        index_of[i] = len(tensors)
        inputs.append(example)
        tensors.append(arg)
    grad_mode = True if t.name in _GRAD_MODE_ON else None
    body = trace_body(frame, t.fn, inputs, kwargs, what=f"torch.func.{t.name}", grad_enabled=grad_mode)
    mapped = tuple(index_of[p] for p in positions)
    options = {**t.options, "argnums": mapped if isinstance(argnums, tuple) else mapped[0]}
    return _node(frame, t.name, body, options, tensors)


# ---- shared ---------------------------------------------------------------------------------------
def _constant(arg: Value, name: str) -> Value:
    if not arg.is_python_constant():
        raise Unsupported(breaks.UNKNOWN_CALL, f"torch.func.{name} with an argument that is neither a tensor nor a "
                                               f"constant")
    return arg


def _node(frame, name: str, body, options: dict, tensors: list) -> Value:
    graph = frame.tracer.graph
    sub = graph.subgraph(body.gm, f"{name}_body")
    with tracing_saved_tensor_hooks_lifted():
        return graph.call("call_function", func_transform, (Const(name), sub, Const(options), *tensors, *body.lifted),
                          {})
