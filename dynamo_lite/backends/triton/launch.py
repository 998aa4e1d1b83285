"""Launching a generated kernel: pick its launch config once, then launch cheaply.

Launch configs (XBLOCK, RBLOCK, num_warps) come from a short list per kernel kind. On a GPU, a
big kernel's candidates are timed once (CUDA events, a few runs each) and the winner is cached in
memory and on disk per kernel (its name carries the source hash, and static shapes are part of
the source) and device. Small kernels and the CPU interpreter take the first candidate.

Before compiling a config, a launcher takes back the job that compiles it in a worker process
(precompile.py): a worker already compiled it into Triton's on-disk cache, or is compiling it
(waited for), or has not started it (withdrawn: compiled here, as without workers).

After the first launch, calls skip `JITFunction.run` (argument binding, specialization keys,
cache lookup: ~15 us) and call the compiled kernel's C launcher directly with a precomputed grid,
as Inductor does, unless the pointer-alignment specialization of the inputs changed. That call
(`launcher.run`, a function generated per kernel: `_direct_launch`) passes each tensor as its
address, an int: the C launcher then neither calls `data_ptr()` nor asks the driver about each
pointer (`cuPointerGetAttribute`), and Triton's Python `CudaLauncher.__call__` (scratch buffers,
here none) is skipped; the same addresses give the alignment check.

With `settings.generic_launch` on, the C launcher is our one generic launcher (generic_launch.py:
no launcher built per kernel signature) wherever it can launch the kernel, else Triton's own.
"""
from __future__ import annotations

import math
import os
import time
import types
from typing import Optional

import torch

from . import cache, codegen, generic_launch, settings
from .codegen import KernelSource

#: kernels with fewer elements than this are not benchmarked (launch-bound anyway)
TUNE_MIN_NUMEL = 1 << 18
TUNE_ENV = "DYNAMO_LITE_TRITON_TUNE"       # "0" disables benchmarking
#: pointwise kernels reading and writing more tensors than this get small blocks (see candidates)
MANY_STREAMS = 8


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def candidates(ks: KernelSource, interpret: bool) -> list[dict]:
    """Launch configs worth trying, best guess first."""
    if ks.kind == "poi" and ks.row_tile:          # rows of [YBLOCK, XBLOCK] (codegen's _row_split)
        return _row_tile_candidates(ks, interpret)
    if ks.kind == "poi" and ks.ynumel > 1:        # a 2-D tile [YBLOCK, XBLOCK] (a transposed operand)
        ycap, xcap = max(1, _next_pow2(ks.ynumel)), max(1, _next_pow2(ks.xnumel))
        if interpret:
            return [dict(XBLOCK=min(xcap, 64), YBLOCK=min(ycap, 64), num_warps=4)]
        out = []
        # ((128, 128, 8): a transpose's copy of 32x1024x1024 fp16 on an H200, 36.7 vs 38.0 us)
        for y, x, warps in ((64, 64, 4), (32, 32, 4), (32, 128, 4), (128, 32, 4), (64, 128, 8), (128, 64, 8),
                            (16, 256, 4), (64, 256, 8), (128, 128, 8)):
            cfg = dict(XBLOCK=min(xcap, x), YBLOCK=min(ycap, y), num_warps=warps)
            if cfg not in out and math.ceil(ks.ynumel / cfg["YBLOCK"]) <= 65535:
                out.append(cfg)
        return out or [dict(XBLOCK=min(xcap, 64), YBLOCK=min(ycap, 1024), num_warps=8)]
    if ks.kind == "poi" and ks.row_inner:         # a 1-D tile with vectors of its rows (codegen's _row_vector_split)
        return [dict(cfg, YBLOCK=_next_pow2((cfg["XBLOCK"] - 1) // ks.row_inner + 2))
                for cfg in _pointwise_candidates(ks, interpret)]
    if ks.kind == "poi":
        return _pointwise_candidates(ks, interpret)
    rblock_full = _next_pow2(ks.rnumel)
    if ks.kind == "per":
        if interpret:
            return [dict(XBLOCK=min(_next_pow2(ks.xnumel), max(1, 16384 // rblock_full)), RBLOCK=rblock_full, num_warps=4)]
        if {"sort", "sort_desc"} & set(ks.ops):
            # a bitonic sort exchanges within a thread, then a warp, then through shared memory:
            # few warps a row keep more of its stages in registers
            out = []
            for x, w in ((1, 1), (1, 2), (2, 2), (1, 4), (2, 4), (4, 4), (1, 8)):
                cfg = dict(XBLOCK=min(_next_pow2(ks.xnumel), x), RBLOCK=rblock_full, num_warps=w)
                if cfg not in out and cfg["XBLOCK"] * rblock_full <= 16384:
                    out.append(cfg)
            return out or [dict(XBLOCK=1, RBLOCK=rblock_full, num_warps=4)]
        if rblock_full >= 1024:                 # one (or a few) rows per program
            # (XBLOCK, num_warps): rows of 1024 (BERT's and GPT-2's 768) are fastest with 4 warps
            # and a few rows per program; 16 warps on them is 2-3x slower (H100)
            # rows of 16384 (instance norm over 128x128): 16-32 warps keep 16-32 values a thread
            pairs = {1024: ((1, 4), (2, 4), (4, 4), (1, 8), (2, 8)),
                     2048: ((1, 8), (1, 4), (2, 8), (1, 16), (2, 4))}.get(rblock_full)
            if pairs is None:
                pairs = ((1, 8), (1, 16), (1, 4)) if rblock_full < 16384 else ((1, 16), (1, 32), (1, 8))
            return [dict(XBLOCK=x, RBLOCK=rblock_full, num_warps=w) for x, w in pairs]
        out = []
        for tile, warps in ((2048, 4), (4096, 8), (1024, 4), (8192, 8)):
            xblock = min(_next_pow2(ks.xnumel), max(1, tile // rblock_full))
            cfg = dict(XBLOCK=xblock, RBLOCK=rblock_full, num_warps=warps)
            if cfg not in out:
                out.append(cfg)
        # and one warp a program, its rows reduced within the warp (ResNet's last batch norm +
        # add + relu + average pool, rows of 49 over 8x2048 channels, bf16, on an H200: (32, 1
        # warp) 3.55 us, (8, 1) 3.87, against 4.9-5.3 with 2-8 warps; Inductor 3.63)
        out = out[:3]
        for tile in (2048, 512):
            cfg = dict(XBLOCK=min(_next_pow2(ks.xnumel), max(1, tile // rblock_full)), RBLOCK=rblock_full, num_warps=1)
            if cfg not in out:
                out.append(cfg)
        return out
    # looped reduction: blocks of at most the kernel's bound (its code relies on it: codegen)
    out = []
    for cfg in _looped(ks, interpret, rblock_full):
        cfg = dict(cfg, RBLOCK=min(cfg["RBLOCK"], block_bound(ks)))
        if cfg not in out:
            out.append(cfg)
    return out


def _pointwise_candidates(ks: KernelSource, interpret: bool) -> list[dict]:
    """A 1-D pointwise kernel's configs."""
    if interpret:
        return [dict(XBLOCK=min(_next_pow2(ks.xnumel), 4096), num_warps=4)]
    if len(ks.args) - len(ks.scalars) > MANY_STREAMS and ks.xnumel < TUNE_MIN_NUMEL:
        # many tensors per element (an optimizer step over same-sized parameters, fused side
        # by side): a block per ~1/128 of the elements, so that small tensors still spread
        # over the SMs (one 4096-element block ran 12 AdamW updates of 3072 floats on one
        # SM: 240 us for 1 MB)
        block = min(1024, max(64, _next_pow2(ks.xnumel // 128)))
        return [dict(XBLOCK=block, num_warps=max(1, min(4, block // 128)))]
    if ks.xnumel < 4096:
        block = max(32, _next_pow2(ks.xnumel))
        return [dict(XBLOCK=block, num_warps=max(1, min(4, block // 128)))]
    # (the first is what a kernel below TUNE_MIN_NUMEL gets untuned: one warp a block of 512 made
    # batch norm + relu over 8x512x7x7 bf16 1.68 -> 1.54 us on an H200, but LLaMA's rotary cos /
    # sin over 512x64, 64 programs of one warp, 7.1 -> 9.2 us)
    return [dict(XBLOCK=1024, num_warps=4), dict(XBLOCK=2048, num_warps=8), dict(XBLOCK=512, num_warps=4)]


def _row_tile_candidates(ks: KernelSource, interpret: bool) -> list[dict]:
    """A row tile's configs: whole tiles of 1024 and 2048 elements, each row's block as wide as
    its columns allow or narrower (fewer masked lanes where the columns are not a power of two:
    7 blocks of 128 cover a row of 28 * 28 with 12% masked, one of 1024 with 23%)."""
    ycap, xcap = max(1, _next_pow2(ks.ynumel)), max(1, _next_pow2(ks.xnumel))
    if interpret:
        x = min(xcap, 1024)
        return [dict(XBLOCK=x, YBLOCK=min(ycap, max(1, 4096 // x)), num_warps=4)]
    out = []
    for tile, warps in ((1024, 4), (2048, 8)):
        for width in (1024, 128, 64):
            x = min(xcap, width, tile)
            cfg = dict(XBLOCK=x, YBLOCK=min(ycap, max(1, tile // x)), num_warps=warps)
            if cfg not in out and math.ceil(ks.ynumel / cfg["YBLOCK"]) <= 65535:
                out.append(cfg)
    return out or [dict(XBLOCK=min(xcap, 64), YBLOCK=min(ycap, 1024), num_warps=8)]


def block_bound(ks: KernelSource) -> int:
    """The largest block a looped reduction may be launched with (codegen._block_bound)."""
    return ks.rblock_max or codegen.LOOPED_RBLOCK_MAX


def _looped(ks: KernelSource, interpret: bool, rblock_full: int) -> list[dict]:
    if ks.inner:
        if interpret:
            return [dict(XBLOCK=min(_next_pow2(ks.xnumel), 4), RBLOCK=min(rblock_full, 4096), num_warps=4)]
        # (each the fastest somewhere on an H200: cross-entropy over 32000 logits bf16 with
        # (1, 4096, 4) 155 us against 159-286 us, fp32 with (1, 4096, 8); group norm's 32768-rows
        # with (1, 8192, 32) 37 us, (1, 4096, 32) 39 us against 41-49; a kernel bound to blocks of
        # 4096 has those twice, and times them once)
        return [dict(XBLOCK=1, RBLOCK=2048, num_warps=8), dict(XBLOCK=1, RBLOCK=1024, num_warps=4),
                dict(XBLOCK=1, RBLOCK=4096, num_warps=16), dict(XBLOCK=1, RBLOCK=2048, num_warps=4),
                dict(XBLOCK=1, RBLOCK=4096, num_warps=8), dict(XBLOCK=1, RBLOCK=4096, num_warps=4),
                dict(XBLOCK=1, RBLOCK=4096, num_warps=32), dict(XBLOCK=1, RBLOCK=8192, num_warps=32),
                dict(XBLOCK=1, RBLOCK=8192, num_warps=16), dict(XBLOCK=1, RBLOCK=8192, num_warps=8)]
    if interpret:
        return [dict(XBLOCK=min(_next_pow2(ks.xnumel), 256), RBLOCK=min(rblock_full, 64), num_warps=4)]
    # (the last: 4x the loads in flight per program, for a GPU whose bandwidth the others leave
    # short when the reduction makes few programs: sum over dim 0 of 16384x16384 on an H200)
    return [dict(XBLOCK=64, RBLOCK=16, num_warps=4), dict(XBLOCK=128, RBLOCK=8, num_warps=4),
            dict(XBLOCK=32, RBLOCK=32, num_warps=4), dict(XBLOCK=64, RBLOCK=64, num_warps=8)]


def grid_for(ks: KernelSource, cfg: dict) -> tuple[int, int, int]:
    return (math.ceil(ks.xnumel / cfg["XBLOCK"]), math.ceil(ks.ynumel / cfg.get("YBLOCK", 1)), 1)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


class Launcher:
    """`launcher(*tensors)` runs the kernel on those buffers (in parameter order)."""

    def __init__(self, ks: KernelSource, check_alignment: tuple[int, ...] = (), in_place: tuple[int, ...] = (),
                 arg_types: tuple[str, ...] = ()):
        self.ks = ks
        self.fn = cache.load_kernel(ks.name, ks.source)
        self.check_alignment = check_alignment      # argument positions that may be misaligned
        self.in_place = in_place                    # graph inputs the kernel writes: tuned on copies
        self.arg_types = arg_types                  # precompile.arg_type of each argument ("*float32")
        self.jobs: dict[tuple, object] = {}         # launch config -> its precompile.Job
        self._configs: dict[str, list[dict]] = {}   # device -> configs_to_try
        self.config: Optional[dict] = None
        self.grid: Optional[tuple[int, int, int]] = None
        self._fast = None
        self._alignment = None
        self.tune_seconds = 0.0
        self.compile_seconds = 0.0
        self.wait_seconds = 0.0                     # for workers compiling its configs
        # what the generated wrapper calls: `_call` until the first launch has made the direct one
        self.run = self._call
        self._direct_failed = False

    def __call__(self, *args):
        self.run(*args)

    def _call(self, *args):
        fast = self._fast
        if fast is not None and (not self.check_alignment or self._aligned(args) == self._alignment):
            try:
                fast(*args)
                return
            except (TypeError, ValueError, AttributeError):   # a triton whose launcher API differs
                self._fast = None
        self._slow(args)

    def _unusable(self, args) -> None:
        """The direct launch raised before launching (a triton whose launcher API differs): use
        `_call` from now on, and launch this time through it."""
        self._direct_failed = True
        self.run = self._call
        self._call(*args)

    def _aligned(self, args) -> tuple[bool, ...]:
        return tuple(args[i].data_ptr() % 16 == 0 for i in self.check_alignment)

    def _constexprs(self) -> dict:
        # in the kernel's parameter order (the fast launcher passes them by position)
        return {k: self.config[k] for k in ("XBLOCK", "RBLOCK", "YBLOCK") if k in self.config}

    def configs_to_try(self, device: Optional[torch.device]) -> list[dict]:
        """The launch configs the first call compiles: the first candidate, the one tuned before
        (found on disk), or every candidate, to be timed."""
        key = str(device)
        if key not in self._configs:
            options = candidates(self.ks, _interpreting())
            if len(options) == 1 or _interpreting() or self.ks.numel < TUNE_MIN_NUMEL \
                    or os.environ.get(TUNE_ENV) == "0" or device is None:
                self._configs[key] = options[:1]
            else:
                found = cache.load_config(self.ks.name, torch.cuda.get_device_name(device))
                self._configs[key] = [found] if found is not None else options
        return self._configs[key]

    def precompile(self, pool, target: list, device: Optional[torch.device]) -> None:
        """Submit the configs the first call will compile to the compile pool (precompile.py)."""
        from .precompile import request
        if len(self.arg_types) != len(self.ks.args):
            return
        for cfg in self.configs_to_try(device):
            key = _config_key(cfg)
            if key not in self.jobs:
                self.jobs[key] = pool.submit(request(self.ks, self.arg_types, cfg, target))

    def _take_precompiled(self, cfg: dict) -> None:
        """Before compiling `cfg`: wait for the worker compiling it, or withdraw its job."""
        job = self.jobs.pop(_config_key(cfg), None)
        if job is not None:
            start = time.perf_counter()
            job.take()
            self.wait_seconds += time.perf_counter() - start

    def _slow(self, args):
        if self.config is None:
            self.config = self._choose_config(args)
            self.grid = grid_for(self.ks, self.config)
        self._take_precompiled(self.config)
        kwargs = dict(self._constexprs())
        if not _interpreting():
            kwargs["num_warps"] = self.config["num_warps"]
            kwargs.update(settings.compile_options())
            start = time.perf_counter()
            generic_launch.install()
            with cache.triton_binary_cache():
                compiled = self.fn[self.grid](*args, **kwargs)
            self.compile_seconds += time.perf_counter() - start
            if self._fast is None:
                self._fast = _fast_launcher(compiled, self.grid, _device_of(args), tuple(self._constexprs().values()))
                self._alignment = self._aligned(args) if self.check_alignment else None
                if self._fast is not None and not self._direct_failed:
                    direct = _direct_launch(self, compiled, _device_of(args))
                    if direct is not None:
                        self.run = direct
        else:
            self.fn[self.grid](*args, **kwargs)

    def _choose_config(self, args) -> dict:
        device = None if _interpreting() else _device_of(args)
        options = self.configs_to_try(device)
        if len(options) == 1:
            return options[0]
        start = time.perf_counter()
        timings = []
        # each timing runs the kernel again: on copies of what it writes in place, or the update
        # (`p -= lr * g`) would be applied once per run
        args = tuple(a.clone() if i in self.in_place else a for i, a in enumerate(args))
        for cfg in options:
            try:
                timings.append((self._time(cfg, args), cfg))
            except Exception:          # e.g. out of resources for this config
                continue
        best = min(timings, key=lambda t: t[0])[1] if timings else options[0]
        self.tune_seconds = time.perf_counter() - start
        cache.store_config(self.ks.name, torch.cuda.get_device_name(device), best)
        return best

    def _time(self, cfg: dict, args, reps: int = 8) -> float:
        grid = grid_for(self.ks, cfg)
        kwargs = dict(cfg, **settings.compile_options())
        self._take_precompiled(cfg)
        generic_launch.install()
        with cache.triton_binary_cache():
            self.fn[grid](*args, **kwargs)                  # compile + warm up
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # the GPU sleeps while the launches below are queued, so the kernels run back to back and
        # their time is measured, not the launches' (a kernel of a few microseconds launches slower
        # than it runs: every config would look alike, and the choice would be noise)
        torch.cuda._sleep(_QUEUE_CYCLES)
        start.record()
        for _ in range(reps):
            self.fn[grid](*args, **kwargs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps


_QUEUE_CYCLES = 2_000_000         # ~1 ms of GPU clock: time to queue a timing's launches


def _config_key(cfg: dict) -> tuple:
    return tuple(sorted(cfg.items()))


def _device_of(args) -> torch.device:
    """The device of the kernel's tensors (some arguments may be scalars passed by value)."""
    return next(a.device for a in args if isinstance(a, torch.Tensor))


def _hooks_active(hook) -> bool:
    """Launch hooks (profilers): a HookChain with entries (triton 3.6+) or any callable (older)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


def _fast_launcher(compiled, grid, device: torch.device, constexprs: tuple):
    """A direct call of the compiled kernel's launcher, or None where that is not safe."""
    try:
        import triton
        hooks = triton.knobs.runtime
        if _hooks_active(hooks.launch_enter_hook) or _hooks_active(hooks.launch_exit_hook):
            return None
        run = compiled.run
        function = compiled.function
        packed = compiled.packed_metadata
    except Exception:
        return None
    get_stream = torch._C._cuda_getCurrentRawStream
    index = _device_index(device)
    g0, g1, g2 = grid

    def launch(*args):
        run(g0, g1, g2, get_stream(index), function, packed, None, None, None, *args, *constexprs)
    return launch


def _direct_launch(launcher: Launcher, compiled, device: torch.device):
    """`run(*args)` for this kernel: its arguments' addresses checked for the alignment the
    kernel was compiled for (else `launcher._call`, which compiles the other specialization),
    then the kernel's C launcher called with them (ours or Triton's); or None where its launcher
    is not one this is written for (Triton's with scratch buffers to allocate, tensor descriptors)."""
    try:
        run = compiled.run
        function, packed = compiled.function, compiled.packed_metadata
    except AttributeError:
        return None
    n = len(launcher.ks.args)
    by_value = set(launcher.ks.scalars)
    passed = [f"a{k}" if k in by_value else f"p{k}" for k in range(n)]
    constexprs = [repr(v) for v in launcher._constexprs().values()]
    g0, g1, g2 = launcher.grid
    stream = f"get_stream({_device_index(device)})"
    if isinstance(run, generic_launch.GenericLauncher):
        kinds = run.kinds.decode()
        if len(kinds) != n + len(constexprs) or kinds[n:].strip("x"):
            return None                         # (our constexprs are last, and none is passed)
        kept = [k for k in range(n) if kinds[k] != "x"]
        c_launch = run.native_launch
        call = (f"c_launch(function, {g0}, {g1}, {g2}, {run.threads}, {run.shared}, {stream}, "
                f"{''.join(kinds[k] for k in kept).encode()!r}{''.join(', ' + passed[k] for k in kept)})")
    else:
        try:
            c_launch = run.launch
            if run.global_scratch_size or run.profile_scratch_size or isinstance(c_launch, types.FunctionType):
                return None                     # (a Python function: the tensor-descriptor wrapper)
            cooperative, pdl = bool(run.launch_cooperative_grid), bool(run.launch_pdl)
        except AttributeError:
            return None
        call = (f"c_launch({g0}, {g1}, {g2}, {stream}, function, {cooperative}, {pdl}, None, None, packed, "
                f"None, None, None{''.join(', ' + a for a in passed + constexprs)})")
    params = ", ".join(f"a{k}" for k in range(n))
    as_tuple = f"({params}{',' if n == 1 else ''})"
    lines = [f"def run({params}):", "    try:"]
    lines += [f"        p{k} = a{k}.data_ptr()" for k in range(n) if k not in by_value]
    lines += ["    except AttributeError:", f"        return unusable({as_tuple})"]
    # the alignment each checked argument had at the first launch (16 bytes: Triton's divisibility)
    alignment = list(zip(launcher.check_alignment, launcher._alignment or ()))
    aligned = [k for k, ok in alignment if ok]
    tests = ["(" + " | ".join(f"p{k}" for k in aligned) + ") & 15"] if aligned else []
    tests += [f"not p{k} & 15" for k, ok in alignment if not ok]
    if tests:
        lines += [f"    if {' or '.join(tests)}:", f"        return slow({params})"]
    lines += ["    try:",
              f"        {call}",
              "    except (TypeError, ValueError, OverflowError):   # raised before launching: another API",
              f"        return unusable({as_tuple})"]
    namespace = {"c_launch": c_launch, "get_stream": torch._C._cuda_getCurrentRawStream, "function": function,
                 "packed": packed, "slow": launcher._call, "unusable": launcher._unusable}
    exec(compile("\n".join(lines) + "\n", f"<launch {launcher.ks.name}>", "exec"), namespace)
    return namespace["run"]


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()
