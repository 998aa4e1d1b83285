"""Calls: argument passing (positional, keyword, defaults, kw-only, *args, **kwargs), inlined
user functions (nested three levels, recursion), methods, lambdas, and capture()'s own call forms.
"""
import functools
import importlib
import inspect
import typing

import pytest
import torch

from harness import ENGINE, REFERENCE, CountingBackend, capture, check


def level3(x, k):
    return torch.sin(x) * k


def level2(x, k):
    return level3(x + 1, k) - level3(x, k + 1)


def level1(x, k=2):
    return level2(x * 2, k) + x


def combine(a, b=2, *rest, scale=1.0, **extra):
    total = a * b * scale
    for r in rest:
        total = total + r
    for name in sorted(extra):
        total = total + extra[name]
    return total


def kw_only(x, *, power, bias=0.0):
    return x ** power + bias


# -- argument passing into user functions (inlined) --------------------------------------------

CALL_FORMS = {
    "positional": lambda x: combine(x, 3),
    "keyword": lambda x: combine(a=x, b=4),
    "default": lambda x: combine(x),
    "kw_only_arg": lambda x: combine(x, 2, scale=0.5),
    "varargs": lambda x: combine(x, 2, x, x * 2),
    "varkw": lambda x: combine(x, 1, z=x, y=3),
    "star_call": lambda x: combine(*[x, 5], *(x,)),
    "double_star_call": lambda x: combine(x, **{"b": 3, "scale": 2.0, "w": x}),
    "everything": lambda x: combine(x, 2, x, scale=3.0, q=1, **{"r": x}),
    "kw_only_required": lambda x: kw_only(x, power=2) + kw_only(x, power=3, bias=1.0),
}


@pytest.mark.parametrize("name", CALL_FORMS)
def test_argument_passing_to_inlined_function(name):
    check(CALL_FORMS[name], torch.randn(3), graphs=1)


def test_missing_kw_only_argument_raises_type_error():
    def f(x):
        return kw_only(x)

    # the call raises before any tensor op, so there is nothing to capture
    check(f, torch.randn(3), graphs=0)


# -- the captured function's own signature -----------------------------------------------------

def test_captured_function_called_with_keywords():
    check(combine, torch.randn(3), b=4, scale=0.5, graphs=1)


def test_captured_function_defaults_used():
    check(level1, torch.randn(3), graphs=1)


def test_captured_function_with_varargs_and_varkw():
    def f(*xs, **opts):
        out = xs[0]
        for x in xs[1:]:
            out = out + x * opts["w"]
        return out, sorted(opts)

    check(f, torch.randn(2), torch.randn(2), torch.randn(2), w=2.0, tag="t", graphs=1)


def test_captured_function_kw_only():
    check(kw_only, torch.randn(3), power=2, bias=0.5, graphs=1)


# -- inlining ----------------------------------------------------------------------------------

def test_inlined_calls_three_levels_deep():
    check(lambda x: level1(x, 3), torch.randn(4), graphs=1)


def test_recursive_function_unrolled_on_python_int():
    def power_of_two(x, n):
        if n == 0:
            return x
        return power_of_two(x * 2, n - 1)

    check(power_of_two, torch.randn(3), 4, graphs=1)


def test_lambda_defined_and_called_inline():
    def f(x):
        square = lambda t: t * t  # noqa: E731
        return square(x) + (lambda t, c=2: t * c)(x)

    check(f, torch.randn(3), graphs=1)


def test_functools_partial():
    scaled = functools.partial(combine, b=3, scale=2.0)
    check(lambda x: scaled(x) + 1, torch.randn(3), graphs=1)


def test_higher_order_function_argument():
    def apply_twice(fn, x):
        return fn(fn(x))

    check(apply_twice, torch.tanh, torch.randn(3), graphs=1)


# -- methods -----------------------------------------------------------------------------------

class Scaler:
    factor_default = 2.0

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return self.apply(x) + 1

    def apply(self, x):
        return x * self.factor

    @property
    def double(self):
        return self.factor * 2

    @staticmethod
    def shift(x, by=1.0):
        return x + by

    @classmethod
    def make(cls):
        return cls(cls.factor_default)


METHOD_CALLS = {
    "bound_method": lambda x, s: s.apply(x),
    "call_dunder": lambda x, s: s(x),
    "property": lambda x, s: x * s.double,
    "staticmethod": lambda x, s: Scaler.shift(x, by=3.0) + s.shift(x),
    "classmethod": lambda x, s: Scaler.make().apply(x),
    "method_object_stored": lambda x, s: (lambda m: m(x) + m(x * 2))(s.apply),
}


@pytest.mark.parametrize("name", METHOD_CALLS)
def test_method_calls_on_user_objects(name):
    check(METHOD_CALLS[name], torch.randn(3), Scaler(1.5), graphs=1)


class ShiftedScaler(Scaler):
    def __init__(self, factor, shift):
        super().__init__(factor)
        self.shift_by = shift

    def apply(self, x):
        return super().apply(x) + self.shift_by


def test_inheritance_and_super_calls():
    def f(x):
        s = ShiftedScaler(2.0, 0.5)
        return s(x), s.apply(x), isinstance(s, Scaler)

    check(f, torch.randn(3), graphs=1)


def test_user_decorator_with_functools_wraps_inside():
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) * 2

        return wrapper

    def f(x):
        @twice
        def affine(t, *, b=1.0):
            return t * 3 + b

        return affine(x, b=0.5), affine.__name__

    check(f, torch.randn(3), graphs=1)


def test_unbound_tensor_method_and_shape_star_unpacking():
    def f(x):
        y = torch.Tensor.add(x, 1)
        z = x.new_zeros(*x.shape) + y
        return z.view(*x.shape[:-1], -1, 1), torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)

    check(f, torch.randn(2, 4), graphs=1)


def test_object_constructed_and_used_inside():
    def f(x):
        s = Scaler(3.0)
        return s(x) + Scaler.make()(x)

    check(f, torch.randn(3), graphs=1)


def test_builtin_methods_on_python_values():
    def f(x, words):
        joined = "-".join(w.strip().lower() for w in words)
        parts = joined.split("-")
        return x * len(parts), joined, joined.startswith("a"), joined.replace("-", "+")

    check(f, torch.randn(2), [" Alpha", "BETA "], graphs=1)


# -- capture() call forms ----------------------------------------------------------------------

def test_decorator_with_backend_argument():
    backend = CountingBackend()

    @capture(backend=backend)
    def f(x, y):
        return (x * y).sum(dim=0)

    x, y = torch.randn(3, 2), torch.randn(3, 2)
    torch.testing.assert_close(f(x, y), (x * y).sum(dim=0))
    torch.testing.assert_close(f(x, y), (x * y).sum(dim=0))
    assert backend.count == 1


def test_bare_decorator_uses_default_backend():
    @capture
    def f(x):
        return torch.cos(x) + 1

    x = torch.randn(4)
    torch.testing.assert_close(f(x), torch.cos(x) + 1)


def test_fullgraph_true_on_capturable_function():
    backend = CountingBackend()
    f = capture(lambda x: torch.relu(x) * 2, backend=backend, fullgraph=True)
    x = torch.randn(5)
    torch.testing.assert_close(f(x), torch.relu(x) * 2)
    assert backend.count == 1


def test_fullgraph_true_refuses_a_graph_break():
    if REFERENCE:
        expected = importlib.import_module("torch._dynamo.exc").Unsupported
    else:
        expected = importlib.import_module("dynamo_lite").GraphBreakError

    def f(x):
        print("side effect")
        return x + 1

    backend = CountingBackend()
    with pytest.raises(expected):
        capture(f, backend=backend, fullgraph=True)(torch.randn(2))
    assert backend.count == 0


def test_captured_function_keeps_working_when_called_from_python_loop():
    backend = CountingBackend()
    f = capture(lambda x, i: x + i, backend=backend)
    x = torch.zeros(2)
    results = [f(x, 1) for _ in range(5)]
    for r in results:
        torch.testing.assert_close(r, torch.ones(2))
    assert backend.count == 1, f"{ENGINE}: repeated identical calls recaptured (reference={REFERENCE})"


def test_inspect_signature_of_a_function_and_a_bound_method():
    # transformers' apply_chunking_to_forward: len(inspect.signature(forward_fn).parameters)
    import inspect

    class Block(torch.nn.Module):
        def chunk(self, x, y):
            return x * y

        def forward(self, x):
            n = len(inspect.signature(self.chunk).parameters)
            m = len(inspect.signature(_two_args).parameters)
            return self.chunk(x, x) * n + m
    check(Block(), torch.randn(3), graphs=1)


def _two_args(a, b):
    return a + b


class _Marker:
    pass


def _annotated(x: "Tensor", *rest: _Marker, scale: "float | None" = None, mode: _Marker | str | None = None,
               sizes: typing.Optional[typing.List[int]] = None, **extra):
    pass


_ANNOTATED = inspect.signature(_annotated)


def test_signature_bind_of_tensors_and_annotation_checks():
    """einx's argument splitting: `signature.bind(*args, **kwargs)` with tensors, the bound
    arguments copied and completed with defaults, and each parameter's annotation compared with
    `==` to a string or a class (typing's own comparison)."""
    def f(x, y):
        bound = _ANNOTATED.bind(x, y, x + 1, scale=2.0)
        given = bound.arguments.copy()
        bound.apply_defaults()
        tensors = [name for name, p in _ANNOTATED.parameters.items()
                   if p.annotation == "Tensor" or p.annotation is _Marker
                   or p.annotation == typing.Optional[typing.List[int]]]
        try:
            _ANNOTATED.bind(scale=1)
        except TypeError as e:
            err = str(e)
        return given["x"] * 2, sorted(given), bound.args[2] - 1, bound.kwargs, tensors, err

    check(f, torch.randn(3), torch.randn(3), graphs=1)


@functools.lru_cache
def _feature_available(name):
    return name == "fast"


def test_lru_cached_predicate_folds_to_a_constant():
    # transformers' `@lru_cache def is_torch_distributed_available()` checks
    def f(x):
        if _feature_available("fast"):
            x = x * 2
        if not _feature_available("slow"):
            x = x + 1
        return x
    check(f, torch.randn(3), graphs=1)


def _positions(q: int, k: int) -> torch.Tensor:
    return torch.arange(q).unsqueeze(1) - torch.arange(k).unsqueeze(0)


def test_torch_jit_script_function_is_traced_through_its_python_source():
    # DeBERTa-v2's build_relative_position helpers are @torch.jit.script functions
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)      # torch.jit.script is deprecated
        scripted = torch.jit.script(_positions)

    def f(x):
        return x + scripted(x.size(0), x.size(1))
    check(f, torch.randn(3, 4), graphs=1)


def _normalized_rows(x, eps):
    """Marked for compilers below: its Python is not traced, the graph calls it."""
    return x / (x.norm(dim=-1, keepdim=True) + eps)



def test_function_marked_with_torch_compiler_allow_in_graph_is_one_graph_op():
    """A library's `torch.compiler.allow_in_graph` mark (einx marks its operations) puts calls to
    the function into the graph as one op, on both engines: its body is never traced. (Marked
    here, not at import: marking loads torch._dynamo, which loads triton, and the Triton test
    modules must set TRITON_INTERPRET before that.)"""
    torch.compiler.allow_in_graph(_normalized_rows)

    def f(x):
        y = _normalized_rows(x * 2, 1e-6)
        return y.sum(-1) + 1

    backend = check(f, torch.randn(3, 4), graphs=1).backend
    targets = [n.target for n in backend.call_nodes(0) if n.op == "call_function"]
    assert any(getattr(t, "__name__", "") == "_normalized_rows" for t in targets), targets


def test_a_torch_python_function_replacing_its_arguments_data_runs_as_in_eager():
    """`torch.nn.utils.vector_to_parameters` assigns `param.data = ...`: as one graph op that
    returns None it vanished from the graph, and the parameters kept their old values. A Python
    function that replaces the data, `.grad` or requires_grad of a tensor it is given is now
    refused (a graph break with the reason), and runs as it does in eager."""
    def f(model, vec, x):
        torch.nn.utils.vector_to_parameters(vec, list(model.parameters()))
        return model(x), torch.nn.utils.parameters_to_vector(model.parameters()) * 2

    def fresh():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)
    vec, x = torch.arange(8.0), torch.ones(1, 3)
    want_model, got_model = fresh(), fresh()
    want = f(want_model, vec, x)
    got = capture(f)(got_model, vec, x)
    torch.testing.assert_close(got, want)
    for p, q in zip(got_model.parameters(), want_model.parameters()):
        torch.testing.assert_close(p, q)
    if not REFERENCE:
        import dynamo_lite as dl
        report = dl.explain(f)(fresh(), vec, x)
        assert any(b.kind_id == "DL013" and "vector_to_parameters replaces the data of a tensor" in b.detail
                   for b in report.breaks), \
            [(b.kind_id, b.detail) for b in report.breaks]


def _view_in_place(t):
    t.data = t.data.view(2, 2)          # the same storage, another shape


def test_a_graph_op_that_changes_its_arguments_shape_runs_as_in_eager():
    import dynamo_lite as dl
    dl.allow_in_graph(_view_in_place)

    def f(x):
        _view_in_place(x)
        return x * 2, x.shape
    x = torch.arange(4.0)
    want_x, got_x = x.clone(), x.clone()
    want, got = f(want_x), capture(f)(got_x)
    torch.testing.assert_close(got, want)
    assert got_x.shape == want_x.shape == (2, 2)


def _add_one_in_place(t):
    t.add_(1)                           # returns None: the write is all it does


def test_a_graph_op_that_only_writes_into_its_argument_stays_in_the_graph():
    import dynamo_lite as dl
    dl.allow_in_graph(_add_one_in_place)

    def f(x):
        _add_one_in_place(x)
        return x * 2
    check(f, torch.zeros(3), graphs=1)


class _MaskedSoftmax(torch.autograd.Function):
    """transformers' SEW-D/DeBERTa XSoftmax: forward fills its own softmax output in place."""

    @staticmethod
    def forward(ctx, x, mask, dim):
        rmask = ~mask.to(torch.bool)
        out = torch.softmax(x.masked_fill(rmask, torch.finfo(x.dtype).min), dim)
        out.masked_fill_(rmask, 0)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, out, ctx.dim, out.dtype), None, None


def test_a_function_whose_forward_writes_its_own_intermediate_is_one_graph():
    def f(x, mask):
        return _MaskedSoftmax.apply(x * 2, mask, -1).sum(-1)

    check(f, torch.randn(2, 5), torch.tensor([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]]), graphs=1)


class _ScalesItsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_a_function_whose_forward_writes_its_input_matches_eager():
    def f(x):
        return _ScalesItsInput.apply(x) * 3

    check(f, torch.randn(4), graphs=None)     # the count: whatever runs around the break; values and x compared
