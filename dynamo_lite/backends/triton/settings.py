"""Settings of the triton backend, read once from the environment (tests may assign them).

    DYNAMO_LITE_TRITON_STRICT=1   raise instead of running a graph eagerly when compiling it fails
                                  (or its first call fails where eager runs)
    DYNAMO_LITE_TRITON_DEBUG=1    print each graph's wrapper and kernel sources
    DYNAMO_LITE_TRITON_TUNE=0     no launch-config benchmarking (take the first candidate)
    DYNAMO_LITE_CACHE_DIR=path    kernel/config cache (default ~/.cache/dynamo_lite)
    DYNAMO_LITE_TRITON_LAYOUTS=   where buffers get the layouts cuBLAS/cuDNN are fast on (layouts.py):
                                  auto (CUDA only, the default), always (the CPU too: tests), never
    DYNAMO_LITE_TRITON_COMPILE_WORKERS=n
                                  processes that compile a graph's kernels ahead of its first call
                                  (precompile.py); 0: each kernel compiles at its first launch.
                                  Default: min(CPUs, 32)
    DYNAMO_LITE_TRITON_GENERIC_LAUNCH=0
                                  kernels launch through Triton's C launcher per signature (built
                                  with gcc) instead of our one generic launcher (generic_launch.py,
                                  the default: no gcc run per kernel signature;
                                  docs/measurements.md, "One generic launcher")
    DYNAMO_LITE_TRITON_HOST_MATH=0  ops on host scalars stay aten calls (host_math.py; to compare)
    DYNAMO_LITE_TRITON_TILE_2D=0    pointwise kernels keep a 1-D tile even with a transposed operand
                                  (codegen.KernelBuilder._transposed_dim; to compare)
    DYNAMO_LITE_TRITON_ROW_TILE=0   pointwise kernels keep a plain 1-D tile even where an operand is
                                  constant along the innermost dims, a per-channel vector over NCHW
                                  (no tile of rows, codegen.KernelBuilder._row_split, and no row
                                  vectors, _row_vector_split; to compare)
    DYNAMO_LITE_TRITON_RECOMPUTE=0  training graphs save what AOTAutograd's default partition
                                  saves (no recomputation of cheap pointwise values: partition.py)
    DYNAMO_LITE_TRITON_CUDAGRAPHS=1 record inference graphs into CUDA graphs and replay them (cudagraphs.py;
                                  the `triton_cudagraphs` backend is `triton` with this on)
    DYNAMO_LITE_TRITON_PERSISTENT_MAX=n
                                  the longest contiguous row a reduction keeps in registers (a
                                  persistent kernel: one read of the row); longer rows loop over it.
                                  Default 16384 (codegen.persistent_limit)
    DYNAMO_LITE_TRITON_FP_FUSION=1  let Triton contract a multiply and an add of two ops into one FMA
                                  (faster where a kernel is bound by its arithmetic; but `x * y - x * y`
                                  is then the product's rounding error, not 0 as in eager, which
                                  rounds every op). Off by default: each op rounds as in eager, and
                                  the kernels write `tl.fma` themselves where no op's result is
                                  observable (a sum's accumulation: codegen)
    DYNAMO_LITE_TRITON_PEEL=0       a looped reduction over rows its blocks do not tile masks every
                                  block, instead of the last, partial one alone (codegen; to compare)
"""
import os


def _int_from_env(name: str, default: int, low: int = 0) -> int:
    try:
        return max(low, int(os.environ.get(name, default)))
    except ValueError:
        return default


def _workers_from_env() -> int:
    default = min(os.cpu_count() or 1, 32)     # as Inductor's compile_threads
    try:
        return max(0, int(os.environ.get("DYNAMO_LITE_TRITON_COMPILE_WORKERS", default)))
    except ValueError:
        return default


strict: bool = os.environ.get("DYNAMO_LITE_TRITON_STRICT", "") == "1"
debug: bool = os.environ.get("DYNAMO_LITE_TRITON_DEBUG", "") == "1"
extern_layouts: str = os.environ.get("DYNAMO_LITE_TRITON_LAYOUTS", "auto")
compile_workers: int = _workers_from_env()
generic_launch: bool = os.environ.get("DYNAMO_LITE_TRITON_GENERIC_LAUNCH", "1") != "0"
host_math: bool = os.environ.get("DYNAMO_LITE_TRITON_HOST_MATH", "1") != "0"
tile_2d: bool = os.environ.get("DYNAMO_LITE_TRITON_TILE_2D", "1") != "0"
row_tile: bool = os.environ.get("DYNAMO_LITE_TRITON_ROW_TILE", "1") != "0"
recompute: bool = os.environ.get("DYNAMO_LITE_TRITON_RECOMPUTE", "1") != "0"
persistent_max_inner: int = _int_from_env("DYNAMO_LITE_TRITON_PERSISTENT_MAX", 16384, low=1)
cudagraphs: bool = os.environ.get("DYNAMO_LITE_TRITON_CUDAGRAPHS", "") == "1"
peel_tail: bool = os.environ.get("DYNAMO_LITE_TRITON_PEEL", "1") != "0"
fp_fusion: bool = os.environ.get("DYNAMO_LITE_TRITON_FP_FUSION", "") == "1"


def compile_options() -> dict:
    """Triton's options for every kernel we compile (launch.py, and compile workers through
    precompile.request): no contraction of one op's multiply with another's add into an FMA
    unless `fp_fusion` (eager rounds each op: `x * y - x * y` is 0 there, and was the product's
    rounding error in a fused kernel on the GPU: fuzz seed 2202, program 41)."""
    return {"enable_fp_fusion": fp_fusion}
