"""The ZH phrase search starts near its first kind word (credentials._phrase_starts): the
same matches as searching the whole text, for any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amcp.agent.capture import credentials as c

_PARTS = st.sampled_from(["我的", "我们的", "邮箱", "密码", "口令", "令牌", "Token", "API Key",
                          "是", "为", "：", ":", "=", " ", "abc123!", "hunter2x", "x" * 20,
                          "服务器", "github", "。", "\n"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PARTS, max_size=14).map("".join))
def test_zh_phrases_found_from_the_hint_equal_a_whole_search(text: str) -> None:
    whole = [(m.span(), m.groupdict()) for m in c._PHRASE_ZH.finditer(text)]
    starts = {rule: start for _p, rule, start in c._phrase_starts(text)}
    if "phrase.zh" not in starts:
        assert whole == []
        return
    found = [(m.span(), m.groupdict()) for m in c._PHRASE_ZH.finditer(text, starts["phrase.zh"])]
    assert found == whole


def test_secrets_still_found() -> None:
    assert [h.value for h in c.find_credentials("我的GitHub密码是Hx7!kq92z")] == ["Hx7!kq92z"]
    assert [h.value for h in c.find_credentials("my wifi password is Tr0ub4dor&3x")] == [
        "Tr0ub4dor&3x"]
