"""pytest setup for the dynamo_lite differential suite.

Every test starts and ends with empty engine caches (`harness.reset()`), so no test can hit a
graph captured by another.  Run with ``DL_TEST_REFERENCE=torch`` to check the suite's
expectations against TorchDynamo instead of dynamo_lite.
"""
import os

import pytest
import torch

import harness


def pytest_report_header(config):
    return f"dynamo_lite differential suite, engine under test: {harness.ENGINE}"


# Tests marked `once` drive the report CLI and its HTML page end to end: Python over the engine's
# records, the same on every Python version (the engine under them is tested per version by the
# rest of the suite). CI runs them on one version (.ci/run: DL_ONCE_TESTS=skip on the others).
SKIP_ONCE = os.environ.get("DL_ONCE_TESTS") == "skip"


def pytest_configure(config):
    config.addinivalue_line("markers", "once: the report CLI and its HTML page end to end (DL_ONCE_TESTS=skip skips)")


def pytest_collection_modifyitems(config, items):
    if not SKIP_ONCE:
        return
    skip = pytest.mark.skip(reason="DL_ONCE_TESTS=skip: the report CLI's end-to-end tests run on one Python version")
    for item in items:
        if item.get_closest_marker("once"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_engine_caches():
    harness.reset()
    torch.manual_seed(0)
    yield
    harness.reset()


@pytest.fixture
def backend():
    """A fresh CountingBackend for tests that drive capture() themselves."""
    return harness.CountingBackend()


@pytest.fixture
def single_process_group(tmp_path):
    """A one-process gloo group (FSDP2, DDP and the training bench's in-process cases need one)."""
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


# Headless Chromium for the HTML pages' tests (the report, the trace index): they skip without it
# unless DL_BROWSER_REQUIRED=1 (CI sets it where it installs Chromium), which makes that a failure.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
BROWSER_REQUIRED = os.environ.get("DL_BROWSER_REQUIRED") == "1"


def _no_browser(reason: str):
    if BROWSER_REQUIRED:
        pytest.fail(f"DL_BROWSER_REQUIRED=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        _no_browser(f"no {CHROMIUM}: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("playwright is not installed (requirements/ci.txt)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()
