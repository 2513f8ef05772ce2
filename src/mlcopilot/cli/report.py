"""``mlcopilot report``: the current picture as one HTML page, without writing anything.

A dry run of ``scan`` (the state database and the catalog opened read-only, nothing sent)
plus the store's incident history: the page shows each model's lineage and findings as a
scan would now find them, and every recorded incident's events (opened, acknowledged,
resolved), older resolved ones included. Exit codes are scan's: 2 for bad usage or input,
3 for a catalog that cannot be reached; 0 once the page is written.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from mlcopilot.cli._app import (
    CatalogOption,
    MaxHopsOption,
    MaxNodesOption,
    NowOption,
    StateOption,
    app,
    command_settings,
    err,
    write_output,
)
from mlcopilot.cli.scan_guard import opened_for_scan, report_path, scan_clock, walk_limits


@app.command("report")
def report_command(
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Where to write the page ('-' for stdout).",
            show_default=False,
        ),
    ],
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model urn to report on (repeatable; default: every model)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
    now: NowOption = None,
    max_hops: MaxHopsOption = 50,
    max_nodes: MaxNodesOption = 10_000,
) -> None:
    """Write an offline HTML report: each model's lineage drawn, its findings and incidents."""
    from mlcopilot.report.summary import ScanOutcome, print_summary
    from mlcopilot.scan import ScanOptions
    from mlcopilot.service import Service

    started = time.monotonic()
    # Whatever can fail locally fails here, before the catalog is read.
    options = ScanOptions(
        now=scan_clock(now),
        models=tuple(model or ()),
        dry_run=True,
        limits=walk_limits(max_hops, max_nodes),
    )
    path = report_path(output)
    settings = command_settings(catalog, state_url)
    service = Service.from_settings(settings)
    with opened_for_scan(settings, dry_run=True) as (cat, store):
        result, page = service.report_page(cat, store, options)
    write_output(path, page)
    print_summary(ScanOutcome(result, None, time.monotonic() - started), err)
