"""A compile worker process: compiles generated kernels into Triton's on-disk cache, for the
parent's first launch to find there (precompile.py starts a few of these and feeds them).

It runs as a script (`python -P compile_worker.py`), not as part of the dynamo_lite package: a
worker imports only triton (no torch, no dynamo_lite, no user `__main__`), touches no GPU (it
compiles for the target the parent names), and exits when its stdin closes (the parent exited).
Not importing torch is what makes a worker ready soon: on an H200 host, eight workers importing
torch were ready 3.9-5.3 s after they started, while a GPT-2's graph was submitted at 1.0 s and
the parent compiled what it reached first itself.

Protocol: `{"ready": true}` once imported, then one JSON job per line on stdin and one JSON reply
per line on the original stdout (anything else printed goes to stderr):

    job:   {"path": kernel file, "name": kernel, "args": ["*float32", "float", ...],
            "constexprs": {"XBLOCK": 1024}, "num_warps": 4, "target": ["cuda", 90, 32],
            "cache_dir": Triton's cache dir or null (Triton's default), "launcher": build it (default true),
            "generic_launch": the parent launches through our generic launcher (default false),
            "backend_hash", "env_vars": the parent's parts of Triton's cache key (default: this process's)}
    reply: {"ok": true, "seconds": 1.2, "launcher_seconds": 0.4} or {"ok": false, "error": "...", "seconds": 0.1}

Besides the kernel's binary, a job builds Triton's launcher for it (`_warm_launcher`) unless it
says not to (another job builds the same one) or the parent launches through our generic launcher
(generic_launch.py, loaded from its file: it imports only the standard library) and that one can
launch this kernel, which is the rule: then no launcher is built at all. Still no GPU touched.

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
#: how Triton's binder (triton 3.6/3.7: `native_specialize_impl`) specializes a scalar of each kind
#: with its example value above; a tensor is ("*<dtype>", "D"): 16-byte aligned
_SCALAR_SPECIALIZATION = {"float": ("fp32", None), "int": ("i32", ""), "bool": ("u1", None)}


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


def specialization(fn, args: list[str], kwargs: dict) -> tuple[dict, list]:
    """(bound arguments, specialization) as Triton's binder makes them for `fn` called with
    example arguments described by `args` and the constexprs in `kwargs`, without the binder:
    its native specializer imports torch. tests/test_triton_precompile.py checks this against
    the binder for every kind of argument."""
    from triton._utils import canonicalize_ptr_dtype
    described = iter(args)
    bound, specialized = {}, []
    for param in fn.params:
        if param.is_constexpr:
            bound[param.name] = kwargs[param.name]
            specialized.append(("constexpr", kwargs[param.name]))
            continue
        desc = next(described)
        bound[param.name] = None                  # (only the constexprs' values are read)
        specialized.append((canonicalize_ptr_dtype(desc[1:], False), "D") if desc.startswith("*")
                           else _SCALAR_SPECIALIZATION[desc])
    return bound, specialized


def _binder_specialization(fn, backend, args: list[str], kwargs: dict) -> tuple[dict, list]:
    """What `specialization` makes, by Triton's binder (for a Triton that `specialization` does not
    know: this imports torch)."""
    from triton.runtime.jit import create_function_from_signature
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialized, _ = binder(*[_example_arg(a) for a in args], **kwargs)
    return bound, specialized


def compile_job(job: dict) -> float:
    """Compile one kernel for one launch config. This mirrors what `JITFunction.run` does before it
    compiles (triton 3.6/3.7: bind, specialize, pack the arguments, parse the options), so the
    binary lands under the cache key the parent's launch looks up; where a Triton version differs,
    the key differs and the parent compiles the kernel itself, as without workers. Returns the
    seconds spent building the launcher."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    if job.get("cache_dir"):
        knobs.cache.dir = job["cache_dir"]
    fn = _load_kernel(job["path"], job["name"])
    target = GPUTarget(*job["target"])
    backend = make_backend(target)
    kwargs = dict(job["constexprs"], num_warps=job["num_warps"], **job.get("options", {}))
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    try:
        bound, specialized = specialization(fn, job["args"], kwargs)
    except (ImportError, KeyError):
        bound, specialized = _binder_specialization(fn, backend, job["args"], kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialized, None)
    kernel = _compile_keyed_as_parent(ASTSource(fn, signature, constexprs, attrs), target, options.__dict__, job)
    start = time.perf_counter()
    # (the pool asks the first job of each launcher kind)
    if job.get("launcher", True) and (not job.get("generic_launch") or _launch_rules().needs_tritons_launcher(kernel)):
        _warm_launcher(kernel, target)
    return time.perf_counter() - start


def _compile_keyed_as_parent(src, target, options: dict, job: dict):
    """`triton.compile`, with the parts of the cache key that Triton takes from the process (the
    backend's hash, the cache-invalidating environment) given by the parent (precompile.parent_key)
    where it sent them: the binary is what this process's ptxas makes, stored under the key the
    parent's launch looks up. Triton 3.6/3.7 make the backend inside `compile` with the module's
    `make_backend`, which is swapped for the call (this process compiles one job at a time)."""
    from triton.compiler import compiler
    parent_hash, env_vars = job.get("backend_hash"), job.get("env_vars")
    make_backend = compiler.make_backend

    def keyed_as_parent(target):
        backend = make_backend(target)
        if backend.hash() != parent_hash:
            backend.hash = lambda: parent_hash          # (an instance attribute: this backend only)
        return backend

    if parent_hash is not None:
        compiler.make_backend = keyed_as_parent
    try:
        return compiler.compile(src, target=target, options=options, _env_vars=env_vars)
    finally:
        compiler.make_backend = make_backend


_GENERIC_LAUNCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generic_launch.py")


def _launch_rules():
    """generic_launch.py, loaded from its file (importing the dynamo_lite package would import torch)."""
    module = sys.modules.get("dynamo_lite_generic_launch_rules")
    if module is None:
        spec = importlib.util.spec_from_file_location("dynamo_lite_generic_launch_rules", _GENERIC_LAUNCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[spec.name] = module
    return module


_drivers: dict = {}                   # target backend -> its Triton driver, made once


def _warm_launcher(kernel, target) -> None:
    """Build the kernel's launcher into Triton's cache as well: Triton 3.6 compiles a C launcher
    per kernel signature with the host compiler at the first launch (in the parent, one after
    another: 3.8 s of a LLaMA forward's first call); built here, the parent only loads it. The
    driver is the target's own (`triton.runtime.driver.active` would ask torch which is active,
    importing it). A Triton whose launcher is generic builds nothing; any failure leaves it to
    the parent."""
    try:
        driver = _drivers.get(target.backend)
        if driver is None:
            from triton.backends import backends
            driver_cls = next(b.driver for b in backends.values() if b.compiler.supports_target(target))
            driver = _drivers[target.backend] = driver_cls()
        driver.launcher_cls(kernel.src, kernel.metadata)
    except Exception:                 # noqa: BLE001 -- an optimisation only
        pass


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                     # prints of triton or ptxas must not corrupt the replies
    os.environ.pop("TRITON_INTERPRET", None)    # a worker compiles (tests of the pool run interpreted)
    import triton  # noqa: F401       imported before the first job arrives (the parent is still lowering)
    import triton.compiler.compiler  # noqa: F401
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        start = time.perf_counter()
        try:
            reply = {"ok": True, "launcher_seconds": compile_job(json.loads(line))}
        except Exception as e:        # reported to the parent, which compiles the kernel itself
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        reply["seconds"] = time.perf_counter() - start
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
