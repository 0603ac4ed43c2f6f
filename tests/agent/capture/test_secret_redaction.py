"""Issue 14, finding 10: a capture run leaves no secret in plaintext anywhere.

Credential records are encrypted; everything else the engine writes (topic snapshots,
checkpoints, rule captures, their keywords and tags) is plaintext and FTS-indexed, and
`amcp capture` prints it. These tests run real-looking secrets through the same path as
`amcp capture` and the hooks (`CaptureWriter` over a real `Memory`), then scan the raw
bytes of the store file, its WAL, the default export and the CLI's stdout — for each
secret, its URL-password part, any 6-character window of it (a secret split at `!` leaks
in pieces), its percent-encoded and base64 forms, case-insensitively (keywords are
lower-cased).
"""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amcp.agent.capture import CaptureEngine, Category, find_credentials, redact
from amcp.agent.capture.credentials import is_placeholder
from amcp.agent.capture_store import CaptureScopes, CaptureWriter
from amcp.memory import Memory

# (secret, the part that must stay public because the redacted form shows it)
OPENAI = "sk-proj-Q3abcdefghT7mZ2xW9pL4kR8vN1sY6uB"  # contains "abcdefgh", still real
GITHUB = "ghp_pyCGtNSEwcDQ6RAbCdEfGhO8w7ePAqSV3Jr0"  # contains "AbCdEfGh"
AWS_ID = "AKIAQ7XK2M9PLR4TZ8WN"
AWS_SECRET = "k9Fz2Qm7Rt4Wb1Yx8Np3Lc6Vd0Hs5Jg2Ku7Ei4Ao"
STRIPE = "sk_live_51Hx9QmZ2vT8kR4pL7nW3yB6c"
PG_PW = "S3cr!t-pass"
MY_PW = "My5ql!pw-Zq"
REDIS_PW = "R3d1s-P4ss%21x"  # percent-encoded "!" inside the URL
HTTPS_PW = "hTTp5-pa55!w0rd"
PROSE_PW = "Hunter2!Blue"
ZH_PW = "Qw9!zK2pLm"

SECRETS: tuple[str, ...] = (OPENAI, GITHUB, AWS_ID, AWS_SECRET, STRIPE, PG_PW, MY_PW,
                            REDIS_PW, HTTPS_PW, PROSE_PW, ZH_PW)
PUBLIC_PREFIX = ("sk-proj-", "ghp_", "AKIA", "sk_live_")

TURNS: tuple[str, ...] = (
    "I'm setting up the deploy pipeline for the billing service today.",
    f"The OpenAI key for billing is {OPENAI} and it goes into the deploy env.",
    f"The database URL is postgres://admin:{PG_PW}@db.example:5432/app for the billing deploy.",
    f"GitHub token {GITHUB} for the deploy bot, it runs the billing deploy.",
    f"AWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nthat is the billing deploy.",
    f"aws key {AWS_ID} with secret {AWS_SECRET} for the billing deploy",
    f"Stripe for billing: {STRIPE}, the deploy needs it.",
    f"cache at redis://default:{REDIS_PW}@cache.example:6379 and "
    f"mysql://root:{MY_PW}@mysql.example/app for billing deploy",
    f"the billing dashboard is https://ops:{HTTPS_PW}@dash.example/billing deploy",
    f"my password is {PROSE_PW} for the billing deploy box",
    f"我的密码是 {ZH_PW} 用于部署计费服务",
    "By the way, let's talk about lunch plans and pizza toppings for friday.",
    "The pizza place near the office does good toppings, lunch on friday then.",
    f"Remember the billing deploy uses {OPENAI} and postgres://admin:{PG_PW}@db.example.",
)

FAKE_TURNS: tuple[str, ...] = (
    "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx",
    "set API_KEY=<your-key> in the env file",
    "OPENAI_API_KEY=YOUR_API_KEY",
    "token: your-token-here",
    "the key sk-proj-xxxxxxxxxxxxxxxxxxxxxxxxxxxx goes in .env",
    "GITHUB_TOKEN=ghp_************************************",
    "password=changeme",
    "postgres://user:<password>@localhost/db",
    "sk-abcdef1234567890abcdef1234567890",
)

_HEX = re.compile(r"[0-9a-fA-F]+")


def _forms(secret: str) -> set[str]:
    """Every form of `secret` that must not appear, lower-cased."""
    body = secret
    for p in PUBLIC_PREFIX:
        body = body.removeprefix(p)
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.unquote(secret)}
    forms |= {base64.b64encode(secret.encode()).decode().rstrip("="),
              base64.urlsafe_b64encode(secret.encode()).decode().rstrip("=")}
    # Every 6-character window, except those made of hex digits only ("3abcde" of the
    # OpenAI key): the store is full of hex hashes, and a given 6-digit hex string turns
    # up in them by chance about once in a few hundred runs. A real leak still shows in
    # the windows around it, which are not all hex.
    windows = {body[i : i + 6] for i in range(len(body) - 5)}
    forms |= {w for w in windows if not _HEX.fullmatch(w)}
    return {f.lower() for f in forms}


def _leaks(blob: bytes | str, where: str) -> list[str]:
    low = (blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob).lower()
    return [f"{where}: {s!r} as {f!r}" for s in SECRETS for f in sorted(_forms(s)) if f in low]


def _store_bytes(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.glob(db.name + "*"))}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    yield m
    m.close()


def _run(memory: Memory) -> None:
    writer = CaptureWriter.for_memory(memory, scopes=CaptureScopes("user:a", "project:p"),
                                      session="S-1")
    list(writer.run({"role": "user", "content": t} for t in TURNS))


def test_no_secret_in_store_file_or_wal(memory: Memory) -> None:
    _run(memory)
    files = _store_bytes(memory.path)
    assert any(name.endswith("-wal") for name in files), files.keys()  # the WAL is scanned
    leaks = [x for name, blob in files.items() for x in _leaks(blob, name)]
    assert leaks == []


def test_no_secret_in_default_export(memory: Memory) -> None:
    _run(memory)
    buf = io.StringIO()
    memory.export(buf)
    assert _leaks(buf.getvalue(), "export") == []
    kinds = {json.loads(line)["amf"].get("vendor_extensions", {}).get("x-kind")
             for line in buf.getvalue().splitlines() if '"amf"' in line}
    assert {"topic_snapshot", "checkpoint"} <= kinds  # the plaintext summaries were exported


def test_credentials_stay_recoverable_with_reveal(memory: Memory) -> None:
    _run(memory)
    from amcp.store.base import RecordFilter

    rows = memory.list_records(RecordFilter(kinds=("credential",)), limit=100, reveal=True)
    revealed = {r.record.core.object for r in rows if r.record is not None}
    for secret in (OPENAI, GITHUB, AWS_ID, AWS_SECRET, STRIPE, PROSE_PW, ZH_PW):
        assert secret in revealed, secret
    urls = " ".join(revealed)
    for pw in (PG_PW, MY_PW, REDIS_PW, HTTPS_PW):
        assert f":{pw}@" in urls, pw
    assert all(r.state.sensitive for r in rows)


def test_cli_capture_prints_no_secret(tmp_path: Path) -> None:
    import typer

    from amcp.cli.hooks_cmd import capture

    app = typer.Typer()
    app.command()(capture)
    tr = tmp_path / "t.jsonl"
    tr.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in TURNS),
                  encoding="utf-8")
    store = tmp_path / "home" / "memory.db"
    runner = CliRunner()
    for extra in (["--dry-run"], [], ["--json"]):
        res = runner.invoke(app, [str(tr), "--store", str(store), "-e", "hashing",
                                  "--scope", "project:p", *extra])
        assert res.exit_code == 0, res.output
        assert "credential" in res.output
        assert _leaks(res.output, f"stdout {extra}") == []
    assert [x for n, b in _store_bytes(store).items() for x in _leaks(b, n)] == []


def test_engine_outputs_never_show_a_secret() -> None:
    """Every output's text, record hint (unrevealed), subject and tags."""
    engine = CaptureEngine()
    outs = [o for t in TURNS for o in engine.process({"role": "user", "content": t})]
    outs += engine.finish()
    assert any(o.kind.value == "snapshot" for o in outs)
    assert any(o.kind.value == "checkpoint" for o in outs)
    shown = [repr(o.record_hint()) + o.text for o in outs]
    assert [x for s in shown for x in _leaks(s, "output")] == []


def test_real_looking_keys_become_credentials() -> None:
    for turn, secret in ((TURNS[1], OPENAI), (TURNS[3], GITHUB), (TURNS[6], STRIPE)):
        caps = [o for o in CaptureEngine().process({"role": "user", "content": turn})
                if getattr(o, "category", None) is Category.CREDENTIAL]
        assert [c.secret.reveal() for c in caps if c.secret] == [secret], turn
    pair = CaptureEngine().process({"role": "user", "content": TURNS[5]})
    assert {o.secret.reveal() for o in pair if getattr(o, "secret", None)} == {AWS_ID, AWS_SECRET}


def test_url_password_with_bang_is_one_credential() -> None:
    caps = [o for o in CaptureEngine().process({"role": "user", "content": TURNS[2]})
            if getattr(o, "category", None) is Category.CREDENTIAL]
    assert len(caps) == 1 and caps[0].secret is not None
    assert caps[0].secret.reveal() == f"postgres://admin:{PG_PW}@db.example:5432"
    assert caps[0].object == "postgres://admin:••••••@db.example:5432"


@pytest.mark.parametrize("turn", FAKE_TURNS)
def test_fake_keys_are_not_credentials(turn: str) -> None:
    out = CaptureEngine().process({"role": "user", "content": turn})
    assert [o for o in out if getattr(o, "category", None) is Category.CREDENTIAL] == []


@pytest.mark.parametrize(
    ("value", "fake"),
    [
        ("sk-xxxxxxxxxxxxxxxxxxxxxxxx", True),
        ("YOUR_API_KEY", True),
        ("<your-key>", True),
        ("your-openai-key-here", True),
        ("${GITHUB_TOKEN}", True),
        ("ghp_************************************", True),
        ("sk-abcdef1234567890abcdef1234567890", True),
        ("sk-proj-…YzAb", True),  # our own redacted form
        ("••••••", True),
        ("changeme", True),
        (OPENAI, False),
        (GITHUB, False),
        ("Tr0ub4dor&3", False),
        ("P@ss$word9", False),  # a "$" inside a password is not a template variable
        ("R3d1s-P4ss%21x", False),  # a percent-encoded character is not a format string
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSAMPLEQ9t2LmR", False),  # "sample" inside noise
    ],
)
def test_placeholder_rule(value: str, fake: bool) -> None:
    assert is_placeholder(value) is fake


def test_redaction_masks_even_placeholders_and_examples() -> None:
    """Plaintext summaries never show anything key-shaped; only capture is conservative."""
    text = "for example OPENAI_API_KEY=sk-proj-xxxxxxxxxxxxxxxxxxxxxxxx or " + OPENAI
    assert find_credentials(text) == []  # an example line is not the user's secret
    masked = redact(text)
    assert OPENAI not in masked and "xxxxxxxxxxxxxxxxxxxx" not in masked


def test_placeholder_looking_key_is_not_copied_into_summaries() -> None:
    """The key contains "abcdefgh": once judged fake, it was neither captured nor masked."""
    engine = CaptureEngine()
    outs = []
    for i in range(5):
        outs += engine.process({"role": "user",
                                "content": f"deploy step {i}: the api key {OPENAI} fails on deploy"})
    outs += engine.finish()
    assert any(o.kind.value == "checkpoint" for o in outs)
    assert [x for o in outs for x in _leaks(o.text + repr(o.record_hint()), "summary")] == []
    assert sum(getattr(o, "category", None) is Category.CREDENTIAL for o in outs) == 1


def test_a_secret_repeated_without_context_is_masked() -> None:
    """A later turn that repeats a captured password with no cue ("log in with …")."""
    engine = CaptureEngine()
    outs = engine.process({"role": "user", "content": f"my password is {PROSE_PW}"})
    for i in range(5):
        outs += engine.process({"role": "user",
                                "content": f"log in to the staging box {i} with {PROSE_PW} now"})
    outs += engine.finish()
    assert [x for o in outs for x in _leaks(o.text + repr(o.record_hint()), "summary")] == []
    assert "known" not in repr(engine) and PROSE_PW not in repr(engine)


def test_a_secret_repeated_in_the_same_turn_is_masked() -> None:
    turn = f"my password is {PROSE_PW}. I typed {PROSE_PW} twice and the deploy failed"
    assert PROSE_PW not in redact(turn)
    outs = CaptureEngine().process({"role": "user", "content": turn})
    assert [x for o in outs for x in _leaks(o.text + repr(o.record_hint()), "output")] == []


def test_a_url_password_typed_again_alone_is_masked() -> None:
    engine = CaptureEngine()
    outs = engine.process({"role": "user", "content": TURNS[2]})
    for i in range(5):
        outs += engine.process({"role": "user",
                                "content": f"psql asks again, I typed {PG_PW} at step {i} of the deploy"})
    outs += engine.finish()
    assert [x for o in outs for x in _leaks(o.text + repr(o.record_hint()), "output")] == []
