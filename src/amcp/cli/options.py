"""The options many commands share, defined once (each command module used to repeat them)."""

from __future__ import annotations

from typing import Annotated

import typer

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
