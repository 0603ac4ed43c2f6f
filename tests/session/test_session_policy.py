"""Access policy: who may read and write which project scopes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from amcp.errors import ConfigError, ForbiddenError, Status
from amcp.session import AccessPolicy, Mode, NodeIdentity, Principal

KEY = NodeIdentity.generate()
OTHER = NodeIdentity.generate()

TOML = f"""
[default]
read = ["public"]

[[peer]]
name = "laptop"
public_key = "{KEY.public_key_b64}"
read = ["*"]
write = ["team:*", "amcp"]

[[peer]]
name = "ci"
bearer_sha256 = "{hashlib.sha256(b"s3cret").hexdigest()}"
read = ["team:backend"]
"""


@pytest.fixture
def policy(tmp_path: Path) -> AccessPolicy:
    path = tmp_path / "policy.toml"
    path.write_text(TOML, encoding="utf-8")
    return AccessPolicy.load(path)


def test_allow_and_deny(policy: AccessPolicy) -> None:
    laptop = Principal(public_key=KEY.public_key)
    policy.check(laptop, "anything", Mode.READ)
    policy.check(laptop, "team:x", Mode.WRITE)
    policy.check(laptop, "amcp", Mode.WRITE)
    with pytest.raises(ForbiddenError) as exc:
        policy.check(laptop, "amcp-other", Mode.WRITE)
    assert exc.value.status == Status.FORBIDDEN

    ci = Principal(bearer="s3cret")
    policy.check(ci, "team:backend", Mode.READ)
    assert not policy.allowed(ci, "team:frontend", Mode.READ)
    assert not policy.allowed(ci, "team:backend", Mode.WRITE)
    assert not policy.allowed(Principal(bearer="wrong"), "team:backend", Mode.READ)

    stranger = Principal(public_key=OTHER.public_key)
    policy.check(stranger, "public", Mode.READ)  # [default]
    with pytest.raises(ForbiddenError):
        policy.check_all(stranger, ["public", "private"], Mode.READ)


def test_json_form(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps({"peer": [{"bearer": "tok", "read": ["*"], "write": ["*"]}]}), encoding="utf-8"
    )
    policy = AccessPolicy.load(path)
    assert policy.allowed(Principal(bearer="tok"), "x", Mode.WRITE)
    assert not policy.allowed(Principal(), "x", Mode.READ)


@pytest.mark.parametrize(
    "data",
    [
        {"peers": []},
        {"peer": [{"read": ["*"]}]},  # no identity
        {"peer": [{"public_key": "AAAA", "read": ["*"]}]},  # not 32 bytes
        {"peer": [{"bearer": "a", "bearer_sha256": "00" * 32}]},
        {"peer": [{"bearer_sha256": "zz"}]},
        {"peer": [{"bearer": "a", "read": "*"}]},  # not a list
        {"peer": [{"bearer": "a", "admin": True}]},
        {"peer": {"bearer": "a"}},
    ],
)
def test_bad_policies(data: dict) -> None:
    with pytest.raises(ConfigError):
        AccessPolicy.from_mapping(data)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        AccessPolicy.load(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[peer", encoding="utf-8")
    with pytest.raises(ConfigError):
        AccessPolicy.load(bad)
