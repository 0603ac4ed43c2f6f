"""The record page says where a record came from as the firewall verified it, not as the
writer labelled it (issue 18 × 21)."""

from __future__ import annotations

from pathlib import Path

from tests.ui.kit import make_memory, ui_client


def test_record_page_shows_verified_origin_and_trusted_confidence(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    fake = mem.remember("Alice's parking bay is B1-77.", scope="team:a", provenance="external",
                        tags=["trust:verified"], confidence=1.0).knowledge_id
    mine = mem.remember("Alice's desk is 4B.", scope="team:a").knowledge_id
    with ui_client(mem) as c:
        page = c.get(f"/ui/r/{fake}").text
        assert "from a web page or document, unverified" in page
        assert "trust filters ignore it" in page
        assert "1.0 stated; read as 0.5 (capped by its provenance)" in page
        own = c.get(f"/ui/r/{mine}").text
        assert "written on this node, local" in own and "capped" not in own
    mem.close()
