"""Where a hook reads and writes: the node serving the store (its HTTP hook routes, or the
AMCP client) when one runs, else the store file itself — and the fallback from a node that
fails mid-call to the file (docs/hooks.md, Discovery and Backends)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amcp.agent.hooks.fastpath import FastBackend, LocalBackend, NodeBackend, node_listening

if TYPE_CHECKING:  # names for annotations only: ``typing`` stays off the hook path
    from collections.abc import Callable
    from typing import Any, TypeVar

    from amcp.agent.hooks.fastpath import Backend
    from amcp.agent.hooks.hookio import HookConfig
    from amcp.agent.hooks.nodehttp import HttpBackend

    T = TypeVar("T")


def node_http(cfg: HookConfig) -> HttpBackend | None:
    """The node serving ``cfg.store``, by its runtime file (``amcp serve`` writes it; see
    ``runtime``), as a stateless HTTP backend; None when there is no trustworthy file."""
    if cfg.node is None:
        return None
    from amcp.agent.hooks.runtime import read_runtime

    rt = read_runtime(cfg.store)
    if rt is None:
        return None
    from amcp.agent.hooks.nodehttp import HttpBackend

    return HttpBackend(rt, connect_timeout=cfg.http_connect_timeout,
                       read_timeout=cfg.http_read_timeout)


def with_backend(cfg: HookConfig, fn: Callable[[Backend], T], scopes: tuple[str, ...] = (),
                 **options: Any) -> T:
    """``fn(backend)`` on ``open_backend``'s choice; if that was the node's HTTP channel
    and it failed (gone, timed out, refused the token, answered nonsense), ``fn`` again on
    the file. A node write that timed out may have landed: the retry is then answered
    with the identical record (``Memory.remember`` deduplicates), not a second one."""
    backend = open_backend(cfg, scopes, **options)
    if backend.name != "http":
        try:
            return fn(backend)
        finally:
            backend.close()
    from amcp.agent.hooks.nodehttp import NodeHttpError

    try:
        return fn(backend)
    except NodeHttpError:
        pass
    backend = open_backend(cfg._replace(node=None), scopes, **options)
    try:
        return fn(backend)
    finally:
        backend.close()


def open_backend(cfg: HookConfig, scopes: tuple[str, ...] = (), *, boot_budget: int = 0,
                 task: str = "coding-agent hook", write: bool = False,
                 vectors: bool = False) -> Backend:
    """The node when one serves this store — its HTTP hook routes when its runtime file
    names them, else the AMCP client when ``cfg.node`` answers a probe — else the store
    file: read-only and lean for reads (``FastBackend``), ``Memory`` without an embedder
    for writes (``LocalBackend``). Callers use ``with_backend``, which falls back to the
    file when the HTTP channel fails mid-call.

    A hook may not spend O(records), so no healthy store is walked whole: reads verify each
    record they show, the log tail against the witness and the rows against the signed
    head's counts. A store whose rows do not add up gets the full check (``Memory`` with
    ``verify``), which finds the damaged records and leaves them out (docs/hooks.md,
    Tamper evidence).
    """
    http = node_http(cfg)
    if http is not None:
        return http
    if cfg.node is not None and node_listening(*cfg.node, cfg.probe_timeout):
        from amcp.node.link import NodeUnavailable

        try:
            return NodeBackend.connect(*cfg.node, timeout=cfg.connect_timeout, scopes=scopes,
                                       task=task, budget_tokens=boot_budget)
        except (NodeUnavailable, OSError):
            pass  # the node went away between probe and connect: fall back to the file
    verify = False
    if not write:
        from amcp.store.fastread import NeedsMemory, Unreconciled

        try:
            return FastBackend.open(cfg.store, lock_timeout=cfg.lock_timeout)
        except NeedsMemory as exc:
            # An older schema (Memory migrates it, under the write lock), or rows that do
            # not add up to the signed head: then the full check finds which records are
            # damaged and quarantines them, and the answer leaves them out.
            verify = isinstance(exc, Unreconciled)
    return LocalBackend.open(cfg.store, lock_timeout=cfg.lock_timeout, verify=verify,
                             vectors=vectors)


__all__ = ["node_http", "open_backend", "with_backend"]
