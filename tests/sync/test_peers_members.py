"""The sans-IO parts: the node config's [sync]/[peers], scope policy, SWIM merge rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcp.errors import ConfigError
from amcp.session.identity import b64url_encode
from amcp.sync.members import Membership, MemberState
from amcp.sync.peers import SyncConfig, load_config, parse_endpoint, peers_from_cli
from amcp.sync.replica import Replica, Source


@pytest.mark.parametrize(("text", "want"), [
    ("hub:7707", ("hub", 7707)), ("10.0.0.2", ("10.0.0.2", 7707)),
    ("[::1]:9000", ("::1", 9000)), (" host:1 ", ("host", 1)),
])
def test_endpoints(text: str, want: tuple[str, int]) -> None:
    assert parse_endpoint(text) == want


@pytest.mark.parametrize("text", ["", ":7707", "host:x", "host:70000", "[::1]:0"])
def test_bad_endpoints_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_endpoint(text)


def test_the_node_config(tmp_path: Path) -> None:
    key = b64url_encode(b"k" * 32)
    path = tmp_path / "node.toml"
    path.write_text(f"""
[sync]
anti_entropy_interval = 60
hop_limit = 4

[peers.hub]
address = "hub.example.org:7707"
send = ["team:*"]
accept = ["team:backend"]
public_key = "{key}"

[peers.cold]
address = "10.0.0.9"
tier = 2
""", encoding="utf-8")
    cfg = load_config(path).with_peers(peers_from_cli(["127.0.0.1:7800", "10.0.0.9:7707"]))
    assert (cfg.anti_entropy_interval, cfg.hop_limit) == (60.0, 4)
    hub, cold, cli = cfg.peers  # the --peer naming an endpoint already listed is not added
    assert hub.sends(["team:x", "user:bob"]) and not hub.sends(["user:bob"])
    assert hub.accepts(["team:backend"]) and not hub.accepts(["team:backend", "team:x"])
    assert (cold.tier, cold.endpoint, cli.endpoint) == (2, "10.0.0.9:7707", "127.0.0.1:7800")
    (grant,) = cfg.policy_grants()
    assert grant.read == ("team:*",) and grant.write == ("team:backend",)


def test_lag_sample_interval_is_read(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text("[sync]\nlag_sample_interval = 2.5", encoding="utf-8")
    assert load_config(path).lag_sample_interval == 2.5


@pytest.mark.parametrize("body", [
    "[sync]\nhop_limit = 0", "[sync]\nwhatever = 1", "[peers.x]\naddress = 'h:1'\ntier = 5",
    "[peers.x]\nport = 1", "[peers.x]\naddress = 'h:1'\nsend = 'team:*'",
    "[peers.x]\naddress = 'h:1'\npublic_key = 'short'", "[sync]\nlag_sample_interval = 0",
])
def test_config_errors_are_one_clear_error(tmp_path: Path, body: str) -> None:
    path = tmp_path / "node.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError):
        load_config(path)


def _entry(key: str, state: str, inc: int, endpoint: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {"key": key, "node_address": "amcp://db.x.fp-aaaaaa.r",
                              "state": state, "incarnation": inc, "hlc": 1}
    if endpoint:
        out["endpoint"] = endpoint
    return out


def test_swim_merge_rules() -> None:
    table = Membership("me", "amcp://db.x.fp-aaaaaa.r", "127.0.0.1:1", incarnation=100)
    learned = table.merge([_entry("b", "alive", 5, "127.0.0.1:2"), _entry("c", "dead", 9),
                           "junk", {"key": 3}], now=0.0)
    assert [m.key for m in learned] == ["b"]  # a dead stranger is not learned
    table.merge([_entry("b", "suspect", 5)], now=1.0)  # same incarnation: suspect wins
    assert table.get("b").state is MemberState.SUSPECT  # type: ignore[union-attr]
    table.merge([_entry("b", "alive", 5)], now=2.0)  # ...over alive at that incarnation
    assert table.get("b").state is MemberState.SUSPECT  # type: ignore[union-attr]
    table.merge([_entry("b", "alive", 6)], now=3.0)  # b refuted it: a higher incarnation
    assert table.get("b").state is MemberState.ALIVE  # type: ignore[union-attr]
    table.suspect("b", now=4.0)
    assert [m.key for m in table.tick(now=10.0, suspect_timeout=5.0)] == ["b"]
    table.merge([_entry("me", "suspect", 100)], now=11.0)  # a rumour about us: refuted
    assert table.me.incarnation == 101 and table.me.state is MemberState.ALIVE


def test_the_loop_rule_the_rate_limit_and_sources() -> None:
    replica = Replica(SyncConfig(hop_limit=3, push_rate=10.0), "me", "amcp://db.x.fp-aa.r")
    assert replica.is_loop("me", None, 0) and replica.is_loop("other", None, 4)
    assert not replica.is_loop("other", None, 3) and not replica.is_loop(None, "x", 0)
    assert replica.admit_push("p", 100, now=0.0)  # a burst of 10 s worth
    assert not replica.admit_push("p", 1, now=0.0)
    assert replica.admit_push("p", 10, now=1.0)  # refilled at 10/s
    replica.note_applied([("put", "K-1")], Source("p", "o", "amcp://o", 2))
    assert replica.source_of("put", "K-1") == Source("p", "o", "amcp://o", 2)
    assert replica.source_of("purge", "K-1") is None
