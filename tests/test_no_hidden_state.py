"""No environment reads or import-time registration outside the composition roots
(issue 15, finding 7; ../shared/ARCHITECTURE.md: "Only composition roots read
configuration"). A module that needs a setting takes it as a parameter."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "amcp"

# Where reading the environment is the module's job, each with its reason.
ALLOWED = {
    "cli": "the CLI is the composition root",
    "agent/hooks/__main__.py": "the hooks' entry point is their composition root",
    "paths.py": "the default locations (state, witness, cache), read for the roots",
    # Not configuration: the environment handed on, unchanged, to a child process.
    "agent/hooks/claude_code.py": "a detached writer inherits the hook's environment",
    "brain/gitrepo.py": "git runs with the caller's environment plus two settings",
    # Written, not read: onnxruntime takes its telemetry opt-out only from the environment,
    # once, when it starts; setdefault keeps a value the user set.
    "retrieval/onnxserve.py": "onnxruntime's telemetry opt-out, set before it starts",
}


def _allowed(path: Path) -> bool:
    rel = path.relative_to(SRC).as_posix()
    return any(rel == name or rel.startswith(name + "/") for name in ALLOWED)


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "os" and node.attr in ("environ", "getenv", "putenv",
                                                             "register_at_fork"):
            found.append((node.lineno, f"os.{node.attr}"))
    return found


def test_no_environment_reads_or_fork_hooks_outside_composition_roots() -> None:
    bad = [
        f"{path.relative_to(SRC)}:{line} {what}"
        for path in sorted(SRC.rglob("*.py")) if not _allowed(path)
        for line, what in _uses(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert bad == [], "take these as parameters from a composition root:\n" + "\n".join(bad)


def test_the_allowed_list_names_real_modules() -> None:
    for name in ALLOWED:
        assert (SRC / name).exists(), name
