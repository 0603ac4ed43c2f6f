"""``amcp serve`` (run the node) and ``amcp trust anchor|issue|show`` (its certificates).

Listed in ``amcp.cli.commands`` (``serve``, and ``trust`` as a group).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from amcp.cli.common import friendly, open_memory, out, store_location, store_path, warm_up
from amcp.cli.options import StoreOpt, group

if TYPE_CHECKING:
    import asyncio

    from amcp.memory import Memory
    from amcp.node.replicator import Replicator
    from amcp.node.server import NodeServer
    from amcp.session import AccessPolicy
    from amcp.sync.peers import SyncConfig

trust_app = group("Trust anchors and node certificates (X.509, Ed25519).")


HostOpt = Annotated[str, typer.Option(help="TCP address to listen on ('' = TCP off).")]
PortOpt = Annotated[int, typer.Option(help="TCP port (default 7707).")]
UnixOpt = Annotated[Path | None, typer.Option("--unix", help="Also listen on this unix socket.")]
PolicyOpt = Annotated[Path | None, typer.Option(help="Access policy (TOML/JSON); default: open.")]
AnchorOpt = Annotated[Path | None, typer.Option(help="Trust anchors (PEM) for verified peers.")]
CertOpt = Annotated[Path | None, typer.Option(help="This node's certificate chain (PEM).")]
PeerOpt = Annotated[list[str] | None, typer.Option(
    "--peer", help="Replicate with the node at HOST:PORT (repeatable; docs/replication.md).")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="Node config (TOML): [sync] settings and [peers.NAME] tables.")]
AdvertiseOpt = Annotated[str | None, typer.Option(
    help="HOST:PORT peers should dial to reach this node (default: --host:--port).")]
TierRecordsOpt = Annotated[int | None, typer.Option(
    "--tier-max-records", help="Tier 0's record limit ([tiers] max_records; 0: none).")]
TierBytesOpt = Annotated[int | None, typer.Option(
    "--tier-max-bytes", help="Tier 0's body bytes ([tiers] max_bytes; default 50 MB).")]


@friendly
def serve(
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 7707,
    unix: UnixOpt = None,
    store: StoreOpt = None,
    policy: PolicyOpt = None,
    anchor: AnchorOpt = None,
    cert: CertOpt = None,
    embedder: Annotated[
        str,
        typer.Option(
            "--embedder", "-e", help="auto | minilm | minilm-int8 | hashing | openai | none"
        ),
    ] = "auto",
    http_port: Annotated[
        int, typer.Option(help="HTTP API + MCP (streamable HTTP at /mcp) port; 0 = off.")
    ] = 8765,
    peer: PeerOpt = None,
    config: ConfigOpt = None,
    advertise: AdvertiseOpt = None,
    tier_max_records: TierRecordsOpt = None,
    tier_max_bytes: TierBytesOpt = None,
) -> None:
    """Run the AMCP node (binary protocol) and the HTTP/MCP API until interrupted."""
    import asyncio  # here, not at import: `amcp --help` loads every command module

    from amcp.node.runtime import run  # uvloop when installed: ~half the loop's cost
    from amcp.node.server import NodeServer
    from amcp.session import AccessPolicy, TrustLevel
    from amcp.session.trust import load_anchors

    access = AccessPolicy.load(policy) if policy is not None else None
    sync = sync_config(config, peer or [], tier_max_records, tier_max_bytes)
    if access is not None and sync.policy_grants():
        access = AccessPolicy(access.grants + sync.policy_grants(), access.default)
    anchors = load_anchors(anchor) if anchor is not None else ()
    chain = cert.read_text(encoding="ascii") if cert is not None else None
    plan = _Plan(host, port, unix, http_port, store_path(store), access,
                 str(store_location(store)), advertise)
    with open_memory(store, embedder, create=True) as mem:
        warm_up(mem)  # "listening" only once the first request can be answered at speed
        mem.flush_in_background()
        server = NodeServer(
            mem, policy=access, anchors=anchors, cert_chain=chain,
            trust_level=TrustLevel.VERIFIED if chain else TrustLevel.LOCAL,
        )
        from amcp.node.replicator import attach

        replicator = attach(server, sync, advertise)
        with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
            run(_serve(mem, server, replicator, plan))


@dataclass(frozen=True, slots=True)
class _Plan:
    """What ``amcp serve`` was asked to listen on; ``http_port`` 0 (or no TCP ``host``):
    no HTTP API."""

    host: str
    port: int
    unix: Path | None
    http_port: int
    db: Path  # the store's local anchor: where its runtime file goes
    access: AccessPolicy | None
    shown: str = ""  # the store as messages name it (a DSN redacted)
    advertise: str | None = None  # where peers dial us, if not host:port


async def _serve(
    mem: Memory, server: NodeServer, replicator: Replicator, plan: _Plan
) -> None:
    """Until a signal, or until either server ends on its own (an HTTP port in use ends
    uvicorn at start-up): then everything stops, in order."""
    import asyncio

    from amcp.heap import freeze_startup_heap
    from amcp.node.runtime import stop_on_signals

    http = bool(plan.http_port and plan.host)
    if http:
        # The HTTP side's imports (FastAPI, MCP's pydantic models) take ~1 s of CPU, several
        # on a loaded machine. Made after the AMCP listener opened, they blocked its event
        # loop, so the first handshake waited behind them (a client timed out at load 8).
        import amcp.api.serve  # noqa: F401
    await server.start(plan.host or None, plan.port, unix=plan.unix)
    await _replicate(replicator, plan.advertise or _endpoint(plan.host, server.port))
    stop = stop_on_signals()
    token = None
    tasks = [asyncio.create_task(server.serve_forever())]
    if http:
        from amcp.agent.hooks.runtime import new_token

        token = new_token()
        bound = asyncio.Event()
        tasks.append(_start_http(mem, server, plan, token, stop, replicator, bound))
        # "listening" only once both servers answer; uvicorn ends at once if its port is taken.
        answering = asyncio.create_task(bound.wait())
        await asyncio.wait([answering, tasks[-1]], return_when=asyncio.FIRST_COMPLETED)
        answering.cancel()
    else:
        freeze_startup_heap()
    _print_listening(server, plan)
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        await asyncio.gather(*tasks[1:])  # uvicorn's own graceful shutdown
    finally:
        if token is not None:
            from amcp.agent.hooks.runtime import remove_runtime

            remove_runtime(plan.db, token)
        await replicator.close()
        await server.close()
        for task in (stopped, *tasks):
            task.cancel()
        await asyncio.gather(stopped, *tasks, return_exceptions=True)


def _print_listening(server: NodeServer, plan: _Plan) -> None:
    host, unix = plan.host, plan.unix
    where = [f"{host}:{server.port}"] if host else []
    if unix is not None:
        where.append(f"unix:{unix}")
    out.print(f"amcp node {server.node_uri}")
    out.print(f"store {plan.shown or plan.db}; listening on {', '.join(where)}")
    if plan.access is None and host and host not in ("127.0.0.1", "::1", "localhost"):
        out.print("[yellow]warning[/yellow]: no --policy: every peer may read and write")
    target = f'None, unix="{unix}"' if not host else f'"{host}", {server.port}'
    out.print("connect from Python:\n"
              "    from amcp.node import SyncClient\n"
              f"    with SyncClient.connect({target}) as node:\n"
              "        print(node.health())\n"
              f"    # async: client = await amcp.node.connect({target})")


def _start_http(mem: Memory, server: NodeServer, plan: _Plan, token: str,
                stop: asyncio.Event, replicator: Replicator,
                bound: asyncio.Event) -> asyncio.Task[None]:
    """The HTTP API (MCP at /mcp, the inspector at /ui, the hooks' routes) as a task."""
    import asyncio

    from amcp.agent.hooks.runtime import write_runtime
    from amcp.api.serve import serve_http
    from amcp.heap import freeze_startup_heap

    host = plan.host
    out.print(f"HTTP API http://{host}:{plan.http_port}/v1  (OpenAPI /openapi.json, "
              f"MCP streamable HTTP /mcp, web inspector /ui)")
    amcp_addr = (host, server.port) if server.port else None

    def ready(port: int) -> None:
        # Coding-agent hooks find this node (and their token) here; see docs/hooks.md,
        # Discovery. Removed by ``_serve`` when the node stops.
        write_runtime(plan.db, http=(host, port), amcp=amcp_addr, token=token)
        freeze_startup_heap()  # everything is loaded now (amcp/heap.py)
        bound.set()

    return asyncio.create_task(
        serve_http(mem, host, plan.http_port, policy=plan.access, hook_token=token,
                   on_ready=ready, stop=stop, sync_status=replicator.totals,
                   sync_view=replicator.view))


def sync_config(config: Path | None, peers: list[str], tier_records: int | None = None,
                tier_bytes: int | None = None) -> SyncConfig:
    """The replication settings from ``--config``, ``--peer`` and the ``--tier-*`` limits
    (which override ``[tiers]``). Every node replicates: with no peers of its own it still
    answers those that dial it (members, counters, the loop rule by key)."""
    from dataclasses import replace

    from amcp.sync.peers import SyncConfig, load_config, peers_from_cli

    base = load_config(config) if config is not None else SyncConfig()
    tiers = base.tiers
    if tier_records is not None:
        tiers = replace(tiers, max_records=tier_records)
    if tier_bytes is not None:
        tiers = replace(tiers, max_bytes=tier_bytes)
    return replace(base, tiers=tiers).with_peers(peers_from_cli(peers))


async def _replicate(replicator: Replicator, endpoint: str | None) -> None:
    """Start replicating once the node listens: peers learn ``endpoint`` from our members."""
    replicator.replica.membership.me.endpoint = endpoint
    await replicator.start()
    peers = replicator.config.peers
    if peers:
        out.print(f"replicating with {', '.join(p.label for p in peers)}")


def _endpoint(host: str, port: int) -> str | None:
    """Where peers reach us, when --host names one address (not 0.0.0.0 / ::)."""
    if not host or host in ("0.0.0.0", "::") or not port:  # noqa: S104 - a comparison
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@trust_app.command("anchor")
@friendly
def trust_anchor(
    name: Annotated[str, typer.Option(help="Common name of the anchor (CA).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for anchor.pem + key.")],
    days: Annotated[int, typer.Option(help="How long the anchor is valid, in days.")] = 3650,
) -> None:
    """Create a trust anchor: a self-signed Ed25519 CA certificate and its key (0600)."""
    from amcp.session.identity import write_private_pem
    from amcp.session.trust import certs_to_pem, create_anchor

    cert, key = create_anchor(name, days=days)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "anchor.pem").write_text(certs_to_pem([cert]), encoding="ascii")
    write_private_pem(out_dir / "anchor_key.pem", key)
    out.print(f"anchor {name}: {out_dir / 'anchor.pem'} (key {out_dir / 'anchor_key.pem'})")


@trust_app.command("issue")
@friendly
def trust_issue(
    anchor_cert: Annotated[Path, typer.Option("--anchor", help="Issuer certificate (PEM).")],
    anchor_key: Annotated[Path, typer.Option("--anchor-key", help="Issuer private key (PEM).")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the chain (PEM).")],
    public_key: Annotated[str | None, typer.Option(help="Peer's Ed25519 key (base64url).")] = None,
    store: Annotated[str | None, typer.Option(
        "--store", "-s", help="Certify this store's node key (a file or postgresql:// URL).",
    )] = None,
    node_uri: Annotated[str | None, typer.Option(help="Node URI to bind (SubjectAltName).")] = None,
    days: Annotated[int, typer.Option(help="How long the certificate is valid, in days.")] = 365,
) -> None:
    """Issue a node certificate; writes leaf + issuer (what a hello's cert_chain holds)."""
    from amcp.keyring import Keyring
    from amcp.session.identity import b64url_decode, raw_public_key, read_private_pem
    from amcp.session.trust import certs_to_pem, issue_certificate, load_pem_chain

    issuer = load_pem_chain(anchor_cert.read_bytes())[0]
    key = read_private_pem(anchor_key)
    if (public_key is None) == (store is None):
        raise typer.BadParameter("give --public-key or --store")
    if public_key is not None:
        pub = b64url_decode(public_key)
    else:
        ring = Keyring(store_path(store).parent / "keys")
        pub = raw_public_key(ring.signing_key.public_key())
    cert = issue_certificate(issuer, key, pub, node_address=node_uri, days=days)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(certs_to_pem([cert, issuer]), encoding="ascii")
    out.print(f"issued {cert.subject.rfc4514_string()} → {out_file}")


@trust_app.command("show")
@friendly
def trust_show(pem: Annotated[Path, typer.Argument(help="A PEM certificate or chain.")]) -> None:
    """Print each certificate of a chain: subject, issuer, validity, node URI, CA flag."""
    from cryptography import x509

    from amcp.session.trust import load_pem_chain

    for i, cert in enumerate(load_pem_chain(pem.read_bytes())):
        try:
            uris = cert.extensions.get_extension_for_class(
                x509.SubjectAlternativeName
            ).value.get_values_for_type(x509.UniformResourceIdentifier)
        except x509.ExtensionNotFound:
            uris = []
        try:
            ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            ca = False
        out.print(f"[{i}] subject {cert.subject.rfc4514_string()}\n"
                  f"    issuer  {cert.issuer.rfc4514_string()}\n"
                  f"    valid   {cert.not_valid_before_utc:%Y-%m-%d} .. "
                  f"{cert.not_valid_after_utc:%Y-%m-%d}\n"
                  f"    ca      {ca}\n"
                  f"    uri     {', '.join(uris) or '-'}")
