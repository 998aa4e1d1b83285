"""The registry of reasons a frame (or part of one) cannot be put in a graph.

Each kind has a stable id, a one-line explanation and a hint the user can act on. Every place in
the tracer that cannot capture something raises `Unsupported(kind, detail)`; nothing raises a
bare exception on purpose. `GraphBreakError` is what users see with `fullgraph=True`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BreakKind:
    id: str
    name: str
    explanation: str
    hint: str


KINDS: dict[str, BreakKind] = {}


def _kind(id: str, name: str, explanation: str, hint: str) -> BreakKind:
    assert id not in KINDS, id
    KINDS[id] = BreakKind(id, name, explanation, hint)
    return KINDS[id]


UNSUPPORTED_OPCODE = _kind(
    "DL001", "unsupported-opcode", "this bytecode instruction is not handled by the tracer",
    "rewrite the construct (e.g. move it into a helper called outside the captured function) or report it")
DATA_DEPENDENT_BRANCH = _kind(
    "DL002", "data-dependent-branch", "control flow depends on the value inside a tensor",
    "use torch.where / masking instead of `if tensor:`, or compute the condition outside the captured code")
TENSOR_TO_PYTHON = _kind(
    "DL003", "tensor-to-python", "a tensor's data is turned into a Python value (.item(), .tolist(), bool(), int())",
    "keep the value as a tensor (e.g. multiply by a 0-d tensor instead of a float)")
DYNAMIC_OUTPUT_SHAPE = _kind(
    "DL004", "dynamic-output-shape", "the op's output shape depends on tensor data (nonzero, unique, boolean masks)",
    "use fixed-shape alternatives such as torch.where(mask, x, 0) or pass a size argument")
PRINT_OR_LOG = _kind(
    "DL005", "print-or-log", "print/logging/warnings produce output that must happen in program order",
    "remove the print from the hot path or guard it with a flag read outside the captured code")
UNKNOWN_CALL = _kind(
    "DL006", "unknown-call", "a call the tracer does not model: a callable object, a constructor or a Python "
    "function used in a way it cannot follow",
    "wrap the call in a function decorated with @dynamo_lite.disable, or use the torch equivalent")
EXPLICIT_BREAK = _kind(
    "DL007", "explicit-graph-break", "dynamo_lite.graph_break() was called",
    "remove the call if a single graph is wanted")
UNSUPPORTED_ATTRIBUTE = _kind(
    "DL008", "unsupported-attribute", "reading or writing this attribute is not modelled",
    "read the attribute before calling the captured function and pass it in")
UNSUPPORTED_VALUE = _kind(
    "DL009", "unsupported-value", "an operation on a Python value of a type the tracer does not model",
    "pass tensors and plain Python values (numbers, tuples, lists, dicts) into captured code")
USER_EXCEPTION = _kind(
    "DL010", "user-exception", "the traced code raises an exception (or an op failed while tracing)",
    "the frame runs eagerly, so the exception reaches you unchanged; fix the error it reports")
INLINE_LIMIT = _kind(
    "DL011", "inline-limit", "calls are nested too deeply (or recursive) to inline",
    "raise dynamo_lite.config.inline_depth_limit or make the recursion iterative")
INSTRUCTION_LIMIT = _kind(
    "DL012", "instruction-limit", "the frame runs too many instructions to trace (a very long loop?)",
    "move the long Python loop out of the captured code or raise dynamo_lite.config.instruction_limit")
UNSUPPORTED_MUTATION = _kind(
    "DL013", "unsupported-mutation", "a mutation of a Python object the tracer cannot replay",
    "mutate the object outside the captured function, or return the new value instead")
DISABLED_FUNCTION = _kind(
    "DL014", "disabled-function", "the function is marked with @dynamo_lite.disable",
    "remove the decorator if the function should be captured")
GENERATOR_FRAME = _kind(
    "DL015", "generator-frame", "generator and coroutine frames are not captured",
    "capture the function that consumes the generator instead")
TENSOR_SUBCLASS = _kind(
    "DL016", "tensor-subclass", "tensor subclasses (other than nn.Parameter) are not traced",
    "pass plain tensors, or call .as_subclass(torch.Tensor) before the captured code")
SKIPPED_FILE = _kind(
    "DL017", "skipped-code", "the called function lives in code the tracer does not trace (stdlib, torch internals)",
    "if the function is pure tensor code, mark it with dynamo_lite.allow_in_graph")


TRY_BLOCK = _kind(
    "DL018", "try-block", "a graph with ops inside a try block also writes into its inputs, so a run-time error "
    "in it could not be retried eagerly for the except/finally to see it",
    "move the in-place op out of the try block, or catch the error outside the captured function")


COPY_NOT_MODELLED = _kind(
    "DL019", "copy-not-modelled", "copy.copy / copy.deepcopy of a value whose copy the tracer cannot reproduce "
    "exactly (a tensor, a module, an object whose class has its own __deepcopy__/__reduce__/__getstate__)",
    "copy it before calling the captured function; for a tensor use .clone() (or .detach().clone())")
EXTERNAL_ITERATOR = _kind(
    "DL020", "external-iterator", "an iterator or generator made outside the captured code is advanced in it: its "
    "position lives outside the frame, where it can be neither guarded nor replayed",
    "pass the items (a list or tuple) instead of an iterator, or make the iterator inside the captured function")
GENERATOR_STATE = _kind(
    "DL021", "generator-state", "a generator or lazy iterator made in captured code outlives it part-way (returned, "
    "stored, live at a graph break, or dropped while suspended inside try/with, whose cleanup runs when it is "
    "closed): its suspended state cannot be rebuilt after the graph",
    "consume the generator inside the captured function (e.g. list(gen)), or make it outside")
BREAK_IN_HANDLER = _kind(
    "DL022", "break-in-handler", "a graph break inside an except/finally block while it handles an exception: the "
    "exception being handled lives in the interpreter's state, which the code resumed after the break would not "
    "see (a bare `raise`, sys.exc_info())",
    "move the unsupported call out of the except/finally block, e.g. keep the exception in a variable and act on "
    "it after the try statement")
BREAK_IN_WITH = _kind(
    "DL023", "break-in-with-block", "a graph break inside a `with` block on a context manager other than a grad mode "
    "or autocast (or a grad-mode block inside a try block): the resumed code cannot re-enter the block",
    "move the unsupported call out of the `with` block, or the `with` block out of the captured function")
UNRESUMABLE_INSTRUCTION = _kind(
    "DL024", "unresumable-instruction", "the break falls on an instruction the resumed code cannot start after (it "
    "pushes a NULL whose presence is decided at run time, or is part of a jump, a `with` or a return)",
    "move the unsupported call into its own statement, or into a helper function")
RETRACE_MISMATCH = _kind(
    "DL025", "retrace-mismatch", "tracing the frame a second time, up to the break, did not reach the same "
    "instruction (the trace depends on something that changed between the two traces)",
    "please report it with the code of the frame; the frame runs eagerly, so results are unaffected")
INTERNAL_ERROR = _kind(
    "DL026", "internal-error", "dynamo_lite failed while capturing the frame, or its captured code failed where "
    "eager did not (a bug of ours); the frame ran eagerly and is not captured again",
    "please report it with DYNAMO_LITE_LOG=graph_breaks output; results are unaffected")
BACKEND_ERROR = _kind(
    "DL027", "backend-error", "the backend failed to compile a graph of the frame; the frame ran eagerly",
    "try backend='eager' to check capture alone, and report the backend's error")
TORCH_NON_TENSOR_OP = _kind(
    "DL028", "torch-non-tensor-op", "a torch function that changes global state or does not compute on tensors "
    "(torch.cuda.*, torch.distributed.*, torch.jit.*, torch.utils.*, random-state functions...)",
    "call it before the captured function, or wrap the call in a function decorated with @dynamo_lite.disable")
C_FUNCTION = _kind(
    "DL029", "c-function", "a function or method written in C by a library other than torch: what it reads and "
    "changes is invisible to the tracer",
    "if it is pure and works on tensors, mark it with dynamo_lite.allow_in_graph; else compute its result "
    "before the captured call")
BUILTIN_TYPE_METHOD = _kind(
    "DL030", "builtin-type-method", "a method of a built-in type (str, bytes, list, dict, set, int...) or a "
    "built-in function the tracer does not model",
    "use an equivalent operation the tracer models (see docs/architecture.md), or report the method")
LOOP_SPECIALIZED = _kind(
    "DL031", "loop-specialized", "a stretch of a loop body between graph breaks needed a new graph on each iteration "
    "(the iterations differ in what its guards check: another module, an index into a list of modules, a value "
    "that cannot be a graph input): the rest of the loop runs eagerly, its calls captured on their own",
    "make the iterations alike (iterate over the modules rather than index them with the counter), move the "
    "break out of the loop, or raise dynamo_lite.config.loop_stretch_limit")

HIGHER_ORDER_EFFECT = _kind(
    "DL032", "higher-order-effect", "the function given to torch.cond, torch.func.vmap, grad, jacrev, ... has an "
    "effect beyond computing its result (it writes to a list, attribute, global or nonlocal that outlives it, "
    "changes grad mode, or writes in place into its inputs or the tensors it closes over): the op may run it "
    "twice, or batched, so it is not put in a graph and the call runs eagerly",
    "make the function pure tensor code that returns what it computes; do the Python-side bookkeeping on its "
    "result, outside the function")
CLOSURE_ESCAPES = _kind(
    "DL033", "closure-escapes", "a function made in captured code that refers to itself through its closure "
    "(a recursive nested function) outlives the captured code (returned, stored, or live at a graph break)",
    "define the function outside the captured function, or pass what it needs as arguments (functools.partial)")
NEEDS_REAL_OBJECT = _kind(
    "DL034", "needs-real-object", "an object the tracer only models (made, or read, in captured code) is used where "
    "its real Python object is needed: passed to C code, formatted, hashed, compared by a function not modelled",
    "pass plain values (numbers, strings, tuples) or tensors there, or build the object before the captured call")
NOT_ITERABLE_MODEL = _kind(
    "DL035", "iteration-not-modelled", "iterating an object whose iteration the tracer does not model (a C type's "
    "__iter__, a view or iterator of an object it cannot follow)",
    "iterate over a list or tuple of the items, or give the class an __iter__ written in Python")
TORCH_DISABLED = _kind(
    "DL036", "torch-disabled", "torch marks this function of its own as not to be traced by a compiler "
    "(`torch._disable_dynamo`: Optimizer.zero_grad, state_dict, add_param_group, ...): it runs as it is, as "
    "under TorchDynamo (Python functions it calls back are still captured)",
    "call it outside the captured function if the break matters")
SELF_INVALIDATING = _kind(
    "DL037", "self-invalidating", "the capture's own writes change what its guards check (a dict or list it "
    "fills lazily: an optimizer's first step making its state), so its graph could never run again: the frame "
    "ran eagerly this once, without compiling that graph, and is captured on its next call",
    "nothing to do; to capture the first call too, create the state before it (e.g. run one step eagerly)")
LOOP_HEAD = _kind(
    "DL038", "loop-head", "a `for` loop holds a graph break: the stretch before it ends at the loop's head, and each "
    "iteration runs its next() as Python and the body's stretches from graphs cached once for every iteration "
    "(the break inside the loop is reported on its own)",
    "nothing to do; move the break out of the loop to have one graph for the loop")
FUNCTION_MODE = _kind(
    "DL039", "function-mode", "a tensor operation inside the `with` block of a TorchFunctionMode entered in captured "
    "code could not be handed to the mode's __torch_function__ as torch hands it (an argument the tracer cannot show "
    "the mode, an operation that reaches the graph another way), or the mode is of a kind the tracer does not model",
    "enter the mode outside the captured function, or move the operation out of the mode's block")

WITH_ENTERED_FOR_REAL = _kind(
    "DL040", "with-entered-for-real", "a graph break inside the `with` block of a context manager made in captured "
    "code (a generator-based @contextmanager, a class with __enter__/__exit__): its state cannot be handed on at "
    "the break, so the `with` statement itself runs as Python, and the block's body resumes in a function that gets "
    "the real context manager (the break inside the block is reported on its own)",
    "nothing to do; move the break out of the `with` block to keep the block in one graph")


def event_kind(event: dict) -> str:
    """The kind a report's event (a FrameEvent as saved in JSON) counts under: for a frame run
    eagerly, why it could not resume when that has a kind of its own, else the break's kind."""
    return event.get("fallback_kind_id") or event["kind_id"]


class Unsupported(Exception):
    """Raised while tracing when something cannot go into a graph."""

    def __init__(self, kind: BreakKind, detail: str = ""):
        super().__init__(f"{kind.name}: {detail}" if detail else kind.name)
        self.kind = kind
        self.detail = detail
        self.user_stack: list[tuple[str, int, str]] = []   # (filename, lineno, function), outermost first


class TracedException(Unsupported):
    """The traced code raises `exc` (a real exception object) at a point where the guards make that
    repeatable: a missing attribute (guarded absent), a missing dict key, an index out of range,
    an exception raised on constants or by `raise`. The tracer hands it to the except/finally
    blocks of the traced code, like CPython would; if no frame handles it, it is a graph break
    (DL010) and the instruction runs eagerly, raising the same exception for real."""

    def __init__(self, exc: BaseException, detail: str = ""):
        super().__init__(USER_EXCEPTION, detail or f"{type(exc).__name__}: {exc}")
        self.exc = exc


def user_error(exc_type: type, *args) -> TracedException:
    """`raise user_error(KeyError, key)`: the exception eager Python would raise here."""
    return TracedException(exc_type(*args))


@dataclass
class GraphBreakError(RuntimeError):
    """Raised instead of falling back when capture(..., fullgraph=True) cannot make one graph."""
    kind: BreakKind
    detail: str
    location: str = ""
    source_line: str = ""
    user_stack: list = field(default_factory=list)

    def __post_init__(self):
        RuntimeError.__init__(self, str(self))

    def __str__(self):
        where = f" at {self.location}" if self.location else ""
        line = f"\n    {self.source_line.strip()}" if self.source_line else ""
        return (f"[{self.kind.id} {self.kind.name}]{where}: {self.kind.explanation}"
                f"{' (' + self.detail + ')' if self.detail else ''}{line}\n  hint: {self.kind.hint}")
