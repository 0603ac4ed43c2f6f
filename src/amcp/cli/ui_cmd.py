"""``amcp ui``: open the web inspector of the node serving a store.

Listed in ``amcp.cli.commands`` (``ui``).

The inspector is part of the HTTP app, so ``amcp serve`` and ``amcp http`` both serve it at
``/ui``; this command only finds it. ``amcp serve`` writes where it listens into the
store's runtime file (docs/hooks.md, Discovery); without one running, the address given
with ``--url`` (default: ``amcp http``'s) is opened.
"""

from __future__ import annotations

import webbrowser
from typing import Annotated

import typer

from amcp.cli.common import friendly, out, store_location, store_path
from amcp.cli.options import StoreOpt

DEFAULT_URL = "http://127.0.0.1:8765/ui"


def ui_url(store: str | None, url: str | None) -> tuple[str, str]:
    """The inspector's address and where it came from."""
    if url:
        return url, "--url"
    from amcp.agent.hooks.runtime import connect_host, read_runtime

    rt = read_runtime(store_path(store))
    if rt is not None:
        host = connect_host(rt.http[0])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{rt.http[1]}/ui", f"the node serving {store_location(store)}"
    return DEFAULT_URL, "the default address of amcp http (no amcp serve found for the store)"


@friendly
def ui(
    store: StoreOpt = None,
    url: Annotated[str | None, typer.Option(help="Open this address instead.")] = None,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the address only.")
    ] = False,
) -> None:
    """Open the web inspector (/ui) of the running node."""
    address, source = ui_url(store, url)
    out.print(f"amcp inspector: {address}  ({source})")
    if not no_browser and not webbrowser.open(address):
        out.print("no browser could be started here; open the address above yourself")
