"""A compile worker process: compiles generated kernels into Triton's on-disk cache, for the
parent's first launch to find there (precompile.py starts a few of these and feeds them).

It runs as a script (`python -P compile_worker.py`), not as part of the dynamo_lite package: a
worker imports only triton and torch (no dynamo_lite, no user `__main__`), touches no GPU (it
compiles for the target the parent names), and exits when its stdin closes (the parent exited).

Protocol: `{"ready": true}` once imported, then one JSON job per line on stdin and one JSON reply
per line on the original stdout (anything else printed goes to stderr):

    job:   {"path": kernel file, "name": kernel, "args": ["*float32", "float", ...],
            "constexprs": {"XBLOCK": 1024}, "num_warps": 4, "target": ["cuda", 90, 32],
            "cache_dir": Triton's cache dir or null (Triton's default)}
    reply: {"ok": true, "seconds": 1.2} or {"ok": false, "error": "...", "seconds": 0.1}

Besides the kernel's binary, a job builds its launcher (`_warm_launcher`): still no GPU touched.

`args` describe the kernel's parameters as the parent will pass them: "*<torch dtype>" a tensor
(assumed 16-byte aligned, as fresh allocations are), "float" / "int" / "bool" a scalar by value.
"""
import importlib.util
import json
import os
import sys
import time

#: example values of scalars passed by value (an int's specialization depends on its value: a guess)
_SCALARS = {"float": 0.5, "int": 2, "bool": True}


def _load_kernel(path: str, name: str):
    """The `@triton.jit` function, in a module of the name the parent gives it (cache.load_kernel)."""
    module_name = f"dynamo_lite_kernels.{name}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return getattr(module, name)


def _example_arg(desc: str):
    import torch
    from triton.runtime.jit import MockTensor
    if desc.startswith("*"):
        return MockTensor(getattr(torch, desc[1:]))
    return _SCALARS[desc]


def compile_job(job: dict) -> None:
    """Compile one kernel for one launch config. This mirrors what `JITFunction.run` does before it
    compiles (triton 3.6/3.7: bind, specialize, pack the arguments, parse the options), so the
    binary lands under the cache key the parent's launch looks up; where a Triton version differs,
    the key differs and the parent compiles the kernel itself, as without workers."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    if job.get("cache_dir"):
        knobs.cache.dir = job["cache_dir"]
    fn = _load_kernel(job["path"], job["name"])
    target = GPUTarget(*job["target"])
    backend = make_backend(target)
    kwargs = dict(job["constexprs"], num_warps=job["num_warps"])
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*[_example_arg(a) for a in job["args"]], **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    _warm_launcher(kernel)


def _warm_launcher(kernel) -> None:
    """Build the kernel's launcher into Triton's cache as well: Triton 3.6 compiles a C launcher
    per kernel signature with the host compiler at the first launch (in the parent, one after
    another: 3.8 s of a LLaMA forward's first call); built here, the parent only loads it. A
    Triton whose launcher is generic builds nothing; any failure leaves it to the parent."""
    try:
        from triton.runtime import driver
        driver.active.launcher_cls(kernel.src, kernel.metadata)
    except Exception:                 # noqa: BLE001 -- an optimisation only
        pass


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                     # prints of triton or ptxas must not corrupt the replies
    os.environ.pop("TRITON_INTERPRET", None)    # a worker compiles (tests of the pool run interpreted)
    import torch  # noqa: F401        imported before the first job arrives (the parent is still lowering)
    import triton  # noqa: F401
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        start = time.perf_counter()
        try:
            compile_job(json.loads(line))
            reply = {"ok": True}
        except Exception as e:        # reported to the parent, which compiles the kernel itself
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        reply["seconds"] = time.perf_counter() - start
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
