"""Redacted views of sensitive records (credentials and the like).

A redacted record is a *view*: its checksum no longer matches, and it says so in
``vendor_extensions["x-redacted"]``. Recall, packs and exports hand out this view unless an
allowed caller asks to reveal the content.
"""

from __future__ import annotations

from dataclasses import replace

from amcp.amf.record import AMFRecord, Annotation

REDACTED = "[redacted]"


def redact(record: AMFRecord) -> AMFRecord:
    hint = record.vendor_extensions.get("x-redacted-display")
    shown = hint if isinstance(hint, str) and hint else REDACTED
    ann = record.annotation or Annotation()
    return replace(
        record,
        core=replace(record.core, object=REDACTED, condition=None),
        annotation=replace(ann, natural_language=f"{record.core.subject}: {shown}"),
    ).with_extensions(**{"x-redacted": True})
