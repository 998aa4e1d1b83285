"""Settings of the triton backend, read once from the environment (tests may assign them).

    DYNAMO_LITE_TRITON_STRICT=1   raise instead of running a graph eagerly when compiling it fails
    DYNAMO_LITE_TRITON_DEBUG=1    print each graph's wrapper and kernel sources
    DYNAMO_LITE_TRITON_TUNE=0     no launch-config benchmarking (take the first candidate)
    DYNAMO_LITE_CACHE_DIR=path    kernel/config cache (default ~/.cache/dynamo_lite)
"""
import os

strict: bool = os.environ.get("DYNAMO_LITE_TRITON_STRICT", "") == "1"
debug: bool = os.environ.get("DYNAMO_LITE_TRITON_DEBUG", "") == "1"
