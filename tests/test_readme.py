"""Every snippet of README.md runs, as written, against a fresh home directory.

``sh`` blocks run line by line (``echo ... |`` feeding stdin; ``K-1a2b`` standing for the
first memory's id, which is what a reader would type); the ``sh server`` block starts the
node, runs the ``python node`` snippet and the conformance kit against it, and starts and
stops ``amcp mcp``; ``python`` blocks run as scripts. Only the Quick start block is left out:
it builds new virtual environments, which is what CI (``.ci/run``) itself does.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.amcp_process import amcp_argv

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
PLACEHOLDER = "K-1a2b"

pytestmark = [pytest.mark.model, pytest.mark.slow]


def blocks() -> list[tuple[str, str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m[1], m[2].strip(), m[3]) for m in BLOCK.finditer(text)]


def env_for(home: Path) -> dict[str, str]:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return dict(os.environ, HOME=str(home), AMCP_HOME=str(home / ".amcp"),
                AMCP_STATE_DIR=str(home / "state"), XDG_CACHE_HOME=cache,
                HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def commands(body: str) -> list[tuple[list[str], str | None]]:
    """Each line's amcp argv and the stdin an ``echo ... |`` gives it."""
    found = []
    for line in body.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        stdin = None
        if "|" in words:
            left, right = words[: words.index("|")], words[words.index("|") + 1 :]
            assert left[0] == "echo", line
            stdin, words = " ".join(left[1:]) + "\n", right
        assert words[0] == "amcp", line
        found.append((words[1:], stdin))
    return found


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    kinds = [(lang, tag) for lang, tag, _ in blocks()]
    assert kinds == [("sh", "quickstart"), ("sh", ""), ("sh", "server"), ("python", "node"),
                     ("python", "")]
    quick = blocks()[0][2].strip().splitlines()
    assert len(quick) == 2  # the Quick start is two commands: run, and test


def test_the_use_it_commands(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "ledger-decision.md").write_text(
        "We chose PostgreSQL for the ledger because we need transactions.\n", encoding="utf-8")
    first_id = None
    for written, stdin in commands(blocks()[1][2]):
        args = [a.replace(PLACEHOLDER, first_id[:6]) for a in written] if first_id else written
        done = subprocess.run(amcp_argv(*args), input=stdin, capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300, check=False)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        if first_id is None and args[0] == "remember":
            first_id = re.search(r"K-[0-9a-f]{64}", done.stdout)[0]  # type: ignore[index]
        if args[0] == "recall":
            assert "tabs" in done.stdout and first_id[:14] in done.stdout
    stats = subprocess.run(amcp_argv("stats", "--json"), capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=120, check=True)
    assert json.loads(stats.stdout)["integrity"]["ok"] is True
    assert (tmp_path / "other.db").exists()


def test_the_python_snippet(tmp_path: Path) -> None:
    code = blocks()[4][2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env_for(tmp_path), cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Deploys happen on Thursday" in done.stdout
    assert (tmp_path / ".amcp" / "memory.db").exists() and not (tmp_path / "~").exists()


def test_the_servers_and_the_node_snippet(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    serve, mcp, conformance = (args for args, _ in commands(blocks()[2][2]))
    port, http = free_port(), free_port()
    node = subprocess.Popen(amcp_argv(*serve, "--port", str(port), "--http-port", str(http)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)
    try:
        assert node.stdout is not None
        deadline = time.monotonic() + 120
        for line in node.stdout:
            if "listening on" in line or time.monotonic() > deadline:
                break
        snippet = blocks()[3][2].replace("7707", str(port))
        done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert conformance[0] == "conformance"
        target = conformance[1].replace("7707", str(port))
        report_path = tmp_path / "conformance.json"
        done = subprocess.run(amcp_argv("conformance", target, *conformance[2:],
                                        "--json-out", str(report_path)),
                              capture_output=True, text=True, env=env, timeout=300, check=False)
        assert report_path.exists(), done.stdout + done.stderr
        tests = json.loads(report_path.read_text())["tests"]
        assert [t["id"] for t in tests] == [f"T1-0{i}" for i in range(1, 9)] + [
            f"T2-0{i}" for i in range(1, 9)], done.stdout  # every Level-1 and -2 test ran
        # T2-01's two latency checks bound a cold boot to 100 ms (p95); here the node runs
        # beside the rest of the suite on two busy cores, where it once measured 162 ms.
        # Only those two may fail; every other check of every test must pass. The latency
        # itself is held against a lone node in tests/conformance/test_levels_node.py.
        timing = {"p95 cse_ms ≤ 100", "client-measured p95 − RTT ≤ 100 ms"}
        failed = [(t["id"], c["name"]) for t in tests for c in t["checks"] if not c["passed"]]
        failed += [(t["id"], "") for t in tests if not t["passed"] and not t["checks"]]
        assert all(test == "T2-01" and name in timing for test, name in failed), failed
        # 2: levels not all kit-ready; 1: some test failed (T2-01's timing alone, as checked)
        assert done.returncode in ((0, 2) if not failed else (1,)), done.stdout + done.stderr
    finally:
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=60)
    stdio = subprocess.run(amcp_argv(*mcp), input="", capture_output=True, text=True, env=env,
                           timeout=120, check=False)
    assert stdio.returncode == 0, stdio.stderr
