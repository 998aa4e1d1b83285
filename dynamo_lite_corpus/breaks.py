"""Models with known graph-break triggers, written the way people really write them.

Each is tagged "breaks" plus ``break:<kind>`` naming the trigger (print, logging, warnings,
data-dependent-branch, numpy, item, tolist, loop-break, dynamic-shape, assert-tensor). A tracer
may run such frames eagerly (or split them into several graphs), but must always give eager's
results — and must keep eager's printed output in order.
"""
from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from dynamo_lite.report.registry import model

logger = logging.getLogger("dynamo_lite_corpus.breaks")


class DebugPrintMLP(nn.Module):
    """Shape debugging left in forward: the most common break of all."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        print(f"hidden: {tuple(h.shape)}")
        return self.fc2(h)


@model("print_in_forward", tags=("break:print",))
def build_print():
    """An MLP with a leftover debugging print of a shape between its layers."""
    torch.manual_seed(0)
    return DebugPrintMLP().eval(), (torch.randn(3, 16),)


class VerboseLinear(nn.Linear):
    """A layer subclassed to add a debugging print, then deferring to the parent with zero-arg super()."""

    def forward(self, input):
        print(f"{type(self).__name__}: input {tuple(input.shape)}")
        return super().forward(input)


@model("subclass_print_super", tags=("break:print", "super"))
def build_subclass_print_super():
    """nn.Linear subclass whose forward prints, then returns super().forward(input)."""
    torch.manual_seed(0)
    return nn.Sequential(VerboseLinear(8, 8), nn.ReLU(), VerboseLinear(8, 2)).eval(), (torch.randn(3, 8),)


class LoggedEncoder(nn.Module):
    """Logs statistics through `logging` and warns on suspicious inputs, as training code does."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        logger.debug("encoder input %s", tuple(x.shape))
        h = self.conv(x).transpose(1, 2)
        if x.shape[-1] < 8:
            warnings.warn("sequence shorter than the receptive field", UserWarning)
        return self.norm(h)


@model("logging_in_forward", tags=("break:logging", "break:warnings"))
def build_logging():
    """logger.debug(...) in forward plus a warnings.warn on a shape condition."""
    torch.manual_seed(0)
    return LoggedEncoder().eval(), (torch.randn(2, 4, 6),)


class GatedResidual(nn.Module):
    """Skips the expensive branch when the input is all non-positive: `if x.sum() > 0:`."""

    def __init__(self):
        super().__init__()
        self.branch = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        if x.sum() > 0:
            x = x + self.branch(x)
        else:
            x = x - 1
        return self.out(x)


@model("data_dependent_if", tags=("break:data-dependent-branch",))
def build_data_dependent_if():
    """`if x.sum() > 0:` choosing between two branches."""
    torch.manual_seed(0)
    return GatedResidual().eval(), (torch.randn(4, 8).abs(),)


class NumpyPositional(nn.Module):
    """Builds a sinusoid table with numpy inside forward (as many Transformer ports do)."""

    def __init__(self, dim=16):
        super().__init__()
        self.dim = dim
        self.proj = nn.Linear(dim, dim)

    def get_sinusoid_encoding_table(self, n_position, d_hid):
        def cal_angle(position, hid_idx):
            return position / np.power(10000, 2 * (hid_idx // 2) / d_hid)

        table = np.array([[cal_angle(pos, j) for j in range(d_hid)] for pos in range(n_position)])
        table[:, 0::2] = np.sin(table[:, 0::2])
        table[:, 1::2] = np.cos(table[:, 1::2])
        return torch.FloatTensor(table)

    def forward(self, x):
        pos = self.get_sinusoid_encoding_table(x.size(1), self.dim).to(x.device)
        return self.proj(x + pos.unsqueeze(0))


@model("numpy_in_forward", tags=("break:numpy",))
def build_numpy():
    """A sinusoid position table computed with numpy (np.power, np.sin) in forward."""
    torch.manual_seed(0)
    return NumpyPositional().eval(), (torch.randn(2, 5, 16),)


class NumpyMaskScorer(nn.Module):
    """Round-trips through .numpy() to build a mask, then back with torch.from_numpy."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, lengths):
        max_len = x.size(1)
        mask = np.arange(max_len)[None, :] < lengths.cpu().numpy()[:, None]
        mask = torch.from_numpy(mask).to(x.device)
        scores = self.fc(x).masked_fill(~mask.unsqueeze(-1), 0.0)
        return scores.sum(1)


@model("numpy_mask_roundtrip", tags=("break:numpy",))
def build_numpy_mask():
    """`lengths.cpu().numpy()` to build a padding mask, torch.from_numpy back."""
    torch.manual_seed(0)
    return NumpyMaskScorer().eval(), (torch.randn(3, 5, 6), torch.tensor([5, 2, 3]))


class LossScaledModel(nn.Module):
    """Dynamic loss scaling written with .item(), as in pre-AMP mixed-precision training loops."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
        self.loss_scale = 2.0 ** 10

    def forward(self, x, y):
        loss = F.mse_loss(self.net(x), y)
        loss_value = loss.item()
        if math.isnan(loss_value) or loss_value * self.loss_scale > 6e4:
            scale = 1.0
        else:
            scale = self.loss_scale
        return loss * scale, loss_value


@model("item_loss_scale", tags=("break:item", "loss"))
def build_item():
    """`loss.item()` read back for a loss-scale decision (and returned for logging)."""
    torch.manual_seed(0)
    return LossScaledModel().eval(), (torch.randn(8, 10), torch.randn(8, 1))


class SplitByLengths(nn.Module):
    """Splits a packed batch with `lengths.tolist()` and pools each sequence."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, packed, lengths):
        h = self.fc(packed)
        chunks = torch.split(h, lengths.tolist(), dim=0)
        return torch.stack([c.mean(0) for c in chunks])


@model("tolist_split", tags=("break:tolist",))
def build_tolist():
    """torch.split(h, lengths.tolist()) over a packed (ragged) batch."""
    torch.manual_seed(0)
    return SplitByLengths().eval(), (torch.randn(9, 4), torch.tensor([2, 4, 3]))


class IterativeRefiner(nn.Module):
    """Fixed-point iteration that stops when the update is small (DEQ / iterative refinement)."""

    def __init__(self, dim=8, max_iter=20, tol=1e-3):
        super().__init__()
        self.f = nn.Linear(dim, dim)
        self.max_iter = max_iter
        self.tol = tol
        with torch.no_grad():
            self.f.weight.mul_(0.3)

    def forward(self, x):
        z = torch.zeros_like(x)
        for i in range(self.max_iter):
            z_next = torch.tanh(self.f(z) + x)
            if (z_next - z).abs().max() < self.tol:
                z = z_next
                break
            z = z_next
        return z


@model("loop_break_on_tensor", tags=("break:loop-break", "break:data-dependent-branch", "loop"))
def build_loop_break():
    """A `for` loop with `break` on a tensor convergence test."""
    torch.manual_seed(0)
    return IterativeRefiner().eval(), (torch.randn(2, 8),)


class EarlyExitClassifier(nn.Module):
    """Early-exit network: returns from the first head that is confident enough (BranchyNet)."""

    def __init__(self, threshold=0.9):
        super().__init__()
        self.stages = nn.ModuleList([nn.Sequential(nn.Linear(12, 12), nn.ReLU()) for _ in range(3)])
        self.heads = nn.ModuleList([nn.Linear(12, 3) for _ in range(3)])
        self.threshold = threshold

    def forward(self, x):
        for stage, head in zip(self.stages, self.heads):
            x = stage(x)
            probs = F.softmax(head(x), dim=-1)
            if probs.max() > self.threshold:
                return probs
        return probs


@model("early_exit", tags=("break:data-dependent-branch", "loop"))
def build_early_exit():
    """Return from inside a loop over stages when `probs.max() > threshold`."""
    torch.manual_seed(0)
    return EarlyExitClassifier().eval(), (torch.randn(1, 12),)


class MaskedMeanPool(nn.Module):
    """Boolean-mask indexing and nonzero: outputs whose shape depends on the data."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, valid):
        h = self.fc(x)
        selected = h[valid]                       # [num_valid, 6]
        idx = torch.nonzero(valid).squeeze(-1)
        return selected.mean(0), idx


@model("boolean_mask_nonzero", tags=("break:dynamic-shape",))
def build_boolean_mask():
    """`h[valid]` boolean-mask indexing and `torch.nonzero` (data-dependent output shapes)."""
    torch.manual_seed(0)
    valid = torch.tensor([True, False, True, True, False])
    return MaskedMeanPool().eval(), (torch.randn(5, 6), valid)


class CheckedSoftmaxRegression(nn.Module):
    """Validates its inputs with asserts on tensor values, as defensive research code does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x, target):
        assert not torch.isnan(x).any(), "NaN in input"
        assert (target >= 0).all() and (target < 3).all()
        logits = self.fc(x)
        return F.cross_entropy(logits, target), logits


@model("assert_tensor_values", tags=("break:assert-tensor", "loss"))
def build_assert():
    """`assert not torch.isnan(x).any()` input validation in forward."""
    torch.manual_seed(0)
    return CheckedSoftmaxRegression().eval(), (torch.randn(6, 5), torch.tensor([0, 1, 2, 2, 1, 0]))


def _normalize_then_print(x, eps=1e-5):
    """A plain function (not a module): normalises, prints a statistic, then continues computing."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    y = (x - mean) / torch.sqrt(var + eps)
    print("max |y| =", round(y.abs().max().item(), 3))
    return torch.relu(y) * 2 + 1


@model("function_print_item", tags=("break:print", "break:item", "function"))
def build_function_print():
    """A plain function printing `round(y.abs().max().item(), 3)` between tensor ops."""
    torch.manual_seed(0)
    return _normalize_then_print, (torch.randn(3, 7),)
