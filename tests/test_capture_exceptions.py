"""Exceptions raised and handled inside captured code: try/except/finally, getattr defaults,
hasattr, Mapping.get-style KeyError handlers, `raise` of builtin exceptions, re-raise.

The tracer hands an exception the traced code raises (at a point the guards make repeatable) to
the traced code's own handler, so these stay one graph; the guards must still notice when the
exception would no longer be raised (an attribute appears, a key is added).
"""
import collections.abc

import pytest
import torch

from harness import CountingBackend, capture, check, check_state_change, graph_break


class Config:
    def __init__(self):
        self.hidden = 4


class AliasingConfig:
    """transformers' PreTrainedConfig pattern: attribute aliases through __getattribute__."""
    attribute_map = {"num_heads": "n_head"}

    def __init__(self):
        self.n_head = 2

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Table(collections.abc.Mapping):
    def __init__(self, data):
        self.data = data

    def __getitem__(self, key):
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


def lookup(d, key, default):
    try:
        return d[key]
    except KeyError:
        return default


def test_except_keyerror_in_inlined_helper():
    def f(x, d):
        return x * lookup(d, "a", 1.0) + lookup(d, "missing", 2.0)
    check(f, torch.randn(3), {"a": 3.0}, graphs=1)


def test_mapping_get_runs_its_keyerror_handler():
    def f(x, table):
        return x * table.get("scale", 0.5) + table.get("shift", 0.0)
    check(f, torch.randn(3), Table({"shift": 1.0}), graphs=1)


def test_raise_and_catch_in_the_captured_frame():
    def f(x):
        try:
            y = 2.0
            raise ValueError("no")
        except (TypeError, ValueError):
            y = 3.0
        finally:
            y += 1
        return x * y
    check(f, torch.randn(3), graphs=1)


def test_except_as_name_and_bare_raise_reraised_to_an_outer_handler():
    def inner(k):
        try:
            return {"a": 1}[k]
        except KeyError as e:
            if e.args[0] == "b":
                raise
            return 0

    def f(x):
        try:
            inner("b")
            got = 1.0
        except KeyError:
            got = 2.0
        return x * (got + inner("c"))
    check(f, torch.randn(2), graphs=1)


def test_finally_runs_when_the_exception_propagates():
    def helper(log):
        try:
            raise IndexError("x")
        finally:
            log.append("finally")

    def f(x, log):
        try:
            helper(log)
        except IndexError:
            log.append("caught")
        return x + len(log)
    check(f, torch.randn(2), [], graphs=1)


def test_uncaught_exception_reaches_the_caller_like_eager():
    def f(x, d):
        y = x + 1
        return y * lookup(d, "a", 1.0) + d["missing"]
    result = check(f, torch.randn(2), {"a": 1.0}, graphs=None)
    assert type(result.eager.exc) is KeyError and type(result.captured.exc) is KeyError


@pytest.mark.parametrize("product", ["linear", "matmul", "addmv"])
def test_a_matrix_product_of_mixed_dtypes_raises_as_eager_even_unused(product):
    """Fake kernels of matrix products take operands of different dtypes that the real kernels
    refuse: the op breaks the graph and eager raises its own error there, so a backend that drops
    the unused result (the triton backend) does not return a value instead (fuzzed programs)."""
    lin = torch.nn.Linear(3, 3)

    def f(x, y):
        if product == "linear":
            unused = lin(x.double())
        elif product == "matmul":
            unused = x.double() @ y
        else:
            unused = torch.addmv(x[0], y, x[1].double())
        return x * 2
    result = check(f, torch.randn(2, 3), torch.randn(3, 3), graphs=None)
    assert type(result.eager.exc) is RuntimeError and type(result.captured.exc) is RuntimeError
    assert str(result.captured.exc) == str(result.eager.exc)


def test_an_op_eager_refuses_for_an_integer_dtype_breaks_there_and_int_ops_eager_takes_do_not():
    """A fake kernel taking a dtype eager's kernel refuses (`softmax` of a Long tensor) is asked
    on one-element stand-ins: the op is a user-exception break and eager raises there. Integer
    ops eager runs (position ids, masks, cumsum of a mask) stay in the graph."""
    def refused(x, ids):
        y = x * 2
        return y + torch.softmax(ids, -1)

    def taken(x, mask):
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        keep = (pos < 3) & mask
        return x * keep + pos.max()
    result = check(refused, torch.randn(2, 3), torch.arange(6).reshape(2, 3), graphs=None)
    assert type(result.eager.exc) is NotImplementedError and str(result.captured.exc) == str(result.eager.exc)
    check(taken, torch.randn(2, 5), torch.tensor([[1, 1, 0, 1, 1], [0, 1, 1, 1, 0]]).bool(), graphs=1)


def test_getattr_default_and_hasattr_on_a_plain_object():
    def f(x, cfg):
        return x * getattr(cfg, "scale", 1.0) + (1 if hasattr(cfg, "bias") else 0) + cfg.hidden
    check(f, torch.randn(3), Config(), graphs=1)


def test_getattr_default_through_custom_getattribute():
    def f(x, cfg):
        return x * cfg.num_heads + getattr(cfg, "dropout", 0.25)
    check(f, torch.randn(3), AliasingConfig(), graphs=1)


@pytest.mark.parametrize("make", [Config, AliasingConfig], ids=["plain", "custom_getattribute"])
def test_attribute_that_appears_later_is_seen(make):
    cfg = make()

    def f(x):
        return x * getattr(cfg, "scale", 1.0)

    def change():
        cfg.scale = 3.0
    check_state_change(f, (torch.ones(2),), change)


def test_module_attribute_that_appears_later_is_seen():
    class M(torch.nn.Module):
        def forward(self, x):
            return x * getattr(self, "scale", 1.0) + (2 if hasattr(self, "bias_term") else 0)
    m = M()

    def change():
        m.scale = 3.0
        m.bias_term = True
    check_state_change(m, (torch.ones(2),), change)


def test_key_added_later_is_seen():
    d = {"a": 1.0}

    def f(x):
        return x * lookup(d, "b", 5.0)

    def change():
        d["b"] = 7.0
    check_state_change(f, (torch.ones(2),), change)


def test_a_builtin_held_in_a_local_is_guarded():
    # one code object, three defaults: the raised type must follow the default each time
    for exc in (KeyError, IndexError, ValueError):
        def f(x, exc=exc):
            try:
                raise exc("stop")
            except (KeyError, IndexError):
                return x + 1
        result = check(f, torch.ones(2), graphs=None if exc is ValueError else 1)
        assert (type(result.captured.exc) is ValueError) == (exc is ValueError)


def test_tensor_op_inside_try_with_a_caught_exception():
    def f(x, d):
        try:
            y = x * 2                      # a run-time error here must reach the handler
            z = d["missing"]
        except KeyError:
            z = 1.0
        return y + z
    check(f, torch.randn(3), {}, graphs=1)


def _gather_or_zeros(x, idx, log):
    log.append("enter")
    try:
        out = x.index_select(0, idx) * 2           # out-of-range indexes fail only at run time
    except IndexError:
        log.append("caught")
        out = torch.zeros(idx.numel(), x.size(1))
    finally:
        log.append("finally")
    return out + 1


def test_run_time_error_in_a_try_block_reaches_the_handler():
    backend = CountingBackend()
    captured = capture(_gather_or_zeros, backend=backend)
    x = torch.randn(4, 3)
    for idx in (torch.tensor([0, 2, 1]), torch.tensor([0, 9, 1]), torch.tensor([3, 3, 0])):
        eager_log, captured_log = [], []
        torch.testing.assert_close(captured(x, idx, captured_log), _gather_or_zeros(x, idx, eager_log))
        assert captured_log == eager_log
    assert backend.count == 1, "the failing call reran eagerly and kept the graph"


def test_in_place_op_inside_a_try_block_runs_the_frame_eagerly():
    def f(x, idx):
        try:
            x.index_add_(0, idx, torch.ones(idx.numel(), x.size(1)))
        except (IndexError, RuntimeError):
            return x * 0
        return x
    result = check(f, torch.zeros(4, 3), torch.tensor([0, 1]), graphs=0)
    bad = check(f, torch.zeros(4, 3), torch.tensor([0, 7]), graphs=0)
    assert bad.eager.exc is None and result.eager.exc is None


def test_is_compiling_is_true_while_capturing():
    # libraries (transformers, torchvision) pick compile-friendly paths on this, as under TorchDynamo
    seen = []

    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        seen.append("eager")
        return x + 1
    result = check(f, torch.randn(2), graphs=1)
    assert seen == ["eager", "eager"], "the eager runs take the eager path, the captured runs the compiling one"
    assert not torch.compiler.is_compiling()
    assert result.backend.count == 1


def _layer(x, mask):
    return x * mask[:, None]               # a None mask: TypeError


def test_code_whose_compile_path_raises_is_captured_as_eager_code_sees_itself():
    # transformers' T5-style stacks (SwitchTransformers): a default mask is made only when not
    # compiling, then indexed. Told True, the trace raises where eager never does; breaking there
    # would run the compile path's None mask eagerly and raise for real.
    def f(x, mask=None):
        if mask is None and not torch.compiler.is_compiling():
            mask = torch.ones(x.shape[0])
        return _layer(x + 1, mask)
    result = check(f, torch.randn(3, 2), graphs=1)
    assert result.eager.exc is None and result.captured.exc is None


def test_an_exception_the_code_raises_anyway_is_still_raised_after_capturing_again():
    def f(x):
        y = x * 2
        if torch.compiler.is_compiling():
            y = y + 1
        return y[None.real]                 # AttributeError on either path
    result = check(f, torch.randn(3), graphs=None)
    assert isinstance(result.eager.exc, AttributeError) and isinstance(result.captured.exc, AttributeError)


def test_in_place_op_on_an_intermediate_inside_a_try_block_is_captured():
    def f(x, idx):
        try:
            y = x.index_select(0, idx)
            y.mul_(2)                       # writes only the graph's own tensor
        except IndexError:
            return x * 0
        return y
    check(f, torch.randn(4, 3), torch.tensor([0, 1]), graphs=1)
    check(f, torch.randn(4, 3), torch.tensor([0, 9]), graphs=1)
