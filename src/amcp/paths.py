"""Where amcp keeps per-user state outside a store's own directory, and its caches.

The witness of a store's change-log head must not live beside the store: whoever restores
the store directory from an older copy (or deletes a ``keys/witness`` folder next to it)
would restore or delete the witness with it. The default is the platform's per-user state
directory, the place meant for "state that should persist between restarts but is not
user data" (XDG Base Directory spec ``$XDG_STATE_HOME``; macOS Application Support;
Windows ``%LOCALAPPDATA%``).

The derived files amcp can rebuild (the MiniLM ONNX export) go to the user's cache
directory (``$XDG_CACHE_HOME``, else ``~/.cache``).

Called by composition roots (``Memory``, the CLI, the hooks' entry point) when the caller
names no witness directory, and by ``MiniLMEmbedder``'s constructor when it is given no
``cache_dir``; reading the environment here is reading it for them. This is the one module
outside ``amcp.cli`` and the hooks' entry point that reads the environment.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # os.path strings, not pathlib: the hooks' fast reader calls this
    from collections.abc import Mapping


def state_dir(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """amcp's per-user state directory (not created here)."""
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    home = os.path.expanduser("~")
    if env.get("AMCP_STATE_DIR"):
        return os.path.expanduser(env["AMCP_STATE_DIR"])
    if plat == "win32":
        base = env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "amcp", "state")
    if plat == "darwin":
        return os.path.join(home, "Library", "Application Support", "amcp", "state")
    base = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return os.path.join(base, "amcp")


def default_witness_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where a store's head is witnessed unless the caller names other places."""
    return os.path.join(state_dir(environ), "witness")


def cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """amcp's per-user cache directory (not created here): ``$XDG_CACHE_HOME/amcp`` or
    ``~/.cache/amcp``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "amcp")


__all__ = ["cache_dir", "default_witness_dir", "state_dir"]
