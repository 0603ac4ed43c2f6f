"""The ``amcp`` script's lazy tree (amcp/cli/lazy.py) is the whole app's tree, built later.

Every help page is the same in both; an invocation builds only what it runs; a command
module not in ``amcp.cli.commands`` cannot go missing from the script.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amcp.cli import lazy
from amcp.cli.app import command
from amcp.cli.commands import COMMANDS, Listed

CLI_DIR = Path(lazy.__file__).parent


def paths(cmd: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, sub in getattr(cmd, "commands", {}).items():
        found += paths(sub, (*prefix, name))
    return found


def help_page(cli: Any, path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main([*path, "--help"], prog_name="amcp", standalone_mode=False)
    assert code in (0, None)
    return capsys.readouterr().out


def test_every_help_page_is_the_whole_apps(capsys: pytest.CaptureFixture[str]) -> None:
    whole = command()
    every = paths(whole)
    assert len(every) > 60  # the walk reached the subgroups
    differing = [
        " ".join(path) for path in every
        if help_page(lazy.root(), path, capsys) != help_page(whole, path, capsys)
    ]
    assert differing == []


def test_invoking_one_command_builds_only_that_one() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['amcp', 'recall', '--help']\n"
        "from amcp.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('amcp.cli.')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60,
                          check=True)
    loaded = ast.literal_eval(done.stderr.decode().strip().splitlines()[-1])
    others = command_modules() - {"amcp.cli.core_cmd"}
    assert others.isdisjoint(loaded)
    assert "amcp.cli.app" not in loaded
    assert b"Search memories" in done.stdout


def command_modules() -> set[str]:
    return {f"amcp.cli.{p.stem}" for p in CLI_DIR.glob("*_cmd.py")}


def test_every_command_module_is_in_the_table() -> None:
    named = {item.target.partition(":")[0] for item in COMMANDS}
    named |= {m for item in COMMANDS for m in item.also}
    assert command_modules() <= named


def test_a_typo_gets_the_close_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        lazy.root().main(["recal"], prog_name="amcp")
    assert done.value.code == 2
    assert "No such command 'recal'. Did you mean 'recall'?" in capsys.readouterr().err


def test_a_command_that_fails_to_build_is_not_reported_missing() -> None:
    commands = lazy.LazyCommands((Listed("broken", "amcp.cli.commands:NO_SUCH"),))
    with pytest.raises(AttributeError):
        commands["broken"]
    with pytest.raises(KeyError):
        commands["absent"]
    assert list(commands) == ["broken"]
