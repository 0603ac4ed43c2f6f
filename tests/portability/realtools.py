"""The other tools themselves, installed from this repository's own pins on first use.

mem0 goes into its own venv (``requirements-mem0.txt``) and the MCP memory server into an
npm prefix, both under ``.venv/portability-tools/`` so they are made once per checkout.
Used by the round-trip tests and by ``bench/portability.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(__file__).parent / "fixtures" / "tools"
CACHE = ROOT / ".venv" / "portability-tools"
MCP_PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} … failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res


def mem0_python() -> Path:
    venv = CACHE / "mem0"
    py = venv / "bin" / "python"
    reqs = TOOLS / "requirements-mem0.txt"
    stamp = venv / ".stamp"
    if not stamp.exists() or stamp.read_text() != reqs.read_text():
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
              str(reqs)])
        stamp.write_text(reqs.read_text())
    return py


def mcp_server_js() -> Path:
    prefix = CACHE / "npm"
    js = prefix / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not js.exists():
        _run(["npm", "install", "--silent", "--prefix", str(prefix), MCP_PACKAGE])
    return js


def mem0_load(export: Path) -> dict[str, Any]:
    """Add every item of an amcp ``--to mem0`` export to a fresh mem0; its get() of each."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, MEM0_TELEMETRY="False", HF_HUB_OFFLINE="1")
        res = _run([str(mem0_python()), str(TOOLS / "mem0_tool.py"), "load", str(export), tmp],
                   env=env, cwd=tmp)
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def mcp_make(memory_file: Path) -> dict[str, Any]:
    res = _run([sys.executable, str(TOOLS / "mcp_memory_tool.py"), str(mcp_server_js()), "make",
                str(memory_file)])
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def mcp_load(export: Path) -> dict[str, Any]:
    res = _run([sys.executable, str(TOOLS / "mcp_memory_tool.py"), str(mcp_server_js()), "load",
                str(export)])
    out: dict[str, Any] = json.loads(res.stdout)
    return out
