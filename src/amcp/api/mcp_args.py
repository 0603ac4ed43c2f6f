"""The MCP tools' argument types, shared by ``mcp_server`` (the memory tools) and
``mcp_records`` (the record tools), which it registers: a leaf, so neither imports the
other's module for them."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, Strict

from amcp.amf.types import KnowledgeType
from amcp.api.schemas import MAX_ITEMS, MAX_NAME, MAX_TEXT, utf8_text

# Strict scalars: JSON Schema types exactly, no lax coercion of strings into numbers/bools.
Text = Annotated[str, Strict(), AfterValidator(utf8_text), Field(min_length=1, max_length=MAX_TEXT)]
Name = Annotated[str, Strict(), AfterValidator(utf8_text), Field(min_length=1, max_length=MAX_NAME)]
Names = Annotated[list[Name], Field(max_length=MAX_ITEMS)]
# A scope argument takes one scope as a string or several as a list: agents send both.
ScopeArg = Annotated[
    Name | Annotated[list[Name], Field(min_length=1, max_length=MAX_ITEMS)],
    Field(description="A project scope or a list of them; '*' = global"),
]
Kt = Annotated[KnowledgeType, Field(description="Knowledge type")]


def scopes_of(value: str | list[str] | None) -> list[str] | None:
    """A ScopeArg as the list Memory takes (None: not given)."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


__all__ = ["Kt", "Name", "Names", "ScopeArg", "Text", "scopes_of"]
