"""Building, unpacking, indexing and slicing tuples, lists, dicts, sets and strings."""
from __future__ import annotations

from ..breaks import TENSOR_TO_PYTHON, Unsupported, user_error
from ..runtime import CONVERSIONS
from ..semantics import delitem, getitem, setitem, unpack, unpack_exactly
from ..values.base import Const
from ..values.containers import DictValue, SeqValue, SetValue, hashable_key
from ..values.strings import FormattedString
from ..values.tensors import make_slice
from .registry import handler


_key = hashable_key


@handler("BUILD_TUPLE")
def build_tuple(frame, inst):
    frame.push(SeqValue(frame.popn(inst.arg), tuple))


@handler("BUILD_LIST")
def build_list(frame, inst):
    frame.push(SeqValue(frame.popn(inst.arg), list))


@handler("BUILD_SET")
def build_set(frame, inst):
    frame.push(SetValue(frame.popn(inst.arg), set))


@handler("BUILD_MAP")
def build_map(frame, inst):
    flat = frame.popn(2 * inst.arg)
    frame.push(DictValue({_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}, dict))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(frame, inst):
    keys = frame.pop().as_python()
    values = frame.popn(inst.arg)
    frame.push(DictValue(dict(zip(keys, values)), dict))


@handler("BUILD_STRING")
def build_string(frame, inst):
    frame.push(FormattedString.join(frame.popn(inst.arg)))


def _formatted(value, conversion: int, spec: str):
    """An f-string field: formatted now, or for a tensor (its data unknown while tracing) a
    FormattedString formatted after the graph if the string outlives it."""
    if isinstance(value, FormattedString):
        if conversion:
            raise Unsupported(TENSOR_TO_PYTHON, "formatting a tensor into a string")
        return value.with_spec(spec)
    if value.is_graph_value and value.python_type() not in (int, float, bool):
        return FormattedString.field(value, conversion, spec)
    return Const(format(CONVERSIONS[conversion](value.as_python()), spec))


@handler("FORMAT_VALUE")
def format_value(frame, inst):
    """f-string field (3.11, 3.12): conversion in the low bits, a format spec on top when bit 2 is set."""
    spec = frame.pop().as_python() if inst.arg & 0x04 else ""
    frame.push(_formatted(frame.pop(), inst.arg & 0x03, spec))


# 3.13 splits FORMAT_VALUE: CONVERT_VALUE (!s, !r, !a), then FORMAT_SIMPLE or FORMAT_WITH_SPEC.
@handler("CONVERT_VALUE", min_version=(3, 13))
def convert_value(frame, inst):
    frame.push(_formatted(frame.pop(), inst.arg, ""))


@handler("FORMAT_SIMPLE", min_version=(3, 13))
def format_simple(frame, inst):
    frame.push(_formatted(frame.pop(), 0, ""))


@handler("FORMAT_WITH_SPEC", min_version=(3, 13))
def format_with_spec(frame, inst):
    spec = frame.pop().as_python()
    frame.push(_formatted(frame.pop(), 0, spec))


@handler("BUILD_SLICE")
def build_slice(frame, inst):
    parts = frame.popn(inst.arg) + [Const(None)] * (3 - inst.arg)
    frame.push(make_slice(*parts))


def _grows(frame, container):
    """The container a comprehension or a display builds. It is the trace's own, unless the code
    resumes after a break inside a comprehension: then it came in as an argument, and what is
    added to it is a change to replay."""
    frame.tracer.mutate(container)
    return container


@handler("LIST_APPEND")
def list_append(frame, inst):
    v = frame.pop()
    _grows(frame, frame.peek(inst.arg)).append_item(v)


@handler("SET_ADD")
def set_add(frame, inst):
    value = frame.pop()
    _grows(frame, frame.peek(inst.arg)).add(frame, value)


@handler("MAP_ADD")
def map_add(frame, inst):
    value, key = frame.pop(), frame.pop()
    _grows(frame, frame.peek(inst.arg)).items[_key(key)] = value


@handler("LIST_EXTEND")
def list_extend(frame, inst):
    v = frame.pop()
    _grows(frame, frame.peek(inst.arg)).extend_items(unpack(frame, v))


@handler("SET_UPDATE")
def set_update(frame, inst):
    v = frame.pop()
    frame.peek(inst.arg).call_method(frame, "update", [v], {})


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(frame, inst):
    new = frame.pop().as_mapping(frame)
    target = _grows(frame, frame.peek(inst.arg))
    if inst.opname == "DICT_MERGE":
        dup = set(target.items) & set(new)
        if dup:
            raise user_error(TypeError, f"got multiple values for keyword argument {dup.pop()!r}")
    target.items.update(new)


@handler("LIST_TO_TUPLE", max_version=(3, 11))
def list_to_tuple(frame, inst):
    frame.push(SeqValue(frame.pop().items, tuple))


@handler("UNPACK_SEQUENCE")
def unpack_sequence(frame, inst):
    items = unpack_exactly(frame, frame.pop(), inst.arg)
    for item in reversed(items):
        frame.push(item)


@handler("UNPACK_EX")
def unpack_ex(frame, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = unpack(frame, frame.pop())
    if len(items) < before + after:
        raise user_error(ValueError, f"not enough values to unpack (expected at least {before + after}, "
                                     f"got {len(items)})")
    middle = SeqValue(items[before:len(items) - after], list)
    for item in reversed(items[len(items) - after:]):
        frame.push(item)
    frame.push(middle)
    for item in reversed(items[:before]):
        frame.push(item)


@handler("BINARY_SUBSCR")
def binary_subscr(frame, inst):
    key, obj = frame.pop(), frame.pop()
    frame.push(getitem(frame, obj, key))


@handler("STORE_SUBSCR")
def store_subscr(frame, inst):
    key, obj, value = frame.pop(), frame.pop(), frame.pop()
    setitem(frame, obj, key, value)


@handler("DELETE_SUBSCR")
def delete_subscr(frame, inst):
    key, obj = frame.pop(), frame.pop()
    delitem(frame, obj, key)


@handler("BINARY_SLICE", min_version=(3, 12))
def binary_slice(frame, inst):
    end, start, obj = frame.pop(), frame.pop(), frame.pop()
    frame.push(getitem(frame, obj, make_slice(start, end, Const(None))))


@handler("STORE_SLICE", min_version=(3, 12))
def store_slice(frame, inst):
    end, start, obj, value = frame.pop(), frame.pop(), frame.pop(), frame.pop()
    setitem(frame, obj, make_slice(start, end, Const(None)), value)
