"""The ``amcp`` script's command tree, built one command at a time.

``typer.main.get_command(app)`` imports nothing itself, but the app it is given must hold
every command, so every command module is imported and every command built (parameters
from signatures, help, converters) before the one invoked runs. A fresh ``amcp recall``
took 775 ms through the whole app and 647 ms through this tree (same sources, 15
interleaved runs, 2-core machine), for ~60 commands it never uses. Here the root group is
Typer's own (``typer.main.get_group`` of an app with the root's settings and no
commands), and its ``commands`` mapping builds a command from ``amcp.cli.commands`` the
first time it is looked up by name (the invocation); a listing (``amcp --help``,
completion) builds the whole tree at once, as before.

A command is built the way the whole app builds it: registered on a one-command Typer
exactly as ``amcp.cli.app`` registers it on the full one (``register``), then taken out of
the group Typer makes of that, and given readable placeholders (``helptext.humanise``). A
test compares every help page of the two trees.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any

import typer

from amcp.cli.commands import COMMANDS, ROOT_HELP, Listed, register
from amcp.cli.options import group

__all__ = ["LazyCommands", "build", "main", "root"]


def build(listed: Listed) -> Any:
    """The click command of ``listed``, as the whole tree would hold it."""
    from amcp.cli.helptext import humanise

    one = group()
    register(one, listed)
    command = typer.main.get_group(one).commands[listed.name]
    humanise(command)
    return command


class LazyCommands(MutableMapping[str, Any]):
    """The root's subcommands by name, in ``COMMANDS`` order; each built on first lookup."""

    def __init__(self, listed: tuple[Listed, ...] = COMMANDS) -> None:
        self._listed = {item.name: item for item in listed}
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            listed = self._listed[name]  # KeyError: no such command (click says so)
            try:
                self._built[name] = build(listed)
            except KeyError as exc:  # a failure while building is not "no such command"
                raise RuntimeError(f"cannot build the command {name!r}: {exc!r}") from exc
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command
        self._listed.setdefault(name, Listed(name, ""))

    def __delitem__(self, name: str) -> None:
        del self._listed[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed)

    def items(self) -> ItemsView[str, Any]:
        # A listing (``amcp --help``, completion) needs every command: built at once from
        # the whole app, which is what a help page cost before, rather than one by one.
        self.build_all()
        return super().items()

    def values(self) -> ValuesView[Any]:
        self.build_all()
        return super().values()

    def build_all(self) -> None:
        """Build every command not built yet, as ``amcp.cli.app.command()`` builds them."""
        if len(self._built) == len(self._listed):
            return
        from amcp.cli.app import command

        whole = command().commands
        for name in self._listed:
            if name not in self._built and name in whole:
                self._built[name] = whole[name]

    def __len__(self) -> int:
        return len(self._listed)


def root() -> Any:
    """The ``amcp`` group: Typer's, with the root's settings, and lazy subcommands."""
    base = group(ROOT_HELP, name="amcp")
    cli = typer.main.get_group(base)
    cli.commands = LazyCommands()
    return cli


def main() -> None:
    root()(prog_name="amcp")
