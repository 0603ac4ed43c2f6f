"""Contradicting updates beyond one English sentence: the AMF triple, Chinese attribute
statements, and two records of one batch (issue 18, item 4)."""

from __future__ import annotations

from pathlib import Path

from tests.firewall.kit import SCOPE, hmac_claim, memory

from amcp.amf.compose import compose_record
from amcp.amf.types import Lifecycle
from amcp.firewall import contradiction


def test_chinese_attribute_statements() -> None:
    a = contradiction.claim_of("用户的经理是张伟。")
    b = contradiction.claim_of("更正：用户的经理现在是李娜。")
    assert a is not None and b is not None and a.key == "用户的经理"
    assert contradiction.contradicts(b, a)
    refined = contradiction.claim_of("用户的经理是张伟先生")
    assert refined is not None and not contradiction.contradicts(refined, a)
    assert contradiction.claim_of("我们聊过经理的事。") is None  # about, not a value
    mine = contradiction.claim_of("我的邮箱已经改为 a@example.com")
    assert mine is not None and mine.key == "我的邮箱" and mine.value == "a example com"


def test_chinese_update_from_lower_trust_is_held_beside(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        text = "我的收货地址是北京市朝阳区建国路1号"
        real = mem.remember(text, scope=SCOPE, provenance=hmac_claim(text))
        upd = mem.remember("更新：我的收货地址是上海市徐汇区2号", scope=SCOPE,
                           provenance="external")
        assert upd.held and upd.beside == real.knowledge_id
        assert mem.get(upd.knowledge_id).state.lifecycle is Lifecycle.DRAFT


def _triple(mem, obj: str, *, predicate: str = "EQUALS", signed: bool):  # type: ignore[no-untyped-def]
    text = f"Alice's bank account number: {obj}"
    claim = hmac_claim(text) if signed else "external"
    return mem.remember(text, scope=SCOPE, subject="alice.bank_account", predicate=predicate,
                        object=obj, provenance=claim)


def test_a_real_triple_is_compared_by_subject(tmp_path: Path) -> None:
    # The text is no attribute statement the heuristic knows ("number:" with a colon), so
    # only the triple can tell that these two disagree.
    with memory(tmp_path) as mem:
        real = _triple(mem, "DE44 5001 0517 5407 3249 31", signed=True)
        assert contradiction.claim_of("Alice's bank account number: X") is None
        forged = _triple(mem, "GB29 NWBK 6016 1331 9268 19", signed=False)
        assert forged.held and forged.beside == real.knowledge_id
        assert "alice.bank_account EQUALS" in forged.held
        assert "GB29" not in forged.held and "gb29" not in forged.held  # no value in the log
        same = _triple(mem, "DE44 5001 0517 5407 3249 31 (main)", signed=False)
        assert same.held is None  # a refinement of the value, not another value


def test_an_equal_trust_triple_stands_beside(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        first = _triple(mem, "DE44 5001 0517 5407 3249 31", signed=True)
        second = _triple(mem, "FR14 2004 1010 0505 0001 3M02 606", signed=True)
        assert second.held is None  # replacing one names it (causal.supersedes)
        assert mem.get(first.knowledge_id).state.lifecycle is Lifecycle.ACTIVE


def test_only_equals_states_a_value(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        _triple(mem, "a passport", predicate="REQUIRES", signed=True)
        other = _triple(mem, "a utility bill", predicate="REQUIRES", signed=False)
        assert other.held is None  # one subject may require many things


def test_derived_subjects_say_nothing() -> None:
    # An object of its own, so only the derived subject (user.alice.fact) can say no.
    rec = compose_record("notes on the rollout", scope="user:alice", kind="fact",
                         object="rollout v2")
    assert contradiction.triple_claim(rec) is None
    named = compose_record("notes on the rollout", scope="user:alice", kind="fact",
                           subject="alice.rollout", object="rollout v2")
    assert contradiction.triple_claim(named) is not None


def test_two_records_of_one_batch_are_compared(tmp_path: Path) -> None:
    true_text = "Alice's delivery address is 9 Lake Road."
    with memory(tmp_path) as mem:
        outcomes = mem.put_many([
            (mem.compose(true_text, scope=SCOPE, provenance=hmac_claim(true_text)), False),
            (mem.compose("Update: Alice's delivery address is 41 Mill Street.", scope=SCOPE,
                         provenance="external"), False),
            (mem.compose("Alice's manager is Priya.", scope=SCOPE, provenance="external"),
             False),
        ])
        first, update, unrelated = outcomes
        assert first.held is None and unrelated.held is None
        assert update.held and first.knowledge_id in update.held
        assert mem.get(update.knowledge_id).state.lifecycle is Lifecycle.DRAFT
        served = [h.knowledge_id for h in mem.recall("delivery address", scope=SCOPE).hits]
        assert served[0] == first.knowledge_id and update.knowledge_id not in served


def test_batch_records_of_other_scopes_do_not_contradict(tmp_path: Path) -> None:
    with memory(tmp_path) as mem:
        a, b = mem.put_many([
            (mem.compose("Bob's desk is 4.12.", scope="user:bob", provenance="external"), False),
            (mem.compose("Bob's desk is 7.01.", scope="user:carol", provenance="external"), False),
        ])
        assert a.held is None and b.held is None
