"""The Markdown brain: a readable, reviewable projection of the store (docs/brain.md).

* ``compile`` — ``INDEX.md`` / ``REGION-*.md`` / ``weights.json`` / ``not_indexed.md``,
  deterministic for one store state and one ``--now``;
* ``okf`` — the OKF v0.1 bundle and ``rows.ndjson`` (derived, read-only);
* ``gitbrain`` — one Markdown file per memory in a git repository, synced both ways;
* ``github`` — each memory one GitHub issue in RxAi AMP's title template;
* ``audit`` — the librarian pass: memories recalled but never credited.

Every write into the store goes through ``Memory``'s public API (remember, supersede,
invalidate, outcome); nothing here speaks SQL.
"""
