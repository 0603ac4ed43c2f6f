"""``amcp conformance HOST:PORT``: run the conformance kit against any AMCP node.

Registered in app.py with ``app.command("conformance")(conformance)``. Exit codes: 0 every
test passed, 1 a test failed (or the target is unusable), 2 the requested level has
upstream tests the kit does not implement yet — so a script can never mistake "not
tested" for "passed".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from amcp.cli.common import friendly, out

if TYPE_CHECKING:
    from amcp.conformance import TestResult


@friendly
def conformance(
    targets: Annotated[list[str], typer.Argument(
        help="The node under test, HOST:PORT; Level 3 takes the other nodes of the "
             "cluster after it.", metavar="HOST:PORT...")],
    level: Annotated[
        int, typer.Option("--level", "-l", min=1, max=3, help="Conformance level 1, 2 or 3.")
    ] = 1,
    json_out: Annotated[
        Path | None, typer.Option("--json-out", help="Also write the JSON report here.")
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds to wait for each expected reply.")
    ] = 5.0,
    *,
    silence_window: Annotated[
        float, typer.Option(min=0.1, help="T1-07: seconds of required silence (upstream: 5).")
    ] = 5.0,
    scope: Annotated[
        str | None,
        typer.Option(help="Scope for the kit's test records (default: a new "
                          "amcp-conformance-<random> per run; they are invalidated after it)."),
    ] = None,
    bearer: Annotated[
        str | None, typer.Option(help="Bearer token for nodes whose access policy needs one.")
    ] = None,
    reference: Annotated[
        str | None, typer.Option(help="T2-08: a reference node HOST:PORT to exchange "
                                      "records with.")
    ] = None,
    converge_within: Annotated[
        float, typer.Option(min=0.1, help="Level 3: seconds a change may take to reach "
                                          "the other nodes (upstream: 60).")
    ] = 60.0,
) -> None:
    """Run the AMCP conformance tests against a node and print a pass/fail table."""
    # Loaded here, not at import: `amcp --help` must not pay for the protocol stack.
    from amcp.conformance import KitConfig, parse_target, print_report, run_level

    host, port = parse_target(targets[0])
    peers = [parse_target(t) for t in targets[1:]]
    if reference is not None:
        parse_target(reference)
    config = KitConfig(timeout=timeout, silence_window=silence_window, bearer=bearer,
                       reference=reference, converge_within=converge_within)
    if scope:
        config = replace(config, scope=scope)

    def progress(result: TestResult) -> None:
        verdict = "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]"
        out.print(f"[dim]{result.id} {result.name}[/dim] {verdict}")

    report = run_level(host, port, level, timeout, config=config, on_result=progress,
                       peers=peers)
    print_report(report, out)
    if json_out is not None:
        report.write_json(json_out)
        out.print(f"JSON report written to {json_out}")
    raise typer.Exit(report.exit_code())
