"""Skip rules: which frames the hook leaves alone and how calls met while tracing are treated.

Frames of the standard library, torch internals (all but nn module `forward`s), dynamo_lite
itself and a few tool libraries are never captured. torch.nn's own modules are captured when
they are what `capture` was given, and inlined into captured code; reached from code that runs
eagerly, a module made only of torch.nn layers runs eagerly too (as under TorchDynamo): a lone
built-in layer is one kernel call already, and a graph of it adds guards and nothing else.
torch.optim is traced like user code, and its frames are captured wherever the hook meets them
(an optimizer's `step` is Python loops around tensor ops). Users extend this with `add_skip_path`,
`dynamo_lite.disable(fn)` (never trace fn) and `dynamo_lite.allow_in_graph(fn)` (put fn in the
graph as one opaque call).
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import os
import sys
import sysconfig
import types
import warnings
import weakref

import torch

INLINE, GRAPH_OP, SKIPPED, DISABLED, UNWRAP, BREAK, TORCH_DISABLED = range(7)

_DYNAMO_LITE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_TORCH_NN_MODULES = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep
# torch.optim's optimizers are Python loops over parameters and state around tensor ops (the for-loop
# and foreach implementations): traced like user code, so `opt.step()` becomes graph ops on the
# parameters and the state tensors.
_TORCH_OPTIM = os.path.join(_TORCH_DIR, "optim") + os.sep
# ... but not the learning-rate schedulers: arithmetic on a step count (an int changing on every
# call, so a traced scheduler would recapture every step) around no tensor op. Calls of them are
# breaks (skipped code) and their frames run eagerly; the optimizer step they wrap is captured.
_TORCH_LR_SCHEDULER = os.path.join(_TORCH_OPTIM, "lr_scheduler.py")


def _traced_optim(filename: str) -> bool:
    return filename.startswith(_TORCH_OPTIM) and filename != _TORCH_LR_SCHEDULER
# torch Python code traced like user code (not a graph op): the wrapper that
# `@torch.no_grad()` / `@torch.enable_grad()` put around a function; Python that only reorganises
# module state around tensor ops (parametrize.py: the `module.weight` property of a parametrized
# module and ParametrizationList; parametrizations.py: weight_norm / orthogonal / spectral_norm).
# (clip_grad.py: `clip_grad_norm_` reads and scales each parameter's `.grad`; as one graph op, a
# backend that retraces the graph to aten ran it on fake parameters without grads: nothing clipped)
_TORCH_INLINED_FILES = (os.path.join(_TORCH_DIR, "utils", "_contextlib.py"),
                        os.path.join(_TORCH_DIR, "utils", "_foreach_utils.py"),
                        *(os.path.join(_TORCH_DIR, "nn", "utils", f)
                          for f in ("parametrize.py", "parametrizations.py", "weight_norm.py", "clip_grad.py")))
# torch's own machinery that runs Python functions it was handed: the higher-order ops (eager
# torch.cond compiles its branches with TorchDynamo), torch.func (vmap/grad call the function on
# batched or grad-tracking tensors), export. TorchDynamo's own directory is not in it: its
# `disable` wrappers (torch.utils.checkpoint's) call user code we still capture.
_TORCH_MACHINERY_DIRS = tuple(os.path.join(_TORCH_DIR, d) + os.sep
                              for d in ("_functorch", "_higher_order_ops", "_export"))
_STDLIB_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_TOOL_PACKAGES = ("numpy", "rich", "pytest", "_pytest", "pluggy", "IPython", "ipykernel", "jupyter_client",
                  "hypothesis", "typing_extensions", "tqdm", "sympy", "triton", "setuptools", "pkg_resources",
                  "packaging", "filelock", "fsspec", "jinja2", "networkx", "mpmath", "bytecode", "pygments",
                  "markdown_it", "traitlets", "tornado", "zmq", "nbclient", "safetensors", "tokenizers",
                  "requests", "urllib3", "yaml", "regex")
_skip_paths: list[str] = []
# Pure-Python stdlib code worth tracing through (Mapping.get / __contains__ / keys over user classes).
_INLINED_STDLIB = (os.sep + "_collections_abc.py", "<frozen _collections_abc>")
# Pure-Python stdlib functions traced through, by code object: binding arguments to a signature
# (einops, einx) builds a BoundArguments from the values passed (`sig.bind(...)` of values that are
# not constants is traced rather than folded: values.base.Const.call_method); `contextlib.contextmanager`
# and `contextlib.suppress` context managers are entered and left in the trace.
_INLINED_STDLIB_CODES = frozenset(
    f.__code__ for f in (inspect.Signature.bind, inspect.Signature.bind_partial, inspect.Signature._bind,
                         inspect.BoundArguments.__init__, inspect.BoundArguments.apply_defaults,
                         inspect.BoundArguments.args.fget, inspect.BoundArguments.kwargs.fget,
                         inspect.BoundArguments.signature.fget, inspect.BoundArguments.__eq__,
                         contextlib.contextmanager(lambda: iter(())),
                         contextlib._GeneratorContextManagerBase.__init__,
                         contextlib._GeneratorContextManager.__enter__, contextlib._GeneratorContextManager.__exit__,
                         contextlib.suppress.__init__, contextlib.suppress.__enter__, contextlib.suppress.__exit__))
_disabled_codes: "weakref.WeakSet" = weakref.WeakSet()
_allowed_in_graph: dict[int, object] = {}


def add_skip_path(path: str) -> None:
    """Never capture frames of code under `path` (a directory or file)."""
    _skip_paths.append(os.path.abspath(path))
    is_skipped_file.cache_clear()


def _site_package(filename: str) -> str:
    marker = os.sep + "site-packages" + os.sep
    i = filename.rfind(marker)
    if i < 0:
        marker = os.sep + "dist-packages" + os.sep
        i = filename.rfind(marker)
    if i < 0:
        return ""
    return filename[i + len(marker):].split(os.sep, 1)[0]


@functools.lru_cache(maxsize=10_000)
def is_skipped_file(filename: str) -> bool:
    """(Remembered per file name: asked on every call of a frame that is left as it is and not
    cached, a key function run from eager code; forgotten when a skip path is added.)"""
    if filename.startswith("<frozen "):
        return True
    if filename.startswith(_DYNAMO_LITE_DIR) or filename.startswith(_STDLIB_DIRS) and "site-packages" not in filename:
        return True
    if filename.startswith(_TORCH_DIR):
        return True
    if _site_package(filename).split(".")[0] in _TOOL_PACKAGES:
        return True
    return any(filename.startswith(p) for p in _skip_paths)


def is_torch_nn_class(cls: type) -> bool:
    """A class torch.nn defines (nn.ReLU, nn.Linear, ...), by the file its methods live in."""
    init = cls.__dict__.get("__init__")
    filename = getattr(getattr(init, "__code__", None), "co_filename", "")
    return filename.startswith(_TORCH_NN_MODULES)


def is_torch_nn_forward(code: types.CodeType) -> bool:
    """The forward of one of torch.nn's own modules (nn.Linear, nn.Sequential, ...)."""
    return code.co_name == "forward" and code.co_filename.startswith(_TORCH_NN_MODULES)


_builtin_subtrees: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def builtin_subtree(module) -> bool:
    """Whether `module` and every module under it are torch.nn's own classes (no user code
    anywhere in its forward). Remembered per module: layers are not swapped between calls."""
    try:
        known = _builtin_subtrees.get(module)
    except TypeError:          # not weak-referenceable
        return False
    if known is None:
        known = isinstance(module, torch.nn.Module) and all(
            type(m).__module__.startswith("torch.nn.") for m in module.modules())
        _builtin_subtrees[module] = known
    return known


def skip_frame(code: types.CodeType) -> bool:
    """Should the hook leave frames of `code` alone for good?"""
    if code in _disabled_codes:
        return True
    filename = code.co_filename
    if filename.startswith(_TORCH_NN_MODULES) and code.co_name == "forward" or _traced_optim(filename):
        return False       # reached from code that runs eagerly (a break at the call of `opt.step()`)
    if filename.startswith(("<eval_with_key", "<dynamo_lite", "<frozen ")):
        return True        # fx-generated code, our generated code, frozen stdlib modules
    return is_skipped_file(filename)


def may_use_torch(code: types.CodeType, func, args: tuple) -> bool:
    """Whether a frame of `code` called with `args` can do anything with tensors (TorchDynamo's
    `has_tensor_in_frame`): a global of the function it names is torch (or one of its modules)
    or numpy, or an argument or a closed-over value is or holds (in lists, tuples, dicts, namedtuples) a tensor, a
    module, a module class or a numpy array. A frame that cannot (a learning-rate lambda on an
    int) is left to run as it is, this time: capturing it could only specialize or symbolize its
    Python numbers, into a recapture per value or a graph of arithmetic on them."""
    f_globals = getattr(func, "__globals__", None)
    if not isinstance(f_globals, dict):
        return True
    numpy = sys.modules.get("numpy")
    for name in code.co_names:
        obj = f_globals.get(name)
        if isinstance(obj, types.ModuleType) and (obj is torch or obj.__name__.startswith("torch.") or
                                                  (numpy is not None and obj.__name__.split(".")[0] == "numpy")):
            return True
    seen: set = set()

    def holds_tensor(obj) -> bool:
        if id(obj) in seen:
            return False
        seen.add(id(obj))
        if isinstance(obj, (torch.Tensor, torch.nn.Module)) or (type(obj) is type and issubclass(obj, torch.nn.Module)):
            return True
        if numpy is not None and isinstance(obj, (numpy.ndarray, numpy.generic)):
            return True
        if type(obj) in (list, tuple):
            return any(holds_tensor(v) for v in obj)
        if type(obj) is dict:
            return any(holds_tensor(v) for v in list(obj.values()))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):       # a namedtuple
            return any(holds_tensor(v) for v in obj)
        return False
    cells = []
    for cell in getattr(func, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:           # an empty cell
            pass
    return any(holds_tensor(a) for a in (*args, *cells))


def is_torch_machinery(code: types.CodeType) -> bool:
    """Code of torch's own machinery (above): it runs with the hook off until it returns, so no
    function it calls (the branches eager torch.cond compiles and all TorchDynamo runs while
    compiling them, a vmapped function on batched tensors) is captured."""
    return code.co_filename.startswith(_TORCH_MACHINERY_DIRS)


def call_rule(fn) -> int:
    """How the tracer treats a call to the Python function `fn`."""
    if getattr(fn, "__dynamo_lite_captured__", None) is not None or _torch_disabled_for_torchdynamo(fn) is not None:
        return UNWRAP
    if getattr(fn, "__dynamo_lite_disabled__", None) is not None:
        return DISABLED
    if torch_disabled(fn):
        return TORCH_DISABLED
    if id(fn) in _allowed_in_graph or _allowed_by_torch_compiler(fn):
        return GRAPH_OP
    code = getattr(fn, "__code__", None)
    if code is not None and code in _disabled_codes:
        return DISABLED
    if getattr(fn, "__dynamo_lite_break__", False):
        return BREAK
    if code is None:
        return SKIPPED
    filename = code.co_filename
    if filename.startswith(_TORCH_DIR):
        if filename.startswith(_TORCH_NN_MODULES) and not filename.endswith("module.py") or \
                filename in _TORCH_INLINED_FILES or _traced_optim(filename):
            return INLINE
        if filename == _TORCH_LR_SCHEDULER:
            return SKIPPED        # Python without tensor ops: as a graph op it would run for real on fake tensors
        return GRAPH_OP
    if is_skipped_file(filename) and not filename.endswith(_INLINED_STDLIB) and code not in _INLINED_STDLIB_CODES:
        return SKIPPED
    return INLINE


def _allowed_by_torch_compiler(fn) -> bool:
    """A function a library marked with `torch.compiler.allow_in_graph` (einx marks each of its
    operations): the library asks compilers to put calls to it in the graph as one op, as we do for
    `dynamo_lite.allow_in_graph`. Read from torch's registry of those marks when torch has loaded
    it (a set of ids, which the mark keeps current as functions die); never imported here."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    marked = getattr(rules, "_allowed_callable_ids", None)
    if marked is None:
        return False
    try:
        return id(fn) in marked
    except Exception:                # noqa: BLE001 -- torch's private registry changed shape: no marks
        return False


def is_torch_namespace(obj) -> bool:
    """Modules and callables of torch itself: assumed not to be monkeypatched, so not guarded."""
    name = getattr(obj, "__name__", "") if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "") or ""
    return name == "torch" or name.startswith("torch.")


# Functions whose output must appear in program order: calling one is a print-or-log break.
PRINTERS = {print, builtins.input, builtins.breakpoint, warnings.warn, warnings.warn_explicit}


def is_printer(fn) -> bool:
    return fn in PRINTERS or getattr(fn, "__module__", "") in ("logging", "warnings")


def unwrapped(fn):
    inner = getattr(fn, "__dynamo_lite_captured__", None)
    return inner if inner is not None else _torch_disabled_for_torchdynamo(fn)


def _torch_disabled_for_torchdynamo(fn):
    """The function inside a `torch._dynamo.disable` wrapper that TorchDynamo put around torch's own
    code (it swaps an optimizer's `_init_group` for one once it compiled a step): the wrapper only
    switches TorchDynamo's frame hook off for the call, so the function is traced as it is. None
    for anything else (a user's own `torch.compiler.disable` is left as it was)."""
    if not getattr(fn, "_torchdynamo_disable", False):
        return None
    inner = getattr(fn, "_torchdynamo_orig_callable", None)
    if isinstance(inner, types.FunctionType) and _traced_optim(inner.__code__.co_filename):
        return inner
    return None


def _torch_disable_wrapper_code():
    """The code of the wrapper `torch._disable_dynamo` puts around a function (None: no such API)."""
    mark = getattr(torch, "_disable_dynamo", None)
    try:
        return mark(lambda: None).__code__ if mark is not None else None
    except Exception:                # noqa: BLE001 -- torch's private API changed shape: nothing is marked
        return None


_TORCH_DISABLE_WRAPPER = _torch_disable_wrapper_code()


def torch_disabled(fn) -> bool:
    """Is `fn` torch's `torch._disable_dynamo` wrapper (recursive, the default) around one of its
    own functions: torch's statement that no compiler traces it (Optimizer.zero_grad, state_dict,
    load_state_dict, add_param_group)? Calls to it are breaks (TORCH_DISABLED) and its frame is
    not captured (`called_through_torch_disable`). A non-recursive mark (DDP's
    `_inside_ddp_forward`) is traced as before."""
    code = getattr(fn, "__code__", None)
    if code is None or code is not _TORCH_DISABLE_WRAPPER:
        return False
    cells = dict(zip(code.co_freevars, getattr(fn, "__closure__", None) or ()))
    try:
        return bool(cells["recursive"].cell_contents) and callable(cells["fn"].cell_contents)
    except (KeyError, ValueError):
        return False


def called_through_torch_disable(code: types.CodeType, caller) -> bool:
    """Is a frame of `code` called by `caller` the marked function of a `torch_disabled` wrapper
    (the wrapper calls it through TorchDynamo's disable function, so it is one or two frames up)?
    Its code and the code defined in it (comprehensions, 3.11) are then never captured."""
    f = caller
    for _ in range(2):
        if f is None:
            return False
        if f.f_code is _TORCH_DISABLE_WRAPPER:
            names = f.f_locals
            inner = names.get("fn")
            return bool(names.get("recursive")) and getattr(inner, "__code__", None) is code
        f = f.f_back
    return False


def with_nested_codes(code: types.CodeType) -> list:
    """`code` and the code objects defined inside it (comprehensions, lambdas, nested functions)."""
    out, todo = [], [code]
    while todo:
        c = todo.pop()
        out.append(c)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return out


def disable(fn):
    """`fn`, and everything it calls, always runs eagerly: calls to it inside captured code are
    graph breaks, and capture is switched off while it runs."""
    from .. import _evalframe
    code = getattr(fn, "__code__", None)
    if code is None or not callable(fn):
        raise TypeError(f"dynamo_lite.disable expects a Python function, got {type(fn).__name__}")
    _disabled_codes.add(code)

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        prior = _evalframe.set_callback(None)
        try:
            return fn(*args, **kwargs)
        finally:
            _evalframe.set_callback(prior)

    disabled.__dynamo_lite_disabled__ = fn
    return disabled


def allow_in_graph(fn):
    """Put calls to `fn` into the graph as one opaque node instead of tracing its body."""
    _allowed_in_graph[id(fn)] = fn
    return fn
