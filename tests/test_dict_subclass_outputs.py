"""Dict subclasses created inside captured code: transformers' ModelOutput (a @dataclass subclass
of OrderedDict whose __setattr__/__setitem__ keep items and attributes in sync), a hand-written
class with the same shape, plain dict/OrderedDict subclasses, and what goes with them (custom
__setattr__ of new objects, membership in an existing set, ContextVar set/reset).

Each test is differential (harness.check: eager vs captured, two calls); `same_output` also
compares the rebuilt object's key order and instance attributes, which a dict comparison alone
would not see. Break counts are dynamo_lite's own (explain) and skipped in reference mode.
"""
import contextvars
import dataclasses
from collections import OrderedDict
from typing import Optional

import pytest
import torch

from harness import REFERENCE, assert_same, capture, check, check_state_change, skip_in_reference


# --------------------------------------------------------------------------------------------
# a hand-written ModelOutput
# --------------------------------------------------------------------------------------------

class MiniOutput(OrderedDict):
    """transformers.utils.ModelOutput in small: dict items and attributes always agree."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = self.__dict__.get(field.name)
            if value is not None:
                self[field.name] = value

    def __setattr__(self, name, value):
        names = {field.name for field in dataclasses.fields(self)}
        if name in names and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class MiniLMOutput(MiniOutput):
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple] = None


def same_output(expected, actual):
    """Same class, same keys in the same order, same values, same instance attributes."""
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    assert_same(dict(expected.items()), dict(actual.items()))
    assert_same(vars(expected), vars(actual), "attributes")
    if "Output" in type(expected).__name__:          # ModelOutput-like: its items are its attributes
        for key in expected.keys():
            assert getattr(actual, key) is dict.__getitem__(actual, key)


def dynamo_lite_breaks(fn, *args) -> int:
    import dynamo_lite
    return dynamo_lite.explain(fn)(*args).break_count


def construct_and_return(x):
    return MiniLMOutput(logits=x * 2, hidden_states=(x, x + 1))


def test_construct_and_return_is_one_graph():
    result = check(construct_and_return, torch.randn(3), graphs=1)
    same_output(result.eager.value, result.captured.value)
    assert list(result.captured.value.keys()) == ["logits", "hidden_states"]
    assert result.captured.value.loss is None


@skip_in_reference("explain is dynamo_lite's")
def test_construct_and_return_has_no_breaks():
    assert dynamo_lite_breaks(construct_and_return, torch.randn(3)) == 0


def read_every_way(x):
    out = MiniLMOutput(logits=x * 2, hidden_states=(x, x + 1))
    first = out[0] + out["logits"] + out.logits
    keys = list(out.keys())
    pairs = [(k, v) for k, v in out.items()]
    n = sum(1 for _ in out) + len(out)
    return first, keys, pairs, list(out.values()), n, "loss" in out, "logits" in out, bool(out), out.to_tuple()


def test_reads_by_index_key_attribute_and_views():
    check(read_every_way, torch.randn(3), graphs=1)


@skip_in_reference("explain is dynamo_lite's")
def test_reads_have_no_breaks():
    assert dynamo_lite_breaks(read_every_way, torch.randn(3)) == 0


def test_setting_a_key_later_updates_the_attribute_too():
    def f(x):
        out = MiniLMOutput(logits=x + 1)
        out["loss"] = x.sum()
        out.hidden_states = (x,)
        return out, out.loss * 2

    result = check(f, torch.randn(4), graphs=1)
    same_output(result.eager.value[0], result.captured.value[0])
    assert list(result.captured.value[0].keys()) == ["logits", "loss", "hidden_states"]


def test_copies_into_a_dict_and_as_keyword_arguments():
    def collect(**kwargs):
        return kwargs

    def f(x):
        out = MiniLMOutput(logits=x + 1, loss=x.mean())
        return dict(out), {**out}, collect(**out)

    check(f, torch.randn(4), graphs=1)


def test_live_across_a_graph_break():
    def f(x):
        out = MiniLMOutput(logits=x * 3)
        print("break")
        out["loss"] = out.logits.sum()
        return out

    result = check(f, torch.randn(2), graphs=2)
    same_output(result.eager.value, result.captured.value)


def test_returned_from_a_module_and_read_by_its_caller():
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 3)

        def forward(self, x):
            return MiniLMOutput(logits=self.proj(x))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Head()

        def forward(self, x):
            out = self.head(x)
            return out.logits.softmax(-1), out[0].shape

    check(Model(), torch.randn(2, 4), graphs=1)


def test_unmodelled_method_breaks_and_stays_correct():
    def f(x):
        out = MiniLMOutput(logits=x + 1, loss=x.sum())
        out.move_to_end("logits")            # OrderedDict C method we do not model
        return out

    result = check(f, torch.randn(3), graphs=None)
    same_output(result.eager.value, result.captured.value)


def test_dunder_dict_escaping_is_not_a_copy():
    def f(x):
        out = MiniLMOutput(logits=x + 1)
        return out.__dict__

    check(f, torch.randn(3), graphs=None)


# --------------------------------------------------------------------------------------------
# an existing instance (e.g. a ModelOutput live across a graph break) passed in
# --------------------------------------------------------------------------------------------

def read_existing(out):
    return out[0] * 2, out["logits"] + 1, list(out.keys()), len(out), "loss" in out, out.to_tuple()


def test_existing_instance_reads():
    out = MiniLMOutput(logits=torch.randn(3), hidden_states=(torch.randn(2),))
    check(read_existing, out, graphs=1)
    if not REFERENCE:
        assert dynamo_lite_breaks(read_existing, out) == 0


def test_existing_instance_with_other_keys_recaptures():
    out = MiniLMOutput(logits=torch.randn(3))
    check_state_change(read_existing, (out,), lambda: out.__setitem__("loss", torch.ones(())))


def test_existing_instance_mutation_is_replayed():
    import copy

    def f(out):
        out["loss"] = out.logits.sum()
        out.hidden_states = (out.logits * 2,)
        return out.loss + 1, out["hidden_states"], list(out.__dict__)

    original = MiniLMOutput(logits=torch.randn(3))
    result = check(f, original, graphs=1)
    eager_out, captured_out = copy.deepcopy(original), copy.deepcopy(original)
    f(eager_out)
    capture(f)(captured_out)
    same_output(eager_out, captured_out)
    if not REFERENCE:
        assert dynamo_lite_breaks(f, copy.deepcopy(original)) == 0


def test_constructed_in_a_frame_that_runs_eagerly():
    def f(x):
        for i in range(2):
            print(i)                  # a break inside a loop: this frame runs eagerly, and the
        return MiniLMOutput(logits=x + 1, hidden_states=(x,))   # dataclass __init__ is captured alone

    result = check(f, torch.randn(3), graphs=None)
    same_output(result.eager.value, result.captured.value)


# --------------------------------------------------------------------------------------------
# plain dict / OrderedDict subclasses
# --------------------------------------------------------------------------------------------

class Bag(dict):
    pass


class Ordered(OrderedDict):
    pass


class Counting(OrderedDict):
    """OrderedDict.__init__ goes through a Python __setitem__; dict.__init__ would not."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


class WithMissing(dict):
    def __missing__(self, key):
        return len(key)


@pytest.mark.parametrize("build", [
    lambda x: Bag(a=x, b=x + 1),
    lambda x: Bag([("b", x), ("a", x * 2)], c=3),
    lambda x: Ordered([("z", x), ("y", x - 1)]),
    lambda x: Counting([("z", x), ("y", x - 1)], w=x),
], ids=["dict_kwargs", "dict_pairs", "ordereddict_pairs", "ordereddict_init_uses_setitem"])
def test_plain_subclasses_construct_and_return(build):
    result = check(build, torch.randn(2), graphs=1)
    same_output(result.eager.value, result.captured.value)


def test_plain_subclass_reads_and_mutations():
    def f(x):
        d = Ordered()
        d["a"] = x
        d["b"] = x * 2
        del d["a"]
        d.tag = "t"
        return d, d.get("b"), d.get("zz", 5), len(d), list(d), d.tag

    result = check(f, torch.randn(2), graphs=1)
    same_output(result.eager.value[0], result.captured.value[0])


def test_missing_key_calls_dunder_missing():
    def f(x):
        d = WithMissing(a=x)
        return d["a"] + d["long key"]

    check(f, torch.randn(2), graphs=1)


# --------------------------------------------------------------------------------------------
# attributes of objects created in captured code
# --------------------------------------------------------------------------------------------

class Logged:
    """A custom __setattr__ on a plain class: it must run, not be bypassed."""

    def __init__(self, x):
        self.log = []
        self.x = x

    def __setattr__(self, name, value):
        if name != "log":
            self.log.append(name)
        object.__setattr__(self, name, value)


class WithProperty:
    def __init__(self, x):
        self.scaled = x

    @property
    def scaled(self):
        return self._value * 10

    @scaled.setter
    def scaled(self, value):
        self._value = value + 1


class WithGetattr:
    def __getattr__(self, name):
        return name.upper()


def test_custom_setattr_of_a_new_object_runs():
    def f(x):
        obj = Logged(x)
        obj.y = x + 1
        return obj.log, obj.x + obj.y

    check(f, torch.randn(2), graphs=1)


def test_property_setter_of_a_new_object_runs():
    def f(x):
        obj = WithProperty(x)
        return obj.scaled, obj._value

    check(f, torch.randn(2), graphs=1)


def test_getattr_fallback_of_a_new_object():
    def f(x):
        obj = WithGetattr()
        return x + 1, obj.abc, hasattr(obj, "anything")

    check(f, torch.randn(2), graphs=1)


# --------------------------------------------------------------------------------------------
# membership in an existing set (transformers' registry of ModelOutput classes)
# --------------------------------------------------------------------------------------------

REGISTERED: set = set()


def scale_if_registered(x):
    if MiniLMOutput in REGISTERED:
        return x * 2
    return x - 1


def test_membership_in_an_existing_set_is_guarded():
    REGISTERED.clear()
    check_state_change(scale_if_registered, (torch.randn(3),), lambda: REGISTERED.add(MiniLMOutput))
    check_state_change(scale_if_registered, (torch.randn(3),), lambda: REGISTERED.discard(MiniLMOutput))


# --------------------------------------------------------------------------------------------
# ContextVar set / get / reset (transformers' output collector)
# --------------------------------------------------------------------------------------------

COLLECTOR: contextvars.ContextVar = contextvars.ContextVar("collector", default=None)


def set_use_reset(x):
    token = COLLECTOR.set({"scale": 3})
    y = x * COLLECTOR.get()["scale"]
    COLLECTOR.reset(token)
    return y


def test_contextvar_set_and_reset_in_one_trace():
    check(set_use_reset, torch.randn(2), graphs=1)
    assert COLLECTOR.get() is None


@skip_in_reference("explain is dynamo_lite's")
def test_contextvar_set_and_reset_has_no_breaks():
    assert dynamo_lite_breaks(set_use_reset, torch.randn(2)) == 0


def test_contextvar_set_without_reset_runs_for_real():
    def f(x):
        COLLECTOR.set(x.shape[0])
        return x + 1

    try:
        check(f, torch.randn(2), graphs=None)
        assert COLLECTOR.get() == 2
    finally:
        COLLECTOR.set(None)


def test_contextvar_reset_with_a_token_from_outside_is_replayed():
    def f(x, token):
        y = x * 2
        COLLECTOR.reset(token)
        return y + 1

    for _ in range(2):
        eager_token = COLLECTOR.set(7)
        expected = f(torch.ones(2), eager_token)
        assert COLLECTOR.get() is None
        captured_token = COLLECTOR.set(7)
        assert_same(expected, capture(f)(torch.ones(2), captured_token))
        assert COLLECTOR.get() is None
    with pytest.raises(RuntimeError):                # used twice: raises as in eager
        capture(f)(torch.ones(2), captured_token)
    if not REFERENCE:
        assert dynamo_lite_breaks(f, torch.ones(2), COLLECTOR.set(7)) == 0
        assert COLLECTOR.get() is None


def test_contextvar_get_of_an_outside_value_breaks_and_stays_correct():
    def f(x):
        return x * COLLECTOR.get()

    token = COLLECTOR.set(5)
    try:
        check(f, torch.randn(2), graphs=None)
    finally:
        COLLECTOR.reset(token)


# --------------------------------------------------------------------------------------------
# real transformers classes
# --------------------------------------------------------------------------------------------

def _outputs():
    pytest.importorskip("transformers")
    from transformers import modeling_outputs
    return modeling_outputs


def test_transformers_output_construct_and_return():
    mo = _outputs()

    def f(x):
        return mo.BaseModelOutputWithPast(last_hidden_state=x * 2, hidden_states=(x, x + 1))

    result = check(f, torch.randn(2, 3), graphs=1)
    same_output(result.eager.value, result.captured.value)
    if not REFERENCE:
        assert dynamo_lite_breaks(f, torch.randn(2, 3)) == 0


def test_transformers_output_read_and_rewrapped():
    mo = _outputs()

    def f(x):
        base = mo.BaseModelOutputWithPast(last_hidden_state=x * 2, hidden_states=(x,))
        h = base[0] + base.last_hidden_state + base["last_hidden_state"]
        out = mo.CausalLMOutputWithPast(logits=h, hidden_states=base.hidden_states)
        return out, base.to_tuple(), list(base.keys()), len(out)

    result = check(f, torch.randn(2, 3), graphs=1)
    same_output(result.eager.value[0], result.captured.value[0])
    if not REFERENCE:
        assert dynamo_lite_breaks(f, torch.randn(2, 3)) == 0


def test_transformers_output_forbidden_mutation_breaks():
    mo = _outputs()

    def f(x):
        out = mo.BaseModelOutput(last_hidden_state=x + 1)
        out.update({"hidden_states": (x,)})        # ModelOutput raises: "You cannot use update"
        return out

    check(f, torch.randn(2), graphs=None)
