"""Make the README's pictures of the trace pages: run examples/trace_demo.py with a trace
directory, build its pages (`dynamo-lite trace`), and screenshot the index and one frame's page
in headless Chromium (playwright, Debian's /usr/bin/chromium).

    PYTHONPATH=. .venv-3.12/bin/python scripts/trace_screenshot.py     # writes docs/img/trace_*.png
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace"
        env = dict(os.environ, DYNAMO_LITE_TRACE=str(trace), PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, str(ROOT / "examples" / "trace_demo.py")], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "dynamo_lite.cli", "trace", str(trace)], env=env, check=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 520}, device_scale_factor=1)
            page.goto((trace / "index.html").as_uri())
            page.screenshot(path=str(ROOT / "docs" / "img" / "trace_index.png"), full_page=True)
            page.click("#frames tbody tr >> nth=1 >> a")
            page.set_viewport_size({"width": 1100, "height": 900})
            page.screenshot(path=str(ROOT / "docs" / "img" / "trace_frame.png"))
            browser.close()


if __name__ == "__main__":
    main()
