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
    "DL006", "unknown-call", "a call into C code or a library the tracer does not model",
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
