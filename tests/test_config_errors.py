"""Bad configuration gets a clear message that names the fix, and the user's function still runs
where that is the policy.

What the code does (eval_frame.py, convert_frame.py, backends/, config.py, compat.py):

* `capture(backend=...)` looks the backend up at once: an unknown name is a ValueError listing
  the available names, anything neither a name nor a callable a TypeError.
* The backend runs at the first call. When it raises or returns a non-callable, the frame runs
  eagerly (policy: a program never breaks because of capture) and a warning names the backend;
  with fullgraph=True the error is raised.
* `config.cache_size_limit` / `inline_depth_limit` / `instruction_limit` are validated when set.
* On an unsupported Python, `capture` warns and returns the function unchanged (it runs eagerly).

These tests state what a demanding user expects. When the suite was written much of it was
missing (a failing backend was reported as "dynamo_lite: internal error", invalid settings were
accepted and broke later calls, register_backend took non-callables); e52a5f8 fixed that. What
is still missing is marked xfail(strict), so it fails loudly once fixed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn

import dynamo_lite as dl
from dynamo_lite import compat, eval_frame
from dynamo_lite.fallback import records
from dynamo_lite.backends import registry

from fuzz.oracle import triton_runnable

INTERNAL = "internal error"


def _f(x):
    return x * 2 + 1


@pytest.fixture(autouse=True)
def restore_config():
    saved = {k: getattr(dl.config, k) for k in ("cache_size_limit", "inline_depth_limit", "instruction_limit")}
    backends = dict(registry._BACKENDS)
    dl.reset()
    yield
    for k, v in saved.items():
        setattr(dl.config, k, v)
    registry._BACKENDS.clear()
    registry._BACKENDS.update(backends)
    dl.reset()


def _call_recording_warnings(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, [str(w.message) for w in caught]


# ---------------------------------------------------------------------------------------------
# backend names and objects
# ---------------------------------------------------------------------------------------------

def test_unknown_backend_name_is_rejected_at_capture_listing_the_choices():
    with pytest.raises(ValueError) as e:
        dl.capture(_f, backend="eagre")
    msg = str(e.value)
    assert "'eagre'" in msg and "eager" in msg and "inductor" in msg
    assert "callable" in msg                      # the other fix: pass a backend function


def test_unknown_backend_message_lists_triton_too():
    registry._BACKENDS.pop("triton", None)         # as in a fresh process (it registers on first use)
    with pytest.raises(ValueError, match="triton"):
        dl.capture(_f, backend="tritn")


@pytest.mark.parametrize("backend", [None, 3, ["eager"], b"eager"])
def test_backend_neither_name_nor_callable_is_a_type_error(backend):
    with pytest.raises(TypeError, match="backend must be a name or a callable"):
        dl.capture(_f, backend=backend)


def test_invalid_dynamic_is_a_type_error():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        dl.capture(_f, dynamic="yes")


def test_register_backend_rejects_a_non_callable():
    with pytest.raises(TypeError, match="callable"):
        dl.register_backend("not_a_function", 3)


# ---------------------------------------------------------------------------------------------
# backends that fail
# ---------------------------------------------------------------------------------------------

class _RaisingBackend:
    __name__ = "raising_backend"

    def __init__(self):
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        raise ValueError("the backend's own failure")


def _not_callable_backend(gm, example_inputs):
    return 42


def test_backend_that_raises_falls_back_to_eager_once():
    backend = _RaisingBackend()
    captured = dl.capture(_f, backend=backend)
    for _ in range(3):
        out, warned = _call_recording_warnings(captured, torch.ones(2))
        torch.testing.assert_close(out, _f(torch.ones(2)))
    assert backend.calls == 1, "a failing backend is retried on every call"


def test_backend_returning_a_non_callable_falls_back_to_eager():
    captured = dl.capture(_f, backend=_not_callable_backend)
    out, warned = _call_recording_warnings(captured, torch.ones(2))
    torch.testing.assert_close(out, _f(torch.ones(2)))
    assert any("not a callable" in w and "_not_callable_backend" in w for w in warned), warned


def test_backend_that_raises_is_reported_as_the_backends_failure():
    captured = dl.capture(_f, backend=_RaisingBackend())
    _, warned = _call_recording_warnings(captured, torch.ones(2))
    relevant = [w for w in warned if "the backend's own failure" in w]
    assert relevant, warned
    assert "raising_backend" in relevant[0], "the warning does not name the backend"
    assert INTERNAL not in relevant[0], f"blamed on dynamo_lite: {relevant[0]}"


def test_backend_returning_non_callable_is_not_called_an_internal_error():
    captured = dl.capture(_f, backend=_not_callable_backend)
    _, warned = _call_recording_warnings(captured, torch.ones(2))
    assert warned and all(INTERNAL not in w for w in warned), warned


def test_backend_that_raises_with_fullgraph_names_the_backend():
    captured = dl.capture(_f, backend=_RaisingBackend(), fullgraph=True)
    with pytest.raises(Exception) as e:
        captured(torch.ones(2))
    assert "raising_backend" in str(e.value) and "the backend's own failure" in str(e.value)


@pytest.mark.skipif(triton_runnable()[0], reason="triton can run here (GPU or TRITON_INTERPRET)")
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_triton_backend_without_gpu_says_what_is_missing(monkeypatch):
    # The Triton test modules set TRITON_INTERPRET=1 when pytest collects them; this check is
    # about a machine without it.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    try:
        captured = dl.capture(_f, backend="triton")
    except (RuntimeError, ValueError) as e:          # rejecting it at capture() is fine too
        assert "TRITON_INTERPRET" in str(e) or "triton" in str(e)
        return
    out, warned = _call_recording_warnings(captured, torch.ones(2))
    torch.testing.assert_close(out, _f(torch.ones(2)))
    relevant = [w for w in warned if "GPU" in w or "TRITON_INTERPRET" in w]
    assert relevant, warned
    assert INTERNAL not in relevant[0], relevant[0]


# ---------------------------------------------------------------------------------------------
# settings
# ---------------------------------------------------------------------------------------------

def test_cache_size_limit_reached_warns_naming_the_setting():
    dl.config.cache_size_limit = 1
    captured = dl.capture(_f)
    for n in (1, 2, 3):
        out, warned = _call_recording_warnings(captured, torch.ones(n))
        torch.testing.assert_close(out, _f(torch.ones(n)))
    dl.reset()
    dl.config.cache_size_limit = 1
    captured = dl.capture(_f)
    captured(torch.ones(1))
    _, warned = _call_recording_warnings(captured, torch.ones(2))
    assert any("cache_size_limit=1" in w and "Raise dynamo_lite.config.cache_size_limit" in w for w in warned), warned


def _use_setting(name, value):
    """Set `name` and use it; a clear rejection (at assignment or use) must name the setting."""
    try:
        setattr(dl.config, name, value)
    except (TypeError, ValueError) as e:
        assert name in str(e), f"rejected without naming {name}: {e}"
        return
    captured = dl.capture(lambda x, k: _f(x) + k)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises((TypeError, ValueError)) as e:
            for n in range(1, 12):                 # more variants than any valid limit
                captured(torch.ones(2), n)
    assert name in str(e.value), f"failed without naming {name}: {type(e.value).__name__}: {e.value}"
    assert all(INTERNAL not in str(w.message) for w in caught)


@pytest.mark.parametrize("value", [-1, "8", 1.5, None])
def test_invalid_cache_size_limit_is_rejected_naming_the_setting(value):
    _use_setting("cache_size_limit", value)


@pytest.mark.parametrize("name,value", [("inline_depth_limit", "x"), ("inline_depth_limit", -5),
                                        ("instruction_limit", None), ("instruction_limit", "many")])
def test_invalid_limits_are_rejected_naming_the_setting(name, value):
    _use_setting(name, value)


def test_cache_size_limit_as_a_string_never_breaks_the_users_call():
    """Whatever the verdict on validation, a typo in a setting must not turn the user's own call
    into an exception that has nothing to do with their code."""
    dl.config.cache_size_limit = 8
    captured = dl.capture(lambda x, k: _f(x) + k)
    captured(torch.ones(2), 0)
    with pytest.raises(ValueError, match="cache_size_limit"):
        dl.config.cache_size_limit = "8"          # rejected where it is written, naming the setting
    assert dl.config.cache_size_limit == 8
    torch.testing.assert_close(captured(torch.ones(2), 1), _f(torch.ones(2)) + 1)


# ---------------------------------------------------------------------------------------------
# unsupported Python versions
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def unsupported_python(monkeypatch):
    """Pretend to run on CPython 3.14. eval_frame binds `SUPPORTED` at import (from .compat), so
    both names are patched; the message is built from compat at call time. The warning is given
    once (until reset()): the record of warnings given is emptied."""
    monkeypatch.setattr(compat, "PY_VERSION", (3, 14))
    monkeypatch.setattr(compat, "SUPPORTED", False)
    monkeypatch.setattr(eval_frame, "SUPPORTED", False, raising=False)
    monkeypatch.setattr(records, "_warned", set())
    monkeypatch.setattr(compat.sys, "version", "3.14.0 (main)", raising=True)


def test_unsupported_python_warns_and_runs_the_function_eagerly(unsupported_python):
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    with pytest.warns(RuntimeWarning) as record:
        captured = dl.capture(_f, backend=backend)
    msg = str(record[0].message)
    assert "3.11, 3.12 and 3.13" in msg and "3.14.0" in msg and "eagerly" in msg
    assert record[0].filename == __file__, "the warning should point at the user's capture() call"
    torch.testing.assert_close(captured(torch.ones(2)), _f(torch.ones(2)))
    assert calls == [], "nothing may be captured on an unsupported Python"


def test_unsupported_python_module_capture_runs_eagerly(unsupported_python):
    net = nn.Linear(3, 3)
    with pytest.warns(RuntimeWarning, match="supports CPython 3.11, 3.12 and 3.13"):
        captured = dl.capture(net)
    x = torch.randn(2, 3)
    torch.testing.assert_close(captured(x), net(x))


def test_unsupported_python_warns_once_per_process(unsupported_python):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = dl.capture(_f)
        dl.capture(nn.Linear(2, 2))
    assert len([w for w in record if "supports CPython" in str(w.message)]) == 1, [str(w.message) for w in record]
    torch.testing.assert_close(first(torch.ones(2)), _f(torch.ones(2)))


def test_unsupported_python_module_warning_points_at_the_user(unsupported_python):
    with pytest.warns(RuntimeWarning) as record:
        dl.capture(nn.Linear(3, 3))
    assert record[0].filename == __file__, record[0].filename


def test_unsupported_python_detected_at_import():
    """A fresh interpreter that reports 3.14 when dynamo_lite is imported and has no frame hook
    (setup.py does not build it there): the import works, capture warns and the function runs
    eagerly."""
    script = textwrap.dedent("""
        import sys, warnings
        import torch, bytecode, rich       # (libraries that check the version themselves see the real one)
        sys.version_info = (3, 14, 0, "final", 0)
        sys.modules["dynamo_lite._evalframe"] = None      # the extension is not there: importing it fails
        import dynamo_lite as dl
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f = dl.capture(lambda x: x + 1)
        print(f(torch.ones(1)).item(), [str(m.message) for m in w])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "default"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("2.0"), proc.stdout
    assert "supports CPython 3.11, 3.12 and 3.13" in proc.stdout, proc.stdout
