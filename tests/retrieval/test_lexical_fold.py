"""Folding before tokenising: the ASCII shortcut gives exactly what the full pass gives."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from amcp.retrieval import lexical


def full_fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_folds_as_the_full_pass_does(text: str) -> None:
    assert lexical._fold(text) == full_fold(text)


@given(st.text())
def test_any_text_folds_as_the_full_pass_does(text: str) -> None:
    assert lexical._fold(text) == full_fold(text)


def test_accents_and_cjk_still_fold_and_split() -> None:
    assert lexical.tokens("Café DÉJÀ vu") == ["cafe", "deja", "vu"]
    assert lexical.tokens("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
