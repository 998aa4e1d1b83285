"""dynamo_lite's `triton` backend: fused Triton kernels generated from captured graphs.

    import dynamo_lite as dl
    f = dl.capture(fn, backend="triton")                      # or torch.compile(fn, backend=triton_backend)

Modules, in pipeline order: decompose (fx -> functional aten); values, lowerings (pointwise),
lower_views, lower_reductions and graph_lowering (aten -> the loop IR of ir.py); scheduler
(fusion); codegen (Triton source from op templates); wrapper (the Python `call` that allocates
and launches); launch and cache (compile, tune, reuse); precompile and compile_worker (kernels
compiled ahead of the first call in worker processes); backend (the entry point). Importing
this package needs neither triton nor a GPU; compiling a graph needs triton and a CUDA GPU or
TRITON_INTERPRET=1.
"""
import importlib

_API = {"triton_backend": "backend", "compile_graph": "backend", "CompiledGraph": "backend"}
__all__ = ["triton_backend", "compile_graph", "CompiledGraph"]


def __getattr__(name: str):
    """The public names, imported on first use (the registry registers the backend itself)."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
