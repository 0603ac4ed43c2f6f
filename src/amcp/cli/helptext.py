"""Help pages for people: value placeholders in words, not Python annotations.

Typer labels every option with its type (``<bool>``, ``<str>``, ``<path>``),
which reads as noise to someone who has never seen the code. Here, once, for the whole
command tree: flags get no placeholder (``--json``, not ``--json <bool>``), values get a
word (``--scope TEXT``, ``--store PATH``), arguments their name in capitals.
"""

from __future__ import annotations

import copy
from typing import Any

_WORDS = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "path": "PATH",
    "file": "PATH",
    "directory": "DIR",
}


def _label(param: Any, ctx: Any) -> str:
    """The type's own label, as Typer would print it (``<str>``, ``<path>``, ``<int range>``)."""
    if not hasattr(param, "type"):
        # typer 0.29 (excluded by pyproject; kept so a venv not yet reinstalled after the
        # pin still starts): parameters have no click type, only an annotation label.
        return str(param.display_type(ctx))
    return str(param.type.get_metavar(param=param, ctx=ctx) or param.type.name)


def _placeholder(param: Any, ctx: Any) -> str:
    label = _label(param, ctx).strip("<>")
    if label.startswith("list[") and label.endswith("]"):
        label = label[5:-1]  # typer 0.29's label of a repeatable option
    if "|" in label:  # a choice: the values themselves are the best placeholder
        return "[" + label + "]"
    if label.endswith(" range"):
        label = label[: -len(" range")]
    return _WORDS.get(label, label.upper())


def _no_label(*args: Any, **kwargs: Any) -> str:
    del args, kwargs  # an argument's name already says what it takes (``TEXT``, ``PATH``)
    return ""


def humanise(command: Any) -> None:
    """Set readable placeholders on every parameter of ``command`` and its subcommands."""
    import typer

    ctx = typer.Context(command, info_name=command.name)
    helper = command.get_help_option(ctx)  # made once per command and kept by it
    params = [*command.params, *([helper] if helper is not None else [])]
    for param in params:
        if param.param_type_name == "argument":
            param.metavar = param.metavar or _placeholder(param, ctx)
            # Typer prints an argument's type label beside its name whatever the metavar;
            # this argument's own copy of its type has none (the shared type keeps it).
            if hasattr(param, "type"):
                param.type = copy.copy(param.type)
                param.type.get_metavar = _no_label
            else:  # typer 0.29, as in _label
                param.display_type_rich = _no_label
        elif param.metavar is not None:
            continue  # named on purpose where it is declared
        elif getattr(param, "is_flag", False):
            param.metavar = ""
        else:
            param.metavar = _placeholder(param, ctx)
    for sub in getattr(command, "commands", {}).values():
        humanise(sub)
