"""``mlcopilot outbox list|retry|deliver``: what waits to reach DataHub, GitHub and Slack."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import (
    CatalogOption,
    ListFormat,
    StateOption,
    command_settings,
    opened,
    out,
    outbox_app,
)
from mlcopilot.clock import OffsetClock
from mlcopilot.wording import count

if TYPE_CHECKING:
    from mlcopilot.notify.relay import RelayReport


class OutboxFilter(StrEnum):
    """Which rows ``outbox list`` shows."""

    waiting = "waiting"
    pending = "pending"
    sending = "sending"
    done = "done"
    dead = "dead"
    cancelled = "cancelled"
    all = "all"


@outbox_app.command("list")
def outbox_list(
    status: Annotated[
        OutboxFilter, typer.Option(help="Which rows: waiting = pending, sending and dead.")
    ] = OutboxFilter.waiting,
    limit: Annotated[int, typer.Option(help="At most this many rows, newest first.")] = 100,
    output_format: Annotated[ListFormat, typer.Option("--format")] = ListFormat.table,
    state_url: StateOption = None,
) -> None:
    """List outbox rows: what is waiting to reach DataHub, GitHub and Slack, and what died."""
    from mlcopilot.cli.render.report import render_outbox_json
    from mlcopilot.cli.render.terminal import print_outbox
    from mlcopilot.notify.codec import OutboxStatus
    from mlcopilot.wiring import open_state

    store = open_state(command_settings(state_url=state_url))
    try:
        statuses: list[OutboxStatus] | None
        if status is OutboxFilter.all:
            statuses = None
        elif status is OutboxFilter.waiting:
            statuses = [OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.DEAD]
        else:
            statuses = [OutboxStatus(status.value)]
        items = store.outbox(statuses=statuses, limit=limit)
    finally:
        store.close()
    if output_format is ListFormat.json:
        sys.stdout.write(render_outbox_json(items))
        return
    if not items:
        out.print(f"No {status.value} outbox rows.")
        return
    print_outbox(items, out)


@outbox_app.command("retry")
def outbox_retry(
    ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="[ID]...", help="Dead rows to retry (default: all)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Make dead rows pending again and deliver everything that is due."""
    _deliver(catalog, state_url, retry_ids=ids or None, retry=True)


@outbox_app.command("deliver")
def outbox_deliver(catalog: CatalogOption = None, state_url: StateOption = None) -> None:
    """Deliver every due outbox row (for a relay run apart from scans)."""
    _deliver(catalog, state_url, retry_ids=None, retry=False)


def _deliver(
    catalog: str | None, state_url: str | None, *, retry_ids: list[int] | None, retry: bool
) -> None:
    from mlcopilot.notify.delivery import relay as build_relay
    from mlcopilot.notify.sinks.config import NotifySettings

    config = command_settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with opened(config) as (cat, store):
        now = datetime.now(UTC)
        if retry:
            retried = store.retry_outbox(retry_ids, now=now)
            out.print(f"{count(retried, 'dead row')} made pending again.")
        relay, datahub = build_relay(settings, cat, store, OffsetClock(now))
        report = relay.run()
    _print_delivery(report, len(datahub.applied))
    if not report.ok:
        raise typer.Exit(5)


def _print_delivery(report: RelayReport, applied: int) -> None:
    from mlcopilot.cli.render.terminal import print_relay

    if not report.delivered and report.ok:
        out.print("Nothing was due.")
    elif applied:
        out.print(f"Write-back: {count(applied, 'change')} to the catalog.")
    print_relay(report, out)
