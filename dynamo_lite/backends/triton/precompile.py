"""Compiling a graph's kernels ahead of its first call, in parallel worker processes.

Triton compiles a kernel at its first launch, one after another: for a model of a few hundred
kernels (and up to five launch configs each for the big ones, which are timed) that is most of the
first call. So when a graph is compiled, every kernel is submitted, for each launch config its
first call will compile (`Launcher.configs_to_try`), to a pool of worker processes that compile
it into Triton's on-disk cache (compile_worker.py); the parent's first launch then finds the
binary there instead of compiling it.

The pool is `settings.compile_workers` processes (0: off), started once per process, at the first
graph, while that graph is still being lowered. The workers are `python -P compile_worker.py`
subprocesses fed over pipes, not a `multiprocessing` pool: those re-import the user's `__main__`
in each worker (spawn, forkserver) or inherit an initialized CUDA (fork). One thread per worker in
the parent feeds it jobs from one queue, in submission order, which is the order of first launch.

A launch never waits for nothing, and nothing is compiled twice: before compiling a config, the
launcher takes its job back (`Job.take`): a job no worker has started is withdrawn, and the
parent compiles it as without workers; a job a worker is running is waited for. A worker that
fails, hangs (`WAIT_SECONDS`), dies (it is restarted; after `MAX_STARTS_FAILED` failures in a row
its thread gives up, leaving the jobs to the other workers; the last to give up fails the jobs
left at once) or a pool that cannot start all mean: the parent compiles the kernel, as today.
Nothing here can fail a user's program.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Optional

import torch

from . import availability, cache, generic_launch, settings

log = logging.getLogger("dynamo_lite.triton")

#: how long a launch waits for a kernel a worker is compiling before compiling it itself
WAIT_SECONDS = 300.0
#: a worker thread gives up after this many failed exchanges in a row (a worker that cannot start)
MAX_STARTS_FAILED = 3
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_worker.py")

#: jobs submitted, compiled by a worker, failed in one, taken back by the parent, waited for; and
#: worker processes that died in a job or could not start
stats = {"submitted": 0, "compiled": 0, "failed": 0, "taken_back": 0, "waited": 0, "worker_died": 0,
         "start_failed": 0}
#: when things happened, in seconds since the pool started (bench/compile_latency.py prints them):
#: "ready" each worker's start, "submitted" each graph's submission, "taken_back" each job the
#: parent compiled itself; and the workers' time per job, compiling and building launchers
timeline: dict[str, list[float]] = {"ready": [], "submitted": [], "taken_back": []}
worker_seconds = {"compile": 0.0, "launcher": 0.0}


class Job:
    """One kernel for one launch config, compiled by a worker unless the launcher takes it back."""

    def __init__(self, request: dict, pool: Optional["CompilePool"] = None):
        self.request = request
        self.pool = pool
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.error: Optional[str] = None

    def take(self, timeout: float = WAIT_SECONDS) -> bool:
        """True when a worker compiled the binary into Triton's cache. False when the caller
        compiles it: no worker had started it (it is withdrawn now), it failed, or took too long."""
        if self.future.cancel():
            stats["taken_back"] += 1
            if self.pool is not None:
                timeline["taken_back"].append(self.pool.elapsed())
            return False
        if not self.future.done():
            stats["waited"] += 1
        try:
            reply = self.future.result(timeout=timeout)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            return False
        return bool(reply.get("ok"))


class CompilePool:
    """`workers` compile worker processes and their feeding threads, started at once."""

    def __init__(self, workers: int, command: Optional[list[str]] = None):
        self.command = command or [sys.executable, "-P", WORKER_SCRIPT]
        self.jobs: "queue.Queue[Optional[Job]]" = queue.Queue()
        self.submitted: dict[str, Job] = {}          # one job per kernel, config and target
        self.launchers: set[tuple] = set()           # launcher_kind of the jobs that build one
        self.processes: list[Optional[subprocess.Popen]] = [None] * workers
        self.threads = [threading.Thread(target=self._serve, args=(i,), daemon=True,
                                         name=f"dynamo_lite-compile-{i}") for i in range(workers)]
        self._closed = False
        self._serving = workers                      # threads that have not given up
        self._serving_lock = threading.Lock()
        self.pid = os.getpid()                       # a forked child neither uses nor stops these workers
        self.started = time.perf_counter()
        for thread in self.threads:
            thread.start()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def submit(self, request: dict) -> Job:
        key = json.dumps(request, sort_keys=True)
        job = self.submitted.get(key)
        if job is None:
            # one launcher build per launcher: the first job of its kind builds it
            launcher = launcher_kind(request)
            request = dict(request, launcher=launcher not in self.launchers)
            self.launchers.add(launcher)
            job = self.submitted[key] = Job(request, self)
            stats["submitted"] += 1
            self.jobs.put(job)
        return job

    def _start(self, index: int) -> bool:
        """Start worker `index` and wait until it has imported triton and said so."""
        try:
            process = self.processes[index] = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None if settings.debug else subprocess.DEVNULL, text=True, bufsize=1)
            if json.loads(process.stdout.readline() or "{}").get("ready"):
                timeline["ready"].append(self.elapsed())
                return True
        except (OSError, ValueError) as e:
            log.info("compile worker could not start: %s", e)
        stats["start_failed"] += 1
        self._stop(index)
        return False

    def _serve(self, index: int) -> None:
        """Feed worker `index` jobs; a job is claimed only by a worker that is ready for it."""
        failed_in_a_row = 0
        while failed_in_a_row < MAX_STARTS_FAILED and not self._closed:
            if self.processes[index] is None and not self._start(index):
                failed_in_a_row += 1
                continue
            job = self.jobs.get()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():     # the launcher took it back
                continue
            reply = self._exchange(index, job.request)
            failed_in_a_row = failed_in_a_row + 1 if reply.get("worker_failed") else 0
            self._finish(job, reply)
        if self._closed:
            self._stop(index)
        with self._serving_lock:
            self._serving -= 1
            others_serve = self._serving > 0
        if others_serve and not self._closed:
            return        # the other workers take the jobs (draining them here would fail their jobs too)
        while True:       # the last one gave up: fail jobs at once (their launchers compile them)
            job = self.jobs.get()
            if job is None:
                return
            if job.future.set_running_or_notify_cancel():
                self._finish(job, {"ok": False, "error": "the compile worker could not start"})

    def _finish(self, job: Job, reply: dict) -> None:
        stats["compiled" if reply.get("ok") else "failed"] += 1
        worker_seconds["launcher"] += reply.get("launcher_seconds", 0.0)
        worker_seconds["compile"] += reply.get("seconds", 0.0) - reply.get("launcher_seconds", 0.0)
        if not reply.get("ok"):
            job.error = reply.get("error")
            log.info("compile worker failed on %s: %s", job.request.get("name"), job.error)
        job.future.set_result(reply)

    def _exchange(self, index: int, request: dict) -> dict:
        """Send one job to worker `index` and read its reply; a worker that died is dropped (the
        thread starts another)."""
        process = self.processes[index]
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                raise EOFError(f"compile worker exited (code {process.wait()})")
            return json.loads(line)
        except Exception as e:
            stats["worker_died"] += 1
            log.info("compile worker %d died in %s: %s: %s", index, request.get("name"), type(e).__name__, e)
            self._stop(index)
            return {"ok": False, "worker_failed": True, "error": f"{type(e).__name__}: {e}"}

    def _stop(self, index: int) -> None:
        process, self.processes[index] = self.processes[index], None
        if process is not None:
            try:
                process.kill()
                process.wait(timeout=5)
            except Exception:
                pass

    def close(self) -> None:
        """Stop the workers; jobs not started fail (their launchers compile them)."""
        if self._closed or self.pid != os.getpid():
            return
        self._closed = True
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            job.future.cancel()
        for _ in self.threads:
            self.jobs.put(None)
        for i in range(len(self.processes)):
            self._stop(i)


_pool: Optional[CompilePool] = None
_pool_lock = threading.Lock()


def shared_pool() -> Optional[CompilePool]:
    """The process's pool, started on first use; None when `settings.compile_workers` is 0."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.pid != os.getpid():     # forked: the workers are the parent's
            _pool = None
        if _pool is None and settings.compile_workers > 0:
            _pool = CompilePool(settings.compile_workers)
            atexit.register(_pool.close)
        return _pool


def shutdown() -> None:
    """Stop the shared pool (the next graph starts a new one, with the settings then)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def current_target() -> Optional[list]:
    """What kernels launched now are compiled for (`[backend, arch, warp size]`, as Triton's
    JIT sees the current device), or None where nothing is compiled (Triton's interpreter, no GPU)."""
    if availability.interpreting() or not torch.cuda.is_available():
        return None
    from triton.runtime import driver
    target = driver.active.get_current_target()
    return [target.backend, target.arch, target.warp_size]


def start_early() -> None:
    """Start the workers at the first graph, so their start overlaps its lowering."""
    try:
        if settings.compile_workers > 0 and current_target() is not None:
            shared_pool()
    except Exception:                       # no pool: kernels compile at their first launch
        log.debug("compile pool did not start", exc_info=True)


def submit_graph(launchers: list) -> None:
    """Submit every launch config the first call of these launchers will compile."""
    try:
        target = current_target()
        pool = shared_pool() if target is not None else None
        if pool is None:
            return
        device = None if availability.interpreting() else torch.device("cuda", torch.cuda.current_device())
        timeline["submitted"].append(pool.elapsed())
        for launcher in launchers:
            launcher.precompile(pool, target, device)
    except Exception:                       # nothing submitted is compiled at its first launch
        log.debug("submitting kernels to the compile pool failed", exc_info=True)


def request(ks, arg_types: tuple[str, ...], cfg: dict, target: list) -> dict:
    """The job for kernel `ks` (its source is in our kernel cache) with launch config `cfg`."""
    return {"path": str(cache.loaded_from(ks.name)), "name": ks.name, "args": list(arg_types),
            "constexprs": {k: v for k, v in cfg.items() if k != "num_warps"},
            "num_warps": cfg["num_warps"], "options": settings.compile_options(), "target": list(target),
            "cache_dir": cache.binary_dir(),
            "generic_launch": _generic_launch_usable(), **parent_key(target)}


def parent_key(target: list) -> dict:
    """The parts of Triton's cache key that come from this process, not from the kernel: the
    backend's hash (for CUDA the `ptxas --version` text, which Triton asks once per process and
    remembers) and the environment variables that invalidate binaries. A worker keys its binary
    with these instead of its own, so that the parent's launch finds it: TorchInductor points
    TRITON_PTXAS_PATH at torch's ptxas once it compiles, after Triton remembered the first
    ptxas's version in this process; a worker started later would ask the new one, and every
    kernel it compiled was compiled again by the parent (a GPT-2's first call after
    `torch.compile` had run in the process: 14 s instead of 3.4 s). {} where Triton cannot say
    (the worker then uses its own)."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
        return {"backend_hash": make_backend(GPUTarget(*target)).hash(),
                "env_vars": dict(get_cache_invalidating_env_vars())}
    except Exception:                       # noqa: BLE001 -- another Triton: the worker's own key
        log.debug("Triton's cache key parts unavailable", exc_info=True)
        return {}


def _generic_launch_usable() -> bool:
    """Whether this process launches our kernels through the generic launcher (generic_launch.py):
    then a worker builds Triton's launcher only for a kernel the generic one cannot launch."""
    return settings.generic_launch and generic_launch.unavailable() is None


def launcher_kind(request: dict) -> tuple:
    """What Triton's C launcher of a job's kernel depends on (triton 3.6): which arguments are
    pointers and which scalars of what type, and how many constexprs follow. Not the pointers'
    dtypes nor the constexprs' values: all configs of a kernel, and most kernels of a graph, share
    a few launchers, and a worker builds one (gcc, ~1 s) only for the first job of its kind (and,
    where the parent launches through the generic launcher, only if that one cannot launch it)."""
    args = tuple("*" if a.startswith("*") else a for a in request.get("args", ()))
    return args + (len(request.get("constexprs", ())),)


def arg_type(dtype: torch.dtype, by_value: bool) -> str:
    """How compile_worker.py describes a kernel argument: a tensor of `dtype` or a scalar."""
    if not by_value:
        return "*" + str(dtype).removeprefix("torch.")
    if dtype.is_floating_point:
        return "float"
    return "bool" if dtype == torch.bool else "int"
