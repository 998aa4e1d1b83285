"""Stand-in for the C frame hook (`_evalframe`) on a Python it does not support (3.14, a
free-threaded build): same names, no frame is ever intercepted.

setup.py does not build the extension there, so `import dynamo_lite` still works; `capture` says
once that this Python is not supported and returns the function as it is (eval_frame.py), so
nothing here is asked to capture. The package's __init__ installs this module under the
extension's name when, and only when, compat.SUPPORTED is false.
"""
from __future__ import annotations

import threading
import weakref

SKIP = object()
NOHOOK = object()
_callbacks = threading.local()
_extras: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def set_callback(cb):
    previous = getattr(_callbacks, "cb", None)
    _callbacks.cb = cb
    return previous


def set_frame_runner(runner):
    pass


def get_callback():
    return getattr(_callbacks, "cb", None)


def get_code_extra(code):
    return _extras.get(code)


def set_code_extra(code, value):
    if value is None:
        _extras.pop(code, None)
    else:
        _extras[code] = value


def stats():
    return {"hits": 0, "misses": 0, "active_threads": 0}


def type_version(cls) -> int:
    """No attribute version tags without the extension: 0, which no guard accepts."""
    if not isinstance(cls, type):
        raise TypeError("type_version() expects a class")
    return 0


class DisabledCall:
    """DisabledCall(fn): calls fn (there is no hook to switch off)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)
