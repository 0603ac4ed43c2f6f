"""Every ``amcp`` command: its name and where it is defined, in the order ``--help`` lists it.

One table for both ways the command tree is built:

* ``amcp.cli.app.app`` — the whole tree as one Typer app (tests, ``python -m amcp.cli.app``,
  embedding), every module imported and every command built;
* ``amcp.cli.lazy.root`` — what the ``amcp`` script runs: a command is imported and built
  only when it is invoked (or a help page needs it). A fresh ``amcp recall`` used to import
  all sixteen command modules and build all ~60 commands before running one (issue 20:
  ``remember`` / ``recall`` <= 700 ms as fresh processes).

This module imports only Typer (which every command needs); it names things, and
``register`` adds one to an app.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer


@dataclass(frozen=True, slots=True)
class Listed:
    """One top-level command: ``target`` is ``module:attribute``, a function (a command) or
    a ``typer.Typer`` (a group); ``also`` are modules that add subcommands to it when
    imported (``agents_cmd`` registers on ``hooks install``)."""

    name: str
    target: str
    also: tuple[str, ...] = ()


_CORE = "amcp.cli.core_cmd"

COMMANDS: tuple[Listed, ...] = (
    Listed("init", f"{_CORE}:init"),
    Listed("remember", f"{_CORE}:remember"),
    Listed("recall", f"{_CORE}:recall"),
    Listed("show", f"{_CORE}:show"),
    Listed("supersede", f"{_CORE}:supersede"),
    Listed("forget", f"{_CORE}:forget"),
    Listed("purge", f"{_CORE}:purge"),
    Listed("query", f"{_CORE}:query"),
    Listed("stats", f"{_CORE}:stats"),
    Listed("reindex", f"{_CORE}:reindex"),
    Listed("demo", f"{_CORE}:demo"),
    Listed("serve", "amcp.cli.serve_cmd:serve"),
    Listed("peers", "amcp.cli.peers_cmd:peers"),
    Listed("mcp", "amcp.cli.api_cmd:mcp"),
    Listed("http", "amcp.cli.api_cmd:http"),
    Listed("ui", "amcp.cli.ui_cmd:ui"),
    Listed("conformance", "amcp.cli.conformance_cmd:conformance"),
    Listed("list", "amcp.cli.list_cmd:list_cmd"),
    Listed("context", "amcp.cli.context_cmd:context"),
    Listed("outcome", "amcp.cli.context_cmd:outcome"),
    Listed("signal", "amcp.cli.context_cmd:signal"),
    Listed("event", "amcp.cli.context_cmd:event"),
    Listed("capture", "amcp.cli.hooks_cmd:capture"),
    Listed("import", "amcp.cli.portability_cmd:import_cmd"),
    Listed("export", "amcp.cli.portability_cmd:export_cmd"),
    Listed("setup", "amcp.cli.setup_cmd:setup_cmd"),
    Listed("verify", "amcp.cli.verify_cmd:verify"),
    Listed("drafts", "amcp.cli.firewall_cmd:drafts"),
    Listed("confirm", "amcp.cli.firewall_cmd:confirm"),
    Listed("reject", "amcp.cli.firewall_cmd:reject"),
    # Groups last: Typer lists a group's subgroups after its commands.
    Listed("trust", "amcp.cli.serve_cmd:trust_app"),
    Listed("hooks", "amcp.cli.hooks_cmd:hooks_app", also=("amcp.cli.agents_cmd",)),
    Listed("hook", "amcp.cli.hooks_cmd:hook_app"),
    Listed("brain", "amcp.cli.brain_cmd:brain_app"),
    Listed("writers", "amcp.cli.firewall_cmd:writers_app"),
    Listed("store", "amcp.cli.store_cmd:store_app"),
)

ROOT_HELP = "amcp — a memory node for AI agents (AMCP 1.0)."

def load(listed: Listed) -> Any:
    """The function or ``typer.Typer`` ``listed`` names (its ``also`` modules first)."""
    for module in listed.also:
        importlib.import_module(module)
    module, _, attribute = listed.target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def register(app: typer.Typer, listed: Listed) -> None:
    """Add ``listed`` to ``app``: a group with ``add_typer``, a function as a command."""
    target = load(listed)
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=listed.name)
    else:
        app.command(listed.name)(target)


__all__ = ["COMMANDS", "ROOT_HELP", "Listed", "load", "register"]
