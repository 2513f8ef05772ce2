"""Which DataHub change events matter to a scan, and which entity each one changed.

Pure: an :class:`~datahub_actions.event.event_envelope.EventEnvelope` in, the urns whose
metadata changed out (empty: the event cannot change a finding, or it is mlcopilot's own
write-back coming back). The watcher never applies an event as a delta: field-level and
dataset-level events travel on different partitions and arrive in any order, so an event only
says *which models to rescan*, and the rescan reads the catalog as it is then.

Three event types arrive (``datahub_actions.event.event_registry``):

- ``EntityChangeEvent_v1`` (platform events): the categories in :data:`ENTITY_CHANGE_CATEGORIES`;
  field-level ones name the schemaField, whose dataset is what changed. An assertion's
  ``RUN``/``COMPLETED`` names the assertion; its ``asserteeUrn`` parameter is what changed.
- ``MetadataChangeLogEvent_v1``: the aspects DataHub makes no entity change event for
  (:data:`CHANGE_LOG_ASPECTS`): lineage edges, the ML properties, operations, incidents,
  assertion runs.
- ``RelationshipChangeEvent_v1`` (DataHub 1.5 and later): both ends of the edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from datahub.metadata.urns import SchemaFieldUrn, Urn
from datahub.utilities.urns.error import InvalidUrnError
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    ENTITY_CHANGE_EVENT_V1_TYPE,
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    RELATIONSHIP_CHANGE_EVENT_V1_TYPE,
    EntityChangeEvent,
    MetadataChangeLogEvent,
    RelationshipChangeEvent,
)

from mlcopilot.catalog.aspects import ACTOR, EDGE_ASPECTS, REVERSE_EDGE_ASPECTS
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY

ENTITY_CHANGE_CATEGORIES: Final = frozenset(
    {
        "TECHNICAL_SCHEMA",
        "TAG",
        "GLOSSARY_TERM",
        "DEPRECATION",
        "LIFECYCLE",
        "STRUCTURED_PROPERTY",
        "RUN",
    }
)
"""Entity change categories a check reads (ownership, documentation, domains... it does not)."""

RUN_OPERATIONS: Final = frozenset({"COMPLETED"})
"""``RUN`` events that matter: an assertion's finished run (DataHub sends only those)."""

_REVERSE_ASPECTS: Final = frozenset(REVERSE_EDGE_ASPECTS)
CHANGE_LOG_ASPECTS: Final = frozenset(
    {
        *EDGE_ASPECTS,
        *_REVERSE_ASPECTS,
        "mlModelGroupProperties",
        "dataProcessInstanceProperties",
        # what the freshness check reads about updates
        "operation",
        "datasetProperties",
        "incidentInfo",
        "assertionRunEvent",
        "assertionInfo",
    }
)
"""Aspects whose change log matters: none of them makes an entity change event (or, for
``datasetProperties``, only a documentation one), and each feeds a walk or a check."""

OWN_TAG_PREFIX: Final = "urn:li:tag:mlcopilot-"
"""mlcopilot's own tags (``urn:li:tag:mlcopilot-schema-drift``...)."""
OWN_INCIDENT_PREFIX: Final = "urn:li:incident:mlcopilot-"
OWN_PROPERTIES: Final = frozenset({OPEN_RISKS_PROPERTY})
"""Structured properties mlcopilot writes. The ``io.mlcopilot.*`` properties people set
(``piiJustification``, ``freshnessSlaHours``) are inputs to the checks and do trigger a rescan."""

_ASSERTION = "urn:li:assertion:"


class PoisonEvent(ValueError):
    """An event that can never be processed: an urn that does not parse, unreadable JSON.

    Logged to the failed-events file and skipped, never retried forever.
    """


@dataclass(frozen=True, slots=True)
class Change:
    """What one event means for the watcher."""

    entities: tuple[str, ...]
    """The urns whose metadata changed (datasets for field-level events); empty: nothing to do."""
    reason: str
    """A short description for the rescan request, e.g. ``TECHNICAL_SCHEMA REMOVE``."""


NOTHING: Final = Change((), "")


def changed_entities(envelope: EventEnvelope, *, ignore_actors: Iterable[str] = ()) -> Change:
    """The entities ``envelope`` changed, or :data:`NOTHING`.

    Args:
        envelope: The event as the pipeline hands it to the action.
        ignore_actors: Actor urns whose changes are mlcopilot's own (besides its audit actor).

    Raises:
        PoisonEvent: the event names an urn that does not parse, or carries aspect JSON
            that cannot be read.
    """
    own = frozenset({ACTOR, *ignore_actors})
    event = envelope.event
    if envelope.event_type == ENTITY_CHANGE_EVENT_V1_TYPE and isinstance(event, EntityChangeEvent):
        return _entity_change(event, own)
    if envelope.event_type == METADATA_CHANGE_LOG_EVENT_V1_TYPE and isinstance(
        event, MetadataChangeLogEvent
    ):
        return _change_log(event, own)
    if envelope.event_type == RELATIONSHIP_CHANGE_EVENT_V1_TYPE and isinstance(
        event, RelationshipChangeEvent
    ):
        if _actor(event.auditStamp) in own:
            return NOTHING
        ends = (_entity(event.sourceUrn), _entity(event.destinationUrn))
        return Change(_unique(ends), f"relationship {event.relationshipType} {event.operation}")
    return NOTHING


def _entity_change(event: EntityChangeEvent, own: frozenset[str]) -> Change:
    category, operation = event.category, event.operation
    if category not in ENTITY_CHANGE_CATEGORIES:
        return NOTHING
    if category == "RUN" and operation not in RUN_OPERATIONS:
        return NOTHING
    if _actor(event.auditStamp) in own:
        return NOTHING
    params: Mapping[str, Any] = event.safe_parameters
    modifier = event.modifier or ""
    if category == "TAG" and OWN_TAG_PREFIX in (modifier[: len(OWN_TAG_PREFIX)], _tag(params)):
        return NOTHING
    if category == "STRUCTURED_PROPERTY" and (
        modifier in OWN_PROPERTIES or params.get("propertyUrn") in OWN_PROPERTIES
    ):
        return NOTHING
    reason = f"{category} {operation}"
    if event.entityUrn.startswith(_ASSERTION):
        assertee = params.get("asserteeUrn")
        if not isinstance(assertee, str) or not assertee:
            return NOTHING  # a run we cannot place: the next full rescan reads it
        return Change((_entity(assertee),), reason)
    return Change((_entity(event.entityUrn),), reason)


def _tag(params: Mapping[str, Any]) -> str:
    tag = params.get("tagUrn")
    return tag[: len(OWN_TAG_PREFIX)] if isinstance(tag, str) else ""


def _change_log(event: MetadataChangeLogEvent, own: frozenset[str]) -> Change:
    aspect = event.aspectName
    urn = event.entityUrn
    if aspect not in CHANGE_LOG_ASPECTS or not urn:
        return NOTHING
    if _actor(event.created) in own:
        return NOTHING
    reason = f"{aspect} {event.changeType}"
    if aspect == "incidentInfo":
        if urn.startswith(OWN_INCIDENT_PREFIX):
            return NOTHING
        entities = _listed(event, "entities", None)
        return Change(_unique(_entity(u) for u in entities), reason)
    if aspect in ("assertionRunEvent", "assertionInfo"):
        value = _aspect_json(event.aspect)
        assertee = value.get("asserteeUrn") or _assertion_entity(value)
        if not isinstance(assertee, str) or not assertee:
            return NOTHING
        return Change((_entity(assertee),), reason)
    entities = [urn]
    if aspect in _REVERSE_ASPECTS:
        # The holder is the upstream end: the urns it lists (now or before) gained or lost it.
        for field, key in _REVERSE_FIELDS.get(aspect, ()):
            entities.extend(_listed(event, field, key))
    return Change(_unique(_entity(u) for u in entities), reason)


_REVERSE_FIELDS: Final[Mapping[str, Sequence[tuple[str, str | None]]]] = {
    "mlFeatureTableProperties": (("mlFeatures", None),),
    "dataJobInputOutput": (("outputDatasets", None), ("outputDatasetEdges", "destinationUrn")),
    "dataProcessInstanceOutput": (("outputs", None), ("outputEdges", "destinationUrn")),
}


def _assertion_entity(value: Mapping[str, Any]) -> object:
    for kind in (
        "datasetAssertion",
        "freshnessAssertion",
        "volumeAssertion",
        "sqlAssertion",
        "fieldAssertion",
        "schemaAssertion",
        "customAssertion",
    ):
        part = value.get(kind)
        if isinstance(part, Mapping):
            found = part.get("dataset") or part.get("entity") or part.get("entityUrn")
            if found:
                return found
    return value.get("entityUrn")


def _listed(event: MetadataChangeLogEvent, field: str, key: str | None) -> list[str]:
    """The urns ``field`` lists in the new and the previous aspect value."""
    found: list[str] = []
    for aspect in (event.aspect, event.previousAspectValue):
        items = _aspect_json(aspect).get(field) or []
        if not isinstance(items, list):
            raise PoisonEvent(f"{event.aspectName}.{field} is not a list")
        for item in items:
            value = item.get(key) if key is not None and isinstance(item, Mapping) else item
            if isinstance(value, str):
                found.append(value)
    return found


def _aspect_json(aspect: Any) -> Mapping[str, Any]:
    if aspect is None:
        return {}
    raw = aspect.value
    try:
        value = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        raise PoisonEvent(f"aspect JSON cannot be read ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise PoisonEvent("aspect JSON is not an object")
    return value


def _actor(stamp: Any) -> str | None:
    actor = getattr(stamp, "actor", None)
    return actor if isinstance(actor, str) else None


def _entity(urn: str) -> str:
    """``urn`` checked, with a schemaField replaced by its dataset (or other parent)."""
    try:
        if urn.startswith("urn:li:schemaField:"):
            return str(SchemaFieldUrn.from_string(urn).parent)
        Urn.from_string(urn)
    except (InvalidUrnError, ValueError) as exc:
        raise PoisonEvent(f"not an urn: {urn[:200]!r} ({exc})") from None
    return urn


def _unique(urns: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(urns))
