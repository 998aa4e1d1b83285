"""`capture(module)` on module classes it cannot simply subclass: FSDP2's `fully_shard` (which
swaps in a class made at run time, with its own `__new__`), and classes that refuse subclasses.
capture never raises for them; the result agrees with eager (outputs, gradients) over several
steps."""
import warnings

import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite.eval_frame import CapturedModule
from harness import CountingBackend


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_capture_of_a_fully_sharded_module(single_process_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model, reference = _mlp(), _mlp()
    reference.load_state_dict(model.state_dict())
    mesh = init_device_mesh("cpu", (1,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)

    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    assert isinstance(captured, type(model)), "a module of the same (FSDP) class"
    for step in range(3):
        x = torch.randn(3, 8)
        out, expected = captured(x), reference(x)
        torch.testing.assert_close(out, expected)
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            torch.testing.assert_close(grad, q.grad, msg=f"step {step}")
    assert backend.count >= 1


class _NoSubclasses(nn.Module):
    def __init_subclass__(cls, **kwargs):
        raise TypeError("this class may not be subclassed")

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


def test_a_class_that_refuses_subclasses_gets_a_wrapper_module():
    module = _NoSubclasses()
    backend = CountingBackend()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        captured = dl.capture(module, backend=backend)
    assert isinstance(captured, CapturedModule) and captured._orig_mod is module
    assert any("cannot return a module of the same class" in str(w.message) for w in record)
    x = torch.randn(2, 4)
    torch.testing.assert_close(captured(x), module(x))
    assert backend.count == 1
    assert set(captured.state_dict()) == {f"_orig_mod.{k}" for k in module.state_dict()}
