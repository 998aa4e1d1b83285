"""The generated wrapper: one Python function `call(arg0, arg1, ...)` per graph.

It allocates every buffer a kernel stores (reusing buffers that died earlier when their size,
dtype and device match), launches the kernels (`Launcher`s, whose grids are fixed after the first
call), runs extern aten calls, drops buffers after their last use, and returns the graph's
outputs (views of buffers or inputs where the graph returns views). The source is kept on the
compiled graph (`.source`) for debugging, e.g.

    def call(arg0, arg1, arg2):
        if get_device() != 0:               # (a CUDA graph: the allocator and launches use device 0)
            with on_device(0):
                return call(arg0, arg1, arg2)
        buf0 = empty_strided((64, 256), (256, 1), torch.float32)
        kernel0.run(arg0, arg1, arg2, buf0)
        return (buf0,)

Host time per call is what a launch-bound graph costs (a training step makes hundreds of buffers),
so the wrapper calls what Inductor's does: buffers on the graph's device come from torch's
argument-parsing-free allocators (`_empty_strided_cuda`: ~2 us less than `torch.empty_strided`
with keywords; it allocates on the current device, hence the device check at the top), and
operands of the extern calls that only read them (matmuls, convolutions, attention: their
schemas say so, `_reads_only`) are viewed with `_reinterpret_tensor` (an alias without autograd
view bookkeeping, ~1.4 us less than `as_strided`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

import torch

from . import layouts
from .codegen import KernelSource
from .graph_lowering import TRUSTED_LAYOUT, GraphLowering
from .host_math import RUNTIME, HostMath
from .ir import Buffer, BufferArg, ExternNode, Op
from .scheduler import Group


@dataclasses.dataclass
class KernelCall:
    kernel: Optional[KernelSource]      # None: nothing to compute (zero elements), only allocate
    group: Group

    def buffers(self) -> list[str]:
        if self.kernel is None:
            return [m.node.name for m in self.group.stores]
        return list(self.kernel.args)


aten = torch.ops.aten

#: extern ops the wrapper calls through their Python binding, which runs the same overload with
#: the same arguments (the `out=` ones: the `.out` overload) for less host time: an OpOverload call
#: converts every argument through the op's schema, about twice a binding's time for a
#: convolution. tests/test_triton_runtime.py checks each entry against its OpOverload.
PYTHON_BINDINGS = {
    aten.convolution.default: torch.convolution,
    aten.mm.default: torch.mm, aten.mm.out: torch.mm,
    aten.addmm.default: torch.addmm, aten.addmm.out: torch.addmm,
    aten.bmm.default: torch.bmm, aten.bmm.out: torch.bmm,
    aten.baddbmm.default: torch.baddbmm, aten.baddbmm.out: torch.baddbmm,
    aten.embedding.default: torch.embedding,
}


def _torch_fast_path(name: str):
    """One of torch's C helpers that skip argument parsing (torch._C._dynamo.guards holds them:
    what Inductor's wrappers call), or None where this torch has none."""
    return getattr(getattr(getattr(torch._C, "_dynamo", None), "guards", None), name, None)


def fast_allocator(device: torch.device):
    """`empty_strided(sizes, strides, dtype)` on `device` without parsing keywords, or None where
    torch has none for it. The CUDA one allocates on the current device: the wrapper makes
    `device` current first."""
    if device.type == "cuda" and device.index is None:
        return None
    return _torch_fast_path({"cpu": "_empty_strided_cpu", "cuda": "_empty_strided_cuda"}.get(device.type, ""))


#: how a wrapper finds its allocator (tests swap in one that fills buffers with NaN)
ALLOCATOR = fast_allocator


def _reinterpreter():
    """`reinterpret(t, sizes, strides[, offset])`: `t`'s memory seen with these sizes and strides,
    `offset` elements past where `t` starts, without autograd's view bookkeeping (for operands a
    library call only reads). torch's `_reinterpret_tensor` takes the offset as an increment, as
    `_view` does; where torch has none, `_view` itself."""
    return _torch_fast_path("_reinterpret_tensor") or _view


def _view(t: torch.Tensor, sizes, strides, offset: int = 0) -> torch.Tensor:
    return t.as_strided(sizes, strides, t.storage_offset() + offset)


def _fix_layout(t: torch.Tensor, sizes, strides) -> torch.Tensor:
    """An extern result whose strides differ from what its fake value promised: copy it (a view
    where they differ only in dims of size 1: the same memory order)."""
    if not isinstance(t, torch.Tensor) or tuple(t.stride()) == tuple(strides) or t.numel() <= 1:
        return t
    if tuple(t.shape) == tuple(sizes) and all(n == 1 or a == b for n, a, b in zip(sizes, t.stride(), strides)):
        return t.as_strided(sizes, strides)
    out = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _current_cuda_device():
    return getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _reads_only(target) -> bool:
    """Does the extern call only read its tensor arguments, and return no alias of them? Then
    its operands are viewed with `reinterpret` (matmuls, convolutions, attention)."""
    if target in PYTHON_BINDINGS or target is layouts.row_class_mm:
        return True
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments) \
        and not _returns_alias(target)


def _returns_alias(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None:
        return True
    return any(r.alias_info is not None for r in schema.returns)


class WrapperCodegen:
    def __init__(self, lowering: GraphLowering, items: list[Union[KernelCall, ExternNode]],
                 grad_mode_after: Optional[bool]):
        self.lw = lowering
        self.items = items
        self.grad_mode_after = grad_mode_after
        self.globals: dict[str, Any] = {"torch": torch, "_view": _view, "_fix_layout": _fix_layout,
                                        "reinterpret": _reinterpreter()}
        # buffers on the graph's device: `empty_strided(sizes, strides, dtype)` (fast_allocator)
        self.allocator = ALLOCATOR(lowering.device)
        if self.allocator is not None:
            self.globals["empty_strided"] = self.allocator
        self.device_checked = self.allocator is not None and lowering.device.type == "cuda"
        self.lines: list[str] = []
        self._global_ids: dict[int, str] = {}
        self.launchers = []
        # ops on host scalars computed as Python numbers instead of aten calls (host_math.py)
        self.host = HostMath(lowering, items)
        self.globals.update(RUNTIME)

    # -- globals ---------------------------------------------------------------------------------

    def _global(self, obj, prefix: str) -> str:
        name = self._global_ids.get(id(obj))
        if name is None:
            name = f"{prefix}{len(self._global_ids)}"
            self._global_ids[id(obj)] = name
            self.globals[name] = obj
        return name

    def _render(self, obj, read_only: bool = False) -> str:
        """`obj` as an expression; `read_only`: an operand the call only reads (a fast view)."""
        if isinstance(obj, BufferArg):
            if obj.is_whole():
                return obj.buffer.name
            if read_only:
                offset = f", {obj.offset}" if obj.offset else ""
                return f"reinterpret({obj.buffer.name}, {obj.sizes}, {obj.strides}{offset})"
            if obj.offset == 0:              # (as_strided keeps the tensor's own storage offset)
                return f"{obj.buffer.name}.as_strided({obj.sizes}, {obj.strides})"
            return f"_view({obj.buffer.name}, {obj.sizes}, {obj.strides}, {obj.offset})"
        if obj is None or isinstance(obj, (bool, int, str)):
            return repr(obj)
        if isinstance(obj, float):
            return repr(obj) if obj == obj and abs(obj) != float("inf") else f"float('{obj}')"
        if isinstance(obj, list):
            return "[" + ", ".join(self._render(x, read_only) for x in obj) + "]"
        if isinstance(obj, tuple):
            return "(" + "".join(self._render(x, read_only) + ", " for x in obj) + ")"
        if isinstance(obj, torch.dtype):
            return str(obj)
        return self._global(obj, "_const")

    # -- buffer lifetimes ----------------------------------------------------------------------------

    def _uses(self) -> dict[str, int]:
        """Last item index that reads or writes each buffer (outputs: never dies)."""
        last: dict[str, int] = {}
        for i, item in enumerate(self.items):
            for name in self._item_buffers(item):
                last[name] = i
        for out in self.lw.outputs:
            if hasattr(out, "layout") and out.layout is not None:
                last[out.layout[0].name] = len(self.items)
        for item in self.items:                  # results that alias arguments keep them alive
            if isinstance(item, ExternNode) and not item.writes_out and _returns_alias(item.target):
                for name in item.reads():
                    last[name] = len(self.items)
        return last

    def _item_buffers(self, item) -> list[str]:
        if isinstance(item, KernelCall):
            return item.buffers()
        return sorted(item.reads()) + [b.name for b in item.outputs if b is not None]

    # -- generation ---------------------------------------------------------------------------------

    def generate(self) -> str:
        params = [b.name if b is not None else f"_unused{i}" for i, b in enumerate(self.lw.input_buffers)]
        self.lines.append(f"def call({', '.join(params)}):")
        if self.device_checked:
            index = self.lw.device.index
            self.globals.update(get_device=_current_cuda_device(), on_device=torch.cuda.device)
            self.lines += [f"    if get_device() != {index}:",
                           f"        with on_device({index}):",
                           f"            return call({', '.join(params)})"]
        for name, tensor in self.lw.constants.items():
            self.globals[name] = tensor
        last = self._uses()
        # extern results a kernel indexes with the promised strides (others need no check)
        self.kernel_reads = {name for it in self.items if isinstance(it, KernelCall) for name in it.buffers()}
        pool: dict[tuple, list[Buffer]] = {}
        live_alloc: dict[str, Buffer] = {}
        for i, item in enumerate(self.items):
            self.lines.extend(f"    {line}" for line in self.host.lines(i))
            if isinstance(item, KernelCall):
                self._kernel_call(i, item, pool, live_alloc)
            elif not self.host.replaces(i):          # (an extern computed as Python numbers above)
                self._extern_call(item, pool, live_alloc)
            for name in self._item_buffers(item):
                if last.get(name) == i and name in self.lw.buffers:
                    self._release(self.lw.buffers[name], pool, live_alloc)
        if self.grad_mode_after is not None:
            self.lines.append(f"    torch._C._set_grad_enabled({self.grad_mode_after})")
        outs = [self._render_output(o) for o in self.lw.outputs]
        # outputs that are an argument itself (the same object): only these can alias an input
        self.outputs_passing_inputs = {i for i, o in enumerate(outs) if o in params}
        if self.lw.output_structure == "single":
            self.lines.append(f"    return {outs[0]}")
        elif self.lw.output_structure == "list":
            self.lines.append(f"    return [{', '.join(outs)}]")
        else:
            self.lines.append(f"    return ({''.join(o + ', ' for o in outs)})")
        return "\n".join(self.lines) + "\n"

    def _render_output(self, out) -> str:
        if hasattr(out, "layout") and out.layout is not None:
            return self._render(out.buffer_arg())
        if out is None or isinstance(out, (bool, int, float, str)):
            return self._render(out)
        return self._global(out, "_const")

    def _kernel_call(self, i: int, item: KernelCall, pool, live_alloc):
        for name in item.buffers():
            buf = self.lw.buffers[name]
            if buf.kind == "temp" and name not in live_alloc:
                self._allocate(buf, pool, live_alloc)
        if item.kernel is None:
            return
        scalars = item.kernel.scalars
        may_misalign = tuple(k for k, name in enumerate(item.kernel.args)
                             if self.lw.buffers[name].kind in ("input", "extern", "constant") and k not in scalars)
        # (a scatter's adds land on what its first kernel stored: tuned on copies as well)
        written = {m.node.name for m in item.group.stores
                   if m.node.buffer.kind == "input" or m.body.op is Op.SCATTER_ADD}
        in_place = tuple(k for k, name in enumerate(item.kernel.args) if name in written)
        from .launch import Launcher
        from .precompile import arg_type
        arg_types = tuple(arg_type(self.lw.buffers[name].dtype, k in scalars) for k, name in enumerate(item.kernel.args))
        launcher = Launcher(item.kernel, may_misalign, in_place, arg_types)
        self.launchers.append(launcher)
        kname = self._global(launcher, "kernel")
        # a host scalar's value: a Python number computed here (host_math), or read at call time (a
        # CPU tensor's `.item()` does not wait for the GPU)
        args = [(self.host.scalar_arg(name) or f"{name}.item()") if k in scalars else name
                for k, name in enumerate(item.kernel.args)]
        self.lines.append(f"    {kname}.run({', '.join(args)})")

    def _allocate(self, buf: Buffer, pool, live_alloc):
        key = (buf.storage_numel(), buf.dtype, str(buf.device))
        free = pool.get(key)
        if free:
            old = free.pop()
            if old.sizes == buf.sizes and old.strides == buf.strides:
                self.lines.append(f"    {buf.name} = {old.name}  # reuse")
            else:
                self.lines.append(f"    {buf.name} = {old.name}.as_strided({buf.sizes}, {buf.strides})  # reuse")
            self.lines.append(f"    del {old.name}")
        elif self.allocator is not None and buf.device == self.lw.device:
            self.lines.append(f"    {buf.name} = empty_strided({buf.sizes}, {buf.strides}, {buf.dtype})")
        else:
            dev = self._render(buf.device)
            self.lines.append(f"    {buf.name} = torch.empty_strided({buf.sizes}, {buf.strides}, "
                              f"dtype={buf.dtype}, device={dev})")
        live_alloc[buf.name] = buf

    def _release(self, buf: Buffer, pool, live_alloc):
        if buf.kind == "temp" and buf.name in live_alloc:
            del live_alloc[buf.name]
            pool.setdefault((buf.storage_numel(), buf.dtype, str(buf.device)), []).append(buf)
        elif buf.kind == "extern" and self.host.holds_tensor(buf.name):
            self.lines.append(f"    del {buf.name}")

    def _extern_call(self, node: ExternNode, pool, live_alloc):
        fn = self._global(PYTHON_BINDINGS.get(node.target, node.target), "aten_op")
        read_only = _reads_only(node.target)
        args = ", ".join(self._render(a, read_only) for a in node.args)
        kwargs = "".join(f", {k}={self._render(v)}" for k, v in node.kwargs.items())
        if node.writes_out:                   # into a buffer of the layout we chose (padded rows)
            out = node.outputs[0]
            self._allocate(out, pool, live_alloc)
            self.lines.append(f"    {fn}({args}{kwargs}, out={out.name})")
            return
        call = f"{fn}({args}{kwargs})" if args else f"{fn}({kwargs.lstrip(', ')})"
        check = node.target not in TRUSTED_LAYOUT
        if node.result_structure == "single":
            out = node.outputs[0]
            target = out.name if out is not None else "_"
            self.lines.append(f"    {target} = {call}")
            if out is not None and check and out.name in self.kernel_reads:
                self._fix_layout_line(out)
            return
        self.lines.append(f"    {node.name} = {call}")
        for k, out in enumerate(node.outputs):
            if out is not None:
                self.lines.append(f"    {out.name} = {node.name}[{k}]")
                if check and out.name in self.kernel_reads:
                    self._fix_layout_line(out)
        self.lines.append(f"    del {node.name}")

    def _fix_layout_line(self, out: Buffer):
        # the strides compared inline (the call, ~2 us, only where they differ)
        self.lines.append(f"    if {out.name}.stride() != {tuple(out.strides)}:")
        self.lines.append(f"        {out.name} = _fix_layout({out.name}, {out.sizes}, {out.strides})")
