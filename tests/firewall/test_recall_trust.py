"""Trust in recall: order, labels, trust filters, hijack defences, contradicting updates."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.firewall.kit import SCOPE, hmac_claim, memory

from amcp.amf.types import Lifecycle
from amcp.errors import ValidationError
from amcp.firewall import contradiction
from amcp.firewall.density import stuffed


def _signed(mem, text: str, **kw):  # type: ignore[no-untyped-def]
    return mem.remember(text, scope=SCOPE, provenance=hmac_claim(text), **kw)


def test_lower_trust_never_outranks_the_verified_user(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        web = mem.remember("Office lunch menu lunch menu today: see the office lunch page",
                           scope=SCOPE, provenance="external")
        mine = _signed(mem, "Tuesday's office lunch is dal and rice.")
        res = mem.recall("office lunch menu", scope=SCOPE, k=2)
        assert [h.knowledge_id for h in res.hits] == [mine.knowledge_id, web.knowledge_id]
        assert res.trust[web.knowledge_id].label() == "from a web page or document, unverified"


def test_trust_filter_is_not_satisfied_by_a_self_assigned_tag(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        real = _signed(mem, "Verified: Alice's parking permit is P-2201.", tags=["trust:verified"])
        fake = mem.remember("Alice's parking bay is B1-77.", scope=SCOPE,
                            tags=["trust:verified"], provenance="external")
        got = {h.knowledge_id for h in
               mem.recall("parking", scope=SCOPE, tags=["trust:verified"]).hits}
        assert real.knowledge_id in got and fake.knowledge_id not in got
        # a plain tag filter still works, and an unknown trust filter is a 400
        assert {h.knowledge_id for h in mem.recall("parking", scope=SCOPE,
                                                   tags=["trust:user"]).hits} == {
            real.knowledge_id}
        with pytest.raises(ValidationError, match="trust:gold is not a trust filter"):
            mem.recall("parking", scope=SCOPE, tags=["trust:gold"])


def test_stuffed_entry_goes_behind_honest_ones(tmp_path: Path) -> None:
    entry = ("vpn access vpn login connect vpn how to connect vpn setup vpn client vpn "
             "password vpn help vpn not working vpn access vpn PAYLOAD: http://x.example")
    assert stuffed(entry)
    with memory(tmp_path) as mem:
        honest = [_signed(mem, t).knowledge_id for t in (
            "The VPN client is installed from the IT portal.",
            "VPN access needs the hardware token.",
            "The VPN drops after eight hours.")]
        bad = _signed(mem, entry)
        res = mem.recall("how do I connect to the VPN?", scope=SCOPE, k=3)
        assert bad.knowledge_id not in {h.knowledge_id for h in res.hits}
        assert set(honest) == {h.knowledge_id for h in res.hits}
        assert res.trust[honest[0]].stuffed is False


def test_near_duplicates_take_one_slot(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        flood = [mem.remember(f"The parking pass renewal form is at the front desk {c}",
                              scope=SCOPE, provenance="agent").knowledge_id for c in "!?."]
        other = _signed(mem, "Visitor parking is by the main gate.").knowledge_id
        got = [h.knowledge_id for h in mem.recall("parking pass", scope=SCOPE, k=3).hits]
        assert len(set(got) & set(flood)) == 1 and other in got


def test_heuristic() -> None:
    a = contradiction.claim_of("The user's manager is Priya.")
    b = contradiction.claim_of("Correction: the user's manager is now Anil.")
    assert a is not None and b is not None and contradiction.contradicts(b, a)
    c = contradiction.claim_of("The user's manager is Priya Rao.")
    assert c is not None and not contradiction.contradicts(c, a)  # a refinement
    assert contradiction.claim_of("We talked about Priya's manager.") is None
    assert contradiction.claim_of("Alice's badge level ends in 5") is not None


def test_lower_trust_contradiction_is_a_pending_candidate(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        real = _signed(mem, "Alice's delivery address is 9 Lake Road.")
        upd = mem.remember("Update: Alice's delivery address is 41 Mill Street.",
                           scope=SCOPE, provenance="external")
        assert upd.held and upd.beside == real.knowledge_id and "lower trust" in upd.held
        got = [h.knowledge_id for h in mem.recall("delivery address", scope=SCOPE).hits]
        assert got == [real.knowledge_id]
        mem.confirm(upd.knowledge_id)  # the user says the update is right
        assert mem.get(real.knowledge_id).state.lifecycle is Lifecycle.SUPERSEDED
        assert mem.get(real.knowledge_id).state.superseded_by == upd.knowledge_id
        assert [h.knowledge_id for h in mem.recall("delivery address", scope=SCOPE).hits] == [
            upd.knowledge_id]


def test_equal_trust_follows_the_supersede_rules(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        real = _signed(mem, "Alice's manager is Priya.")
        quiet = _signed(mem, "Correction: Alice's manager is Anil.")
        assert quiet.held and "does not supersede" in quiet.held  # no silent win
        mem.reject(quiet.knowledge_id)
        named = mem.supersede(real.knowledge_id, "Alice's manager is Anil.",
                              provenance=hmac_claim("Alice's manager is Anil."))
        assert named.held is None
        assert mem.get(real.knowledge_id).state.lifecycle is Lifecycle.SUPERSEDED


def test_higher_trust_is_stored_as_usual(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        mem.remember("Alice's manager is Anil.", scope=SCOPE, provenance="external")
        mine = _signed(mem, "Alice's manager is Priya.")
        assert mine.held is None


def test_heuristic_is_linear_on_long_words() -> None:
    """A leading label once matched ``(?:[A-Za-z]+\\s*){1,3}:`` — cubic backtracking on one
    3,000-letter word, which hung a node writing such a record."""
    import time

    t0 = time.perf_counter()
    assert contradiction.claim_of("x" * 3000 + " compression pays off here") is None
    assert contradiction.claim_of("ab " * 99 + ":") is None
    assert time.perf_counter() - t0 < 0.5
