"""Tuples, lists, dicts and sets: building, unpacking (incl. star), indexing, slicing, mutation.

Containers passed in are deep-copied per run and compared afterwards, so in-place list/dict
changes made by the captured function must be visible to the caller exactly as in eager mode.
"""
import pytest
import torch

from harness import check


def tensors(n, size=3):
    return [torch.randn(size) for _ in range(n)]


# -- building --------------------------------------------------------------------------------

def test_build_tuple_list_dict_set():
    def f(x, n):
        t = (x, x + 1, n)
        lst = [x * 2, n, "s"]
        d = {"a": x, "b": n, n: "int key"}
        s = {n, n + 1, n}
        return t, lst, d, s

    check(f, torch.randn(2), 4, graphs=1)


def test_build_with_star_and_double_star():
    def f(x, extra, opts):
        items = [x, *extra, x * 2]
        pair = (*extra, x)
        merged = {**opts, "scale": 3, **{"b": x}}
        return sum(items) * merged["scale"], len(pair), merged

    check(f, torch.randn(2), tensors(2, 2), {"a": 1, "scale": 2}, graphs=1)


def test_nested_containers():
    def f(x):
        data = {"layers": [x, x * 2], "meta": {"n": 2, "pairs": [(1, x), (2, -x)]}}
        return data["layers"][1] + data["meta"]["pairs"][1][1] * data["meta"]["n"]

    check(f, torch.randn(3), graphs=1)


def test_nested_container_input():
    def f(batch):
        return batch["x"][0] * batch["scale"] + batch["pairs"][1][0]

    batch = {"x": tensors(2), "scale": 2.0, "pairs": [(torch.ones(3), 1), (torch.randn(3), 2)]}
    check(f, batch, graphs=1)


# -- unpacking -------------------------------------------------------------------------------

def test_unpack_tuple_and_list():
    def f(seq):
        a, b, c = seq
        [d, e] = (a + b, c)
        return d * e

    check(f, tensors(3), graphs=1)


def test_star_unpack_head_rest():
    def f(seq):
        a, *rest = seq
        return a * len(rest) + sum(rest), type(rest).__name__

    check(f, tensors(4), graphs=1)


def test_star_unpack_middle_and_end():
    def f(seq):
        first, *middle, last = seq
        *init, final = middle
        return first - last, len(middle), final * 2, init

    check(f, tuple(tensors(5)), graphs=1)


def test_nested_unpack():
    def f(x):
        (a, b), (c, (d, e)) = (x, x + 1), (x * 2, (3, 4))
        return a + b * c + d - e

    check(f, torch.randn(2), graphs=1)


def test_unpack_tensor_along_first_dim():
    def f(x):
        a, b, c = x
        return a * b + c

    check(f, torch.randn(3, 4), graphs=1)


def test_unpack_split_and_unbind_results():
    def f(x):
        top, bottom = x.split(2)
        a, b, c, d = x.unbind(0)
        first, *others = x.chunk(4)
        return top - bottom, a + d, first * len(others)

    check(f, torch.randn(4, 3), graphs=1)


def test_unpack_dict_keys_and_items():
    def f(x, d):
        k1, k2 = d
        (ka, va), (kb, vb) = d.items()
        return x * va + vb, k1 + k2, ka + kb

    check(f, torch.randn(2), {"p": 2, "q": 5}, graphs=1)


# -- indexing and slicing --------------------------------------------------------------------

SEQ_INDEX = {
    "first": lambda seq: seq[0] * 2,
    "negative": lambda seq: seq[-1] - seq[-2],
    "slice": lambda seq: sum(seq[1:3]),
    "step_slice": lambda seq: (torch.stack(seq[::2]), seq[::2]),
    "reverse": lambda seq: (seq[::-1][0] - seq[0], seq[::-1]),
    "open_slice": lambda seq: torch.cat(seq[:-1] + seq[3:]),
}


@pytest.mark.parametrize("kind", [list, tuple])
@pytest.mark.parametrize("name", SEQ_INDEX)
def test_sequence_indexing_and_slicing(name, kind):
    check(SEQ_INDEX[name], kind(tensors(5, 2)), graphs=1)


def test_index_with_python_int_argument():
    check(lambda seq, i: seq[i] * seq[-i - 1], tensors(4), 1, graphs=1)


def test_dict_subscript_get_and_membership():
    def f(x, d):
        a = d["a"]
        b = d.get("b", 10)
        c = d.get("missing", 0.5)
        return x * a + b + c, "a" in d, "zz" not in d

    check(f, torch.randn(2), {"a": 3, "b": 4}, graphs=1)


def test_string_indexing_and_slicing():
    def f(x, name):
        return x * len(name[1:]), name[0], name[-2:], name.upper()

    check(f, torch.randn(2), "linear", graphs=1)


# -- mutation --------------------------------------------------------------------------------

def test_list_mutation_of_local():
    def f(x):
        out = [x]
        out.append(x + 1)
        out.extend([x * 2, x * 3])
        out.insert(0, -x)
        last = out.pop()
        out[1] = out[1] * 10
        del out[0]
        return out, last

    check(f, torch.randn(2), graphs=1)


def test_list_input_mutation_is_visible():
    def f(x, acc):
        acc.append(x * 2)
        acc[0] = acc[0] + 1
        acc.pop(1)
        return x.sum()

    check(f, torch.randn(3), [torch.zeros(3), torch.ones(3), 5], graphs=1)


def test_dict_mutation_of_local_and_input():
    def f(x, cache):
        cache["y"] = x + 1
        cache.update({"z": x * 2, "n": 3})
        removed = cache.pop("old")
        del cache["tmp"]
        cache.setdefault("w", x - 1)
        return cache["y"] + cache["z"] + removed

    check(f, torch.randn(2), {"old": torch.ones(2), "tmp": 0, "keep": "k"}, graphs=1)


def test_list_concat_repeat_and_sort():
    def f(x, nums):
        joined = nums + [10, 2]
        doubled = [1, 2] * 2
        ordered = sorted(joined, reverse=True)
        return x * ordered[0] + len(doubled), ordered, joined.index(10), joined.count(2)

    check(f, torch.randn(2), [3, 7, 2], graphs=1)


def test_set_operations():
    def f(x, ids):
        s = set(ids)
        s.add(99)
        s.discard(1)
        both = s & {2, 3, 99}
        either = s | {100}
        return x * len(both) + len(either), 99 in s, sorted(s - {2})

    check(f, torch.randn(2), [1, 2, 3, 2], graphs=1)


def test_tuple_methods_and_concat():
    def f(x, t):
        u = t + (4, 5)
        return x * u.index(4) + u.count(1), u, len(u * 2)

    check(f, torch.randn(2), (1, 2, 1), graphs=1)


def test_dict_views_and_constructors():
    def f(x, d):
        keys = list(d.keys())
        values = tuple(d.values())
        inverted = {v: k for k, v in d.items()}
        return x * sum(values), keys, inverted, dict(zip(keys, values)) == d

    check(f, torch.randn(2), {"a": 1, "b": 2, "c": 3}, graphs=1)
