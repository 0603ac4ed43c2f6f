"""R1: every category fires on EN and ZH positives and stays quiet on hard negatives."""

from __future__ import annotations

import pytest

from amcp.agent.capture import CaptureConfig, CaptureEngine, Category, KnowledgeType, Predicate

CFG = CaptureConfig(checkpoint_every=0, snapshots=False)


def cats(content: str, role: str = "user") -> set[Category]:
    return {o.category for o in CaptureEngine(CFG).process({"role": role, "content": content})
            if hasattr(o, "category")}


POSITIVES = [
    (Category.CREDENTIAL, "my database password is Tr0ub4dor&3"),
    (Category.CREDENTIAL, "我的数据库密码是Pg#2024safe"),
    (Category.CONFIG_DECISION, "We'll use PostgreSQL for the main store."),
    (Category.CONFIG_DECISION, "我们决定用Redis做缓存。"),
    (Category.PREFERENCE, "I prefer tabs over spaces."),
    (Category.PREFERENCE, "以后都用中文回复我"),
    (Category.COMMITMENT, "I'll send you the draft by Friday."),
    (Category.COMMITMENT, "提醒我下周一交周报"),
    (Category.IDENTITY, "I'm a data scientist at Acme"),
    (Category.IDENTITY, "我住在杭州"),
    (Category.PROJECT_STATE, "We're blocked on the legal review."),
    (Category.PROJECT_STATE, "数据库迁移已经完成了"),
]
NEGATIVES = [
    (Category.CREDENTIAL, "what's my password?"),
    (Category.CREDENTIAL, "An OpenAI key looks like sk-xxxxxxxxxxxxxxxxxxxx"),
    (Category.CREDENTIAL, "密钥格式类似sk-xxxx这样"),
    (Category.CONFIG_DECISION, "Should we use MongoDB or Postgres?"),
    (Category.CONFIG_DECISION, "他们决定用Go重写"),
    (Category.PREFERENCE, "Do you prefer dark mode?"),
    (Category.PREFERENCE, "Never mind, it works now."),
    (Category.PREFERENCE, "不要紧，慢慢来"),
    (Category.COMMITMENT, "He said he'll fix it by Monday."),
    (Category.COMMITMENT, "我会说三种语言"),
    (Category.IDENTITY, "His name is Carlos and he lives in Madrid."),
    (Category.IDENTITY, "我叫了一辆出租车"),
    (Category.PROJECT_STATE, "If the build is green, we can merge."),
    (Category.PROJECT_STATE, "迁移完成了吗？"),
]


@pytest.mark.parametrize(("category", "text"), POSITIVES)
def test_positive(category: Category, text: str) -> None:
    assert category in cats(text)


@pytest.mark.parametrize(("category", "text"), NEGATIVES)
def test_negative(category: Category, text: str) -> None:
    assert category not in cats(text)


def test_assistant_turns_are_not_captured_by_default() -> None:
    assert cats("Got it, I'll remind you to renew the certificate next week.", "assistant") == set()
    assert cats("Your name is Priya, and you prefer tabs.", "assistant") == set()


def test_assistant_reminder_confirmation_when_enabled() -> None:
    engine = CaptureEngine(CaptureConfig(checkpoint_every=0, snapshots=False,
                                         capture_assistant_reminders=True))
    out = engine.process({"role": "assistant",
                          "content": "Got it, I'll remind you to renew the certificate next week."})
    assert [o.category for o in out if hasattr(o, "category")] == [Category.COMMITMENT]


def test_code_and_quotes_are_not_the_users_words() -> None:
    assert cats('She wrote "I prefer tabs" in the style guide.') == set()
    assert cats("```\n# I prefer tabs\nAlways use tabs\n```") == set()


def test_capture_fields_are_standalone_and_typed() -> None:
    [c] = CaptureEngine(CFG).process({"role": "user", "content": "Never push directly to main."})
    assert c.text == "User rule: never push directly to main"
    assert c.quote == "Never push directly to main."
    assert c.predicate is Predicate.CONFLICTS_WITH
    assert c.amf_type is KnowledgeType.PRINCIPLE
    assert c.importance == 5
    hint = c.record_hint()
    assert hint.subject.startswith("User.Rule.") and hint.x_kind == "preference"


def test_polite_request_is_an_instruction() -> None:
    assert Category.COMMITMENT in cats("Can you remind me to call the bank at 3pm?")
    assert Category.PREFERENCE in cats("Could you always reply in English?")
