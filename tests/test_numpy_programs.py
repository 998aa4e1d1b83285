"""NumPy code on tensors (`t.numpy()`, ndarray attributes and methods, np.* functions, np.linalg,
np.fft, ndarray inputs), ported from TorchDynamo's own test programs (test_functions.py,
test_misc.py, test_unspec.py, test_interop.py; issue 12).  TorchDynamo traces such code through
`torch._numpy`, so it stays in the graph; results that are ndarrays come back as ndarrays.  A NumPy scalar result comes back from
TorchDynamo as a 0-d ndarray, so the programs wrap scalar results in np.asarray().

Each program runs eagerly and captured (see dyn_programs.py); the graph counts are TorchDynamo's.
"""
import numpy as np
import pytest
import torch

from dyn_programs import open_issue, standard
from harness import Graphs, check

# -- t.numpy() and back ----------------------------------------------------------------------------


def test_from_numpy_roundtrip_branch_on_size():
    def fn(x):
        a = x.numpy()
        b = torch.from_numpy(a)
        if b.size(0) == 1:
            return torch.tensor(True)
        return b * 2

    standard(fn, 1)


def test_numpy_size_attribute():
    def fn(x):
        a = x.numpy()
        return x * a.size

    standard(fn, 1)


def test_numpy_attributes():
    def fn(x):
        a = x.numpy()
        return (a.itemsize, a.strides, a.shape, a.ndim, a.size,
                torch.from_numpy(a.T), torch.from_numpy(a.real), torch.from_numpy(a.imag))

    standard(fn, 1)


def test_numpy_mean_sum_asarray():
    def fn(x):
        x_mean = np.mean(x.numpy(), 1)
        x_sum = np.sum(x_mean)
        return torch.from_numpy(np.asarray(x_sum))

    standard(fn, 1)


def test_return_ndarray():
    def fn(x):
        a = x.numpy()
        return a.T

    standard(fn, 1)


def test_return_several_ndarrays():
    def fn(x):
        a = x.numpy()
        return a.T, a.imag, a.real

    standard(fn, 1)


def test_ndarray_copy():
    def fn(x):
        a = x.numpy()
        return a.copy()

    standard(fn, 1)


def test_ndarray_transpose():
    def fn(x):
        a = x.numpy()
        return a.transpose(0, 1)

    standard(fn, 1)


def test_ndarray_reshape():
    def fn(x):
        a = x.numpy()
        return a.reshape([1, a.size])

    standard(fn, 1)


def test_ndarray_methods_returning_scalar_arrays():
    def fn(x):
        a = x.numpy()
        return a.max(axis=0), a.all(axis=0)

    standard(fn, 1)


def test_ndarray_arithmetic():
    def fn(x):
        a = x.numpy()
        return a + a, a - a, a * 2.5, a @ a.T

    standard(fn, 1)


def test_ndarray_comparison_and_where():
    def fn(x):
        a = x.numpy()
        mask = a > 0
        return np.where(mask, a, 0.0), mask

    standard(fn, 1)


def test_ndarray_reductions_and_cumsum():
    def fn(x):
        a = x.numpy()
        return a.sum(axis=1), np.asarray(a.mean()), a.argmax(axis=0), a.cumsum(axis=1), a.std(axis=0)

    standard(fn, 1)


def test_ndarray_astype_and_clip():
    def fn(x):
        a = x.numpy()
        return a.clip(-0.5, 0.5).astype(np.float64), (a * 5).astype(np.int64)

    standard(fn, 1)


def test_ndarray_indexing_and_slicing():
    def fn(x):
        a = x.numpy()
        return a[0], a[:, 1:3], a[::2, -1], a[None, 2]

    standard(fn, 1)


def test_ndarray_inplace_ops():
    def fn(x):
        a = x.numpy().copy()
        a += 1
        a *= 2
        return torch.from_numpy(a)

    standard(fn, 1)


def test_numpy_functions_on_array():
    def fn(x):
        a = x.numpy()
        return np.exp(a), np.maximum(a, 0), np.asarray(np.abs(a).sum()), np.clip(a, -1, 1)

    standard(fn, 1)


def test_numpy_concatenate_stack():
    def fn(x, y):
        a, b = x.numpy(), y.numpy()
        return np.concatenate([a, b], axis=0), np.stack([a, b]), np.vstack((a, b)).shape

    standard(fn, 2)


def test_numpy_meshgrid():
    def fn(x, y):
        r1, r2 = np.meshgrid(x.numpy(), y.numpy())
        return torch.from_numpy(r1), torch.from_numpy(r2)

    standard(fn, 2, shape=(4,))


def test_numpy_linalg_norm():
    def fn(x):
        return np.linalg.norm(x.numpy(), axis=0)

    standard(fn, 1)


def test_numpy_linalg_inv_and_det():
    def fn(x):
        a = x.numpy() + 10 * np.eye(10, dtype=np.float32)
        return np.linalg.inv(a), np.asarray(np.linalg.det(a))

    standard(fn, 1)


def test_numpy_fft_shift():
    def fn(x):
        return np.fft.fftshift(x.numpy())

    standard(fn, 1)


def test_numpy_fft_rfft_abs():
    def fn(x):
        return np.abs(np.fft.rfft(x.numpy(), axis=-1)).astype(np.float32)   # numpy computes in float64

    standard(fn, 1)


def test_numpy_dtype_argument_with_tensor():
    def fn(x):
        return np.ones_like(x, dtype=np.float64)

    standard(fn, 1)


def test_numpy_dtype_object_in_function():
    def fn(x):
        dt = np.dtype("float")
        return np.full_like(x, 2.4, dtype=dt)

    standard(fn, 1)


def test_numpy_iinfo_finfo_constants():
    def fn(a):
        return a + np.iinfo(np.int16).max, a + np.finfo(np.float32).min

    standard(fn, 1)


def test_numpy_pi_and_sqrt_constants():
    def fn(x):
        return x * np.pi + np.sqrt(2.0) + np.e

    standard(fn, 1)


def test_numpy_array_from_shape():
    def fn(x):
        shape = np.array(x.shape)
        return x * int(shape.prod()), shape

    standard(fn, 1, graphs=Graphs(dl=1, torch=2, why="TorchDynamo breaks at int() of an ndarray; "
                                                    "dynamo_lite folds np.array(x.shape) (static shape)"))


def test_numpy_tensor_interop_in_graph():
    def fn(x, y):
        a = x.numpy()
        b = y.numpy()
        c = np.ones_like(a)
        return torch.from_numpy(np.add(a, c)) + torch.from_numpy(b)

    standard(fn, 2)


def test_tensor_sum_divided_by_len_of_array():
    def fn(x):
        return np.asarray(x.sum() / len(x))

    check(fn, np.random.RandomState(0).randn(2, 3), graphs=1)


# -- ndarray inputs --------------------------------------------------------------------------------

def test_ndarray_input_arithmetic():
    def fn(a, b):
        return a * 2 + b, np.asarray((a - b).sum())

    rs = np.random.RandomState(0)
    check(fn, rs.randn(4, 3), rs.randn(4, 3), graphs=1)


def test_ndarray_input_comparison():
    def fn(y):
        return y >= 3

    check(fn, np.arange(10), graphs=1)


def test_ndarray_input_np_minimum():
    def fn(y):
        return np.minimum(y, 3), np.minimum(y, y - 1)

    check(fn, np.arange(10), graphs=1)


def test_ndarray_input_astype_chain():
    def fn(x):
        return (x * 5).astype(bool).astype(float).astype(int) + 8

    check(fn, np.random.RandomState(0).rand(5), graphs=1)


def test_ndarray_input_where_with_scalar():
    def fn(x, a):
        return np.where(x < 0.5, a, x)

    check(fn, np.random.RandomState(0).randn(8), 3, graphs=1)


def test_ndarray_input_isinstance():
    def fn(x, m):
        if isinstance(m, np.ndarray):
            return x + 1
        return x - 1

    check(fn, torch.tensor([2.3]), np.array([1, 2, 3]), graphs=1)


def test_numpy_int_scalar_input():
    def fn(x, a, b):
        return x + (a % b)

    check(fn, torch.randn(10), 4096, np.int64(8), graphs=1)


def test_numpy_arange_with_dtype():
    def fn(x):
        return x + torch.from_numpy(np.arange(10, dtype=np.float32))

    standard(fn, 1)


def test_numpy_linspace_and_outer():
    def fn(x):
        grid = np.outer(np.linspace(0.0, 1.0, 10), np.ones(10))
        return x * torch.from_numpy(grid).float()

    standard(fn, 1)
