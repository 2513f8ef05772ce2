"""Readable terminal output (rich): scan results, write-back, incident lists."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlcopilot.model import (
    DocumentWrite,
    Incident,
    IncidentWrite,
    PropertyWrite,
    Severity,
    TagWrite,
    Write,
    short_name,
)
from mlcopilot.scan import ScanResult

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.HIGH: "red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
}


def print_scan(result: ScanResult, console: Console) -> None:
    """Render a scan result as readable tables."""
    for report in result.models:
        lineage = report.lineage
        console.print()
        console.print(f"[bold]{escape(short_name(report.urn))}[/]  [dim]{escape(report.urn)}[/]")
        coverage = f"  walked {len(lineage.nodes)} nodes"
        if lineage.truncated:
            coverage += " [bold yellow](truncated: a hop or node cap was reached)[/]"
        if report.unknown:
            coverage += f", {len(report.unknown)} lacked metadata a check needed"
        console.print(coverage)
        if report.findings:
            table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
            for column in ("severity", "check", "entity", "field", "finding"):
                table.add_column(column, overflow="fold")
            for f in report.findings:
                style = SEVERITY_STYLE[f.severity]
                table.add_row(
                    f"[{style}]{f.severity.value}[/]",
                    f.check,
                    escape(short_name(f.entity)),
                    escape(f.field or ""),
                    escape(f.message),
                )
            console.print(table)
        else:
            console.print("  [green]no findings[/]")
        for urn, reasons in sorted(report.unknown.items()):
            console.print(
                f"  [dim]unknown: {escape(short_name(urn))}: {escape('; '.join(reasons))}[/]"
            )
    changes = result.changes
    console.print()
    console.print(
        f"Incidents: [bold]{len(changes.opened)}[/] opened, {len(changes.updated)} still open, "
        f"[green]{len(changes.resolved)}[/] resolved."
    )
    print_writes(result.writes, console, dry_run=result.dry_run)


def print_writes(writes: Sequence[Write], console: Console, *, dry_run: bool) -> None:
    """Say what the write-back wrote (or, in a dry run, would write) to the catalog."""
    verb = "would write" if dry_run else "wrote"
    if not writes:
        console.print(f"Write-back: catalog already up to date ({verb} nothing).")
        return
    console.print(f"Write-back {verb} {len(writes)} change(s) to the catalog:")
    for write in writes:
        console.print(f"  - {escape(describe_write(write))}")


def describe_write(write: Write) -> str:
    """One line describing a write-back intent."""
    if isinstance(write, TagWrite):
        action = "add tag" if write.present else "remove tag"
        return f"{action} {short_name(write.tag)} on {short_name(write.entity)}"
    if isinstance(write, PropertyWrite):
        values = ", ".join(str(v) for v in write.values)
        return f"set {short_name(write.property)} on {short_name(write.entity)} = [{values}]"
    if isinstance(write, IncidentWrite):
        state = "ACTIVE" if write.active else "RESOLVED"
        return f"incident {write.urn} ({state}, {write.incident_type})"
    assert isinstance(write, DocumentWrite)
    return f"document {write.urn} ({write.title})"


def print_incidents(incidents: Sequence[Incident], console: Console) -> None:
    """Render incidents as a table."""
    table = Table(header_style="bold", box=None, padding=(0, 1))
    for column in ("id", "state", "severity", "check", "model", "entity", "field", "opened"):
        table.add_column(column, overflow="fold")
    for i in incidents:
        table.add_row(
            i.id,
            i.state.value,
            f"[{SEVERITY_STYLE[i.severity]}]{i.severity.value}[/]",
            i.check,
            escape(short_name(i.model)),
            escape(short_name(i.entity)),
            escape(i.field or ""),
            i.opened_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)
