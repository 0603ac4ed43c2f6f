"""A generated "three months of messy data" corpus with labels (issue 19).

Three tools' exports of one team's memory, 2024-03-01 … 2024-05-31:

* ``mem0.json`` — mem0 ``get_all`` JSON: ISO times with zones (``+00:00``, ``+02:00``),
  a ``metadata.category`` on some items;
* ``tool_b.sqlite`` — a SQLite table ``memories(id, user_id, content, kind, created,
  embedding, embedding_model)``: epoch seconds / milliseconds / microseconds, a ``kind``
  column that is often empty and sometimes wrong (logs filed as preferences), vectors from
  ``text-embedding-3-small``;
* ``tool_c.csv`` — a CSV export with naive locale times (``05.03.2024 14:05``,
  ``03/05/2024 2:05 PM``, ``Mar 5, 2024 2:05 PM``; import with ``--assume-tz UTC``) and
  vectors from ``all-MiniLM-L6-v2`` as a JSON column.

Preferences, facts, tasks, events and system logs are mixed in every file; 15 % of the
items are duplicates of another item (in another file or the same one, with case,
punctuation and spacing changed). ``labels.json`` maps each item's source key to its true
kind, its user and text and, for a duplicate, to the key of its original. Texts come from
template families with a shared vocabulary; the same seed gives the same corpus.
"""

from __future__ import annotations

import csv
import json
import random
import sqlite3
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "hiro", "ines", "jamal",
         "kofi", "lena", "mateo", "nadia", "omar", "priya"]
CITIES = ["Lisbon", "Berlin", "Osaka", "Nairobi", "Austin", "Lyon", "Porto", "Seoul", "Quito"]
SERVICES = ["billing", "search", "auth", "payments", "ingest", "reports", "notifier", "gateway"]
THINGS = ["tabs", "spaces", "dark mode", "light themes", "short answers", "bullet points",
          "Python", "Go", "vim", "emacs", "green tea", "espresso", "window seats", "email",
          "phone calls", "metric units", "late meetings", "early standups", "YAML", "TOML"]
ACTS = ["renew the TLS certificate", "book the hotel", "rotate the staging keys",
        "send the invoice", "review the migration plan", "call the bank", "update the runbook",
        "order new laptops", "file the expense report", "archive the old logs bucket"]
DAYS = ["Monday", "Tuesday", "Friday", "the weekend", "March 3", "April 12", "end of May"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"]
LANGS = ["Rust", "Python", "Kotlin", "Elixir", "TypeScript"]
TEMPLATES: dict[str, list[str]] = {
    "preference": [
        "{Name} prefers {thing} over {thing2}", "{Name} likes {thing}",
        "{Name} hates {thing}", "{Name}'s favourite editor setting is {thing}",
        "{Name} would rather use {thing} than {thing2}",
        "Always use {thing} when writing for {name}",
        "{Name} never wants {thing} in reports", "{Name} enjoys {thing} on weekends",
        "{Name} dislikes {thing}", "{Name} loves {thing}",
    ],
    "fact": [
        "{Name} works at {company}", "{Name} lives in {city}",
        "The {svc} service is written in {lang}", "{Name}'s manager is {Name2}",
        "{company}'s API allows {n} requests per minute", "{Name} speaks {lang2}",
        "The {svc} database has {n} shards", "{Name} is on the {svc} team",
        "{svc} runs in the {city} region", "{Name}'s employee number is E{n}",
    ],
    "task": [
        "Remind {name} to {act} on {day}", "TODO: {act}", "{Name} needs to {act} before {day}",
        "Don't forget to {act}", "Follow up with {Name2} about the {svc} rollout",
        "- [ ] {act}", "Deadline for the {svc} audit: {day}", "{Name} has to {act} by {day}",
    ],
    "event": [
        "{Name} met {Name2} in {city} last week", "We deployed {svc} v{n} yesterday",
        "{Name} attended the {company} summit", "{svc} had an outage on {weekday}",
        "{Name} moved to {city} in {year}", "{Name} visited the {city} office this morning",
        "The team shipped the {svc} dashboard on {weekday}", "{Name} joined {company} in {year}",
    ],
    "log": [
        "{iso} INFO {svc} request completed in {n}ms", "[ERROR] {svc}: connection refused",
        '{{"level": "warn", "msg": "retrying {svc}", "attempt": {small}}}',
        'level=info msg="cache hit" svc={svc}',
        "Mar  5 14:05:0{small} host-{small} {svc}[{n}]: started",
        "DEBUG {svc} payload size {n}", "WARN {svc} disk usage at 9{small}%",
        '10.0.{small}.1 - - [05/Mar/2024:14:05:00 +0000] "GET /api/{svc} HTTP/1.1" 200 {n}',
        "INFO user.prefers updated for {name}: dark_mode=true",
        "{iso} ERROR {svc} worker crashed, restarting",
    ],
}
MIX = {"preference": 0.22, "fact": 0.24, "task": 0.14, "event": 0.14, "log": 0.26}
START = datetime(2024, 3, 1, tzinfo=UTC)
SPAN_S = 92 * 86400


@dataclass
class Item:
    tool: str
    id: str
    user: str
    text: str
    label: str
    when: datetime
    hint: str | None = None
    duplicate_of: str | None = None


def _text(rng: random.Random, label: str, user: str) -> str:
    t1, t2 = rng.sample(THINGS, 2)
    other = rng.choice([n for n in NAMES if n != user])
    fields = {
        "Name": user.capitalize(), "name": user, "Name2": other.capitalize(), "thing": t1,
        "thing2": t2, "city": rng.choice(CITIES), "svc": rng.choice(SERVICES),
        "act": rng.choice(ACTS), "day": rng.choice(DAYS), "company": rng.choice(COMPANIES),
        "lang": rng.choice(LANGS), "lang2": rng.choice(["Portuguese", "German", "Japanese"]),
        "n": rng.randint(10, 9999), "small": rng.randint(1, 8), "year": rng.randint(2015, 2023),
        "weekday": rng.choice(["Monday", "Wednesday", "Friday"]),
        "iso": f"2024-0{rng.randint(3, 5)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:00:00Z",
    }
    return rng.choice(TEMPLATES[label]).format(**fields)


def _variant(rng: random.Random, text: str) -> str:
    """How the same memory reads in another tool: case, spacing, a final period."""
    choice = rng.randrange(4)
    if choice == 0:
        return text.lower()
    if choice == 1:
        return text + "."
    if choice == 2:
        return text.replace(" ", "  ", 1)
    return text.upper() if len(text) < 40 else text + " "


def generate(out: Path, n: int = 10_000, seed: int = 19) -> dict[str, object]:
    rng = random.Random(seed)
    labels = list(MIX)
    weights = [MIX[k] for k in labels]
    tools = ["mem0", "b", "c"]
    uniques = round(n * 0.85)
    items: list[Item] = []
    for i in range(uniques):
        label = rng.choices(labels, weights)[0]
        user = rng.choice(NAMES)
        items.append(Item(rng.choice(tools), f"u{i}", user, _text(rng, label, user), label,
                          START + timedelta(seconds=rng.randrange(SPAN_S))))
    for j in range(n - uniques):
        orig = items[rng.randrange(uniques)]
        items.append(Item(rng.choice(tools), f"d{j}", orig.user, _variant(rng, orig.text),
                          orig.label, orig.when + timedelta(seconds=rng.randrange(1, 86400)),
                          duplicate_of=orig.id))
    rng.shuffle(items)
    for it in items:  # hints: sometimes right, and 5 % of logs filed as preferences
        r = rng.random()
        if it.label == "log" and r < 0.05:
            it.hint = "preference"
        elif r < 0.3:
            it.hint = it.label
    out.mkdir(parents=True, exist_ok=True)
    keys = {"mem0": "mem0", "b": "generic", "c": "generic"}
    _mem0(out / "mem0.json", [i for i in items if i.tool == "mem0"], rng)
    _sqlite(out / "tool_b.sqlite", [i for i in items if i.tool == "b"], rng)
    _csv(out / "tool_c.csv", [i for i in items if i.tool == "c"], rng)
    by_id = {i.id: i for i in items}
    labels_out = {f"{keys[i.tool]}:{i.id}": {
        "label": i.label, "user": i.user, "text": i.text,
        "duplicate_of": (f"{keys[by_id[i.duplicate_of].tool]}:{i.duplicate_of}"
                         if i.duplicate_of else None)} for i in items}
    (out / "labels.json").write_text(json.dumps(labels_out))
    return {"items": n, "unique": uniques, "duplicates": n - uniques,
            "per_tool": {t: sum(1 for i in items if i.tool == t) for t in tools}}


def _mem0(path: Path, items: list[Item], rng: random.Random) -> None:
    results = []
    for it in items:
        tz = timedelta(hours=rng.choice([0, 2]))
        stamp = it.when.astimezone(__import__("datetime").timezone(tz)).isoformat()
        obj: dict[str, object] = {"id": it.id, "memory": it.text, "hash": f"h{it.id}",
                                  "created_at": stamp, "updated_at": stamp, "user_id": it.user}
        if it.hint:
            obj["metadata"] = {"category": it.hint}
        results.append(obj)
    path.write_text(json.dumps({"results": results}))


def _sqlite(path: Path, items: list[Item], rng: random.Random) -> None:
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE memories (id TEXT, user_id TEXT, content TEXT, kind TEXT, "
                "created NUMERIC, embedding BLOB, embedding_model TEXT)")
    rows = []
    for it in items:
        t = it.when.timestamp()
        created = rng.choice([int(t), int(t * 1000), int(t * 1_000_000)])
        vec = struct.pack("8f", *(rng.random() for _ in range(8)))
        rows.append((it.id, it.user, it.text, it.hint, created, vec, "text-embedding-3-small"))
    db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def _csv(path: Path, items: list[Item], rng: random.Random) -> None:
    forms = ["%d.%m.%Y %H:%M", "%m/%d/%Y %I:%M %p", "%b %d, %Y %I:%M %p"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["uuid", "owner", "note", "category", "timestamp", "embedding", "model"])
        for it in items:
            w.writerow([it.id, it.user, it.text, it.hint or "",
                        it.when.replace(second=0).strftime(rng.choice(forms)),
                        json.dumps([round(rng.random(), 3) for _ in range(4)]),
                        "all-MiniLM-L6-v2"])
