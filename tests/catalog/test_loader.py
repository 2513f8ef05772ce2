"""Loading DataHub metadata files: DataHub's own samples load; bad input is refused whole."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.loader import LoadSummary, load_metadata_files
from mlcopilot.errors import InputError
from mlcopilot.model import ColumnEdge, Edge
from mlcopilot.protocols import WalkLimits
from tests.builders import (
    T0,
    dataset,
    dataset_urn,
    ml_feature,
    ml_model,
    model_urn,
    tag_urn,
    write_metadata_file,
)

SAMPLES = Path(__file__).parents[2] / ".." / "shared" / "datahub-samples"
ML_SHOWCASE = SAMPLES / "ml_showcase.json"
BOOTSTRAP = SAMPLES / "bootstrap_mce.json"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}")

RAW = dataset_urn("raw.customers")
GOOD_MCP = {
    "entityType": "dataset",
    "entityUrn": RAW,
    "changeType": "UPSERT",
    "aspectName": "status",
    "aspect": {"json": {"removed": False}},
}


def rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT * FROM metadata_aspect_v2 ORDER BY 1, 2, 3").fetchall()


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- DataHub's own sample files ------------------------------------------------------------


@needs_samples
def test_ml_showcase_loads(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    summary = load_metadata_files(db, [ML_SHOWCASE])
    assert summary == LoadSummary(files=1, records=66, urns=36, aspects=66, new_versions=66)
    with open_lite_catalog(db, create=False) as catalog:
        churn = model_urn("churn_model_v1")
        assert len(catalog.models()) == 5
        lineage = catalog.lineage(churn, WalkLimits())
        # Model, 8 features, their 2 feature tables, 4 source datasets and the training run.
        assert len(lineage.nodes) == 16
        customers = dataset_urn("b2fd91.order_entry_db.order_entry.customers", "dbt")
        assert not lineage.nodes[customers].exists  # referenced, never defined
        assert lineage.nodes[churn].trained_at == T0  # from its training run
        feature = "urn:li:mlFeature:(customer_features,days_since_signup)"
        assert lineage.nodes[feature].source_columns == ("customer_since",)


@needs_samples
def test_bootstrap_mce_loads(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    summary = load_metadata_files(db, [BOOTSTRAP])
    assert (summary.records, summary.urns, summary.aspects) == (97, 87, 154)
    with open_lite_catalog(db, create=False) as catalog:
        assert catalog.models() == [model_urn("scienceModel", "science")]
        kafka = dataset_urn("SampleKafkaDataset", "kafka")
        hive = dataset_urn("SampleHiveDataset")
        created = dataset_urn("fct_users_created")
        nodes = catalog.nodes([kafka, hive, created])
        kafka_schema = nodes[kafka].schema
        assert kafka_schema is not None
        assert kafka_schema.by_path()["field_foo_2"].tags == {tag_urn("NeedsDocumentation")}
        assert nodes[hive].tags == {tag_urn("Legacy")}
        # The sample's fineGrainedLineages entry has no downstreams: no column edge, no error.
        assert nodes[created].column_lineage == ()
        assert catalog.upstream([hive]) == [
            Edge(hive, dataset_urn("SampleHdfsDataset", "hdfs"), "dataset_upstream")
        ]
        job = "urn:li:dataJob:(urn:li:dataFlow:(airflow,dag_abc,PROD),task_123)"
        assert Edge(created, job, "produced_by") in catalog.upstream([created])


@needs_samples
def test_both_samples_load_together_and_reload_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    first = load_metadata_files(db, [ML_SHOWCASE, BOOTSTRAP])
    assert first.new_versions == first.aspects
    assert load_metadata_files(db, [ML_SHOWCASE]).new_versions == 0
    # bootstrap_mce.json holds two datasetProfile events for SampleHiveDataset: a timeseries
    # aspect keeps both, once, so replaying the file adds nothing.
    assert load_metadata_files(db, [BOOTSTRAP]).new_versions == 0
    assert len(LiteCatalog(db).models()) == 6


# --- history -------------------------------------------------------------------------------


def test_reload_of_a_changed_aspect_makes_a_version(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    t1, t2 = T0, T0 + timedelta(days=7)
    v1 = write_metadata_file(
        tmp_path / "v1.json", dataset("raw.customers", fields=[("email", "string")], observed_at=t1)
    )
    v2 = write_metadata_file(
        tmp_path / "v2.json",
        dataset("raw.customers", fields=[("email_address", "string")], observed_at=t2),
    )
    assert load_metadata_files(db, [v1]).new_versions == 1
    assert load_metadata_files(db, [v1]).new_versions == 0
    assert load_metadata_files(db, [v2]).new_versions == 1
    with open_lite_catalog(db, create=False) as catalog:
        old = catalog.schema_as_of(RAW, t1 + timedelta(days=1))
        new = catalog.schema_as_of(RAW, t2 + timedelta(days=1))
        current = catalog.nodes([RAW])[RAW].schema
    assert old is not None
    assert new is not None
    assert [f.path for f in old.fields] == ["email"]
    assert [f.path for f in new.fields] == ["email_address"]
    assert current == new


def test_load_into_an_open_catalog_is_seen_by_it(tmp_path: Path) -> None:
    catalog = open_lite_catalog(tmp_path / "catalog.db", create=True)
    feature = "urn:li:mlFeature:(customer_features,email_domain)"
    assert catalog.upstream([feature]) == []
    file = write_metadata_file(
        tmp_path / "m.json",
        [
            *ml_feature("customer_features", "email_domain", sources=["raw.customers"]),
            *ml_model("churn", features=[feature]),
        ],
    )
    summary = load_metadata_files(catalog, [file])
    assert summary.urns == 2
    assert catalog.models() == [model_urn("churn")]
    assert catalog.upstream([feature]) == [Edge(feature, RAW, "feature_source")]
    catalog.close()


def test_unicode_and_odd_names_round_trip(tmp_path: Path) -> None:
    odd = ["prénom", "montant (€), net", "日付", 'quote"d', "tab\tbed"]
    name = "raw.kundén (2024), ü"
    file = write_metadata_file(
        tmp_path / "odd.json",
        [
            *dataset(name, fields=[(f, "string") for f in odd], description="Kündenstamm ✓"),
            *dataset(
                "clean.kunden",
                fields=[("vorname", "string")],
                column_lineage=[(dataset_urn(name), odd[1], "vorname")],
            ),
        ],
    )
    db = tmp_path / "catalog.db"
    load_metadata_files(db, [file])
    with open_lite_catalog(db, create=False) as catalog:
        raw, clean = dataset_urn(name), dataset_urn("clean.kunden")
        nodes = catalog.nodes([raw, clean])
    schema = nodes[raw].schema
    assert schema is not None
    assert [f.path for f in schema.fields] == odd
    assert nodes[raw].name == name
    assert nodes[clean].column_lineage == (ColumnEdge(raw, odd[1], "vorname"),)


def test_older_value_form_mcps_load(tmp_path: Path) -> None:
    record = {
        **GOOD_MCP,
        "aspectName": "globalTags",
        "aspect": {
            "value": json.dumps({"tags": [{"tag": "urn:li:tag:PII"}]}),
            "contentType": "application/json",
        },
        "systemMetadata": {"lastObserved": 1735689600000, "runId": "r1"},
    }
    db = tmp_path / "catalog.db"
    load_metadata_files(db, [write_json(tmp_path / "old.json", [record])])
    assert LiteCatalog(db).nodes([RAW])[RAW].tags == {tag_urn("PII")}


def test_empty_list_loads_nothing(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    summary = load_metadata_files(db, [write_json(tmp_path / "empty.json", [])])
    assert summary == LoadSummary(files=1, records=0, urns=0, aspects=0, new_versions=0)
    assert LiteCatalog(db).models() == []


# --- bad input: one clear error, nothing written --------------------------------------------

SCHEMA_WITHOUT_PLATFORM = {
    **GOOD_MCP,
    "aspectName": "schemaMetadata",
    "aspect": {"json": {"schemaName": "x", "version": 0, "hash": "", "fields": []}},
}
BAD_MCE = {
    "proposedSnapshot": {
        "com.linkedin.pegasus2avro.metadata.snapshot.DatasetSnapshot": {
            "urn": RAW,
            "aspects": [{"com.linkedin.pegasus2avro.common.Status": {"removed": "yes"}}],
        }
    }
}
UNKNOWN_MCE_ASPECT = {
    "proposedSnapshot": {
        "com.linkedin.pegasus2avro.metadata.snapshot.DatasetSnapshot": {
            "urn": RAW,
            "aspects": [{"com.linkedin.pegasus2avro.common.NoSuchAspect": {}}],
        }
    }
}

BAD_RECORDS: dict[str, tuple[object, str]] = {
    "neither MCP nor MCE": (
        {"foo": 1},
        "record 2: neither an MCP (entityUrn, aspectName, aspect) nor an MCE (proposedSnapshot)",
    ),
    "not an object": ([1, 2], "record 2: expected a JSON object, got a list"),
    "unknown aspect": ({**GOOD_MCP, "aspectName": "fooBar"}, "record 2: unknown aspect 'fooBar'"),
    "aspect misses a required field": (
        SCHEMA_WITHOUT_PLATFORM,
        "record 2: aspect 'schemaMetadata' is not valid: "
        "com.linkedin.pegasus2avro.schema.SchemaMetadata is missing required field: platform",
    ),
    "aspect field of the wrong type": (
        {**GOOD_MCP, "aspect": {"json": {"removed": "yes"}}},
        "record 2: aspect 'status' is not valid: field 'removed' does not fit the schema "
        "(got 'yes')",
    ),
    "nested field of the wrong type": (
        {**GOOD_MCP, "aspectName": "globalTags", "aspect": {"json": {"tags": [{"tag": 5}]}}},
        "record 2: aspect 'globalTags' is not valid: field 'tags[0].tag' does not fit the schema "
        "(got 5)",
    ),
    "aspect on the wrong entity": (
        {**GOOD_MCP, "aspectName": "mlModelProperties", "aspect": {"json": {}}},
        "record 2: aspect 'mlModelProperties' is not an aspect of entity type 'dataset'",
    ),
    "bad urn": ({**GOOD_MCP, "entityUrn": "customers"}, "record 2: invalid urn 'customers'"),
    "unknown entity type": (
        {**GOOD_MCP, "entityUrn": "urn:li:fooBar:x"},
        "record 2: unknown entity type 'fooBar'",
    ),
    "patch without operations": (
        {**GOOD_MCP, "changeType": "PATCH"},
        "record 2: PATCH of status: an object patch needs a 'patch' list of operations",
    ),
    "unknown change type": (
        {**GOOD_MCP, "changeType": "UPSRT"},
        "record 2: change type 'UPSRT' is not one of DataHub's",
    ),
    "value is not JSON": (
        {**GOOD_MCP, "aspect": {"value": "{bad", "contentType": "application/json"}},
        "record 2: aspect 'status': value is not valid JSON",
    ),
    "invalid MCE aspect": (
        BAD_MCE,
        "record 2: aspect 'status' is not valid: field 'removed' does not fit the schema",
    ),
    "unknown MCE aspect": (
        UNKNOWN_MCE_ASPECT,
        "record 2: unknown aspect 'com.linkedin.pegasus2avro.common.NoSuchAspect'",
    ),
}


@pytest.fixture
def loaded_db(tmp_path: Path) -> Path:
    db = tmp_path / "catalog.db"
    load_metadata_files(db, [write_metadata_file(tmp_path / "base.json", ml_model("churn"))])
    return db


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_record_is_refused_with_where_and_what(
    case: str, tmp_path: Path, loaded_db: Path
) -> None:
    record, message = BAD_RECORDS[case]
    good = write_json(tmp_path / "good.json", [GOOD_MCP])
    bad = write_json(tmp_path / "bad.json", [GOOD_MCP, record])
    before = rows(loaded_db)
    with pytest.raises(InputError) as raised:
        load_metadata_files(loaded_db, [good, bad])
    assert str(raised.value).startswith(f"{bad}: {message}")
    assert "\n" not in str(raised.value)
    assert rows(loaded_db) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # Streamed: the first problem in file order is the one reported.
        ('[\n  {"b": ]', "not valid JSON at line 2 column 9: Expecting value"),
        ('{"entityUrn": "x"}', "expected a JSON list of DataHub MCPs/MCEs, got an object"),
        ('"hello"', "expected a JSON list of DataHub MCPs/MCEs, got a string"),
        ("", "not valid JSON at line 1 column 1: Expecting value"),
    ],
)
def test_bad_file_is_refused(content: str, message: str, tmp_path: Path, loaded_db: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    before = rows(loaded_db)
    with pytest.raises(InputError) as raised:
        load_metadata_files(loaded_db, [bad])
    assert str(raised.value) == f"{bad}: {message}"
    assert rows(loaded_db) == before


def test_missing_file_is_refused_and_creates_no_catalog(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    with pytest.raises(InputError, match="cannot read"):
        load_metadata_files(db, [tmp_path / "nope.json"])
    assert not db.exists()
