"""The node's runtime file: how a hook finds the node serving *its* store (docs/hooks.md).

``amcp serve`` writes ``<store>.node.json`` (``memory.db.node.json`` next to
``memory.db``) once its HTTP API listens, and removes it on shutdown::

    {"v": 1, "pid": 4242, "store": "/home/u/.amcp/memory.db",
     "http": ["127.0.0.1", 8765], "amcp": ["127.0.0.1", 7707], "token": "…"}

The token is a random local credential for the hook routes (``/v1/hooks/*``). The file is
created with mode 0600 in the store's directory, so whoever can read it could read the
store and its keys anyway: the token grants nothing the file system did not.

A hook trusts the file only if it parses, names this store, is owned by this user and not
readable by others, and its pid is alive (a node killed with SIGKILL leaves a stale file;
a recycled pid is caught later, when the token is refused). Anything else: no node, the
hook reads the file itself. Only ``json`` and ``os`` are imported here (the hook path):
paths are ``os.path`` strings, and ``pathlib`` (~5-10 ms a process with the ``urllib.parse``
it imports) is loaded only by the helpers ``amcp serve`` and tests call.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    StrPath = str | os.PathLike[str]

VERSION = 1
SUFFIX = ".node.json"
MAX_BYTES = 4096  # a runtime file is ~200 bytes; anything larger is not one


class NodeRuntime(NamedTuple):
    pid: int
    store: str
    http: tuple[str, int]
    token: str
    amcp: tuple[str, int] | None = None


def runtime_path(store: StrPath) -> Path:
    from pathlib import Path

    return Path(runtime_file(store))


def runtime_file(store: StrPath) -> str:
    """``runtime_path`` as a string, without ``pathlib`` (the hook path)."""
    return os.fspath(store) + SUFFIX


def _addr(value: Any) -> tuple[str, int] | None:
    if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], int) and not isinstance(value[1], bool)
            and 0 < value[1] < 65536):
        return value[0], value[1]
    return None


def connect_host(host: str) -> str:
    """Where to connect for a server bound to ``host`` (a wildcard means this machine)."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - read, not bound: connect to loopback
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def parse_runtime(text: str | bytes) -> NodeRuntime | None:
    """The runtime file's contents, or None when they are not a runtime file."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return None
    pid, store, token = data.get("pid"), data.get("store"), data.get("token")
    http = _addr(data.get("http"))
    if (not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0
            or not isinstance(store, str) or not store or http is None
            or not isinstance(token, str) or not 16 <= len(token) <= 256):
        return None
    return NodeRuntime(pid, store, (connect_host(http[0]), http[1]), token,
                       _addr(data.get("amcp")))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's: the owner check below already refused it
    except OSError:
        return False
    return True


def read_runtime(store: StrPath) -> NodeRuntime | None:
    """The node serving ``store``, when its runtime file is trustworthy (see module doc)."""
    path = runtime_file(store)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o077 or st.st_size > MAX_BYTES:
            return None
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    rt = parse_runtime(raw)
    if rt is None or not pid_alive(rt.pid):
        return None
    if rt.store != os.fspath(store) and rt.store != os.path.realpath(store):
        return None
    return rt


def new_token() -> str:
    import secrets

    return secrets.token_urlsafe(32)


def write_runtime(store: StrPath, *, http: tuple[str, int], token: str,
                  amcp: tuple[str, int] | None = None, pid: int | None = None) -> Path:
    """Write the runtime file atomically, mode 0600 (``amcp serve``, once HTTP listens)."""
    path = runtime_path(store)
    body = json.dumps({"v": VERSION, "pid": pid or os.getpid(),
                       "store": os.path.realpath(store), "http": list(http),
                       "amcp": list(amcp) if amcp else None, "token": token})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by umask, and a leftover keeps its own
        os.write(fd, body.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def remove_runtime(store: StrPath, token: str) -> None:
    """Remove the runtime file if it is still ours (a newer node may have replaced it)."""
    path = runtime_path(store)
    try:
        current = parse_runtime(path.read_bytes()[: MAX_BYTES + 1])
        if current is not None and current.token == token:
            path.unlink()
    except OSError:
        pass


__all__ = ["NodeRuntime", "new_token", "parse_runtime", "read_runtime", "remove_runtime",
           "runtime_file", "runtime_path", "write_runtime"]
