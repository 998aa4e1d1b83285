"""Builtins inside captured functions: len isinstance getattr hasattr min max abs sum any all
range enumerate zip tuple list dict (plus a few conversions), on Python values and tensors."""
import pytest
import torch

from harness import check


class Holder:
    scale = 2.0

    def __init__(self):
        self.bias = 0.5


BUILTINS = {
    "len": lambda x, xs: x * len(xs) + len(x) + len("abc"),
    "isinstance": lambda x, xs: x * (isinstance(x, torch.Tensor) + isinstance(xs, (tuple, list)) * 2
                                     + isinstance(3, float) * 4),
    "getattr": lambda x, xs: x * getattr(Holder, "scale") + getattr(Holder(), "bias") + getattr(Holder, "nope", 7),
    "hasattr": lambda x, xs: x * (hasattr(Holder(), "bias") + 2 * hasattr(Holder, "missing") + 4 * hasattr(x, "shape")),
    "min_max_numbers": lambda x, xs: x * min(3, 1, 2) + max(-1.5, 2.5),
    "min_max_iterable": lambda x, xs: x * max([4, 9, 2]) - min((7, 5), default=0),
    "min_max_key": lambda x, xs: max(xs, key=lambda t: t.shape[0]) * 2,
    "abs": lambda x, xs: x * abs(-3) + abs(-2.5),
    "sum_numbers": lambda x, xs: x * sum([1, 2, 3]) + sum((0.5, 0.25), 10),
    "sum_tensors": lambda x, xs: sum(xs[:2]) + sum(xs[:2], x),
    "any_all": lambda x, xs: x * (any([0, 0, 1]) + 2 * all([1, 1, 0]) + 4 * any([]) + 8 * all([])),
    "range": lambda x, xs: x * len(range(2, 11, 3)) + range(10)[-1] + (3 in range(5)),
    "enumerate": lambda x, xs: [t * i for i, t in enumerate(xs)],
    "zip": lambda x, xs: [a * b for a, b in zip(xs, (1, 2, 3, 4))],
    "tuple_list": lambda x, xs: (tuple(xs)[0] + list(range(3))[2], tuple([1, 2]), list((3, 4))),
    "dict": lambda x, xs: (dict(a=x * 2, b=1), dict([("k", x), ("j", 3)]), dict(zip("ab", (x, x + 1)))),
    "reversed_sorted": lambda x, xs: (x * list(reversed([1, 2, 3]))[0], sorted([3, 1, 2])),
    "int_float_bool": lambda x, xs: x * int(2.7) + float(3) + bool([]) + int("4") + round(2.567, 1),
    "divmod_pow": lambda x, xs: x * divmod(17, 5)[0] + pow(2, 3) + divmod(17, 5)[1],
    "type_and_callable": lambda x, xs: x * ((type(x) is torch.Tensor) + callable(len) + (type(3) is int)),
    "zip_star_transpose": lambda x, xs: [sum(col) for col in zip(*[xs[:2], [x, x * 2]])],
    "map_filter": lambda x, xs: [t + 1 for t in map(lambda t: t * 2, xs)] + list(filter(lambda v: v > 1, [0, 2, 3])),
}


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin(name):
    xs = [torch.randn(3), torch.randn(3), torch.randn(3)]
    check(BUILTINS[name], torch.randn(3), xs, graphs=1)


def test_len_of_dict_set_tuple_string_and_tensor_dims():
    def f(x, d):
        return x.reshape(len(d), -1) * len({1, 2}) + len(x.shape) + len(("a",))

    check(f, torch.randn(4), {"a": 1, "b": 2}, graphs=1)


def test_getattr_for_method_dispatch_by_name():
    def f(x, op):
        return getattr(torch, op)(x) + getattr(x, op)()

    check(f, torch.randn(3), "tanh", graphs=1)


def test_isinstance_dispatch_over_mixed_inputs():
    def f(items):
        out = 0
        for item in items:
            if isinstance(item, torch.Tensor):
                out = out + item.sum()
            elif isinstance(item, (int, float)):
                out = out + item
            elif isinstance(item, str):
                out = out + len(item)
        return out

    check(f, [torch.randn(3), 2, 0.5, "four"], graphs=1)


def test_max_min_of_shape_next_to_elementwise_maximum():
    check(lambda x: (torch.maximum(x, x * 2), max(x.shape), min(x.shape)), torch.randn(2, 5), graphs=1)


def test_locals_and_vars_without_arguments():
    """locals() is the traced frame's own variables (at a graph break, code running in the frame
    would see the replacement code's variables instead: a KeyError in torch's logging)."""
    def f(x, n):
        scale = 2.0
        name = "x"
        y = x * scale

        def inner():
            return y + n
        message = "{name}:{n}:{scale}".format(**locals())      # formats tensors too: a break
        snapshot = vars()
        return inner() + len(message), sorted(snapshot), message

    check(f, torch.randn(3), 4, graphs=2)


def test_locals_used_next_to_a_graph_break():
    def f(x, n):
        total = x.sum()
        print("tick")                       # a break before: locals() after it is traced in the resume
        label = "{n}-{total_kind}".format(total_kind=type(total).__name__, **locals())
        return total * n, label, sorted(locals())

    check(f, torch.randn(3), 2, graphs=2)


def test_torchscript_annotate_is_the_value_it_annotates():
    # timm's CrossViT builds its outputs with torch.jit.annotate(List[Tensor], []): one graph
    from typing import List

    def f(xs):
        outs = torch.jit.annotate(List[torch.Tensor], [])
        for x in xs:
            outs.append(x.relu())
        return torch.jit.annotate(torch.Tensor, outs[0] + outs[1])

    check(f, [torch.randn(3), torch.randn(3)], graphs=1)
