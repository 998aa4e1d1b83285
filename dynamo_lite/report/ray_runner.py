"""`dynamo-lite report --ray [ADDRESS]`: the report's models spread over a Ray cluster, one Ray task per
model. This module only schedules: each task calls the function dynamo_lite.report gives it
(`run_model_isolated`), which surveys the model in a process of its own with its deadline, exactly as
a local `--jobs` run does; so a crash or a hang is still one failed row, and the rows are the same.

Which cluster: ADDRESS is what `ray.init` takes ("auto", "HOST:PORT", "ray://HOST:10001"). Without
one ("local") a new local cluster is started, with as many CPUs as this machine has cores, and shut
down at the end; a Ray already initialised in this process (a notebook) is used and left running.
`--jobs N` is the number of models in flight at once, on any cluster; without it, as many as the
cluster has CPUs (each task takes one of Ray's CPUs, so the cluster's free CPUs cap it anyway).

What the nodes of a real cluster need: the driver sends model names and options, not code, so every
node must have the same environment installed (Python, torch at the same version, dynamo_lite,
requirements/ray.txt, and the optional packages of the suites asked for). Model files given as paths
are read by the workers at the same absolute path (relative ones are made absolute here): on a
cluster they must exist at that path on every node, on a shared file system or copied there. A node
without them gives a failed row saying so, not a wrong result. (Shipping them with a runtime_env
`working_dir` was not chosen: it changes the path a file has on each node, and `dynamo_lite` itself
must be installed there anyway.)

Ray is optional (requirements/ray.txt): without it `--ray` is an error message and exit status 2,
and nothing else imports Ray.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import platform

from .registry import failed_row


class RayNotInstalled(Exception):
    """`--ray` asked for, Ray not importable: a message for the user, not a traceback."""


def require_ray():
    """The `ray` module, or RayNotInstalled with the command that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise RayNotInstalled("--ray needs Ray, an optional extra: pip install -r requirements/ray.txt "
                              "-c requirements/ci.txt") from exc
    return ray


def _on_node(run_one, name: str, options) -> dict:
    """The Ray task: this model's row, surveyed on whichever node Ray chose."""
    missing = [path for path in options.paths if not os.path.exists(path)]
    if missing:
        return failed_row(name, "CRASH", f"{', '.join(missing)} not found on Ray node {platform.node()}: model files "
                                 "must be at the same path on every node")
    return run_one(name, options)


def run_all_on_ray(entries, options, progress=None, *, run_one) -> list[dict]:
    """Run `run_one(name, options)` for every entry as a Ray task, at most `options.jobs` at a time;
    `progress(row)` is called as each finishes. Returns the rows in the entries' order."""
    ray = require_ray()
    options = dataclasses.replace(options, paths=tuple(os.path.abspath(p) for p in options.paths))
    started_here = not ray.is_initialized()
    if started_here:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")     # no "usage stats" notice on start
        # the report's rows and progress bar are the output: workers' prints and Ray's own INFO lines
        # stay in Ray's log files (/tmp/ray/session_latest/logs)
        ray.init(address=options.ray, log_to_driver=False, include_dashboard=False,
                 logging_level=logging.ERROR)
    # max_retries=0: a worker lost with its model is that model's failed row, not a second try
    task = ray.remote(num_cpus=1, max_retries=0)(_on_node)
    limit = options.jobs if options.jobs > 0 else max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending = [e.name for e in entries]
    in_flight: dict = {}              # ObjectRef -> model name
    results: dict = {}
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                name = pending.pop(0)
                in_flight[task.remote(run_one, name, options)] = name
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                name = in_flight.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as exc:     # the worker or its node died, not the model
                    last_line = (str(exc).strip().splitlines() or [""])[-1]
                    row = failed_row(name, "CRASH", f"the Ray task failed: {type(exc).__name__}: {last_line}")
                results[name] = row
                if progress is not None:
                    progress(row)
    finally:
        for ref in in_flight:         # interrupted: nothing of this run keeps running on the cluster
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
    return [results[e.name] for e in entries]
