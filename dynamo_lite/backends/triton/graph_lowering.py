"""Walk a functional aten graph and lower it to IR nodes (the `GraphLowering`).

Placeholders and constants become input buffers. Each call either goes through the lowering
table (lowerings.py) or, when the op is unknown or `NotLowerable`, becomes an `ExternNode` whose
tensor arguments are realized first. Lazy values are materialized (`realize`) only where they
must exist in memory: graph outputs, extern arguments, merging reshapes, and values that several
users would otherwise recompute at great cost. `copy_` into a graph input (what functionalization
leaves for input mutations) becomes a pointwise node that stores into the input itself.
"""
from __future__ import annotations

import collections
import operator
from typing import Any, Optional

import torch
import torch.fx

from .ir import (Buffer, ExternNode, PointwiseNode, ReductionNode, cast, contiguous_strides,
                 domain_vars, walk)
from .lowerings import NotLowerable, lookup
from .values import Value, broadcast_to

aten = torch.ops.aten

#: realize a lazy value with several users when its expression is bigger than this
REUSE_REALIZE_OPS = 40
REUSE_REALIZE_READS = 6

#: externs whose outputs always have the layout their meta says (no runtime layout check)
TRUSTED_LAYOUT = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}


class GraphLowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.gm = gm
        self.example_inputs = example_inputs
        self.nodes: list = []                        # PointwiseNode | ReductionNode | ExternNode
        self.buffers: dict[str, Buffer] = {}
        self.input_buffers: list[Optional[Buffer]] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.outputs: list[Any] = []                 # Value or python object, per graph output
        self.extern_ops: collections.Counter = collections.Counter()
        self.env: dict[torch.fx.Node, Any] = {}
        self._counter = 0
        self._mutations: list[tuple[Value, Any]] = []

    # -- naming and buffers -------------------------------------------------------------------

    def new_buffer(self, sizes, strides, dtype, device, kind="temp", prefix="buf") -> Buffer:
        name = f"{prefix}{self._counter}"
        self._counter += 1
        buf = Buffer(name, tuple(sizes), tuple(strides), dtype, torch.device(device), kind)
        self.buffers[name] = buf
        return buf

    # -- realization -------------------------------------------------------------------------

    def realize(self, value: Value, strides=None) -> Value:
        """Make `value` live in memory (in place: later readers load the buffer)."""
        if value.is_strided():
            return value
        return self._materialize(value, strides)

    def realize_dense(self, value: Value) -> Value:
        """Like realize, but the result must be contiguous (for a merging reshape)."""
        if value.is_strided() and value.layout[1] == contiguous_strides(value.sizes):
            return value
        if value.is_strided():
            return self._materialize(Value(value.sizes, value.dtype, value.device, value.load))
        return self._materialize(value)

    def _materialize(self, value: Value, strides=None) -> Value:
        strides = tuple(strides) if strides is not None else contiguous_strides(value.sizes)
        buf = self.new_buffer(value.sizes, strides, value.dtype, value.device)
        body = cast(value.load(domain_vars(value.ndim)), value.dtype)
        self.nodes.append(PointwiseNode(buf, body))
        value.layout, value._loader, value._memo = (buf, strides, 0), None, {}
        return value

    def add_reduction(self, x: Value, dims: list[int], kind: str, acc: torch.dtype,
                      buffer_dtype: torch.dtype) -> Value:
        sizes = tuple(1 if d in dims else s for d, s in enumerate(x.sizes))
        buf = self.new_buffer(sizes, contiguous_strides(sizes), buffer_dtype, x.device)
        body = cast(x.load(domain_vars(x.ndim)), acc)
        self.nodes.append(ReductionNode(buf, x.sizes, tuple(dims), kind, body))
        return Value.of_buffer(buf)

    # -- the walk ----------------------------------------------------------------------------

    def run(self) -> "GraphLowering":
        placeholder_index = 0
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = self._placeholder(self.example_inputs[placeholder_index], placeholder_index)
                placeholder_index += 1
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "output":
                self._output(node.args[0])
            else:
                raise NotImplementedError(f"fx node op {node.op}")
        return self

    def _placeholder(self, example, i: int):
        if not isinstance(example, torch.Tensor):
            self.input_buffers.append(None)
            return int(example) if isinstance(example, torch.SymInt) else example
        buf = Buffer(f"arg{i}", tuple(example.shape), tuple(example.stride()), example.dtype,
                     example.device, "input")
        self.buffers[buf.name] = buf
        self.input_buffers.append(buf)
        return Value.of_buffer(buf)

    def _constant(self, node):
        tensor = getattr(self.gm, node.target)
        if not isinstance(tensor, torch.Tensor):
            return tensor
        buf = self.new_buffer(tensor.shape, tensor.stride(), tensor.dtype, tensor.device, "constant", "const")
        self.constants[buf.name] = tensor
        return Value.of_buffer(buf)

    def _call(self, node: torch.fx.Node):
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: self.env[n])
        if node.target is operator.getitem:
            return args[0][args[1]]
        if node.target is aten.copy_.default and self._is_input(args[0]):
            self._mutations.append((args[0], args[1]))
            return args[0]
        lower = lookup(node.target)
        result = None
        if lower is not None and "val" in node.meta:
            try:
                result = lower(self, node, *args, **kwargs)
            except NotLowerable:
                result = None
        if result is None:
            return self._extern(node, args, kwargs)
        if isinstance(result, Value) and not result.is_strided() and len(node.users) > 1:
            self._maybe_realize_reused(result)
        return result

    def _is_input(self, v) -> bool:
        return isinstance(v, Value) and v.is_strided() and v.layout[0].kind == "input" and v.layout[0].sizes == v.sizes

    def _maybe_realize_reused(self, value: Value):
        exprs = walk([value.load(domain_vars(value.ndim))])
        reads = sum(1 for e in exprs if e.op.value == "load")
        if len(exprs) > REUSE_REALIZE_OPS or reads > REUSE_REALIZE_READS:
            self.realize(value)

    def _extern(self, node: torch.fx.Node, args, kwargs):
        """Run the op as an aten call in the wrapper: realize tensor arguments, take result
        layouts from the node's fake value."""
        def to_arg(a):
            if isinstance(a, Value):
                return self.realize(a).buffer_arg()
            if isinstance(a, (list, tuple)):
                return type(a)(to_arg(x) for x in a)
            return a
        ext_args, ext_kwargs = to_arg(tuple(args)), {k: to_arg(v) for k, v in kwargs.items()}
        meta = node.meta.get("val")
        self.extern_ops[str(node.target)] += 1
        name = f"ext{self._counter}"
        self._counter += 1
        if isinstance(meta, (list, tuple)):
            outs = [self._extern_buffer(m) for m in meta]
            self.nodes.append(ExternNode(name, node.target, ext_args, ext_kwargs, outs, "tuple"))
            return [Value.of_buffer(b) if b is not None else None for b in outs]
        out = self._extern_buffer(meta)
        self.nodes.append(ExternNode(name, node.target, ext_args, ext_kwargs, [out], "single"))
        return Value.of_buffer(out) if out is not None else None

    def _extern_buffer(self, meta) -> Optional[Buffer]:
        if not isinstance(meta, torch.Tensor):
            return None
        return self.new_buffer(meta.shape, meta.stride(), meta.dtype, meta.device, "extern")

    def _output(self, results):
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        fx_nodes = results
        values = [self.env[n] if isinstance(n, torch.fx.Node) else n for n in fx_nodes]
        mutated_into = {id(src): dst for dst, src in self._mutations}
        for i, (n, v) in enumerate(zip(fx_nodes, values)):
            if isinstance(v, Value):
                if id(v) in mutated_into and mutated_into[id(v)].sizes == v.sizes:
                    v = mutated_into[id(v)]          # `x += 1; return x`: return the input itself
                elif not v.is_strided():
                    v = self.realize(v, _dense_strides(n.meta.get("val"), v.sizes))
            self.outputs.append(v)
        for dst, src in self._mutations:
            self._store_into_input(dst, src)

    def _store_into_input(self, dst: Value, src):
        buf = dst.layout[0]
        if isinstance(src, Value) and src.is_strided() and src.layout == dst.layout:
            return                                   # copy onto itself
        if isinstance(src, Value):
            src = broadcast_to(src, buf.sizes)
            body = cast(src.load(domain_vars(len(buf.sizes))), buf.dtype)
        else:
            from .ir import const
            body = const(src, buf.dtype)
        self.nodes.append(PointwiseNode(buf, body))


def _dense_strides(meta, sizes) -> Optional[tuple[int, ...]]:
    """The eager result's strides if they describe a dense, non-overlapping layout."""
    if not isinstance(meta, torch.Tensor) or tuple(meta.shape) != tuple(sizes):
        return None
    strides = tuple(meta.stride())
    order = sorted(range(len(sizes)), key=lambda d: (strides[d], sizes[d]))
    expected = 1
    for d in order:
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return None
        expected *= sizes[d]
    return strides
