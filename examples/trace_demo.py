"""A small program for the trace directory (README): a model whose forward prints (a graph
break), reads a tensor's value (`.item()`, another), and is called with two scales (a recapture).

    DYNAMO_LITE_TRACE=/tmp/dl-trace python examples/trace_demo.py
    dynamo-lite trace /tmp/dl-trace          # then open /tmp/dl-trace/index.html
"""
import torch

import dynamo_lite as dl


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x, scale):
        h = self.fc(self.norm(x)) * scale
        print("block output", tuple(h.shape))
        peak = h.abs().max().item()
        return torch.relu(h) / (peak + 1.0)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))

    def forward(self, x, scale):
        for block in self.blocks:
            x = block(x, scale)
        return x.sum(dim=-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = dl.capture(Model().eval())
    with torch.no_grad():
        for scale in (1.0, 1.0, 2.0):
            out = model(torch.randn(4, 16), scale)
    print(out.shape)
