"""Git brain round trip (issue 22 target): export → edit 100 files by script → sync → the
store holds exactly the 100 supersedes and its chain verifies (``verify(full=True)``).

    .venv/bin/python bench/brain_git.py [--records 2000] [--edits 100]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--edits", type=int, default=100)
    args = ap.parse_args()
    from amcp.brain.gitbrain import init, sync
    from amcp.brain.mdrecord import read
    from amcp.memory import Memory
    from amcp.store.base import ChangeOp

    work = Path(tempfile.mkdtemp(prefix="amcp-brain-git-"))
    try:
        remote = work / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
        with Memory(work / "s" / "memory.db", embedder=None, check_embedder=False) as mem:
            mem.remember_many([{"text": f"memory {i}: the build step {i % 37} needs care",
                                "scope": f"project:p{i % 20}", "kind": "learning"}
                               for i in range(args.records)])
            repo = work / "repo"
            init(repo, remote=str(remote))
            t = time.perf_counter()
            first = sync(mem, repo)
            export_s = time.perf_counter() - t
            files = sorted((repo / "memories").rglob("*.md"))
            picked = random.Random(22).sample(files, args.edits)
            edited = {read(p.read_text(), str(p)).knowledge_id for p in picked}
            for p in picked:  # the "script": every picked file gets a new sentence
                p.write_text(p.read_text().rstrip("\n") + " Checked again by a person.\n")
            log_before = mem.store.max_hlc()
            t = time.perf_counter()
            rep = sync(mem, repo)
            sync_s = time.perf_counter() - t
            changes = mem.store.changes(log_before, limit=100_000)
            supersedes = [c for c in changes if c.op is ChangeOp.SUPERSEDE]
            puts = [c for c in changes if c.op is ChangeOp.PUT]
            t = time.perf_counter()
            verified = mem.store.verify(full=True)
            verify_s = time.perf_counter() - t
            status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"],
                                    capture_output=True, text=True, check=True).stdout
        payload = {
            "records": args.records,
            "files_exported": first.written,
            "edits": args.edits,
            "supersedes_in_log": len(supersedes),
            "new_records_in_log": len(puts),
            "superseded_ids_are_the_edited": {c.knowledge_id for c in supersedes} == edited,
            "report_superseded": len(rep.superseded),
            "problems": rep.problems,
            "chain_verifies": verified.ok,
            "checked_changes": verified.checked_changes,
            "pushed": rep.pushed,
            "worktree_clean": status == "",
            "export_s": round(export_s, 3),
            "sync_s": round(sync_s, 3),
            "verify_s": round(verify_s, 3),
            "load_avg": os.getloadavg(),
        }
        print(payload)
        save("brain_git", payload)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
