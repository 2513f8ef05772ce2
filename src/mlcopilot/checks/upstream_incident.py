"""Upstream incident: an active DataHub incident someone else raised on an upstream entity."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar
from urllib.parse import quote

from pydantic import Field

from mlcopilot.config import PluginConfig
from mlcopilot.model import JSON, CheckInfo, CheckOutcome, IncidentSignal, Node, Severity
from mlcopilot.protocols import CheckContext

OWN_INCIDENTS = "urn:li:incident:mlcopilot-"
"""What the urn of every incident mlcopilot writes starts with."""

_BY_PRIORITY = {0: Severity.CRITICAL, 1: Severity.HIGH, 2: Severity.MEDIUM, 3: Severity.LOW}
_PRIORITY_NAMES = {0: "CRITICAL", 1: "HIGH", 2: "MEDIUM", 3: "LOW"}
_UI_PATHS = {
    # DataHub's UI routes by entity type (the Incidents tab is under each).
    "dataset": "dataset",
    "dataJob": "tasks",
    "dataFlow": "pipelines",
    "mlModel": "mlModels",
    "mlModelGroup": "mlModelGroup",
    "mlFeature": "features",
    "mlFeatureTable": "featureTables",
    "mlPrimaryKey": "mlPrimaryKeys",
}


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


class UpstreamIncidentConfig(PluginConfig):
    """Settings of the ``upstream_incident`` check."""

    unprioritized: Severity = Severity.MEDIUM
    """The severity of an incident raised without a priority."""
    ignore_prefixes: tuple[str, ...] = Field(default=())
    """Incident urns starting with any of these are not reported (another tool's own)."""


class UpstreamIncident:
    """Someone has raised an incident in DataHub on something upstream of the model.

    What it flags: an ACTIVE DataHub incident (`incidentInfo`, raised in DataHub's UI, by its
    API, or by a failing assertion) that names an upstream entity of the model: a dataset,
    a job, a feature. The model inherits the risk; the finding links the incident, its
    title, type and priority, and resolves when they resolve the incident in DataHub.
    mlcopilot's own incidents (urns `urn:li:incident:mlcopilot-…`) are never reported, and
    neither are those under `ignore_prefixes`.

    - Severity follows the incident's priority: P0 (critical) critical, P1 high, P2 medium,
      P3 low; an incident raised without a priority is medium (`unprioritized`).
    - Several active incidents on one entity make one finding, at the most urgent of their
      priorities, listing them all.

    Which entities: datasets and data jobs, on every backend. DataHub's GraphQL has no
    `incidents` on ML features, feature tables or models, so no backend reads them there
    (all three say the same) and this check is silent on those.

    Why it matters: an incident on a raw table is how its owners say "do not trust this
    now"; the teams whose models train or predict on it downstream rarely watch that
    table's page.

    How to fix: follow the incident in DataHub; hold retraining (or flag predictions) until
    its owners resolve it, and tell them your model depends on the data.
    """

    name: ClassVar[str] = "upstream_incident"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="upstream_incident",
        title="Upstream incident",
        tag="urn:li:tag:mlcopilot-upstream-incident",
        tag_description="An active DataHub incident on this entity reaches an ML model.",
        incident_type="CUSTOM",
        custom_incident_type="UPSTREAM_INCIDENT",
        why=(
            "Its owners have an active incident open on a source of these models: the data "
            "may be wrong or missing until they resolve it."
        ),
        action=(
            "Follow the incident in DataHub, hold retraining until it is resolved, and tell "
            "its owners which models depend on the data."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = UpstreamIncidentConfig

    def __init__(self, config: UpstreamIncidentConfig) -> None:
        self.config = config

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """One finding per entity with active incidents others raised."""
        if not node.incidents:
            return _NOTHING  # none, or not readable here: nothing DataHub says
        skipped = (OWN_INCIDENTS, *self.config.ignore_prefixes)
        theirs = [
            i for i in node.incidents if i.state == "ACTIVE" and not i.urn.startswith(skipped)
        ]
        if not theirs:
            return _NOTHING
        ranked = sorted(theirs, key=lambda i: (-self._severity(i).rank, i.urn))
        severity = self._severity(ranked[0])
        message = _message(ranked)
        evidence = _evidence(node, ranked)
        finding = ctx.finding(self.name, severity, node, None, message, evidence=evidence)
        return CheckOutcome(findings=(finding,))

    def _severity(self, incident: IncidentSignal) -> Severity:
        if incident.priority is None:
            return self.config.unprioritized
        # Out-of-range numbers are read as the nearest DataHub defines.
        return _BY_PRIORITY[min(max(incident.priority, 0), 3)]


def _message(incidents: Sequence[IncidentSignal]) -> str:
    if len(incidents) == 1:
        return f"active DataHub incident {_describe(incidents[0])}"
    listed = "; ".join(_describe(i) for i in incidents)
    return f"{len(incidents)} active DataHub incidents: {listed}"


def _describe(incident: IncidentSignal) -> str:
    """``"Orders late" (OPERATIONAL, P1, raised 2026-11-27 09:00 UTC)``."""
    title = " ".join((incident.title or incident.urn).split())
    details = [incident.custom_type or incident.type]
    if incident.priority is not None:
        details.append(f"P{incident.priority}")
    when = incident.started_at or incident.created_at
    if when is not None:
        details.append(f"since {_format_time(when)}")
    if incident.source_type == "ASSERTION_FAILURE":
        details.append("raised by a failing assertion")
    return f'"{title}" ({", ".join(details)})'


def _evidence(node: Node, incidents: Sequence[IncidentSignal]) -> dict[str, JSON]:
    """The most urgent incident's facts at the top, every one under ``incidents``."""
    every = [_facts(node, i) for i in incidents]
    return {**every[0], "incidents": every}


def _facts(node: Node, incident: IncidentSignal) -> dict[str, JSON]:
    return {
        "incident": incident.urn,
        "title": incident.title or None,
        "description": incident.description or None,
        "type": incident.type,
        "custom_type": incident.custom_type,
        "priority": incident.priority,
        "priority_name": _PRIORITY_NAMES.get(incident.priority)
        if incident.priority is not None
        else None,
        "stage": incident.stage,
        "source_type": incident.source_type,
        "source": incident.source_urn,
        "started_at": _iso(incident.started_at),
        "created_at": _iso(incident.created_at),
        "link": _link(node.urn),
    }


def _link(urn: str) -> str | None:
    """The entity's Incidents tab, as a path under the DataHub UI's URL."""
    kind = urn.split(":", 3)[2] if urn.count(":") >= 3 else ""
    path = _UI_PATHS.get(kind)
    return None if path is None else f"/{path}/{quote(urn, safe='')}/Incidents"


def _iso(when: datetime | None) -> str | None:
    return None if when is None else _as_utc(when).isoformat()


def _as_utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive time is taken to be UTC already."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _format_time(when: datetime) -> str:
    """``2026-11-27 09:00 UTC``."""
    return _as_utc(when).strftime("%Y-%m-%d %H:%M UTC")
