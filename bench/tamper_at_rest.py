"""Tamper at rest (issue 14): an attacker with the store's files, every read path.

Two parts:

1. **agmi 0.6.3** (agent-memory-integrity, MIT): its at-rest family T1–T9 run through its
   own harness (controls, landed-edit guards) against ``AmcpAdapter`` below, which maps
   its operations onto an amcp store on disk: records are rows of ``records`` in alice's
   scope, edited with plain ``sqlite3``; a snapshot is the whole store directory
   (``keys/`` included; the per-user state directory is not the store's, so it is not
   copied). ``verify()`` reopens the store and asks every in-process read path.
2. **Every attack × every read path**: the attacks in ``tests/store/tamper_kit.py`` (agmi's
   nine as amcp edits, and the stronger ones of issue 14: annotation-only edits, re-sealed
   records, a re-chained log, weight/scope/tag/created_at/lifecycle edits, rollback with
   the witness deleted), each on a fresh store, read back through ``Memory.recall``,
   ``read``, ``list_records``, ``context``, ``export``, ``amcp recall`` (a subprocess),
   ``POST /v1/recall`` (HTTP API, TestClient), ``memory_recall`` (MCP, the SDK's client),
   the node (``SyncClient`` over loopback) and the hooks' file backend (``FastReader``, or
   ``Memory`` when the rows do not add up to the signed head).

Cell verdicts: REFUSED (the open failed with an integrity message: right only for damage
to the log itself), QUARANTINED (the bad record left out, a warning surfaced), BLOCKED
(a forged index row admitted nothing), SERVED (the attacker's edit reached the answer, or
a deletion/rollback went unnoticed), ERROR (a read failed outright: the good records were
lost with the bad one), HIDDEN (left out, no warning), n/a.

    .venv/bin/python bench/tamper_at_rest.py [--quick] [--no-cli] [--no-node] [--name NAME]

Writes ``bench/results/<name>.json`` (default ``tamper_at_rest``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from agmi.adapters.base import MemoryAdapter, Record  # noqa: E402
from agmi.attacks.at_rest import AT_REST_ATTACKS_WITH_SNAPSHOT  # noqa: E402
from bench.common import save  # noqa: E402
from tests.store import tamper_kit as kit  # noqa: E402
from tests.store.tamper_kit import Expect, Observation, Seeded, Seen  # noqa: E402

PATHS = ("recall", "get/read", "list", "context", "export", "cli", "http", "mcp", "node",
         "hooks")
# The CLI of this tree (not whatever ``amcp`` the venv installed): ``python -m`` with src/
# first on the path, in the child's environment.
AMCP = (sys.executable, "-m", "amcp.cli.entry")
# Worst first: the verdict of an attack is its worst cell.
SEVERITY = ("SERVED", "ERROR", "HIDDEN", "REFUSED", "QUARANTINED", "BLOCKED", "n/a")
# Said by an open that refuses a store (SQLiteStore/verify); any other failure is a read's.
OPEN_PHRASES = ("failed its integrity check", "rolled back", "witness", "signed head",
                "not a readable amcp store", "refus")


def fresh_root(tag: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"amcp-tamper-{tag[:12].replace(' ', '_')}-"))
    # The per-user state directory of this run: where amcp keeps witnesses by default
    # ($XDG_STATE_HOME/amcp/witness). An explicit AMCP_STATE_DIR would override the default,
    # and the default location is what T9 is about.
    os.environ.pop("AMCP_STATE_DIR", None)
    os.environ["XDG_STATE_HOME"] = str(root / "xdg-state")
    return root


# ---------------------------------------------------------------------- read paths out of process


def _refusal_or_error(path: str, message: str) -> Observation:
    if any(p in message for p in OPEN_PHRASES):
        return Observation(path, refused=message)
    return Observation(path, error=message)


def cli_path(s: Seeded, exp: Expect) -> Observation:
    """``amcp recall … --json`` in its own process, as a user would run it."""
    if exp.created_after or exp.kinds:
        return Observation("cli", applicable=False)  # the CLI's recall has no such option
    cmd = [*AMCP, "recall", exp.query(s) or "ledger", "--store", str(s.db),
           "--embedder", "hashing", "--json", "-k", "20"]
    if exp.scope:
        cmd += ["--scope", exp.scope]
    for tag in exp.tags or ():
        cmd += ["--tag", tag]
    env = {**s.env(), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    if done.returncode != 0:
        return _refusal_or_error("cli", (done.stderr or done.stdout).strip()[-300:])
    data = json.loads(done.stdout)
    lowered = done.stderr.lower()
    warned = kit.warning_count(data) + int("quarantin" in lowered or "warning" in lowered)
    return Observation("cli", _hits_seen(data), warnings=warned)


def _hits_seen(data: dict[str, Any]) -> list[Seen]:
    """Recall results as the CLI's --json and the HTTP API give them."""
    seen = []
    for hit in data.get("results", []):
        amf, state = hit.get("amf") or {}, hit.get("state") or {}
        text = (amf.get("annotation") or {}).get("natural_language") or (
            amf.get("core") or {}).get("object", "")
        seen.append(Seen(hit["knowledge_id"], text, state.get("lifecycle"), state.get("weight")))
    return seen


def http_path(s: Seeded, exp: Expect) -> Observation:
    """``POST /v1/recall`` on the HTTP API (FastAPI's TestClient over the same Memory)."""
    from fastapi.testclient import TestClient

    from amcp.api.http import create_app

    try:
        mem = s.memory()
    except Exception as exc:
        return Observation("http", refused=f"{type(exc).__name__}: {exc}")
    body: dict[str, Any] = {"query": exp.query(s) or "ledger", "k": 20}
    if exp.scope:
        body["scope"] = [exp.scope]
    for key, value in (("tags", exp.tags), ("kinds", exp.kinds)):
        if value:
            body[key] = list(value)
    if exp.created_after:
        body["created_after"] = exp.created_after
    try:
        try:
            app = create_app(mem)
        except ImportError as exc:  # a module of the app missing (work in progress)
            print(f"  http: the app does not build here ({exc}); column left n/a")
            return Observation("http", applicable=False)
        # A loopback Host: the API answers only the host names it serves.
        with TestClient(app, base_url="http://127.0.0.1") as client:
            res = client.post("/v1/recall", json=body)
    finally:
        mem.close()
    if res.status_code != 200:
        return Observation("http", error=f"HTTP {res.status_code}: {res.text[:200]}")
    data = res.json()
    headers = {k.lower(): v for k, v in res.headers.items()}
    warned = kit.warning_count(data) + sum(
        int(v) if v.isdigit() else 1 for k, v in headers.items()
        if "warning" in k or "quarantin" in k)
    return Observation("http", _hits_seen(data), warnings=warned)


def mcp_path(s: Seeded, exp: Expect) -> Observation:
    """``memory_recall`` through the MCP server, with the official SDK's in-process client."""
    import asyncio

    from mcp import Client

    from amcp.api.mcp_server import build_mcp

    if exp.created_after or exp.kinds:
        return Observation("mcp", applicable=False)  # the tool takes no such filter
    try:
        mem = s.memory()
    except Exception as exc:
        return Observation("mcp", refused=f"{type(exc).__name__}: {exc}")
    args: dict[str, Any] = {"query": exp.query(s) or "ledger", "k": 20}
    if exp.scope:
        args["scope"] = [exp.scope]
    if exp.tags:
        args["tags"] = list(exp.tags)

    async def call() -> Any:
        async with Client(build_mcp(mem), read_timeout_seconds=60) as client:
            return await client.call_tool("memory_recall", args)

    try:
        res = asyncio.run(call())
    finally:
        mem.close()
    data = res.structured_content or {}
    if res.is_error:
        return Observation("mcp", error=str(res.content)[:240])
    seen = [Seen(r["knowledge_id"], r.get("text", ""), None, r.get("weight"))
            for r in data.get("results", [])]
    return Observation("mcp", seen, warnings=kit.warning_count(data))


def node_path(s: Seeded, exp: Expect) -> Observation:
    """A node serving the store; a client recalls (and reads by id) over loopback."""
    import asyncio
    import threading

    from tests.node.kit import FAST

    from amcp.node import NodeServer, SyncClient

    try:
        mem = s.memory()
    except Exception as exc:
        return Observation("node", refused=f"{type(exc).__name__}: {exc}")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = NodeServer(mem)
    try:
        asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(30)
        return _node_reads(SyncClient, server.port, FAST, s, exp)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        mem.close()


def _node_reads(client_cls: Any, port: int, retry: Any, s: Seeded, exp: Expect) -> Observation:
    filters: dict[str, Any] = {}
    if exp.scope:
        filters["scope"] = exp.scope
    if exp.tags:
        filters["tags"] = list(exp.tags)
    if exp.kinds:
        filters["kinds"] = list(exp.kinds)
    if exp.created_after:
        filters["created_after"] = exp.created_after
    seen: list[Seen] = []
    warned = 0
    try:
        with client_cls.connect("127.0.0.1", port, retry=retry) as node:
            results = [node.recall(exp.query(s) or "ledger", k=20, filters=filters or None)]
            if not exp.intruders:  # a read by id applies no filter: intruders are n/a there
                ids = list(dict.fromkeys([*exp.victims, *exp.good, *exp.resurrected]))
                results.append(node.read_ids(ids))
            for res in results:
                warned += kit.warning_count(dict(res.payload))
                seen += [_node_seen(amf) for amf in res.records]
    except Exception as exc:
        return Observation("node", error=f"{type(exc).__name__}: {exc}")
    return Observation("node", seen, warnings=warned)


def _node_seen(amf: dict[str, Any]) -> Seen:
    state = (amf.get("vendor_extensions") or {}).get("x-state") or {}
    text = (amf.get("annotation") or {}).get("natural_language") or amf["core"]["object"]
    return Seen(amf["knowledge_id"], text, state.get("lifecycle"), state.get("weight"))


def all_paths(s: Seeded, exp: Expect, *, cli: bool, node: bool) -> list[Observation]:
    obs = kit.memory_paths(s, exp)
    obs.append(cli_path(s, exp) if cli else Observation("cli", applicable=False))
    obs.append(http_path(s, exp))
    obs.append(mcp_path(s, exp))
    obs.append(node_path(s, exp) if node else Observation("node", applicable=False))
    obs.append(kit.hooks_path(s, exp))
    return obs


# ---------------------------------------------------------------------- every attack × path


def worst(cells: list[str]) -> str:
    return min(cells, key=SEVERITY.index) if cells else "n/a"


def run_attack(name: str, attack: Callable[[Seeded], Expect], *, cli: bool,
               node: bool) -> dict[str, Any]:
    root = fresh_root(name)
    started = time.perf_counter()
    try:
        s = kit.seed(root)
        try:
            exp = attack(s)
        except Exception as exc:
            return {"attack": name, "verdict": "ATTACK-FAILED", "error": repr(exc), "cells": {}}
        obs = all_paths(s, exp, cli=cli, node=node)
        cells = {}
        for o in obs:
            cell, why = kit.verdict(o, exp, s)
            cells[o.path] = {"verdict": cell, "why": why[:240], "ok": kit.acceptable(cell, exp)}
        verdict = worst([c["verdict"] for c in cells.values()])
        return {
            "attack": name, "verdict": verdict,
            "ok": all(c["ok"] for c in cells.values()),
            "refuse_ok": exp.refuse_ok, "doc": (attack.__doc__ or "").strip().split("\n")[0],
            "cells": cells, "seconds": round(time.perf_counter() - started, 2),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_control(*, cli: bool, node: bool) -> dict[str, Any]:
    """The same reads of an unedited store: every path must serve everything, warn of
    nothing (a store that refuses or warns about anything would pass every attack)."""
    root = fresh_root("control")
    try:
        s = kit.seed(root)
        exp = Expect(tuple(s.alice[:3]), (*s.alice, s.bob[0]))
        cells = {}
        for o in all_paths(s, exp, cli=cli, node=node):
            cell, why = kit.control_verdict(o, exp) if o.applicable else ("n/a", "")
            cells[o.path] = {"verdict": cell, "why": why[:240], "ok": cell in ("clean", "n/a")}
        bad = [c["verdict"] for c in cells.values() if not c["ok"]]
        return {"attack": "control (no edit)", "verdict": bad[0] if bad else "clean",
                "ok": not bad, "cells": cells}
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------- the agmi adapter


class AmcpAdapter(MemoryAdapter):
    """agmi's at-rest operations on an amcp store: a record is a row of ``records`` in
    alice's scope (bob's scope is the second context), its slot is the rowid, its payload
    the text a read shows, its owner the scope row. ``verify()`` reopens the store and runs
    every in-process read path; the store counts as intact when any path answers with the
    attacker's edit in it, or answers as if nothing happened."""

    name = "amcp"
    supports_replay = True
    supports_metadata = True
    supports_snapshot = True
    POSITION_KEYS = ("rowid_", "chain_seq")
    _VOLATILE = ("access_count", "last_access")  # reads move these; not the attacker

    def __init__(self) -> None:
        self.s: Seeded | None = None
        self.root: Path | None = None
        self.last_cells: dict[str, str] = {}

    # lifecycle ------------------------------------------------------------------------
    def setup(self) -> None:
        self.root = fresh_root("agmi")
        self.s = None
        self.last_cells = {}

    def teardown(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def seed(self, n: int) -> None:
        assert self.root is not None
        self.s = kit.seed(self.root, alice=n, bob=0, lifecycle_extras=False)

    def seed_other(self, n: int) -> None:
        s = self._s()
        with s.memory() as mem:
            for word in kit.BOB_WORDS[:n]:
                kit._remember(s, mem, s.bob, kit.bob_text(word), kit.BOB, word)

    def reload(self) -> None:
        """Every ``verify`` opens the store afresh; nothing stays open in between."""

    def _s(self) -> Seeded:
        assert self.s is not None
        return self.s

    # raw rows -------------------------------------------------------------------------
    def _rows(self, scope: str) -> list[Record]:
        s = self._s()
        with kit.raw(s) as db:
            kids = [r[0] for r in db.execute(
                "SELECT r.knowledge_id FROM records r JOIN record_scopes x ON x.rid=r.rowid"
                " WHERE x.scope=? ORDER BY r.rowid", (scope,))]
            rows = [kit.row(db, k) for k in kids]
        out = []
        for r in rows:
            fields = {k: v for k, v in r.items() if k not in self._VOLATILE}
            fields["_scope"] = scope
            out.append(Record(seq=int(r["rowid_"]), fields=fields))
        return out

    def read_all_raw(self) -> list[Record]:
        return self._rows(kit.ALICE)

    def read_other_raw(self) -> list[Record]:
        return self._rows(kit.BOB)

    def write_raw(self, record: Record) -> None:
        s = self._s()
        f = {k: v for k, v in record.fields.items()
             if k not in ("rowid_", "rowid", "_scope", *self._VOLATILE)}
        with kit.raw(s) as db:
            exists = db.execute("SELECT 1 FROM records WHERE rowid=?", (record.seq,)).fetchone()
            if exists is None:  # a forgery: a new row with its index rows
                rec = json.loads(f.pop("_forged"))
                db.close()
                kit.insert_record(s, rec, scope=kit.ALICE, words="vault funds approved")
                return
            # Another row holding this id (a swap half done) steps aside until overwritten.
            db.execute("UPDATE records SET knowledge_id='agmi-displaced-'||knowledge_id"
                       " WHERE knowledge_id=? AND rowid<>?", (f["knowledge_id"], record.seq))
            db.execute(f"UPDATE records SET {', '.join(f'{c}=?' for c in f)} WHERE rowid=?",
                       [*f.values(), record.seq])

    def delete_raw(self, seq: int) -> None:
        s = self._s()
        with kit.raw(s) as db:
            kid = db.execute("SELECT knowledge_id FROM records WHERE rowid=?", (seq,)).fetchone()
            kit.delete_record_rows(db, kid[0])

    def replay_onto(self, victim_seq: int, donor: Record) -> None:
        with kit.raw(self._s()) as db:
            db.execute("UPDATE records SET body=?, checksum=? WHERE rowid=?",
                       (donor.fields["body"], donor.fields["checksum"], victim_seq))

    # content --------------------------------------------------------------------------
    def mutate_payload(self, record: Record) -> Record:
        import msgpack

        from amcp.amf.canonical import canonical_packb

        rec = msgpack.unpackb(record.fields["body"], raw=False)
        text = f"{kit.MARKER} " + rec["core"]["object"]
        rec["core"]["object"] = text
        rec.setdefault("annotation", {})["natural_language"] = text
        record.fields["body"] = canonical_packb(rec)
        return record

    def forge_record(self, template: Record) -> Record:
        s = self._s()
        rec = kit.forged_record(s, template.fields["knowledge_id"],
                                f"{kit.FORGED}: alice approved wiring the vault funds")
        with kit.raw(s) as db:
            top = int(db.execute("SELECT MAX(rowid) FROM records").fetchone()[0])
        fields = dict(template.fields)
        fields.update(knowledge_id=rec["knowledge_id"], checksum=rec["integrity"]["checksum"],
                      _forged=json.dumps(rec))
        return Record(seq=top + 1, fields=fields)

    def identity_of(self, record: Record) -> str:
        return str(record.fields["rowid_"])

    def payload_of(self, record: Record) -> str:
        import msgpack

        body = record.fields.get("body")
        if "_forged" in record.fields:
            return str(json.loads(record.fields["_forged"])["core"]["object"])
        try:
            rec = msgpack.unpackb(body, raw=False)
            return str((rec.get("annotation") or {}).get("natural_language") or rec["core"])
        except Exception:
            return repr(body)

    def owner_of(self, record: Record) -> str | None:
        return str(record.fields.get("_scope"))

    # metadata -------------------------------------------------------------------------
    _META = ("created_at", "created_by", "kind", "weight")

    def read_meta(self, seq: int) -> dict[str, Any]:
        with kit.raw(self._s()) as db:
            got = db.execute(f"SELECT {', '.join(self._META)} FROM records WHERE rowid=?",
                             (seq,)).fetchone()
        meta = dict(zip(self._META, got, strict=True))
        if meta["created_by"] == "amcp://attacker.example":
            meta["agmi_meta_tampered"] = True
        return meta

    def write_meta(self, seq: int, meta: dict[str, Any]) -> None:
        values = {k: meta[k] for k in self._META}
        if meta.get("agmi_meta_tampered"):  # the edit: new creator, kind and weight
            values.update(created_by="amcp://attacker.example", kind=kit.EVIL_KIND,
                          weight=kit.ATTACKER_WEIGHT)
        with kit.raw(self._s()) as db:
            db.execute(f"UPDATE records SET {', '.join(f'{k}=?' for k in values)}"
                       " WHERE rowid=?", [*values.values(), seq])

    # snapshot (T9): the whole store directory, keys/ included ------------------------
    def snapshot_store(self) -> object:
        return self._copy_store(self._s().store_dir)

    def restore_store(self, token: object) -> None:
        self._restore_store(str(token), self._s().store_dir)

    def append_genuine(self) -> None:
        kit.append_genuine(self._s())

    # the tool's answer ----------------------------------------------------------------
    def verify(self) -> bool:
        """agmi's question, "did the tool notice?": the store counts as intact when any
        path serves the attacker's edit, or when no path noticed anything (no refusal,
        failed read or warning). The per-path cells stay strict (``last_cells``)."""
        s = self._s()
        exp = Expect(victims=(), good=tuple(s.alice), unnoticed_is_served=True)
        obs = [*kit.memory_paths(s, exp), kit.hooks_path(s, exp)]
        self.last_cells = {o.path: kit.verdict(o, exp, s)[0] for o in obs}
        served = [o.path for o in obs if kit.bad_items(o, exp, s)]
        noticed = [f"{o.path}: {o.refused or o.error or f'{o.warnings} warning(s)'}"
                   for o in obs if o.refused or o.error or o.warnings]
        self.verify_detail = noticed[0][:200] if noticed else None
        return bool(served) or not noticed


def run_agmi() -> list[dict[str, Any]]:
    rows = []
    for cls in AT_REST_ATTACKS_WITH_SNAPSHOT:
        adapter = AmcpAdapter()
        result = cls().run(adapter)
        rows.append({
            "attack": result.attack, "status": result.status, "detected": result.detected,
            "detail": result.detail, "error": result.error, "guard": result.guard,
            "cells": adapter.last_cells,
        })
    return rows


# ---------------------------------------------------------------------- output


def print_table(rows: list[dict[str, Any]]) -> None:
    width = max(len(r["attack"]) for r in rows) + 1
    print(f"{'attack':{width}} {'verdict':12}" + "".join(f"{p:12}" for p in PATHS))
    for r in rows:
        cells = r.get("cells", {})
        print(f"{r['attack']:{width}} {r['verdict']:12}"
              + "".join(f"{cells.get(p, {}).get('verdict', '-'):12}" for p in PATHS))


def markdown(result: dict[str, Any]) -> str:
    """A results file as Markdown tables (agmi's cells, then attack × path)."""
    lines = []
    if result.get("agmi"):
        lines += ["| agmi 0.6.3 | status | detail |", "|---|---|---|"]
        lines += [f"| {r['attack']} | {r['status']} | "
                  f"{(r['error'] or r['guard'] or r['detail'])[:90]} |" for r in result["agmi"]]
        lines.append("")
    lines += ["| attack | verdict | " + " | ".join(PATHS) + " |",
              "|---" * (len(PATHS) + 2) + "|"]
    for r in [result["control"], *result["attacks"]]:
        cells = r.get("cells", {})
        lines.append(f"| {r['attack']} | **{r['verdict']}** | " + " | ".join(
            cells.get(p, {}).get("verdict", "-") for p in PATHS) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="no CLI subprocesses, no node")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--no-node", action="store_true")
    ap.add_argument("--no-agmi", action="store_true")
    ap.add_argument("--only", help="run only the attacks whose name contains this")
    ap.add_argument("--name", default="tamper_at_rest", help="result file name")
    ap.add_argument("--markdown", type=Path, help="print this results file as Markdown")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    cli, node = not (args.quick or args.no_cli), not (args.quick or args.no_node)
    started = time.perf_counter()
    agmi_rows = [] if args.no_agmi else run_agmi()
    if agmi_rows:
        print("agmi 0.6.3 at-rest family (its own harness, AmcpAdapter):")
        for r in agmi_rows:
            note = r["error"] or r["guard"] or r["detail"]
            print(f"  {r['attack']:18} {r['status']:11} {note[:110]}")
        print()
    control = run_control(cli=cli, node=node)
    rows = [run_attack(n, fn, cli=cli, node=node) for n, fn in kit.ATTACKS.items()
            if not args.only or args.only in n]
    print_table([control, *rows])
    git = subprocess.run(["git", "-C", str(ROOT), "log", "--oneline", "-1"],
                         capture_output=True, text=True, check=False).stdout.strip()
    path = save(args.name, {
        "commit": git, "paths": list(PATHS), "agmi_version": "0.6.3", "agmi": agmi_rows,
        "control": control, "attacks": rows, "seconds": round(time.perf_counter() - started, 1),
        "served": sum(r["verdict"] == "SERVED" for r in rows),
        "all_ok": control["ok"] and all(r.get("ok") for r in rows),
    })
    print(f"\n{sum(r.get('ok', False) for r in rows)}/{len(rows)} attacks fully handled; "
          f"{time.perf_counter() - started:.0f} s; wrote {path}")


if __name__ == "__main__":
    main()
