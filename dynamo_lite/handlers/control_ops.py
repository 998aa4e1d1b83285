"""Jumps, loops, returns, `with` blocks, generators (yield, yield from), raise and except blocks."""
from __future__ import annotations

import types

from .. import breaks
from ..breaks import TracedException, Unsupported
from ..compat import (END_FOR_POPS, FOR_ITER_EXIT_SKIPS, POP_JUMP_IF_FALSE, POP_JUMP_IF_NONE, POP_JUMP_IF_NOT_NONE,
                      POP_JUMP_IF_TRUE, SEND_KEEPS_RECEIVER, UNCONDITIONAL_JUMPS)
from ..semantics import call, get_iter, load_attr, modelled, next_item, truthy
from ..fallback import skip
from ..values.base import Const, MethodValue, Value, kind_name
from ..values.functions import FunctionValue
from ..values.iterators import GeneratorValue, send_to
from ..values.objects import plain_exception_class, python_function
from ..values.contexts import block_exit
from ..values.objects import ObjectValue
from ..values.tensors import TensorValue
from .registry import handler


@handler(*UNCONDITIONAL_JUMPS)
def jump(frame, inst):
    frame.jump(inst.argval)


def _is_none(v: Value) -> bool:
    return isinstance(v, Const) and v.value is None


def _conditional(test):
    def handle(frame, inst):
        if test(frame, frame.pop()):
            frame.jump(inst.argval)
    return handle


def _tensor_conditional(jump_when: bool):
    """POP_JUMP_IF_TRUE/FALSE. On a tensor that only decides an `assert` (one side raises
    AssertionError at once), the check becomes a graph node raising it like eager, and tracing
    goes on along the other side: no graph break."""
    def handle(frame, inst):
        value = frame.pop()
        if isinstance(value, TensorValue):
            taken = _assert_on_tensor(frame, inst, value, jump_when)
            if taken is not None:
                if taken:
                    frame.jump(inst.argval)
                return
        if truthy(frame, value) == jump_when:
            frame.jump(inst.argval)
    return handle


def _assert_on_tensor(frame, inst, value: TensorValue, jump_when: bool):
    """Whether the jump is taken after the assert node, or None when this is no assert (or when
    Python-level side effects are pending after writes into the graph's inputs: they are replayed
    after the graph, and must have happened when the assert raises, `check_may_follow_effects`)."""
    if not frame.tracer.graph.check_may_follow_effects(frame.tracer.effects):
        return None
    fall_through = frame.instructions[frame.ip].offset
    for raises_at, taken in ((fall_through, True), (inst.argval, False)):
        message = _assertion_block(frame, raises_at)
        if message is not None:
            # the assert holds when the tensor's truth value sends control away from the raise
            frame.tracer.graph.assertion(value, jump_when if taken else not jump_when, message,
                                         bool(frame.tracer.effects))
            return taken
    return None


def _assertion_block(frame, offset):
    """The message args of `raise AssertionError(msg)` starting at `offset` ((), (msg,)), else None."""
    insts = frame.instructions[frame.index_of[offset]:]
    names = [i.opname for i in insts[:5]]
    if names[:2] == ["LOAD_ASSERTION_ERROR", "RAISE_VARARGS"]:
        return ()
    calls = [n for n in names[2:] if n != "PRECALL"]
    if names[:2] == ["LOAD_ASSERTION_ERROR", "LOAD_CONST"] and calls[:2] == ["CALL", "RAISE_VARARGS"] \
            and insts[2 + names[2:].index("CALL")].arg == 0:
        return (insts[1].argval,)
    return None


handler(*POP_JUMP_IF_TRUE)(_tensor_conditional(True))
handler(*POP_JUMP_IF_FALSE)(_tensor_conditional(False))
handler(*POP_JUMP_IF_NONE)(_conditional(lambda f, v: _is_none(v)))
handler(*POP_JUMP_IF_NOT_NONE)(_conditional(lambda f, v: not _is_none(v)))


@handler("JUMP_IF_TRUE_OR_POP", max_version=(3, 11))
def jump_if_true_or_pop(frame, inst):
    if truthy(frame, frame.peek()):
        frame.jump(inst.argval)
    else:
        frame.pop()


@handler("JUMP_IF_FALSE_OR_POP", max_version=(3, 11))
def jump_if_false_or_pop(frame, inst):
    if not truthy(frame, frame.peek()):
        frame.jump(inst.argval)
    else:
        frame.pop()


@handler("GET_ITER")
def get_iter_op(frame, inst):
    frame.push(get_iter(frame, frame.pop()))


@handler("FOR_ITER")
def for_iter(frame, inst):
    item = next_item(frame, frame.peek())
    if item is not None:
        frame.push(item)
        return
    frame.pop()
    frame.jump(inst.argval)
    if FOR_ITER_EXIT_SKIPS and frame.instructions[frame.ip].opname == "END_FOR":
        frame.ip += FOR_ITER_EXIT_SKIPS


@handler("END_FOR", min_version=(3, 12))
def end_for(frame, inst):
    frame.popn(END_FOR_POPS)


def _finish(frame, value: Value):
    frame.return_value = value
    frame.done = True


@handler("RETURN_VALUE")
def return_value(frame, inst):
    _finish(frame, frame.pop())


@handler("RETURN_CONST", min_version=(3, 12))
def return_const(frame, inst):
    _finish(frame, frame.wrap(inst.argval, None))


# ---- generators ------------------------------------------------------------------------------
# A generator function called in traced code runs up to RETURN_GENERATOR, which suspends its
# frame; each next()/send() (values/iterators.GeneratorValue) pushes the value sent in and runs
# it to the next YIELD_VALUE, which suspends it again.

@handler("RETURN_GENERATOR")
def return_generator(frame, inst):
    if frame.parent is None:
        raise Unsupported(breaks.GENERATOR_FRAME, frame.code.co_name)
    frame.suspended = True


@handler("YIELD_VALUE")
def yield_value(frame, inst):
    if frame.parent is None:
        raise Unsupported(breaks.GENERATOR_FRAME, "yield in the captured frame")
    frame.yielded = frame.pop()
    frame.suspended = True


@handler("GET_YIELD_FROM_ITER")
def get_yield_from_iter(frame, inst):
    if not isinstance(frame.peek(), GeneratorValue):
        frame.push(get_iter(frame, frame.pop()))


@handler("SEND")
def send(frame, inst):
    """One step of `yield from`: send the value on top into the sub-iterator below it; the item it
    yields is pushed (and yielded by the YIELD_VALUE that follows); when it returns, its return
    value replaces it (3.11) or goes on top of it for END_SEND (3.12), and the jump is taken."""
    value = frame.pop()
    item, returned = send_to(frame, frame.peek(), value)
    if item is not None:
        frame.push(item)
        return
    if SEND_KEEPS_RECEIVER:
        frame.push(returned)
    else:
        frame.stack[-1] = returned
    frame.jump(inst.argval)


@handler("END_SEND", min_version=(3, 12))
def end_send(frame, inst):
    value = frame.pop()
    frame.pop()
    frame.push(value)


@handler("BEFORE_WITH")
def before_with(frame, inst):
    """`with manager:`. A grad mode or autocast block is modelled (a break inside it resumes
    inside it); any other manager whose class has Python `__enter__` and `__exit__` (a user
    class, `contextlib.contextmanager`, `contextlib.suppress`) has them inlined, looked up on the
    class as CPython does (a break inside such a block runs the frame eagerly)."""
    manager = frame.pop()
    methods = _python_context_methods(manager)
    if methods is not None:
        enter, exit_ = methods
        entered = FunctionValue(enter).call(frame, [manager], {})
        frame.push(MethodValue(manager, exit_))
        frame.push(entered)
        return
    exit_fn = load_attr(frame, manager, "__exit__")
    if block_exit(exit_fn) is None:
        raise Unsupported(breaks.UNSUPPORTED_VALUE, f"`with` on {kind_name(manager)} (its __enter__/__exit__ are "
                                                    "not Python code we trace)")
    entered = call(frame, load_attr(frame, manager, "__enter__"), [], {})
    frame.push(exit_fn)
    frame.push(entered)


def _python_context_methods(manager: Value):
    """(`__enter__`, `__exit__`) of the manager's class when both are Python functions we trace."""
    try:
        cls = manager.python_type()
    except NotImplementedError:
        return None
    enter, exit_ = python_function(cls, "__enter__"), python_function(cls, "__exit__")
    if enter is None or exit_ is None or not _traced(enter) or not _traced(exit_):
        return None
    return enter, exit_


def _traced(method) -> bool:
    """Inlined, or modelled (a TorchFunctionMode's enter and exit: function_modes.py)."""
    return skip.call_rule(method) == skip.INLINE or modelled(method) is not None


# ---- exceptions ----------------------------------------------------------------------------
# An exception the traced code raises (TracedException) goes to the frame's handler (interpreter
# `_catch`); these opcodes run the handler's bookkeeping. `tracer.exc_info` is sys.exc_info().

def _exception_object(v: Value):
    """The real exception `raise v` raises, or None when it is not one we can make."""
    real = v.real_object()
    if isinstance(real, BaseException):
        return real
    if isinstance(real, type) and issubclass(real, BaseException) and plain_exception_class(real):
        return real()       # `raise KeyError`: the class, instantiated
    return None


@handler("RAISE_VARARGS")
def raise_varargs(frame, inst):
    if inst.arg == 0:
        current = frame.tracer.exc_info
        if current is None:
            raise Unsupported(breaks.USER_EXCEPTION, "RuntimeError: No active exception to reraise")
        raise TracedException(current.obj)
    cause = frame.pop() if inst.arg == 2 else None
    exc = _exception_object(frame.pop())
    if exc is None:
        raise Unsupported(breaks.USER_EXCEPTION, "the code raises an exception")
    if cause is not None:
        cause_exc = None if isinstance(cause, Const) and cause.value is None else _exception_object(cause)
        if cause_exc is None and not isinstance(cause, Const):
            raise Unsupported(breaks.USER_EXCEPTION, f"raise {type(exc).__name__} from an unmodelled value")
        exc.__cause__ = cause_exc
    raise TracedException(exc)


@handler("RERAISE")
def reraise(frame, inst):
    exc = frame.pop()
    if inst.arg:
        frame.pop()      # the f_lasti to restore: tracing has no real frame to set it on
    raise TracedException(exc.obj)


@handler("WITH_EXCEPT_START")
def with_except_start(frame, inst):
    """An exception leaving a `with` block: its __exit__ runs — a grad mode's or autocast's
    restores the state and does not suppress it; a traced Python __exit__ decides by its result
    (the next instruction jumps on it). Stack: exit function, lasti, previous exception, exception."""
    exit_fn, exc = frame.stack[-4], frame.stack[-1]
    traced_exit = block_exit(exit_fn) is not None or isinstance(exit_fn, MethodValue) \
        and isinstance(exit_fn.fn, types.FunctionType)
    if not (traced_exit and isinstance(exc, ObjectValue) and isinstance(exc.obj, BaseException)):
        raise Unsupported(breaks.UNSUPPORTED_OPCODE, "WITH_EXCEPT_START (an exception leaving a `with` block)")
    frame.push(call(frame, exit_fn, [Const(type(exc.obj)), exc, Const(exc.obj.__traceback__)], {}))


@handler("PUSH_EXC_INFO")
def push_exc_info(frame, inst):
    exc = frame.pop()
    frame.push(frame.tracer.exc_info or Const(None))
    frame.tracer.exc_info = exc
    frame.push(exc)


@handler("POP_EXCEPT")
def pop_except(frame, inst):
    previous = frame.pop()
    frame.tracer.exc_info = None if isinstance(previous, Const) else previous


@handler("CHECK_EXC_MATCH")
def check_exc_match(frame, inst):
    classes = frame.pop().as_python()
    frame.push(Const(isinstance(frame.peek().obj, classes)))


@handler("LOAD_ASSERTION_ERROR")
def load_assertion_error(frame, inst):
    frame.push(frame.wrap(AssertionError, None))
