"""Secrets never reach text, quote, object, repr, str, logs or summaries."""

from __future__ import annotations

import dataclasses
import logging
import pickle

import pytest

from amcp.agent.capture import CaptureEngine, Category, Secret, find_credentials, redact

SECRETS = {
    "Here's my GitHub token: ghp_R8kd92LmQzXv71PpW0aTyUe5nBc4Hs3JfG6d": "ghp_R8kd92LmQzXv71PpW0aTyUe5nBc4Hs3JfG6d",
    "export OPENAI_API_KEY=sk-proj-9fJ2kLmN4pQr7StUvWx0YzAb": "sk-proj-9fJ2kLmN4pQr7StUvWx0YzAb",
    "AWS: AKIAQ7XK2M9PLR4TZ8WN": "AKIAQ7XK2M9PLR4TZ8WN",
    "slack: xoxb-2841937465-ZqP81mRkT3vW": "xoxb-2841937465-ZqP81mRkT3vW",
    "DSN postgres://admin:S3cretPw9@db.internal:5432/app": "S3cretPw9",
    "my database password is Tr0ub4dor&3": "Tr0ub4dor&3",
    "我的GitHub密码是Gh@2024pass": "Gh@2024pass",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U":
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize(("content", "secret"), SECRETS.items())
def test_secret_never_in_display_forms(content: str, secret: str, caplog: pytest.LogCaptureFixture) -> None:
    out = CaptureEngine().process({"role": "user", "content": content})
    creds = [o for o in out if getattr(o, "category", None) is Category.CREDENTIAL]
    assert len(creds) == 1
    c = creds[0]
    assert c.sensitive and c.secret is not None
    logging.getLogger("test").warning("captured %s / %r", c, c)
    for shown in (c.text, c.quote, c.object, c.redacted, repr(c), str(c), repr(c.secret),
                  str(c.secret), repr(dataclasses.asdict(c)), caplog.text,
                  repr(c.record_hint())):
        assert secret not in shown
    assert secret in c.secret.reveal()
    assert c.record_hint(reveal=True).object == c.secret.reveal()


def test_redacted_style() -> None:
    [hit] = find_credentials("token ghp_R8kd92LmQzXv71PpW0aTyUe5nBc4Hs3JfG6d")
    assert hit.redacted == "ghp_…fG6d"
    [short] = find_credentials("my pin is 4821x")
    assert short.redacted == "••••••"  # short secrets show neither suffix nor length


def test_secret_cannot_be_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Secret("hunter22", "••••••"))


def test_placeholders_are_not_secrets() -> None:
    for text in ("sk-xxxxxxxxxxxxxxxxxxxxxxxx", "API_KEY=<your-key-here>", "token=${GITHUB_TOKEN}",
                 "password=changeme", "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----"):
        assert find_credentials(text) == []


def test_summaries_are_redacted() -> None:
    engine = CaptureEngine()
    key = "sk-proj-9fJ2kLmN4pQr7StUvWx0YzAb"
    outs = []
    for i in range(5):
        outs += engine.process({"role": "user", "content": f"deploy step {i}: the api key {key} fails on deploy"})
    outs += engine.finish()
    texts = " ".join(o.text for o in outs)
    assert key not in texts
    assert "sk-proj-…YzAb" in redact(f"use {key}")


def test_duplicate_credential_uses_fingerprint_not_secret() -> None:
    probes: list[str] = []
    engine = CaptureEngine(is_duplicate=lambda t: probes.append(t) or False)
    engine.process({"role": "user", "content": "my database password is Tr0ub4dor&3"})
    assert probes and all("Tr0ub4dor&3" not in p for p in probes)
