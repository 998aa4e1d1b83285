"""Crash safety: hostile inputs never crash the process or corrupt dynamo_lite's state.

Every case is a `case_*` function below. Each runs in a child process (`fuzz.worker.Worker`,
one per module, restarted after a crash), so a segfault or a hang fails that one test instead
of killing pytest. A case compares eager and captured runs with `fuzz.oracle.check_function`
(value or exception type and message, printed output, inputs afterwards, no "internal error"
warning), then checks that the hook is off and that capture still works (`_state_intact`).

Covered: tensors of every dtype, zero-size, non-contiguous and 8-/16-D tensors; recursion
(a captured function calling itself, infinite and deep recursion); generator, coroutine and
async-generator functions captured; functions made by exec/eval/types.FunctionType (and one
with thousands of locals); *args/**kwargs, positional-only and keyword-only parameters; objects
whose __getattr__, properties, __eq__, __bool__, __len__ or __hash__ raise; subclasses of builtin
types built with super().__init__; modules mutated during forward; exceptions thrown inside
captured regions (user raises, torch errors at run time, BaseExceptions, chained exceptions) and
reuse of the function afterwards.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import types
import warnings

import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite import _evalframe

from dynamo_lite.fallback import records
from fuzz.oracle import INTERNAL_ERROR, check_function
from fuzz.worker import Worker, isolated_cases

PY312 = sys.version_info >= (3, 12)


def _state_intact() -> None:
    """The hook is off for this thread and capture still works."""
    assert _evalframe.get_callback() is None, "a capture callback is still set after the call"
    assert _evalframe.stats()["active_threads"] == 0, "the frame hook is still installed"

    def probe(x):
        return torch.relu(x) * 2 + 1

    x = torch.randn(4)
    torch.testing.assert_close(dl.capture(probe)(x), probe(x))


@contextlib.contextmanager
def _no_internal_errors():
    """Fail when dynamo_lite hid an error of its own (warning or record) inside the block."""
    before = {id(r) for r in records.RECORDS}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    internal = [str(w.message) for w in caught if str(w.message).startswith(INTERNAL_ERROR)]
    internal += [f"record: {r.name}: {r.detail}" for r in records.RECORDS if r.status == "error" and id(r) not in before]
    assert not internal, internal[0]


def _compare(fn, *args, **kwargs):
    try:
        return check_function(fn, *args, **kwargs)
    finally:
        _state_intact()


# ---------------------------------------------------------------------------------------------
# tensors: dtypes, zero-size, non-contiguous, huge ranks
# ---------------------------------------------------------------------------------------------

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


def _sample(dtype, shape=(2, 3)):
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.randn(shape) > 0
    return (torch.randn(shape) * 5).to(dtype)


def case_every_dtype():
    def f(x):
        y = x.clone()
        y[0] = x[-1]
        return x + x, x * 2, x.sum(), x.reshape(-1)[:2], torch.cat([x, x]), x == x, y, x.t().contiguous()
    for dtype in DTYPES:
        _compare(f, _sample(dtype))


def case_every_dtype_float_ops():
    def f(x):
        return x.abs(), x / 3, torch.where(x.abs() > 1, x, x * 0), x.mean(), (x * x).sum(dim=0)
    for dtype in DTYPES:
        _compare(f, _sample(dtype))           # integer means raise: same error as eager


def case_mixed_dtype_promotion():
    def f(a, b, c):
        return a + b, b * c, (a > 0) & (c > 0), a.to(b.dtype) - b
    _compare(f, _sample(torch.int8), _sample(torch.float16), _sample(torch.complex64))
    _compare(f, _sample(torch.bool), _sample(torch.bfloat16), _sample(torch.int64))


def case_zero_size_tensors():
    def f(x):
        return x.sum(), x.mean(), x + 1, x.reshape(x.shape[0], -1), x.flatten(), torch.cat([x, x]).shape
    for shape in [(0,), (3, 0), (0, 4), (0, 2, 0)]:
        _compare(f, torch.randn(shape))

    def g(x):
        return x.max()                            # raises on zero elements: same error
    _compare(g, torch.randn(0))


def case_non_contiguous_tensors():
    def f(x):
        y = x * 2
        x.add_(1)
        return y, x.sum(0), x.t(), x.is_contiguous()
    base = torch.randn(4, 6)
    for x in [base.t(), base[:, ::2], base[1:, 2:], torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
              torch.randn(10).as_strided((3, 3), (1, 1)), torch.randn(1, 6).expand(4, 6)]:
        _compare(f, x)                            # the expanded one raises in add_: same error


def case_huge_ranks():
    def f(x):
        return (x.sum(dim=(1, 3, 5)), x.permute(*reversed(range(x.dim()))).contiguous(), x.flatten(2),
                x.unsqueeze(4).squeeze(), x.mean(-1, keepdim=True) * x, x.dim())
    _compare(f, torch.randn(1, 2, 1, 2, 1, 2, 1, 2))
    _compare(f, torch.randn((1, 2) * 8))
    _compare(f, torch.randn((1,) * 30 + (2,)))


# ---------------------------------------------------------------------------------------------
# recursion
# ---------------------------------------------------------------------------------------------

def _factorial(x, n):
    if n == 0:
        return x
    return _factorial(x * n, n - 1) + 1


def _calls_captured_self(x, n):
    return x if n == 0 else _captured_self(x * 2, n - 1) + 1


_captured_self = dl.capture(_calls_captured_self)


def _forever(x):
    return _forever(x + 1)


def _deep(x, n):
    if n == 0:
        return x
    return _deep(x + 1, n - 1)


def case_recursion_inlined():
    _compare(_factorial, torch.ones(2), 5)
    _compare(_factorial, torch.ones(2), 60)          # deeper than the inline limit: breaks


def case_recursion_through_captured_wrapper():
    dl.reset()
    with _no_internal_errors():
        got = _captured_self(torch.ones(2), 6)
    torch.testing.assert_close(got, _calls_captured_self(torch.ones(2), 6))
    _state_intact()


def case_infinite_recursion_raises_recursion_error():
    got = _compare(_forever, torch.ones(2))
    assert isinstance(got.exc, RecursionError)


def case_recursion_near_the_default_limit():
    _compare(_deep, torch.zeros(1), 800, calls=1)


def case_deep_recursion_with_raised_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(30_000)
    try:
        _compare(_deep, torch.zeros(1), 15_000, calls=1)
    finally:
        sys.setrecursionlimit(old)


# ---------------------------------------------------------------------------------------------
# generators and coroutines
# ---------------------------------------------------------------------------------------------

def _gen(x, n):
    for i in range(n):
        x = x * 2 + i
        yield x


async def _coro(x):
    await asyncio.sleep(0)
    y = x * 2
    await asyncio.sleep(0)
    return y + 1


async def _agen(x):
    for i in range(3):
        await asyncio.sleep(0)
        yield x + i


async def _collect(agen):
    return [v async for v in agen]


def case_generator_function_captured():
    def run(x):
        return list(dl.capture(_gen)(x, 3))
    assert_same_list(run(torch.ones(2)), list(_gen(torch.ones(2), 3)))
    g = dl.capture(_gen)(torch.ones(2), 5)
    next(g)
    g.close()                                        # closing a half-run captured generator
    g = dl.capture(_gen)(torch.ones(2), 5)
    next(g)
    with pytest.raises(ValueError, match="thrown in"):
        g.throw(ValueError("thrown in"))
    _state_intact()


def case_coroutine_captured():
    got = asyncio.run(dl.capture(_coro)(torch.ones(2)))
    torch.testing.assert_close(got, asyncio.run(_coro(torch.ones(2))))
    _state_intact()


def case_async_generator_captured():
    got = asyncio.run(_collect(dl.capture(_agen)(torch.ones(2))))
    assert_same_list(got, asyncio.run(_collect(_agen(torch.ones(2)))))
    _state_intact()


def case_generators_consumed_inside_capture():
    def f(x):
        total = sum(v for v in _gen(x, 3))
        g = _gen(x, 4)
        first, second = next(g), next(g)
        return total, first, second, [v.sum() for v in _gen(x, 2)]
    _compare(f, torch.ones(2))


def case_generator_throw_inside_capture():
    def f(x):
        g = _gen(x, 3)
        a = next(g)
        try:
            g.throw(ValueError("boom"))
        except ValueError as e:
            return a, str(e)
    _compare(f, torch.ones(2))


def assert_same_list(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        torch.testing.assert_close(u, v)


# ---------------------------------------------------------------------------------------------
# functions made at run time, unusual signatures
# ---------------------------------------------------------------------------------------------

def case_exec_and_eval_made_functions():
    ns = {"torch": torch}
    exec("def ef(x, k=2):\n    y = x * k + 1\n    print('made by exec', y.shape)\n    return y\n", ns)
    _compare(ns["ef"], torch.ones(2))
    _compare(eval("lambda x: torch.relu(x) - 1", {"torch": torch}), torch.randn(3))
    maker = {}
    exec(compile("def mk(y):\n    def inner(x):\n        return x + y\n    return inner\n", "<made>", "exec"), maker)
    _compare(maker["mk"](torch.ones(2)), torch.ones(2))


def case_function_type_from_code_object():
    def template(x, k=3):
        return x * k
    clone = types.FunctionType(template.__code__, {"torch": torch}, "clone", (5,), None)
    _compare(clone, torch.ones(2))
    replaced = types.FunctionType(template.__code__.replace(co_name="renamed"), globals(), "renamed", (7,))
    _compare(replaced, torch.ones(2))


def case_function_with_thousands_of_locals():
    n = 1000
    body = "".join(f"    v{i} = x + {i}\n" for i in range(n))
    ns = {}
    exec(f"def big(x):\n{body}    return v0 + v{n - 1}\n", ns)
    _compare(ns["big"], torch.ones(2))


def _signature_zoo(x, /, y=1.0, *args, scale=2.0, bias, **kwargs):
    out = x * scale + y + bias
    for a in args:
        out = out + a
    for k, v in kwargs.items():
        out = out * v
    return out, len(args), sorted(kwargs)


def case_args_kwargs_positional_and_keyword_only():
    t = torch.ones(2)
    _compare(_signature_zoo, t, 3.0, t, t * 2, bias=1, extra=2, more=t)
    _compare(_signature_zoo, t, bias=t)
    _compare(_signature_zoo, t, scale=0.5, bias=t, y=t)
    _compare(_signature_zoo, t)                               # missing keyword-only: TypeError
    _compare(_signature_zoo, x=t, bias=1)                     # positional-only by keyword: TypeError
    _compare(_signature_zoo, t, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, bias=0)


# ---------------------------------------------------------------------------------------------
# hostile objects
# ---------------------------------------------------------------------------------------------

class RaisingGetattr:
    def __init__(self):
        self.w = torch.ones(2)

    def __getattr__(self, name):
        raise RuntimeError(f"no attribute {name} (hostile)")

    def __deepcopy__(self, memo):
        return RaisingGetattr()


class RaisingProperty:
    @property
    def w(self):
        raise KeyError("hostile property")


class RaisingEq:
    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        raise ValueError("hostile __eq__")

    __hash__ = object.__hash__


class AlwaysEq:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class RaisingBool:
    def __bool__(self):
        raise TypeError("hostile __bool__")


class RaisingLen:
    def __len__(self):
        raise RuntimeError("hostile __len__")


class RaisingHash:
    def __hash__(self):
        raise TypeError("hostile __hash__")


def case_getattr_and_property_raise():
    def f(x, o):
        return x * o.w, o.missing
    _compare(f, torch.ones(2), RaisingGetattr())

    def g(x, o):
        y = x * o.w
        if hasattr(o, "foo"):
            y = y + 1
        return y, getattr(o, "bar", 3)
    _compare(g, torch.ones(2), RaisingGetattr())

    def h(x, o):
        return x * o.w
    _compare(h, torch.ones(2), RaisingProperty())


def case_eq_raises_in_tuple_and_comparison():
    def f(x, o, items):
        y = x * o.k
        return y + 1 if o in items else y
    _compare(f, torch.ones(2), RaisingEq(2), (1, 2))

    def g(x, o):
        return x + (o == 3)
    _compare(g, torch.ones(2), RaisingEq(2))


def case_eq_in_list_membership():
    def f(x, o, items):
        return x + 1 if o in items else x
    _compare(f, torch.zeros(2), AlwaysEq(), [1, 2])
    _compare(f, torch.zeros(2), RaisingEq(0), [1, 2])


def case_bool_len_hash_raise():
    def b(x, o):
        return x + 1 if o else x
    _compare(b, torch.ones(2), RaisingBool())

    def n(x, o):
        return x * len(o)
    _compare(n, torch.ones(2), RaisingLen())

    def h(x, o):
        return x + len({o: 1})
    _compare(h, torch.ones(2), RaisingHash())


def case_guards_on_raising_objects_over_many_calls():
    def f(x, o):
        return x * o.k
    captured = dl.capture(f)
    with _no_internal_errors():
        for i in range(20):                       # more variants than cache_size_limit
            torch.testing.assert_close(captured(torch.ones(2), RaisingEq(i)), torch.ones(2) * i)
    _state_intact()


# ---------------------------------------------------------------------------------------------
# modules mutated during forward
# ---------------------------------------------------------------------------------------------

def _compare_modules(make, calls=4, x=None):
    """Two identical modules, one captured; the same calls must give the same outputs and state."""
    dl.reset()
    torch.manual_seed(0)
    eager = make()
    torch.manual_seed(0)
    other = make()
    captured = dl.capture(other)
    x = torch.ones(3) if x is None else x
    for i in range(calls):
        torch.manual_seed(i)
        a = eager(x.clone())
        torch.manual_seed(i)
        with _no_internal_errors():
            b = captured(x.clone())
        torch.testing.assert_close(b, a, msg=lambda m: f"call {i + 1}: {m}")
        torch.testing.assert_close(dict(other.state_dict()), dict(eager.state_dict()))
        assert {k: v for k, v in vars(other).items() if not k.startswith("_")} .keys() == \
            {k: v for k, v in vars(eager).items() if not k.startswith("_")}.keys()
    _state_intact()


class _ReplacesSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.n = 0

    def forward(self, x):
        self.n += 1
        if self.n == 2:
            self.lin = nn.Linear(3, 3)
            self.register_buffer("extra", torch.ones(3))
        if hasattr(self, "extra"):
            x = x + self.extra
        return self.lin(x)


class _DeletesAndMutates(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.act(self.lin(x))
        del self.act
        self.act = nn.Tanh() if isinstance(y, torch.Tensor) else nn.ReLU()
        self.lin.weight.data.mul_(0.5)
        with torch.no_grad():
            self.lin.bias.add_(1)
        return y


class _TogglesTraining(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        out = self.lin(x) if self.training else self.lin(x) * 2
        self.train(not self.training)
        return out


class _AddsHookDuringForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.k = 0

    def forward(self, x):
        self.k += 1
        if self.k == 2:
            self.lin.register_forward_hook(lambda mod, inp, out: out * 10)
        return self.lin(x)


class _ReplacesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        out = x * self.w
        self.w = nn.Parameter(self.w.detach() * 2)
        return out


def case_module_replaces_submodule_and_registers_buffer():
    _compare_modules(_ReplacesSubmodule)


def case_module_deletes_attribute_and_mutates_parameters():
    _compare_modules(_DeletesAndMutates)


def case_module_toggles_training():
    _compare_modules(_TogglesTraining)


def case_module_replaces_parameter():
    _compare_modules(_ReplacesParameter)


def case_module_adds_forward_hook_during_forward():
    _compare_modules(_AddsHookDuringForward)


# ---------------------------------------------------------------------------------------------
# exceptions inside captured regions
# ---------------------------------------------------------------------------------------------

class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}-{b}")
        self.a, self.b = a, b


def _raises_in_helper(x):
    if x.shape[0] > 2:
        raise KeyError("too big")
    return x


class _DictWithSuperInit(dict):
    def __init__(self, a):
        super().__init__(a=a)


def case_custom_exception_with_super_init():
    def custom(x):
        y = x * 2
        raise TwoArgError(1, y.shape[0])
    _compare(custom, torch.ones(3))


def case_builtin_subclass_with_super_init():
    def f(x):
        return _DictWithSuperInit(2)["a"] * x
    _compare(f, torch.ones(3))


def case_user_exceptions():
    def in_helper(x, lst):
        lst.append(x * 2)
        return _raises_in_helper(x) + 1
    _compare(in_helper, torch.ones(3), [])

    def chained(x):
        try:
            raise ValueError("inner")
        except ValueError as e:
            raise RuntimeError("outer") from e
    _compare(chained, torch.ones(3))

    def asserts(x):
        assert x.sum() < 0, "sum must be negative"
        return x
    _compare(asserts, torch.ones(3))


def case_torch_errors_at_run_time():
    def oob(x, idx):
        return x.index_select(0, idx) * 2
    _compare(oob, torch.ones(3), torch.tensor([5]))

    def int_div_zero(x):
        return torch.ones(3, dtype=torch.int64) // torch.zeros(3, dtype=torch.int64) + x.long()
    _compare(int_div_zero, torch.ones(3))

    def shape_error_after_ops(x):
        y = x.sin()
        return y @ torch.ones(5)
    _compare(shape_error_after_ops, torch.ones(3))


def case_side_effects_before_a_run_time_error_are_kept():
    def f(x, lst):
        lst.append("before")
        x -= x[1]                  # fails only on real data: overlapping memory
        return x
    _compare(f, torch.ones(3), [])


def case_random_numbers_drawn_before_a_run_time_error_are_drawn_once():
    """The graph draws (dropout), then fails; the eager rerun must draw the same numbers eager
    did, and leave the generator where eager leaves it."""
    def g(x, lst):
        lst.append("before")                                   # a side effect: the graph reruns on failure
        y = torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand(3)
        return torch.full((2, 3), 2) @ y                       # int64 @ float: raises on real data only
    outcomes = []
    for run in (g, dl.capture(g)):
        torch.manual_seed(7)
        lst = []
        with pytest.raises(RuntimeError):
            run(torch.ones(3), lst)
        outcomes.append((lst, torch.rand(4)))
    assert outcomes[0][0] == outcomes[1][0] == ["before"]
    torch.testing.assert_close(outcomes[1][1], outcomes[0][1], rtol=0, atol=0)


def case_every_kind_of_side_effect_before_a_run_time_error():
    """Attribute, global, dict and list writes made before the graph raises are all visible, once."""
    class Box:
        count = 0

    def f(x, box, d, lst):
        global _SIDE_EFFECT_CALLS
        _SIDE_EFFECT_CALLS += 1
        box.count += 1
        d["seen"] = x.sum()
        lst.insert(0, x * 2)
        y = torch.full((2, 2), 2) @ x        # int64 @ float: raises on real data only
        return y
    before = _SIDE_EFFECT_CALLS
    for _ in range(2):
        box, d, lst = Box(), {}, []
        with pytest.raises(RuntimeError):
            dl.capture(f)(torch.ones(2), box, d, lst)
        assert (box.count, list(d), len(lst)) == (1, ["seen"], 1)
    assert _SIDE_EFFECT_CALLS == before + 2
    _compare(f, torch.ones(2), Box(), {}, [])


_SIDE_EFFECT_CALLS = 0


def case_graph_failing_at_run_time_reruns_eagerly():
    """A graph that raises where eager does not (a backend failing at run time): the frame's
    side effects happen once and the result is eager's."""
    def failing_backend(gm, example_inputs):
        def run(*args):
            raise RuntimeError("backend failed at run time")
        return run

    def f(x, lst):
        lst.append(len(lst))
        return x * 2 + 1

    lst = []
    dl.reset()
    got = dl.capture(f, backend=failing_backend)(torch.ones(2), lst)
    torch.testing.assert_close(got, torch.ones(2) * 3)
    assert lst == [0]
    _state_intact()


def case_base_exceptions_propagate():
    for exc in (KeyboardInterrupt, SystemExit, GeneratorExit):
        def f(x, exc=exc):
            y = x + 1
            raise exc("stop")
        captured = dl.capture(f)
        for _ in range(2):
            with pytest.raises(exc, match="stop"):
                captured(torch.ones(2))
        _state_intact()


def case_captured_function_reused_after_exceptions():
    def f(x, fail):
        y = x * 2
        if fail:
            raise ValueError("asked to fail")
        return y + 1
    captured = dl.capture(f)
    for i in range(6):
        fail = i % 2 == 0
        try:
            got = captured(torch.ones(2), fail)
        except ValueError:
            assert fail
            continue
        assert not fail
        torch.testing.assert_close(got, torch.full((2,), 3.0))
    _state_intact()


def case_fullgraph_error_leaves_state_intact():
    def f(x):
        print("breaks")
        return x + 1
    for _ in range(2):
        with pytest.raises(dl.GraphBreakError):
            dl.capture(f, fullgraph=True)(torch.ones(2))
    _state_intact()


# ---------------------------------------------------------------------------------------------
# the tests: one per case, each in the child process
# ---------------------------------------------------------------------------------------------

KNOWN_BUGS: dict[str, str] = {}


@pytest.fixture(scope="module")
def child():
    with Worker() as worker:
        yield worker


@pytest.mark.parametrize("case", isolated_cases(dict(globals()), KNOWN_BUGS))
def test_hostile_input(case, child):
    verdict = child.call(__file__, case, timeout=120)
    assert verdict.ok, f"{case}: {verdict.category}\n{verdict.message}"
