"""``mlcopilot scan``: walk, check, track incidents, write back and notify; report and exit."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mlcopilot.cli._app import (
    CatalogOption,
    StateOption,
    app,
    command_settings,
    err,
    opened,
    out,
    parse_now,
)
from mlcopilot.clock import OffsetClock
from mlcopilot.errors import UsageError
from mlcopilot.model import Severity

if TYPE_CHECKING:
    from mlcopilot.scan import Progress as ScanProgress
    from mlcopilot.scan import ScanResult


class OutputFormat(StrEnum):
    """Report formats of ``scan``."""

    table = "table"
    json = "json"
    markdown = "markdown"


@app.command("scan")
def scan_command(
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model urn to scan (repeatable; default: every mlModel)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
    now: Annotated[
        str | None, typer.Option(help="The clock, ISO-8601 (default: now).", show_default=False)
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="Report format.")
    ] = OutputFormat.table,
    output: Annotated[
        Path | None, typer.Option(help="Write the report to this file instead of stdout.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would be written.")
    ] = False,
    fail_on: Annotated[
        Severity | None,
        typer.Option(help="Exit 1 when a finding is at or above this severity (CI gate)."),
    ] = None,
    max_hops: Annotated[int, typer.Option(help="Cap on lineage hops from the model.")] = 50,
    max_nodes: Annotated[int, typer.Option(help="Cap on nodes walked per model.")] = 10_000,
    deliver: Annotated[
        bool,
        typer.Option(
            "--deliver/--no-deliver",
            help="Deliver the write-back and notifications now (else leave them in the outbox "
            "for `mlcopilot outbox deliver`).",
        ),
    ] = True,
) -> None:
    """Walk every model's upstream lineage, check each node, track incidents and notify."""
    from mlcopilot.notify.delivery import scan_delivery
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.protocols import WalkLimits
    from mlcopilot.scan import ScanOptions, scan
    from mlcopilot.wiring import configured_checks

    settings = command_settings(catalog, state_url)
    notify = NotifySettings.from_settings(settings)
    options = ScanOptions(
        now=parse_now(now),
        models=tuple(model or ()),
        dry_run=dry_run,
        limits=WalkLimits(max_hops=max_hops, max_nodes=max_nodes),
    )
    checks = configured_checks(settings)
    with opened(settings) as (cat, store), _progress() as progress:
        delivery = scan_delivery(notify, cat, OffsetClock(options.now), deliver=deliver)
        result = scan(cat, store, checks, options, progress=progress, delivery=delivery)
    for report in result.models:
        for error in report.errors:
            err.print(f"[yellow]warning:[/] {escape(error)}")
    _emit(_render(result, output_format), output, result)
    if fail_on is not None and any(f.severity.at_least(fail_on) for f in result.findings):
        raise typer.Exit(1)
    if result.relay is not None and not result.relay.ok:
        raise typer.Exit(5)


def _render(result: ScanResult, output_format: OutputFormat) -> str | None:
    from mlcopilot.cli.render.report import render_json, render_markdown

    if output_format is OutputFormat.json:
        return render_json(result)
    if output_format is OutputFormat.markdown:
        return render_markdown(result)
    return None


def _emit(text: str | None, output: Path | None, result: ScanResult) -> None:
    from mlcopilot.cli.render.report import render_markdown
    from mlcopilot.cli.render.terminal import print_relay, print_scan

    if text is None:
        if output is not None:
            _write_atomically(output, render_markdown(result))
        else:
            print_scan(result, out)
        return
    if output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(output, text)
        err.print(f"Report written to {output}")
    if result.relay is not None:
        print_relay(result.relay, err)


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a temp file renamed over it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
        ) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
    except OSError as exc:
        raise UsageError(f"--output {path}: cannot write: {exc.strerror}") from exc


@contextmanager
def _progress() -> Iterator[ScanProgress | None]:
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mlcopilot.names import short_name

    bar = Progress(
        TextColumn("Scanning"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("", total=None)

    def advance(done: int, total: int, model: str) -> None:
        bar.update(task, completed=done, total=total, description=short_name(model))

    with bar:
        yield advance
