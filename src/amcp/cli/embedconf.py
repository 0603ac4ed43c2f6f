"""Which embedder a command uses, and with what settings: the CLI, the environment and the
config file, read here (a composition root) and nowhere else.

``-e/--embedder`` names it: ``auto``, ``minilm``, ``minilm-int8``, ``hashing``, ``none`` or
``openai`` (any OpenAI-compatible ``/v1/embeddings`` server: OpenAI, vLLM, Ollama, llama.cpp,
TEI). The openai embedder's settings come, each from the first place that has it, from

1. the option itself: ``-e "openai,base_url=http://127.0.0.1:8080/v1,model=nomic-embed-text"``;
2. the environment: ``AMCP_EMBED_BASE_URL``, ``AMCP_EMBED_MODEL``, ``AMCP_EMBED_API_KEY``
   (else ``OPENAI_API_KEY``), ``AMCP_EMBED_DIM``;
3. ``$AMCP_HOME/config.toml``::

       [embedder]
       name = "openai"          # what -e auto means (default: the packaged MiniLM)
       base_url = "http://127.0.0.1:8080/v1"
       model = "nomic-embed-text"
       api_key_env = "MY_KEY"   # the key is read from this variable, never from the file

``AMCP_EMBEDDER`` (or the file's ``name``) says what ``auto`` means, for a new store; a store
made with another model keeps asking for that one.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from amcp.errors import ConfigError

_ENV = {"base_url": "AMCP_EMBED_BASE_URL", "model": "AMCP_EMBED_MODEL",
        "api_key": "AMCP_EMBED_API_KEY", "dim": "AMCP_EMBED_DIM"}
_TYPES: dict[str, type] = {"base_url": str, "model": str, "api_key": str, "dim": int,
                           "timeout": float, "batch_size": int, "model_id": str}


def config_file(home: Path) -> dict[str, Any]:
    """The ``[embedder]`` table of ``home/config.toml`` (empty when there is none)."""
    path = home / "config.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    table = data.get("embedder", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [embedder] must be a table")
    return table


def _typed(key: str, value: Any, where: str) -> Any:
    kind = _TYPES.get(key)
    if kind is None:
        raise ConfigError(f"{where}: unknown openai embedder setting {key!r}; known: "
                          + ", ".join(_TYPES))
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} must be {kind.__name__}, got {value!r}") from None


def parse_option(value: str) -> tuple[str, dict[str, str]]:
    """``name[,key=value...]`` as the -e option takes it."""
    name, *pairs = [p.strip() for p in value.split(",")]
    opts: dict[str, str] = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--embedder: expected key=value after the name, got {pair!r}")
        opts[key.strip()] = val.strip()
    return name.lower(), opts


def embedder_for(value: str, home: Path, environ: Mapping[str, str] | None = None) -> Any:
    """What ``Memory(embedder=...)`` gets for the -e value ``value``: a name, or a built
    OpenAIEmbedder when the choice is openai."""
    env = os.environ if environ is None else environ
    name, cli = parse_option(value)
    table = config_file(home)
    if name in ("auto", ""):
        name = str(env.get("AMCP_EMBEDDER") or table.get("name") or "auto").lower()
    if name not in ("openai", "remote"):
        if cli:
            raise ConfigError(f"--embedder: settings after the name are for openai, not {name}")
        return name
    opts: dict[str, Any] = {}
    for key, val in table.items():
        if key == "api_key_env":
            if env.get(str(val)):
                opts["api_key"] = env[str(val)]
        elif key != "name":
            opts[key] = _typed(key, val, str(home / "config.toml"))
    for key, var in _ENV.items():
        if env.get(var):
            opts[key] = _typed(key, env[var], var)
    if "api_key" not in opts and env.get("OPENAI_API_KEY"):
        opts["api_key"] = env["OPENAI_API_KEY"]
    for key, val in cli.items():
        opts[key] = _typed(key, val, "--embedder")
    missing = [k for k in ("base_url", "model") if not opts.get(k)]
    if missing:
        raise ConfigError(
            f"the openai embedder needs {' and '.join(missing)}: give them as "
            "-e 'openai,base_url=URL,model=NAME', as AMCP_EMBED_BASE_URL / AMCP_EMBED_MODEL, "
            f"or in the [embedder] table of {home / 'config.toml'}"
        )
    from amcp.retrieval.embedders import get_embedder

    return get_embedder("openai", **opts)


__all__ = ["config_file", "embedder_for", "parse_option"]
