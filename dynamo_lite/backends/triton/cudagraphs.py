"""The triton backend's optional CUDA-graph mode: a compiled graph's kernels and library calls
recorded once into a CUDA graph and replayed, for graphs whose calls cost more on the host than on
the GPU (issue 14, item 8).

    dl.capture(model, backend="triton_cudagraphs")     # or DYNAMO_LITE_TRITON_CUDAGRAPHS=1

Off by default: a recording keeps its own memory for every buffer of the graph (a private pool
of the caching allocator, alive as long as the compiled graph), and replaying costs copies (below).

How a graph runs (`Recorded`):
* its first call runs as compiled (it compiles and tunes the kernels; a first call that falls
  back to the captured graph is never recorded);
* the second call records: the inputs that are a module's parameters or buffers (or
  `nn.Parameter`s: `static_positions`) are recorded in place, at their addresses; every other
  tensor input gets a buffer of the recording, which each call copies the argument into. One
  warm-up on a side stream, then `torch.cuda.graph`;
* each later call checks that the parameters are still where they were (a parameter the user
  replaced, `model.w = nn.Parameter(...)`, makes that call run as compiled, not replayed), copies
  the other inputs in, replays, and returns new tensors holding the outputs: a replay writes the
  recording's buffers, so outputs a caller still holds are never overwritten. Outputs that share
  memory with each other still do (each storage is copied once, the outputs are views of it).

Not recorded (they run as compiled, the reason on `compiled_graph.cuda_graph`): graphs with an
input or a value that is not a CUDA tensor on one device, that write into an input, draw random
numbers (a replay would repeat the recorded draws' positions in the stream, not eager's), compute
on the host, check tensor values (`graph_checks`: they read values on the host), return an
input's memory, or whose recording fails (a library call that cannot be recorded: the call runs
as compiled, the CUDA state as before). Graphs with symbolic sizes and training graphs are never
offered (backend.triton_backend).
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

import torch

log = logging.getLogger("dynamo_lite.triton")


def static_positions(gm: torch.fx.GraphModule, example_inputs: list) -> frozenset:
    """Input positions recorded in place: a module's parameters and buffers, by the placeholder's
    source (dynamo_lite's capture), or an `nn.Parameter` (torch.compile's, which names none)."""
    from ...sources import ModuleDictSource
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        source = node.meta.get("source")
        if isinstance(value, torch.nn.Parameter) or (
                isinstance(source, ModuleDictSource) and source.table in ("_parameters", "_buffers")):
            out.add(i)
    return frozenset(out)


def why_not_recordable(aten_gm: torch.fx.GraphModule, example_inputs: list, mutated: list,
                       host_ops: dict) -> Optional[str]:
    """Why a compiled graph cannot be recorded, judged when it is compiled (None: it can)."""
    devices = set()
    for value in example_inputs:
        if not isinstance(value, torch.Tensor):
            return f"an input is a {type(value).__name__}, not a tensor"
        devices.add(value.device)
    for node in aten_gm.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and (node.users or node.op == "placeholder"):
            devices.add(value.device)           # (not an unused result: attention's RNG state)
        if node.op == "call_function" and draws_random_numbers(node):
            return f"it draws random numbers ({node.target})"
    if any(d.type != "cuda" for d in devices) or len(devices) != 1:
        return f"its values are on {', '.join(sorted(map(str, devices)))}, not on one CUDA device"
    if mutated:
        return "it writes into its inputs"
    if host_ops:
        return "it computes on the host"
    return None


#: the argument that says how many elements a seeded op drops (attention's dropout, native_dropout)
_DROPOUT_ARGUMENTS = ("dropout_p", "p")


def draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether an aten call draws from the random stream: an op torch tags as seeded, unless its
    dropout probability is 0 (attention with `dropout_p=0.0`, what every model's eval forward
    calls, draws nothing)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    for index, argument in enumerate(target._schema.arguments):
        if argument.name in _DROPOUT_ARGUMENTS:
            if index < len(node.args):
                p = node.args[index]
            else:
                p = node.kwargs.get(argument.name, argument.default_value)
            return not (isinstance(p, (int, float)) and p == 0)
    return True


class Recorded:
    """A compiled graph's callable that records itself into a CUDA graph at its second call and
    replays after (see the module docstring). `info` is the CompiledGraph: its `cuda_graph` says
    what happened ("recorded", or why not) and counts replays and calls run as compiled."""

    def __init__(self, call: Callable, info, static: frozenset):
        self.call = call
        self.info = info
        self.static = static
        self.warm = False                # the first call ran (it compiles and tunes the kernels)
        self.gave_up = False             # not recordable: every call runs as compiled
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self.device: int = 0             # the recording's CUDA device
        self.inputs: list = []           # what the recording reads: parameters and our buffers
        self.addresses: list = []        # (position, address) of the inputs recorded in place
        self.copied: list = []           # positions copied into a buffer of the recording
        self.outputs = None              # what the recording writes (a tuple/list, or one tensor)
        self.storages: list = []         # the outputs' distinct storages, in first-use order
        self.layout: list = []           # per output: (storage index, dtype, offset, size, stride) or None

    def __call__(self, *args):
        if self.graph is not None:
            return self._replay(args)
        if not self.warm or self.gave_up:
            self.warm = True
            return self.call(*args)
        if self.info.fallback_reason is not None:
            return self._give_up("the graph runs as captured", args)
        return self._record(args)

    def _give_up(self, why: str, args):
        self.gave_up = True
        self.info.cuda_graph = f"not recorded: {why}"[:300]
        return self.call(*args)

    # -- recording ------------------------------------------------------------------------------

    def _record(self, args):
        device = args[0].device
        inputs, copied, addresses = [], [], []
        for i, a in enumerate(args):
            if i in self.static:
                inputs.append(a)
                addresses.append((i, a.data_ptr()))
            else:
                inputs.append(torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=device).copy_(a))
                copied.append(i)
        try:
            with torch.cuda.device(device):
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):        # a warm-up off the recording (libraries' lazy set-up)
                    self.call(*inputs)
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    outputs = self.call(*inputs)
        except Exception as e:                   # noqa: BLE001 -- recording is an optimisation
            log.info("triton backend: CUDA graph not recorded: %s", e, exc_info=True)
            return self._give_up(f"{type(e).__name__}: {e}", args)
        flat = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        inputs_memory = {t.untyped_storage().data_ptr() for t in inputs}
        storages, index_of, layout = [], {}, []      # index_of: a storage's address -> its position
        for o in flat:
            if not isinstance(o, torch.Tensor):
                layout.append(None)
                continue
            key = o.untyped_storage().data_ptr()
            if key in inputs_memory:
                return self._give_up("an output shares memory with an input", args)
            if key not in index_of:
                index_of[key] = len(storages)
                storages.append(o.untyped_storage())
            layout.append((index_of[key], o.dtype, o.storage_offset(), tuple(o.shape), o.stride()))
        self.graph, self.inputs, self.copied, self.addresses = graph, inputs, copied, addresses
        self.device = device.index if device.index is not None else torch.cuda.current_device()
        self.outputs, self.storages, self.layout = outputs, storages, layout
        self.info.cuda_graph = "recorded"
        return self._replay(args)

    # -- replaying ------------------------------------------------------------------------------

    def _replay(self, args):
        for i, address in self.addresses:
            if args[i].data_ptr() != address:       # a parameter moved: this call runs as compiled
                self.info.cuda_graph_calls["compiled"] += 1
                return self.call(*args)
        if torch.cuda.current_device() != self.device:
            with torch.cuda.device(self.device):    # (copies and the replay on the graph's device's stream)
                return self._run_recording(args)
        return self._run_recording(args)

    def _run_recording(self, args):
        for i in self.copied:
            self.inputs[i].copy_(args[i])
        self.graph.replay()
        self.info.cuda_graph_calls["replayed"] += 1
        return self._fresh_outputs()

    def _fresh_outputs(self):
        """New tensors holding what the replay wrote: each storage copied once, outputs that
        shared one share the copy, at the same offsets and strides."""
        copies = []
        for s in self.storages:
            fresh = torch.empty(s.nbytes(), dtype=torch.uint8, device=s.device).untyped_storage()
            fresh.copy_(s)
            copies.append(fresh)
        flat = list(self.outputs) if isinstance(self.outputs, (tuple, list)) else [self.outputs]
        out = []
        for o, where in zip(flat, self.layout):
            if where is None:
                out.append(o)
                continue
            k, dtype, offset, size, stride = where
            out.append(torch.empty(0, dtype=dtype, device=copies[k].device).set_(copies[k], offset, size, stride))
        if isinstance(self.outputs, (tuple, list)):
            return type(self.outputs)(out)
        return out[0]
