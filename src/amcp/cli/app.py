"""The whole ``amcp`` command tree as one Typer app: every command of ``amcp.cli.commands``
registered on ``app``, in its order.

For tests (``CliRunner().invoke(app, …)``), ``python -m amcp.cli.app`` and programs that
embed the CLI. The ``amcp`` script builds the same tree lazily (``amcp.cli.lazy``), one
command at a time; ``command()`` is the whole tree built at once, with the placeholders
``--help`` shows.
"""

from __future__ import annotations

from typing import Any

import typer

from amcp.cli.commands import COMMANDS, ROOT_HELP, register
from amcp.cli.options import group

app = group(ROOT_HELP, name="amcp")
for _listed in COMMANDS:
    register(app, _listed)


def command() -> Any:
    """The click command of the whole tree: the Typer app with help written for people."""
    from amcp.cli.helptext import humanise

    cli = typer.main.get_command(app)
    humanise(cli)
    return cli


def main() -> None:
    command()(prog_name="amcp")


if __name__ == "__main__":
    main()
