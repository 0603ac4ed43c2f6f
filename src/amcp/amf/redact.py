"""Redacted views of sensitive records (credentials and the like).

A redacted record is a *view*: its checksum no longer matches, and it says so in
``vendor_extensions["x-redacted"]``. Recall, packs and exports hand out this view unless an
allowed caller asks to reveal the content.
"""

from __future__ import annotations

from dataclasses import replace

from amcp.amf.mapping import REDACTED, redacted_statement
from amcp.amf.record import AMFRecord, Annotation

__all__ = ["REDACTED", "redact"]


def redact(record: AMFRecord) -> AMFRecord:
    ann = record.annotation or Annotation()
    shown = redacted_statement(record.core.subject, record.vendor_extensions)
    return replace(
        record,
        core=replace(record.core, object=REDACTED, condition=None),
        annotation=replace(ann, natural_language=shown),
    ).with_extensions(**{"x-redacted": True})
