"""The project's differential suite, re-run with every captured graph compiled by the triton backend.

The capture tests compare eager with captured runs through `harness.CountingBackend`, which runs
graphs as they are. Here a pytest plugin makes that backend hand each graph to `triton_backend`
as well (strict: a compile error fails the test) and return our compiled callable, so the same
expectations (values, mutated inputs, graph counts, reuse) check the backend. A few modules
only, to stay fast under Triton's interpreter; the whole suite runs the same way with
`-p triton_differential_plugin` and this file's plugin on the path.
"""
import os
import subprocess
import sys
import textwrap

import pytest

import triton_env  # noqa: F401  (first: TRITON_INTERPRET must be set before triton loads)

pytest.importorskip("triton")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["tests/test_capture_tensors.py", "tests/test_capture_operators.py", "tests/test_capture_modules.py"]

PLUGIN = '''
import os
os.environ["TRITON_INTERPRET"] = "1"        # the suite's tensors live on the CPU


def pytest_configure(config):
    import harness
    from dynamo_lite.backends.triton import settings, triton_backend
    settings.strict = True
    record = harness.CountingBackend.__call__

    def compile_too(self, gm, example_inputs):
        record(self, gm, example_inputs)
        return triton_backend(gm, example_inputs)
    harness.CountingBackend.__call__ = compile_too
'''


def test_capture_suite_passes_on_the_triton_backend(tmp_path):
    (tmp_path / "triton_differential_plugin.py").write_text(textwrap.dedent(PLUGIN))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.path.join(REPO, "tests"), REPO, env.get("PYTHONPATH", "")])
    env["DYNAMO_LITE_CACHE_DIR"] = str(tmp_path / "cache")
    result = subprocess.run([sys.executable, "-m", "pytest", *MODULES, "-q", "-p", "no:cacheprovider",
                             "-p", "triton_differential_plugin", "-x"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
