"""What every CLI command shares: where the store is, opening it, printing, errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from amcp.errors import AmcpError

P = ParamSpec("P")
R = TypeVar("R")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def default_home() -> Path:
    """``$AMCP_HOME`` or ``~/.amcp``: read here, in the composition root, and nowhere else."""
    env = os.environ.get("AMCP_HOME")
    return Path(env).expanduser() if env else Path.home() / ".amcp"


def store_path(store: Path | None) -> Path:
    return store if store is not None else default_home() / "memory.db"


@contextmanager
def open_memory(
    store: Path | None, embedder: str = "auto", *, create: bool = False
) -> Iterator[Any]:
    from amcp.memory import Memory

    path = store_path(store)
    if not create and not path.exists():
        raise AmcpError(f"no store at {path}; run `amcp init` first (or pass --store)")
    mem = Memory(path, embedder=None if embedder == "none" else embedder)
    try:
        yield mem
        for warning in mem.warnings():
            err.print(f"warning: {warning}")
    finally:
        mem.close()


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def friendly(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn every failure into one clear line on stderr and a non-zero exit."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except AmcpError as exc:
            err.print(f"[red]error[/red] ({int(exc.status)}): {exc}")
            raise typer.Exit(1) from None
        except (OSError, ValueError) as exc:
            err.print(f"[red]error[/red]: {exc}")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper
