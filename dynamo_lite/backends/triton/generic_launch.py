"""One launcher for all of our kernels, instead of Triton's C launcher per kernel signature.

Triton 3.x builds a C launcher for each kernel signature with the host compiler when a kernel is
first loaded (about a second of gcc each; on a GPT-2 two thirds of the compile workers' time).
Ours is one small C extension, `dynamo_lite._launcher`, built with the package: it takes the
kernel's CUfunction, grid, block and shared memory sizes, stream and arguments, each argument with
a kind character, and calls cuLaunchKernel. This module decides, per compiled kernel, whether it
may launch it, and gives each argument its kind from the kernel's Triton signature.

How it is wired in: before our kernels compile (`install()`, from launch.py), Triton's driver is
made to create launchers through `make_launcher`, which returns a
`GenericLauncher` for a kernel of ours that qualifies and Triton's own `CudaLauncher` for
anything else (other kernels, and ours that need what this one does not do: `why_not`). The
compile workers load this file by path (it imports nothing but the standard library at the top)
to tell which kernels still need Triton's launcher built.

The packing follows Triton 3.6's generated launcher (triton/backends/nvidia/driver.py,
`make_launcher`): constexprs (and arguments the binder specialized into constants: an int equal
to 1, None) are not passed; pointers are addresses (an int, None, or `data_ptr()`); scalars are
packed as its C types; then two null pointers, the global and profile scratch buffers.
tests/test_triton_generic_launch.py compares the bytes with what Triton's own launcher passes.

`settings.generic_launch` (DYNAMO_LITE_TRITON_GENERIC_LAUNCH=0 turns it off) is on by default:
every triton test file has passed with it on an H200 (docs/measurements.md, "One generic
launcher"). It is used with the Triton releases it was checked against (`VERIFIED_TRITON`); with
another, Triton's launcher.
"""
from __future__ import annotations

from typing import Optional

#: Triton signature type -> our kind character (see _launcher.c); "constexpr": not passed
KINDS = {
    "constexpr": "x",
    "i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u1": "B", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "bf16": "z", "fp32": "f", "f32": "f", "fp64": "d",
}
#: the module our kernels are imported into (cache.load_kernel)
KERNEL_MODULE_PREFIX = "dynamo_lite_kernels."

#: launchers made while compiling our kernels: {"generic": n, "triton": n} and why not generic
stats: dict = {"generic": 0, "triton": 0, "reasons": {}}


def kinds_for(signature: dict) -> Optional[str]:
    """One kind per parameter of a kernel's Triton signature (in order), or None where one of them
    is not packed by us (tuples, tensor descriptors)."""
    kinds = []
    for ty in signature.values():
        if isinstance(ty, str) and ty.startswith("*"):
            kinds.append("P")
        elif isinstance(ty, str) and ty in KINDS:
            kinds.append(KINDS[ty])
        else:
            return None
    return "".join(kinds)


def why_not(signature: dict, metadata) -> Optional[str]:
    """Why the generic launcher cannot launch a kernel compiled with this signature and metadata
    (Triton's `KernelMetadata`), or None where it can."""
    if kinds_for(signature) is None:
        return "an argument type it does not pack: " + ", ".join(str(t) for t in signature.values())
    target = getattr(metadata, "target", None)
    if getattr(target, "backend", "cuda") != "cuda":
        return f"a {target.backend} kernel"
    checks = (
        ("num_ctas", 1, "a cluster of CTAs"),
        ("launch_cooperative_grid", False, "a cooperative launch"),
        ("launch_pdl", False, "programmatic dependent launch"),
        ("global_scratch_size", 0, "a global scratch buffer"),
        ("profile_scratch_size", 0, "a profile scratch buffer"),
    )
    for field, plain, what in checks:
        if (getattr(metadata, field, plain) or plain) != plain:
            return what
    if getattr(metadata, "tensordesc_meta", None):
        return "tensor descriptors"
    for field in ("num_warps", "shared"):
        if not isinstance(getattr(metadata, field, None), int):
            return f"no {field} in its metadata"
    return None


#: the Triton releases whose generated launcher the packing was checked against (byte for byte on
#: the CPU, and the triton GPU tests on an H200): another release may pack differently
VERIFIED_TRITON = ("3.6.",)


def unavailable() -> Optional[str]:
    """Why no kernel can be launched by us in this process (not built, no CUDA driver, a Triton
    release the packing was not checked against), or None."""
    try:
        import triton
    except ImportError as e:
        return f"triton is not installed ({e})"
    if not triton.__version__.startswith(VERIFIED_TRITON):
        return f"Triton {triton.__version__}: the packing is checked against Triton {', '.join(VERIFIED_TRITON)}x only"
    try:
        from dynamo_lite import _launcher
    except ImportError as e:
        return f"dynamo_lite._launcher is not built ({e})"
    return _launcher.error()


class GenericLauncher:
    """What Triton's `CompiledKernel.run` is for a kernel we launch: called as Triton calls its
    `CudaLauncher` (grid, stream, function, packed metadata, launch metadata, hooks, then every
    argument, constexprs included)."""

    def __init__(self, signature: dict, metadata):
        from dynamo_lite import _launcher
        self.native_launch = _launcher.launch
        self.kinds = kinds_for(signature).encode()
        self.threads = metadata.num_warps * getattr(getattr(metadata, "target", None), "warp_size", 32)
        self.shared = metadata.shared
        # what launch.py's direct launch reads of a launcher (Triton's CudaLauncher has them too)
        self.global_scratch_size = self.profile_scratch_size = 0
        self.launch_cooperative_grid = self.launch_pdl = False

    def __call__(self, grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,
                 enter_hook, exit_hook, *args):
        if enter_hook is not None:
            enter_hook(launch_metadata)
        self.native_launch(function, grid_x, grid_y, grid_z, self.threads, self.shared, stream, self.kinds, *args)
        if exit_hook is not None:
            exit_hook(launch_metadata)


def _is_ours(src) -> bool:
    fn = getattr(getattr(src, "fn", None), "fn", None)
    return getattr(fn, "__module__", "").startswith(KERNEL_MODULE_PREFIX)


def make_launcher_factory(triton_launcher_cls):
    """A `launcher_cls` for Triton's driver: ours for our kernels that qualify, else Triton's."""
    def make_launcher(src, metadata):
        from . import settings
        if settings.generic_launch and _is_ours(src):
            reason = unavailable() or why_not(getattr(src, "signature", {}), metadata)
            if reason is None:
                stats["generic"] += 1
                return GenericLauncher(src.signature, metadata)
            stats["reasons"][reason] = stats["reasons"].get(reason, 0) + 1
        stats["triton"] += 1
        return triton_launcher_cls(src, metadata)
    make_launcher.triton_launcher_cls = triton_launcher_cls
    return make_launcher


def install() -> None:
    """Make the active Triton driver create launchers through `make_launcher`: called before our
    kernels compile (launch.py). Once per driver, and only Triton's CUDA driver with its own
    launcher (whose launcher ours replaces); the factory hands every kernel not ours to it."""
    from . import settings
    if not settings.generic_launch:
        return
    try:
        from triton.runtime import driver
        active = driver.active
        current = active.launcher_cls
        if getattr(current, "triton_launcher_cls", None) is not None:
            return
        from triton.backends.nvidia.driver import CudaDriver, CudaLauncher
        if isinstance(active, CudaDriver) and current is CudaLauncher:
            active.launcher_cls = make_launcher_factory(current)
    except Exception:               # noqa: BLE001 -- another Triton: its own launchers, as before
        pass


def needs_tritons_launcher(kernel) -> bool:
    """For a compile worker: whether a compiled kernel (Triton's `CompiledKernel`) will still be
    launched through Triton's launcher when the parent launches through ours."""
    return why_not(getattr(kernel.src, "signature", {}), kernel.metadata) is not None
