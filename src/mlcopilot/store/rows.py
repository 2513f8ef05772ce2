"""Stored rows back to domain types, and the times they hold, shared by the store's modules."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Column, ColumnElement, Text, type_coerce
from sqlalchemy.engine import Dialect

from mlcopilot.model import Incident, IncidentState, Severity
from mlcopilot.store import schema as t

_STATES = {state.value: state for state in IncidentState}
_SEVERITIES = {severity.value: severity for severity in Severity}


def incident_state(value: str) -> IncidentState:
    """The state a stored value names, looked up (an enum's call is a microsecond a row)."""
    return _STATES.get(value) or IncidentState(value)


def incident_from_mapping(m: Mapping[str, Any], strings: dict[str, str] | None = None) -> Incident:
    """The incident an ``incidents`` row holds.

    ``strings``: strings already read (a scan reads tens of thousands of incidents, whose models,
    entities, paths, checks and columns repeat): each one read is the one string kept there.
    States and severities are looked up by value (an enum's call is a microsecond of each of
    a second scan's hundreds of thousands of incidents); an unknown one still raises as it
    did.
    """
    model, entity, path = m["model"], m["entity"], m["path"]
    check, field, change, previous = m["check_name"], m["field"], m["change"], m["previous_field"]
    if strings is not None:
        share = strings.setdefault
        model, entity = share(model, model), share(entity, entity)
        path = [share(urn, urn) for urn in path]
        # A check's name and a column's repeat across the models sharing an entity too.
        check = share(check, check)
        field = field if field is None else share(field, field)
        change = change if change is None else share(change, change)
        previous = previous if previous is None else share(previous, previous)
    state, severity, evidence = m["state"], m["severity"], m["evidence"]
    return Incident(
        id=m["id"],
        generation=m["generation"],
        state=incident_state(state),
        check=check,
        severity=_SEVERITIES.get(severity) or Severity(severity),
        model=model,
        entity=entity,
        field=field,
        change=change,
        previous_field=previous,
        message=m["message"],
        path=tuple(path),
        evidence=dict(evidence) if evidence else evidence,
        opened_at=m["opened_at"],
        updated_at=m["updated_at"],
        resolved_at=m["resolved_at"],
        acknowledged_at=m["acknowledged_at"],
        acknowledged_by=m["acknowledged_by"],
        resolution=m["resolution"],
        seen_at=m["seen_at"],
    )


def require_aware(name: str, value: datetime) -> None:
    """Refuse a naive ``value`` for ``name``: the store keeps instants, never wall-clock times."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name}={value.isoformat()} is naive; the store needs aware datetimes")


def raw_time(column: Column[Any]) -> ColumnElement[Any]:
    """``column`` (a time) as the driver gives it, for :class:`Times` to convert."""
    return type_coerce(column, Text).label(column.name)


class Times:
    """Stored instants as aware UTC datetimes, each distinct stored value converted once.

    Rows repeat a few instants (a scan stamps everything it writes with its clock): a
    second scan of an estate reads back 282,022 incidents with four times each, and
    converting each value was a sixth of reading them (cProfile of 28,253: 0.39 of 2.2 s).
    """

    def __init__(self, dialect: Dialect) -> None:
        self._known: dict[Any, datetime | None] = {None: None}
        convert = t.UTCDateTime().dialect_impl(dialect)
        self._convert = convert.result_processor(dialect, None)

    def __call__(self, raw: Any) -> datetime | None:
        """The instant ``raw`` (a stored value as the driver gives it) stands for."""
        if raw not in self._known:
            self._known[raw] = self._convert(raw) if self._convert else raw
        return self._known[raw]
