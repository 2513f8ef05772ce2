"""Stored rows back to domain types, shared by the store's modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlcopilot.model import Incident, IncidentState, Severity


def incident_from_mapping(m: Mapping[str, Any], urns: dict[str, str] | None = None) -> Incident:
    """The incident an ``incidents`` row holds.

    ``urns``: strings already read (a scan reads tens of thousands of incidents, whose models,
    entities and paths repeat): each urn read is the one string kept there.
    """
    share = (lambda urn: urn) if urns is None else (lambda urn: urns.setdefault(urn, urn))
    return Incident(
        id=m["id"],
        generation=m["generation"],
        state=IncidentState(m["state"]),
        check=m["check_name"],
        severity=Severity(m["severity"]),
        model=share(m["model"]),
        entity=share(m["entity"]),
        field=m["field"],
        change=m["change"],
        previous_field=m["previous_field"],
        message=m["message"],
        path=tuple(share(urn) for urn in m["path"]),
        evidence=dict(m["evidence"]),
        opened_at=m["opened_at"],
        updated_at=m["updated_at"],
        resolved_at=m["resolved_at"],
        acknowledged_at=m["acknowledged_at"],
        acknowledged_by=m["acknowledged_by"],
        resolution=m["resolution"],
    )
