"""Issue 14: an attacker who can edit the store's files (not its keys) gets nothing served.

Each case is one attack from ``tamper_kit`` on a freshly seeded store and one read path,
opened afresh after the edit. What must hold (``tamper_kit.verdict``): the attacker's
edit is in no answer; the untouched records are still served; the bad record is counted
in a warning/quarantine figure the path exposes; refusing the whole open is right only
for damage to the change log itself. ``bench/tamper_at_rest.py`` runs the same attacks
through every path (CLI and node included) and prints the table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.store import tamper_kit as kit
from tests.store.tamper_kit import Expect, Observation, Seeded

PATHS: dict[str, Callable[[Seeded, Expect], Observation]] = {
    "recall": kit.memory_path("recall"),
    "get/read": kit.memory_path("get/read"),
    "list": kit.memory_path("list"),
    "context": kit.memory_path("context"),
    "export": kit.memory_path("export"),
    "hooks": kit.hooks_path,
}

# The read paths through which the store handles each attack today. Paths are added here
# as the store learns to handle them (issue 14); the bench's table shows the rest.
MEMORY = ("recall", "get/read", "list", "context", "export")  # each through its own Memory
ALL = (*MEMORY, "hooks")
HANDLED: dict[str, tuple[str, ...]] = {
    "T1 content tamper": ALL,
    "T2 tail truncation": ALL,
    "T3 middle deletion": ALL,
    "T5 forged insert": ALL,
    "T6 cross-context replay": ALL,
    "T7 rollback replay": ALL,
    "T8 metadata tamper": ("recall", "get/read", "list", "export", "hooks"),
    "T9 directory rollback": ALL,
    "annotation text only": ALL,
    "re-sealed annotation": ALL,
    "re-sealed content": ALL,
    "re-chained log": ALL,
    "weight": ALL,
    "record_scopes row": ("recall", "list", "hooks"),
    "record_tags row": ("recall", "list"),
    "created_at": ("recall", "list"),
    "resurrect invalidated": ALL,
    "resurrect superseded": ALL,
    "resurrect (old row copy)": ALL,
    "rollback + witness deleted": ALL,
    "expires_at (hide)": ("recall", "get/read", "context", "export", "hooks"),
    "lifecycle (hide)": ("get/read", "export", "hooks"),
    "index rows deleted (hide)": ("get/read", "export", "hooks"),
}
COVERED = [(attack, path) for attack, paths in HANDLED.items() for path in paths]


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    # The per-user state directory (the default witness home) of this test only, found the
    # default way ($XDG_STATE_HOME): an explicit AMCP_STATE_DIR is not the default.
    monkeypatch.delenv("AMCP_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    return kit.seed(tmp_path)


def assert_not_served(obs: Observation, exp: Expect, s: Seeded) -> None:
    """The attacker's edit is in no answer, good records are, the bad one is counted."""
    assert obs.applicable, f"{obs.path} cannot show this attack: not a test case"
    if obs.refused is not None:
        assert exp.refuse_ok, f"the whole store was refused for a bad record: {obs.refused}"
        said = obs.refused.lower()  # names the damage, so an operator knows what happened
        assert any(w in said for w in ("integrity", "rolled back", "witness", "change log")), said
        return
    assert obs.error is None, f"the read failed instead of leaving one record out: {obs.error}"
    bad = kit.bad_items(obs, exp, s)
    assert not bad, f"{obs.path} served the attack: {bad}"
    served = {seen.knowledge_id for seen in obs.seen}
    missing = [kid for kid in exp.good if kid not in served]
    assert not missing, f"{obs.path} lost untouched records {missing}"
    # And the bad record is counted where the caller can see it (an edit that admitted or
    # hid nothing needs no warning): QUARANTINED or BLOCKED, never HIDDEN or SERVED.
    cell, why = kit.verdict(obs, exp, s)
    assert kit.acceptable(cell, exp), f"{obs.path}: {cell}: {why}"


@pytest.mark.parametrize(("attack", "path"), COVERED)
def test_attack_is_not_served(seeded: Seeded, attack: str, path: str) -> None:
    exp = kit.ATTACKS[attack](seeded)
    assert_not_served(PATHS[path](seeded, exp), exp, seeded)


def test_the_clean_store_serves_everything_without_warnings(seeded: Seeded) -> None:
    """The control: with no edit, every path answers in full and warns of nothing (else
    every case above could pass by refusing or warning about anything)."""
    exp = Expect((), kit._good(seeded), unnoticed_is_served=True)
    for name, read in PATHS.items():
        obs = read(seeded, exp)
        assert obs.refused is None and obs.error is None, (name, obs.refused, obs.error)
        assert obs.warnings == 0, name
        assert not kit.bad_items(obs, exp, seeded), name
        assert set(exp.good) <= {x.knowledge_id for x in obs.seen}, name
