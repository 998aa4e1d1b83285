"""Higher-order functions in captured code: torch.cond, torch.func.vmap, grad, jacrev, jacfwd,
hessian. Differential against eager (values, gradients through the op, graph counts: one graph
where TorchDynamo makes one), plus what is refused (side effects in the function: DL032) and
that torch's own eager implementation never has its calls into user code captured.
"""
import pytest
import torch
from torch.func import grad, grad_and_value, hessian, jacfwd, jacrev, vmap

from harness import REFERENCE, CountingBackend, assert_same, capture, check, check_calls, reset, skip_in_reference

W = torch.randn(3)


def _pos_neg(*shapes):
    """Argument sets that take each branch of a `sum() > 0` predicate."""
    xs = tuple(torch.randn(s).abs() + 0.1 for s in shapes)
    return xs, tuple(-x for x in xs)


def _graph_targets(backend):
    return [n.target for gm in backend.graphs for n in gm.graph.nodes if n.op == "call_function"]


# -- torch.cond ---------------------------------------------------------------------------------

def cond_tensor_pred(x):
    return torch.cond(x.sum() > 0, lambda a: a.sin() * 2, lambda a: a.cos() - 1, (x,)) + 1


def cond_closure(x):
    return torch.cond(x.sum() > 0, lambda a: a * W, lambda a: a + W, (x,))


def cond_two_operands_tuple_out(x, y):
    def true_fn(a, b):
        return a + b, a * b

    def false_fn(a, b):
        return a - b, b.exp()
    first, second = torch.cond(x.mean() > 0, true_fn, false_fn, [x, y])
    return first * second


def cond_nested(x):
    def true_fn(a):
        return torch.cond(a.max() > 1.0, lambda q: q * 2, lambda q: q * 3, (a,))
    return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))


def cond_python_function_branches(x, y):
    def true_fn(a):
        return level(a) + y

    def false_fn(a):
        return level(a) - y
    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


def level(a):
    return torch.relu(a) * 3


@pytest.mark.parametrize("fn,shapes", [(cond_tensor_pred, [(3,)]), (cond_closure, [(3,)]),
                                       (cond_two_operands_tuple_out, [(4,), (4,)]), (cond_nested, [(3,)]),
                                       (cond_python_function_branches, [(2, 3), (2, 3)])],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_cond_tensor_predicate_keeps_both_branches(fn, shapes):
    """Inputs taking either branch reuse the one graph: both branches are in it."""
    result = check_calls(fn, *_pos_neg(*shapes), graphs=1)
    if not REFERENCE:
        assert torch.ops.higher_order.cond in _graph_targets(result.backend)


def cond_constant_pred(x, flag):
    return torch.cond(flag, lambda a: a + 1, lambda a: a * 10, (x,))


@pytest.mark.parametrize("flag", [True, False])
def test_cond_constant_predicate(flag):
    result = check(cond_constant_pred, torch.randn(3), flag, graphs=1)
    if not REFERENCE:
        assert torch.ops.higher_order.cond not in _graph_targets(result.backend)   # the taken branch, inlined


def cond_size_pred(x):
    return torch.cond(x.shape[0] > 2, lambda a: a.sum(0), lambda a: a.mean(0), (x,))


def test_cond_on_a_size_specializes():
    check(cond_size_pred, torch.randn(4, 2), graphs=1)
    check(cond_size_pred, torch.randn(2, 2), graphs=1)


def test_cond_gradients_match_eager():
    y = torch.randn(3)
    for sign in (1.0, -1.0):
        reset()
        x_eager = (torch.randn(3).abs() * sign).requires_grad_()
        x_captured = x_eager.detach().clone().requires_grad_()
        fn = lambda x: torch.cond(x.sum() > 0, lambda a: (a.sin() * y,), lambda a: (a ** 3,), (x,))[0]  # noqa: E731
        expected = fn(x_eager)
        backend = CountingBackend()
        got = capture(fn, backend=backend)(x_captured)
        assert_same(expected, got)
        expected.sum().backward()
        got.sum().backward()
        assert_same(x_eager.grad, x_captured.grad, "grad")
        assert backend.count == 1


# -- vmap -----------------------------------------------------------------------------------------

def helper(row, scale):
    return torch.sin(row) * scale + W


VMAP_CASES = {
    "default": (lambda x: vmap(lambda r: r.sin() * 2)(x) + 1, [(4, 3)]),
    "torch_vmap": (lambda x: torch.vmap(lambda r: r @ r)(x), [(4, 3)]),
    "in_dims_1_none": (lambda x, y: vmap(helper, in_dims=(1, None))(x, y), [(3, 5), (3,)]),
    "in_dims_negative": (lambda x, y: vmap(helper, in_dims=(-1, 0))(x, y), [(3, 5), (5, 3)]),
    "out_dims_tuple": (lambda x: vmap(lambda r: (r * 2, r.sum()), out_dims=(1, 0))(x), [(4, 3)]),
    "out_dims_1": (lambda x: vmap(lambda r: r.outer(r), out_dims=1)(x), [(4, 3)]),
    "nested_python_function": (lambda x, s: vmap(vmap(helper, in_dims=(0, None)), in_dims=(0, None))(x, s),
                               [(2, 4, 3), (3,)]),
    "python_constant_arg": (lambda x: vmap(lambda r, k: r * k, in_dims=(0, None))(x, 3.0), [(4, 3)]),
    "kwargs_not_mapped": (lambda x, y: vmap(lambda r, *, other: r * other)(x, other=y), [(4, 3), (3,)]),
    "chunk_size": (lambda x: vmap(lambda r: r.softmax(0), chunk_size=2)(x), [(5, 3)]),
    "grad_inside": (lambda x: vmap(grad(lambda t: t.sin().sum()))(x), [(4, 3)]),
}


@pytest.mark.parametrize("name", VMAP_CASES)
def test_vmap(name):
    fn, shapes = VMAP_CASES[name]
    result = check_calls(fn, tuple(torch.randn(s) for s in shapes), tuple(torch.randn(s) for s in shapes), graphs=1)
    if not REFERENCE:
        assert result.backend.graphs[0].graph.find_nodes(op="get_attr"), "vmap's function is a subgraph"


def test_vmap_gradients_match_eager():
    w = torch.randn(3, 2, requires_grad=True)
    fn = lambda x: vmap(lambda r: (r @ w).tanh())(x)   # noqa: E731
    x_eager = torch.randn(5, 3, requires_grad=True)
    x_captured = x_eager.detach().clone().requires_grad_()
    expected = fn(x_eager)
    expected.sum().backward()
    w_grad, w.grad = w.grad, None
    got = capture(fn, backend=CountingBackend())(x_captured)
    got.sum().backward()
    assert_same(expected, got)
    assert_same(x_eager.grad, x_captured.grad, "x.grad")
    assert_same(w_grad, w.grad, "w.grad")


# -- grad, jacrev and friends ---------------------------------------------------------------------

def scalar_fn(t):
    return (t.sin() ** 2).sum()


FUNC_CASES = {
    "grad": (lambda x: grad(scalar_fn)(x), [(3,)]),
    "grad_argnums_1": (lambda x, y: grad(lambda a, b: (a * b.exp()).sum(), argnums=1)(x, y), [(3,), (3,)]),
    "grad_argnums_tuple": (lambda x, y: grad(lambda a, b: (a * b.exp()).sum(), argnums=(0, 1))(x, y), [(3,), (3,)]),
    "grad_has_aux": (lambda x: grad(lambda t: ((t ** 2).sum(), t.cos()), has_aux=True)(x), [(3,)]),
    "grad_closure": (lambda x: grad(lambda t: (t * W).sum())(x) + 1, [(3,)]),
    "grad_and_value": (lambda x: grad_and_value(scalar_fn)(x), [(3,)]),
    "jacrev": (lambda x: jacrev(lambda t: t.sin() * W)(x), [(3,)]),
    "jacrev_argnums": (lambda x, y: jacrev(lambda a, b: a * b.sin(), argnums=1)(x, y), [(3,), (3,)]),
    "jacrev_has_aux": (lambda x: jacrev(lambda t: (t.exp(), t.sum()), has_aux=True)(x), [(3,)]),
    "jacfwd": (lambda x: jacfwd(lambda t: t.sin() * W)(x), [(3,)]),
    "hessian": (lambda x: hessian(lambda t: (t ** 3).sum())(x), [(3,)]),
    "python_constant_arg": (lambda x: grad(lambda t, k: (t * k).sum())(x, 2.5), [(3,)]),
}


@pytest.mark.parametrize("name", FUNC_CASES)
def test_autograd_transforms(name):
    fn, shapes = FUNC_CASES[name]
    check_calls(fn, tuple(torch.randn(s) for s in shapes), tuple(torch.randn(s) for s in shapes), graphs=1)


def test_grad_of_transformed_function_defined_outside():
    """A transformed function made outside the captured code is called inside it."""
    g = grad(scalar_fn)
    check(lambda x: g(x) * 2, torch.randn(3), graphs=1)


def test_transformed_function_returned():
    """`vmap(f)` made in captured code and returned is rebuilt as a real transformed function."""
    def fn(x):
        return vmap(helper, in_dims=(0, None)), x + 1
    eager_f, eager_y = fn(torch.ones(2))
    got_f, got_y = capture(fn, backend=CountingBackend())(torch.ones(2))
    assert_same(eager_y, got_y)
    x, s = torch.randn(4, 3), torch.randn(3)
    assert_same(eager_f(x, s), got_f(x, s))


# -- refused: side effects, and eager fallbacks stay eager ----------------------------------------

SEEN = []


def cond_appends(x):
    def true_fn(a):
        SEEN.append(1)
        return a + 1
    return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))


def vmap_appends_to_outer_list(x):
    calls = []

    def body(r):
        calls.append(r.shape)
        return r * 2
    return vmap(body)(x), len(calls)


def grad_writes_attribute(x):
    def body(t):
        body.last = 1
        return t.sum()
    return grad(body)(x)


@skip_in_reference("dynamo_lite's own refusal kind")
@pytest.mark.parametrize("fn,shape", [(cond_appends, (3,)), (vmap_appends_to_outer_list, (4, 3)),
                                      (grad_writes_attribute, (3,))], ids=lambda v: getattr(v, "__name__", ""))
def test_side_effects_in_the_function_are_refused(fn, shape):
    import dynamo_lite as dl
    with pytest.raises(dl.GraphBreakError) as info:
        dl.capture(fn, fullgraph=True)(torch.randn(shape))
    assert info.value.kind.id == "DL032", info.value


def vmap_side_effect_runs_once(x):
    calls = []

    def body(r):
        calls.append(1)
        return r * 2
    return vmap(body)(x), len(calls)


def test_vmap_with_side_effect_matches_eager():
    """Refused, the vmap runs eagerly: the body's append happens once, as in eager."""
    check(vmap_side_effect_runs_once, torch.randn(4, 3), graphs=None)


def cond_writes_input(x):
    def true_fn(a):
        a.add_(1)
        return a * 2
    return torch.cond(x.sum() > 0, true_fn, lambda a: a * 3, (x,))


def cond_returns_input(x):
    return torch.cond(x.sum() > 0, lambda a: a, lambda a: a * 3, (x,))


@skip_in_reference("TorchDynamo's message names the placeholders of its own trace")
@pytest.mark.parametrize("fn", [cond_writes_input, cond_returns_input], ids=lambda f: f.__name__)
def test_cond_refusals_raise_eagers_error(fn):
    """Eager torch.cond refuses these; run eagerly, the captured side raises the same error."""
    check(fn, torch.ones(3), graphs=None)


def vmap_tuple_argument(pair):
    return vmap(lambda p: p[0] * p[1], in_dims=((0, 0),))(pair)


@skip_in_reference("counts dynamo_lite's frame records")
def test_eager_fallback_does_not_capture_torch_internals():
    """A vmap we refuse (nested in_dims) runs eagerly: its body, called on batched tensors by
    torch.func, is never captured, nor is anything torch runs meanwhile."""
    from dynamo_lite.fallback.records import RECORDS
    pair = (torch.randn(4, 3), torch.randn(4, 3))
    check(vmap_tuple_argument, pair, graphs=None)
    names = {r.name for r in RECORDS}
    assert names <= {"vmap_tuple_argument"}, names


def cond_dict_output(x):
    return torch.cond(x.sum() > 0, lambda a: {"v": a + 1}, lambda a: {"v": a - 1}, (x,))["v"]


@skip_in_reference("counts dynamo_lite's frame records")
def test_eager_torch_cond_is_not_captured_while_it_compiles():
    """A cond we refuse (dict results) runs eagerly, which compiles it with TorchDynamo: none of
    the frames that runs (the branches, dataclass helpers, import hooks) is captured."""
    from dynamo_lite.fallback.records import RECORDS
    check(cond_dict_output, torch.randn(3), graphs=None)
    names = {r.name for r in RECORDS}
    assert names <= {"cond_dict_output"}, names
