"""Training workloads under dynamo_lite and TorchDynamo, side by side, on a gloo process group.

    python bench/training.py [--world-size 2] [--steps 5] [-k PATTERN] [--json FILE]

Each case (a training loop: model, optimizer, data, N steps) runs three times in every process,
from the same seeds on the same data: eagerly, with `dynamo_lite.capture(..., backend=counting)`
and with `torch.compile(..., backend=counting)`, where `counting` is the `eager` backend that
counts the graphs it is given. What is captured is what a user would capture: the train-step
function (forward, backward, optimizer step) or, for DDP and FSDP2, the wrapped model. Each
engine's row: correct (losses of every step, final parameters and gradients agree with the eager
run's on every rank: see `_close`; and the largest difference from eager), graphs, graph breaks, frames run eagerly,
first-call time (the first step, capture included) and steady step time (median of the later half of the steps).
An exception in either engine is that engine's row status; the bench goes on. Rank 0 prints.

Processes: `--world-size` CPU processes (torch.multiprocessing.spawn, a free port), one thread
each. `run_cases` runs in-process on an existing process group (tests/test_training_bench.py).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from typing import Callable, Optional

# bench/triton.py would shadow the triton package that torch.compile imports.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite as dl

ENGINES = ("dynamo_lite", "torchdynamo")

# The dtype of the run being built: float32, or float64 for the reference run that `_close` measures
# rounding error against. Models are made in float32 and then cast (`typed`), so that both runs start
# from the same initial values.
_dtype = torch.float32


def typed(obj):
    """A module or tensor of a case, in the dtype of the run being built."""
    return obj.to(_dtype)


# ---------------------------------------------------------------------------------------- models

class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=32, d_out=4, depth=3):
        super().__init__()
        dims = [d_in] + [hidden] * (depth - 1) + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return self.layers[-1](x)


class Block(nn.Module):
    """A pre-norm transformer block: attention and an MLP, each with a residual."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CheckpointedMLP(nn.Module):
    """Each hidden layer under torch.utils.checkpoint (activations recomputed in backward)."""

    def __init__(self, reentrant: bool):
        super().__init__()
        self.inner, self.reentrant = MLP(depth=4), reentrant

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        for layer in self.inner.layers[:-1]:
            x = checkpoint(lambda h, layer=layer: torch.tanh(layer(h)), x, use_reentrant=self.reentrant)
        return self.inner.layers[-1](x)


class CondNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.out = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x):
        h = self.lin(x)
        h = torch.cond(h.sum() > 0, lambda h: torch.relu(h) * 2, lambda h: torch.tanh(h), (h,))
        return self.out(h)


class VmapNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.w = nn.Linear(16, 32), nn.Parameter(torch.randn(32, 4) / 6)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        return torch.func.vmap(lambda row: row @ self.w)(h)


# ------------------------------------------------------------------------------------------ cases

@dataclass
class Job:
    """One built case: `step(i)` runs training step i and returns its loss; `model` (a module or a
    dict of tensors) holds the parameters and gradients compared at the end."""
    step: Callable[[int], object]
    model: object


def batch(i: int, shape=(8, 16), d_out=4):
    """The data of step i on this rank: the same for every engine, different between ranks."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    g = torch.Generator().manual_seed(1000 * i + rank)
    return typed(torch.randn(*shape, generator=g)), typed(torch.randn(*shape[:-1], d_out, generator=g))


def train_step_of(model, opt):
    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def plain_sgd(wrap):
    model = typed(MLP())
    step = wrap(train_step_of(model, torch.optim.SGD(model.parameters(), lr=0.1)))
    return Job(lambda i: step(*batch(i)), model)


def block_adamw(wrap):
    model = typed(nn.Sequential(Block(), nn.Linear(32, 4)))
    step = wrap(train_step_of(model, torch.optim.AdamW(model.parameters(), lr=1e-2)))
    return Job(lambda i: step(*batch(i, (4, 8, 32))), model)


def sgd_momentum_step_alone(wrap):
    model = typed(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt_step = wrap(opt.step)

    def step(i):
        x, y = batch(i)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt_step()
        return loss.detach()
    return Job(step, model)


def bf16_accumulation(wrap):
    model = typed(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(micro_batches):
        opt.zero_grad()
        total = 0.0
        for x, y in micro_batches:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.mse_loss(model(x).float(), y) / len(micro_batches)
            loss.backward()
            total = total + loss.detach()
        opt.step()
        return total
    step = wrap(train_step)
    return Job(lambda i: step([batch(2 * i), batch(2 * i + 1)]), model)


def ddp(bucket_cap_mb):
    def build(wrap):
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(typed(MLP(hidden=32, depth=4)), bucket_cap_mb=bucket_cap_mb)
        forward = wrap(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(i):
            x, y = batch(i)
            opt.zero_grad()
            loss = F.mse_loss(forward(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return Job(step, model.module)
    return build


def checkpointed(reentrant: bool):
    def build(wrap):
        model = typed(CheckpointedMLP(reentrant))
        step = wrap(train_step_of(model, torch.optim.SGD(model.parameters(), lr=0.1)))
        return Job(lambda i: step(*batch(i)), model)
    return build


def fsdp2(wrap):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = typed(nn.Sequential(Block(), Block(), nn.Linear(32, 4)))
    for block in model[:2]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    forward = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(i):
        x, y = batch(i, (4, 8, 32))
        opt.zero_grad()
        loss = F.mse_loss(forward(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return Job(step, model)


def module_case(make):
    def build(wrap):
        model = typed(make())
        step = wrap(train_step_of(model, torch.optim.SGD(model.parameters(), lr=0.1)))
        return Job(lambda i: step(*batch(i)), model)
    return build


def func_grad(wrap):
    torch.manual_seed(0)
    params = {"w1": typed(torch.randn(16, 32) / 4), "w2": typed(torch.randn(32, 4) / 6)}

    def loss_fn(p, x, y):
        return F.mse_loss(torch.tanh(x @ p["w1"]) @ p["w2"], y)

    def train_step(p, x, y):
        grads, loss = torch.func.grad_and_value(loss_fn)(p, x, y)
        return {k: v - 0.1 * grads[k] for k, v in p.items()}, loss
    step = wrap(train_step)

    def run(i):
        new, loss = step(params, *batch(i))
        params.update(new)
        return loss
    return Job(run, params)


def loss_scale(wrap):
    """Dynamic loss scaling: the scale is a Python float read back with `.item()` each step."""
    model = typed(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y, scale):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        (loss * scale).backward()
        norm = torch.stack([p.grad.norm() for p in model.parameters()]).sum()
        if torch.isfinite(norm).item() and norm.item() / scale < 100.0:
            for p in model.parameters():
                p.grad.div_(scale)
            opt.step()
            return loss.detach(), scale * 2.0
        return loss.detach(), scale / 2.0
    step = wrap(train_step)
    state = {"scale": 256.0}

    def run(i):
        loss, state["scale"] = step(*batch(i), state["scale"])
        return loss
    return Job(run, model)


def lr_schedule(wrap):
    model = typed(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.8 ** s)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        schedule.step()
        return loss.detach()
    step = wrap(train_step)
    return Job(lambda i: step(*batch(i)), model)


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable
    tol: float = 1e-5


CASES = (
    Case("plain_mlp_sgd", plain_sgd),
    Case("block_adamw", block_adamw, 1e-4),
    Case("sgd_momentum_step", sgd_momentum_step_alone),
    Case("bf16_autocast_accum", bf16_accumulation, 1e-2),
    Case("ddp_default_buckets", ddp(None)),
    Case("ddp_small_buckets", ddp(2100 / 2 ** 20)),
    Case("checkpoint", checkpointed(reentrant=False)),
    Case("checkpoint_reentrant", checkpointed(reentrant=True)),
    Case("fsdp2", fsdp2, 1e-4),
    Case("torch_cond", module_case(CondNet)),
    Case("func_vmap", module_case(VmapNet)),
    Case("func_grad", func_grad),
    Case("loss_scale_item", loss_scale),
    Case("lr_scheduler", lr_schedule),
)


# --------------------------------------------------------------------------------------- engines

class Counting:
    """The eager backend, counting the graphs it is given."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


@dataclass
class Row:
    case: str
    engine: str
    status: str = "ok"                 # ok, WRONG, or the engine's exception
    correct: bool = False
    max_diff: float = 0.0
    graphs: int = 0
    breaks: int = 0
    eager_frames: int = 0
    first_s: float = 0.0
    steady_s: float = 0.0
    eager_steady_s: float = 0.0
    detail: str = ""


def _reset_engines():
    dl.reset()
    try:
        import torch._dynamo
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    except Exception:                  # noqa: BLE001 -- TorchDynamo unavailable: its rows say so
        pass


def _wrapper(engine: str, backend: Counting) -> Callable:
    if engine == "eager":
        return lambda fn: fn
    if engine == "dynamo_lite":
        return lambda fn: dl.capture(fn, backend=backend)
    return lambda fn: torch.compile(fn, backend=backend)


def _full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def _state(model) -> dict:
    named = model.items() if isinstance(model, dict) else model.named_parameters()
    out = {}
    for name, p in named:
        out[name] = _full(p)
        if getattr(p, "grad", None) is not None:
            out[name + ".grad"] = _full(p.grad)
    return out


def _run(case: Case, engine: str, steps: int, dtype: torch.dtype = torch.float32):
    """(losses, final state, per-step seconds, counting backend) of one engine on one case, its
    model and data in `dtype`."""
    global _dtype
    backend = Counting()
    torch.manual_seed(0)
    _dtype = dtype
    try:
        job = case.build(_wrapper(engine, backend))
        losses, times = [], []
        for i in range(steps):
            start = time.perf_counter()
            loss = job.step(i)
            times.append(time.perf_counter() - start)
            losses.append(torch.as_tensor(loss).detach().clone())
        return losses, _state(job.model), times, backend
    finally:
        _dtype = torch.float32


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).square().mean().sqrt().item() if a.numel() else 0.0


def _close(ref: torch.Tensor, res: torch.Tensor, fp64: Optional[torch.Tensor], tol: float) -> bool:
    """Whether `res` (an engine's tensor) is as right as `ref` (eager's, same dtype). Either they are
    allclose within `tol`, or, measured against `fp64` (eager's run of the case in float64: what the
    float32 runs both approximate), `res`'s root-mean-square error is within a small multiple of
    `ref`'s own plus `tol` / 10. The second test accepts a different rounding of a computation that
    amplifies rounding noise (AdamW's m / sqrt(v) of a gradient that is zero in truth) and rejects
    an error larger than eager's own. This is the check of TorchDynamo's benchmark runner
    (`torch._dynamo.utils.same` with `fp64_ref`), with its multipliers: 3 for tensors of fewer
    than 1000 elements (noise dominates) or in a 16-bit dtype, 2 otherwise."""
    if ref.shape != res.shape or ref.dtype != res.dtype:
        return False
    if torch.allclose(ref.double(), res.double(), rtol=tol, atol=tol, equal_nan=True):
        return True
    if fp64 is None:
        return False
    multiplier = 3.0 if ref.numel() < 1000 or ref.dtype in (torch.float16, torch.bfloat16) else 2.0
    res_error, ref_error = _rmse(fp64, res), _rmse(fp64, ref)
    return res_error <= multiplier * ref_error + tol / 10        # False when res_error is NaN


def _compare(expected, fp64, got, tol: float) -> tuple[bool, float, str]:
    """(correct, the largest difference from eager, where) of an engine's (losses, state) against
    eager's; `fp64` is eager's float64 run (or None: then only allclose within `tol` passes)."""
    (losses, state), (g_losses, g_state) = expected, got
    if set(state) != set(g_state) or len(losses) != len(g_losses):
        return False, float("inf"), f"different tensors: {sorted(set(state) ^ set(g_state))[:4]}"
    f_losses, f_state = fp64 if fp64 is not None else ([None] * len(losses), {k: None for k in state})
    worst, where, ok = 0.0, "", True
    triples = [(f"loss[{i}]", a, f, b) for i, (a, f, b) in enumerate(zip(losses, f_losses, g_losses))]
    triples += [(k, state[k], f_state[k], g_state[k]) for k in state]
    for name, a, f, b in triples:
        diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        if diff > worst or diff != diff:
            worst, where = diff, name
        if not _close(a, b, f, tol):
            ok, where = False, name
            worst = max(worst, diff)
    return ok, worst, (f"largest difference at {where}" if ok and where else f"not close at {where}" if where else "")


def _engine_counts(row: Row, engine: str) -> None:
    if engine == "dynamo_lite":
        from dynamo_lite.fallback.records import RECORDS
        row.breaks = sum(r.status == "break" for r in RECORDS)
        row.eager_frames = sum(r.status in ("fallback", "error") for r in RECORDS)
    else:
        from torch._dynamo.utils import counters
        row.breaks = sum(counters["graph_break"].values())
        row.eager_frames = counters["frames"]["total"] - counters["frames"]["ok"]


def run_case(case: Case, steps: int, on_start: Callable[[str], None] = lambda engine: None) -> list[Row]:
    """Eager, then each engine; one row per engine (this process's view). `on_start(engine)` is
    called before each engine runs (the progress file: a crash is blamed on the engine it names)."""
    _reset_engines()
    try:
        e_losses, e_state, e_times, _ = _run(case, "eager", steps)
    except Exception as e:            # noqa: BLE001 -- the case itself fails here (a torch without the feature)
        return _merge_ranks([Row(case.name, engine, status=f"eager run failed: {type(e).__name__}: {e}"[:140])
                             for engine in ENGINES])
    try:
        f_losses, f_state, _, _ = _run(case, "eager", steps, torch.float64)
        fp64, no_fp64 = (f_losses, f_state), ""
    except Exception as e:            # noqa: BLE001 -- no float64 kernel for an op: allclose only
        fp64, no_fp64 = None, f" (no float64 reference: {type(e).__name__})"
    eager_steady = statistics.median(e_times[len(e_times) // 2:] or e_times)
    rows = []
    for engine in ENGINES:
        on_start(engine)
        row = Row(case.name, engine, eager_steady_s=eager_steady)
        _reset_engines()
        backend = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                losses, state, times, backend = _run(case, engine, steps)
            # steady: the later half of the steps (the first ones may still capture: a float becoming
            # dynamic, the step after the one that made the optimizer state)
            row.first_s, row.steady_s = times[0], statistics.median(times[len(times) // 2:] or times)
            row.correct, row.max_diff, row.detail = _compare((e_losses, e_state), fp64, (losses, state), case.tol)
            row.detail += no_fp64
            row.status = "ok" if row.correct else "WRONG"
        except Exception as e:        # noqa: BLE001 -- an engine's failure is its row, never the bench's end
            row.status = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            row.detail = traceback.format_exc(limit=-3)
        try:
            _engine_counts(row, engine)
        except Exception:             # noqa: BLE001
            pass
        row.graphs = backend.graphs if backend is not None else row.graphs
        rows.append(row)
    _reset_engines()
    return _merge_ranks(rows)


def _merge_ranks(rows: list[Row]) -> list[Row]:
    """The rows of all ranks as one: correct only if correct on every rank, the largest difference
    and times, the first failure (every rank must call this alike)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return rows
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, [asdict(r) for r in rows])
    for i, row in enumerate(rows):
        others = [Row(**ranks[i]) for ranks in everyone]
        row.correct = all(r.correct for r in others)
        row.max_diff = max(r.max_diff for r in others)
        bad = next((r for r in others if r.status != "ok"), None)
        if bad is not None:
            row.status, row.detail = bad.status, bad.detail
        row.first_s = max(r.first_s for r in others)
        row.steady_s = max(r.steady_s for r in others)
    return rows


def select(pattern: str = "", names: Optional[list[str]] = None) -> list[Case]:
    return [c for c in CASES if (names is None or c.name in names) and pattern in c.name]


def run_cases(cases: list[Case], steps: int = 5, progress: Optional[str] = None) -> list[Row]:
    """Run `cases` on the current process group (every rank calls this alike). With `progress` (a
    file; rank 0 writes it) each engine's start and each finished row are appended as JSON lines."""
    def note(**event):
        if progress and (not dist.is_initialized() or dist.get_rank() == 0):
            with open(progress, "a") as f:
                f.write(json.dumps(event) + "\n")
    rows = []
    for case in cases:
        case_rows = run_case(case, steps, on_start=lambda engine: note(case=case.name, engine=engine))
        for row in case_rows:
            note(row=asdict(row))
        rows += case_rows
    return rows


# ------------------------------------------------------------------------------------ processes

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, names: list[str], steps: int, progress: str, verbose: bool) -> None:
    import faulthandler
    faulthandler.enable()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        for case in select(names=names):
            if verbose and rank == 0:
                print(f"[training bench] {case.name}", file=sys.stderr, flush=True)
            run_cases([case], steps, progress)
    finally:
        dist.destroy_process_group()


def run_in_processes(cases: list[Case], world: int, steps: int, verbose: bool = False) -> list[Row]:
    """Run the cases in `world` spawned processes. A process that dies (a segfault in an engine)
    ends that engine's row as "process died" and its case; the next case runs in new processes."""
    import torch.multiprocessing as mp
    rows: list[Row] = []
    todo = [c.name for c in cases]
    with tempfile.TemporaryDirectory() as tmp:
        progress = os.path.join(tmp, "progress.jsonl")
        while todo:
            open(progress, "w").close()
            died = None
            try:
                mp.spawn(_worker, args=(world, _free_port(), todo, steps, progress, verbose), nprocs=world)
            except Exception as e:       # noqa: BLE001 -- mp.ProcessExitedException / ProcessRaisedException
                died = f"process died: {str(e).splitlines()[0][:100]}"
            started = None
            with open(progress) as f:
                for line in f:
                    event = json.loads(line)
                    if "row" in event:
                        rows.append(Row(**event["row"]))
                        if event["row"]["engine"] == ENGINES[-1]:
                            todo.remove(event["row"]["case"])
                    else:
                        started = event
            if died is None:
                break
            case = started["case"] if started else todo[0]
            done = {r.engine for r in rows if r.case == case}
            for engine in ENGINES:
                if engine not in done:
                    blamed = started is not None and engine == started["engine"]
                    rows.append(Row(case, engine, status=died if blamed else "not run (the process died)"))
            if case in todo:
                todo.remove(case)
            else:                        # it died after the case's last row (at teardown): said, not hidden
                print(f"[training bench] after {case}: {died}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row]) -> str:
    head = (f"{'case':<21} {'engine':<12} {'correct':<16} {'graphs':>6} {'breaks':>6} {'eager':>5} "
            f"{'first call':>10} {'step':>9} {'eager step':>10}  status")
    lines = [head, "-" * len(head)]
    for r in rows:
        correct = f"{'yes' if r.correct else 'NO'} ({r.max_diff:.1e})"
        lines.append(f"{r.case:<21} {r.engine:<12} {correct:<16} {r.graphs:>6} {r.breaks:>6} {r.eager_frames:>5} "
                     f"{r.first_s * 1e3:>8.0f}ms {r.steady_s * 1e3:>7.1f}ms {r.eager_steady_s * 1e3:>8.1f}ms  "
                     f"{r.status}")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    ours = {r.case: r for r in rows if r.engine == "dynamo_lite"}
    theirs = {r.case: r for r in rows if r.engine == "torchdynamo"}
    correct = sum(r.correct for r in ours.values())
    ran = [c for c in ours if c in theirs and theirs[c].status in ("ok", "WRONG")]     # TorchDynamo's graphs count
    fewer = sum(1 for c in ran if ours[c].status in ("ok", "WRONG") and ours[c].graphs <= theirs[c].graphs)
    crashed = sum(r.status not in ("ok", "WRONG") for r in ours.values())
    return (f"dynamo_lite: {correct}/{len(ours)} correct, graphs <= TorchDynamo's in {fewer} of the {len(ran)} "
            f"cases TorchDynamo ran, {crashed} raised; TorchDynamo: "
            f"{sum(r.correct for r in theirs.values())}/{len(theirs)} correct")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each case as it starts (stderr)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = run_in_processes(select(args.k), args.world_size, args.steps, args.verbose)
    print(f"training bench: {args.world_size} gloo processes, {args.steps} steps per case, backend eager "
          f"(counting), torch {torch.__version__}, Python {sys.version.split()[0]}, "
          f"{time.perf_counter() - start:.0f} s")
    print(table(rows))
    print(summary(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
