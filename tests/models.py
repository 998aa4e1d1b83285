"""Small modules shared by the module and headline tests (tiny sizes keep the suite fast)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=8, d_hidden=16, d_out=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.out = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.out(x)


class CausalSelfAttention(nn.Module):
    """Multi-head attention with a causal mask applied through masked_fill."""

    def __init__(self, dim=16, heads=4, max_len=8, p_drop=0.1):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(p_drop)
        self.resid_drop = nn.Dropout(p_drop)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        head_dim = C // self.heads
        q = q.view(B, T, self.heads, head_dim).transpose(1, 2)
        k = k.view(B, T, self.heads, head_dim).transpose(1, 2)
        v = v.view(B, T, self.heads, head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        att = att.masked_fill(self.causal[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, dim=16, heads=4, max_len=8, p_drop=0.1):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_len, p_drop)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Linear(4 * dim, dim),
            nn.Dropout(p_drop),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class ConvNet(nn.Module):
    """Conv2d -> BatchNorm2d -> ReLU -> pool -> Linear."""

    def __init__(self, channels=3, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, classes)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)
