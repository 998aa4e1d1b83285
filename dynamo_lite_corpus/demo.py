"""The main job for now: capture a few small models, print their graphs and guards, and compare
captured with eager outputs. `python -m dynamo_lite.demo` or `dynamo-lite demo`."""
from __future__ import annotations

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite as dl
from dynamo_lite.fallback.records import RECORDS


def tiny(x, y):
    return torch.relu(x @ y + 1).sum(dim=-1)


class MLP(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.layers(x))


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(B, T, C))


def show(title, fn, *args):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    captured = dl.capture(fn, backend=backend)
    start = time.perf_counter()
    out = captured(*args)
    capture_ms = (time.perf_counter() - start) * 1e3
    ref = fn(*args)
    record = RECORDS[-1] if RECORDS else None
    print(f"=== {title}: {len(graphs)} graph(s), first call (capture) {capture_ms:.1f} ms, "
          f"max |captured - eager| = {(out - ref).abs().max().item():.2e}")
    for gm in graphs:
        print(gm.code.strip())
    if record is not None and record.guards is not None:
        print("--- guards ---")
        for guard in record.guards.guards:
            print("  " + guard.describe())
    print()


def main():
    torch.manual_seed(0)
    with torch.no_grad():
        show("tiny function", tiny, torch.randn(4, 8), torch.randn(8, 3))
        show("MLP block (module)", MLP().eval(), torch.randn(2, 32))
        show("causal self-attention (module)", Attention().eval(), torch.randn(2, 6, 32))


if __name__ == "__main__":
    main()
