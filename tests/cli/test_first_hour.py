"""What a new user meets in the first hour: typed ids, stdin and files, help, foreign files.

Every case here misbehaved once (issue 20): ``-`` stored a literal "-", a foreign SQLite file
got amcp's tables and WAL, ``amcp --help`` loaded the protocol stack, help showed
``<bool>`` and ``<list[str]>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.amcp_process import amcp_argv
from typer.testing import CliRunner

from amcp.cli.app import app

runner = CliRunner()


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    res = runner.invoke(app, list(args), input=stdin)
    return res.exit_code, res.output


def amcp(*args: str, stdin: bytes | None = None, closed_stdin: bool = False,
         cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    argv = amcp_argv(*args)
    if closed_stdin:
        argv = ["sh", "-c", 'exec "$@" <&-', "sh", *argv]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=120,
                          env=dict(os.environ), cwd=cwd, check=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "memory.db"
    code, out = run("init", "--store", str(path), "--embedder", "hashing")
    assert code == 0, out
    return path


def remember(store: Path, *args: str, stdin: str | None = None) -> str:
    code, out = run("remember", *args, "--store", str(store), "-e", "hashing", "--json",
                    stdin=stdin)
    assert code == 0, out
    return str(json.loads(out)["knowledge_id"])


def text_of(store: Path, kid: str) -> str:
    code, out = run("show", kid, "--store", str(store), "--json")
    assert code == 0, out
    return str(json.loads(out)["amf"]["annotation"]["natural_language"])


# ----------------------------------------------------------------------------- input


def test_dash_reads_stdin_and_file_reads_a_file(store: Path, tmp_path: Path) -> None:
    kid = remember(store, "-", stdin="Deploys happen on Thursday\n")
    assert text_of(store, kid) == "Deploys happen on Thursday"
    line = "Line of a long design note about the ledger.\n"
    note = tmp_path / "note.md"
    note.write_text(line * 6_000, encoding="utf-8")  # 270 KB: over Linux's 128 KB argv limit
    kid = remember(store, "--file", str(note))
    assert text_of(store, kid) == (line * 6_000).rstrip("\n")
    note.write_text(line * 120_000, encoding="utf-8")  # 5.4 MB: more than a record holds
    code, out = run("remember", "--file", str(note), "--store", str(store), "-e", "hashing")
    assert code == 1 and out.startswith("error: text: 5,399,999 bytes is too long"), out


def test_empty_and_closed_stdin_are_clear_errors(store: Path) -> None:
    for kwargs in ({"stdin": b""}, {"closed_stdin": True}):
        done = amcp("remember", "-", "--store", str(store), "-e", "hashing", **kwargs)
        err = done.stderr.decode()
        assert done.returncode == 1 and "stdin" in err and "Traceback" not in err, err
    _, out = run("stats", "--store", str(store), "--json")
    assert json.loads(out)["records"] == 0  # nothing stored, least of all a literal "-"


def test_text_and_file_together_or_neither(store: Path, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    code, out = run("remember", "hi", "--file", str(tmp_path / "a.txt"), "--store", str(store))
    assert code == 1 and "not both" in out
    code, out = run("remember", "--store", str(store))
    assert code == 1 and "--file" in out


# ----------------------------------------------------------------------------- ids


def test_every_id_command_takes_a_prefix(store: Path) -> None:
    s = str(store)
    kid = remember(store, "Alice prefers tabs over spaces")
    code, out = run("recall", "tabs", "--store", s, "-e", "hashing")
    assert code == 0 and kid[:14] in out and "…" not in out  # the printed id is copyable
    code, out = run("show", kid[:14], "--store", s)
    assert code == 0 and kid in out and "[active]" in out
    code, out = run("supersede", kid[2:10], "Alice prefers spaces now", "--store", s,
                    "-e", "hashing", "--json")
    assert code == 0, out
    new = json.loads(out)["knowledge_id"]
    assert json.loads(out)["supersedes"] == kid
    code, out = run("forget", new[:8], "-r", "she changed her mind", "--store", s, "-e", "hashing")
    assert code == 0 and new in out
    code, out = run("purge", kid[:8].upper(), "--yes", "--store", s, "-e", "hashing")
    assert code == 0 and kid in out


def test_ambiguous_prefix_lists_candidates_and_unknown_prefix_fails(store: Path) -> None:
    from tests.memory.test_refs import two_sharing_a_prefix

    from amcp.memory import Memory

    with Memory(store, embedder="hashing") as mem:
        prefix, a, b = two_sharing_a_prefix(mem)
    done = amcp("show", prefix, "--store", str(store))
    err = done.stderr.decode()
    assert done.returncode == 1 and "ambiguous" in err
    assert a[:14] in err and b[:14] in err and "fact number" in err
    missing = "K-" + ("0" if a[2] != "0" else "1") + "abcdef"
    code, out = run("show", missing, "--store", str(store))
    assert code == 1 and "no record starts with" in out


def test_list_filters(store: Path) -> None:
    s = str(store)
    a = remember(store, "Alice prefers tabs", "--scope", "user:alice", "--kind", "preference")
    b = remember(store, "Payments deploy on Thursday", "--scope", "project:payments",
                 "--type", "KT-DECISION")
    run("forget", b, "-r", "moved to Tuesday", "--store", s, "-e", "hashing")
    code, out = run("list", "--store", s)
    assert code == 0 and a[:14] in out and b[:14] not in out
    code, out = run("list", "--lifecycle", "all", "--store", s, "--json")
    assert {i["knowledge_id"] for i in json.loads(out)} == {a, b}
    code, out = run("list", "-l", "invalidated", "--type", "KT-DECISION", "--store", s)
    assert b[:14] in out and a[:14] not in out
    code, out = run("list", "--scope", "user:alice", "--kind", "preference", "--store", s)
    assert a[:14] in out
    code, out = run("list", "--since", "1h", "--store", s)
    assert a[:14] in out
    code, out = run("list", "--until", "2001-01-01T00:00:00Z", "--store", s)
    assert "no records match" in out
    code, out = run("list", "--lifecycle", "sleeping", "--store", s)
    assert code == 1 and "lifecycles" in out and "active" in out


# ----------------------------------------------------------------------------- not ours


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_foreign_sqlite_file_is_refused_unchanged(tmp_path: Path) -> None:
    other = tmp_path / "other_app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users (name) VALUES ('ada')")
    db.close()
    before, listing = digest(other), sorted(p.name for p in tmp_path.iterdir())
    for args in (("recall", "foo"), ("remember", "hi", "-e", "hashing"), ("init",), ("list",)):
        code, out = run(*args, "--store", str(other))
        assert code == 1 and "another program" in out and "unchanged" in out, out
    assert digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no keys/, -wal or -shm
    with sqlite3.connect(other) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["users"]
    db.close()


def test_a_text_file_is_refused_unchanged(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    code, out = run("remember", "hi", "--store", str(notes), "-e", "hashing")
    assert code == 1 and "not a readable amcp store" in out
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "new.db"
    empty.touch()
    code, out = run("init", "--store", str(empty), "-e", "hashing")
    assert code == 0 and "store ready" in out


def test_memory_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amcp.memory import Memory

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with Memory("~/.amcp/memory.db", embedder=None) as mem:
        assert mem.path == tmp_path / ".amcp" / "memory.db"
    assert (tmp_path / ".amcp" / "memory.db").exists() and not (tmp_path / "~").exists()


# ----------------------------------------------------------------------------- help


def test_help_loads_no_protocol_or_conformance_modules() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['amcp', '--help']\n"
        "from amcp.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('amcp.wire', 'amcp.session', 'amcp.conformance', 'amcp.node', 'amcp.store',"
        " 'amcp.memory', 'amcp.retrieval', 'numpy', 'cryptography', 'fastapi', 'mcp')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60,
                          check=True)
    assert done.stderr.decode().strip() == "[]"
    assert b"remember" in done.stdout and b"list" in done.stdout


def all_commands() -> list[tuple[str, object]]:
    from amcp.cli.app import command

    found: list[tuple[str, object]] = []

    def walk(cmd: object, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}".strip())
        else:
            found.append((path, cmd))

    walk(command(), "")
    return found


def test_every_option_has_a_help_line() -> None:
    missing = [
        f"amcp {path} {param.opts[0]}"
        for path, cmd in all_commands()
        for param in cmd.params  # type: ignore[attr-defined]
        if param.param_type_name == "option" and not (param.help or "").strip()
    ]
    assert missing == []


def test_help_has_no_annotation_noise() -> None:
    for path in ("remember", "recall", "list", "serve", "conformance", "import"):
        done = amcp(*path.split(), "--help")
        text = done.stdout.decode()
        assert done.returncode == 0, done.stderr
        assert "<bool>" not in text and "<list[" not in text and "<str>" not in text, text
        assert "<path>" not in text and "<float>" not in text, text


# ----------------------------------------------------------------------------- imports


def test_a_failed_import_into_a_new_store_leaves_nothing(store: Path, tmp_path: Path) -> None:
    for i in range(5):
        remember(store, f"fact {i} about the ledger")
    export = tmp_path / "backup.ndjson"
    code, out = run("export", str(export), "--store", str(store))
    assert code == 0, out
    data = export.read_bytes()
    truncated = tmp_path / "truncated.ndjson"
    truncated.write_bytes(data[: len(data) * 2 // 3])  # cut inside a line
    target = tmp_path / "fresh" / "memory.db"
    code, out = run("import", str(truncated), "--store", str(target), "-e", "hashing")
    assert code == 1 and "Traceback" not in out, out
    assert not (tmp_path / "fresh").exists()
    # a dry run into a store that does not exist makes none either
    code, out = run("import", str(export), "--dry-run", "--store", str(target), "-e", "hashing")
    assert code == 0, out
    assert not (tmp_path / "fresh").exists()
    # ... and a good import does, while a failed one into an existing store keeps it whole
    code, out = run("import", str(export), "--store", str(target), "-e", "hashing")
    assert code == 0, out
    code, out = run("import", str(truncated), "--store", str(target), "-e", "hashing")
    assert code == 1 and target.exists()
    _, out = run("stats", "--store", str(target), "--json")
    assert json.loads(out)["records"] == 5


# ----------------------------------------------------------------------------- defaults


def test_default_scope_and_current_project_come_from_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "payments-api"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    store = tmp_path / "m.db"
    done = amcp("remember", "Deploys need a green canary", "--store", str(store), "-e",
                "hashing", "--json", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    kid = json.loads(done.stdout)["knowledge_id"]
    done = amcp("query", "RECALL WHERE project = current_project()", "--store", str(store),
                "-e", "hashing", "--json", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert [r["knowledge_id"] for r in json.loads(done.stdout)["results"]] == [kid]
    done = amcp("show", kid, "--store", str(store), "--json", cwd=tmp_path)
    assert json.loads(done.stdout)["amf"]["meta"]["project_scope"] == ["project:payments-api"]
    plain = tmp_path / "notes"
    plain.mkdir()
    done = amcp("remember", "a note", "--store", str(store), "-e", "hashing", "--json", cwd=plain)
    other = json.loads(done.stdout)["knowledge_id"]
    done = amcp("show", other, "--store", str(store), "--json", cwd=plain)
    assert json.loads(done.stdout)["amf"]["meta"]["project_scope"] == ["project:notes"]


def test_the_demo_leaves_nothing_behind(tmp_path: Path) -> None:
    tmp, state = tmp_path / "tmp", tmp_path / "state"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp), "AMCP_STATE_DIR": str(state)}
    done = subprocess.run(amcp_argv("demo", "--embedder", "hashing"), capture_output=True,
                          text=True, env=dict(os.environ, **env), timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "integrity ok" in done.stdout and "removed" in done.stdout
    assert list(tmp.iterdir()) == [] and not state.exists()
