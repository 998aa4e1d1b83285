"""nn.Module capture: built-in layers, custom modules (submodules, parameters, buffers),
containers (Sequential, ModuleList, ModuleDict) and iteration over them, stateful layers, and the
contract of capture(module): same class, same parameter objects, same state_dict."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import CountingBackend, assert_same, capture, check, skip_in_reference
from models import MLP, ConvNet, TransformerBlock


# -- built-in layers ---------------------------------------------------------------------------

LAYERS = {
    "linear": (lambda: nn.Linear(4, 3), lambda: torch.randn(2, 4)),
    "linear_no_bias": (lambda: nn.Linear(4, 3, bias=False), lambda: torch.randn(2, 4)),
    "conv2d": (lambda: nn.Conv2d(2, 3, kernel_size=3, padding=1), lambda: torch.randn(1, 2, 5, 5)),
    "conv2d_strided": (lambda: nn.Conv2d(2, 2, 3, stride=2, groups=2), lambda: torch.randn(1, 2, 6, 6)),
    "layer_norm": (lambda: nn.LayerNorm(6), lambda: torch.randn(2, 3, 6)),
    "embedding": (lambda: nn.Embedding(10, 4), lambda: torch.tensor([[1, 2, 9], [0, 0, 3]])),
    "dropout_eval": (lambda: nn.Dropout(0.5).eval(), lambda: torch.randn(3, 4)),
    "batchnorm1d_eval": (lambda: nn.BatchNorm1d(4).eval(), lambda: torch.randn(3, 4)),
    "batchnorm2d_eval": (lambda: nn.BatchNorm2d(2).eval(), lambda: torch.randn(2, 2, 3, 3)),
    "gelu": (lambda: nn.GELU(), lambda: torch.randn(5)),
    "softmax": (lambda: nn.Softmax(dim=-1), lambda: torch.randn(2, 5)),
    "maxpool": (lambda: nn.MaxPool2d(2), lambda: torch.randn(1, 1, 4, 4)),
    "flatten": (lambda: nn.Flatten(), lambda: torch.randn(2, 3, 2)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_builtin_layer(name):
    make_module, make_input = LAYERS[name]
    check(make_module(), make_input(), graphs=1)


def test_batchnorm_train_mode_updates_running_stats():
    """The harness compares state_dicts, so the running-stat buffer updates are checked too."""
    bn = nn.BatchNorm1d(3)
    result = check(bn, torch.randn(4, 3), graphs=1)
    assert result.compiled.num_batches_tracked.item() == 2  # two calls, both updated the buffers


def test_dropout_in_train_mode_drops_half_on_average():
    """Random masks cannot be compared elementwise; check the semantics instead."""
    backend = CountingBackend()
    drop = capture(nn.Dropout(0.5).train(), backend=backend)
    out = drop(torch.ones(2000))
    kept = (out != 0)
    assert 0.4 < kept.float().mean().item() < 0.6
    torch.testing.assert_close(out[kept], torch.full_like(out[kept], 2.0))
    assert backend.count == 1


# -- custom modules ------------------------------------------------------------------------------

class WithParamsAndBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))
        self.bias = nn.Parameter(torch.zeros(4))
        self.register_buffer("scale", torch.tensor(0.5))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.temperature = 2.0  # plain Python attribute

    def forward(self, x):
        return (x @ self.weight + self.bias) * self.scale / self.temperature


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.inner = WithParamsAndBuffers()
        self.proj = nn.Linear(8, 4)

    def forward(self, x):
        h = self.encoder(x)
        return self.inner(self.proj(h)) + x


class BufferMutation(nn.Module):
    """Keeps a running sum in a buffer, like a BatchNorm statistic."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.total.add_(x.sum(0))
        self.calls += 1
        return x - self.total / self.calls


class ListOfLayers(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))
        self.norms = nn.ModuleList([nn.LayerNorm(4) for _ in range(n)])

    def forward(self, x):
        for layer, norm in zip(self.layers, self.norms):
            x = x + F.relu(layer(norm(x)))
        return self.layers[-1](x) * len(self.layers)


class DictOfHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["sum"] = sum(h(x).sum() for h in self.heads.values())
        out["has_cls"] = "cls" in self.heads
        return out


class TrainingFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            return self.lin(x) * 0
        return self.lin(x) + 1


class IteratesChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Tanh()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())

    def forward(self, x):
        for child in self.children():
            x = child(x)
        for module in self.seq:
            x = module(x) + x
        total = sum(p.sum() for p in self.parameters())
        return x + total * 0.01, len(list(self.named_parameters()))


class KwargsForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, *, mask=None, scale=1.0):
        y = self.lin(x) * scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return y


class NamedLayers(nn.Module):
    """Submodules registered with setattr and fetched with getattr by computed names."""

    def __init__(self, n=3):
        super().__init__()
        self.n = n
        for i in range(n):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def forward(self, x):
        for i in range(self.n):
            x = torch.relu(getattr(self, f"layer{i}")(x))
        return x


CUSTOM = {
    "params_and_buffers": WithParamsAndBuffers,
    "nested_submodules": Nested,
    "buffer_mutation": BufferMutation,
    "module_list": ListOfLayers,
    "module_dict": DictOfHeads,
    "training_flag_eval": lambda: TrainingFlag().eval(),
    "training_flag_train": TrainingFlag,
    "iterate_children": IteratesChildren,
    "sequential": lambda: nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 4), nn.LayerNorm(4)),
    "mlp": lambda: MLP(d_in=4),
    "named_layers_getattr": NamedLayers,
}


@pytest.mark.parametrize("name", CUSTOM)
def test_custom_module(name):
    check(CUSTOM[name](), torch.randn(2, 4), graphs=1)


def test_module_forward_with_keyword_arguments():
    check(KwargsForward(), torch.randn(2, 4), mask=torch.tensor([[True, False, True, False]] * 2),
          scale=0.5, graphs=1)


def test_convnet_eval():
    check(ConvNet().eval(), torch.randn(2, 3, 6, 6), graphs=1, rtol=1e-5, atol=1e-5)


def test_module_passed_as_function_argument(backend):
    """Driven by hand: check() deep-copies arguments per call, and an engine may legitimately
    guard on the identity of a module argument, so the same module object is passed each time."""
    def f(model, x):
        return model(x).relu() + model.weight.sum()

    model = nn.Linear(3, 3)
    compiled = capture(f, backend=backend)
    for _ in range(3):
        x = torch.randn(2, 3)
        assert_same(f(model, x), compiled(model, x))
    assert backend.count == 1


def test_module_called_from_closure_with_parameter_access():
    model = Nested()

    def f(x):
        return model(x) + model.inner.weight[0] * model.inner.temperature

    check(f, torch.randn(2, 4), graphs=1)


def test_functional_call_on_module_parameters():
    lin = nn.Linear(4, 2)

    def f(x):
        return F.linear(x, lin.weight * 2, lin.bias) + lin.weight.shape[0]

    check(f, torch.randn(3, 4), graphs=1)


# -- the contract of capture(module) -----------------------------------------------------------

@pytest.mark.parametrize("make", [MLP, Nested, lambda: TransformerBlock().eval(), lambda: ConvNet().eval()],
                         ids=["mlp", "nested", "transformer", "convnet"])
def test_captured_module_shares_state_and_class(make):
    module = make()
    compiled = capture(module, backend=CountingBackend())
    assert isinstance(compiled, type(module))
    assert isinstance(compiled, nn.Module)
    assert list(compiled.state_dict().keys()) == list(module.state_dict().keys())
    for (name, a), (name_c, b) in zip(module.state_dict().items(), compiled.state_dict().items()):
        assert name == name_c
        torch.testing.assert_close(b, a)
    original = dict(module.named_parameters())
    captured = dict(compiled.named_parameters())
    assert captured.keys() == original.keys()
    assert all(captured[k] is original[k] for k in original), "parameters must be the same objects"
    assert all(a is b for a, b in zip(module.buffers(), compiled.buffers())), "buffers must be the same objects"


def test_captured_module_sees_in_place_parameter_updates():
    module = MLP()
    reference = copy.deepcopy(module)
    backend = CountingBackend()
    compiled = capture(module, backend=backend)
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), reference(x))
    with torch.no_grad():
        for p, q in zip(module.parameters(), reference.parameters()):
            p.mul_(0.5)
            q.mul_(0.5)
    torch.testing.assert_close(compiled(x), reference(x))
    assert 1 <= backend.count <= 2


def test_captured_module_trains_like_eager():
    """One SGD step through the captured module gives the same parameters as through eager."""
    eager = MLP()
    to_capture = copy.deepcopy(eager)
    compiled = capture(to_capture, backend=CountingBackend())
    x, target = torch.randn(4, 8), torch.randn(4, 4)
    for model, net in ((eager, eager), (to_capture, compiled)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = F.mse_loss(net(x), target)
        loss.backward()
        opt.step()
    for (name, a), (_, b) in zip(eager.named_parameters(), to_capture.named_parameters()):
        torch.testing.assert_close(b, a, msg=lambda m: f"{name}: {m}")


def test_captured_module_load_state_dict_roundtrip():
    module = MLP()
    compiled = capture(module, backend=CountingBackend())
    other = MLP()
    compiled.load_state_dict(other.state_dict())
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), other(x))
    torch.testing.assert_close(module(x), other(x))  # loaded into the shared parameters


def test_slicing_a_module_list():
    # transformers: `for layer in self.layers[: self.config.num_hidden_layers]`
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))

        def forward(self, x):
            for layer in self.layers[:3]:
                x = layer(x).relu()
            head = self.layers[1:]
            return x + head[-1](x), len(head)
    check(Stack(), torch.randn(2, 4), graphs=1)


def test_a_sliced_module_list_returned_is_a_module_list():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            return self.layers[::2], x * 2
    m = Stack()
    got, _ = capture(m)(torch.randn(2, 4))
    assert type(got) is nn.ModuleList and list(got) == [m.layers[0], m.layers[2]]


# -- methods of module classes torch defines outside torch.nn.modules, and Module's own dunders --
# torchvision's quantizable models call `self.cat.cat(...)` / `self.add_relu.add_relu(...)` on a
# FloatFunctional (torch/ao/...); diffusers' Magvit VAE does `del self.prev_features`.

class _QuantizableBlock(nn.Module):
    def __init__(self):
        super().__init__()
        from torch.ao.nn.quantized import FloatFunctional
        self.cat = FloatFunctional()
        self.add_relu = FloatFunctional()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.cat.cat([self.lin(x), x], dim=1)
        return self.add_relu.add_relu(y, y * 2)


def test_float_functional_methods_are_inlined():
    check(_QuantizableBlock().eval(), torch.randn(2, 4), graphs=1)


class _DeletesItsAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.prev = torch.zeros(())
        self.register_buffer("buf", torch.ones(4))

    def forward(self, x):
        del self.prev
        self.prev = x.sum()
        return self.lin(x) + self.buf


@skip_in_reference("the reference harness compiles a shallow copy of the module: its attributes are not the ones read here")
def test_module_deletes_and_sets_again_an_instance_attribute_in_forward():
    eager, captured_module = _DeletesItsAttributes(), copy.deepcopy(_DeletesItsAttributes())
    captured_module.load_state_dict(eager.state_dict())
    backend = CountingBackend()
    captured = capture(captured_module, backend=backend)
    for _ in range(4):
        x = torch.randn(2, 4)
        assert_same(eager(x), captured(x), "output")
        assert_same(eager.prev, captured_module.prev, "the attribute deleted and set again")
        assert_same(dict(eager.named_buffers()), dict(captured_module.named_buffers()), "buffers")
        assert list(vars(captured_module)) == list(vars(eager))
    assert backend.count == 1


# ---------------------------------------------------------------------------------------------
# forward hooks: traced as Module.__call__ runs them (transformers collects hidden states so)
# ---------------------------------------------------------------------------------------------

class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return self.lin(x).relu() * scale


class _CollectsOutputs(nn.Module):
    """Forward hooks append each block's output to a list the model resets per call."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(_Block() for _ in range(3))
        self.seen = []
        for block in self.blocks:
            block.register_forward_hook(lambda mod, inp, out: self.seen.append(out.sum()))

    def forward(self, x):
        self.seen = []
        for block in self.blocks:
            x = block(x)
        return x, torch.stack(self.seen)


def test_forward_hooks_collecting_outputs_are_one_graph():
    torch.manual_seed(0)
    eager = _CollectsOutputs()
    torch.manual_seed(0)
    model = _CollectsOutputs()
    backend = CountingBackend()
    captured = capture(model, backend=backend)
    for _ in range(3):
        x = torch.randn(2, 4)
        assert_same(eager(x), captured(x))
        assert_same(eager.seen, model.seen, "collected outputs")
    assert backend.count == 1


def test_pre_hooks_and_hooks_change_arguments_and_result():
    block = _Block()
    block.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    block.register_forward_pre_hook(lambda mod, args, kwargs: (args, {**kwargs, "scale": 3.0}), with_kwargs=True)
    block.register_forward_hook(lambda mod, args, kwargs, out: out + kwargs["scale"], with_kwargs=True)
    block.register_forward_hook(lambda mod, args, out: None)
    check(block, torch.randn(2, 4), graphs=1)


def test_weight_norm_pre_hook_is_traced():
    # the old weight_norm recomputes `weight` from g and v in a pre-hook (an object with __call__)
    torch.manual_seed(0)
    eager = nn.Sequential(nn.ReLU(), torch.nn.utils.weight_norm(nn.Conv1d(3, 4, 3)))
    torch.manual_seed(0)
    model = nn.Sequential(nn.ReLU(), torch.nn.utils.weight_norm(nn.Conv1d(3, 4, 3)))
    backend = CountingBackend()
    captured = capture(model, backend=backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 3, 8)
        assert_same(eager(x), captured(x))
        assert_same(eager[1].weight, model[1].weight, "recomputed weight")
    assert backend.count == 1


def test_a_hook_added_and_removed_after_capture_recaptures():
    block = _Block()
    backend = CountingBackend()

    def f(x):
        return block(x) + 1

    captured = capture(f, backend=backend)
    x = torch.randn(2, 4)
    assert_same(f(x), captured(x))
    handle = block.register_forward_hook(lambda mod, inp, out: out * 10)
    assert_same(f(x), captured(x))
    handle.remove()
    assert_same(f(x), captured(x))
    assert backend.count == 2


class _ClosesOverItself(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.seen = []

        def record(out):
            self.seen.append(out)
        self.record = record

    def forward(self, x):
        self.seen = []
        self.record(self.lin(x))
        return len(self.seen)


def test_captured_module_is_the_object_its_closures_see():
    # capture(module) returns a module of its class sharing the state; forward must still run on
    # the module the program's closures refer to, or writes through one are not seen through the other
    torch.manual_seed(0)
    eager = _ClosesOverItself()
    torch.manual_seed(0)
    model = _ClosesOverItself()
    captured = capture(model)
    for _ in range(2):
        x = torch.randn(2, 4)
        assert eager(x) == captured(x) == 1
        assert_same(eager.seen, model.seen, "recorded outputs")


class _SlicesItsSequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        x = self.layers[:-1](x)              # diffusers' audio VAE encoder does this
        head = self.layers[1:]
        return self.layers[-1](x) + len(head), head


def test_a_slice_of_a_sequential_is_called_and_escapes_with_its_keys():
    model = _SlicesItsSequential()
    result = check(model, torch.randn(2, 4), graphs=1)
    (_, head), (_, eager_head) = result.captured.unwrap(), result.eager.unwrap()
    assert type(head) is nn.Sequential and list(head._modules) == list(eager_head._modules) == ["1", "2", "3"]


class _Router(nn.Module):
    """transformers' SwitchTransformers router: casts its classifier to its dtype on every call."""

    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(4, 3)
        self.dtype = torch.float32

    def forward(self, x):
        self.classifier = self.classifier.to(self.dtype)
        return self.classifier(x.to(self.dtype)).softmax(-1)


def test_module_to_where_nothing_changes_is_the_module_itself():
    check(_Router(), torch.randn(2, 4), graphs=1)


def test_module_to_that_converts_still_matches_eager():
    router = _Router()
    router.dtype = torch.float64
    check(router, torch.randn(2, 4), graphs=None)       # the conversion itself runs eagerly


class _AssignsADropoutInForward(nn.Module):
    """big_bird's `self.dropout = nn.Dropout(p)` inside forward: the assignment is a break; the
    module made in the trace is live at it and is built anew by the same call (a fresh module per
    call, as in eager), where the frame ran eagerly before."""
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.dropout = nn.Dropout(0.0)
        return self.dropout(self.lin(x)).relu()


def test_a_module_made_in_forward_and_stored_is_built_anew_at_the_break():
    from dynamo_lite.fallback.records import RECORDS
    check(_AssignsADropoutInForward().eval(), torch.randn(2, 4), graphs=None)
    assert not [r for r in RECORDS if r.status == "fallback"], [r.detail for r in RECORDS]
