"""Start amcp nodes as separate processes for the benches (own store, own port).

``NodeProcess.start(store, limits=...)`` runs ``python bench/nodeproc.py`` in a child: a
``Memory`` with the hashing embedder behind a ``NodeServer`` built with the given
``Limits`` fields, on a free loopback port written to a file the parent waits for. A
child that is not given limits runs the node's defaults. ``amcp_serve`` starts the real
``amcp serve`` CLI instead, for runs that need its options (``--peer``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _env(src: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{src or ROOT / 'src'}{os.pathsep}{ROOT}"
    return env


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (/proc/PID/status VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class NodeProcess:
    proc: subprocess.Popen[bytes]
    port: int
    store: Path
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, store: Path, *, limits: dict[str, Any] | None = None,
              timeout: float = 60.0, src: Path | None = None) -> NodeProcess:
        """``src``: another checkout's ``src`` to run (e.g. the code before a fix)."""
        store.parent.mkdir(parents=True, exist_ok=True)
        port_file = store.parent / "port"
        port_file.unlink(missing_ok=True)
        log = store.parent / "node.log"
        argv = [sys.executable, str(Path(__file__).resolve()), "--store", str(store),
                "--port-file", str(port_file), "--limits", json.dumps(limits or {})]
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, env=_env(src), stdout=out, stderr=subprocess.STDOUT)
        return cls(proc, _wait_port(proc, port_file, log, timeout), store, log)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def amcp_serve(store: Path, port: int, *extra: str, timeout: float = 60.0) -> NodeProcess:
    """``amcp serve --store STORE --port PORT --http-port 0 --embedder hashing *extra``."""
    store.parent.mkdir(parents=True, exist_ok=True)
    log = store.parent / "node.log"
    argv = [sys.executable, "-c", "import sys; from amcp.cli.entry import main; "
            "sys.argv = ['amcp', *sys.argv[1:]]; main()", "serve", "--store", str(store),
            "--port", str(port), "--http-port", "0", "--embedder", "hashing", *extra]
    env = _env()
    env["AMCP_HOME"] = str(store.parent / "home")
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    node = NodeProcess(proc, port, store, log)
    _wait_listening(node, timeout)
    return node


def _wait_port(proc: subprocess.Popen[bytes], port_file: Path, log: Path,
               timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"node exited {proc.returncode}: {log.read_text()[-2000:]}")
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text())
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"node did not start within {timeout} s")


def _wait_listening(node: NodeProcess, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.proc.poll() is not None:
            raise RuntimeError(f"amcp serve exited {node.proc.returncode}: "
                               f"{node.log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", node.port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    node.proc.kill()
    raise RuntimeError(f"amcp serve did not listen within {timeout} s")


async def _serve(store: Path, port_file: Path, limits: dict[str, Any]) -> None:
    from amcp.memory import Memory
    from amcp.node import Limits, NodeServer

    memory = Memory(store, embedder="hashing")
    server = NodeServer(memory, limits=Limits(**limits))
    await server.start("127.0.0.1", 0)
    port_file.write_text(str(server.port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    await server.close()
    memory.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--port-file", type=Path, required=True)
    ap.add_argument("--limits", default="{}", help="Limits fields as JSON")
    args = ap.parse_args()
    asyncio.run(_serve(args.store, args.port_file, json.loads(args.limits)))


if __name__ == "__main__":
    main()
