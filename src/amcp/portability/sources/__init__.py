"""One module per other tool. Each exposes a ``SOURCE``: a name, a sniff and a reader.

A reader yields ``SourceItem``s in the source's own order and raises ``ValidationError``
naming the file and line or item for anything it cannot read; it never touches the store.
"""

from __future__ import annotations

from amcp.portability.sources.base import ReadContext, Source


def registry() -> dict[str, Source]:
    # Imported here so each source module stays independent of the others.
    from amcp.portability.sources import (
        agents_sdk,
        basic_memory,
        chatgpt,
        claude,
        generic,
        langgraph,
        letta,
        mcp_memory,
        mem0,
        portable,
    )

    # Order matters for auto-detection: specific shapes before the generic table reader.
    found = (
        mem0.SOURCE, mem0.LOCAL, mcp_memory.SOURCE, letta.SOURCE, chatgpt.SOURCE,
        claude.SOURCE, basic_memory.SOURCE, agents_sdk.SOURCE, langgraph.SOURCE,
        portable.SOURCE, generic.SOURCE,
    )
    return {s.name: s for s in found}


__all__ = ["ReadContext", "Source", "registry"]
