"""numpy inside captured code: an `ArrayValue` is a numpy array (or numpy scalar) of the traced
program, with one of two backings.

* **Folded** (`array`): a real array made while tracing from constants (`np.arange(5)`,
  `np.power(10000, 0.25)`, `np.sin(table)`): numpy functions whose arguments are all constants
  run while tracing, and changing such an array in place (`table[:, 0::2] = ...`, `a += 1`)
  simply runs too. It exists only in this trace; leaving it (returned, live at a break) rebuilds
  it per call as a copy, so no call sees another's changes.
* **Traced** (`tensor`): the data is a graph tensor: `x.numpy()` (the tensor itself: they share
  memory, as in eager), `np.asarray(x)`, an array read from the frame (a graph input reloaded as
  `torch.from_numpy(arr)`, guarded like a tensor), and the result of any numpy operation with
  such an operand. Operations become graph nodes computing with `torch._numpy`
  (numpy_runtime.NumpyCall), as under TorchDynamo. A traced value also has a `shadow`
  (numpy_shadows): eager numpy runs each operation on the shadows too, and its result decides
  what the traced result is (a numpy scalar or an array, dtype, shape, the operand itself or a
  view of it); where the graph disagrees the operation is not traced. After the graph a traced
  array is the graph tensor's `.numpy()`.

A folded array that a traced operation writes into (`out = np.zeros(3); out[0] = x.numpy().sum()`)
becomes traced from then on (`_lift`). Data turned into Python (`.item()`, `.tolist()`,
`float(a)`) is a tensor-to-python break, a branch on an array's value a data-dependent branch.

This module holds the value and `trace_numpy`, the one way an operation on graph data is traced;
numpy functions, `Tensor.numpy()` and conversions to tensors are in numpy_functions.py.
"""
from __future__ import annotations

import operator

import torch

from ..breaks import (DATA_DEPENDENT_BRANCH, TENSOR_TO_PYTHON, UNKNOWN_CALL, UNSUPPORTED_ATTRIBUTE,
                      UNSUPPORTED_MUTATION, UNSUPPORTED_VALUE, USER_EXCEPTION, Unsupported, user_error)
from ..numpy_runtime import NumpyCall, attribute, method, tnp, to_array, to_scalar
from ..pyops import plain
from .base import Const, MethodValue, Value, fold, is_constant
from .containers import DictValue, SeqValue
from .numpy_shadows import (fresh_copy, np, numpy_dtype, placeholder_tensor, run_eager, same_dtype, shares_memory,
                            storage_key)
from .tensors import TensorValue

_EFFECTFUL_METHODS = ("tofile", "dump", "dumps", "setflags", "resize")
# Methods that turn an array's data into Python objects.
_TO_PYTHON_METHODS = {"item", "tolist", "tobytes", "tostring", "__bool__", "__int__", "__float__", "__index__",
                      "__complex__", "__hash__", "__repr__", "__str__", "__format__", "__reduce__", "__reduce_ex__",
                      "__dlpack__", "__contains__", "__iter__", "__deepcopy__", "__copy__"}
# Attributes eager gives from the metadata alone: answered by the shadow.
_METADATA = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"}


def is_array(value) -> bool:
    return np is not None and isinstance(value, np.ndarray)


def is_numpy_constant(value) -> bool:
    """A numpy scalar of a numeric kind or a numpy dtype: immutable, a constant like a Python number."""
    return np is not None and (isinstance(value, np.generic) and value.dtype.kind in "biufc"
                               or isinstance(value, np.dtype))


class ArrayValue(Value):
    """A numpy array or numpy scalar: folded (`array`, real, made from constants) or traced
    (`tensor`, a graph tensor holding the data, and `shadow`, eager's metadata)."""
    __slots__ = ("array", "tensor", "shadow")

    def __init__(self, array=None, source=None, *, tensor: TensorValue = None, shadow=None):
        super().__init__(source)
        self.array = array
        self.tensor = tensor
        self.shadow = shadow

    @property
    def traced(self) -> bool:
        return self.tensor is not None

    # ---- what it is ---------------------------------------------------------------------------
    def python_type(self):
        return type(self.shadow) if self.traced else type(self.array)

    def as_python(self):
        if self.traced:
            raise Unsupported(TENSOR_TO_PYTHON, "the data of a numpy array computed in the graph")
        return self.array

    def identity(self):
        return id(self) if self.traced else id(self.array)

    def children(self):
        return (self.tensor,) if self.traced else ()

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        elif not self.traced:
            em.traced_array(self.array)
        else:
            em.value(self.tensor)
            em.convert_top(to_array if isinstance(self.shadow, np.ndarray) else to_scalar)

    def graph_arg(self):
        if self.traced:
            raise Unsupported(UNSUPPORTED_VALUE, "a numpy array passed to a torch function")
        return self.array, self.array

    # ---- attributes and methods ----------------------------------------------------------------
    def load_attr(self, frame, name):
        if not self.traced:
            value = fold(getattr, self.array, name)
            return MethodValue(self, name) if callable(value) else as_value(frame, value)
        if name in _METADATA:
            return Const(getattr(self.shadow, name))
        found = getattr(type(self.shadow), name, _MISSING)
        if found is _MISSING:
            raise user_error(AttributeError, f"'{type(self.shadow).__name__}' object has no attribute {name!r}")
        if callable(found):
            return MethodValue(self, name)
        if isinstance(getattr(tnp.ndarray, name, None), property):        # T, real, imag, mT...
            return trace_numpy(frame, attribute(name), attribute(name), name, [self], {})
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"ndarray.{name}")

    def call_method(self, frame, method_, args, kwargs):
        name = method_ if isinstance(method_, str) else getattr(method_, "__name__", "")
        if name in _EFFECTFUL_METHODS:
            raise Unsupported(UNKNOWN_CALL, f"ndarray.{name}")
        if not self.traced and not any_traced([*args, *kwargs.values()]):
            result = fold_values(frame, getattr(self.array, name), list(args), kwargs)
            return self if isinstance(result, ArrayValue) and result.array is self.array else result
        if name in _TO_PYTHON_METHODS:
            raise Unsupported(TENSOR_TO_PYTHON, f"ndarray.{name}()")
        if not hasattr(tnp.ndarray, name):
            raise Unsupported(UNKNOWN_CALL, f"ndarray.{name}() (torch._numpy has no such method)")
        return trace_numpy(frame, method(name), method(name), name, [self, *args], kwargs)

    # ---- containers ----------------------------------------------------------------------------
    def getitem(self, frame, key):
        if not self.traced and not any_traced([key]):
            return fold_values(frame, operator.getitem, [self, Const(key.as_python())], {})
        return trace_numpy(frame, operator.getitem, operator.getitem, "getitem", [self, key], {})

    def setitem(self, frame, key, value):
        if not self.traced and not any_traced([key, value]):
            if not self.array.flags.writeable:
                raise Unsupported(USER_EXCEPTION, "ValueError: assignment destination is read-only")
            fold_values(frame, self.array.__setitem__, [Const(key.as_python()), value], {})
            return
        trace_numpy(frame, operator.setitem, operator.setitem, "setitem", [self, key, value], {})

    def unpack(self, frame):
        if not self.traced:
            return [as_value(frame, x) for x in self.array]
        fold(iter, self.shadow)         # the TypeError eager raises for a 0-d array or a scalar
        return [self.getitem(frame, Const(i)) for i in range(len(self.shadow))]

    def length(self, frame):
        return Const(fold(len, self.array if not self.traced else self.shadow))

    def contains(self, frame, item):
        if self.traced or any_traced([item]):
            raise Unsupported(TENSOR_TO_PYTHON, "`in` on a numpy array computed in the graph")
        return bool(fold(operator.contains, self.array, item.as_python()))

    def truthy(self, frame):
        if self.traced:
            raise Unsupported(DATA_DEPENDENT_BRANCH, "branching on the value of a numpy array computed in the graph")
        return bool(fold(bool, self.array))

    # ---- operators -----------------------------------------------------------------------------
    def unary(self, frame, fn):
        if not self.traced:
            return fold_values(frame, fn, [self], {})
        return trace_numpy(frame, fn, fn, fn.__name__, [self], {}, tensor_fn=fn)

    def binary(self, frame, fn, other):
        if self.traced or any_traced([other]):
            return trace_numpy(frame, fn, fn, fn.__name__, [self, other], {}, tensor_fn=fn)
        if not other.is_python_constant():
            return NotImplemented
        return fold_values(frame, fn, [self, other], {})   # `a += 1`: the array itself

    def rbinary(self, frame, fn, other):
        if self.traced or any_traced([other]):
            # `other <op> self`: Python's protocol on the shadows (a tensor's own `+=` included)
            return trace_numpy(frame, fn, fn, fn.__name__, [other, self], {}, tensor_fn=fn)
        if not other.is_python_constant():
            return NotImplemented
        return fold_values(frame, plain(fn), [other, self], {})

    def compare(self, frame, fn, other):
        if self.traced or any_traced([other]):
            return trace_numpy(frame, fn, fn, fn.__name__, [self, other], {}, tensor_fn=fn)
        if not other.is_python_constant():
            return NotImplemented
        return fold_values(frame, fn, [self, other], {})


_MISSING = object()


def any_traced(values) -> bool:
    """Does any of these values (or what they hold) carry graph data numpy code would compute on?"""
    for v in values:
        if isinstance(v, ArrayValue) and v.traced or isinstance(v, TensorValue):
            return True
        if isinstance(v, (SeqValue, DictValue)) and any_traced(v.children()):
            return True
    return False


# ============================================================================================
# folding: numpy on constants, while tracing
# ============================================================================================

def as_value(frame, result) -> Value:
    """A folded numpy result as a value."""
    if is_array(result):
        frame.tracer.folded_arrays.append(result)
        return ArrayValue(result)
    if np is not None and isinstance(result, (np.generic, np.dtype, np.iinfo, np.finfo)) or is_constant(result):
        return Const(result)          # iinfo / finfo: immutable descriptions of a dtype
    if isinstance(result, (tuple, list)):
        return SeqValue([as_value(frame, r) for r in result], type(result))
    raise Unsupported(UNKNOWN_CALL, f"numpy returned a {type(result).__name__}")


def fold_values(frame, fn, args: list, kwargs: dict) -> Value:
    """`fn(*args, **kwargs)` run now: every argument must be a constant."""
    values = [a.as_python() for a in args]
    kw = {k: v.as_python() for k, v in kwargs.items()}
    try:
        result = fn(*values, **kw)
    except Exception as e:
        raise Unsupported(USER_EXCEPTION, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}")
    check_unchanged(frame.tracer)
    for a in args:                      # `np.asarray(a)`: a itself, one value for one array
        if isinstance(a, ArrayValue) and result is a.array:
            return a
    return as_value(frame, result)


def check_unchanged(tracer):
    """A folded array that a tensor shares memory with in eager must keep its contents."""
    for array, snapshot in tracer.frozen_arrays:
        if not np.array_equal(array, snapshot, equal_nan=array.dtype.kind in "fc"):
            raise Unsupported(UNSUPPORTED_MUTATION, "a numpy array changed after a tensor was made from it")


# ============================================================================================
# tracing: numpy on graph data, with torch._numpy
# ============================================================================================

class _Operand:
    """One array-like operand of a traced operation: its value, its graph tensor, its shadow."""
    __slots__ = ("value", "tensor", "shadow")

    def __init__(self, value, tensor, shadow):
        self.value, self.tensor, self.shadow = value, tensor, shadow


class _Operands:
    """Turns the arguments of one traced numpy operation into what the graph gets (tensors and
    constants) and what eager numpy gets (shadows), keeping which operand each shadow stands for."""

    def __init__(self, frame):
        self.frame = frame
        self.arrays: list[_Operand] = []
        self.ints: list[int] = []                        # Python ints among the arguments
        self._tensors: dict[int, TensorValue] = {}      # id(value) -> its graph tensor

    def convert(self, v: Value, fresh: bool = False):
        """(graph operand, shadow) of one argument."""
        if isinstance(v, ArrayValue) or isinstance(v, Const) and (is_array(v.value) or _is_numpy_scalar(v.value)):
            return self._array(v, fresh)
        if isinstance(v, TensorValue):
            return self._array(v, fresh)
        if isinstance(v, SeqValue) and v.python_type() in (tuple, list):
            pairs = [self.convert(item, fresh) for item in v.items]
            cls = v.python_type()
            return cls(p[0] for p in pairs), cls(p[1] for p in pairs)
        value = v.as_python()                        # a symbolic size is specialized: ShapeEnv guards it
        if _is_dtype_like(value):
            return Const(np.dtype(value).name), value   # torch._numpy takes dtypes by name
        if not _plain_data(value):
            raise Unsupported(UNSUPPORTED_VALUE, f"a {type(value).__name__} passed to numpy code on graph data")
        if type(value) is int:
            self.ints.append(value)
        return Const(value), value

    def _array(self, v: Value, fresh: bool):
        tensor = self._tensors.get(id(v))
        if tensor is None:
            tensor = self._tensors[id(v)] = self._graph_tensor(v)
        shadow = self._shadow(v)
        if fresh:
            shadow = fresh_copy(shadow)
        self.arrays.append(_Operand(v, tensor, shadow))
        return tensor, shadow

    def _graph_tensor(self, v: Value) -> TensorValue:
        if isinstance(v, TensorValue):
            if v.example.device.type != "cpu":
                raise Unsupported(USER_EXCEPTION, f"numpy on a tensor on {v.example.device}")
            return v
        if isinstance(v, ArrayValue) and v.traced:
            return v.tensor
        return _lifted(self.frame, v.as_python())

    def _shadow(self, v: Value):
        if isinstance(v, TensorValue):
            return placeholder_tensor(v.example)
        if isinstance(v, ArrayValue) and v.traced:
            return v.shadow
        real = v.as_python()
        return real.copy() if is_array(real) else real      # a folded array: eager's own data, not to be written

    def check_int_ranges(self, name):
        """numpy compares `uint8_array >= -1` exactly; torch._numpy casts -1 to the array's dtype
        first: a Python int an integer operand's dtype cannot hold is not traced."""
        for op in self.arrays:
            dtype = getattr(op.shadow, "dtype", None)
            dtype = numpy_dtype(dtype) if isinstance(dtype, torch.dtype) else dtype
            if dtype is not None and dtype.kind in "iu" and any(
                    not np.iinfo(dtype).min <= n <= np.iinfo(dtype).max for n in self.ints):
                raise Unsupported(UNSUPPORTED_VALUE, f"numpy {name} of a {dtype} array and an int out of its range")

    def operand_of(self, result) -> _Operand:
        """The operand eager's result is (numpy scalars have no identity to go by)."""
        if not isinstance(result, (np.ndarray, torch.Tensor)):
            return None
        for op in self.arrays:
            if op.shadow is result:
                return op
        return None


_PLAIN_DATA = (int, float, bool, complex, str, type(None), type(Ellipsis), slice)


def _plain_data(value) -> bool:
    """An argument both numpy and a graph take as it is: numbers, strings, slices, tuples of them
    (not functions, which numpy would call while tracing, nor classes, which a graph cannot spell)."""
    if type(value) in (tuple, list):
        return all(_plain_data(v) for v in value)
    if type(value) is slice:
        return all(_plain_data(v) for v in (value.start, value.stop, value.step))
    return type(value) in _PLAIN_DATA


def _is_numpy_scalar(value) -> bool:
    return np is not None and isinstance(value, np.generic)


def _is_dtype_like(value) -> bool:
    """A dtype given as a numpy dtype, numpy scalar type or Python number type (graph arguments
    spell them by name)."""
    if isinstance(value, np.dtype) or any(value is t for t in (bool, int, float, complex)):
        return True
    return isinstance(value, type) and issubclass(value, np.generic) and value not in _ABSTRACT_SCALAR_TYPES


_ABSTRACT_SCALAR_TYPES = () if np is None else (np.generic, np.number, np.inexact, np.floating, np.integer,
                                                np.signedinteger, np.unsignedinteger, np.complexfloating)


# Functions besides operators and ufuncs whose int arguments are values for the array's elements
# (not sizes, axes or indices).
_TAKES_VALUES = {"clip", "where", "full", "full_like", "fill", "setitem", "putmask", "place", "copyto", "isin",
                 "searchsorted", "isclose", "allclose", "array_equal"}


def _stable_sort(kw) -> bool:
    return kw.get("kind") in ("stable", "mergesort") or kw.get("stable") is True


# torch._numpy functions whose values differ from numpy's (shadows see dtypes, shapes and
# aliasing, not values): traced only with the arguments under which the two agree.
_VALUES_DIFFER = {
    "cbrt": lambda kw: False,          # nan for negative numbers
    "fix": lambda kw: False,           # rounds away from zero
    "modf": lambda kw: False,
    "argsort": _stable_sort,           # numpy's default sort puts equal elements in its own order
    "svd": lambda kw: kw.get("compute_uv") is False or kw.get("full_matrices") is False,  # null-space basis
}


def trace_numpy(frame, eager_fn, graph_fn, name: str, args: list, kwargs: dict, tensor_fn=None) -> Value:
    """The traced result of a numpy operation with graph data among its operands.

    `eager_fn` runs it with numpy (on shadows), `graph_fn` with torch._numpy (in the graph);
    `tensor_fn`, for operators, is what the graph runs when eager's result is a tensor (numpy
    defers `arr + tensor`-like operators to torch, which takes the array as a tensor)."""
    if graph_fn is None:
        raise Unsupported(UNKNOWN_CALL, f"numpy {name} on graph data (torch._numpy has no counterpart)")
    agrees = _VALUES_DIFFER.get(name)
    if agrees is not None and not agrees({k: v.as_python() for k, v in kwargs.items() if v.is_python_constant()}):
        raise Unsupported(UNKNOWN_CALL, f"numpy {name} on graph data (torch._numpy computes other values)")
    operands = _Operands(frame)
    g_args, g_kwargs, eager = _run_on_shadows(operands, eager_fn, name, args, kwargs)
    if tensor_fn is not None or isinstance(eager_fn, np.ufunc) or name in _TAKES_VALUES:
        operands.check_int_ranges(name)
    if plain(eager_fn) is not eager_fn and operands.operand_of(eager) is None:
        # `a += b` that Python ran as `a = a + b` (the in-place method declined): the same in the graph
        graph_fn, tensor_fn = plain(eager_fn), tensor_fn and plain(eager_fn)
    if _holds(eager, torch.Tensor):
        if tensor_fn is None:
            raise Unsupported(UNKNOWN_CALL, f"numpy {name} of a tensor gives a tensor")
        target = tensor_fn
    else:
        target = NumpyCall(graph_fn, name)
    graph = frame.tracer.graph
    versions = [(op, op.tensor.example._version) for op in operands.arrays]
    got = graph.call("call_function", target, tuple(g_args), g_kwargs, always_node=eager is None)
    _note_writes(frame, target, [op for op, v in versions if op.tensor.example._version != v], operands,
                 [*args[:1], *_items(kwargs.get("out"))])
    return _result(frame, eager, got, operands, name)


def _run_on_shadows(operands: _Operands, eager_fn, name, args, kwargs):
    """Run the operation eagerly on the operands' shadows; if the placeholder data makes numpy
    fail (a singular matrix), once more on fresh placeholders."""
    error = None
    for fresh in (False, True):
        operands.arrays.clear()
        operands.ints.clear()
        converted = [operands.convert(a, fresh) for a in args]
        converted_kw = {k: operands.convert(v, fresh) for k, v in kwargs.items()}
        try:
            eager = run_eager(eager_fn, [s for _, s in converted], {k: s for k, (_, s) in converted_kw.items()})
        except Exception as e:
            error = e
            continue
        return [g for g, _ in converted], {k: g for k, (g, _) in converted_kw.items()}, eager
    raise Unsupported(USER_EXCEPTION, f"numpy {name} raised {type(error).__name__}: {error}")


def _note_writes(frame, target, written: list, operands: _Operands, writable: list):
    """The graph op wrote into `written` operands (their fake tensors' versions moved). Modelled
    are writes into the first argument (`a[i] = v`, `a += b`, `a.fill(0)`: the graph builder
    then counts the node as in-place) and into `out=`, and what shares their memory; a folded
    array written into becomes traced."""
    if not written:
        return
    keys = {storage_key(op.tensor.example) for op in operands.arrays if any(op.value is w for w in writable)}
    if None in keys or any(storage_key(op.tensor.example) not in keys for op in written):
        raise Unsupported(UNSUPPORTED_MUTATION, "a numpy operation writing into an argument other than the first")
    if isinstance(target, NumpyCall):
        target.writes_in_place = True          # into its first argument; `out=` the graph builder sees itself
    for op in written:
        if isinstance(op.value, ArrayValue) and not op.value.traced:
            _lift(frame, op)
        elif isinstance(op.value, Const):
            raise Unsupported(UNSUPPORTED_MUTATION, "writing into a numpy array held as a constant")


def _lift(frame, op: _Operand):
    """A folded array a traced operation wrote into: from now on its data is the graph tensor
    the write went to, and its placeholder copy its shadow. Refused when another folded array
    shares its memory (a view would keep the old contents) or a tensor was made from it."""
    value, array, tracer = op.value, op.value.array, frame.tracer
    remaining = [a for a in tracer.folded_arrays if a is not array]
    if any(np.may_share_memory(array, other) for other in [*remaining, *(a for a, _ in tracer.frozen_arrays)]):
        raise Unsupported(UNSUPPORTED_MUTATION, "graph data written into a numpy array that shares its memory")
    tracer.folded_arrays[:] = remaining
    value.array, value.tensor, value.shadow = None, op.tensor, op.shadow


def _lifted(frame, real) -> TensorValue:
    """A folded array or numpy scalar as a graph tensor: a graph input holding a snapshot of it,
    cloned in the graph so that writes never reach the snapshot."""
    try:
        snapshot = torch.from_numpy(np.array(real, copy=True))
    except (TypeError, ValueError) as e:
        raise Unsupported(UNSUPPORTED_VALUE, f"a numpy array of dtype {np.asarray(real).dtype} in the graph: {e}")
    return constant_input(frame, snapshot)


def constant_input(frame, real: torch.Tensor) -> Value:
    """A graph input holding `real`, cloned in the graph: in-place ops or a returned tensor never
    touch the snapshot."""
    tracer = frame.tracer
    placeholder = tracer.graph.add_input(real, tracer.ref_source(real))
    return tracer.graph.call("call_method", "clone", (placeholder,), {})


def _items(v) -> list:
    """The values an argument holds directly (a tuple of `out=` arrays), or itself."""
    if v is None:
        return []
    return list(v.items) if isinstance(v, SeqValue) else [v]


def _holds(value, cls) -> bool:
    if isinstance(value, cls):
        return True
    return isinstance(value, (tuple, list)) and any(_holds(v, cls) for v in value)


# ---- the result: eager's answer, the graph's data --------------------------------------------------

def _result(frame, eager, got: Value, operands: _Operands, name: str) -> Value:
    """The value of a traced operation whose eager result (on shadows) is `eager` and whose graph
    result is `got`; refused where the two disagree on anything but data."""
    same = operands.operand_of(eager)
    if same is not None:                      # `np.asarray(a)`, `a += 1`: the operand itself
        return same.value
    if isinstance(eager, (np.ndarray, np.generic)):
        return ArrayValue(tensor=_tensor_result(frame, eager, got, operands, name), shadow=eager)
    if isinstance(eager, torch.Tensor):
        return _tensor_result(frame, eager, got, operands, name)
    if isinstance(eager, (tuple, list)) and isinstance(got, SeqValue) and len(got.items) == len(eager):
        return SeqValue([_result(frame, e, g, operands, name) for e, g in zip(eager, got.items)], type(eager))
    if isinstance(got, Const) and type(got.value) is type(eager) and _equal(got.value, eager):
        return Const(eager)
    if is_constant(eager) and not isinstance(got, Const):
        raise Unsupported(TENSOR_TO_PYTHON, f"numpy {name} gives a {type(eager).__name__} made from array data")
    raise Unsupported(UNSUPPORTED_VALUE, f"numpy {name}: torch._numpy gives {_describe(got)}, numpy a "
                                         f"{type(eager).__name__}")


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _tensor_result(frame, eager, got: Value, operands: _Operands, name: str) -> TensorValue:
    """The graph tensor holding an array result, after checking dtype and shape against eager's,
    and that it aliases an operand exactly where eager's does (a view torch._numpy made where
    numpy copies is copied; the other way round is refused)."""
    if not (isinstance(got, TensorValue) and _same_metadata(got.example, eager)):
        raise Unsupported(UNSUPPORTED_VALUE, f"numpy {name}: torch._numpy gives {_describe(got)}, numpy a "
                                             f"{type(eager).__name__} of {eager.dtype} {tuple(eager.shape)}")
    key = storage_key(got.example)
    copy = False
    for op in operands.arrays:
        graph_shares = key is not None and storage_key(op.tensor.example) == key
        eager_shares = isinstance(eager, (np.ndarray, torch.Tensor)) and shares_memory(eager, op.shadow)
        if eager_shares and (not graph_shares or not (_traced(op.value) or isinstance(op.value, TensorValue))):
            raise Unsupported(UNSUPPORTED_VALUE, f"numpy {name} returns a view where torch._numpy copies")
        copy |= graph_shares and not eager_shares
    if copy:
        return frame.tracer.graph.call("call_method", "clone", (got,), {})
    return got


def _same_metadata(example: torch.Tensor, eager) -> bool:
    if tuple(example.shape) != tuple(eager.shape):
        return False
    if isinstance(eager, torch.Tensor):
        return example.dtype == eager.dtype
    return same_dtype(example.dtype, eager.dtype)


def _traced(v: Value) -> bool:
    return isinstance(v, ArrayValue) and v.traced


def _describe(v: Value) -> str:
    example = getattr(v, "example", None)
    if isinstance(example, torch.Tensor):
        return f"a tensor of {example.dtype} {tuple(example.shape)}"
    return repr(v)[:80]
