"""Return values: tuples, lists, dicts, dataclasses and namedtuples of tensors, mixed Python
values, aliasing between outputs and inputs."""
import collections
import dataclasses
import typing

import pytest
import torch

from harness import CountingBackend, capture, check

Pair = collections.namedtuple("Pair", ["first", "second"])


class Stats(typing.NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor
    count: int = 0


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor
    extras: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: torch.Tensor
    tag: str


RETURNS = {
    "tuple": lambda x: (x + 1, x * 2),
    "nested_tuple": lambda x: ((x, (x.sum(), x.mean())), x - 1),
    "list": lambda x: [x.exp(), x.abs()],
    "dict": lambda x: {"double": x * 2, "neg": -x, "nested": {"sq": x ** 2}},
    "namedtuple": lambda x: Pair(x.sin(), x.cos()),
    "namedtuple_kwargs": lambda x: Pair(second=x + 3, first=x - 3),
    "typing_namedtuple": lambda x: Stats(x.mean(0), x.std(0), count=x.shape[0]),
    "dataclass": lambda x: Output(logits=x * 2, loss=(x ** 2).mean()),
    "dataclass_with_extras": lambda x: Output(x + 1, x.sum(), extras={"n": 3, "t": x * 0}),
    "frozen_dataclass": lambda x: Frozen(x.relu(), "relu"),
    "mixed_python_values": lambda x: (x * 2, 3, 2.5, "s", None, True, (1, "a")),
    "single_element_tuple": lambda x: (x.t(),),
    "empty_containers_and_tensor": lambda x: ([], {}, (), x + 0),
    "list_of_namedtuples": lambda x: [Pair(x[i], x[i] * i) for i in range(2)],
}


@pytest.mark.parametrize("name", RETURNS)
def test_return_structure(name):
    check(RETURNS[name], torch.randn(3, 2), graphs=1)


def test_namedtuple_fields_and_methods_inside():
    def f(x):
        p = Pair(x, x + 1)
        q = p._replace(second=p.second * 10)
        return q.first + q[1], q._asdict(), len(p)

    check(f, torch.randn(2), graphs=1)


def test_dataclass_fields_read_and_modified_inside():
    def f(x):
        out = Output(x, x.sum())
        out.loss = out.loss * 2
        out.extras["seen"] = True
        return out, dataclasses.fields(out)[0].name

    check(f, torch.randn(3), graphs=1)


def test_namedtuple_input_unpacked():
    def f(p):
        first, second = p
        return p.first * second + first

    check(f, Pair(torch.randn(2), torch.randn(2)), graphs=1)


def test_same_tensor_returned_twice_keeps_aliasing():
    backend = CountingBackend()
    f = capture(lambda x: (lambda y: (y, y))(x * 2), backend=backend)
    a, b = f(torch.randn(3))
    assert a is b
    assert backend.count == 1


def test_returned_input_is_the_same_object():
    backend = CountingBackend()

    def f(x, y):
        z = y * 2  # some computation, but x is returned as is
        return x, z

    x = torch.randn(3)
    out, z = capture(f, backend=backend)(x, torch.ones(3))
    assert out is x
    torch.testing.assert_close(z, torch.full((3,), 2.0))


def test_returned_view_shares_storage_with_input():
    backend = CountingBackend()
    x = torch.randn(4, 2)
    view = capture(lambda t: t.view(8)[2:], backend=backend)(x)
    view[0] = 123.0
    assert x[1, 0].item() == 123.0, "the returned view must alias the input like in eager mode"


def test_returned_input_list_is_the_callers_list():
    backend = CountingBackend()

    def f(x, acc):
        acc.append(x * 2)
        return acc

    acc = [torch.zeros(2)]
    out = capture(f, backend=backend)(torch.ones(2), acc)
    assert out is acc
    assert len(acc) == 2
    torch.testing.assert_close(acc[1], torch.full((2,), 2.0))
