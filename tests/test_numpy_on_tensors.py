"""numpy code on tensors, traced into the graph as tensor ops (torch._numpy), as TorchDynamo does.

`x.numpy()`, `np.asarray(x)`, arrays passed in, and everything numpy computes from them are
*traced arrays*: graph tensors with numpy semantics. Each test compares eager and captured runs
(results compared as numpy values: type, dtype, shape and contents; inputs after the call) and
the number of graphs; what numpy turns into Python data (`.item()`, `if a.any():`, `.tolist()`)
is a graph break of the same kind as for tensors.
"""
import numpy as np
import pytest
import torch

import dynamo_lite as dl
from harness import REFERENCE, CountingBackend, capture, check, graph_break, reset, skip_in_reference

SCALARS = "TorchDynamo returns a 0-d ndarray where numpy returns a numpy scalar"


def break_kind(fn, *args) -> str:
    """The id of the break that stops `fn` from being one graph (dynamo_lite only)."""
    reset()
    with pytest.raises(dl.GraphBreakError) as info:
        dl.capture(fn, fullgraph=True, backend=CountingBackend())(*args)
    return info.value.kind.id


def one_graph(fn, *args, **tolerances):
    """`check` with one graph, and on dynamo_lite no break at all (a break before any op would
    leave one graph too)."""
    result = check(fn, *args, graphs=1, **tolerances)
    if not REFERENCE:
        reset()
        dl.capture(fn, fullgraph=True, backend=CountingBackend())(*args)
    return result


def x23():
    return torch.randn(2, 3)


# ---- 1. traced arrays: x.numpy(), numpy functions, ndarray methods -----------------------------------

def test_tensor_numpy_is_a_traced_array():
    def fn(x):
        a = x.numpy()
        return torch.from_numpy(a * 2 + 1)

    result = one_graph(fn, x23())
    assert result.backend.count == 1


@pytest.mark.parametrize("make", [np.asarray, np.array, lambda t: t.numpy(force=True)],
                         ids=["asarray", "array", "numpy_force"])
def test_array_from_a_tensor(make):
    def fn(x):
        return torch.from_numpy(make(x) * 3.0)

    one_graph(fn, x23())


NUMPY_FUNCTIONS = {
    "sum": lambda a, b: np.sum(a, axis=1),
    "mean": lambda a, b: np.mean(a, axis=0, keepdims=True),
    "where": lambda a, b: np.where(a > 0, a, b),
    "concatenate": lambda a, b: np.concatenate([a, b], axis=0),
    "stack": lambda a, b: np.stack((a, b), axis=-1),
    "exp": lambda a, b: np.exp(a),
    "clip": lambda a, b: np.clip(a, -0.5, 0.5),
    "argmax": lambda a, b: np.argmax(a, axis=1),
    "maximum": lambda a, b: np.maximum(a, b),
    "matmul": lambda a, b: a @ b.T,
    "dot": lambda a, b: np.dot(a, b.T),
    "cumsum": lambda a, b: np.cumsum(a, axis=1),
    "abs_sqrt": lambda a, b: np.sqrt(np.abs(a)),
    "transpose": lambda a, b: np.transpose(a),
    "expand_dims": lambda a, b: np.expand_dims(a, 0),
    "ufunc_out": lambda a, b: np.add(a, b, out=a),
    "zeros_like": lambda a, b: np.zeros_like(a) + b,
    "isclose": lambda a, b: np.isclose(a, b),
    "tanh_float64": lambda a, b: np.tanh(a.astype(np.float64)),
}


@pytest.mark.parametrize("name", NUMPY_FUNCTIONS)
def test_numpy_function_on_traced_arrays(name):
    f = NUMPY_FUNCTIONS[name]

    def fn(x, y):
        return torch.from_numpy(f(x.numpy(), y.numpy()))

    one_graph(fn, x23(), x23())


ARRAY_METHODS = {
    "sum_axis": lambda a: a.sum(axis=0),
    "reshape_T": lambda a: a.reshape(3, 2).T,
    "astype_int": lambda a: (a * 10).astype(np.int32),
    "astype_str": lambda a: a.astype("float64"),
    "index": lambda a: a[1],
    "slice": lambda a: a[:, 1:],
    "fancy": lambda a: a[np.array([1, 0])],
    "mask": lambda a: a[a > 0] if False else a[:, [2, 0]],
    "newaxis": lambda a: a[None, :, 0],
    "neg_pow": lambda a: -(a ** 2),
    "scalar_ops": lambda a: 2.5 * a - 1 / (a * a + 1),
    "int_floordiv": lambda a: (a * 10).astype(np.int64) // 3 % 4,
    "compare": lambda a: (a > 0) & (a < 1),
    "flatten": lambda a: a.flatten(),
    "ravel": lambda a: a.ravel(),
    "copy": lambda a: a.copy(),
    "max_min": lambda a: a.max(axis=1) - a.min(axis=1),
    "squeeze": lambda a: a[None].squeeze(0),
    "clip_method": lambda a: a.clip(-0.1, 0.1),
    "mT_real": lambda a: a.T.real,
}


@pytest.mark.parametrize("name", ARRAY_METHODS)
def test_ndarray_method_or_operator(name):
    f = ARRAY_METHODS[name]

    def fn(x):
        return torch.from_numpy(np.ascontiguousarray(f(x.numpy())))

    one_graph(fn, x23())


def test_metadata_attributes_are_constants():
    def fn(x):
        a = x.numpy().reshape(3, 2)
        return x * a.ndim + a.shape[0] + a.size, a.dtype == np.float32, a.strides, len(a), a.itemsize

    one_graph(fn, x23())


def test_setitem_and_augmented_assignment():
    def fn(x):
        a = x.numpy().copy()
        a[0] = 1.0
        a[:, 1] += 5
        a *= 2
        return torch.from_numpy(a)

    one_graph(fn, x23())


def test_writing_through_numpy_changes_the_tensor():
    def fn(x):
        a = x.numpy()            # shares x's memory
        a[0, 0] = 7.0
        a += 1
        return x.sum()

    one_graph(fn, x23())


def test_arithmetic_with_a_tensor():
    def fn(x, y):
        a = x.numpy()
        return y + a, y * a.sum(), y == a

    one_graph(fn, x23(), x23())


def test_tensor_operators_with_arrays():
    def fn(x, y):
        a = x.numpy()
        z = y.clone()
        z += a                                  # Tensor.__iadd__ takes the array as a tensor
        return y == a, a == y, a.sum() * y, z, y + np.arange(3.0), y * np.float32(2) + np.float64(0.5)

    one_graph(fn, torch.randn(3), torch.randn(3))


@skip_in_reference("TorchDynamo's flatten() returns a view where numpy copies")
def test_views_and_copies_as_in_numpy():
    def fn(x):
        a = x.numpy().copy()
        flat = a.flatten()         # a copy in numpy (a view in torch._numpy): not written through
        flat[0] = 100.0
        rav = a.ravel()            # a view
        rav[1] = -100.0
        row = a[1]                 # a view
        a.fill(3.0)
        return a, flat, rav, row

    one_graph(fn, x23())


@skip_in_reference("checks dynamo_lite's break kind")
def test_view_that_torch_numpy_copies_is_refused():
    def fn(x):
        return np.ascontiguousarray(x.numpy()[::-1])   # a view in numpy, a copy (flip) in torch._numpy

    assert break_kind(fn, torch.randn(3)) == "DL009"
    check(fn, torch.randn(3), graphs=None)


@skip_in_reference(SCALARS)
def test_linalg():
    def fn(x):
        a = x.numpy() + 4 * np.eye(3, dtype=np.float32)
        inv = np.linalg.inv(a)
        sol = np.linalg.solve(a, np.ones(3, dtype=np.float32))
        return torch.from_numpy(inv @ a), torch.from_numpy(sol), np.linalg.norm(a), np.linalg.det(a)

    one_graph(fn, torch.randn(3, 3))


def test_linalg_returns_arrays():
    def fn(x):
        a = x.numpy()
        return torch.from_numpy(np.linalg.norm(a, axis=1)), torch.from_numpy(np.linalg.inv(a @ a.T + np.eye(3)))

    one_graph(fn, torch.randn(3, 3))


@skip_in_reference("TorchDynamo raises torch._numpy's LinAlgError, not numpy's")
def test_singular_matrix_raises_numpys_error():
    def fn(x):
        try:
            inv = np.linalg.inv(x.numpy())
        except np.linalg.LinAlgError:
            inv = np.zeros((2, 2), dtype=np.float32)
        return torch.from_numpy(inv) + x

    def outside(x):
        return torch.from_numpy(np.linalg.inv(x.numpy() * 2))

    check(fn, torch.zeros(2, 2), graphs=None)
    one_graph(fn, torch.eye(2))
    reset()
    with pytest.raises(np.linalg.LinAlgError):
        capture(outside, backend=CountingBackend())(torch.zeros(2, 2))


@skip_in_reference("TorchDynamo computes np.fft of float32 in float64")
def test_fft():
    def fn(x):
        a = x.numpy()
        f = np.fft.fft(a)
        r = np.fft.rfft(a, axis=-1)
        back = np.fft.ifft(f).real
        return torch.from_numpy(np.abs(f)), torch.from_numpy(r.imag), torch.from_numpy(back)

    one_graph(fn, torch.randn(4, 8), atol=1e-5, rtol=1e-5)


def test_from_numpy_shares_memory_with_the_traced_array():
    def fn(x):
        a = x.numpy() * 2
        t = torch.from_numpy(a)
        a[0] = 100.0               # t sees it, as in eager
        return t + torch.as_tensor(a) + torch.tensor(a)

    one_graph(fn, torch.randn(3))


# ---- 2. outputs -------------------------------------------------------------------------------------

@skip_in_reference(SCALARS)
def test_returned_arrays_keep_numpy_dtypes():
    def fn(x, n):
        a = x.numpy()
        return a * 2, np.mean(n.numpy()), (a > 0), a.astype(float), np.arange(3) + n.numpy()

    one_graph(fn, torch.randn(3), torch.arange(3))


@skip_in_reference(SCALARS)
def test_numpy_scalars_are_returned_as_numpy_scalars():
    def fn(x):
        a = x.numpy()
        return np.sum(a), a[0], a.max() > 0, np.float64(a.mean())

    result = one_graph(fn, torch.randn(3))
    assert [type(v) for v in result.captured.value] == [np.float32, np.float32, np.bool_, np.float64]


@skip_in_reference("TorchDynamo returns one array twice as two arrays")
def test_returned_array_identity_and_memory():
    def fn(x):
        a = x.numpy() * 2
        return a, a, a.copy(), np.asarray(a), x.numpy()

    reset()
    compiled = capture(fn, backend=CountingBackend())
    x = torch.randn(3)
    a, b, c, d, e = compiled(x)
    assert a is b and d is a                          # one object, as in eager
    assert not np.shares_memory(a, c)
    assert np.shares_memory(e, x.numpy())             # x.numpy() shares x's memory, as in eager
    again = compiled(x)[0]
    assert not np.shares_memory(again, a)             # a fresh array on every call


def test_traced_array_live_at_a_break():
    def fn(x):
        a = x.numpy() * 2
        b = a.sum(axis=0)
        print("between")
        return torch.from_numpy(a + b)

    check(fn, x23(), graphs=graph_break(2))


@skip_in_reference(SCALARS)
def test_traced_arrays_printed_and_stored():
    class Holder:
        pass

    def fn(x, items, holder):
        a = x.numpy() * 2
        s = a.sum()
        items.append(a)
        holder.last = s
        print("sum", s, "array", a)
        return torch.from_numpy(a + s)

    check(fn, torch.tensor([1.0, 2.0]), [], Holder(), graphs=graph_break(2))


# ---- 3. arrays read from the frame ----------------------------------------------------------------

def test_array_argument_with_traced_arrays():
    def fn(x, arr):
        return torch.from_numpy(x.numpy() * arr + np.sum(arr))

    one_graph(fn, torch.randn(3), np.array([1.0, 2.0, 3.0], dtype=np.float32))


def test_array_argument_written_by_numpy_code():
    def fn(arr, x):
        arr[0] = x.numpy().sum()
        arr += 1
        return arr

    one_graph(fn, np.zeros(3, dtype=np.float32), torch.randn(3))


def test_array_argument_is_guarded():
    def fn(x, arr):
        return torch.from_numpy(np.concatenate([x.numpy(), arr]))

    backend = CountingBackend()
    reset()
    compiled = capture(fn, backend=backend)
    x = torch.randn(2, dtype=torch.float64)
    for arr in (np.ones(3), np.arange(3.0), np.ones(4), np.ones(3, dtype=np.float32)):
        torch.testing.assert_close(compiled(x, arr), fn(x, arr))
    assert backend.count == 3                          # a new shape, a new dtype


@skip_in_reference(SCALARS)
def test_numpy_code_on_array_arguments_only():
    def fn(arr):
        rows = [r * 2 for r in arr]
        return arr.sum() / len(arr), arr.size + arr, rows, arr >= 0.5

    one_graph(fn, np.random.rand(3, 2))


GLOBAL_ARRAY = np.arange(4.0)


def test_global_array_in_numpy_code():
    def fn(y):
        return y + GLOBAL_ARRAY * 2

    one_graph(fn, np.ones(4))


@skip_in_reference("TorchDynamo returns a 0-d ndarray for `np.int64 * 2`")
def test_numpy_scalar_arguments_are_constants():
    def fn(x, a, b):
        return x + (a % b), b * 2

    one_graph(fn, torch.randn(3), 4096, np.int64(8))
    reset()
    compiled = capture(fn, backend=CountingBackend())
    x = torch.zeros(2)
    for b in (np.int64(8), np.int64(8), np.int64(5), np.int32(5)):
        torch.testing.assert_close(compiled(x, 7, b)[0], fn(x, 7, b)[0])


OPERATORS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "ge", "eq", "matmul", "and_",
             "iadd", "isub", "imul", "itruediv"]


# Where TorchDynamo's result differs from eager's (the tests then only run on dynamo_lite).
TORCHDYNAMO_DIFFERS = {
    ("matmul", "array", "array"): SCALARS,
    ("and_", "tensor", "array"): "eager's result is numpy's uint8 (through Tensor.__array_wrap__)",
    **{(f"i{op}", "tensor", "array"): "eager's `t += array` makes a new tensor, TorchDynamo writes into t"
       for op in ("add", "sub", "mul", "truediv")},
    ("itruediv", "array", "tensor"): "eager's `array /= t` makes a new tensor, TorchDynamo writes into the array",
}
# Where dynamo_lite refuses on purpose (the graph cannot give eager's result).
REFUSED = {("and_", "tensor", "array")}


@pytest.mark.parametrize("left, right", [("array", "array"), ("array", "tensor"), ("tensor", "array")])
@pytest.mark.parametrize("name", OPERATORS)
def test_operators_between_arrays_and_tensors(name, left, right):
    import operator
    op = getattr(operator, name)
    if REFERENCE and (name, left, right) in TORCHDYNAMO_DIFFERS:
        pytest.skip(TORCHDYNAMO_DIFFERS[name, left, right])

    def fn(a, b):
        return op(a, b)

    def make(kind):
        t = torch.rand(5) if name != "and_" else torch.rand(5) > 0.5
        return t.numpy() if kind == "array" else t

    a, b = make(left), make(right)
    try:
        op(a.copy() if left == "array" else a.clone(), b)
    except (TypeError, RuntimeError):
        pytest.skip("eager raises")
    check(fn, a, b, graphs=0 if (name, left, right) in REFUSED else 1)


# ---- 4. folded arrays meet traced ones --------------------------------------------------------------

def test_folded_array_in_a_traced_operation():
    def fn(x):
        table = np.arange(6.0).reshape(2, 3)
        return torch.from_numpy(table * x.numpy() + table.sum())

    one_graph(fn, x23())


def test_arrays_folded_with_a_constant_on_the_left_are_fresh_on_every_call():
    def fn(x):
        a = np.arange(3)
        return x + 1, 2 * a, 1 < a

    reset()
    compiled = capture(fn, backend=CountingBackend())
    _, doubled, mask = compiled(torch.zeros(1))
    doubled += 100
    mask[:] = False
    _, again, mask_again = compiled(torch.zeros(1))
    assert again.tolist() == [0, 2, 4] and mask_again.tolist() == [False, False, True]


def test_folded_array_filled_with_traced_values():
    def fn(x):
        out = np.zeros((2, 2), dtype=np.float32)
        a = x.numpy()
        out[0] = a[:, 0]
        out[1, 1] = a.sum()
        return torch.from_numpy(out), out

    one_graph(fn, torch.randn(2, 3))


def test_ufunc_writing_into_out():
    def fn(x):
        a = x.numpy()
        out = np.empty_like(a)
        np.multiply(a, 2, out=out)
        table = np.zeros(3, dtype=np.float32)
        np.add(a, 1, out=table)                  # a folded array written by the graph
        return out, table, np.asarray(table) is table

    one_graph(fn, torch.randn(3))


@skip_in_reference("checks dynamo_lite's break kind")
def test_folded_array_with_a_view_is_not_filled_with_traced_values():
    def fn(x):
        out = np.zeros(3, dtype=np.float32)
        view = out[1:]
        out[1] = x.numpy()[0]          # the view would keep the old contents
        return view

    assert break_kind(fn, torch.randn(3)) == "DL013"
    check(fn, torch.randn(3), graphs=None)


# ---- 5. data turned into Python: breaks of the right kind ---------------------------------------------

def _item(x):
    return x + x.numpy().sum().item()


def _branch(x):
    if (x.numpy() > 0).any():
        return x + 1
    return x - 1


def _tolist(x):
    return x + len(x.numpy().tolist())


def _float(x):
    return x * float(np.sum(x.numpy()))


@pytest.mark.parametrize("fn, kind", [(_item, "DL003"), (_branch, "DL002"), (_tolist, "DL003"), (_float, "DL003")],
                         ids=["item", "branch", "tolist", "float"])
def test_data_to_python_breaks(fn, kind):
    check(fn, torch.randn(3), graphs=None)
    if not REFERENCE:
        assert break_kind(fn, torch.randn(3)) == kind


@skip_in_reference("checks dynamo_lite's break kind")
def test_numpy_random_on_traced_arrays_is_refused():
    def fn(x):
        return torch.from_numpy(x.numpy() + np.random.rand(3))

    assert break_kind(fn, torch.randn(3, dtype=torch.float64)) == "DL006"


@skip_in_reference("TorchDynamo runs numpy on tensors that require grad")
def test_numpy_of_a_tensor_that_requires_grad_raises_as_in_eager():
    def fn(x):
        return torch.from_numpy(x.numpy() * 2)

    check(fn, torch.randn(3, requires_grad=True), graphs=None)


@skip_in_reference("checks dynamo_lite's break kind")
def test_unsigned_array_against_a_negative_int_is_refused():
    def fn(x):
        a = x.numpy()
        return a >= -1, a.clip(-1, 2)       # numpy compares exactly; torch._numpy would wrap -1 to 255

    x = torch.tensor([0, 1, 5], dtype=torch.uint8)
    assert break_kind(fn, x) == "DL009"
    check(fn, x, graphs=None)


def test_negative_ints_as_axes_and_indices_of_unsigned_arrays():
    def fn(x):
        a = x.numpy()
        return a.max(axis=-1), a[-1], a.reshape(-1), a + 1

    one_graph(fn, torch.tensor([[0, 1, 5], [2, 3, 4]], dtype=torch.uint8))
