"""``mlcopilot incidents list|ack|resolve``: the incidents people triage."""

from __future__ import annotations

import getpass
import sys
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import (
    CatalogOption,
    ListFormat,
    StateOption,
    command_settings,
    incidents_app,
    opened,
    out,
)
from mlcopilot.clock import OffsetClock

if TYPE_CHECKING:
    from mlcopilot.model import Incident


class StateFilter(StrEnum):
    """Which incidents ``incidents list`` shows."""

    open = "open"
    acknowledged = "acknowledged"
    resolved = "resolved"
    all = "all"


@incidents_app.command("list")
def incidents_list(
    model: Annotated[str | None, typer.Option(help="Only this model's incidents.")] = None,
    state: Annotated[StateFilter, typer.Option(help="Which incidents to show.")] = StateFilter.open,
    output_format: Annotated[ListFormat, typer.Option("--format")] = ListFormat.table,
    state_url: StateOption = None,
) -> None:
    """List incidents (open and acknowledged ones by default)."""
    from mlcopilot.cli.render.report import render_incidents_json
    from mlcopilot.cli.render.terminal import print_incidents
    from mlcopilot.wiring import open_state

    store = open_state(command_settings(state_url=state_url))
    try:
        incidents = store.incidents(model=model, include_resolved=state is not StateFilter.open)
    finally:
        store.close()
    incidents = [i for i in incidents if _state_matches(i, state)]
    if output_format is ListFormat.json:
        sys.stdout.write(render_incidents_json(incidents))
        return
    if not incidents:
        out.print(f"No {state.value} incidents.")
        return
    print_incidents(incidents, out)


def _state_matches(incident: Incident, wanted: StateFilter) -> bool:
    from mlcopilot.model import IncidentState

    if wanted is StateFilter.all:
        return True
    if wanted is StateFilter.open:
        return incident.is_open
    return incident.state is IncidentState(wanted.value)


@incidents_app.command("ack")
def incidents_ack(
    incident_id: Annotated[str, typer.Argument(metavar="ID", help="Incident id.")],
    by: Annotated[str | None, typer.Option(help="Who acknowledges (default: $USER).")] = None,
    state_url: StateOption = None,
) -> None:
    """Acknowledge an incident: someone is on it."""
    from mlcopilot.names import short_name
    from mlcopilot.notify.delivery import hand_change_request
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.wiring import open_state

    config = command_settings(state_url=state_url)
    settings = NotifySettings.from_settings(config)
    store = open_state(config)
    try:
        now = datetime.now(UTC)
        current = store.get(incident_id)
        request = None
        if current is not None:
            request = hand_change_request(settings, store, current.model, resolving=None, at=now)
            request = replace(request, writeback=())
        incident = store.acknowledge(
            incident_id, by=by or getpass.getuser(), at=now, notify=request
        )
    finally:
        store.close()
    out.print(f"Acknowledged {incident.id} ({incident.check} at {short_name(incident.entity)}).")


@incidents_app.command("resolve")
def incidents_resolve(
    incident_id: Annotated[str, typer.Argument(metavar="ID", help="Incident id.")],
    reason: Annotated[str, typer.Option(help="Why it is resolved.")] = "resolved by hand",
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Resolve an incident by hand and update the catalog (reopens if the risk is still there)."""
    from mlcopilot.cli.render.terminal import print_relay, print_writes
    from mlcopilot.names import short_name
    from mlcopilot.notify.delivery import hand_change_request
    from mlcopilot.notify.delivery import relay as build_relay
    from mlcopilot.notify.sinks.config import NotifySettings

    config = command_settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with opened(config) as (cat, store):
        now = datetime.now(UTC)
        current = store.get(incident_id)
        request = None
        if current is not None:
            request = hand_change_request(
                settings, store, current.model, resolving=(incident_id, reason), at=now
            )
        incident = store.resolve(incident_id, at=now, reason=reason, notify=request)
        relay, datahub = build_relay(settings, cat, store, OffsetClock(now))
        report = relay.run()
    out.print(f"Resolved {incident.id} ({incident.check} at {short_name(incident.entity)}).")
    print_writes(datahub.applied, out, dry_run=False)
    print_relay(report, out)
    if not report.ok:
        raise typer.Exit(5)
