"""Coding-agent hooks: Claude Code handlers, the session ledger, installers, a fast path.

Run a hook with the lean entry ``python -m amcp.agent.hooks <event>`` (what the installer
writes) or ``amcp hook <event>``; see docs/hooks.md. Submodules are imported on use, so
``import amcp.agent.hooks`` itself stays cheap.
"""

from __future__ import annotations
