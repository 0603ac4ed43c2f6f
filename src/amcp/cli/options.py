"""The options many commands share, defined once (each command module used to repeat them)."""

from __future__ import annotations

from typing import Annotated

import typer


def group(text: str | None = None, *, name: str | None = None) -> typer.Typer:
    """A command group as every ``amcp`` group is made: help without args, plain help pages.

    Plain (click-formatted) help rather than Typer's rich panels: Typer's rich renderer
    imports rich.markdown and markdown-it on every ``--help`` whatever the markup mode,
    about a third of the CPU ``amcp --help`` spends (issue 20: ``--help`` <= 250 ms). The
    words are the same; only boxes and colours go. Usage errors print plain for the same
    reason, and read the same in a log as on a terminal.
    """
    return typer.Typer(
        name=name, help=text, no_args_is_help=True, rich_markup_mode=None,
        add_completion=False, pretty_exceptions_enable=False,
    )

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", "-s", envvar="AMCP_STORE", show_envvar=False,
        help="A store file, sqlite:PATH or postgresql://USER:PASS@HOST/DB "
        "(default $AMCP_STORE, else $AMCP_HOME/memory.db).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
EmbedOpt = Annotated[
    str,
    typer.Option(
        "--embedder", "-e",
        help="auto | minilm | minilm-int8 | hashing | none | openai[,base_url=URL,model=NAME] "
        "(openai settings also from AMCP_EMBED_* or $AMCP_HOME/config.toml)",
    ),
]
ScopesOpt = Annotated[
    list[str] | None, typer.Option("--scope", help="Only these scopes (repeatable).")
]
TypesOpt = Annotated[
    list[str] | None, typer.Option("--type", "-t", help="Only these types (repeatable).")
]

__all__ = ["EmbedOpt", "JsonOpt", "ScopesOpt", "StoreOpt", "TypesOpt"]
