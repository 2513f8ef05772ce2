"""The JSON scan report as typed models: the one description of its shape.

:mod:`mlcopilot.report.json` fills :class:`Report` from a scan, and everything else follows
from these classes:

- the report itself: ``model_dump(mode="json")`` (version 3), or with :data:`OLDER_VERSIONS`'
  keys left out (``scan --json-version 1`` or ``2``);
- its JSON Schema: :func:`report_json_schema`, shipped as ``mlcopilot/schemas/report-v3.json``
  (regenerate it with ``python -m mlcopilot.report.models > src/mlcopilot/schemas/report-v3.json``;
  a test keeps the two equal);
- the MCP tools' answers (``mlcopilot.agent.results``) subclass :class:`FindingFacts`,
  :class:`Gap` and :class:`GateFailure`, so a finding means the same there.

Each class's docstring and each field's description are what the schema says to its readers.
The models are built from the scan's own values and validated as they are built: a report
that would break its schema fails where it is made, not where it is read.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, SkipJsonSchema
from pydantic.main import IncEx
from pydantic_core import CoreSchema

from mlcopilot.incidents.gate import GateRule
from mlcopilot.lineage.coverage import READINESS_SETTINGS
from mlcopilot.model import ChangeKind, Severity

Urn = Annotated[str, Field(pattern=r"^urn:li:")]
IncidentId = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
Count = Annotated[int, Field(ge=0)]
Text = Annotated[str, Field(min_length=1)]


class Shape(BaseModel):
    """The base of every part of the report: no key but the ones declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Gap(Shape):
    """Where the model's lineage stops before it reaches a dataset: nothing beyond was checked."""

    entity: Urn
    reason: Text


class UnknownReason(Shape):
    """Why one entity of `unknown` was not checked by one check."""

    entity: Urn
    check: Text
    reason: Text


class Profiles(Shape):
    """What DataHub profiles of the columns feeding the model: what profile drift can compare.

    Each list names the upstream datasets that lack a setting of their ingestion recipe.
    """

    columns: Count = Field(
        description="Columns of its upstream datasets that feed the model, or that lineage "
        "cannot rule out."
    )
    profiled: Count = Field(description="Of those, the ones the newest profile has a profile of.")
    quantiles: Count = Field(description="Of those, the ones profiled with quantiles.")
    datasets: Count = Field(description="Upstream datasets in the catalog.")
    unprofiled: list[Urn] = Field(
        description=f"Datasets never profiled ({READINESS_SETTINGS['unprofiled']})."
    )
    table_level: list[Urn] = Field(
        description=f"Datasets profiled for row counts only ({READINESS_SETTINGS['table_level']})."
    )
    no_quantiles: list[Urn] = Field(
        description="Datasets with numeric columns feeding the model profiled without quantiles "
        f"({READINESS_SETTINGS['no_quantiles']})."
    )


def _no_default(schema: dict[str, Any]) -> None:
    """An optional key that is left out, never written as its default (null)."""
    schema.pop("default", None)


class Coverage(Shape):
    """How much of the model's upstream the scan walked and could check."""

    nodes: int = Field(ge=1, description="Nodes walked, the model included.")
    truncated: bool = Field(description="A hop or node cap stopped the walk.")
    unknown: list[Urn] = Field(
        description="Entities that lacked metadata some check needed (as in version 1)."
    )
    gaps: list[Gap] = Field(description="Entities where lineage stops before reaching a dataset.")
    unknown_reasons: list[UnknownReason] = Field(
        description="Why each of `unknown` was not checked: one entry per check that could not "
        "decide there."
    )
    profiles: Profiles | SkipJsonSchema[None] = Field(
        default=None,
        description="What DataHub profiles of the data feeding the model. Optional: left out "
        "when the profile_drift check did not run (never null).",
        json_schema_extra=_no_default,
    )

    @model_serializer(mode="wrap")
    def _leave_out_profiles_not_worked_out(self, dump: SerializerFunctionWrapHandler) -> Any:
        shown = dump(self)
        if self.profiles is None:
            shown.pop("profiles", None)
        return shown


class FindingFacts(Shape):
    """One risk found at one entity on the model's upstream path: what every view of it says."""

    id: IncidentId = Field(
        description="Stable across scans (a hash of model, check, entity and field): the id of "
        "the incident that tracks the finding."
    )
    check: Text = Field(description="The check that found it, e.g. schema_drift.")
    severity: Severity
    entity: Urn = Field(description="Urn of the upstream entity where the risk sits.")
    field: str | None = Field(description="The column, when the risk is about one.")
    change: ChangeKind | None = Field(
        description="For schema drift: added, removed, renamed or type_changed."
    )
    previous_field: str | None = Field(description="For a rename: the column's old name.")
    message: Text = Field(description="What was found, in one or two sentences.")
    path: list[Urn] = Field(
        min_length=2,
        description="Lineage path from the model to the entity, both included (urns).",
    )
    evidence: dict[str, Any] = Field(
        description="The facts behind `message`, by name; each check documents its own "
        "(schema_drift: confidence of a rename, baseline and current types; stale_source: "
        "last_updated, sla_hours, overdue_since; deprecated_source: decommission_time, "
        "days_left, replacement; pii_exposure: tags, terms)."
    )


class IncidentRef(Shape):
    """The incident the finding is tracked as (its id is the finding's id)."""

    id: IncidentId
    generation: int = Field(ge=1, description="Occurrences: 2 and up when it came back.")
    state: Literal["open", "acknowledged"]
    new: bool = Field(description="This scan opened it (a new incident or a recurrence).")
    targets: list[str] = Field(
        default_factory=list,
        description="Where its notifications go: its group's targets, a sink's name or "
        "name:destination (slack:C0PAYMENTS, github:acme/payments-ml, pagerduty); empty "
        "when none is configured, or with --dry-run when this scan plans no row for it.",
    )


class Finding(FindingFacts):
    """A finding of the JSON report: its facts and its incident."""

    incident: IncidentRef


class ModelScan(Shape):
    """One model: how far the scan could see, and what it found."""

    urn: Urn
    coverage: Coverage
    findings: list[Finding]


class IncidentIds(Shape):
    """Incident ids this scan opened (new or recurring), updated (still open) and resolved."""

    opened: list[IncidentId]
    updated: list[IncidentId]
    resolved: list[IncidentId]


class IncidentCounts(Shape):
    """How many incidents this scan opened, updated and resolved."""

    opened: Count
    updated: Count
    resolved: Count


class SeverityCounts(Shape):
    """Findings per severity, every severity present."""

    critical: Count
    high: Count
    medium: Count
    low: Count


class Delivery(Shape):
    """What the relay did after the scan was stored: rows delivered, to retry, given up."""

    delivered: Count
    retrying: Count
    dead: Count


class GateFailure(Shape):
    """One reason the gate failed."""

    rule: GateRule
    model: Urn | None = Field(description="The model (null: a rule about the whole scan).")
    message: Text
    incidents: list[IncidentId] = Field(description="For rule severity: the incident ids.")


class Gate(Shape):
    """The CI gate's verdict. It failed when `reasons` is not empty; the scan then exits 1."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"passed": {"const": True}}},
            "then": {"properties": {"reasons": {"maxItems": 0}}},
            "else": {"properties": {"reasons": {"minItems": 1}}},
        }
    )

    passed: bool
    fail_on: Severity | None
    fail_on_gaps: bool
    fail_on_acknowledged: bool
    fail_on_new: bool
    reasons: list[GateFailure]


class Summary(Shape):
    """The closing summary: totals, delivery, time taken and the gate's verdict."""

    models: Count
    findings: Count
    unknown: Count = Field(
        description="Entities, counted once per model, that lacked metadata a check needed."
    )
    gaps: Count
    models_with_gaps: Count
    models_truncated: Count
    findings_by_severity: SeverityCounts
    findings_by_check: dict[str, Annotated[int, Field(ge=1)]] = Field(
        description="Findings per check; checks with none are left out."
    )
    incidents: IncidentCounts
    delivery: Delivery | None = Field(
        description="What the relay did; null when it did not run (--dry-run, --no-deliver, "
        "nothing to scan)."
    )
    duration_seconds: Annotated[float, Field(ge=0)] | None = Field(
        description="How long the scan took; null only from a library caller that did not "
        "measure it."
    )
    gate: Gate | None = Field(description="Null without --fail-on or --fail-on-gaps.")


class Report(Shape):
    """What `mlcopilot scan --format json` writes (version 3, the default).

    Versions add keys, never change one: a reader of version 2 that ignores unknown keys reads
    version 3. Keys that are not required may be added within a version.
    """

    model_config = ConfigDict(title="mlcopilot scan report, version 3")

    version: Literal[3]
    now: str = Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$",
        description="The scan's clock (--now, or the time it ran), ISO 8601 to the second, with "
        "its UTC offset.",
        json_schema_extra={"format": "date-time"},
    )
    catalog: str = Field(description="The catalog scanned (credentials masked).")
    dry_run: bool = Field(
        description="True for --dry-run: nothing was stored, written back or sent; the "
        "incidents are what a real scan would open, update and resolve."
    )
    models: list[ModelScan]
    incidents: IncidentIds
    summary: Summary
    notes: list[str] = Field(
        description="What to know about the scan as a whole, e.g. that the catalog holds no ML "
        "model."
    )


_V3_SUMMARY = {
    "models_truncated",
    "findings_by_severity",
    "findings_by_check",
    "incidents",
    "delivery",
    "duration_seconds",
    "gate",
}
OLDER_VERSIONS: dict[int, IncEx] = {
    2: {
        "dry_run": True,
        "models": {
            "__all__": {
                "coverage": {"unknown_reasons", "profiles"},
                "findings": {"__all__": {"evidence", "incident"}},
            }
        },
        "summary": _V3_SUMMARY,
    },
    1: {
        "dry_run": True,
        "models": {
            "__all__": {
                "coverage": {"gaps", "unknown_reasons", "profiles"},
                "findings": {"__all__": {"evidence", "incident"}},
            }
        },
        "summary": True,
        "notes": True,
    },
}
"""What :class:`Report` leaves out to be each version before 3 (``model_dump``'s ``exclude``).

Version 1: ``now``, ``catalog``, ``models`` (coverage and findings), ``incidents``; version 2
added ``coverage.gaps``, ``summary`` (its first five totals) and ``notes``."""


class _ReportSchema(GenerateJsonSchema):
    """Draft 2020-12, named in ``$schema``; a property has its description, not a title."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        generated = super().generate(schema, mode)
        return {"$schema": self.schema_dialect, **generated}

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`Report`: what ships as report-v3.json."""
    # Validation mode (the default): a report validates exactly when it reads back into the
    # models. Serialization mode would describe Coverage's serializer, which returns Any.
    return Report.model_json_schema(schema_generator=_ReportSchema)


def report_json_schema_text() -> str:
    """:func:`report_json_schema` as the shipped file holds it."""
    return json.dumps(report_json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """``python -m mlcopilot.report.models > src/mlcopilot/schemas/report-v3.json``."""
    print(report_json_schema_text(), end="")


if __name__ == "__main__":
    main()
