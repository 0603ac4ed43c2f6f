from __future__ import annotations

import json
from pathlib import Path

from tests.brain.conftest import NOW

from amcp.agent.hooks.ledger import LedgerStore, SessionLedger
from amcp.brain.audit import audit, render
from amcp.memory import Memory


def test_recalled_but_never_credited(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(home / "memory.db", embedder="hashing") as mem:
        used = mem.remember("Run ruff first", scope="project:p").knowledge_id
        credited = mem.remember("Tests need PostgreSQL", scope="project:p").knowledge_id
        by_cli = mem.remember("Deploy on Thursday", scope="project:p").knowledge_id
        never = mem.remember("Never shown anywhere", scope="project:p").knowledge_id
        read = mem.remember("Recalled through search", scope="project:p").knowledge_id
        mem.outcome([by_cli], "success")  # credited outside any session
        mem.read([read])  # counts as an access
        ledgers = LedgerStore(home / "ledger")
        ledgers.save(SessionLedger("s-1", shown=(used, credited, by_cli),
                                   credited=(credited,), stop_outcome="learned"))
        ledgers.save(SessionLedger("s-2", shown=(used,), stop_outcome="declined"))
        ledgers.save(SessionLedger("s-3", shown=(credited,), credited=(credited,),
                                   stop_outcome="declined"))
        (home / "ledger" / "torn.json").write_text("{not json")
        rep = audit(mem, home, days=1)
    ids = [u.knowledge_id for u in rep.uncredited]
    assert ids == [used, read]  # most recalled first; credited ones and `never` absent
    assert never not in ids and credited not in ids and by_cli not in ids
    assert rep.uncredited[0].sessions == 2 and rep.uncredited[1].reads == 1
    assert rep.sessions == 3 and rep.sessions_without_outcomes == ("s-2",)
    text = render(rep)
    assert "Run ruff first" in text and used[:14] in text


def test_window_excludes_old_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(home / "memory.db", embedder="hashing") as mem:
        kid = mem.remember("old news", scope="project:p").knowledge_id
        (home / "ledger").mkdir(parents=True)
        (home / "ledger" / "old.json").write_text(json.dumps(
            {"session_id": "old", "shown": [kid], "updated_at": NOW - 5 * 86400}))
        assert audit(mem, home, days=1, now=NOW).uncredited == ()
        assert len(audit(mem, home, days=7, now=NOW).uncredited) == 1
