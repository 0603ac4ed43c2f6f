"""``amcp.heap``: startup objects frozen out of the cyclic GC; garbage still collected."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def test_freeze_collects_startup_garbage_then_freezes_the_rest() -> None:
    # In a child process: freezing is process-wide and must not leak into the test run.
    code = textwrap.dedent(
        """
        import gc, weakref
        from amcp.heap import freeze_startup_heap

        class Node:
            pass

        gc.disable()  # only the explicit collections below may run
        dead = Node(); dead.me = dead  # cyclic garbage left by start-up
        gone = weakref.ref(dead); del dead
        kept = Node(); kept.me = kept  # alive at freeze time
        freeze_startup_heap()
        assert gone() is None, "start-up garbage must be collected, not frozen"
        assert gc.get_freeze_count() > 0
        later = Node(); later.me = later  # made while serving: collected as usual
        later_ref = weakref.ref(later); del later
        gc.collect()
        assert later_ref() is None
        # A full collection no longer walks the frozen start-up objects.
        assert len(gc.get_objects(generation=2)) < gc.get_freeze_count()
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
