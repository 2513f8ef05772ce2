"""What the MCP tools answer, as pydantic models.

FastMCP publishes each model's JSON Schema as its tool's ``outputSchema`` and returns the
answer as ``structuredContent`` (and as its JSON text, for older clients).

Field names and meanings follow the JSON scan report (``schemas/report-v3.json``) where the
two overlap: ``check``, ``entity``, ``field``, ``severity``, ``incident_id``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

FindingState = Literal["new", "open", "acknowledged"]


class FindingOut(BaseModel):
    """One risk on the model's upstream path."""

    check: str = Field(description="The check that found it, e.g. schema_drift.")
    title: str = Field(description="What people call the risk, e.g. Schema drift.")
    severity: Literal["critical", "high", "medium", "low"]
    entity: str = Field(description="Urn of the upstream entity where the risk sits.")
    field: str | None = Field(description="The column, when the risk is about one.")
    change: str | None = Field(
        description="For schema drift: added, removed, renamed or type_changed."
    )
    previous_field: str | None = Field(description="For a rename: the column's old name.")
    message: str = Field(description="What was found, in one or two sentences.")
    why: str = Field(description="Why the risk matters to the model.")
    action: str = Field(description="What to do about it.")
    path: list[str] = Field(description="Lineage path from the model to the entity (urns).")
    evidence: dict[str, Any] = Field(description="The facts behind the message, by name.")
    incident_id: str = Field(description="The incident id (explain_incident takes it).")
    incident_state: FindingState = Field(
        description="new: no incident tracks it yet (a write scan would open one); else the "
        "state of the incident that does."
    )


class GapOut(BaseModel):
    """Where the model's lineage stops before reaching a dataset: nothing beyond was checked."""

    entity: str
    reason: str


class UnknownOut(BaseModel):
    """An upstream entity that lacked metadata some check needed (not checked by it)."""

    entity: str
    reasons: list[str]


class ReasonOut(BaseModel):
    """One reason the verdict is not safe."""

    rule: Literal["severity", "truncated", "all_unknown", "coverage_gap", "nothing_scanned"]
    message: str
    incidents: list[str] = Field(description="For rule severity: the incident ids that count.")


class VerdictOut(BaseModel):
    """The CI gate's verdict on this model (`mlcopilot scan --fail-on SEVERITY`)."""

    safe: bool = Field(
        description="True when no finding is at or above fail_on and the model was fully "
        "checked (no truncated walk, no coverage gap, some upstream metadata)."
    )
    fail_on: Literal["critical", "high", "medium", "low"]
    reasons: list[ReasonOut]


class ScanAnswer(BaseModel):
    """The outcome of scan_model."""

    model: str = Field(description="The model's urn.")
    catalog: str = Field(description="The catalog scanned, e.g. lite:PATH or datahub:URL.")
    scanned_at: str = Field(description="The scan's clock, ISO-8601 UTC.")
    dry_run: bool = Field(description="True: nothing was written anywhere.")
    verdict: VerdictOut
    findings: list[FindingOut]
    coverage_gaps: list[GapOut]
    unknowns: list[UnknownOut]
    upstream_entities: int = Field(description="Entities walked upstream of the model.")
    truncated: bool = Field(description="The walk hit a hop or node cap.")
    errors: list[str] = Field(description="Checks that crashed, and where.")
    notes: list[str]
    outbox_rows: int = Field(
        description="Write-back and notification rows committed (a write scan) or that a "
        "write scan would commit (a dry run)."
    )


class IncidentOut(BaseModel):
    """One incident, as `mlcopilot incidents list` shows it."""

    incident_id: str
    state: Literal["open", "acknowledged", "resolved"]
    check: str
    severity: Literal["critical", "high", "medium", "low"]
    model: str
    entity: str
    field: str | None
    message: str
    opened_at: str
    updated_at: str
    acknowledged_by: str | None
    resolved_at: str | None


class IncidentList(BaseModel):
    """The answer of list_incidents, newest first."""

    incidents: list[IncidentOut]
    total: int = Field(description="How many match (more than listed when limit cut them).")


class LinksOut(BaseModel):
    """Where the incident lives outside the state database."""

    resource: str = Field(description="The incident document as an MCP resource.")
    datahub_entity: str | None = Field(
        description="The entity's DataHub page (None: no datahub.ui_url configured)."
    )
    datahub_model: str | None = Field(description="The model's DataHub page.")
    datahub_incident: str = Field(description="Urn of the DataHub incident the write-back makes.")
    datahub_document: str = Field(
        description="Urn of the DataHub document holding the incident's full context."
    )
    written_back: bool = Field(
        description="The outbox delivered a write-back holding this incident to the catalog."
    )
    github_issue: str | None = Field(description="URL of its GitHub issue, once one was opened.")
    slack_thread: str | None = Field(
        description="Its Slack thread (permalink, else channel/ts), once one was posted."
    )


class Explanation(BaseModel):
    """The answer of explain_incident: everything the incident record and the outbox hold."""

    incident_id: str
    generation: int = Field(description="Occurrences: 2 and up when it came back after resolving.")
    state: Literal["open", "acknowledged", "resolved"]
    check: str
    title: str
    severity: Literal["critical", "high", "medium", "low"]
    model: str
    entity: str
    field: str | None
    change: str | None
    previous_field: str | None
    what_changed: str = Field(description="The finding's message.")
    path: list[str] = Field(description="Lineage path from the model to the entity (urns).")
    evidence: dict[str, Any]
    why: str
    suggested_action: str
    opened_at: str
    updated_at: str
    acknowledged_by: str | None
    acknowledged_at: str | None
    resolved_at: str | None
    resolution: str | None
    links: LinksOut


class Acknowledged(BaseModel):
    """The answer of acknowledge_incident."""

    incident_id: str
    state: Literal["open", "acknowledged", "resolved"]
    acknowledged_by: str | None
    acknowledged_at: str | None
    already: bool = Field(description="It was acknowledged before this call (left as it was).")


class ModelImpactOut(BaseModel):
    """One model downstream of the changed dataset."""

    model: str = Field(description="The model's urn.")
    affected: bool = Field(description="The change would open at least one incident for it.")
    severity: Literal["critical", "high", "medium", "low"] | None = Field(
        description="Its worst new finding's severity (None: not affected)."
    )
    features: list[str] = Field(
        description="The features (primary keys, feature tables) the change reaches it through."
    )
    fields: list[str] = Field(description="The columns of the new findings.")
    findings: list[FindingOut] = Field(
        description="What a scan after the change would find that it does not find now."
    )


class ImpactAnswer(BaseModel):
    """The answer of impact_of_change: the preview of a change that has not happened."""

    dataset: str = Field(description="The dataset's urn.")
    catalog: str
    changes: list[str] = Field(description="The change, one line each, e.g. drop email.")
    worst: Literal["critical", "high", "medium", "low"] | None = Field(
        description="The worst severity over every downstream model (None: nothing affected)."
    )
    affected_models: list[str] = Field(description="Urns of the models the change would break.")
    models: list[ModelImpactOut] = Field(
        description="Every model downstream: affected ones first, worst first."
    )
    notes: list[str]
