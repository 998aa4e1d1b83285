"""Names: constants, locals, globals (read and write), closures / free variables, attributes."""
import dataclasses
import sys

import torch

from harness import CountingBackend, assert_same, capture, check, reset

SCALE = 3
OFFSET = 0.5
WEIGHTS = {"a": 2.0, "b": -1.0}
GLOBAL_TENSOR = torch.arange(4.0)
LAST_FACTOR = None  # written by test_store_global


def helper_double(x):
    return x * 2


@dataclasses.dataclass
class Config:
    scale: float
    bias: float
    name: str = "cfg"


# -- constants and locals ----------------------------------------------------------------------

def test_constants_of_every_kind():
    def f(x):
        none = None
        return x * 2 + 0.5 - (-3) + True, "label", none, (1, 2.5, "t"), 10 ** 12

    check(f, torch.randn(3), graphs=1)


def test_large_and_negative_float_constants():
    check(lambda x: x * 1e-3 + -2.75e2 + float("inf") * 0.0 * 0, torch.randn(3), graphs=1)


def test_local_reassignment_and_swap():
    def f(x, y):
        a, b = x, y
        a, b = b, a
        a = a * 2
        c = a
        a = a + b
        return a, c

    check(f, torch.randn(3), torch.randn(3), graphs=1)


def test_del_local():
    def f(x):
        tmp = x + 1
        out = tmp * 2
        del tmp
        return out

    check(f, torch.randn(3), graphs=1)


def test_many_locals():
    def f(x):
        a = x + 1
        b = a * 2
        c = b - x
        d = c / 2
        e = d + a
        g = e * b
        h = g - c
        return h + d

    check(f, torch.randn(4), graphs=1)


# -- globals ---------------------------------------------------------------------------------

def test_read_global_numbers_and_dict():
    def f(x):
        return x * SCALE + OFFSET + WEIGHTS["a"] * x + WEIGHTS["b"]

    check(f, torch.randn(3), graphs=1)


def test_read_global_tensor():
    check(lambda x: x + GLOBAL_TENSOR, torch.randn(4), graphs=1)


def test_call_global_function():
    check(lambda x: helper_double(x) + 1, torch.randn(3), graphs=1)


def test_global_module_attribute():
    check(lambda x: x * torch.pi + torch.float32.itemsize, torch.randn(2), graphs=1)


def test_store_global(backend):
    def f(x, factor):
        global LAST_FACTOR
        LAST_FACTOR = factor * 2
        return x * LAST_FACTOR

    compiled = capture(f, backend=backend)
    x = torch.randn(3)
    out = compiled(x, 5)
    assert LAST_FACTOR == 10
    torch.testing.assert_close(out, x * 10)
    assert backend.count == 1


def test_changed_global_is_seen_on_the_next_call(backend, monkeypatch):
    """A global read inside the graph must be guarded: changing it cannot reuse a stale value."""
    def f(x):
        return x * SCALE

    compiled = capture(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 3)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 7)
    torch.testing.assert_close(compiled(x), x * 7)
    assert 1 <= backend.count <= 2


# -- closures / free variables ---------------------------------------------------------------

def test_function_that_is_itself_a_closure():
    scale = 4.0
    bias = torch.ones(3)

    def f(x):
        return x * scale + bias

    check(f, torch.randn(3), graphs=1)


def test_nested_function_defined_and_called_inside():
    def f(x):
        def inner(y):
            return y * 2 + 1

        return inner(x) + inner(x * 3)

    check(f, torch.randn(3), graphs=1)


def test_nested_function_reads_outer_local():
    def f(x, k):
        offset = x.mean()

        def inner(y):
            return y * k - offset

        return inner(x)

    check(f, torch.randn(4), 3, graphs=1)


def test_nested_function_with_default_argument():
    def f(x):
        def inner(y, times=3):
            return y * times

        return inner(x) + inner(x, times=-1)

    check(f, torch.randn(3), graphs=1)


def test_closures_over_loop_variable_late_binding():
    """Every lambda sees the loop variable's final value (late binding)."""
    def f(x):
        fns = []
        for i in range(3):
            fns.append(lambda y: y * i)
        return [fn(x) for fn in fns]

    check(f, torch.randn(2), graphs=1)


def test_closures_over_loop_variable_bound_by_default():
    def f(x):
        fns = [lambda y, i=i: y * i for i in range(1, 4)]
        return sum(fn(x) for fn in fns)

    check(f, torch.randn(2), graphs=1)


def test_nonlocal_counter_in_inner_function():
    def f(x):
        calls = 0

        def bump(y):
            nonlocal calls
            calls += 1
            return y + calls

        y = bump(x)
        y = bump(y)
        return y, calls

    check(f, torch.randn(3), graphs=1)


def test_nonlocal_rebinding_a_tensor():
    def f(x):
        acc = torch.zeros_like(x)

        def add(v):
            nonlocal acc
            acc = acc + v

        add(x)
        add(x * 2)
        return acc

    check(f, torch.randn(3), graphs=1)


def test_closure_factory_returned_function():
    def make_scaler(factor):
        def scale(x):
            return x * factor

        return scale

    check(make_scaler(5), torch.randn(3), graphs=1)


def test_changed_closure_cell_is_seen_on_the_next_call(backend):
    factor = 2

    def f(x):
        return x * factor

    compiled = capture(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2)
    factor = 6  # noqa: F841 -- rebinds the cell f closes over
    torch.testing.assert_close(compiled(x), x * 6)
    assert 1 <= backend.count <= 2


def test_three_level_closure():
    def f(x):
        a = 2

        def mid(y):
            b = 3

            def inner(z):
                return z * a + b

            return inner(y) * a

        return mid(x)

    check(f, torch.randn(3), graphs=1)


# -- attributes ------------------------------------------------------------------------------

def test_attribute_read_on_input_object():
    check(lambda x, cfg: x * cfg.scale + cfg.bias, torch.randn(3), Config(2.0, 0.5), graphs=1)


def test_attribute_write_on_input_object_is_visible_to_caller():
    def f(x, cfg):
        cfg.scale = cfg.scale * 2
        cfg.name = "updated"
        return x * cfg.scale

    check(f, torch.randn(3), Config(1.5, 0.0), graphs=1)


def test_attribute_on_object_created_inside():
    class Box:
        def __init__(self, value):
            self.value = value

    def f(x):
        box = Box(x)
        box.value = box.value + 1
        box.extra = 3
        return box.value * box.extra

    check(f, torch.randn(3), graphs=1)


def test_nested_attribute_chain():
    outer = Config(scale=2.0, bias=1.0)
    holder = dataclasses.make_dataclass("Holder", ["cfg"])(outer)

    def f(x):
        return x * holder.cfg.scale + holder.cfg.bias

    check(f, torch.randn(3), graphs=1)


def test_class_attribute_read():
    class Consts:
        ALPHA = 0.25
        names = ("a", "b")

    check(lambda x: x * Consts.ALPHA + len(Consts.names), torch.randn(3), graphs=1)



class _Counted:
    made = 0

    def __init__(self):
        type(self).made += 1


def test_class_attribute_read_through_type_is_guarded_not_baked_in():
    """`type(self).made` read while tracing must be re-read on later calls (it changes)."""
    def fn(x):
        obj = _Counted()
        return x + type(obj).made
    reset()
    compiled = capture(fn, backend=CountingBackend())
    x = torch.zeros(2)
    for _ in range(3):
        expected_made = _Counted.made + 1
        assert_same(x + expected_made, compiled(x))
        assert _Counted.made == expected_made
