"""Python functions: real ones read from the program (`FunctionValue`), ones made by MAKE_FUNCTION
while tracing (`ClosureValue`), and closure cells (`CellValue`).

Calling one inlines it: its body runs in a child interpreter frame (`frame.inline`), after the
arguments are bound as CPython binds them (`bind_args`). Before that, a call is checked against
the modelled callables (`semantics.modelled`: builtins, library functions the tracer knows) and
the skip rules (functions of the standard library or torch internals are graph ops, breaks or
not traced).
"""
from __future__ import annotations

import functools
import inspect
import operator
import types
import torch

from ..breaks import (CLOSURE_ESCAPES, DISABLED_FUNCTION, EXPLICIT_BREAK, PRINT_OR_LOG, SKIPPED_FILE, TORCH_DISABLED,
                      UNSUPPORTED_ATTRIBUTE,
                      TracedException, Unsupported, user_error)
from ..fallback import skip
from .. import semantics
from ..semantics import modelled
from ..sources import AttrSource, ItemSource
from .base import Const, LazyValue, MethodValue, Value, is_constant, missing_attribute, reaches
from .containers import DictValue, SeqValue
from .tensors import mode_dispatch, torch_call


def _is_module_method_call(f, args) -> bool:
    """`f(module, ...)` where `f` is a function of the module's class (a method called on it): a
    module is never a graph op's argument, so such a method of a torch-defined class is inlined."""
    if not args or not isinstance(args[0].python_type(), type) or not issubclass(args[0].python_type(), torch.nn.Module):
        return False
    # nn.Module's own methods (register_buffer, __setattr__, ...) change the module's tables, which
    # ModuleValue models itself: they are not inlined
    return getattr(args[0].python_type(), f.__name__, None) is f and getattr(torch.nn.Module, f.__name__, None) is not f


class FunctionValue(Value):
    """A real Python function whose body we inline when it is called. One read from the program
    is guarded by what it is made of (wrap.py: FunctionMatch) where it can be; `pin` then holds
    the identity guard to add once the trace depends on *which* function object it is."""
    __slots__ = ("fn", "pin")

    def __init__(self, fn: types.FunctionType, source=None, pin=None):
        super().__init__(source)
        self.fn = fn
        self.pin = pin                   # (tracer, IdMatch guard) or None

    def python_type(self):
        return types.FunctionType

    def _pinned(self):
        if self.pin is not None:
            tracer, guard = self.pin
            tracer.add_guard(guard)
        return self.fn

    def real_object(self):
        return self._pinned()

    def identity(self):
        return id(self._pinned())

    def as_python(self):
        return self._pinned()

    def truthy(self, frame):
        return True

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
        else:
            em.const(self.fn)

    def load_attr(self, frame, name):
        if name == "__get__":
            return MethodValue(self, name)
        try:
            value = getattr(self.fn, name)
        except AttributeError:
            raise missing_attribute(frame, self, name) from None
        return frame.wrap(value, AttrSource(self.source, name) if self.source is not None else None)

    def call_method(self, frame, method, args, kwargs):
        if method == "__get__" and not kwargs and 1 <= len(args) <= 2:
            # the descriptor protocol by hand (`func.__get__(obj, cls)`, as lr_scheduler's step wrapper
            # binds the optimizer's step): a method of obj, or the function itself for obj None
            obj = args[0]
            return self if obj.is_python_constant() and obj.as_python() is None else MethodValue(obj, self.fn)
        return super().call_method(frame, method, args, kwargs)

    def call(self, frame, args, kwargs):
        f = self.fn                      # calling depends on its code, defaults and closure, all guarded
        result = mode_dispatch(frame, f, args, kwargs, call=True)
        if result is not NotImplemented:
            return result
        handler = modelled(f)
        if handler is not None:
            result = handler(frame, args, kwargs)
            if result is not NotImplemented:
                return result
        rule = skip.call_rule(f)
        if rule == skip.UNWRAP:
            return frame.wrap(skip.unwrapped(f), None).call(frame, args, kwargs)
        if rule == skip.DISABLED:
            raise Unsupported(DISABLED_FUNCTION, f.__qualname__)
        if rule == skip.TORCH_DISABLED:
            raise Unsupported(TORCH_DISABLED, f.__qualname__)
        if rule == skip.BREAK:
            raise Unsupported(EXPLICIT_BREAK, "dynamo_lite.graph_break()")
        if rule == skip.GRAPH_OP and _is_module_method_call(f, args):
            rule = skip.INLINE   # a method of a module class torch defines outside torch.nn.modules (FloatFunctional.cat)
        if rule == skip.GRAPH_OP and not skip.is_torch_namespace(f):
            return frame.tracer.graph.call("call_function", f, tuple(args), kwargs)
        if rule == skip.GRAPH_OP:
            return torch_call(frame, f, args, kwargs)
        if rule == skip.SKIPPED:
            if skip.is_printer(f):
                raise Unsupported(PRINT_OR_LOG, f.__qualname__)
            raise Unsupported(SKIPPED_FILE, f"{f.__module__}.{f.__qualname__}")
        return self.inline_call(frame, args, kwargs)

    def inline_call(self, frame, args, kwargs):
        """Run the function's code in a child frame, whatever the skip rules say of its file (a
        TorchFunctionMode's `__torch_function__` that torch itself defines)."""
        f = self.fn
        defaults = tuple(frame.wrap(v, self._defaults_source("__defaults__", i))
                         for i, v in enumerate(f.__defaults__ or ()))
        kwdefaults = {k: frame.wrap(v, self._defaults_source("__kwdefaults__", k))
                      for k, v in (f.__kwdefaults__ or {}).items()}
        return frame.inline(f.__code__, f.__globals__, defaults, kwdefaults, self._closure(frame), args, kwargs,
                            self.source, f.__qualname__)

    def _defaults_source(self, attr, key):
        return ItemSource(AttrSource(self.source, attr), key) if self.source is not None else None

    def _closure(self, frame) -> tuple:
        """The function's real cells, each one value per trace (so writes through one are seen
        through the others); their contents are wrapped when first read."""
        cells = []
        tracer = frame.tracer
        for i, cell in enumerate(self.fn.__closure__ or ()):
            known = tracer.wrapped.get(id(cell))
            if known is None:
                source = ItemSource(AttrSource(self.source, "__closure__"), i) if self.source is not None else None
                try:
                    contents = cell.cell_contents
                    lazy = LazyValue(contents, AttrSource(source, "cell_contents") if source is not None else None)
                except ValueError:
                    lazy = None
                known = CellValue(lazy, source)
                tracer.remember(cell, known)
            cells.append(known)
        return tuple(cells)


class CellValue(Value):
    """A closure cell created while tracing (or a real cell's contents we track). `root_name`: the
    free variable of the captured frame this cell is (written back there after the graph, whichever
    function wrote it)."""
    __slots__ = ("contents", "root_name")

    def __init__(self, contents=None, source=None, root_name=None):
        super().__init__(source)
        self.contents = contents
        self.root_name = root_name

    def python_type(self):
        return types.CellType

    def identity(self):
        return id(self)

    def children(self):
        return (self.contents,) if isinstance(self.contents, Value) else ()

    def rebuild(self, em):
        """The cell outside the trace (reloaded), the frame's own cell at a graph break (shared with
        the code after it), or else a new cell holding the contents the trace left: a cell made
        in captured code that nothing outside it has seen (a function returned, or stored, that
        closes over a variable of this frame or of a call inlined into it). Every function rebuilt
        over it gets the same new cell (`Emitter.value` makes a value referenced twice once)."""
        if self.source is not None:
            em.load_source(self.source)
        elif not em.load_frame_cell(self):
            contents = self.contents
            if isinstance(contents, Value) and reaches([contents], self):
                raise Unsupported(CLOSURE_ESCAPES, "a function made in captured code that refers to itself "
                                                   "through its own closure outlives it")
            if isinstance(contents, LazyValue):      # an argument the trace never read: as it came in
                em.call_const(types.CellType, [lambda: em.load_source(contents.source)])
            else:
                em.call_const(types.CellType, [lambda: em.value(contents)] if isinstance(contents, Value) else [])


class ClosureValue(Value):
    """A function made by MAKE_FUNCTION while tracing."""
    __slots__ = ("code", "globals", "defaults", "kwdefaults", "closure", "qualname", "attrs")

    def __init__(self, code, globals, defaults=(), kwdefaults=None, closure=(), qualname="", source=None):
        super().__init__(source)
        self.code = code
        self.globals = globals
        self.defaults = tuple(defaults)
        self.kwdefaults = dict(kwdefaults or {})
        self.closure = tuple(closure)
        self.qualname = qualname or code.co_name
        self.attrs: dict = {}     # function attributes set while tracing (functools.wraps metadata)

    def python_type(self):
        return types.FunctionType

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return True

    def children(self):
        return (*self.defaults, *self.kwdefaults.values(), *self.closure, *self.attrs.values())

    def call(self, frame, args, kwargs):
        return frame.inline(self.code, self.globals, self.defaults, self.kwdefaults, self.closure, args, kwargs, None)

    def load_attr(self, frame, name):
        if name in self.attrs:
            return self.attrs[name]
        code = self.code
        values = {"__name__": code.co_name, "__qualname__": self.qualname, "__code__": code,
                  "__doc__": code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None,
                  "__module__": self.globals.get("__name__")}
        if name in values:
            return Const(values[name])
        if name == "__defaults__":
            return SeqValue(list(self.defaults), tuple) if self.defaults else Const(None)
        if name == "__kwdefaults__":
            return DictValue(self.kwdefaults) if self.kwdefaults else Const(None)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"function.{name}")

    def store_attr(self, frame, name, value):
        self.attrs[name] = value           # a function made in this trace: nothing outside sees it yet

    def rebuild(self, em):
        """A new function object with the same code, globals, defaults and attributes, over the
        same cells: ones that exist outside the trace (reloaded), or the frame's own cells at a
        graph break (which the code after the break shares, codegen.make_break_code)."""
        if self.source is not None:
            em.load_source(self.source)
            return
        em.call_const(_make_function, [
            lambda: em.const(self.code), lambda: em.const(self.globals), lambda: em.const(self.qualname),
            lambda: em.build_tuple(list(self.defaults)), lambda: em.build_map(self.kwdefaults),
            lambda: em.build_tuple(list(self.closure)), lambda: em.build_map(self.attrs)])


def _make_function(code, globals, qualname, defaults, kwdefaults, closure, attrs):
    fn = types.FunctionType(code, globals, code.co_name, defaults or None, closure or None)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults or None
    for name, value in attrs.items():      # setattr: __name__, __doc__, ... are no __dict__ entries
        setattr(fn, name, value)
    return fn


class PartialValue(Value):
    """`functools.partial(func, *args, **keywords)`: made while tracing, or an existing one read
    from the program (then guarded by what it is made of — its function, arguments and keywords
    — not by its identity, so a partial built afresh on each call reuses the graph)."""
    __slots__ = ("func", "args", "keywords")

    def __init__(self, func: Value, args: list, keywords: dict, source=None):
        super().__init__(source)
        self.func, self.args, self.keywords = func, list(args), dict(keywords)

    def python_type(self):
        return functools.partial

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return True

    def children(self):
        return (self.func, *self.args, *self.keywords.values())

    def call(self, frame, args, kwargs):
        return self.func.call(frame, [*self.args, *args], {**self.keywords, **kwargs})

    def load_attr(self, frame, name):
        if name == "func":
            return self.func
        if name == "args":
            return SeqValue(list(self.args), tuple)
        if name == "keywords":
            return DictValue(dict(self.keywords))
        if self.source is None:          # made in this trace: its __dict__ is empty
            class_attr = inspect.getattr_static(functools.partial, name, None)
            if name != "__dict__" and is_constant(class_attr):       # __doc__, __module__: the class's
                return Const(class_attr)
            if name not in self.attrs_of_partial:
                raise missing_attribute(frame, self, name)
        raise Unsupported(UNSUPPORTED_ATTRIBUTE, f"functools.partial.{name}")

    attrs_of_partial = frozenset(dir(functools.partial))

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.call_const(_make_partial, [lambda: em.value(self.func), lambda: em.build_tuple(self.args),
                                      lambda: em.build_map(self.keywords)])


class OperatorGetterValue(Value):
    """`operator.itemgetter(*items)`, `attrgetter(*names)` or `methodcaller(name, *args, **kw)`
    made in the trace: calling it does the item / attribute reads or the method call on the
    argument, as the C object would."""
    __slots__ = ("cls", "items", "args", "kwargs")

    def __init__(self, cls, items: list, args=(), kwargs=None, source=None):
        super().__init__(source)
        self.cls, self.items, self.args, self.kwargs = cls, list(items), list(args), dict(kwargs or {})

    def python_type(self):
        return self.cls

    def identity(self):
        return id(self)

    def truthy(self, frame):
        return True

    def children(self):
        return (*self.items, *self.args, *self.kwargs.values())

    def call(self, frame, args, kwargs):
        if len(args) != 1 or kwargs:
            raise user_error(TypeError, f"{self.cls.__name__} expected 1 argument, got {len(args) + len(kwargs)}")
        obj = args[0]
        if self.cls is operator.methodcaller:
            name = self.items[0].as_python()
            return semantics.call(frame, semantics.load_attr(frame, obj, name), self.args, self.kwargs)
        if self.cls is operator.itemgetter:
            got = [semantics.getitem(frame, obj, item) for item in self.items]
        else:
            got = []
            for item in self.items:
                value = obj
                for part in item.as_python().split("."):
                    value = semantics.load_attr(frame, value, part)
                got.append(value)
        return got[0] if len(got) == 1 else SeqValue(got, tuple)

    def rebuild(self, em):
        if self.source is not None:
            em.load_source(self.source)
            return
        em.call_const(_make_operator_getter, [lambda: em.const(self.cls), lambda: em.build_tuple(self.items),
                                              lambda: em.build_tuple(self.args), lambda: em.build_map(self.kwargs)])


def _make_operator_getter(cls, items, args, kwargs):
    return cls(items[0], *args, **kwargs) if cls is operator.methodcaller else cls(*items)


def _make_partial(func, args, keywords):
    return functools.partial(func, *args, **keywords)


def binding_error(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict, args: list, kwargs: dict,
                  message: str):
    """The TypeError CPython raises for a call that cannot be bound, with its exact message: a
    stand-in function with the same code, defaults and closure shape is called with as many
    placeholders as the call has arguments. Binding fails before any of its code would run."""
    stub = types.FunctionType(code, {"__builtins__": {}}, code.co_name, tuple(None for _ in defaults) or None,
                              tuple(types.CellType() for _ in code.co_freevars) or None)
    stub.__kwdefaults__ = {k: None for k in kwdefaults} or None
    stub.__qualname__ = name
    try:                             # (were it to bind, its body could reach nothing: no globals, no builtins)
        stub(*[None] * len(args), **{k: None for k in kwargs})
    except TypeError as e:
        return TracedException(e)
    except Exception:                # noqa: BLE001 -- not reached: binding failed (our binder said so)
        pass
    return user_error(TypeError, message)


def bind_args(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict, args: list, kwargs: dict) -> dict:
    """Parameter name -> value, as CPython binds a call's arguments (a TypeError otherwise, with
    CPython's message, which names the function by `name`, its qualified name)."""
    try:
        return _bind(code, name, defaults, kwdefaults, args, kwargs)
    except TracedException as e:
        raise binding_error(code, name, defaults, kwdefaults, args, kwargs, str(e.exc)) from None


def _bind(code: types.CodeType, name: str, defaults: tuple, kwdefaults: dict, args: list, kwargs: dict) -> dict:
    nargs, nkwonly, nposonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nargs], names[nargs:nargs + nkwonly]
    i = nargs + nkwonly
    varargs = names[i] if code.co_flags & 0x04 else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & 0x08 else None
    bound: dict = {}
    for pname, value in zip(positional, args):
        bound[pname] = value
    extra = args[nargs:]
    if extra and varargs is None:
        raise user_error(TypeError, f"{name}() takes {nargs} positional arguments but {len(args)} were given")
    extra_kw = {}
    for key, value in kwargs.items():
        if key in positional[nposonly:] or key in kwonly:
            if key in bound:
                raise user_error(TypeError, f"{name}() got multiple values for argument {key!r}")
            bound[key] = value
        elif varkw is not None:
            extra_kw[key] = value
        else:
            raise user_error(TypeError, f"{name}() got an unexpected keyword argument {key!r}")
    first_default = nargs - len(defaults)
    for j, pname in enumerate(positional):
        if pname not in bound:
            if j >= first_default:
                bound[pname] = defaults[j - first_default]
            else:
                raise user_error(TypeError, f"{name}() missing 1 required positional argument: {pname!r}")
    for pname in kwonly:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise user_error(TypeError, f"{name}() missing 1 required keyword-only argument: {pname!r}")
    if varargs is not None:
        bound[varargs] = SeqValue(extra, tuple)
    if varkw is not None:
        bound[varkw] = DictValue(extra_kw, dict)
    return bound
