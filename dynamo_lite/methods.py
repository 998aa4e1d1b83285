"""Methods of values we model by table: tensors (graph nodes), lists, tuples, dicts, sets,
constants (pure methods of immutable values), grad-mode context managers and a few existing
objects (ContextVar)."""
from __future__ import annotations

import contextvars

import torch

from . import breaks, context_vars
from .breaks import TracedException, Unsupported, user_error
from .operators import python_value, truthy
from .values import AutocastValue, Const, DictValue, GradModeValue, ObjectValue, SeqValue, SetValue, TensorValue


def _calls():
    from . import calls
    return calls


def _tensor(frame, obj, name, args, kwargs):
    return _calls().tensor_method(frame, obj, name, args, kwargs)


def _list_mutator(frame, obj: SeqValue, name, args, kwargs):
    items = obj.items
    frame.tracer.mutate(obj)
    if name == "append":
        items.append(args[0])
    elif name == "extend":
        items.extend(_calls().iterate(frame, args[0]))
    elif name == "insert":
        items.insert(python_value(args[0]), args[1])
    elif name == "pop":
        index = python_value(args[0]) if args else -1
        if not items:
            raise user_error(IndexError, "pop from empty list")
        return items.pop(index)
    elif name == "clear":
        items.clear()
    elif name == "reverse":
        items.reverse()
    elif name == "remove":
        target = python_value(args[0])
        for i, x in enumerate(items):
            if isinstance(x, Const) and x.value == target:
                del items[i]
                break
        else:
            raise user_error(ValueError, "list.remove(x): x not in list")
    elif name == "sort":
        values = [python_value(i) for i in items]
        if "key" in kwargs:
            raise Unsupported(breaks.UNSUPPORTED_VALUE, "list.sort(key=...)")
        values.sort(reverse=python_value(kwargs.get("reverse", Const(False))))
        items[:] = [Const(v) for v in values]
    return Const(None)


_LIST_MUTATORS = {"append", "extend", "insert", "pop", "clear", "reverse", "remove", "sort"}


def _seq(frame, obj: SeqValue, name, args, kwargs):
    if obj.is_list and name in _LIST_MUTATORS:
        return _list_mutator(frame, obj, name, args, kwargs)
    if name == "copy" and obj.is_list:
        return SeqValue(list(obj.items), list)
    if name == "__getitem__":
        return _calls().getitem(frame, obj, args[0])
    if name == "__len__":
        return Const(len(obj.items))
    if name == "numel" and obj.cls is torch.Size:     # a Size with symbolic entries
        from .operators import binary
        import operator
        total = Const(1)
        for item in obj.items:
            total = binary(frame.tracer, operator.mul, total, item)
        return total
    if name == "_asdict":
        return DictValue(dict(zip(obj.cls._fields, obj.items)), dict)
    if name == "_replace":
        fields = list(obj.cls._fields)
        items = list(obj.items)
        for k, v in kwargs.items():
            items[fields.index(k)] = v
        return SeqValue(items, obj.cls)
    if name in ("index", "count"):
        target = args[0]
        from .operators import identical
        matches = [i for i, x in enumerate(obj.items)
                   if identical(x, target) or (isinstance(x, Const) and isinstance(target, Const) and x.value == target.value)]
        if name == "count":
            return Const(len(matches))
        if not matches:
            raise Unsupported(breaks.USER_EXCEPTION, "ValueError: not in sequence")
        return Const(matches[0])
    raise Unsupported(breaks.UNKNOWN_CALL, f"{obj.cls.__name__}.{name}")


def _dict(frame, obj: DictValue, name, args, kwargs):
    items = obj.items
    if name == "keys":
        return SeqValue([Const(k) for k in items], tuple)
    if name == "values":
        return SeqValue(list(items.values()), tuple)
    if name == "items":
        return SeqValue([SeqValue([Const(k), v], tuple) for k, v in items.items()], tuple)
    if name == "get":
        key = python_value(args[0])
        return items.get(key, args[1] if len(args) > 1 else Const(None))
    if name == "__getitem__":
        return _calls().getitem(frame, obj, args[0])
    if name == "__contains__":
        return Const(python_value(args[0]) in items)
    if name == "copy":
        return DictValue(dict(items), obj.cls)
    frame.tracer.mutate(obj)
    if name == "update":
        if args:
            other = args[0]
            if isinstance(other, DictValue):
                items.update(other.items)
            else:
                for pair in _calls().iterate(frame, other):
                    k, v = _calls().iterate(frame, pair)
                    items[python_value(k)] = v
        items.update(kwargs)
        return Const(None)
    if name == "setdefault":
        key = python_value(args[0])
        if key not in items:
            items[key] = args[1] if len(args) > 1 else Const(None)
        return items[key]
    if name == "pop":
        key = python_value(args[0])
        if key in items:
            return items.pop(key)
        if len(args) > 1:
            return args[1]
        raise user_error(KeyError, key)
    if name == "clear":
        items.clear()
        return Const(None)
    if name == "__setitem__":
        items[python_value(args[0])] = args[1]
        return Const(None)
    raise Unsupported(breaks.UNKNOWN_CALL, f"dict.{name}")


def _set(frame, obj: SetValue, name, args, kwargs):
    values = [python_value(i) for i in obj.items]
    if name in ("add", "update", "discard", "remove", "clear", "pop"):
        if obj.cls is frozenset:
            raise Unsupported(breaks.USER_EXCEPTION, f"AttributeError: frozenset has no {name}")
        frame.tracer.mutate(obj)
        real = set(values)
        try:
            result = getattr(real, name)(*[set(python_value(a)) if name == "update" else python_value(a) for a in args])
        except KeyError as e:
            raise TracedException(e)
        obj.items = [Const(v) for v in dict.fromkeys(values) if v in real] + [Const(v) for v in real if v not in values]
        return Const(result)
    try:
        result = getattr(obj.cls(values), name)(*[python_value(a) for a in args])
    except Exception as e:
        raise TracedException(e)
    if isinstance(result, (set, frozenset)):
        return SetValue([Const(v) for v in result], type(result))
    return Const(result)


_PURE_CONST_TYPES = (str, bytes, int, float, complex, bool, tuple, frozenset, range, slice, torch.Size, torch.dtype,
                     torch.device, type(None))


def _const(frame, obj: Const, name, args, kwargs):
    from . import numpy_values
    if numpy_values.is_array(obj.value):
        return numpy_values.array_method(frame, obj.value, name, args, kwargs)
    if not isinstance(obj.value, _PURE_CONST_TYPES):
        raise Unsupported(breaks.UNKNOWN_CALL, f"{type(obj.value).__name__}.{name}")
    if any(isinstance(a, TensorValue) for a in [*args, *kwargs.values()]):
        raise Unsupported(breaks.TENSOR_TO_PYTHON, f"{type(obj.value).__name__}.{name}(tensor)")
    try:
        result = getattr(obj.value, name)(*[python_value(a) for a in args],
                                          **{k: python_value(v) for k, v in kwargs.items()})
    except Unsupported:
        raise
    except Exception as e:
        raise TracedException(e)
    from .wrap import wrap
    return wrap(frame.tracer, result, None)


def _grad_mode(frame, obj: GradModeValue, name, args, kwargs):
    tracer = frame.tracer
    if obj.enabled is None:                      # contextlib.nullcontext()
        return Const(None) if name == "__enter__" else Const(False)
    if name == "__enter__":
        obj.previous = tracer.graph.grad_enabled
        tracer.set_grad_enabled(obj.enabled)
        return Const(None)
    if name == "__exit__":
        previous = obj.previous if obj.previous is not None else tracer.graph.grad_enabled
        tracer.set_grad_enabled(previous)
        return Const(False)
    raise Unsupported(breaks.UNKNOWN_CALL, f"grad mode.{name}")


def _autocast(frame, obj: AutocastValue, name, args, kwargs):
    graph = frame.tracer.graph
    if name == "__enter__":
        obj.previous = (*graph.autocast[obj.device], graph.autocast_cache)
        graph.set_autocast(obj.device, obj.enabled, obj.dtype, obj.cache, entering=True)
        return Const(None)
    if name == "__exit__" and obj.previous is not None:
        graph.set_autocast(obj.device, *obj.previous, entering=False)
        return Const(False)
    raise Unsupported(breaks.UNKNOWN_CALL, f"autocast.{name}")


def _existing_object(frame, obj: ObjectValue, name, args, kwargs):
    if isinstance(obj.obj, contextvars.ContextVar):
        return context_vars.call_method(frame, obj, name, args, kwargs)
    raise Unsupported(breaks.UNKNOWN_CALL, f"{type(obj.obj).__name__}.{name}")


METHOD_TABLES = {TensorValue: _tensor, SeqValue: _seq, DictValue: _dict, SetValue: _set, Const: _const,
                 GradModeValue: _grad_mode, AutocastValue: _autocast, ObjectValue: _existing_object}
