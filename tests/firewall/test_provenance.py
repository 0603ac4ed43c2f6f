"""Provenance on every write: verified against the writer keys of the record's scopes;
each bad claim a 400/403 naming the field, with nothing stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.firewall.kit import SCOPE, ed25519_claim, ed25519_writer, hmac_claim, memory

from amcp.errors import ForbiddenError, ValidationError
from amcp.firewall import Origin, Verification
from amcp.firewall.keys import WriterKeys

TEXT = "Alice's manager is Priya."


def test_signed_user_write_is_verified_and_labelled(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        out = mem.remember(TEXT, scope=SCOPE, provenance=hmac_claim(TEXT))
        assert out.created and out.held is None
        rec = mem.get(out.knowledge_id).record
        assert rec is not None and rec.vendor_extensions["x-provenance"]["origin"] == "user"
        res = mem.recall("manager", scope=SCOPE)
        trust = res.trust[out.knowledge_id]
        assert (trust.origin, trust.verification) == (Origin.USER, Verification.VERIFIED)
        assert trust.label() == "from the user, verified (alice)"


def test_ed25519_writer_key(tmp_path: Path) -> None:
    key, public = ed25519_writer()
    with memory(tmp_path) as mem:
        assert mem.firewall is not None
        mem.firewall.keys.register(SCOPE, "alice-phone", ed25519_public=public)
        out = mem.remember(TEXT, scope=SCOPE, provenance=ed25519_claim(key, TEXT, "alice-phone"))
        assert mem.recall("manager", scope=SCOPE).trust[out.knowledge_id].verified
        other, _ = ed25519_writer()  # a key the node does not know
        with pytest.raises(ForbiddenError, match=r"provenance\.signature: does not verify"):
            mem.remember("Alice's manager is Anil.", scope=SCOPE,
                         provenance=ed25519_claim(other, "Alice's manager is Anil.", "alice-phone"))


BAD: list[tuple[str, Any, type[Exception], str]] = [
    ("forged signature", {"origin": "user", "writer": "alice", "signature": "ab" * 32},
     ForbiddenError, r"provenance\.signature: does not verify"),
    ("signature over other text", hmac_claim("something else"),
     ForbiddenError, r"provenance\.signature: does not verify"),
    ("signature of another origin", hmac_claim(TEXT, origin="agent") | {"origin": "user"},
     ForbiddenError, r"provenance\.signature"),
    ("user claim, no signature, scope has keys", {"origin": "user"},
     ForbiddenError, r"provenance\.signature: scope 'user:alice' has writer keys"),
    ("writer with no key", hmac_claim(TEXT, writer="mallory"),
     ForbiddenError, r"writer 'mallory' has no key registered for scope 'user:alice'"),
    ("signature without writer", {"origin": "user", "signature": "ab" * 32},
     ValidationError, r"provenance\.writer"),
    ("origin of the wrong type", {"origin": 5}, ValidationError, r"provenance\.origin"),
    ("unknown origin", {"origin": "admin"}, ValidationError, r"provenance\.origin"),
    ("writer of the wrong type", {"origin": "agent", "writer": 7}, ValidationError,
     r"provenance\.writer"),
    ("unknown field", {"origin": "agent", "trusted": True}, ValidationError,
     r"provenance\.trusted"),
    ("not an object", 42, ValidationError, r"provenance"),
]


@pytest.mark.parametrize(("case", "claim", "error", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_claims_are_refused_and_nothing_stored(
    tmp_path: Path, case: str, claim: Any, error: type[Exception], message: str
) -> None:
    with memory(tmp_path) as mem:
        before = mem.stats().records
        with pytest.raises(error, match=message):
            mem.remember(TEXT, scope=SCOPE, provenance=claim)
        assert mem.stats().records == before


def test_signature_for_another_scope_is_refused(tmp_path: Path) -> None:
    """alice's key is registered for user:alice only: her signature proves nothing in
    team:x, and a record in both scopes needs her key in both."""
    with memory(tmp_path) as mem:
        for scope in (["team:x"], [SCOPE, "team:x"]):
            with pytest.raises(ForbiddenError, match="no key registered for scope 'team:x'"):
                mem.remember(TEXT, scope=scope, provenance=hmac_claim(TEXT))
        assert mem.stats().records == 0


def test_without_keys_a_user_claim_is_stored_unverified(tmp_path: Path) -> None:
    with memory(tmp_path, keys=False) as mem:
        out = mem.remember(TEXT, scope=SCOPE, provenance={"origin": "user"})
        own = mem.remember("Alice's desk is on floor 3.", scope=SCOPE)  # this node's process
        res = mem.recall("manager desk", scope=SCOPE)
        trust = res.trust[out.knowledge_id]
        assert trust.verification is Verification.UNVERIFIED
        assert trust.tier < res.trust[own.knowledge_id].tier  # worth an agent's word
        assert trust.label() == "from the user, unverified"


def test_batch_write_is_screened_the_same(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        with pytest.raises(ForbiddenError):
            mem.remember_many([{"text": "fine", "scope": SCOPE, "provenance": hmac_claim("fine")},
                               {"text": TEXT, "scope": SCOPE, "provenance": {"origin": "user"}}])
        assert mem.stats().records == 0  # the whole batch, as for any other bad item


def test_registry_file_is_private_and_reread(tmp_path: Path) -> None:
    keys = WriterKeys(tmp_path)
    assert keys.guarded([SCOPE]) == []
    WriterKeys(tmp_path).register(SCOPE, "alice", hmac_secret=b"s" * 16)  # another process
    assert keys.guarded([SCOPE]) == [SCOPE]
    assert (tmp_path / "writers.json").stat().st_mode & 0o077 == 0
    with pytest.raises(ValidationError, match="hmac"):
        keys.register(SCOPE, "bob", hmac_secret=b"short")
    (tmp_path / "writers.json").write_text("{not json")
    from amcp.errors import StoreError

    with pytest.raises(StoreError, match="cannot read writer keys"):  # never "no keys"
        WriterKeys(tmp_path).guarded([SCOPE])


def test_claim_is_covered_by_the_envelope(tmp_path: Path) -> None:
    """Editing the claim after the write (say, external → user) breaks the envelope: the
    node refuses the edited record as it would any forged one."""
    from amcp.amf.record import AMFRecord
    from amcp.errors import IntegrityError

    with memory(tmp_path, keys=False) as mem:
        rec = mem.compose("a web page said so", scope=SCOPE, provenance="external").to_dict()
        rec["vendor_extensions"]["x-provenance"]["origin"] = "user"
        with pytest.raises(IntegrityError, match="envelope"):
            mem.put(AMFRecord.from_dict(rec))


def test_a_scopeless_write_goes_to_its_writers_scope(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        own = mem.remember("The printer code is 4471.")
        signed = mem.remember(TEXT, provenance=hmac_claim(TEXT))
        glob = mem.remember("Company holidays follow the Karnataka list.", scope="*")
        scopes = {k: mem.get(k).record.meta.project_scope  # type: ignore[union-attr]
                  for k in (own.knowledge_id, signed.knowledge_id, glob.knowledge_id)}
        assert scopes == {own.knowledge_id: ("user:local",), signed.knowledge_id: (SCOPE,),
                          glob.knowledge_id: ("*",)}
        # bob does not see alice's scopeless memory
        assert signed.knowledge_id not in {h.knowledge_id for h in
                                           mem.recall("manager", scope="user:bob").hits}


def test_http_scopeless_write_is_not_global(tmp_path: Path) -> None:
    from tests.api.kit import client_for

    with memory(tmp_path) as mem, client_for(mem) as http:
        r = http.post("/v1/memories", json={"text": "Deploys go out on Tuesdays"})
        assert r.status_code == 201
        rec = mem.get(r.json()["knowledge_id"]).record
        assert rec is not None and rec.meta.project_scope == ("user:local",)
