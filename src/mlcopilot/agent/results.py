"""What the MCP tools answer, as pydantic models.

FastMCP publishes each model's JSON Schema as its tool's ``outputSchema`` and returns the
answer as ``structuredContent`` (and as its JSON text, for older clients).

Where an answer says what the JSON scan report says, it is made of the report's own models
(:mod:`mlcopilot.report.models`, which also give the report and its shipped schema), so the
two cannot drift: a finding is the report's :class:`~mlcopilot.report.models.FindingFacts`
(its ``id`` named ``incident_id`` here) with what the check says about it, a coverage gap is
the report's :class:`~mlcopilot.report.models.Gap`, and a reason the verdict is not safe is
the report's :class:`~mlcopilot.report.models.GateFailure` without its model (an answer is
about one model). Severities and incident states are the product's own enums.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from mlcopilot.model import IncidentState, Severity
from mlcopilot.report.models import FindingFacts, Gap, GateFailure, IncidentId, Urn

FindingState = Literal["new", "open", "acknowledged"]


class FindingOut(FindingFacts):
    """One risk on the model's upstream path."""

    # The JSON text FastMCP sends beside the structured answer uses the names too.
    model_config = ConfigDict(serialize_by_alias=True)

    id: IncidentId = Field(
        alias="incident_id", description="The incident id (explain_incident takes it)."
    )
    title: str = Field(description="What people call the risk, e.g. Schema drift.")
    why: str = Field(description="Why the risk matters to the model.")
    action: str = Field(description="What to do about it.")
    incident_state: FindingState = Field(
        description="new: no incident tracks it yet (a write scan would open one); else the "
        "state of the incident that does."
    )


class GapOut(Gap):
    """Where the model's lineage stops before reaching a dataset: nothing beyond was checked."""


class UnknownOut(BaseModel):
    """An upstream entity that lacked metadata some check needed (not checked by it)."""

    entity: Urn
    reasons: list[str] = Field(description="Per check that could not decide: check: why.")


class ReasonOut(GateFailure):
    """One reason the verdict is not safe."""

    model: SkipJsonSchema[Urn | None] = Field(default=None, exclude=True)
    """Not part of the answer: it is about one model."""


class VerdictOut(BaseModel):
    """The CI gate's verdict on this model (`mlcopilot scan --fail-on SEVERITY`)."""

    safe: bool = Field(
        description="True when no finding is at or above fail_on and the model was fully "
        "checked (no truncated walk, no coverage gap, some upstream metadata)."
    )
    fail_on: Severity
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
    state: IncidentState
    check: str
    severity: Severity
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
    state: IncidentState
    check: str
    title: str
    severity: Severity
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
    state: IncidentState
    acknowledged_by: str | None
    acknowledged_at: str | None
    already: bool = Field(description="It was acknowledged before this call (left as it was).")


class ModelImpactOut(BaseModel):
    """One model downstream of the changed dataset."""

    model: str = Field(description="The model's urn.")
    affected: bool = Field(description="The change would open at least one incident for it.")
    severity: Severity | None = Field(
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
    worst: Severity | None = Field(
        description="The worst severity over every downstream model (None: nothing affected)."
    )
    affected_models: list[str] = Field(description="Urns of the models the change would break.")
    models: list[ModelImpactOut] = Field(
        description="Every model downstream: affected ones first, worst first."
    )
    notes: list[str]
