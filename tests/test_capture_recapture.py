"""Guards: a captured graph is reused for the same shapes/types/values and recaptured when an
input's shape, dtype, rank, type or a Python argument's value changes; every result stays right."""
import pytest
import torch

from harness import CountingBackend, capture, check_recapture


def scale_add(x, y):
    return x * 2 + y


def times_n(x, n):
    return x * n + n


def with_flag(x, flag):
    return x.relu() if flag else x.tanh()


def sum_list(xs):
    return torch.stack(xs).sum(0)


def shape_branch(x):
    if x.shape[0] > 2:
        return x[:2] * 10
    return x - 1


def mutate_first_read_second(a, b):
    a.add_(1)
    return b * 2  # differs when a and b are the same tensor


_SHARED = torch.zeros(3)  # passed twice: the two arguments alias

RECAPTURE = {
    "new_shape": (scale_add, (torch.randn(2, 3), torch.randn(2, 3)), (torch.randn(4, 5), torch.randn(4, 5))),
    "new_rank": (scale_add, (torch.randn(3), torch.randn(3)), (torch.randn(2, 3), torch.randn(2, 3))),
    "new_dtype": (scale_add, (torch.randn(3), torch.randn(3)),
                  (torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64))),
    "int_dtype": (scale_add, (torch.randn(3), torch.randn(3)), (torch.arange(3), torch.arange(3))),
    "python_int_value": (times_n, (torch.randn(3), 2), (torch.randn(3), 5)),
    "python_bool_value": (with_flag, (torch.randn(3), True), (torch.randn(3), False)),
    "int_to_tensor_type": (times_n, (torch.randn(3), 2), (torch.randn(3), torch.randn(3))),
    "list_length": (sum_list, ([torch.randn(2), torch.randn(2)],), ([torch.randn(2)] * 3,)),
    "branch_on_shape": (shape_branch, (torch.randn(4, 2),), (torch.randn(2, 2),)),
    "aliased_to_distinct_inputs": (mutate_first_read_second, (_SHARED, _SHARED), (torch.zeros(3), torch.zeros(3))),
    "requires_grad": (scale_add, (torch.randn(3), torch.randn(3)),
                      (torch.randn(3, requires_grad=True), torch.randn(3))),
}


@pytest.mark.parametrize("name", RECAPTURE)
def test_recapture_on_change(name):
    fn, first, second = RECAPTURE[name]
    check_recapture(fn, first, second)


def test_same_shape_new_values_reuses_graph():
    backend = CountingBackend()
    f = capture(scale_add, backend=backend)
    for _ in range(4):
        x, y = torch.randn(2, 2), torch.randn(2, 2)
        torch.testing.assert_close(f(x, y), x * 2 + y)
    assert backend.count == 1


def test_dict_key_change_recaptures():
    def f(d):
        return sum(v * i for i, v in enumerate(d.values())), sorted(d)

    backend = check_recapture(f, ({"a": torch.ones(2), "b": torch.ones(2)},),
                              ({"a": torch.ones(2), "c": torch.ones(2), "d": torch.ones(2)},))
    assert backend.count == 2


def test_a_dict_read_by_key_guards_its_keys_and_the_entries_read():
    """A dict from outside read one entry at a time: its other entries are not guarded (a change
    to one reuses the graph), the entries read and the keys are (a change recaptures)."""
    settings = {"scale": 2, "shift": 1.5, **{f"unused_{i}": i for i in range(20)}}

    def f(x):
        y = x * settings["scale"] + settings.get("shift", 0.0)
        return y if "flag" not in settings else -y

    backend = CountingBackend()
    compiled = capture(f, backend=backend)
    x = torch.randn(3)
    for change, graphs in [(None, 1), (("unused_3", 99), 1), (("unused_0", "now a string"), 1),
                           (("scale", 3), 2), (("shift", -1.0), 3), (("flag", True), 4)]:
        if change is not None:
            settings[change[0]] = change[1]
        torch.testing.assert_close(compiled(x), f(x))
        assert backend.count == graphs, (change, backend.count)


class _ConfigReadingItsDict:
    """transformers' configs: every attribute read first looks into the instance's `__dict__`."""
    def __getattribute__(self, name):
        if object.__getattribute__(self, "__dict__").get("_spec") is not None and name == "size":
            return 0
        return object.__getattribute__(self, name)


def test_an_instance_dict_read_for_one_entry_guards_that_entry():
    cfg = _ConfigReadingItsDict()
    cfg.size, cfg.other = 4, [1, 2]
    for i in range(10):
        setattr(cfg, f"field_{i}", i)

    def f(x):
        return x[: cfg.size] * 2

    backend = CountingBackend()
    compiled = capture(f, backend=backend)
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), f(x))
    cfg.field_3 = "changed"                 # read by nobody: the graph stays
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1
    cfg._spec = "set"                       # the entry `.get` read: recaptured, size is 0 now
    torch.testing.assert_close(compiled(x), f(x))
    cfg.size = 6                            # not read while _spec is set
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 2
    del cfg._spec
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 3 and compiled(x).shape == (6,)


def _reads_then_uses_whole(d, obj, x):
    first = d["a"] * x
    d["new"] = first.sum()                      # a write, then the whole dict
    obj.__dict__.get("missing")
    obj.added = 3
    del obj.b
    return first, sorted(d), len(d), list(d.values())[-1], sorted(vars(obj)), obj.a


def test_a_dict_read_by_key_then_written_and_read_whole_matches_eager():
    class Obj:
        pass
    obj = Obj()
    obj.a, obj.b = 1, 2
    check_recapture(_reads_then_uses_whole, ({"a": 2.0, "b": torch.ones(2)}, obj, torch.randn(2)),
                    ({"a": 3.0, "b": torch.ones(2)}, obj, torch.randn(2)))


def test_string_argument_change_recaptures():
    def f(x, mode):
        return x.exp() if mode == "exp" else x.log1p()

    check_recapture(f, (torch.rand(3), "exp"), (torch.rand(3), "log"))


def test_aliasing_between_inputs_is_guarded():
    """A graph captured for f(x, x) must not be reused for f(x, y) and vice versa."""
    backend = CountingBackend()
    compiled = capture(mutate_first_read_second, backend=backend)
    x, y = torch.zeros(3), torch.zeros(3)
    torch.testing.assert_close(compiled(x, y), torch.zeros(3))
    torch.testing.assert_close(compiled(x, x), torch.full((3,), 4.0))  # x was 1 already, +1, *2
    torch.testing.assert_close(compiled(y, x), torch.full((3,), 4.0))
    torch.testing.assert_close(x, torch.full((3,), 2.0))


def test_global_tensor_replaced_by_other_shape():
    backend = CountingBackend()
    holder = {"bias": torch.ones(3)}

    def f(x):
        return x + holder["bias"]

    compiled = capture(f, backend=backend)
    torch.testing.assert_close(compiled(torch.zeros(3)), torch.ones(3))
    holder["bias"] = torch.full((2, 3), 5.0)
    torch.testing.assert_close(compiled(torch.zeros(3)), torch.full((2, 3), 5.0))


def test_rebound_global_function_is_seen(monkeypatch):
    backend = CountingBackend()
    compiled = capture(lambda x: activation(x) * 2, backend=backend)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), torch.relu(x) * 2)
    monkeypatch.setitem(globals(), "activation", torch.sigmoid)
    torch.testing.assert_close(compiled(x), torch.sigmoid(x) * 2)


def activation(x):
    return torch.relu(x)


def test_attribute_tensor_replaced_between_calls():
    class State:
        pass

    state = State()
    state.scale = torch.tensor(2.0)
    backend = CountingBackend()
    compiled = capture(lambda x: x * state.scale, backend=backend)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), torch.full((2,), 2.0))
    state.scale = torch.tensor([3.0, 4.0], dtype=torch.float64)
    out = compiled(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, torch.tensor([3.0, 4.0], dtype=torch.float64))


def test_module_attribute_change_is_seen():
    """Changing a Python attribute a captured module reads must not reuse the stale value."""
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.factor = 2

        def forward(self, x):
            return x * self.factor

    backend = CountingBackend()
    module = Scaled()
    compiled = capture(module, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2)
    compiled.factor = 5
    module.factor = 5
    torch.testing.assert_close(compiled(x), x * 5)
    assert 1 <= backend.count <= 2


def test_eval_train_switch_is_seen():
    module = torch.nn.Dropout(0.5)
    backend = CountingBackend()
    compiled = capture(module, backend=backend)
    compiled.eval()
    x = torch.ones(1000)
    torch.testing.assert_close(compiled(x), x)
    compiled.train()
    assert (compiled(x) == 0).any(), "train mode must drop elements again"
    assert backend.count == 2
