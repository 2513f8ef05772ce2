"""``mlcopilot outbox list|retry|deliver``: what waits to reach DataHub, GitHub and Slack.

Outbox rows are named by their whole id: ids are small integers, so there is no prefix to
take (unlike incidents' 16-character ids).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import (
    AnnouncedWaits,
    CatalogOption,
    FormatOption,
    LimitOption,
    ListFormat,
    OutputOption,
    StateOption,
    command_settings,
    err,
    opened,
    out,
    outbox_app,
    rendered,
    write_output,
)
from mlcopilot.clock import OffsetClock
from mlcopilot.errors import UsageError
from mlcopilot.text.wording import count

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mlcopilot.notify.relay import Relay, RelayReport
    from mlcopilot.protocols import StateStore

_EVERY_ROW = 1_000_000_000
"""A limit no outbox reaches: when a command must see every row of some states."""


class OutboxFilter(StrEnum):
    """Which rows ``outbox list`` shows."""

    waiting = "waiting"
    pending = "pending"
    sending = "sending"
    done = "done"
    dead = "dead"
    cancelled = "cancelled"
    all = "all"


StateFilterOption = Annotated[
    OutboxFilter | None,
    typer.Option(
        "--state",
        help="Which rows: waiting = pending, sending and dead (the default); all = every row.",
        show_default=False,
    ),
]
# `--status` was this option's name; the incidents' filter is `--state`, so is this one now.
StatusAlias = Annotated[OutboxFilter | None, typer.Option("--status", hidden=True)]


@outbox_app.command("list")
def outbox_list(
    state: StateFilterOption = None,
    limit: LimitOption = 100,
    output_format: FormatOption = ListFormat.table,
    output: OutputOption = None,
    state_url: StateOption = None,
    status: StatusAlias = None,
) -> None:
    """List outbox rows: what is waiting to reach DataHub, GitHub and Slack, and what died."""
    from mlcopilot.cli.render.terminal import print_outbox
    from mlcopilot.incidents.payload import OutboxStatus
    from mlcopilot.report.json import render_outbox_json
    from mlcopilot.scan.wiring import open_state

    if state is not None and status is not None and state is not status:
        raise UsageError(f"--state {state.value} and --status {status.value}: give one")
    wanted = state or status or OutboxFilter.waiting
    store = open_state(command_settings(state_url=state_url))
    try:
        statuses: list[OutboxStatus] | None
        if wanted is OutboxFilter.all:
            statuses = None
        elif wanted is OutboxFilter.waiting:
            statuses = [OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.DEAD]
        else:
            statuses = [OutboxStatus(wanted.value)]
        items = store.outbox(statuses=statuses, limit=limit)
    finally:
        store.close()
    if output_format is ListFormat.json:
        write_output(output, render_outbox_json(items))
        return
    if not items:
        out.print("The outbox is empty." if wanted is OutboxFilter.all else _none(wanted))
        return
    if output is None:
        print_outbox(items, out)
    else:
        write_output(output, rendered(lambda console: print_outbox(items, console)))


def _none(wanted: OutboxFilter) -> str:
    return f"No {wanted.value} outbox rows."


@outbox_app.command("retry")
def outbox_retry(
    ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="ID", help="Dead rows to retry (default: every dead row)."),
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
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.scan.delivery import relay as build_relay

    config = command_settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with opened(config) as (cat, store):
        now = datetime.now(UTC)
        if retry:
            if retry_ids is not None:
                _check_dead(store, retry_ids)  # before anything changes
            retried = store.retry_outbox(retry_ids, now=now)
            out.print(f"{count(retried, 'dead row')} made pending again.")
        relay, datahub = build_relay(settings, cat, store, AnnouncedWaits(OffsetClock(now), err))
        report = relay.run()
        # With write-back off, DataHub's rows wait by choice (a shadow run), not by mistake.
        ignored = set() if settings.write_back else {"datahub"}
        stranded = _stranded(store, relay, ignored)
    _print_delivery(report, len(datahub.applied), stranded)
    if not report.ok or stranded:
        raise typer.Exit(5)


def _check_dead(store: StateStore, ids: Sequence[int]) -> None:
    """Refuse ids that are not dead rows, saying what each is instead (exit 2)."""
    from mlcopilot.incidents.payload import OutboxStatus

    dead = {i.id for i in store.outbox(statuses=[OutboxStatus.DEAD], limit=_EVERY_ROW)}
    others = [i for i in dict.fromkeys(ids) if i not in dead]
    if not others:
        return
    known = {i.id: i for i in store.outbox(statuses=None, limit=_EVERY_ROW)}
    problems = []
    for row in others:
        item = known.get(row)
        if item is None:
            problems.append(f"outbox row {row} does not exist")
        else:
            problems.append(f"outbox row {row} is {item.status.value}, not dead")
    raise UsageError(
        "; ".join(problems) + " — only dead rows are retried (`mlcopilot outbox list --state dead`)"
    )


def _stranded(store: StateStore, relay: Relay, ignored: set[str]) -> dict[str, int]:
    """Pending rows for sinks this relay does not deliver to: they would wait forever here."""
    from mlcopilot.incidents.payload import OutboxStatus

    waiting = store.outbox(statuses=[OutboxStatus.PENDING], limit=_EVERY_ROW)
    stranded: dict[str, int] = {}
    for item in waiting:
        if item.sink not in relay.sinks and item.sink not in ignored:
            stranded[item.sink] = stranded.get(item.sink, 0) + 1
    return stranded


def _print_delivery(report: RelayReport, applied: int, stranded: dict[str, int]) -> None:
    from mlcopilot.cli.render.terminal import print_relay

    if not report.delivered and report.ok and not stranded and not report.elsewhere:
        out.print("Nothing was due.")
    elif applied:
        out.print(f"Write-back: {count(applied, 'change')} to the catalog.")
    print_relay(report, out)
    if stranded:
        rows = ", ".join(f"{sink} {n}" for sink, n in sorted(stranded.items()))
        out.print(
            f"[yellow]not delivered[/]: {count(sum(stranded.values()), 'pending row')} for sinks "
            f"this run does not deliver to ({rows}); configure them (see `mlcopilot config "
            "show`) and run `mlcopilot outbox deliver` again"
        )
