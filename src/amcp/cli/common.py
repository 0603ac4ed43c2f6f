"""What every CLI command shares: where the store is, opening it, printing, errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from amcp.errors import AmcpError

if TYPE_CHECKING:
    from amcp.store.url import StoreLocation

P = ParamSpec("P")
R = TypeVar("R")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def default_home() -> Path:
    """``$AMCP_HOME`` or ``~/.amcp``: read here, in the composition root, and nowhere else."""
    env = os.environ.get("AMCP_HOME")
    return Path(env).expanduser() if env else Path.home() / ".amcp"


def store_location(store: str | Path | None) -> StoreLocation:
    """What ``--store`` / ``$AMCP_STORE`` names (amcp.store.url), else the default file."""
    from amcp.store.url import parse_store_url

    return parse_store_url(store if store is not None else default_home() / "memory.db")


def store_path(store: str | Path | None) -> Path:
    """The store's local path: the SQLite file, or a PostgreSQL store's local anchor (its
    keys and runtime file hang from it; ``StoreLocation.anchor``)."""
    return store_location(store).anchor


def sqlite_only(store: str | Path | None, what: str) -> Path:
    """The SQLite file ``store`` names, for a command that works on the file itself."""
    location = store_location(store)
    if location.path is None:
        raise AmcpError(f"{what} works on a SQLite store file; {location} is a PostgreSQL store")
    return location.path


def require_store(location: StoreLocation) -> None:
    """Refuse a missing SQLite file (a PostgreSQL database is checked by connecting)."""
    if location.exists() is False:
        raise AmcpError(f"no store at {location}; run `amcp init` first (or pass --store)")


@contextmanager
def open_memory(
    store: str | Path | None, embedder: str | None = "auto", *, create: bool = False
) -> Iterator[Any]:
    """The store ``store`` names, with ``embedder``; ``None`` for a command that embeds
    nothing (show, list): no model is loaded and any store's vectors are fine."""
    from amcp.memory import Memory

    path = store_location(store)
    if not create:
        require_store(path)
    if embedder is None:
        mem = Memory(path, embedder=None, check_embedder=False)
    else:
        from amcp.cli.embedconf import embedder_for

        chosen = embedder_for(embedder, default_home())
        mem = Memory(path, embedder=None if chosen == "none" else chosen)
    try:
        yield mem
        for warning in mem.warnings():
            err.print(f"warning: {warning}")
    finally:
        mem.close()


MAX_TEXT_BYTES = 16 * 1024 * 1024  # a memory is text for an agent to read, not a data dump


def read_text_input(text: str | None, file: Path | None) -> str:
    """The text a command was given: the argument, ``-`` for stdin, or ``--file PATH``."""
    from amcp.errors import ValidationError

    if file is not None and text is not None:
        raise ValidationError("text", "give the text or --file, not both")
    if file is not None:
        raw = file.expanduser().read_bytes()
        source = str(file)
    elif text == "-":
        if sys.stdin is None or sys.stdin.closed:
            raise ValidationError("text", "- reads stdin, but stdin is closed")
        raw = sys.stdin.buffer.read(MAX_TEXT_BYTES + 1)
        source = "stdin"
    elif text is None:
        raise ValidationError("text", "missing: give the text, - to read stdin, or --file PATH")
    else:
        return text
    if len(raw) > MAX_TEXT_BYTES:
        raise ValidationError("text", f"{source} holds more than {MAX_TEXT_BYTES >> 20} MB")
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError("text", f"{source} is not UTF-8 text ({exc.reason})") from None
    if not body.strip():
        raise ValidationError("text", f"{source} is empty")
    return body.rstrip("\r\n")  # the newline echo and editors end a file with is not content


def default_scope(cwd: Path | None = None) -> str:
    """The scope a command uses when none is given: ``project:<name>`` of the git
    repository around the working directory, else of the directory itself; global ``*``
    in the home or root directory, which name no project."""
    from amcp.agent.hooks.claude_code import project_of, project_scope

    here = (cwd or Path.cwd()).resolve()
    name = project_of(here)
    if name is None and here not in (Path.home().resolve(), Path(here.anchor)):
        name = here.name
    return project_scope(name) or "*"


@contextmanager
def new_store_or_nothing(store: str | Path | None, *, keep: bool = True) -> Iterator[Path]:
    """For a command that may create its store (``amcp import``): if the store did not
    exist and the command fails — or ``keep`` is False, as for a dry run — everything it
    made is removed again (the file, its WAL and shared-memory files, the vector snapshot,
    a key directory and a parent directory it created), so a failed first import leaves no
    half-made store behind. An existing store is never removed."""
    import shutil

    location = store_location(store)
    path = location.anchor
    if location.path is None:  # a database: its own transactions leave nothing half-made
        yield path
        return
    made = [d for d in (path.parent / "keys", path.parent) if not d.exists()]
    existed = path.exists()
    ok = False
    try:
        yield path
        ok = keep
    finally:
        if not existed and not ok:
            for name in (f"{path}-wal", f"{path}-shm", f"{path}.vectors", str(path)):
                Path(name).unlink(missing_ok=True)
            for directory in made:  # keys first, then the parent, which then is empty
                shutil.rmtree(directory, ignore_errors=True)


def pick(mem: Any, ref: str) -> str:
    """The id ``ref`` (a whole id or a unique prefix) names; for an ambiguous prefix the
    candidates are listed with their text on stderr, so the person can choose one."""
    from amcp.errors import AmbiguousIdError

    try:
        return str(mem.resolve_id(ref))
    except AmbiguousIdError as exc:
        from amcp.refs import short_id

        err.print(f"{ref} matches {len(exc.candidates)} records:", markup=False)
        for found in mem.store.get_many(list(exc.candidates)):
            text = found.record.text[:70] if found.record is not None else "(purged)"
            err.print(f"  {short_id(found.knowledge_id)}  {text}", markup=False)
        raise


def warm_up(mem: Any) -> None:
    """Do once, before a server says it is ready, what its first recall would otherwise do
    inside a request: load the embedding model (writing its ONNX graph and the copy prepared
    for fast loading the first time on this machine, ~3 s), open the vector index. Progress
    goes to stderr (stdout may be MCP's)."""
    import time

    embedder = mem.embedder
    started = time.perf_counter()
    if embedder is not None and hasattr(embedder, "load"):
        with err.status(f"loading the embedding model {embedder.model_id} "
                        "(the first time on this machine it is prepared, a few seconds)…"):
            embedder.load()
    mem.recall("warm up", k=1, touch=False)
    err.print(f"[dim]ready in {time.perf_counter() - started:.1f} s[/dim]")


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
        except (AmcpError, OSError, ValueError) as exc:
            # The wire status (404, 500, ...) means nothing to a person at a terminal; the
            # message says what is wrong and what to do. markup=False: messages quote input.
            err.print("[red]error[/red]: ", end="")
            err.print(str(exc), markup=False)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper
