"""Fixtures of the browser tests: the system's chromium, axe-core, a served inspector.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``; ``python3 dev.py test``
installs it with apt-get when it can) driven by Playwright, which is never asked to
download a browser of its own. Without either, the browser tests skip and say why.
axe-core comes from npm into a cache directory once per machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.api.kit import free_port

CHROMIUM = Path(os.environ.get("AMCP_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
AXE_VERSION = "4.10.2"


# Package scope, not session: playwright's sync API runs an event loop on the main thread
# while it is open, and any later test in the same worker that calls asyncio.run() (the
# agent adapters, the MCP channel tests) would fail with "cannot be called from a running
# event loop". The browser closes when the worker leaves tests/ui.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; dev.py test does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def axe_source() -> str:
    """axe.min.js from npm, installed once into a cache directory."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "amcp-tests" / "axe"
    script = cache / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: no axe-core for the accessibility check")
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
             f"axe-core@{AXE_VERSION}"], check=False, capture_output=True, text=True,
            timeout=300,
        )
        if done.returncode != 0 or not script.exists():
            pytest.skip(f"npm install axe-core failed: {done.stderr.strip()[-300:]}")
    return script.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    print(f"\nscreenshots in {ARTIFACTS}")
    return ARTIFACTS


class Served:
    """An app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="error", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
