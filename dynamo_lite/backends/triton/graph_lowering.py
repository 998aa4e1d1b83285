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
import logging
import math
import operator
from typing import Any, Optional, Union

import torch
import torch.fx

from ...fallback import records
from . import availability, layouts, settings
from .ir import (Affine, Buffer, BufferArg, ExternNode, PointwiseNode, ReductionNode, ScanNode, ScatterNode, at_position,
                 cast, const, contiguous_strides, domain_vars, load, loads, walk)
from . import lower_losses, lower_math, lower_reductions, lower_resample, lower_scatter, lower_views  # noqa: F401  (the rest of the lowering table)
from .lowerings import GraphNotLowerable, NotLowerable, lookup
from .values import Value, broadcast_to, compute_view_strides

aten = torch.ops.aten
log = logging.getLogger("dynamo_lite.triton")

#: realize a lazy value with several users when its expression is bigger than this
REUSE_REALIZE_OPS = 40
REUSE_REALIZE_READS = 6

#: host scalars a kernel may take as a float argument (Triton passes a Python float as fp32)
SCALAR_ARG_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: externs whose outputs always have the layout their meta says (no runtime layout check)
TRUSTED_LAYOUT = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}


class GraphLowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list, free_outputs: frozenset = frozenset(),
                 view_outputs: Optional[dict[int, int]] = None):
        self.gm = gm
        self.example_inputs = example_inputs
        # output position -> the output it is a view of in eager (backend._output_views; never a
        # free output): given that output's buffer, not computed
        self.view_outputs = dict(view_outputs or {})
        # output positions whose layout is ours to choose (the activations a training forward
        # saves for its backward: AOTAutograd compiles the backward with the strides reported
        # for them, `output_strides`), the others keep eager's strides
        self.free_outputs = free_outputs
        self.nodes: list = []                        # PointwiseNode | ReductionNode | ScanNode | ScatterNode | ExternNode
        self.buffers: dict[str, Buffer] = {}
        self.input_buffers: list[Optional[Buffer]] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.outputs: list[Any] = []                 # Value or python object, per graph output
        self.extern_ops: collections.Counter = collections.Counter()
        # op -> "Error: message" of a lowering that raised (a bug of ours): it ran as an aten call
        self.lowering_errors: dict[str, str] = {}
        self.env: dict[torch.fx.Node, Any] = {}
        self._returned: set = set()                  # output nodes that keep eager's strides (run)
        self.node: Optional[torch.fx.Node] = None   # the node being lowered
        self._counter = 0
        self._mutations: list[tuple[Value, Any]] = []
        self._fake_mode = None
        # id(Value) of a lazy graph output -> the dense strides eager gives it (what the caller, or
        # AOTAutograd's backward graph reading a saved tensor, was traced with)
        self._output_strides: dict[int, tuple[int, ...]] = {}
        # node -> the strides eager's kernel gives its result where its meta function says
        # otherwise (`note_eager_layout`)
        self._eager_layouts: dict[torch.fx.Node, tuple[int, ...]] = {}
        # host values kernels read (CPU scalars in a CUDA graph): passed by value, read on the host
        # at call time (`scalar_args`: buffer names)
        self.scalar_args: set[str] = set()
        # buffers of ours larger than the value stored in them, their pad filled with zeros: the
        # buffer's name -> the sizes of that value (its leading part; layouts.py, padded matmuls)
        self.zero_padded: dict[str, tuple[int, ...]] = {}
        self._padded_copies: dict[tuple, Value] = {}   # one zero-padded copy of a strided view per graph
        devices = [t.device for t in example_inputs if isinstance(t, torch.Tensor)]
        self.device = next((d for d in devices if d.type != "cpu"), devices[0] if devices else torch.device("cpu"))
        self.library_layouts = layouts.enabled(self.device)      # padded matmul operands, NHWC convs
        self.channels_last = self.library_layouts and layouts.has_convolution(gm)

    # -- naming and buffers -------------------------------------------------------------------

    def new_buffer(self, sizes, strides, dtype, device, kind="temp", prefix="buf") -> Buffer:
        name = f"{prefix}{self._counter}"
        self._counter += 1
        buf = Buffer(name, tuple(sizes), tuple(strides), dtype, torch.device(device), kind)
        self.buffers[name] = buf
        return buf

    # -- realization -------------------------------------------------------------------------

    def realize(self, value: Value, strides=None) -> Value:
        """Make `value` live in memory (in place: later readers load the buffer). Without
        `strides`: a graph output in the layout eager gives it (`_output_strides`), anything else
        in the layout of what it is computed from (`_preferred_strides`)."""
        if value.is_strided():
            return value
        if strides is None:
            strides = self._output_strides.get(id(value)) or self._preferred_strides(value)
        return self._materialize(value, strides)

    def _preferred_strides(self, value: Value) -> tuple[int, ...]:
        """Contiguous, except where library layouts are on: a large matrix with misaligned rows
        gets padded rows (a matmul may read it, or its transpose: GPT-2's logits gradient), and in
        a graph with convolutions a 4-d value computed from a channels-last buffer of its sizes
        (a convolution's output) stays channels-last: no layout conversion is left between
        convolutions (batch norm, ReLU and residual adds follow)."""
        if self.channels_last and value.ndim == 4:
            # (before padding: a [8, 1024, 14, 14] activation is no matrix with misaligned rows)
            for ld in loads([value.load(domain_vars(4))]):
                buf = self.buffers.get(ld.arg[0])
                if buf is not None and buf.sizes == value.sizes and layouts.only_channels_last(buf.sizes, buf.strides):
                    return layouts.channels_last_strides(value.sizes)
        if self.library_layouts and layouts.needs_padding(value.sizes, value.dtype):
            return layouts.padded_strides(value.sizes, value.dtype)
        return contiguous_strides(value.sizes)

    def realize_for_view(self, value: Value, sizes) -> Value:
        """Like realize, but the result must be viewable with `sizes` (a reshape that merges dims):
        in the preferred layout where that allows the view (padded rows do when only outer dims
        merge), else contiguous. A strided value that does not allow it is copied."""
        if value.is_strided():
            if compute_view_strides(value.sizes, value.layout[1], sizes) is not None:
                return value
            value = Value(value.sizes, value.dtype, value.device, value.load)
        strides = self._preferred_strides(value)
        if compute_view_strides(value.sizes, strides, sizes) is None:
            strides = contiguous_strides(value.sizes)
        return self._materialize(value, strides)

    def _materialize(self, value: Value, strides=None, padded_sizes=None) -> Value:
        """Store `value` into a new buffer with `strides`; the value becomes a view of it. A buffer
        of `padded_sizes` (each at least the value's), or with padded rows where `strides` are
        layouts.padded_strides, spans its pad, which the kernel fills with zeros (`zero_padded`)."""
        strides = tuple(strides) if strides is not None else contiguous_strides(value.sizes)
        if padded_sizes is None and value.ndim >= 2 and strides != contiguous_strides(value.sizes) \
                and strides == layouts.padded_strides(value.sizes, value.dtype):
            padded_sizes = value.sizes[:-1] + (strides[-2],)
        sizes = tuple(padded_sizes) if padded_sizes is not None else value.sizes
        buf = self.new_buffer(sizes, strides, value.dtype, value.device)
        if sizes != value.sizes:
            value_or_zero = lower_views.padded(value, sizes, [0] * value.ndim, 0, value.dtype, value.device)
            body = cast(value_or_zero.load(domain_vars(value.ndim)), value.dtype)
            self.zero_padded[buf.name] = value.sizes
        else:
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

    def add_scatter(self, sizes, dtype, device, init, domain, body, dest: tuple, position, mask,
                    dim: Union[int, tuple[int, ...]] = 0, accumulate: bool = True) -> Value:
        """A new buffer of `sizes` holding `init` (an expression over its own domain), with `body`
        (over `domain`) added at `dest` (an index of the buffer per domain element, over the
        domain's variables; 0 at `dim`) but along `dim` at the loaded `position`, where `mask`.
        (`accumulate` False: stored there instead.) In the layout eager gives the node's result
        (index_put keeps its input's), else contiguous. `dim` may be several adjacent dims, with
        `position` flattened over them (row-major): NotLowerable unless the layout makes them one
        dim (the stride of each is the next one's size times its stride; size-1 dims aside)."""
        strides = layouts.dense_strides(self.node.meta.get("val"), sizes) if self.node is not None else None
        strides = strides or contiguous_strides(sizes)
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        spanned = [d for d in dims if sizes[d] != 1]
        stride = strides[spanned[-1] if spanned else dims[-1]]
        if any(strides[d] != stride * math.prod(sizes[d + 1:dims[-1] + 1]) for d in spanned):
            raise NotLowerable("a scatter along dims its result's layout does not merge")
        buf = self.new_buffer(sizes, strides, dtype, device)
        self.nodes.append(ScatterNode(buf, init, tuple(domain), body, buf.store_index(dest), stride,
                                      math.prod(sizes[d] for d in dims), position, mask, accumulate))
        return Value.of_buffer(buf)

    def add_scan(self, x: Value, dim: int, kind: str, acc: torch.dtype, buffer_dtype: torch.dtype,
                 keep: Optional[int] = None) -> Value:
        """The scan of `x` along `dim` (ir.ScanNode; `keep`: its first `keep` positions only)."""
        sizes = x.sizes if keep is None else tuple(keep if d == dim else s for d, s in enumerate(x.sizes))
        buf = self.new_buffer(sizes, contiguous_strides(sizes), buffer_dtype, x.device)
        self.nodes.append(ScanNode(buf, x.sizes, dim, kind, cast(x.load(domain_vars(x.ndim)), acc), keep))
        return Value.of_buffer(buf)

    # -- the walk ----------------------------------------------------------------------------

    def run(self) -> "GraphLowering":
        placeholder_index = 0
        returned = self._returned = {n for i, n in enumerate(graph_outputs(self.gm)) if i not in self.free_outputs}
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = self._placeholder(self.example_inputs[placeholder_index], placeholder_index)
                placeholder_index += 1
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
                if node in returned:
                    self._note_output_layout(node)
            elif node.op == "output":
                self._output(node.args[0])
            else:
                raise NotImplementedError(f"fx node op {node.op}")
        return self

    def note_eager_layout(self, strides: tuple[int, ...]) -> None:
        """The node being lowered comes out of eager's kernel with `strides`, not its meta value's
        (ATen's CUDA upsampling keeps a channels-last input's layout; its meta function gives a
        contiguous result): a graph output of it is stored so."""
        self._eager_layouts[self.node] = tuple(strides)

    def eager_strides(self, node: torch.fx.Node, sizes) -> Optional[tuple[int, ...]]:
        """The dense strides eager gives `node`'s result: its meta value's, unless its lowering
        said otherwise (`note_eager_layout`); None where they are not dense."""
        if node in self._eager_layouts:
            return self._eager_layouts[node]
        return layouts.dense_strides(node.meta.get("val"), sizes)

    def _note_output_layout(self, node: torch.fx.Node):
        value = self.env[node]
        if isinstance(value, Value) and not value.is_strided():
            strides = self.eager_strides(node, value.sizes)
            if strides is not None:
                self._output_strides[id(value)] = strides

    def _placeholder(self, example, i: int):
        if not isinstance(example, torch.Tensor):
            self.input_buffers.append(None)
            return int(example) if isinstance(example, torch.SymInt) else example
        buf = Buffer(f"arg{i}", tuple(example.shape), tuple(example.stride()), example.dtype,
                     example.device, "input")
        self.buffers[buf.name] = buf
        self.input_buffers.append(buf)
        return Value.of_buffer(buf)

    def on_host(self, value) -> bool:
        """Is `value` (a tensor, Value or Buffer) on the host of a graph whose kernels run on a
        GPU? Eager computes there what
        its operands there ask (torch.optim's step counters and step sizes, 0-dim CPU tensors next
        to CUDA parameters): such ops stay aten calls on the CPU (`_call`), and a kernel reading a
        host scalar gets its value as an argument (`_kernel_operands`)."""
        return value.device.type == "cpu" and self.device.type != "cpu"

    def _constant(self, node):
        tensor = getattr(self.gm, node.target)
        if not isinstance(tensor, torch.Tensor):
            return tensor
        if tensor.dim() == 0 and tensor.device != self.device and not all(map(self._computes_on_host, node.users)):
            tensor = tensor.to(self.device)     # a scalar constant (x[0] = 3.0): keep it on our device
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
        self.node = node
        operands = None if self._computes_on_host(node) else self._kernel_operands((args, kwargs))
        if lower is not None and "val" in node.meta and operands is not None \
                and self._one_runnable_device(node, operands[0]):
            try:
                result = lower(self, node, *operands[0], **operands[1])
            except NotLowerable:
                result = None
            except GraphNotLowerable:
                raise
            except Exception as e:                 # a lowering bug: this node runs as aten
                if settings.strict:
                    raise
                log.debug("lowering %s failed; extern call instead", node.target, exc_info=True)
                self.lowering_errors[str(node.target)] = f"{type(e).__name__}: {e}"
                _warn_once(str(node.target), e)
                result = None
        if result is None:
            return self._extern(node, args, kwargs)
        if isinstance(result, Value) and not result.is_strided() and len(node.users) > 1:
            self._maybe_realize_reused(result)
        return result

    def _computes_on_host(self, node: torch.fx.Node) -> bool:
        """Are the node's tensor results on the host (`on_host`)? Then it runs as an aten call."""
        results = [t for t in _flatten(node.meta.get("val")) if isinstance(t, torch.Tensor)]
        return bool(results) and all(self.on_host(t) for t in results)

    def _kernel_operands(self, operands):
        """`operands` with each host value a kernel reads replaced by one read on the host at call
        time and passed by value (a float scalar: a Triton float argument); None where a host value
        cannot be passed so (not one element, not a float32/16 scalar: the op runs as aten)."""
        if isinstance(operands, (list, tuple)):
            out = [self._kernel_operands(x) for x in operands]
            return None if any(o is None and x is not None for o, x in zip(out, operands)) else type(operands)(out)
        if isinstance(operands, dict):
            out = self._kernel_operands(list(operands.values()))
            return None if out is None else dict(zip(operands, out))
        if not (isinstance(operands, Value) and self.on_host(operands)):
            return operands
        v = operands
        if v.numel() != 1 or not v.is_strided() or v.dtype not in SCALAR_ARG_DTYPES:
            return None
        buffer, strides, offset = v.layout
        if offset != 0:
            return None
        self.scalar_args.add(buffer.name)
        return Value(v.sizes, v.dtype, self.device, lambda index: load(buffer.name, Affine(0), v.dtype))

    def _one_runnable_device(self, node, args) -> bool:
        """Kernels read one device's memory: ops mixing devices (a CPU scalar into a CUDA op) or
        on a device Triton cannot run on here stay aten calls."""
        devices = {t.device for t in _flatten(node.meta.get("val")) if isinstance(t, torch.Tensor)}
        devices |= {v.device for v in _flatten(args) if isinstance(v, Value)}
        return len(devices) <= 1 and all(availability.can_run_on(d) for d in devices)

    def _is_input(self, v) -> bool:
        return isinstance(v, Value) and v.is_strided() and v.layout[0].kind == "input" and v.layout[0].sizes == v.sizes

    def _maybe_realize_reused(self, value: Value):
        exprs = walk([value.load(domain_vars(value.ndim))])
        reads = sum(1 for e in exprs if e.op.value == "load")
        if len(exprs) > REUSE_REALIZE_OPS or reads > REUSE_REALIZE_READS:
            self.realize(value)

    def _extern(self, node: torch.fx.Node, args, kwargs):
        """Run the op as an aten call in the wrapper: realize tensor arguments, take result
        layouts from the op's meta function applied to the layouts we actually pass."""
        def to_arg(a, position=None):
            if isinstance(a, Value):
                return self._extern_operand(node.target, position, a).buffer_arg()
            if isinstance(a, (list, tuple)):
                return type(a)(to_arg(x) for x in a)
            return a
        if node.target in lower_views.STORAGE_ADDRESSING:
            args = (lower_views.eager_view(self, node.args[0]),) + tuple(args[1:])
        if self.library_layouts and node.target in layouts.MATMUL_OPERANDS:
            in_place = self._row_class_matmul(node, args, kwargs)
            if in_place is not None:
                return in_place
            padded = self._padded_matmul(node, args, kwargs)
            if padded is not None:
                return padded
        ext_args = tuple(to_arg(a, i) for i, a in enumerate(args))
        ext_kwargs = {k: to_arg(v) for k, v in kwargs.items()}
        meta = self._extern_meta(node, ext_args, ext_kwargs)
        name = self._extern_name(node.target)
        if isinstance(meta, (list, tuple)):
            outs = [self._extern_buffer(m) for m in meta]
            self.nodes.append(ExternNode(name, node.target, ext_args, ext_kwargs, outs, "tuple"))
            return [Value.of_buffer(b) if b is not None else None for b in outs]
        out = self._extern_buffer(meta)
        self.nodes.append(ExternNode(name, node.target, ext_args, ext_kwargs, [out], "single"))
        return Value.of_buffer(out) if out is not None else None

    def extern_call(self, node: torch.fx.Node, args, kwargs=None) -> Value:
        """`node`'s op called as aten on other arguments of the same shapes (a lowering that
        computes part of an op in kernels: a convolution's bias)."""
        return self._extern(node, args, kwargs or {})

    def _extern_name(self, target) -> str:
        """A name for a new extern call of `target` (counted in `extern_ops`)."""
        self.extern_ops[str(target)] += 1
        self._counter += 1
        return f"ext{self._counter - 1}"

    def _extern_operand(self, target, position, a: Value) -> Value:
        """An extern's tensor argument in memory, in the layout its library is fast on where we
        choose the layout (layouts.py): padded matmul operands, NHWC convolution operands."""
        if not self.library_layouts or position is None:
            return self.realize(a)
        if position in layouts.MATMUL_OPERANDS.get(target, ()):
            return self._matmul_operand(a)
        if a.ndim == 4 and position in layouts.CHANNELS_LAST_OPERANDS.get(target, ()):
            return self.realize(a, layouts.channels_last_strides(a.sizes))
        if a.ndim == 4 and position == layouts.WEIGHT_OPERAND.get(target):
            return self._convolution_weight(a)
        return self.realize(a)

    def _matmul_operand(self, a: Value) -> Value:
        if not a.is_strided():
            strides = self._lazy_operand_strides(a, a.sizes)
            if layouts.misaligned_matrix(a.sizes, strides, 0, a.dtype):
                strides = layouts.padded_strides(a.sizes, a.dtype)
            return self.realize(a, strides)
        _, strides, offset = a.layout
        if layouts.misaligned_matrix(a.sizes, strides, offset, a.dtype):
            # a graph input (or a buffer already stored otherwise): copy it into padded rows
            return self._materialize(Value(a.sizes, a.dtype, a.device, a.load), layouts.padded_strides(a.sizes, a.dtype))
        return a

    def _row_class_matmul(self, node: torch.fx.Node, args, kwargs) -> Optional[Value]:
        """`a @ b` with misaligned result rows that is returned with eager's strides (viewed at
        most), computed into a buffer of those strides by `layouts.row_class_mm`, so that no padded
        result is copied out (GPT-2's logits: 412 MB). Where the result stays inside the graph or
        leaves it with a layout of ours to choose (an activation saved for the backward), padding
        is better (its readers get aligned rows). None where it does not apply."""
        meta = node.meta.get("val")
        if node.target is not aten.mm.default or kwargs or not isinstance(meta, torch.Tensor) \
                or meta.device != self.device or not _returned_as_viewed(node, self._returned):
            return None
        a, b = args
        if not (isinstance(a, Value) and isinstance(b, Value) and a.dtype == b.dtype == meta.dtype):
            return None
        (m, k), n = a.sizes, b.sizes[1]
        plan = layouts.row_class_plan(m, n, meta.dtype)
        if plan is None or not layouts.needs_padding((m, n), meta.dtype):
            return None
        (_, ua), (ub, _) = self._operand_strides(a), self._operand_strides(b)
        if ua != 1 or ub != 1:              # (checked before either is stored: padding stores them otherwise)
            return None
        a, b = self._matmul_operand(a), self._matmul_operand(b)
        (sa, ua), (ub, sb) = a.layout[1], b.layout[1]
        if not (ua == 1 and ub == 1 and sa >= k and sb >= k) \
                or layouts.misaligned_matrix(a.sizes, a.layout[1], a.layout[2], a.dtype) \
                or layouts.misaligned_matrix(b.sizes, b.layout[1], b.layout[2], b.dtype):
            return None                     # row-major a and column-major b, aligned, or padding
        out = self.new_buffer((m, n), (n, 1), meta.dtype, meta.device)
        name = self._extern_name(node.target)
        self.nodes.append(ExternNode(name, layouts.row_class_mm, (a.buffer_arg(), b.buffer_arg()) + plan, {},
                                     [out], "single", writes_out=True))
        return Value.of_buffer(out)

    def _padded_matmul(self, node: torch.fx.Node, args, kwargs) -> Optional[Value]:
        """A matmul with M, K or N rounded up (layouts.matmul_padding: cuBLAS's aligned kernels
        fit) on zero-padded operands, into a buffer of the padded sizes (`mm.out`); the result is
        its leading part, and the pad of that buffer is never read. None where nothing is padded.

        Zeros make the pad right for every dim: a pad column of B (or of the bias) only reaches
        the result's pad columns, a pad row of A only its pad rows, and K's pad adds 0 * 0."""
        meta = node.meta.get("val")
        ia, ib = layouts.MATMUL_OPERANDS[node.target]
        a, b = args[ia], args[ib]
        if not (isinstance(meta, torch.Tensor) and isinstance(a, Value) and isinstance(b, Value)) \
                or meta.device != self.device or not a.dtype == b.dtype == meta.dtype \
                or any(isinstance(v, Value) for v in kwargs.values()):
            return None
        m, k, n = layouts.matmul_padding(a.sizes, self._operand_strides(a), b.sizes, self._operand_strides(b),
                                         meta.dtype)
        if (m, k, n) == (a.sizes[-2], a.sizes[-1], b.sizes[-1]):
            return None
        sizes = a.sizes[:-2] + (a.sizes[-2], b.sizes[-1])
        out_sizes = a.sizes[:-2] + (m, n)
        ext_args = list(args)
        for i, x in enumerate(args):
            if i == ia:
                x = self._zero_padded_operand(x, x.sizes[:-2] + (m, k))
            elif i == ib:
                x = self._zero_padded_operand(x, x.sizes[:-2] + (k, n))
            elif isinstance(x, Value):              # addmm's and baddbmm's bias, broadcast to the result
                padded = _padded_broadcast(x.sizes, sizes, out_sizes)
                x = self.realize(x) if padded == x.sizes else self._zero_padded_operand(x, padded)
            ext_args[i] = x.buffer_arg() if isinstance(x, Value) else x
        out = self.new_buffer(out_sizes, contiguous_strides(out_sizes), meta.dtype, meta.device)
        name = self._extern_name(node.target)
        self.nodes.append(ExternNode(name, node.target.overloadpacket.out, tuple(ext_args), dict(kwargs), [out],
                                     "single", writes_out=True))
        return Value.of_buffer(out, sizes, out.strides)

    def _operand_strides(self, v: Value) -> tuple[int, ...]:
        """The strides a matmul operand is passed with: its own; a lazy one's as it will be
        stored (`_lazy_operand_strides`); row-major where it is misaligned and copied first."""
        if not v.is_strided():
            return self._lazy_operand_strides(v, v.sizes)
        if not layouts.misaligned_matrix(v.sizes, v.layout[1], v.layout[2], v.dtype):
            return v.layout[1]
        return contiguous_strides(v.sizes)

    @staticmethod
    def _lazy_operand_strides(v: Value, sizes) -> tuple[int, ...]:
        """Dense strides over `sizes` for storing the lazy matmul operand `v`: column-major (its
        last two dims swapped) where every load that walks those dims walks dim -2 with unit
        stride (a transposed weight cast under autocast: the kernel then reads and writes
        coalesced, and cuBLAS takes the transpose as it is), else row-major."""
        if v.ndim >= 2:
            row, col = f"v{v.ndim - 2}", f"v{v.ndim - 1}"
            walking = [ld.arg[1] for ld in loads([v.load(domain_vars(v.ndim))])
                       if ld.arg[1].coeff(row) or ld.arg[1].coeff(col)]
            if walking and all(i.coeff(row) == 1 and i.coeff(col) != 1 for i in walking):
                return _column_major(sizes)
        return contiguous_strides(sizes)

    def _zero_padded_operand(self, x: Value, sizes) -> Value:
        """`x` in memory as the leading part of a value of `sizes` that is zero elsewhere: a
        buffer of ours padded so already is read as it is; a lazy value is stored so (it
        becomes a view of that buffer); anything else (a graph input: on every call, no copy
        kept across calls) is copied by a kernel, keeping which of its last two dims is
        contiguous (the transposed LM head weight is copied as rows of 768, not transposed)."""
        sizes = tuple(sizes)
        if sizes == x.sizes:
            return self._matmul_operand(x)
        view = self._zero_padded_view(x, sizes)
        if view is not None:
            return view
        strides = contiguous_strides(sizes)
        if x.is_strided():
            key = (x.layout[0].name, x.layout[1], x.layout[2], x.sizes, sizes)
            if key in self._padded_copies:        # buffers do not change while the graph runs (inputs
                                                  # are written back after every read)
                return self._padded_copies[key]
            if x.ndim >= 2 and x.layout[1][-2] == 1 and x.layout[1][-1] != 1 \
                    and not layouts.misaligned_matrix(x.sizes, x.layout[1], x.layout[2], x.dtype):
                strides = _column_major(sizes)
            copy = self._materialize(Value(x.sizes, x.dtype, x.device, x.load), strides, sizes)
            self._padded_copies[key] = Value.of_buffer(copy.layout[0])
            return self._padded_copies[key]
        self._materialize(x, self._lazy_operand_strides(x, sizes), sizes)
        return Value.of_buffer(x.layout[0])

    def _zero_padded_view(self, x: Value, sizes) -> Optional[Value]:
        """`x` with each dim extended to `sizes` as a view of the zero-padded buffer it is a view
        of, where that view reads exactly `x` and zeros: each extended dim walks one dim of the
        buffer, whose stored value ends where `x` does and whose pad the extension covers, and
        every other dim steps over whole rows of it or within one element of it."""
        if not x.is_strided() or x.layout[2] != 0 or x.layout[0].name not in self.zero_padded:
            return None
        buf, strides = x.layout[0], x.layout[1]
        stored = self.zero_padded[buf.name]
        for d, (n, n_pad) in enumerate(zip(x.sizes, sizes)):
            if n == n_pad:
                continue
            dims = [j for j, s in enumerate(buf.strides) if s == strides[d] and buf.sizes[j] > 1]
            if len(dims) != 1 or stored[dims[0]] != n or buf.sizes[dims[0]] != n_pad:
                return None
            step, span = buf.strides[dims[0]], buf.strides[dims[0]] * buf.sizes[dims[0]]
            others = [(size, s) for e, (size, s) in enumerate(zip(sizes, strides)) if e != d and size > 1]
            inner = sum((size - 1) * s for size, s in others if s < step)
            if inner >= step or any(s % span for size, s in others if s >= step):
                return None
        if sum((size - 1) * s for size, s in zip(sizes, strides)) >= buf.storage_numel():
            return None
        return Value.of_buffer(buf, sizes, strides)

    def _convolution_weight(self, w: Value) -> Value:
        """A convolution's weight, channels-last like its input: a computed one (an autocast cast)
        stored so by its kernel; a graph input or constant copied so on each call, by a kernel.
        (A copy kept while the weight is unchanged would go stale under a write through
        `weight.data`, which no version counter sees.)"""
        if not w.is_strided():
            return self.realize(w, layouts.channels_last_strides(w.sizes))
        if layouts.is_channels_last(w.sizes, w.layout[1]):
            return w
        return self._materialize(Value(w.sizes, w.dtype, w.device, w.load), layouts.channels_last_strides(w.sizes))

    def _extern_meta(self, node, ext_args, ext_kwargs):
        """The result's fake value for our argument layouts (they may differ from eager's: we
        store intermediates contiguous or channels-last); the traced one if that fails."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        traced = node.meta.get("val")
        if not isinstance(node.target, torch._ops.OpOverload):
            return traced
        if self._fake_mode is None:
            self._fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

        def fake(a):
            if isinstance(a, BufferArg):
                return torch.empty_strided(a.sizes, a.strides, dtype=a.buffer.dtype, device=a.buffer.device)
            if isinstance(a, (list, tuple)):
                return type(a)(fake(x) for x in a)
            return a
        try:
            with self._fake_mode:
                meta = node.target(*fake(ext_args), **{k: fake(v) for k, v in ext_kwargs.items()})
                return self._convolution_result_layout(node.target, ext_args, meta)
        except Exception:
            return traced

    def _convolution_result_layout(self, target, ext_args, meta):
        """cuDNN returns a convolution's results (forward, grad_input, grad_weight) channels-last
        when its input is (`cudnn_conv_suggest_memory_format`); the CUDA meta function of
        `convolution_backward` says contiguous for some (a 1x1 weight), and a result that comes
        out otherwise than promised is copied on every call (`_fix_layout`)."""
        if not self.channels_last or target not in layouts.CONVOLUTIONS:
            return meta
        activation = ext_args[layouts.CHANNELS_LAST_OPERANDS[target][-1]]
        if not (isinstance(activation, BufferArg) and len(activation.sizes) == 4
                and layouts.is_channels_last(activation.sizes, activation.strides)
                and activation.strides != contiguous_strides(tuple(activation.sizes))):
            return meta

        def restrided(m):
            if not isinstance(m, torch.Tensor) or m.dim() != 4:
                return m
            return torch.empty_strided(m.shape, layouts.channels_last_strides(tuple(m.shape)), dtype=m.dtype,
                                       device=m.device)
        return type(meta)(restrided(m) for m in meta) if isinstance(meta, (list, tuple)) else restrided(meta)

    def _extern_buffer(self, meta) -> Optional[Buffer]:
        if not isinstance(meta, torch.Tensor):
            return None
        return self.new_buffer(meta.shape, meta.stride(), meta.dtype, meta.device, "extern")

    def _output(self, results):
        self.output_structure = type(results).__name__ if isinstance(results, (list, tuple)) else "single"
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        if any(isinstance(r, (list, tuple, dict)) for r in results):
            raise NotImplementedError("nested graph outputs")
        fx_nodes = results
        values = [self.env[n] if isinstance(n, torch.fx.Node) else n for n in fx_nodes]
        mutated_into = {id(src): dst for dst, src in self._mutations}
        written = {dst.layout[0].name for dst, _ in self._mutations}
        self.outputs = [None] * len(values)
        views = self.view_outputs              # (none involves a free output: backend._compile)
        for i in [k for k in range(len(values)) if k not in views] + sorted(views):
            n, v = fx_nodes[i], values[i]
            if i in views and isinstance(self.outputs[views[i]], Value):
                # eager's view of another output: that output's buffer, which the caller
                # (backend._outputs_viewing_outputs) views as eager does; no kernel computes it
                self.outputs[i] = self.outputs[views[i]]
                continue
            free = i in self.free_outputs
            if isinstance(v, Value):
                if id(v) in mutated_into and mutated_into[id(v)].sizes == v.sizes:
                    v = mutated_into[id(v)]          # `x += 1; return x`: return the input itself
                elif not v.is_strided():
                    v = self.realize(v, None if free else
                                     self.eager_strides(n, v.sizes) or contiguous_strides(v.sizes))
                elif v.layout[0].name in written or (
                        not free and self._strides_differ_from_eager(v, n)):
                    # the value before the write-back: keep a copy; a value stored in another
                    # layout than eager's (padded rows, NHWC: AOTAutograd's backward indexes a
                    # saved tensor with eager's strides): a copy in eager's layout
                    v = self._materialize(Value(v.sizes, v.dtype, v.device, v.load), self.eager_strides(n, v.sizes))
            self.outputs[i] = v
        self._write_back()

    def output_strides(self) -> list[Optional[tuple[int, ...]]]:
        """Per graph output: the strides of a free output, or of one whose eager layout is not its
        meta value's (`note_eager_layout`), that comes out in another layout than its meta value
        gives (what the backward, traced with meta values, must be compiled for), else None."""
        fx_nodes = graph_outputs(self.gm)
        out = []
        for i, (n, v) in enumerate(zip(fx_nodes, self.outputs)):
            meta = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
            noted = i in self.free_outputs or n in self._eager_layouts
            differs = noted and isinstance(v, Value) and v.is_strided() \
                and isinstance(meta, torch.Tensor) and tuple(meta.shape) == v.sizes \
                and any(size > 1 and s != e for size, s, e in zip(v.sizes, v.layout[1], meta.stride()))
            out.append(tuple(v.layout[1]) if differs else None)
        return out

    def _strides_differ_from_eager(self, v: Value, node: torch.fx.Node) -> bool:
        """Is `v` all of a buffer of ours (not a view of a graph input, which must alias, nor a host
        value) whose strides differ from the dense strides eager gives this output, `node`'s (dims
        of size 1 aside)?"""
        buf, strides, offset = v.layout
        eager = self.eager_strides(node, v.sizes)
        if buf.kind not in ("temp", "extern") or eager is None or offset != 0 or self.on_host(v):
            return False
        return any(n > 1 and s != e for n, s, e in zip(v.sizes, strides, eager))

    @property
    def mutated_inputs(self) -> list[int]:
        """Positions of the graph inputs written in place."""
        names = {dst.layout[0].name for dst, _ in self._mutations}
        return [i for i, b in enumerate(self.input_buffers) if b is not None and b.name in names]

    def _write_back(self):
        """Store each mutated input's new value into the input itself, after everything else.

        In the functional graph every read of an input means its value before the graph, so a
        write-back must come after every read of what it overwrites. The writes are ordered so
        that one whose value reads another written input comes before that input's write (Adam:
        p's new value reads m and v, so p is stored first; fused into one kernel, each lane loads
        p, g, m, v and then stores p, m, v). Writes that read each other (weight decay: the
        momentum reads p, p reads the momentum) only at the positions they store stay as they
        are: the scheduler puts them into one kernel (or refuses the graph). A value that reads
        its own input elsewhere than where it is stored (`x[1:] = x[:-1]`, lanes would race) and
        one value of any other cycle (a swap of differently shaped views) are computed into
        temporaries first."""
        pending = []                                   # [input buffer, body, names it reads]
        for dst, src in self._mutations:
            buf = dst.layout[0]
            if isinstance(src, Value) and src.is_strided() and src.layout == dst.layout:
                continue                               # copy onto itself
            if self.on_host(buf):                      # `step += 1` on a CPU counter: as eager does
                self._host_write_back(dst, src)
                continue
            if isinstance(src, Value) and self.on_host(src):    # a GPU input set from a CPU scalar
                src = self._kernel_operands(src)
                if src is None:
                    raise NotImplementedError("a GPU input written from a CPU tensor")
            pending.append([buf, self._write_back_body(buf, src), None])
        for item in pending:
            buf, body, _ = item
            at = buf.store_index(domain_vars(len(buf.sizes)))
            if any(ld.arg[0] == buf.name and not at_position(ld, at) for ld in loads([body])):
                item[1] = self._write_back_body(buf, self._materialize(_lazy_of(buf, body)))
            item[2] = {ld.arg[0] for ld in loads([item[1]])}
        ordered = []
        while pending:
            ready = next((item for item in pending
                          if not any(item[0].name in other[2] for other in pending if other is not item)), None)
            if ready is None:       # a cycle (p reads m, m reads p): fine inside one kernel
                ready = next((item for item in pending
                              if all(_same_lanes(other, item) for other in pending
                                     if other is not item and item[0].name in other[2])), None)
            if ready is None:                          # a cycle across kernels: compute one value first
                first = pending[0]
                first[1] = self._write_back_body(first[0], self._materialize(_lazy_of(first[0], first[1])))
                first[2] = {ld.arg[0] for ld in loads([first[1]])}
                continue
            pending.remove(ready)
            ordered.append(ready)
        for buf, body, _ in ordered:
            self.nodes.append(PointwiseNode(buf, body))

    def _host_write_back(self, dst: Value, src):
        """`dst.copy_(src)` as an aten call (after every reader of dst's old value: scheduler)."""
        src_arg = self.realize(src).buffer_arg() if isinstance(src, Value) else src
        name = self._extern_name(aten.copy_.default)
        self.nodes.append(ExternNode(name, aten.copy_.default, (dst.buffer_arg(), src_arg), {}, [None], "single",
                                     mutates=dst.layout[0].name))

    @staticmethod
    def _write_back_body(buf, src):
        if isinstance(src, Value):
            src = broadcast_to(src, buf.sizes)
            return cast(src.load(domain_vars(len(buf.sizes))), buf.dtype)
        return const(src, buf.dtype)


def _same_lanes(reader, written) -> bool:
    """Can the write-back `reader` (whose value reads `written`'s input) share a kernel with the
    write-back `written`, each lane reading the old element before storing? Same sizes, and
    every read at the position stored."""
    buf = written[0]
    if reader[0].sizes != buf.sizes:
        return False
    at = buf.store_index(domain_vars(len(buf.sizes)))
    return all(at_position(ld, at) for ld in loads([reader[1]]) if ld.arg[0] == buf.name)


def _lazy_of(buf, body) -> Value:
    """A lazy value of `buf`'s sizes computing `body` (an expression in `v0, v1, ...`)."""
    from .ir import substitute_index
    names = [f"v{k}" for k in range(len(buf.sizes))]
    return Value(buf.sizes, buf.dtype, buf.device,
                 lambda index: substitute_index([body], dict(zip(names, index)))[0])


def graph_outputs(gm: torch.fx.GraphModule) -> list:
    """What `gm` returns, flattened, one item per output position (a node, or a constant)."""
    return _flatten(next(n for n in gm.graph.nodes if n.op == "output").args[0])


def _flatten(x) -> list:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flatten(item)]
    return [x]


def _column_major(sizes) -> tuple[int, ...]:
    """Dense strides with the last two dims swapped in memory (a transposed matrix, per batch)."""
    swapped = contiguous_strides(tuple(sizes[:-2]) + (sizes[-1], sizes[-2]))
    return swapped[:-2] + (swapped[-1], swapped[-2])


def _padded_broadcast(sizes, out_sizes, padded_out_sizes) -> tuple[int, ...]:
    """`sizes` of a tensor broadcast to `out_sizes` (aligned right), each dim that spans the
    result's dim extended as the result is to `padded_out_sizes`."""
    lead = len(out_sizes) - len(sizes)
    return tuple(padded_out_sizes[lead + i] if lead + i >= 0 and n == out_sizes[lead + i] else n
                 for i, n in enumerate(sizes))


#: ops whose result is a view of their input (followed from a matmul to the graph's output)
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default}


def _returned_as_viewed(node: torch.fx.Node, returned: set) -> bool:
    """Is `node`'s value, itself or through views, one of the `returned` outputs (those that keep
    eager's strides)?"""
    seen, todo = {node}, [node]
    while todo:
        n = todo.pop()
        if n in returned:
            return True
        for user in n.users:
            if user.op == "call_function" and user.target in _VIEWS and user not in seen:
                seen.add(user)
                todo.append(user)
    return False


def _warn_once(op: str, error: Exception) -> None:
    """A lowering that raised is a bug of ours, and its op an aten call: right, but slower than a
    kernel. Said once per op and kind of error (the graph's `lowering_errors` keep every one), so
    that it is seen and reported, not hidden in a debug log."""
    records.warn_once(("triton-lowering", op, type(error).__name__),
                      f"dynamo_lite triton backend: lowering {op} failed ({type(error).__name__}: {error}); it runs as "
                      f"an aten call (a bug: please report it with this message; DYNAMO_LITE_TRITON_STRICT=1 raises "
                      f"instead)")
