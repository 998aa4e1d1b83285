"""dynamo_lite's `triton` backend: fused Triton kernels generated from captured graphs.

    import dynamo_lite as dl
    f = dl.capture(fn, backend="triton")                      # or torch.compile(fn, backend=triton_backend)

Modules, in pipeline order: decompose (fx -> functional aten); values, lowerings (pointwise),
lower_views, lower_reductions and graph_lowering (aten -> the loop IR of ir.py); scheduler
(fusion); codegen (Triton source from op templates); wrapper (the Python `call` that allocates
and launches); launch and cache (compile, tune, reuse); backend (the entry point). Importing this package needs neither triton nor a GPU; compiling a
graph needs triton and a CUDA GPU or TRITON_INTERPRET=1.
"""
from ..registry import register_backend
from .backend import CompiledGraph, compile_graph, triton_backend

register_backend("triton", triton_backend)

__all__ = ["triton_backend", "compile_graph", "CompiledGraph"]
