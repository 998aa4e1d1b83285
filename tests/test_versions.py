"""The version layer: every instruction the running CPython has is handled or knowingly not
modelled, and the instructions that differ between 3.11, 3.12 and 3.13 are exercised by
differential tests (asserting, on the version that has them, that the test's code contains them,
so a compiler change cannot make the test pass vacuously)."""
import dis

import pytest
import torch

from dynamo_lite import compat
from dynamo_lite.handlers import HANDLERS
from harness import check

# Instructions the tracer does not model on purpose; code containing one runs eagerly (its frame)
# or breaks there (DL001 unsupported-opcode). A new CPython's new instruction must be added to the
# handlers or here.
NOT_MODELLED = {
    # async code
    "BEFORE_ASYNC_WITH", "END_ASYNC_FOR", "GET_AITER", "GET_ANEXT", "GET_AWAITABLE", "ASYNC_GEN_WRAP",
    # class and module bodies (names looked up in a namespace dict)
    "LOAD_BUILD_CLASS", "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "LOAD_LOCALS", "LOAD_FROM_DICT_OR_DEREF",
    "LOAD_FROM_DICT_OR_GLOBALS", "SETUP_ANNOTATIONS", "IMPORT_STAR", "PRINT_EXPR", "CALL_INTRINSIC_2",
    # pattern matching and exception groups
    "MATCH_CLASS", "MATCH_KEYS", "MATCH_MAPPING", "MATCH_SEQUENCE", "GET_LEN", "CHECK_EG_MATCH",
    "PREP_RERAISE_STAR",
    # deleting globals and closure variables
    "DELETE_DEREF", "DELETE_GLOBAL",
    # throwing into a generator's `yield from` (generator.throw is modelled above this level)
    "CLEANUP_THROW",
    # the interpreter's own (never in a code object's bytecode as compiled)
    "INTERPRETER_EXIT", "RESERVED", "ENTER_EXECUTOR", "EXIT_INIT_CHECK",
}


def _base_opnames() -> set:
    specialized = set(getattr(dis, "_specialized_opmap", {}))
    return {name for name, op in dis.opmap.items() if op < 256 and not name.startswith("INSTRUMENTED")
            and name not in specialized}


def test_every_instruction_is_handled_or_knowingly_not_modelled():
    missing = sorted(_base_opnames() - set(HANDLERS) - NOT_MODELLED)
    assert not missing, f"instructions of Python {compat.PY_VERSION} with no handler: {missing}"


def _uses(fn, *opnames):
    """On the version that has these instructions, fn's code (nested code included) uses them."""
    found = set()
    todo = [fn.__code__]
    while todo:
        code = todo.pop()
        found |= {i.opname for i in dis.get_instructions(code)}
        todo += [c for c in code.co_consts if hasattr(c, "co_code")]
    wanted = {name for name in opnames if name in dis.opmap}
    assert wanted <= found, f"{fn.__name__} no longer uses {sorted(wanted - found)}"


def test_local_pairs_and_keyword_calls():
    def f(x, y):
        a, b = x, y                               # 3.13: LOAD_FAST_LOAD_FAST, STORE_FAST_STORE_FAST
        c = a; d = c                              # noqa: E702  (3.13: STORE_FAST_LOAD_FAST)
        return torch.cat([a, b, d], dim=0).sum(dim=0, keepdim=True)   # CALL_KW (3.13) / KW_NAMES (3.12)

    _uses(f, "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "CALL_KW", "KW_NAMES")
    check(f, torch.randn(3), torch.randn(3), graphs=1)


def test_truth_values_and_formatting():
    def f(x, n, name):
        s = f"{name!r:>8}|{n}|{n:04d}|{name!s}|{name!a}"     # CONVERT_VALUE, FORMAT_SIMPLE, FORMAT_WITH_SPEC
        if n and not name == "skip":                          # TO_BOOL before the jumps and `not`
            x = x + len(s)
        flag = not n                                          # TO_BOOL + UNARY_NOT, kept as a value
        return x * 2, s, flag

    _uses(f, "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "TO_BOOL", "FORMAT_VALUE")
    check(f, torch.randn(3), 3, "ab", graphs=1)


def test_branch_on_a_tensor_breaks_and_resumes_on_both_sides():
    """A data-dependent `if` (3.13: TO_BOOL before the jump, which the break code repeats)."""
    def f(x):
        y = x.sum()
        if y > 0:
            return x + 1
        return x - 1

    check(f, torch.ones(3), graphs=2)       # up to the test, then the side taken
    check(f, -torch.ones(3), graphs=2)


def test_functions_made_with_defaults_closures_and_keyword_defaults():
    def f(x, k):
        def scale(v, by=2.0, *, shift=k):         # MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE (3.13)
            return v * by + shift + k
        return scale(x) + scale(x, 3.0, shift=1.0)

    _uses(f, "SET_FUNCTION_ATTRIBUTE")
    check(f, torch.randn(3), 0.5, graphs=1)


def test_calls_with_star_arguments_and_method_calls():
    def f(x, args, kwargs):
        y = torch.add(*args, **kwargs)            # CALL_FUNCTION_EX: callable and NULL in this version's order
        z = x.add(y).mul(2)                       # LOAD_ATTR with the method bit
        return max(*[z.sum(), y.sum()]), z        # a global with the NULL bit, CALL_FUNCTION_EX

    _uses(f, "CALL_FUNCTION_EX")
    check(f, torch.randn(3), (torch.randn(3), torch.randn(3)), {"alpha": 2}, graphs=1)


def test_for_loop_exits_skip_the_right_instructions():
    def f(x, items):
        total = x
        for a, b in items:                        # 3.13: the exit skips END_FOR and POP_TOP
            total = total + a * b
        for i in range(2):
            for j in range(i):
                total = total + j
        return total, [k * 2 for k in range(3)]

    check(f, torch.randn(3), [(1, 2), (3, 4)], graphs=1)


def test_super_and_generators():
    class Base(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Child(Base):
        def forward(self, x):
            return super().forward(x) * 2         # LOAD_SUPER_ATTR (3.12+): NULL in this version's order

    def gen(x):
        total = 0
        while True:
            v = yield total                        # 3.13: the RESUME after it carries a depth flag
            total = total + v

    def f(x):
        g = gen(x)
        next(g)
        g.send(x)
        return Child()(g.send(x * 2))

    check(f, torch.randn(3), graphs=1)


@pytest.mark.parametrize("version, supported", [((3, 10), False), ((3, 11), True), ((3, 13), True),
                                                 ((3, 14), False)])
def test_supported_versions(version, supported):
    assert ((3, 11) <= version < (3, 14)) == supported
    if version == compat.PY_VERSION:
        assert compat.SUPPORTED == (supported and not compat.FREE_THREADED)
