"""Readable terminal output (rich): scan results, write-back, notifications, incident lists."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlcopilot.model import (
    DocumentWrite,
    Incident,
    IncidentWrite,
    ModelReport,
    PropertyWrite,
    Severity,
    TagWrite,
    Write,
)
from mlcopilot.names import short_name
from mlcopilot.notify.codec import OutboxItem, OutboxStatus, PlannedRow, decode_notification
from mlcopilot.notify.relay import RelayReport
from mlcopilot.notify.sinks.content import headline
from mlcopilot.redact import redact
from mlcopilot.scan import ScanResult
from mlcopilot.wording import count

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.HIGH: "red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
}


def print_scan(result: ScanResult, console: Console, *, previewed: Collection[str] = ()) -> None:
    """Render a scan result as readable tables (``previewed`` sinks only showed, not sent)."""
    for note in result.notes:
        console.print(escape(note))
    if not result.models:
        return  # the note says it all: nothing was walked, reconciled or written
    for report in result.models:
        _print_model(report, console)
    changes = result.changes
    console.print()
    console.print(
        f"Incidents: [bold]{len(changes.opened)}[/] opened, {len(changes.updated)} still open, "
        f"[green]{len(changes.resolved)}[/] resolved."
    )
    console.print(escape(result.summary.sentence()))
    print_writes(result.writes, console, dry_run=result.dry_run)
    print_notifications(result.notifications, console, dry_run=result.dry_run)
    for incident_id, who in sorted(result.acks.acknowledged.items()):
        console.print(f"Acknowledged {incident_id} ({escape(who)}).")
    for warning in result.acks.warnings:
        console.print(f"[yellow]warning:[/] {escape(redact(warning))}")
    if result.relay is not None:
        print_relay(result.relay, console, previewed=previewed)


def _print_model(report: ModelReport, console: Console) -> None:
    lineage = report.lineage
    console.print()
    console.print(f"[bold]{escape(short_name(report.urn))}[/]  [dim]{escape(report.urn)}[/]")
    coverage = f"  walked {count(len(lineage.nodes), 'node')}"
    if lineage.truncated:
        coverage += " [bold yellow](truncated: a hop or node cap was reached)[/]"
    if report.unknown:
        coverage += f", {count(len(report.unknown), 'entity')} lacked metadata a check needed"
    if report.gaps:
        coverage += f", [yellow]{count(len(report.gaps), 'coverage gap')}[/]"
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
    elif report.gaps:
        console.print("  [yellow]no findings, but coverage is incomplete: see the gaps below[/]")
    else:
        console.print("  [green]no findings[/]")
    for gap in report.gaps:
        console.print(f"  [yellow]gap:[/] {escape(short_name(gap.entity))}: {escape(gap.reason)}")
    for urn, reasons in sorted(report.unknown.items()):
        console.print(f"  [dim]unknown: {escape(short_name(urn))}: {escape('; '.join(reasons))}[/]")


def print_notifications(rows: Sequence[PlannedRow], console: Console, *, dry_run: bool) -> None:
    """Say which GitHub/Slack notifications the scan committed (or would commit)."""
    notify = [r for r in rows if r.sink != "datahub"]
    if not notify:
        return
    verb = "would send" if dry_run else "queued"
    console.print(f"Notifications {verb}:")
    for row in notify:
        text = headline(decode_notification(row.payload))
        console.print(f"  - {row.sink} {row.action}: {escape(text)}")


def print_relay(report: RelayReport, console: Console, *, previewed: Collection[str] = ()) -> None:
    """Say what the relay delivered, what it will retry (and when), and what is dead."""
    for label, sinks_shown in (("Delivered", False), ("Previewed, not sent", True)):
        items = [
            i
            for i in report.delivered
            if i.sink != "datahub" and (i.sink in previewed) == sinks_shown
        ]
        counts: dict[str, int] = {}
        for item in items:
            counts[f"{item.sink} {item.action}"] = counts.get(f"{item.sink} {item.action}", 0) + 1
        if counts:
            done = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
            console.print(f"{label}: {done}.")
    duplicates = {warning for _item, warning in report.possible_duplicates}
    for warning in report.warnings:
        if warning not in duplicates:
            console.print(f"[yellow]warning:[/] {escape(redact(warning))}")
    for item, warning in report.possible_duplicates:
        console.print(
            f"[bold yellow]possible duplicate[/] (outbox row {item.id}, {item.sink} "
            f"{item.action}): {escape(redact(warning))}"
        )
    for item, error in report.retrying:
        when = report.next_attempts.get(item.id)
        later = f"next attempt at {_time(when)}" if when is not None else "it will be retried"
        console.print(
            f"[yellow]not delivered yet[/] (outbox row {item.id}, {item.sink} {item.action}): "
            f"{escape(redact(error))} — {later}"
        )
    if report.stopped is not None:
        console.print(f"[yellow]stopped:[/] {escape(report.stopped)}")
    for item, error in report.dead:
        console.print(
            f"[bold red]dead[/] (outbox row {item.id}, {item.sink} {item.action}): "
            f"{escape(redact(error))} — fix the cause, then `mlcopilot outbox retry {item.id}`"
        )


def print_outbox(items: Sequence[OutboxItem], console: Console) -> None:
    """Render outbox rows as a table: when each goes out next, and why it has not yet."""
    table = Table(header_style="bold", box=None, padding=(0, 1))
    columns = ("id", "sink", "action", "status", "attempts", "group", "next attempt", "why")
    for column in columns:
        table.add_column(column, overflow="fold")
    for item in items:
        status = item.status.value + (" ⚠" if item.warning or item.uncertain else "")
        table.add_row(
            str(item.id),
            item.sink,
            f"{item.action} {item.seq}" if item.action in ("update", "reminder") else item.action,
            status,
            str(item.attempts),
            f"{item.group_key}/{item.group_generation}",
            _next_attempt(item),
            escape(redact(_why(item))),
        )
    console.print(table)


def _next_attempt(item: OutboxItem) -> str:
    if item.status is OutboxStatus.PENDING:
        return _time(max(item.not_before, item.next_attempt_at))
    if item.status is OutboxStatus.SENDING and item.lease_expires_at is not None:
        return _time(item.lease_expires_at)  # if its relay died, the row is claimed then
    if item.status is OutboxStatus.DEAD:
        return "after `outbox retry`"
    return ""


def _why(item: OutboxItem) -> str:
    # A rate-limited row's error starts "rate limited until …" (the relay writes it so).
    if item.status is OutboxStatus.SENDING and item.lease_expires_at is not None:
        owner = item.lease_owner or "another process"
        return (
            f"being sent by {owner} (lease until {_time(item.lease_expires_at)}; if that "
            "process died, the row goes out then)"
        )
    return item.last_error or item.warning or ""


def _time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_writes(writes: Sequence[Write], console: Console, *, dry_run: bool) -> None:
    """Say what the write-back wrote (or, in a dry run, would write) to the catalog."""
    verb = "would write" if dry_run else "wrote"
    if not writes:
        console.print(f"Write-back: catalog already up to date ({verb} nothing).")
        return
    console.print(f"Write-back {verb} {count(len(writes), 'change')} to the catalog:")
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
