"""DDP's gradient all-reduce overlapping backward under a compiling backend: several GPUs, NCCL.

    python bench/ddp_overlap.py [--world-size 2] [--steps 12] [--layers 12] [--json FILE]
    python bench/ddp_overlap.py --device cpu --quick          # smoke mode: gloo, the eager backend

Issue 17 asks that a graph captured inside a DistributedDataParallel forward be cut at DDP's
gradient buckets (`backends/ddp_split.py`, `config.optimize_ddp`), so that each bucket's all-reduce
starts while the backward of the pieces before it still runs, whatever the backend — and that this
be measured with the triton backend on a machine with more than one GPU. A backend that compiles
the whole forward into one graph (AOTAutograd: one backward) hands DDP every gradient at the end
of that backward, so all of the communication waits for it.

The model is Hugging Face's `GPT2LMHeadModel` (default config but the depth, `--layers`: 12 layers
of width 768, ~124M parameters, ~0.5 GB of fp32 gradients per step), batch 4 x sequence 512 per
rank, built with random weights under one seed and wrapped in `DistributedDataParallel` with its
default buckets (25 MB). A training step: `zero_grad`, the forward and the LM loss under bf16
autocast, `backward`, AdamW's `step`. Engines, each on a fresh copy of the same model, same data:

* eager DDP;
* ours, split: `dl.capture(ddp_model, backend="triton")` with `config.optimize_ddp = True` (the
  default): one compiled piece per bucket;
* ours, whole: the same with `config.optimize_ddp = False`: one graph, one backward;
* Inductor: `torch.compile(ddp_model)` (TorchDynamo's DDPOptimizer splits at the buckets too).

Per engine: the first step (capture and compile included), the median of the later steps
(`torch.cuda.synchronize` around each), the graphs given to the backend, each step's loss against
eager's (relative 2e-2: bf16 autocast), and from a profile of one step the NCCL kernel time that no
compute kernel overlaps (*exposed communication*). Rank 0 prints the table; `--json` keeps it.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]   # bench/triton.py shadows triton
sys.path.insert(0, os.path.dirname(_HERE))

import torch                                               # noqa: E402
import torch.distributed as dist                           # noqa: E402
import torch.multiprocessing as mp                         # noqa: E402

import dynamo_lite as dl                                   # noqa: E402

ENGINES = ("eager", "ours_split", "ours_whole", "inductor")


@dataclass
class Row:
    engine: str
    status: str = "ok"
    first_s: float = 0.0
    step_ms: float = 0.0
    graphs: Optional[int] = None
    as_captured: Optional[int] = None      # ours: graphs the triton backend ran as captured (not lowered)
    as_captured_why: str = ""
    exposed_comm_ms: Optional[float] = None
    comm_ms: Optional[float] = None
    losses: list = field(default_factory=list)
    max_rel_diff: float = 0.0
    correct: Optional[bool] = None


class Counting:
    """The backend (eager or triton), counting the graphs (DDP pieces) it is given."""

    def __init__(self, backend: str):
        self.backend, self.graphs, self.compiled = backend, 0, []

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        if self.backend == "eager":
            return gm.forward
        from dynamo_lite.backends.triton import triton_backend
        compiled = triton_backend(gm, example_inputs)
        self.compiled.append(compiled)
        return compiled

    def as_captured(self) -> list[str]:
        """Why each graph the triton backend did not lower ran as captured."""
        infos = [getattr(c, "compiled_graph", None) for c in self.compiled]
        return [i.fallback_reason for i in infos if i is not None and i.fallback_reason]


def build(layers: int, quick: bool, device):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = (GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128) if quick
              else GPT2Config(n_layer=layers))
    return GPT2LMHeadModel(config).to(device), config.vocab_size


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _exposed_comm(step, device) -> tuple[Optional[float], Optional[float]]:
    """(NCCL kernel ms that no other kernel overlaps, all NCCL kernel ms) in one profiled step."""
    if device.type != "cuda":
        return None, None
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        _sync(device)
    comm, compute = [], []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA or e.time_range.elapsed_us() <= 0:
            continue
        (comm if "nccl" in e.name.lower() else compute).append((e.time_range.start, e.time_range.end))
    compute.sort()
    merged = []
    for start, end in compute:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    exposed = 0.0
    for start, end in comm:
        covered = sum(max(0, min(end, e) - max(start, s)) for s, e in merged)
        exposed += (end - start) - covered
    return exposed / 1e3, sum(e - s for s, e in comm) / 1e3


def run_engine(engine: str, args, rank: int, device) -> Row:
    from torch.nn.parallel import DistributedDataParallel as DDP
    row = Row(engine)
    model, vocab = build(args.layers, args.quick, device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    backend = "triton" if device.type == "cuda" else "eager"
    counting = None
    dl.reset()
    if engine == "eager":
        forward = ddp
    elif engine.startswith("ours"):
        dl.config.optimize_ddp = engine == "ours_split"
        counting = Counting(backend)
        forward = dl.capture(ddp, backend=counting)
    else:
        from torch import _dynamo
        _dynamo.reset()
        _dynamo.utils.counters.clear()
        forward = torch.compile(ddp) if device.type == "cuda" else torch.compile(ddp, backend="eager")
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1000 + rank)
    batch, seq = (2, 32) if args.quick else (args.batch, args.seq)
    data = [torch.randint(0, vocab, (batch, seq), generator=gen).to(device) for _ in range(4)]
    amp = torch.autocast(device.type, dtype=torch.bfloat16)

    def step(i=0):
        opt.zero_grad(set_to_none=True)
        ids = data[i % len(data)]
        with amp:
            loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()

    times = []
    try:
        for i in range(args.steps):
            _sync(device)
            start = time.perf_counter()
            row.losses.append(float(step(i)))
            _sync(device)
            times.append(time.perf_counter() - start)
        row.first_s = times[0]
        row.step_ms = statistics.median(times[len(times) // 2:]) * 1e3
        row.exposed_comm_ms, row.comm_ms = _exposed_comm(lambda: step(0), device)
    except Exception as e:          # noqa: BLE001 -- an engine's failure is its row
        row.status = f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"
        if args.verbose:
            traceback.print_exc()
    finally:
        dl.config.optimize_ddp = True
    if counting is not None:
        row.graphs = counting.graphs
        reasons = counting.as_captured()
        row.as_captured, row.as_captured_why = len(reasons), (reasons[0][:100] if reasons else "")
    elif engine == "inductor":
        from torch import _dynamo
        row.graphs = int(_dynamo.utils.counters["stats"]["unique_graphs"])
    return row


def _worker(rank: int, world: int, port: int, args, out: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    rows = []
    for engine in args.engines:
        row = run_engine(engine, args, rank, device)
        # every rank must agree: the slowest rank's times, the first failure
        gathered = [None] * world
        dist.all_gather_object(gathered, asdict(row))
        merged = Row(**gathered[0])
        merged.step_ms = max(g["step_ms"] for g in gathered)
        merged.first_s = max(g["first_s"] for g in gathered)
        merged.status = next((g["status"] for g in gathered if g["status"] != "ok"), "ok")
        rows.append((merged, [g["losses"] for g in gathered]))
        if rank == 0 and args.verbose:
            print(f"[{engine}] {merged.status} step {merged.step_ms:.2f} ms", file=sys.stderr, flush=True)
    if rank == 0:
        eager = next((losses for row, losses in rows if row.engine == "eager"), None)
        result = []
        for row, losses in rows:
            if eager is not None and row.status == "ok" and row.engine != "eager":
                diffs = [abs(a - b) / max(abs(b), 1e-6) for mine, ref in zip(losses, eager) for a, b in zip(mine, ref)]
                row.max_rel_diff = max(diffs) if diffs else 0.0
                row.correct = row.max_rel_diff <= 2e-2
            result.append(asdict(row))
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def table(rows: list[dict]) -> str:
    by = {r["engine"]: r for r in rows}
    whole = by.get("ours_whole", {}).get("step_ms") or None
    lines = [f"{'engine':<12} {'status':<8} {'correct':<8} {'graphs':>6} {'first call':>10} {'step':>9} "
             f"{'vs whole':>8} {'exposed comm':>13} {'comm':>8}"]
    for r in rows:
        vs = f"{r['step_ms'] / whole:.2f}" if whole and r["step_ms"] else "-"
        exposed = f"{r['exposed_comm_ms']:.2f} ms" if r["exposed_comm_ms"] is not None else "-"
        comm = f"{r['comm_ms']:.2f} ms" if r["comm_ms"] is not None else "-"
        correct = "-" if r["correct"] is None else ("yes" if r["correct"] else "NO")
        lines.append(f"{r['engine']:<12} {r['status'][:8]:<8} {correct:<8} {r['graphs'] if r['graphs'] is not None else '-':>6} "
                     f"{r['first_s']:>9.1f}s {r['step_ms']:>7.2f}ms {vs:>8} {exposed:>13} {comm:>8}")
    for r in rows:
        if r.get("as_captured"):
            lines.append(f"  {r['engine']}: {r['as_captured']} graph(s) ran as captured, e.g. {r['as_captured_why']}")
    bad = [r for r in rows if r["status"] != "ok"]
    for r in bad:
        lines.append(f"  {r['engine']}: {r['status']}")
    return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--quick", action="store_true", help="a tiny GPT-2 (smoke mode)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        print(f"ddp_overlap: {torch.cuda.device_count()} GPU(s), {args.world_size} needed; "
              f"use --device cpu for the smoke mode")
        return 2
    out = args.json or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ddp_overlap_{os.getpid()}.json")
    start = time.perf_counter()
    mp.spawn(_worker, args=(args.world_size, _free_port(), args, out), nprocs=args.world_size, join=True)
    with open(out) as f:
        rows = json.load(f)
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    sizes = "tiny (--quick)" if args.quick else f"{args.layers} layers, batch {args.batch} x {args.seq} per rank"
    print(f"ddp_overlap: {args.world_size} x {name}, GPT2LMHeadModel {sizes}, {args.steps} steps, "
          f"torch {torch.__version__}, {time.perf_counter() - start:.0f} s")
    print(table(rows))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
