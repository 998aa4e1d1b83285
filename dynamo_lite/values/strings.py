"""FormattedString: an f-string with a tensor among its fields, not formatted while tracing.

Formatting a tensor reads its data, which a trace does not have. Libraries build such strings for
error messages they only raise when a check fails (`torch_compilable_check(cond, f"... {n} ...")`
in transformers, whose message is never read while compiling), so the string stays a recipe:
its literal parts, and each field's value, conversion (!s, !r, !a) and format spec. Anything that
needs its characters (comparing, concatenating, calling a method, passing it to C code) is a
graph break there (DL003, as formatting was before); a string that outlives the graph (returned,
stored, live at a break) is formatted after the graph from the tensors' values then
(`runtime.format_fields`), provided nothing wrote into them in between.
"""
from __future__ import annotations

from ..breaks import TENSOR_TO_PYTHON, Unsupported
from ..runtime import format_fields
from .base import Const, Value

_WHY = "formatting a tensor into a string"


def _version(value: Value):
    example = getattr(value, "example", None)
    return getattr(example, "_version", None)


class FormattedString(Value):
    """`pieces`: literal strings and fields (value, conversion, spec, the value's version counter
    when formatted)."""
    __slots__ = ("pieces",)

    def __init__(self, pieces: tuple):
        super().__init__(None)
        self.pieces = pieces

    @classmethod
    def field(cls, value: Value, conversion: int, spec: str) -> "FormattedString":
        return cls(((value, conversion, spec, _version(value)),))

    @classmethod
    def join(cls, parts: list) -> Value:
        """BUILD_STRING: a FormattedString where a part is one, else the constant string."""
        if not any(isinstance(p, FormattedString) for p in parts):
            return Const("".join(p.as_python() for p in parts))
        pieces = []
        for p in parts:
            pieces.extend(p.pieces if isinstance(p, FormattedString) else (p.as_python(),))
        return cls(tuple(pieces))

    def with_spec(self, spec: str) -> "FormattedString":
        """format(self, spec), as 3.13's FORMAT_WITH_SPEC applies it to a converted field."""
        if spec == "":
            return self
        if len(self.pieces) == 1 and not isinstance(self.pieces[0], str) and self.pieces[0][2] == "":
            value, conversion, _, version = self.pieces[0]
            return FormattedString(((value, conversion, spec, version),))
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    # ---- what it is: a str whose characters are not known --------------------------------------
    def python_type(self):
        return str

    def as_python(self):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def children(self):
        return tuple(p[0] for p in self.pieces if not isinstance(p, str))

    def truthy(self, frame):
        if any(isinstance(p, str) and p for p in self.pieces):
            return True
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def load_attr(self, frame, name):
        raise Unsupported(TENSOR_TO_PYTHON, f"{_WHY} (str.{name})")

    def call_method(self, frame, method, args, kwargs):
        raise Unsupported(TENSOR_TO_PYTHON, f"{_WHY} (str.{getattr(method, '__name__', method)})")

    def binary(self, frame, fn, other):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def rbinary(self, frame, fn, other):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def compare(self, frame, fn, other):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def length(self, frame):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def contains(self, frame, item):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def getitem(self, frame, key):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    def unpack(self, frame):
        raise Unsupported(TENSOR_TO_PYTHON, _WHY)

    # ---- generated code -------------------------------------------------------------------------
    def rebuild(self, em):
        fields = [p for p in self.pieces if not isinstance(p, str)]
        if any(_version(value) != version for value, _, _, version in fields):
            raise Unsupported(TENSOR_TO_PYTHON, f"{_WHY}: the tensor changed in place after the f-string")
        layout = tuple(p if isinstance(p, str) else (p[1], p[2]) for p in self.pieces)
        em.call_const(format_fields, [lambda: em.const(layout)] + [lambda v=f[0]: em.value(v) for f in fields])
