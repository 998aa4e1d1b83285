"""Control flow on Python values: for/while loops, if/else, boolean operators, `is`/`in`/`not`,
comprehensions and generator expressions, assert statements that pass, string formatting.

Loops and branches depend only on Python values (or static tensor metadata), so each function is
still a single graph.
"""
import pytest
import torch

from harness import check


# -- for loops -------------------------------------------------------------------------------

FOR_LOOPS = {
    "range": lambda x: sum_loop(x, range(4)),
    "range_start_step": lambda x: sum_loop(x, range(10, 1, -3)),
    "list": lambda x: sum_loop(x, [1.0, -2.0, 0.5]),
    "tuple": lambda x: sum_loop(x, (3, 1)),
    "empty": lambda x: sum_loop(x, []),
}


def sum_loop(x, items):
    out = x
    for item in items:
        out = out * 0.5 + item
    return out - 1


@pytest.mark.parametrize("name", FOR_LOOPS)
def test_for_loop_over(name):
    check(FOR_LOOPS[name], torch.randn(3), graphs=1)


def test_for_over_tensor_list_input():
    def f(xs):
        total = torch.zeros(2)
        for t in xs:
            total = total + t.relu()
        return total

    check(f, [torch.randn(2) for _ in range(3)], graphs=1)


def test_for_over_dict_items_keys_values():
    def f(x, weights):
        out = x
        for name, w in weights.items():
            out = out + w * len(name)
        for name in weights:
            out = out - len(name)
        for w in weights.values():
            out = out * w
        return out

    check(f, torch.randn(3), {"a": 0.5, "bb": 2.0}, graphs=1)


def test_for_enumerate_with_start():
    def f(xs):
        out = 0
        for i, t in enumerate(xs, start=1):
            out = out + t * i
        return out

    check(f, [torch.randn(2) for _ in range(3)], graphs=1)


def test_for_zip_three_iterables():
    def f(xs, ws, names):
        out = []
        for x, w, name in zip(xs, ws, names):
            out.append((name, x * w))
        return out

    check(f, [torch.randn(2), torch.randn(2)], [2.0, 3.0, 4.0], ("a", "b"), graphs=1)


def test_nested_for_loops():
    def f(x):
        out = x
        for i in range(3):
            for j in range(i):
                out = out + i * j
        return out

    check(f, torch.randn(2), graphs=1)


def test_for_with_break_continue_else():
    def f(x, limit):
        out = x
        for i in range(10):
            if i % 2 == 0:
                continue
            if i > limit:
                break
            out = out + i
        else:
            out = out * 100
        return out

    check(f, torch.randn(2), 5, graphs=1)


def test_for_else_without_break():
    def f(x):
        for i in range(3):
            x = x + i
        else:
            x = x * -1
        return x

    check(f, torch.randn(2), graphs=1)


def test_loop_over_tensor_shape():
    def f(x):
        out = torch.zeros(x.shape[1])
        for row in range(x.shape[0]):
            out = out + x[row] * row
        return out

    check(f, torch.randn(3, 4), graphs=1)


# -- while loops -----------------------------------------------------------------------------

def test_while_counter():
    def f(x, n):
        i = 0
        while i < n:
            x = x * 2 - 1
            i += 1
        return x, i

    check(f, torch.randn(2), 4, graphs=1)


def test_while_true_with_break():
    def f(x):
        steps = 0
        while True:
            steps += 1
            x = x + steps
            if steps * steps > 10:
                break
        return x

    check(f, torch.randn(2), graphs=1)


def test_while_popping_a_list():
    def f(xs):
        xs = list(xs)
        out = xs.pop()
        while xs:
            out = out * xs.pop()
        return out

    check(f, [torch.randn(3) for _ in range(4)], graphs=1)


# -- if / else and boolean logic ---------------------------------------------------------------

def branchy(x, mode):
    if mode == "double":
        return x * 2
    elif mode == "square":
        return x * x
    else:
        return -x


@pytest.mark.parametrize("mode", ["double", "square", "other"])
def test_if_elif_else_on_string_argument(mode):
    check(branchy, torch.randn(3), mode, graphs=1)


@pytest.mark.parametrize("flag", [True, False])
def test_conditional_expression_on_bool(flag):
    check(lambda x, flag: x.sin() if flag else x.cos(), torch.randn(3), flag, graphs=1)


@pytest.mark.parametrize("bias", [None, 1.5])
def test_is_none_and_is_not_none(bias):
    def f(x, bias):
        if bias is None:
            return x * 3
        if bias is not None and bias > 1:
            return x + bias
        return x

    check(f, torch.randn(3), bias, graphs=1)


def test_branch_on_static_tensor_metadata():
    def f(x):
        if x.dim() == 2 and x.shape[-1] > 3:
            x = x.mean(dim=-1)
        if x.dtype == torch.float32:
            x = x.double()
        if x.requires_grad:
            x = x * 0
        return x

    check(f, torch.randn(2, 5), graphs=1)


def test_in_and_not_in():
    def f(x, key, keys):
        out = x
        if key in keys:
            out = out + 1
        if "zzz" not in keys:
            out = out * 2
        if 3 in (1, 2, 3):
            out = out - 1
        if key in {"a": 1}:
            out = out / 2
        return out

    check(f, torch.randn(3), "a", ["a", "b"], graphs=1)


def test_not_and_or_short_circuit_values():
    def f(x, a, b):
        first = a or b          # returns a value, not a bool
        second = a and b
        third = not a
        out = x * first if first else x
        return out, second, third, (b or "default")

    check(f, torch.randn(2), 0, 3, graphs=1)


class Sentinel:
    """A class object: deep copies keep it identical, so `is` is meaningful across runs."""


@pytest.mark.parametrize("marker", [Sentinel, None, 0])
def test_is_identity_on_objects(marker):
    def f(x, marker):
        same = marker is Sentinel
        not_none = marker is not None
        return x * (same + 2 * not_none)

    check(f, torch.randn(2), marker, graphs=1)


def test_walrus_in_condition_and_comprehension():
    def f(x, n):
        if (half := n // 2) > 1:
            x = x * half
        return [y for i in range(n) if (y := x + i).shape[0] > 0][-1], half

    check(f, torch.randn(2), 5, graphs=1)


# -- comprehensions and generator expressions --------------------------------------------------

COMPREHENSIONS = {
    "list": lambda x: torch.stack([x * i for i in range(3)]),
    "list_with_if": lambda x: [x + i for i in range(6) if i % 2],
    "nested": lambda x: [[x * i + j for j in range(2)] for i in range(2)],
    "dict": lambda x: {f"k{i}": x ** i for i in range(3)},
    "set": lambda x: (x * len({i % 3 for i in range(10)})),
    "genexpr_sum": lambda x: sum(x * i for i in range(1, 4)),
    "genexpr_tuple": lambda x: tuple(x[i] * 2 for i in range(x.shape[0])),
    "genexpr_any_all": lambda x: x * any(i > 2 for i in range(4)) + all(i < 2 for i in range(4)),
}


@pytest.mark.parametrize("name", COMPREHENSIONS)
def test_comprehension(name):
    check(COMPREHENSIONS[name], torch.randn(3), graphs=1)


def test_comprehension_over_input_list_with_closure():
    def f(xs, scale):
        return [t * scale for t in xs if t.shape[0] > 1]

    check(f, [torch.randn(2), torch.randn(1), torch.randn(3)], 2.0, graphs=1)


def test_comprehension_variable_that_is_a_cell_elsewhere_in_the_function():
    """`i` is a cell of f (the second comprehension's lambdas close over it) and a plain local of
    the first comprehension. Inlined comprehensions (3.12+) save and restore the cell through
    the slot (LOAD_FAST_AND_CLEAR / STORE_FAST), and 3.13 loads cells with LOAD_FAST."""
    def f(x):
        fs = [lambda v, i=i: v * (i + 1) for i in range(3)]
        t = fs[2](x) - fs[0](x)
        late = [lambda v: v * i for i in range(2)]
        return late[0](t) + late[1](t), [g(t) for g in fs]

    check(f, torch.randn(3), graphs=1)


def test_closure_over_an_argument_and_over_a_comprehension_variable():
    def f(x, k):
        scale = lambda v: v * k                  # noqa: E731
        adds = [lambda v, j=j: v + j + k for j in range(2)]
        return scale(x) + sum(a(x) for a in adds)

    check(f, torch.randn(3), 2.0, graphs=1)


# -- assert and string formatting -----------------------------------------------------------

def test_assert_that_passes():
    def f(x, n):
        assert n > 0, "n must be positive"
        assert x.shape == (2, 3)
        assert isinstance(x, torch.Tensor), f"bad type {type(x)}"
        return x * n

    check(f, torch.randn(2, 3), 2, graphs=1)


def test_fstring_of_constants_and_python_values():
    def f(x, name, scale):
        label = f"{name}:{scale:.2f}|{len(name)!r}|{name!s:>8}"
        return x * scale, label

    check(f, torch.randn(2), "relu", 1.5, graphs=1)


def test_fstring_of_static_tensor_metadata():
    check(lambda x: (x + 1, f"shape={tuple(x.shape)} dtype={x.dtype}"), torch.randn(2, 3), graphs=1)


def test_str_format_and_percent_formatting():
    def f(x, n):
        a = "{}-{:03d}".format("layer", n)
        b = "%s=%d" % ("n", n)
        return x + n, a, b, str(n) + repr("q")

    check(f, torch.randn(2), 7, graphs=1)
