"""Stored rows back to domain types, shared by the store's modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlcopilot.model import Incident, IncidentState, Severity

_STATES = {state.value: state for state in IncidentState}
_SEVERITIES = {severity.value: severity for severity in Severity}


def incident_from_mapping(m: Mapping[str, Any], urns: dict[str, str] | None = None) -> Incident:
    """The incident an ``incidents`` row holds.

    ``urns``: strings already read (a scan reads tens of thousands of incidents, whose models,
    entities and paths repeat): each urn read is the one string kept there. States and
    severities are looked up by value (an enum's call is a microsecond of each of a second
    scan's hundreds of thousands of incidents); an unknown one still raises as it did.
    """
    model, entity, path = m["model"], m["entity"], m["path"]
    if urns is not None:
        share = urns.setdefault
        model, entity = share(model, model), share(entity, entity)
        path = [share(urn, urn) for urn in path]
    state, severity = m["state"], m["severity"]
    return Incident(
        id=m["id"],
        generation=m["generation"],
        state=_STATES.get(state) or IncidentState(state),
        check=m["check_name"],
        severity=_SEVERITIES.get(severity) or Severity(severity),
        model=model,
        entity=entity,
        field=m["field"],
        change=m["change"],
        previous_field=m["previous_field"],
        message=m["message"],
        path=tuple(path),
        evidence=dict(m["evidence"]),
        opened_at=m["opened_at"],
        updated_at=m["updated_at"],
        resolved_at=m["resolved_at"],
        acknowledged_at=m["acknowledged_at"],
        acknowledged_by=m["acknowledged_by"],
        resolution=m["resolution"],
    )
