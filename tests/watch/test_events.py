"""Which events matter and which entity each changed, with DataHub Actions' own event classes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")

from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    EntityChangeEventClass,
    GenericAspectClass,
    MetadataChangeLogClass,
    RelationshipChangeEventClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    EntityChangeEvent,
    MetadataChangeLogEvent,
    RelationshipChangeEvent,
)

from mlcopilot.lineage.downstream import DownstreamIndex
from mlcopilot.watch import pipeline
from mlcopilot.watch.affected import affected_models
from mlcopilot.watch.events import (
    CHANGE_LOG_ASPECTS,
    ENTITY_CHANGE_CATEGORIES,
    PoisonEvent,
    changed_entities,
)

DS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
JOB = "urn:li:dataJob:(urn:li:dataFlow:(airflow,etl,PROD),load)"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
STAMP = AuditStampClass(time=1, actor="urn:li:corpuser:alice")


def ece(
    urn: str,
    category: str,
    operation: str = "MODIFY",
    *,
    parameters: dict[str, object] | None = None,
    stamp: AuditStampClass = STAMP,
    modifier: str | None = None,
) -> EventEnvelope:
    params = parameters
    event = EntityChangeEvent.from_class(
        EntityChangeEventClass(
            entityType="dataset",
            entityUrn=urn,
            category=category,
            operation=operation,
            auditStamp=stamp,
            version=0,
            modifier=modifier,
        )
    )
    envelope = EventEnvelope("EntityChangeEvent_v1", event, {})
    if params is not None:  # as the Kafka source reads them: through JSON
        raw = json.loads(envelope.as_json())
        raw["event"]["parameters"] = params
        envelope = EventEnvelope.from_json(json.dumps(raw))
    return envelope


def mcl(urn: str, aspect: str, value: object, previous: object = None) -> EventEnvelope:
    def generic(v: object) -> GenericAspectClass | None:
        if v is None:
            return None
        return GenericAspectClass(value=json.dumps(v).encode(), contentType="application/json")

    event = MetadataChangeLogEvent.from_class(
        MetadataChangeLogClass(
            entityType=urn.split(":")[2],
            entityUrn=urn,
            changeType=ChangeTypeClass.UPSERT,
            aspectName=aspect,
            aspect=generic(value),
            previousAspectValue=generic(previous),
            created=STAMP,
        )
    )
    return EventEnvelope("MetadataChangeLogEvent_v1", event, {})


def test_the_pipeline_filter_passes_exactly_the_categories_that_matter() -> None:
    assert set(pipeline.ENTITY_CHANGE_CATEGORIES) == ENTITY_CHANGE_CATEGORIES


@pytest.mark.parametrize("category", sorted(ENTITY_CHANGE_CATEGORIES - {"RUN"}))
def test_each_category_names_the_dataset(category: str) -> None:
    assert changed_entities(ece(DS, category)).entities == (DS,)


def test_field_level_events_name_their_dataset() -> None:
    field = f"urn:li:schemaField:({DS},a%2Cb)"
    assert changed_entities(ece(field, "TAG", "ADD", modifier="urn:li:tag:pii")).entities == (DS,)


def test_categories_no_check_reads_are_ignored() -> None:
    assert changed_entities(ece(DS, "OWNERSHIP")).entities == ()
    assert changed_entities(ece(DS, "DOCUMENTATION")).entities == ()


def test_an_assertion_run_names_the_assertee() -> None:
    run = ece("urn:li:assertion:abc", "RUN", "COMPLETED", parameters={"asserteeUrn": DS})
    assert changed_entities(run).entities == (DS,)
    started = ece("urn:li:assertion:abc", "RUN", "STARTED", parameters={"asserteeUrn": DS})
    assert changed_entities(started).entities == ()


def test_own_write_back_is_ignored_but_peoples_properties_are_not() -> None:
    own = [
        ece(DS, "TAG", "ADD", modifier="urn:li:tag:mlcopilot-pii-exposure"),
        ece(DS, "TAG", "ADD", parameters={"tagUrn": "urn:li:tag:mlcopilot-schema-drift"}),
        ece(
            MODEL,
            "STRUCTURED_PROPERTY",
            modifier="urn:li:structuredProperty:io.mlcopilot.openRisks",
        ),
        ece(
            DS, "TECHNICAL_SCHEMA", stamp=AuditStampClass(time=1, actor="urn:li:corpuser:mlcopilot")
        ),
        mcl("urn:li:incident:mlcopilot-123", "incidentInfo", {"entities": [DS]}),
    ]
    assert [changed_entities(e).entities for e in own] == [()] * len(own)
    justification = "urn:li:structuredProperty:io.mlcopilot.piiJustification"
    assert changed_entities(ece(MODEL, "STRUCTURED_PROPERTY", modifier=justification)).entities
    bot = AuditStampClass(time=1, actor="urn:li:corpuser:svc-bot")
    assert (
        changed_entities(
            ece(DS, "TAG", stamp=bot), ignore_actors=["urn:li:corpuser:svc-bot"]
        ).entities
        == ()
    )


def test_change_logs_for_what_makes_no_entity_change_event() -> None:
    assert changed_entities(mcl(DS, "upstreamLineage", {"upstreams": []})).entities == (DS,)
    assert changed_entities(mcl(DS, "operation", {"timestampMillis": 1})).entities == (DS,)
    others = mcl("urn:li:incident:pagerduty-1", "incidentInfo", {"entities": [DS, JOB]})
    assert changed_entities(others).entities == (DS, JOB)
    # A job's outputs, now and before, are downstream of it: each lost or gained an upstream.
    gone = "urn:li:dataset:(urn:li:dataPlatform:hive,old,PROD)"
    io = mcl(JOB, "dataJobInputOutput", {"outputDatasets": [DS]}, {"outputDatasets": [gone]})
    assert changed_entities(io).entities == (JOB, DS, gone)
    assert changed_entities(mcl(DS, "ownership", {"owners": []})).entities == ()
    assert "mlModelTrainingData" in CHANGE_LOG_ASPECTS


def test_a_relationship_change_names_both_ends() -> None:
    event = RelationshipChangeEvent.from_class(
        RelationshipChangeEventClass(
            sourceUrn=MODEL,
            destinationUrn=DS,
            operation="ADD",
            relationshipType="TrainedOn",
            auditStamp=STAMP,
        )
    )
    envelope = EventEnvelope("RelationshipChangeEvent_v1", event, {})
    assert changed_entities(envelope).entities == (MODEL, DS)


def test_unreadable_events_are_poison() -> None:
    with pytest.raises(PoisonEvent):
        changed_entities(ece("not-an-urn", "TECHNICAL_SCHEMA"))
    bad = mcl(JOB, "dataJobInputOutput", None)
    bad.event.aspect = GenericAspectClass(value=b"{not json", contentType="application/json")
    with pytest.raises(PoisonEvent):
        changed_entities(bad)


def test_affected_models_are_those_whose_walk_reached_the_entity() -> None:
    from mlcopilot.model import Lineage

    index = DownstreamIndex()
    index.update([Lineage(root=MODEL, nodes={DS: None, JOB: None}, edges=(), paths={})])  # type: ignore[dict-item]
    assert affected_models([DS], index) == [MODEL]
    assert affected_models(["urn:li:dataset:(urn:li:dataPlatform:hive,x,PROD)"], index) == []
    new_model = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,brand_new,PROD)"
    assert affected_models([new_model], index) == [new_model]
    only = DownstreamIndex([new_model])
    only.update([Lineage(root=MODEL, nodes={DS: None}, edges=(), paths={})])  # type: ignore[dict-item]
    assert affected_models([DS], only) == []
