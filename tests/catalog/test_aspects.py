"""The pure aspect translation, for the cases no builder produces (real quirks, raw shapes)."""

from __future__ import annotations

from datetime import UTC, datetime

from datahub.metadata import schema_classes as sc

from mlcopilot.catalog.aspects import (
    aspects_for_write,
    column_lineage,
    edges_from_aspects,
    entity_type_of,
    ms_to_datetime,
    node_from_aspects,
    prerequisites,
    structured_properties,
    to_json,
)
from mlcopilot.model import ColumnEdge, Edge, EntityType, IncidentWrite, PropertyWrite, TagWrite
from testing.builders import T0, dataset_urn, schema_field_urn

RAW = dataset_urn("raw.customers")
CLEAN = dataset_urn("clean.customers")


def test_fine_grained_lineage_quirks_are_tolerated() -> None:
    lineage = {
        "upstreams": [],
        "fineGrainedLineages": [
            # bootstrap_mce.json: a duplicated "upstreams" key leaves no downstreams at all
            {"upstreamType": "FIELD_SET", "upstreams": [schema_field_urn(CLEAN, "x")]},
            # dataset-level upstream: no column to name
            {"upstreams": [RAW], "downstreams": [schema_field_urn(CLEAN, "a")]},
            # a downstream of another dataset is not this dataset's lineage
            {
                "upstreams": [schema_field_urn(RAW, "b")],
                "downstreams": [schema_field_urn(dataset_urn("other"), "b")],
            },
            {"upstreams": ["urn:li:schemaField:broken"], "downstreams": None},
            {
                "upstreams": [schema_field_urn(RAW, "[version=2.0].[type=string].email")],
                "downstreams": [schema_field_urn(CLEAN, "email"), schema_field_urn(CLEAN, "e2")],
            },
        ],
    }
    assert column_lineage(CLEAN, lineage) == (
        ColumnEdge(RAW, "email", "email"),
        ColumnEdge(RAW, "email", "e2"),
    )
    assert column_lineage(CLEAN, None) == ()


def test_entity_types() -> None:
    assert entity_type_of(RAW) is EntityType.DATASET
    assert entity_type_of("urn:li:mlModelGroup:(urn:li:dataPlatform:x,g,PROD)") is (
        EntityType.ML_MODEL_GROUP
    )
    assert entity_type_of("urn:li:corpuser:jdoe") is EntityType.OTHER
    assert entity_type_of("dataset") is EntityType.OTHER


def test_placeholder_times_are_unknown() -> None:
    assert ms_to_datetime(0) is None
    assert ms_to_datetime(None) is None
    assert ms_to_datetime(True) is None
    assert ms_to_datetime(1735689600000) == datetime(2025, 1, 1, tzinfo=UTC)


def test_key_aspect_alone_does_not_make_an_entity_exist() -> None:
    node = node_from_aspects(RAW, {"datasetKey": {"platform": "urn:li:dataPlatform:hive"}})
    assert not node.exists
    assert node.name == "raw.customers"


def test_structured_property_values_in_either_form() -> None:
    aspect = {
        "properties": [
            {"propertyUrn": "urn:li:structuredProperty:a", "values": [{"string": "x"}, 1.5]},
            {"propertyUrn": "urn:li:structuredProperty:b", "values": ["y", {"double": 2.0}]},
        ]
    }
    assert structured_properties(aspect) == {"a": ("x", 1.5), "b": ("y", 2.0)}


def test_edge_items_in_edge_form() -> None:
    job = "urn:li:dataJob:(urn:li:dataFlow:(airflow,f,PROD),j)"
    aspects = {
        "dataJobInputOutput": {
            "inputDatasets": [],
            "outputDatasets": [],
            "inputDatasetEdges": [{"destinationUrn": RAW}, {"destinationUrn": RAW}],
            "inputDatajobEdges": [{"destinationUrn": "urn:li:dataJob:other"}],
        }
    }
    assert edges_from_aspects(job, aspects) == [
        Edge(job, RAW, "job_input"),
        Edge(job, "urn:li:dataJob:other", "job_input"),
    ]


def test_tag_write_keeps_other_tags_with_their_attribution() -> None:
    attributed = sc.TagAssociationClass(
        tag="urn:li:tag:Tier1",
        context="propagated",
        attribution=sc.MetadataAttributionClass(time=1, actor="urn:li:corpuser:bot"),
    )
    current = {"globalTags": to_json(sc.GlobalTagsClass(tags=[attributed]))}
    changes = aspects_for_write(TagWrite(RAW, "urn:li:tag:PII", present=True), current)
    assert changes["globalTags"]["tags"] == [
        current["globalTags"]["tags"][0],
        {"tag": "urn:li:tag:PII"},
    ]


def test_writes_are_no_ops_when_nothing_is_there_to_remove() -> None:
    assert aspects_for_write(TagWrite(RAW, "urn:li:tag:PII", present=False), {}) == {}
    assert aspects_for_write(PropertyWrite(RAW, "urn:li:structuredProperty:p", ()), {}) == {}
    assert prerequisites(TagWrite(RAW, "urn:li:tag:PII", present=False)) == {}


def test_incident_rewrite_keeps_assignees_set_in_datahub() -> None:
    write = IncidentWrite(
        urn="urn:li:incident:x",
        incident_type="DATA_SCHEMA",
        custom_type=None,
        title="t",
        description="d",
        priority=2,
        entities=(RAW,),
        active=True,
        created_at=T0,
        status_changed_at=T0,
    )
    first = aspects_for_write(write, {})["incidentInfo"]
    first["assignees"] = [
        {"actor": "urn:li:corpuser:jdoe", "assignedAt": {"time": 1, "actor": "urn:li:corpuser:x"}}
    ]
    assert aspects_for_write(write, {"incidentInfo": first}) == {}
