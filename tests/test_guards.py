"""Guard soundness: after each kind of change a captured function recaptures (or, where the graph
cannot be stale, simply reuses it) and always matches eager. Plus recapture reasons, the cache
size limit, global torch state and memory under shape churn."""
import functools
import gc
import types
import warnings

import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite import _evalframe
from dynamo_lite.fallback.records import RECORDS
from harness import CountingBackend

SCALE = 2


def uses_global(x):
    return x * SCALE


def run(captured, fn, *args):
    got, want = captured(*args), fn(*args)
    torch.testing.assert_close(got, want)
    return got


def reasons(name):
    return [r.recompile_reason for r in RECORDS if r.name == name and r.recompile_reason]


def test_global_change_recaptures_with_reason():
    global SCALE
    backend = CountingBackend()
    captured = dl.capture(uses_global, backend=backend)
    x = torch.randn(3)
    run(captured, uses_global, x)
    SCALE = 3
    try:
        run(captured, uses_global, x)
    finally:
        SCALE = 2
    assert backend.count == 2
    assert reasons("uses_global")[-1] == "SCALE changed: 2 -> 3"
    run(captured, uses_global, x)          # back to 2: the first entry is reused
    assert backend.count == 2


def test_closure_cell_change_recaptures():
    factor = 2.0

    def f(x):
        return x * factor

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    x = torch.randn(3)
    run(captured, f, x)
    factor = 5.0   # noqa: F841  (read by f through its cell)
    run(captured, f, x)
    assert backend.count == 2


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 1.0
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x)) * self.scale


def test_module_attribute_submodule_and_training_changes():
    torch.manual_seed(0)
    model = Scaled().eval()
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    x = torch.randn(2, 4)
    run(captured, model, x)
    model.scale = 3.0
    run(captured, model, x)
    assert backend.count == 2 and "self.scale changed: 1.0 -> 3.0" in reasons("forward")[-1]
    model.fc = nn.Linear(4, 4)           # same type, new parameters: graph inputs, no stale values
    run(captured, model, x)
    model.fc = nn.Sequential(nn.Linear(4, 4), nn.ReLU())   # different type: recapture
    run(captured, model, x)
    assert backend.count == 3
    model.train()
    torch.manual_seed(1)
    out = captured(x)
    torch.manual_seed(1)
    torch.testing.assert_close(out, model(x))
    assert backend.count == 4 and "training changed: False -> True" in reasons("forward")[-1]


def test_replaced_parameter_is_used_and_metadata_change_recaptures():
    model = nn.Linear(3, 3)
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    x = torch.randn(2, 3)
    run(captured, model, x)
    model.weight = nn.Parameter(torch.randn(3, 3))          # parameters are graph inputs: used as is
    run(captured, model, x)
    assert backend.count == 1
    model.weight.requires_grad_(False)                      # metadata changed: recapture
    run(captured, model, x)
    model.double()                                          # dtype changed in place (param.data = ...)
    run(captured, model, x.double())
    assert backend.count == 3


def _deep_model():
    block = lambda: nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.ReLU())   # noqa: E731
    return nn.Sequential(nn.Sequential(block(), block()), nn.Sequential(block(), block()))


def test_changes_deep_in_a_module_tree_are_seen_where_guards_share_its_paths():
    # The check reads a path many guards go through (`self._modules['0']._modules['1']`) once into
    # a local: each change below, at the end of such a path, must still be seen
    model = _deep_model().eval()
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    x = torch.randn(2, 4)
    run(captured, model, x)
    check = _evalframe_entries(model)[0].guards.source_code
    # each module's attributes are read from its __dict__ (a dict lookup; nn.Module's __getattr__
    # keeps attribute reads slow), and each __dict__ is read at most once
    dict_reads = [line.split("=")[1].strip() for line in check.splitlines() if line.strip().endswith(".__dict__")]
    assert len(dict_reads) == len(set(dict_reads)) >= 7, check
    assert "._modules" not in check and ".eps" not in check and "._parameters" not in check, check
    model[1][0][1].eps = 0.5                                       # a constant, three levels down
    run(captured, model, x)
    assert "eps changed" in reasons("forward")[-1]
    model[0][1][0].weight = nn.Parameter(torch.randn(4, 3))       # shape of a deep parameter (an error)
    with pytest.raises(RuntimeError):
        captured(x)
    with pytest.raises(RuntimeError):
        model(x)
    model[0][1][0].weight = nn.Parameter(torch.randn(4, 4))
    seen = []
    model[1][1][2].register_forward_hook(lambda m, i, o: seen.append(o.shape))   # a hook on a leaf
    run(captured, model, x)
    assert len(seen) == 2
    model[0][0] = nn.Sequential(nn.Linear(4, 4), nn.Tanh())            # a subtree replaced
    run(captured, model, x)


class Tenfold:
    """A data descriptor: it wins over the instance dict entry of its name."""

    def __get__(self, obj, cls=None):
        return self if obj is None else obj.__dict__["k"] * 10

    def __set__(self, obj, value):
        obj.__dict__["k"] = value


class WithClassDefaults(nn.Module):
    k = Tenfold()
    scale = 2.0

    def __init__(self):
        super().__init__()
        self.k = 2
        self.scale = 3.0
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x) * self.scale + self.k


def test_module_attributes_read_from_the_instance_dict_keep_pythons_lookup_order():
    # guards read plain attributes from the module's __dict__: a data descriptor of the class
    # still comes first, and an attribute deleted from the instance falls back to the class's
    model = WithClassDefaults()
    backend = CountingBackend()
    captured = dl.capture(model, backend=backend)
    x = torch.randn(3, 2)
    assert model.k == 20
    run(captured, model, x)
    model.k = 4                          # through the descriptor: the graph read 20 as a constant
    run(captured, model, x)
    del model.scale                      # the class's 2.0 now
    run(captured, model, x)
    assert backend.count == 3 and "scale" in reasons("forward")[-1]
    model.scale = 3.0
    model.fc.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    run(captured, model, x)
    assert backend.count == 4


def _evalframe_entries(model):
    from dynamo_lite.convert_frame import cache_entries
    return cache_entries(type(model).forward.__code__)


def test_requires_grad_dtype_and_constant_argument_changes():
    def f(x, n):
        return x * n + 1

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    run(captured, f, torch.randn(3), 2)
    run(captured, f, torch.randn(3, requires_grad=True), 2)
    run(captured, f, torch.randn(3, dtype=torch.float64), 2)
    run(captured, f, torch.randn(3), 7)
    assert backend.count == 4
    assert reasons("f")[-1] == "n changed: 2 -> 7"


class MyTensor(torch.Tensor):
    pass


def test_tensor_subclass_runs_eagerly_and_plain_tensor_still_captures():
    def f(x):
        return x.sin() * 2

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    sub = torch.randn(3).as_subclass(MyTensor)
    out = captured(sub)
    assert type(out) is MyTensor and torch.equal(out.as_subclass(torch.Tensor), f(sub).as_subclass(torch.Tensor))
    run(captured, f, torch.randn(3))
    assert backend.count == 1


def test_list_length_change_recaptures():
    def f(xs):
        return sum(xs)

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    run(captured, f, [torch.randn(2), torch.randn(2)])
    run(captured, f, [torch.randn(2)] * 3)
    assert backend.count == 2
    assert reasons("f")[-1] == "len(xs) changed: 2 -> 3"


def test_grad_mode_and_default_dtype_changes_recapture():
    def f(x):
        return x * 2 + torch.ones(3)

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    x = torch.randn(3, requires_grad=True)
    assert captured(x).requires_grad
    with torch.no_grad():
        out = captured(x)
    assert not out.requires_grad and backend.count == 2
    assert "torch.is_grad_enabled() changed: True -> False" in reasons("f")[-1]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out = captured(x.detach().double())
        assert out.dtype == torch.float64 and backend.count == 3
    finally:
        torch.set_default_dtype(previous)


def test_cache_size_limit_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(dl.config, "cache_size_limit", 8)

    def f(x, n):
        return x + len(n)       # a str is guarded by value (an int would become a graph input)

    backend = CountingBackend()
    captured = dl.capture(f, backend=backend)
    x = torch.zeros(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(12):
            torch.testing.assert_close(captured(x, "a" * n), x + n)
    assert backend.count == 8
    limit_warnings = [w for w in caught if "config.cache_size_limit=" in str(w.message)]
    assert len(limit_warnings) == 1 and "n changed" in str(limit_warnings[0].message)
    for n in range(12):   # captured variants still used, others eager, all right
        torch.testing.assert_close(captured(x, "a" * n), x + n)
    assert backend.count == 8


def _churn(x):
    return x.cos() + 1


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_shape_churn_beyond_limit_keeps_memory_flat():
    captured = dl.capture(_churn)
    tensors = [torch.randn(n) for n in range(1, 40)]
    for t in tensors * 3:
        captured(t)
    gc.collect()
    objects, rss = len(gc.get_objects()), _rss_kb()
    for i in range(100_000):
        captured(tensors[i % len(tensors)])
    gc.collect()
    assert len(gc.get_objects()) - objects < 200
    assert _rss_kb() - rss < 8 * 1024


def test_cache_does_not_keep_dead_objects_alive():
    import weakref

    def make():
        def helper(t):
            return t * 3
        return helper

    helper = make()
    helper.tag = "pinned"      # a function with attributes is guarded by identity (a plain one by its code)
    holder = type("Holder", (), {})()
    holder.fn = helper

    def f(x, h):
        return h.fn(x) + 1

    captured = dl.capture(f)
    run(captured, f, torch.randn(2), holder)
    ref = weakref.ref(helper)
    entries = _evalframe.get_code_extra(f.__code__)
    assert len(entries) == 1
    del helper, holder.fn
    gc.collect()
    assert ref() is None, "a guard kept the function alive"
    assert _evalframe.get_code_extra(f.__code__) == [], "the entry guarded on the dead object was not dropped"


def test_in_place_ops_on_intermediates_need_no_distinct_inputs():
    """Inputs must stay distinct objects only where the graph writes into one of them: a ReLU in
    place on an intermediate (a ResNet's) makes the same tensor passed twice no reason to recapture."""
    def block(x, y):
        h = x + y
        h.relu_()
        return h * 2

    def writes_input(x, y):
        x.add_(y)
        return x * 1

    backend = CountingBackend()
    captured = dl.capture(block, backend=backend)
    a, b = torch.randn(4), torch.randn(4)
    run(captured, block, a, b)
    run(captured, block, a, a)
    assert len(backend.graphs) == 1

    backend = CountingBackend()
    captured = dl.capture(writes_input, backend=backend)
    a, b = torch.randn(4), torch.randn(4)
    a_eager, b_eager = a.clone(), b.clone()
    torch.testing.assert_close(captured(a, b), writes_input(a_eager, b_eager))
    torch.testing.assert_close(captured(a, a), writes_input(a_eager, a_eager))   # x += x: twice x
    torch.testing.assert_close(a, a_eager)
    assert len(backend.graphs) == 2


AUDITED_ID_CALLS = """
import sys, torch, dynamo_lite as dl
calls = []
sys.addaudithook(lambda event, args: calls.append(event) if event == "builtins.id" else None)

class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(4))
    def forward(self, x, y, z):
        x.mul_(self.w)                      # writes an input: the inputs must stay distinct
        return torch.sigmoid(x + y + z)      # a global function: pinned by identity

graphs = []
model = Scale()
captured = dl.capture(model, backend=lambda gm, example_inputs: graphs.append(gm) or gm.forward)
args = [torch.randn(4) for _ in range(3)]
for _ in range(2):
    captured(*args)
want = [a.clone() for a in args]
calls.clear()
got = captured(*args)
n = len(calls)
expected = model(*want)
assert torch.equal(got, expected) and all(torch.equal(a, w) for a, w in zip(args, want))
assert len(graphs) == 1, "the guards must pass: no recapture"
print(n)
"""


def test_guard_checks_raise_no_audit_events():
    """A Python audit hook (filelock installs one at import on 3.12+; Hugging Face and
    torch.compile import it) runs on every `id()`: guards pin objects and compare identities
    through the extension instead, so a guard check raises no "builtins.id" event."""
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", AUDITED_ID_CALLS], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=repo))
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == 0


def _plus_one(x):
    return x + 1


def _times_three(x):
    return x * 3


@pytest.mark.parametrize("functions", [
    (torch.sin, torch.cos, torch.exp),                 # torch's builtins
    (torch.nn.functional.relu, torch.nn.functional.gelu, torch.nn.functional.silu),  # torch's Python functions
    (_plus_one, _times_three),                         # user functions
], ids=["torch-builtins", "torch-functions", "user-functions"])
def test_callable_passed_as_value_is_guarded(functions):
    """A callable reached through an argument, a default or a closure cell is a value like any
    other: torch's own are unguarded only where read by name (`torch.sin`), not wherever they are."""
    def by_argument(x, f):
        return f(x * 1.5) + 1

    captured = dl.capture(by_argument)
    for f in functions:
        x = torch.randn(4)
        run(captured, by_argument, x, f)
    for f in functions:
        def by_default(x, f=f):
            return f(x * 1.5) + 1

        def make(f):
            return lambda x: f(x * 1.5) + 1
        by_closure = make(f)
        x = torch.randn(4)
        run(dl.capture(by_default), by_default, x)
        run(dl.capture(by_closure), by_closure, x)


def test_second_source_of_a_function_is_guarded():
    """One function object read through two sources (a global and an argument, `torch.relu` and
    an argument) is one value in the graph: the second source is guarded to hold it still."""
    def through_global(x, g):
        return _plus_one(x) + g(x)

    def through_torch(x, act):
        return torch.relu(x) + act(x)

    def through_module(x, m):
        return m.sin(x) + 1
    x = torch.randn(4)
    captured = dl.capture(through_global)
    run(captured, through_global, x, _plus_one)
    run(captured, through_global, x, _times_three)
    captured = dl.capture(through_torch)
    run(captured, through_torch, x, torch.relu)
    run(captured, through_torch, x, torch.sigmoid)

    class Namespace:
        @staticmethod
        def sin(x):
            return x * 100
    captured = dl.capture(through_module)
    run(captured, through_module, x, torch)
    run(captured, through_module, x, Namespace)


def test_torch_function_in_a_module_attribute_is_guarded():
    """`self.act = F.gelu` replaced by `F.silu` between calls recaptures."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = torch.nn.functional.gelu

        def forward(self, x):
            return self.act(x) * 2
    block = Block()
    captured = dl.capture(block)
    x = torch.randn(4)
    run(captured, block, x)
    block.act = torch.nn.functional.silu
    run(captured, block, x)


class _Config:
    def __init__(self, act):
        self.act = act


@pytest.mark.parametrize("fn, argsets", [
    (lambda x, fs: fs[0](x) + fs[1](x), [([torch.sin, torch.cos],), ([torch.exp, torch.exp],)]),
    (lambda x, d: d["a"](x), [({"a": torch.sin},), ({"a": torch.cos},)]),
    (lambda x, t: t[0](x), [((torch.sin,),), ((torch.cos,),)]),
    (lambda x, c: c.act(x), [(_Config(torch.sin),), (_Config(torch.cos),)]),
    (lambda x, cls: cls()(x), [(nn.ReLU,), (nn.Sigmoid,), (nn.Tanh,)]),
    (lambda x, cls: x * (cls is torch.Tensor), [(torch.Tensor,), (nn.Parameter,)]),
    (lambda x, p: p(x, x), [(functools.partial(torch.add, alpha=3),),
                            (functools.partial(torch.sub, alpha=3),)]),
], ids=["list", "dict", "tuple", "object-attribute", "module-class", "torch-class", "partial"])
def test_torch_callables_inside_arguments_are_guarded(fn, argsets):
    """torch's functions and classes held in a list, dict, tuple, an object or a partial: each
    call with other ones matches eager (all of these reused the first graph)."""
    captured = dl.capture(fn)
    for args in argsets:
        run(captured, fn, torch.randn(4), *args)


ACTIVATION = torch.relu


def uses_global_activation(x):
    return ACTIVATION(x) + 1


def test_rebinding_a_global_torch_function_recaptures():
    """`ACTIVATION = torch.sigmoid` after a call with torch.relu: a global holding one of torch's
    functions is a value like any other (only modules such as `torch` or `F` are read by name)."""
    global ACTIVATION
    captured = dl.capture(uses_global_activation)
    x = torch.randn(4)
    run(captured, uses_global_activation, x)
    ACTIVATION = torch.sigmoid
    try:
        run(captured, uses_global_activation, x)
    finally:
        ACTIVATION = torch.relu
    namespace = types.SimpleNamespace(fn=torch.sin)

    def through_namespace(x):
        return namespace.fn(x)
    captured = dl.capture(through_namespace)
    run(captured, through_namespace, x)
    namespace.fn = torch.cos
    run(captured, through_namespace, x)
