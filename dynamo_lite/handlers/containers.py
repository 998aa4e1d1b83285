"""Building, unpacking, indexing and slicing tuples, lists, dicts, sets and strings."""
from __future__ import annotations

from .. import breaks
from ..breaks import Unsupported
from ..calls import delitem, getitem, iterate, setitem
from ..dict_subclass import is_dict_object, mapping_items
from ..operators import python_value
from ..values import Const, DictValue, SeqValue, SetValue, SliceValue, SymValue, TensorValue
from . import handler


@handler("BUILD_TUPLE")
def build_tuple(frame, inst):
    frame.push(SeqValue(frame.popn(inst.arg), tuple))


@handler("BUILD_LIST")
def build_list(frame, inst):
    frame.push(SeqValue(frame.popn(inst.arg), list))


@handler("BUILD_SET")
def build_set(frame, inst):
    frame.push(SetValue([Const(python_value(v)) for v in frame.popn(inst.arg)], set))


@handler("BUILD_MAP")
def build_map(frame, inst):
    flat = frame.popn(2 * inst.arg)
    frame.push(DictValue({python_value(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}, dict))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(frame, inst):
    keys = python_value(frame.pop())
    values = frame.popn(inst.arg)
    frame.push(DictValue(dict(zip(keys, values)), dict))


@handler("BUILD_STRING")
def build_string(frame, inst):
    frame.push(Const("".join(python_value(v) for v in frame.popn(inst.arg))))


@handler("FORMAT_VALUE")
def format_value(frame, inst):
    spec = python_value(frame.pop()) if inst.arg & 0x04 else ""
    value = frame.pop()
    if isinstance(value, TensorValue):
        raise Unsupported(breaks.TENSOR_TO_PYTHON, "formatting a tensor into a string")
    v = python_value(value)
    conversion = inst.arg & 0x03
    v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conversion]
    frame.push(Const(format(v, spec)))


@handler("BUILD_SLICE")
def build_slice(frame, inst):
    parts = frame.popn(inst.arg)
    if any(isinstance(p, SymValue) for p in parts):
        start, stop, step = (parts + [Const(None)])[:3]
        frame.push(SliceValue(start, stop, step))
    else:
        frame.push(Const(slice(*[python_value(p) for p in parts])))


@handler("LIST_APPEND")
def list_append(frame, inst):
    v = frame.pop()
    frame.peek(inst.arg).items.append(v)


@handler("SET_ADD")
def set_add(frame, inst):
    value = python_value(frame.pop())
    target = frame.peek(inst.arg)
    if value not in [python_value(i) for i in target.items]:
        target.items.append(Const(value))


@handler("MAP_ADD")
def map_add(frame, inst):
    value, key = frame.pop(), frame.pop()
    frame.peek(inst.arg).items[python_value(key)] = value


@handler("LIST_EXTEND")
def list_extend(frame, inst):
    v = frame.pop()
    frame.peek(inst.arg).items.extend(iterate(frame, v))


@handler("SET_UPDATE")
def set_update(frame, inst):
    v = frame.pop()
    target = frame.peek(inst.arg)
    seen = [python_value(i) for i in target.items]
    for item in iterate(frame, v):
        value = python_value(item)
        if value not in seen:
            seen.append(value)
            target.items.append(Const(value))


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(frame, inst):
    v = frame.pop()
    if is_dict_object(v):
        v = DictValue(mapping_items(frame, v), dict)
    if not isinstance(v, DictValue):
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"** of {type(v).__name__}")
    target = frame.peek(inst.arg)
    if inst.opname == "DICT_MERGE":
        dup = set(target.items) & set(v.items)
        if dup:
            raise Unsupported(breaks.USER_EXCEPTION, f"TypeError: got multiple values for keyword argument {dup.pop()!r}")
    target.items.update(v.items)


@handler("LIST_TO_TUPLE", max_version=(3, 11))
def list_to_tuple(frame, inst):
    frame.push(SeqValue(frame.pop().items, tuple))


@handler("UNPACK_SEQUENCE")
def unpack_sequence(frame, inst):
    items = iterate(frame, frame.pop())
    if len(items) != inst.arg:
        raise Unsupported(breaks.USER_EXCEPTION, f"ValueError: expected {inst.arg} values to unpack, got {len(items)}")
    for item in reversed(items):
        frame.push(item)


@handler("UNPACK_EX")
def unpack_ex(frame, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = iterate(frame, frame.pop())
    if len(items) < before + after:
        raise Unsupported(breaks.USER_EXCEPTION, "ValueError: not enough values to unpack")
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


def _slice(start, end):
    if isinstance(start, SymValue) or isinstance(end, SymValue):
        return SliceValue(start, end, Const(None))
    return Const(slice(python_value(start), python_value(end)))


@handler("BINARY_SLICE", min_version=(3, 12))
def binary_slice(frame, inst):
    end, start, obj = frame.pop(), frame.pop(), frame.pop()
    frame.push(getitem(frame, obj, _slice(start, end)))


@handler("STORE_SLICE", min_version=(3, 12))
def store_slice(frame, inst):
    end, start, obj, value = frame.pop(), frame.pop(), frame.pop(), frame.pop()
    setitem(frame, obj, _slice(start, end), value)
