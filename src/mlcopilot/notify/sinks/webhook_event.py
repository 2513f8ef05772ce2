"""The signed webhook's event, version 1, as typed models: the one description of its shape.

:class:`~mlcopilot.notify.sinks.webhook.WebhookSink` builds one :class:`WebhookEvent` per outbox
row (one transition of a notification group: one root cause at an upstream entity, with its
member incidents) and POSTs ``model_dump_json()``. The JSON Schema is :func:`event_json_schema`,
shipped as ``mlcopilot/schemas/webhook-event-v1.json`` (regenerate it with
``python -m mlcopilot.notify.sinks.webhook_event > src/mlcopilot/schemas/webhook-event-v1.json``;
a test keeps the two equal, and validates every event the sink sends against the shipped file).

Each class's docstring and each field's description are what the schema tells a receiver.
Every key is always present (``null`` when it has no value), so a receiver never has to tell
a missing key from an empty one. A key may be added to version 1 only as an optional one; a
changed or removed key is version 2.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

from mlcopilot.model import ChangeKind, Severity
from mlcopilot.model.findings import IncidentState

VERSION: Literal[1] = 1

EventType = Literal[
    "incident.opened",
    "incident.updated",
    "incident.reminder",
    "incident.acknowledged",
    "incident.resolved",
]
"""What happened to the group, one type per notification action."""

Urn = Annotated[str, Field(pattern=r"^urn:li:")]
IncidentId = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
Time = Annotated[
    str,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$",
        json_schema_extra={"format": "date-time"},
    ),
]
"""ISO 8601 in UTC with its offset (``2026-03-02T09:00:00+00:00``)."""
Link = Annotated[str, Field(pattern=r"^https?://", json_schema_extra={"format": "uri"})]
Text = Annotated[str, Field(min_length=1)]


class Shape(BaseModel):
    """The base of every part of the event: no key but the ones declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Group(Shape):
    """The notification group: one root cause (a check's finding) at one upstream entity.

    Its incidents are the models and fields it affects. A group that resolves and recurs starts
    a new `generation`; `key` stays the same.
    """

    key: str = Field(
        pattern=r"^[0-9a-f]{16}$",
        description="Stable id of the group (a hash of its check and entity).",
    )
    generation: int = Field(ge=1, description="Counts recurrences of the group after resolution.")
    check: Text = Field(description="The check whose finding is the root cause, e.g. pii_exposure.")
    check_title: Text = Field(description="What a person calls that risk, e.g. PII exposure.")
    entity: Urn = Field(description="Urn of the upstream entity where the root cause sits.")
    state: IncidentState = Field(description="The group's state after this transition.")
    opened_at: Time = Field(description="When this generation of the group opened.")
    resolved_at: Time | None = Field(description="When it resolved; null while it is not.")
    acknowledged_by: str | None = Field(
        description="Who acknowledged it (in DataHub or the issue tracker); null when nobody has."
    )
    worst_severity: Severity = Field(
        description="The most severe open incident's severity (of all of them once none is open)."
    )


class IncidentLinks(Shape):
    """Pages about one incident; null where no DataHub UI URL is configured."""

    model: Link | None = Field(description="The affected model's page in DataHub.")
    entity: Link | None = Field(description="The upstream entity's page in DataHub.")


class Incident(Shape):
    """One affected (model, entity, field): a member incident of the group, as it stood."""

    id: IncidentId = Field(
        description="Stable across scans (a hash of model, check, entity and field): the id "
        "of the incident in mlcopilot's store, DataHub and its JSON report."
    )
    generation: int = Field(ge=1, description="Counts recurrences after resolution.")
    check: Text = Field(description="The check that found it.")
    severity: Severity
    model: Urn = Field(description="Urn of the affected ML model.")
    entity: Urn = Field(description="Urn of the upstream entity where the risk sits.")
    field: str | None = Field(description="The column, when the risk is about one.")
    change: ChangeKind | None = Field(
        description="For schema drift: added, removed, renamed or type_changed."
    )
    previous_field: str | None = Field(description="For a rename: the column's old name.")
    message: str = Field(description="What was found, in one or two sentences.")
    path: list[Urn] = Field(
        description="Lineage path from the model to the entity, both included (urns)."
    )
    open: bool = Field(description="False once the incident cleared (it stays listed).")
    links: IncidentLinks


class Links(Shape):
    """Pages about the group as a whole."""

    entity: Link | None = Field(
        description="The root cause's entity in DataHub; null without a DataHub UI URL."
    )
    reports: dict[Urn, Link] = Field(
        description="Model urn → the published HTML report of the scan that planned this "
        "event (report.url); empty when none is configured."
    )


class WebhookEvent(Shape):
    """One transition of a notification group, POSTed as JSON and signed.

    Headers: `Idempotency-Key` (equal to `id`), `X-Mlcopilot-Timestamp` (unix seconds of
    the attempt) and `X-Mlcopilot-Signature: sha256=<hex>`, the HMAC-SHA256 of
    `<timestamp>.<raw body>` with the shared secret. A retry sends the very same body with a
    fresh timestamp and signature: keep the first event of each `id`.
    """

    model_config = ConfigDict(title="mlcopilot webhook event, version 1")

    version: Literal[1]
    id: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="Unique per event and the same on every delivery attempt of it (the "
        "Idempotency-Key header): deduplicate on it.",
    )
    type: EventType = Field(
        description="incident.opened, .updated (incidents joined, cleared or changed), "
        ".reminder (still open and unacknowledged), .acknowledged or .resolved."
    )
    occurred_at: Time = Field(
        description="When mlcopilot decided this notification (not when it was delivered)."
    )
    seq: int = Field(
        ge=0,
        description="The notification's number among the group generation's notifications of "
        "its type (updates 1, 2, …; reminders 1, 2, …; opened, acknowledged and resolved 0).",
    )
    group: Group
    incidents: list[Incident] = Field(
        description="Every member incident of the group, open or cleared, as of this event."
    )
    added: list[IncidentId] = Field(
        description="Incidents that joined the group since its previous notification."
    )
    cleared: list[IncidentId] = Field(
        description="Incidents that cleared since its previous notification."
    )
    changed: list[IncidentId] = Field(
        description="Incidents whose severity, change or previous_field changed since its "
        "previous notification."
    )
    links: Links


class _EventSchema(GenerateJsonSchema):
    """Draft 2020-12, named in ``$schema``; a property has its description, not a title."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        generated = super().generate(schema, mode)
        return {"$schema": self.schema_dialect, **generated}

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`WebhookEvent`: webhook-event-v1.json."""
    return WebhookEvent.model_json_schema(schema_generator=_EventSchema)


def event_json_schema_text() -> str:
    """:func:`event_json_schema` as the shipped file holds it."""
    return json.dumps(event_json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the schema: what ``src/mlcopilot/schemas/webhook-event-v1.json`` holds."""
    print(event_json_schema_text(), end="")


if __name__ == "__main__":
    main()
