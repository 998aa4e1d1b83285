"""Python's operators as tables: what BINARY_OP, COMPARE_OP and the `operator` module mean.

Plain data shared by the opcode handlers, the values (which fold or model the operators) and
the builtins table, so no module needs another one's imports to know what `+=` is.
"""
from __future__ import annotations

import dis
import operator

BINARY_OPS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift, "@": operator.matmul,
    "*": operator.mul, "%": operator.mod, "|": operator.or_, "**": operator.pow, ">>": operator.rshift,
    "-": operator.sub, "/": operator.truediv, "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior, "**=": operator.ipow,
    ">>=": operator.irshift, "-=": operator.isub, "/=": operator.itruediv, "^=": operator.ixor,
}
BINARY_OP_BY_ARG = {i: BINARY_OPS[symbol] for i, (_, symbol) in enumerate(dis._nb_ops)}
INPLACE_TO_PLAIN = {operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
                    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imul: operator.mul,
                    operator.imod: operator.mod, operator.ior: operator.or_, operator.ipow: operator.pow,
                    operator.irshift: operator.rshift, operator.isub: operator.sub,
                    operator.itruediv: operator.truediv, operator.ixor: operator.xor}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}
# The comparison with operands swapped: a < b is b > a.
SWAPPED_COMPARE = {operator.lt: operator.gt, operator.le: operator.ge, operator.eq: operator.eq,
                   operator.ne: operator.ne, operator.gt: operator.lt, operator.ge: operator.le}

# The special methods Python looks up for each operator: (method, reflected method).
_NAMES = {operator.add: "add", operator.and_: "and", operator.floordiv: "floordiv", operator.lshift: "lshift",
          operator.matmul: "matmul", operator.mul: "mul", operator.mod: "mod", operator.or_: "or",
          operator.pow: "pow", operator.rshift: "rshift", operator.sub: "sub", operator.truediv: "truediv",
          operator.xor: "xor"}
BINARY_DUNDERS = {fn: (f"__{name}__", f"__r{name}__") for fn, name in _NAMES.items()}
INPLACE_DUNDERS = {fn: f"__i{_NAMES[plain]}__" for fn, plain in INPLACE_TO_PLAIN.items()}
COMPARE_DUNDERS = {operator.lt: "__lt__", operator.le: "__le__", operator.eq: "__eq__", operator.ne: "__ne__",
                   operator.gt: "__gt__", operator.ge: "__ge__"}
UNARY_DUNDERS = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
                 operator.abs: "__abs__"}


def plain(fn):
    """`operator.iadd` -> `operator.add`; other functions unchanged."""
    return INPLACE_TO_PLAIN.get(fn, fn)
