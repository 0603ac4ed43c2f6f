"""AMQL on the wire: which statement each message accepts, and REMEMBER composed by the node.

REMEMBER is composed here rather than by the planner because the node must add the work
session to ``core.evidence`` (``session:S-…``), and it may only do so for records it
composes itself: ``core`` is covered by the knowledge_id and the checksum, so a client's
signed AMF is never altered. A REMEMBER carrying a complete record (with ``knowledge_id``)
is stored exactly as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amql import Forget, Remember, parse
from amcp.amql.writes import compose_partial
from amcp.errors import AmcpError, ValidationError
from amcp.memory import Memory


def expect(text: Any, keyword: str, where: str) -> None:
    """A cheap check of the statement kind before any parsing or planning."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(where, f"must be an AMQL {keyword} statement")
    first = text.lstrip().split(None, 1)[0].upper()
    if first != keyword:
        raise ValidationError(where, f"must be an AMQL {keyword} statement, not {first}")


def run_query(memory: Memory, text: str, scopes: Sequence[str] | None) -> dict[str, Any]:
    """``Memory.query`` → the upstream query_response_format dict."""
    result = memory.query(text, scopes=scopes)
    response = result.to_response()
    if not isinstance(response, dict):  # pragma: no cover - the planner's contract
        raise AmcpError("the AMQL planner returned no response map")
    return response


def parse_forget(text: Any) -> Forget:
    expect(text, "FORGET", "amql")
    statement = parse(text)
    assert isinstance(statement, Forget)
    return statement


def compose_remember(
    memory: Memory, text: Any, *, created_by: str, work_session: str | None
) -> AMFRecord | dict[str, Any]:
    """The record a ``REMEMBER {…}`` asks for: composed and signed by this node, or, when
    the object is already a complete AMF record, that record unchanged (as a dict)."""
    expect(text, "REMEMBER", "amql")
    statement = parse(text)
    assert isinstance(statement, Remember)
    obj = statement.to_dict()
    if "knowledge_id" in obj:
        return obj
    # The same partial-record rules as the planner's REMEMBER (amcp.amql.writes), with the
    # node as author and the work session as evidence.
    return compose_partial(memory, obj, created_by=created_by, session=work_session)
