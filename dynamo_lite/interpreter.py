"""The symbolic loop: one `Frame` per (root or inlined) code object, one `Tracer` per capture.

The loop fetches an instruction, looks its handler up in the opcode table (handlers/), and runs
it on the frame's symbolic stack. A missing handler is an `Unsupported` break, never a crash.
The Tracer owns what the whole capture shares: the graph builder, the guards collected from the
sources read, recorded side effects and the identity map of wrapped objects.
"""
from __future__ import annotations

import dis
import functools
import types
from typing import Any, Optional

import torch

from . import breaks, config
from .breaks import TracedException, Unsupported
from .code_facts import facts
from .context_vars import ContextVarSets
from .effects import SideEffects
from .graph_builder import GraphBuilder
from .guards import GlobalStateMatch, Guard
from .guards.compile import guard_local_names
from .handlers import HANDLERS
from .sources import (ClosureSource, FromNumpySource, GlobalSource, ItemSource, LocalSource, ModuleDictSource,
                      ObjectRefSource, Scope, Source)
from .values.base import Const, LazyValue, Value
from .values.functions import CellValue, bind_args
from .values.iterators import CO_GENERATOR, GeneratorValue
from .values.objects import NewExceptionValue
from .wrap import wrap
from . import autograd_function, builtins_table, copying, func_transforms, higher_order  # noqa: F401  (they register modelled callables)
from . import function_modes
from .values import numpy_functions  # noqa: F401  (registers numpy functions as modelled callables)

# In the automatic-dynamic state of a code object (Source -> dims of a tensor seen changing), the
# entry under this key holds the sources of Python ints and floats seen changing: they become
# graph inputs.
SCALARS = "scalars"
# ... and the entry under this key the sources whose tensors' sizes depend on tensor data (what a
# break at nonzero, a boolean mask, unique ... left on a resume function's stack): every dim of a
# tensor there or inside it is symbolic from the first capture on.
DATA_DEPENDENT = "data-dependent"

_INSTRUCTIONS_CACHE: dict[types.CodeType, tuple[list, dict]] = {}


def instructions_of(code: types.CodeType) -> tuple[list[dis.Instruction], dict[int, int]]:
    cached = _INSTRUCTIONS_CACHE.get(code)
    if cached is None:
        insts = list(dis.get_instructions(code))
        cached = (insts, {inst.offset: i for i, inst in enumerate(insts)})
        if len(_INSTRUCTIONS_CACHE) > 4096:
            _INSTRUCTIONS_CACHE.clear()
        _INSTRUCTIONS_CACHE[code] = cached
    return cached


class Frame:
    def __init__(self, tracer: "Tracer", code: types.CodeType, globals_: dict, locals_: dict,
                 closure: tuple = (), parent: Optional["Frame"] = None, fn_source: Optional[Source] = None):
        self.tracer = tracer
        self.code = code
        self.instructions, self.index_of = instructions_of(code)
        self.globals = globals_
        self.builtins = globals_.get("__builtins__", __builtins__)
        if isinstance(self.builtins, types.ModuleType):
            self.builtins = self.builtins.__dict__
        self.locals: dict[str, Any] = locals_
        self.cells: dict[str, CellValue] = {}
        for name, cell in zip(code.co_freevars, closure):
            self.cells[name] = cell
        self.stack: list[Value] = []
        self.ip = 0
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.kwnames: Optional[tuple] = None
        self.return_value: Optional[Value] = None
        self.done = False
        self.stopped = False
        self.current: Optional[dis.Instruction] = None
        self.fn_source = fn_source
        self.suspended = False                  # a generator's frame stopped at a yield (or RETURN_GENERATOR)
        self.yielded: Optional[Value] = None    # what that yield gave

    # ---- stack ------------------------------------------------------------------------------
    def push(self, v: Value):
        self.stack.append(v)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list[Value]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def peek(self, depth: int = 1) -> Value:
        return self.stack[-depth]

    def jump(self, offset: int):
        self.ip = self.index_of[offset]

    # ---- names ------------------------------------------------------------------------------
    def global_source(self, name: str) -> Source:
        if self.globals is self.tracer.root_globals:
            return GlobalSource(name)
        return ItemSource(self.tracer.ref_source(self.globals), name)

    def read_local(self, name: str) -> Value:
        value = self.locals.get(name)
        if value is None:
            raise breaks.user_error(UnboundLocalError, f"cannot access local variable {name!r} where it is not "
                                                       f"associated with a value")
        if isinstance(value, LazyValue):
            value = self.locals[name] = self.wrap(value.value, value.source)
        return value

    def cell_contents(self, name: str) -> Value:
        cell = self.cells[name]
        value = cell.contents
        if value is None:
            raise breaks.user_error(NameError, f"cannot access free variable {name!r} where it is not associated "
                                               f"with a value in enclosing scope")
        if isinstance(value, LazyValue):
            value = cell.contents = self.wrap(value.value, value.source)
        return value

    # ---- what values ask of the frame -------------------------------------------------------------
    def wrap(self, value, source: Optional[Source]) -> Value:
        """The symbolic value of a real object (guarded when it has a source)."""
        return wrap(self.tracer, value, source)

    def inline(self, code, globals_, defaults, kwdefaults, closure, args, kwargs, fn_source, qualname=None) -> Value:
        """Run a call of a Python function (its code, globals, defaults and closure) in a child frame.
        `qualname` names the function in argument errors, as CPython does (the function's own)."""
        if self.depth + 1 > config.inline_depth_limit:
            raise Unsupported(breaks.INLINE_LIMIT, f"depth {self.depth + 1} at {code.co_name}")
        if code.co_flags & 0x180 or code.co_flags & 0x200:   # coroutine / async generator
            raise Unsupported(breaks.GENERATOR_FRAME, f"coroutine {code.co_name}")
        bound = bind_args(code, qualname or getattr(code, "co_qualname", code.co_name), defaults, kwdefaults, args, kwargs)
        child = Frame(self.tracer, code, globals_, bound, closure, parent=self, fn_source=fn_source)
        if code.co_flags & CO_GENERATOR:
            return self.tracer.start_generator(child)
        return self.tracer.run(child)

    def cleanup_on_exception(self) -> bool:
        """Would an exception raised where this (suspended) frame stopped run code of the program
        (an except or finally block, a `with` block's exit) before leaving it?"""
        return facts(self.code).cleanup_on_exception(self.current.offset)

    def location(self) -> tuple[str, int, str]:
        line = self.current.positions.lineno if self.current and self.current.positions else None
        return (self.code.co_filename, line or self.code.co_firstlineno, self.code.co_name)


@functools.lru_cache(maxsize=4096)
def _is_expression(text: str) -> bool:
    """Is `text` Python a guard function can evaluate (a source guards can name)? Asked for each
    tensor input of every capture with dynamic sizes: the same few texts, parsed once."""
    try:
        compile(text, "<source>", "eval")
    except SyntaxError:
        return False
    return True


class Tracer:
    """State of one capture: graph, guards, side effects, wrapped objects."""

    def __init__(self, code: types.CodeType, func: types.FunctionType, args: tuple, dynamic=None,
                 auto_dynamic: Optional[dict] = None, scalar_inputs: tuple = (int, float),
                 compiling: bool = True):
        self.code = code
        self.dynamic = dynamic                    # capture(dynamic=...): True, False or None (automatic)
        self.scalar_inputs = scalar_inputs        # the Python number types the backend takes as graph inputs
        self.compiling = compiling                # what torch.compiler.is_compiling() answers
        self.asked_compiling = False              # whether the traced code asked it
        self.auto_dynamic = auto_dynamic or {}    # Source -> dims seen changing (automatic mode)
        self.func = func
        self.args = args
        self.root_globals = func.__globals__
        self.graph = GraphBuilder()
        self.guards: list[Guard] = []
        self._guard_keys: set = set()
        self.instance_attrs: set = set()         # AttrSources read from the owner's __dict__ (Scope.instance_attrs)
        self.wrapped: dict[int, Value] = {}      # id(real object) -> its Value (aliasing, dedup)
        self.torch_by_name: set = set()          # Sources of torch's modules / classes read by name or pinned (wrap._torch_by_name)
        self.keepalive: list[Any] = []           # keeps ids in `wrapped` stable while tracing
        self.effects = SideEffects()             # writes to objects that outlive the trace, replayed after it
        self.frozen_arrays: list[tuple] = []     # (numpy array, snapshot): a graph tensor was made from it
        self.folded_arrays: list = []            # numpy arrays made while tracing from constants (values/arrays)
        self.instance_dicts: list[Value] = []    # `obj.__dict__` of objects made here (must not escape)
        self.context_vars = ContextVarSets()     # ContextVar.set() calls not yet reset
        self.dict_contents: dict[int, dict] = {}  # existing dict subclass objects read: their entries now
        self.instruction_count = 0
        self.refs: dict[int, Source] = {}
        self.current_frame: Optional[Frame] = None
        self.stop_at: Optional[int] = None       # offset in the root frame to stop before (graph break)
        self.failed_at: Optional[int] = None     # offset of the root instruction an Unsupported came from
        self.root_for_iters: dict[int, int] = {}  # root frame's FOR_ITERs run so far -> graph ops before the first
        self.exc_info: Optional[Value] = None     # the exception being handled (sys.exc_info()), as a value
        self.op_in_try: Optional[tuple] = None    # where the first graph op inside a catching try block was
        self.op_in_try_call: Optional[int] = None  # the root offset calling into that try block's frame
        self.generators: list[GeneratorValue] = []   # generators made in this trace
        self.add_guard(GlobalStateMatch.now())

    def dispatch_to_mode(self, frame: Frame, operation, args: list, kwargs: dict, call: bool) -> Value:
        """`operation(*args, **kwargs)` as the TorchFunctionMode the traced code entered sees it
        (function_modes.py; `call`: only if `operation` is a function of torch's API), or
        NotImplemented."""
        dispatch = function_modes.dispatch_call if call else function_modes.dispatch
        return dispatch(frame, operation, args, kwargs)

    # ---- guards -----------------------------------------------------------------------------
    def add_guard(self, guard: Guard):
        key = (type(guard), getattr(guard, "source", None), getattr(guard, "other", None), getattr(guard, "key", None),
               getattr(guard, "attr", None), getattr(guard, "exact", None))
        if key not in self._guard_keys:
            self._guard_keys.add(key)
            self.guards.append(guard)

    def remember(self, obj, value: Value) -> None:
        """`value` stands for the real `obj` in this trace (one value per object: aliasing)."""
        self.wrapped[id(obj)] = value
        self.keepalive.append(obj)

    def ref_source(self, obj) -> Source:
        src = self.refs.get(id(obj))
        if src is None:
            src = self.refs[id(obj)] = ObjectRefSource(obj)
            self.keepalive.append(obj)
        return src

    # ---- dynamic shapes ---------------------------------------------------------------------
    def dynamic_dims(self, source, tensor) -> tuple[set, str]:
        """Which dims of an input tensor are symbolic, and how guards reach it ("" when the capture
        is static). Parameters and buffers stay static; sizes 0 and 1 stay specialized."""
        if self.dynamic is False or source is None or (self.dynamic is None and not self.auto_dynamic):
            return set(), ""
        is_parameter, data_dependent, chain = False, False, source
        seen_data_dependent = self.auto_dynamic.get(DATA_DEPENDENT, ())
        while chain is not None:
            if isinstance(chain, (ObjectRefSource, FromNumpySource)):
                return set(), ""     # numpy arrays read from the frame keep static shapes
            if isinstance(chain, ModuleDictSource) and chain.table in ("_parameters", "_buffers"):
                is_parameter = True
            data_dependent |= chain in seen_data_dependent
            chain = getattr(chain, "owner", None)
        dims = set(range(tensor.dim())) if self.dynamic or data_dependent else set(self.auto_dynamic.get(source, ()))
        dims = set() if is_parameter else {d for d in dims if d < tensor.dim() and tensor.shape[d] >= 2}
        expr = self._guard_expr(source)
        if not _is_expression(expr):
            return set(), ""      # ShapeEnv writes its guards over this text: only a source guards can name
        return dims, expr

    def _guard_expr(self, source) -> str:
        """How the guard function spells `source` (ShapeEnv's guards are written over this text)."""
        nargs = self.code.co_argcount + self.code.co_kwonlyargcount + bool(self.code.co_flags & 0x04) \
            + bool(self.code.co_flags & 0x08)
        scope = Scope(guard_local_names(list(self.code.co_varnames[:nargs])), "___G", "___fn")
        return source.expr(scope)

    def has_dynamic_items(self, source) -> bool:
        """Does a tuple read from `source` hold numbers seen changing (`for i, x in enumerate(...)`
        resumed in a loop: the item tuple changes on each iteration)? Then it is read item by item."""
        return source is not None and any(isinstance(s, ItemSource) and s.owner == source
                                          for s in self.auto_dynamic.get(SCALARS, ()))

    def dynamic_scalar(self, source, kind: type) -> str:
        """How guards reach the Python int or float (`kind`) at `source` when it is a graph input
        (it was seen changing between calls, the capture is not static and the backend takes
        that kind), else ''."""
        if self.dynamic is False or kind not in self.scalar_inputs or source is None \
                or source not in self.auto_dynamic.get(SCALARS, ()):
            return ""
        expr = self._guard_expr(source)
        return expr if _is_expression(expr) else ""   # ShapeEnv writes its guards over this text

    # ---- state changes --------------------------------------------------------------------
    def mutate(self, container: Value):
        """A list/dict/set that exists outside the frame changed: replay its new contents."""
        self.effects.mutate(container)

    def set_grad_enabled(self, enabled: bool):
        """Grad mode changes become graph nodes, so the compiled graph switches it like eager does."""
        if enabled != self.graph.grad_enabled:
            self.graph.call("call_function", torch._C._set_grad_enabled, (Const(enabled),), {}, always_node=True)
            self.graph.grad_enabled = enabled

    # ---- running ----------------------------------------------------------------------------
    def root_frame(self) -> Frame:
        code = self.code
        nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        locals_ = {name: LazyValue(value, LocalSource(name)) for name, value in zip(code.co_varnames[:nargs], self.args)}
        closure = []
        for i, (name, cell) in enumerate(zip(code.co_freevars, self.func.__closure__ or ())):
            value = CellValue(LazyValue(cell.cell_contents, ClosureSource(i, name)) if _cell_full(cell) else None,
                              root_name=name)
            self.remember(cell, value)       # a function called here over the same cell gets this value
            closure.append(value)
        return Frame(self, code, self.root_globals, locals_, tuple(closure))

    def run(self, frame: Frame) -> Value:
        insts = frame.instructions
        root = frame.parent is None
        catching = None
        while not frame.done and not frame.suspended:
            if frame.ip >= len(insts):
                raise Unsupported(breaks.UNSUPPORTED_OPCODE, "ran off the end of the code")
            inst = insts[frame.ip]
            self.current_frame = frame
            if root and inst.offset == self.stop_at:
                frame.stopped = True
                self._leave_generators()
                return None
            frame.current = inst
            frame.ip += 1
            if root and inst.opname == "FOR_ITER" and inst.offset not in self.root_for_iters:
                self.root_for_iters[inst.offset] = self.graph.op_count()
            self.instruction_count += 1
            if self.instruction_count > config.instruction_limit:
                raise Unsupported(breaks.INSTRUCTION_LIMIT, f"more than {config.instruction_limit} instructions")
            handler = HANDLERS.get(inst.opname)
            if handler is None:
                raise Unsupported(breaks.UNSUPPORTED_OPCODE, inst.opname)
            if catching is None:
                catching = facts(frame.code).catching_ranges
            in_try = bool(catching) and any(start <= inst.offset < end for start, end in catching)
            ops_before = len(self.graph.graph.nodes) if in_try else 0
            try:
                handler(frame, inst)
            except Unsupported as e:
                if isinstance(e, TracedException):
                    self._chain(e.exc)
                    if self._catch(frame, inst, e):
                        continue
                if not e.user_stack or e.user_stack[0][:2] != frame.location()[:2]:
                    e.user_stack.insert(0, frame.location())
                if root:
                    self.failed_at = inst.offset
                raise
            finally:
                if in_try and len(self.graph.graph.nodes) != ops_before:
                    self._note_op_in_try(frame)
        if root:
            self._leave_generators()
        return frame.return_value

    # ---- generators -------------------------------------------------------------------------
    def start_generator(self, frame: Frame) -> GeneratorValue:
        """A call of a generator function: its frame runs up to RETURN_GENERATOR (which suspends
        it); the body runs as the generator is consumed (GeneratorValue)."""
        self.run(frame)
        frame.suspended = False
        generator = GeneratorValue(frame)
        self.generators.append(generator)
        return generator

    def throw_into(self, frame: Frame, exc: BaseException) -> bool:
        """Raise `exc` where the suspended `frame` stopped (generator.throw): True when a handler
        of the frame takes it, and the frame goes on from there when run."""
        frame.suspended = False
        return self._catch(frame, frame.current, TracedException(exc))

    def _leave_generators(self) -> None:
        """The trace ends (or stops at a break): the generators it leaves suspended are dropped,
        unless they escape (and their rebuild refuses). Eager closes a dropped generator when its
        last reference goes, running its finally / except / `with` exits then: a time the trace
        does not know, so a generator whose close would run code of the program is refused."""
        for generator in self.generators:
            if generator.cleanup_at_close():
                raise Unsupported(breaks.GENERATOR_STATE, f"generator {generator.frame.code.co_qualname} is left "
                                                          f"suspended inside try/with: its cleanup would run when it "
                                                          f"is closed")

    def _note_op_in_try(self, frame: Frame):
        """A graph op inside a try block: if it fails at run time, the user's except/finally must
        run (runtime.FrameRun reruns the frame eagerly, handlers included, and does not take the
        failure for one of ours); convert_frame refuses such a graph if it writes into its inputs."""
        if self.op_in_try is None:
            self.op_in_try = frame.location()
            root = frame
            while root.parent is not None:
                root = root.parent
            self.op_in_try_call = root.current.offset if root is not frame else None

    def _chain(self, exc: BaseException) -> None:
        """Raised while another exception is being handled: it becomes the new one's __context__,
        as CPython sets it (and never a cycle)."""
        handled = self.exc_info.real_object() if self.exc_info is not None else None
        if isinstance(handled, BaseException) and handled is not exc and exc.__context__ is None:
            seen = handled
            while seen is not None and seen is not exc:
                seen = seen.__context__
            if seen is None:
                exc.__context__ = handled

    def _catch(self, frame: Frame, inst, e: TracedException) -> bool:
        """Hand an exception the traced code raised to this frame's handler, as CPython would:
        unwind the stack to the handler's depth, push the exception and jump. False when the
        frame has no handler here (the exception propagates to the caller)."""
        entry = facts(frame.code).handler_at(inst.offset)
        if entry is None:
            return False
        del frame.stack[entry.depth:]
        if entry.lasti:
            frame.push(Const(inst.offset))
        known = self.wrapped.get(id(e.exc))          # raised by `raise` of an exception made while tracing
        frame.push(known if isinstance(known, NewExceptionValue) and known.obj is e.exc else NewExceptionValue(e.exc))
        frame.jump(entry.target)
        return True


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False
