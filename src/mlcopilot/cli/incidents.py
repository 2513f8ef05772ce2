"""``mlcopilot incidents list|ack|resolve``: the incidents people triage.

An incident is named by its id or any unique start of it of :data:`MIN_PREFIX` characters or
more, as ``git`` takes a short commit hash: the first half of an id copied from a narrow
terminal is enough, and an ambiguous start lists the incidents it could mean.
"""

from __future__ import annotations

import getpass
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import (
    AnnouncedWaits,
    CatalogOption,
    FormatOption,
    ListFormat,
    OutputOption,
    StateOption,
    command_settings,
    err,
    incidents_app,
    opened,
    out,
    rendered,
    write_output,
)
from mlcopilot.clock import OffsetClock
from mlcopilot.errors import UsageError

if TYPE_CHECKING:
    from mlcopilot.model import Incident
    from mlcopilot.protocols import StateStore

MIN_PREFIX = 6
"""The shortest start of an id that ``ack`` and ``resolve`` take for the whole id (the same as
:data:`mlcopilot.incidents.ids.MIN_PREFIX`, kept here so ``--help`` imports nothing)."""


class StateFilter(StrEnum):
    """Which incidents ``incidents list`` shows."""

    active = "active"
    """Open or acknowledged: everything not resolved (the default)."""
    open = "open"
    acknowledged = "acknowledged"
    resolved = "resolved"
    all = "all"


IdsArgument = Annotated[
    list[str],
    typer.Argument(
        metavar="ID",
        help=f"Incident ids, or unique starts of them ({MIN_PREFIX} characters or more).",
        show_default=False,
    ),
]


@incidents_app.command("list")
def incidents_list(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            metavar="URN|NAME",
            help="Only this model's incidents: its urn or its name (repeatable).",
            show_default=False,
        ),
    ] = None,
    state: Annotated[
        StateFilter,
        typer.Option(help="Which: active = open and acknowledged; all includes resolved."),
    ] = StateFilter.active,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="At most N incidents, newest first.", show_default=False
        ),
    ] = None,
    output_format: FormatOption = ListFormat.table,
    output: OutputOption = None,
    state_url: StateOption = None,
) -> None:
    """List incidents (the active ones, open or acknowledged, by default), newest first."""
    from mlcopilot.cli.render.terminal import print_incidents, safe
    from mlcopilot.report.json import render_incidents_json
    from mlcopilot.scan.wiring import open_state
    from mlcopilot.text.names import short_name

    store = open_state(command_settings(state_url=state_url))
    try:
        wanted_resolved = state in (StateFilter.resolved, StateFilter.all)
        incidents = store.incidents(include_resolved=wanted_resolved)
        models = set(model or ())
        incidents = [
            i
            for i in incidents
            if _state_matches(i, state)
            and (not models or i.model in models or short_name(i.model) in models)
        ]
        if limit is not None:
            incidents = incidents[:limit]
        targets = store.incident_targets([i.id for i in incidents])
    finally:
        store.close()
    if output_format is ListFormat.json:
        write_output(output, render_incidents_json(incidents, targets))
        return
    if not incidents:
        which = "active (open or acknowledged)" if state is StateFilter.active else state.value
        if state is StateFilter.all:
            which = "recorded"
        of = f" for {safe(', '.join(sorted(models)))}" if models else ""
        out.print(f"No {which} incidents{of}.")
        return
    if output is None:
        print_incidents(incidents, out, targets)
    else:
        write_output(output, rendered(lambda console: print_incidents(incidents, console, targets)))


def _state_matches(incident: Incident, wanted: StateFilter) -> bool:
    from mlcopilot.model import IncidentState

    if wanted is StateFilter.all:
        return True
    if wanted is StateFilter.active:
        return incident.is_open
    return incident.state is IncidentState(wanted.value)


def resolve_id(store: StateStore, given: str) -> str:
    """The id of the one incident ``given`` names: the id itself or a unique start of it.

    Raises:
        UsageError: No incident has this id or start, the start is shorter than
            :data:`MIN_PREFIX`, or several ids start so (they are listed).
    """
    from mlcopilot.incidents.ids import look_up
    from mlcopilot.text.names import short_name

    lookup = look_up(store, given)
    if lookup.found is not None:
        return lookup.found.id
    if lookup.too_short:
        raise UsageError(
            f"no incident {given}; give its id or at least {MIN_PREFIX} of its first "
            "characters — see `mlcopilot incidents list`"
        )
    matches = lookup.matches
    if not matches:
        raise UsageError(f"no incident {given} — see `mlcopilot incidents list`")
    candidates = [
        f"{i.id}  {i.state.value}  {i.check} at {short_name(i.entity)} ({short_name(i.model)})"
        for i in matches
    ]
    raise UsageError(
        f"{given} starts {len(matches)} incident ids; give more of the one you mean:\n"
        + "\n".join(candidates)
    )


@incidents_app.command("ack")
def incidents_ack(
    incident_ids: IdsArgument,
    by: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Who acknowledges (default: $USER).", show_default=False),
    ] = None,
    state_url: StateOption = None,
) -> None:
    """Acknowledge incidents: someone is on them (no more updates or reminders, only the fix)."""
    from mlcopilot.cli.render.terminal import safe
    from mlcopilot.model import IncidentState
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.scan.delivery import hand_change_request
    from mlcopilot.scan.wiring import open_state
    from mlcopilot.text.names import short_name

    config = command_settings(state_url=state_url)
    settings = NotifySettings.from_settings(config)
    who = by or getpass.getuser()
    store = open_state(config)
    try:
        ids = [resolve_id(store, given) for given in incident_ids]  # all named before any ack
        for incident_id in dict.fromkeys(ids):
            now = datetime.now(UTC)
            current = store.get(incident_id)
            assert current is not None  # resolve_id found it
            where = f"{current.check} at {short_name(current.entity)}"
            if current.state is IncidentState.ACKNOWLEDGED:
                first = current.acknowledged_by or "someone"
                when = _when(current.acknowledged_at)
                same = " (you)" if first == who else f"; not changed to {who}"
                out.print(
                    f"{incident_id} ({safe(where)}) was already acknowledged by "
                    f"{safe(first)}{when}{safe(same)}."
                )
                continue
            request = hand_change_request(settings, store, current.model, resolving=None, at=now)
            request = replace(request, writeback=())
            incident = store.acknowledge(incident_id, by=who, at=now, notify=request)
            out.print(f"Acknowledged {incident.id} ({safe(where)}) as {safe(who)}.")
    finally:
        store.close()


def _when(at: datetime | None) -> str:
    return f" at {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if at is not None else ""


@incidents_app.command("resolve")
def incidents_resolve(
    incident_ids: IdsArgument,
    reason: Annotated[str, typer.Option(metavar="TEXT", help="Why it is resolved.")] = (
        "resolved by hand"
    ),
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Resolve incidents by hand and update the catalog (reopens if the risk is still there)."""
    from mlcopilot.cli.render.terminal import print_relay, print_writes, safe
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.scan.delivery import hand_change_request
    from mlcopilot.scan.delivery import relay as build_relay
    from mlcopilot.text.names import short_name

    config = command_settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with opened(config) as (cat, store):
        ids = [resolve_id(store, given) for given in incident_ids]
        now = datetime.now(UTC)
        for incident_id in dict.fromkeys(ids):
            current = store.get(incident_id)
            assert current is not None  # resolve_id found it
            request = hand_change_request(
                settings, store, current.model, resolving=(incident_id, reason), at=now
            )
            incident = store.resolve(incident_id, at=now, reason=reason, notify=request)
            where = f"{incident.check} at {short_name(incident.entity)}"
            out.print(f"Resolved {incident.id} ({safe(where)}).")
        clock = AnnouncedWaits(OffsetClock(now), err)
        relay, datahub = build_relay(settings, cat, store, clock)
        report = relay.run()
    # "Already up to date" only when the write-back went out and changed nothing; a row that
    # did not go out is said once, by the relay's lines ("not delivered yet", "dead").
    held = [item for item, _ in (*report.retrying, *report.dead) if item.sink == "datahub"]
    if not settings.write_back:
        out.print("Write-back: off (shadow run); nothing written to the catalog.")
    elif datahub.applied or not (held or "datahub" in report.skipped_sinks):
        print_writes(datahub.applied, out, dry_run=False)
    print_relay(report, out)
    if not report.ok:
        raise typer.Exit(5)
