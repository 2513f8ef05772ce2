"""Loading DataHub metadata files: DataHub's own samples load; bad input is refused whole."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog import lite_index
from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.lite_writer import TIMESERIES
from mlcopilot.catalog.loader import LoadSummary, load_metadata_files
from mlcopilot.errors import InputError
from mlcopilot.model import ColumnEdge, Edge
from mlcopilot.protocols import WalkLimits
from testing.builders import (
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


# --- the rows are Lite's own ---------------------------------------------------------------

DEMO_DATA = Path(__file__).parents[2] / "src" / "mlcopilot" / "demo_data"


def lite_rows(db: Path, table: str = "metadata_aspect_v2") -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def test_rows_and_browse_edges_are_what_datahub_lite_itself_writes(tmp_path: Path) -> None:
    """Loading a sequence of files gives the very rows ``SqliteLite.write`` + ``close`` give.

    The demo files carry lastObserved everywhere (so createdon is deterministic), change a
    schema and restore a column (new versions), and reload unchanged aspects (re-dated only).
    """
    from datahub.lite.sqlite_lite import SqliteLite
    from datahub.lite.sqlite_lite_config import SqliteLiteConfig

    from mlcopilot.catalog.loader import read_metadata_file

    files = sorted(DEMO_DATA.glob("*.json"))
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    for path in [*files, files[0]]:
        load_metadata_files(ours, [path])
        lite = SqliteLite(SqliteLiteConfig(file=str(theirs)))
        for mcp in read_metadata_file(path)[1]:
            lite.write(mcp)
        lite.close()  # Lite rebuilds its browse index here

    # Except timeseries, on purpose: Lite makes the last event written the latest (the reload
    # of 01 makes its old operation event latest again); we keep the newest by its own time.
    def aspect_rows(db: Path) -> list[tuple[Any, ...]]:
        return [r for r in lite_rows(db) if r[1] not in TIMESERIES]

    assert aspect_rows(ours) == aspect_rows(theirs)
    assert len(aspect_rows(ours)) > 30
    assert lite_rows(ours, "metadata_edge_v2") == lite_rows(theirs, "metadata_edge_v2")
    assert len(lite_rows(ours, "metadata_edge_v2")) > 10


@needs_samples
def test_browse_edges_match_a_full_lite_reindex_of_datahubs_samples(tmp_path: Path) -> None:
    from datahub.lite.sqlite_lite import SqliteLite
    from datahub.lite.sqlite_lite_config import SqliteLiteConfig

    db = tmp_path / "catalog.db"
    load_metadata_files(db, [ML_SHOWCASE, BOOTSTRAP])
    ours = lite_rows(db, "metadata_edge_v2")
    lite = SqliteLite(SqliteLiteConfig(file=str(db)))
    lite.close()  # reindex(): drops every edge and derives them again from the aspects
    assert lite_rows(db, "metadata_edge_v2") == ours
    assert len(ours) > 50
    # And `datahub lite ls` browses it: platforms, then their datasets.
    lite = SqliteLite(SqliteLiteConfig(file=str(db), read_only=True))
    assert {b.name for b in lite.ls("/")} >= {"data_lakes", "streaming", "bi_tools"}
    assert any(b.name == "hive" for b in lite.ls("/data_lakes"))
    lite.sqlite_client.close()


# --- timeseries ----------------------------------------------------------------------------


def operation(urn: str, at_ms: int, updated_ms: int) -> dict[str, Any]:
    return {
        "entityType": "dataset",
        "entityUrn": urn,
        "changeType": "UPSERT",
        "aspectName": "operation",
        "aspect": {
            "json": {
                "timestampMillis": at_ms,
                "operationType": "UPDATE",
                "lastUpdatedTimestamp": updated_ms,
            }
        },
        "systemMetadata": {"lastObserved": at_ms, "runId": f"run-{at_ms}"},
    }


def test_timeseries_keep_every_event_and_the_newest_is_latest(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    day = 86_400_000
    newer, older, oldest = (
        operation(RAW, 10 * day - k * day, 10 * day - k * day) for k in (0, 1, 2)
    )
    first = load_metadata_files(db, [write_json(tmp_path / "a.json", [older, newer])])
    assert first.new_versions == 2
    # An older event arriving later is history, not the latest; a known event is not repeated.
    second = load_metadata_files(db, [write_json(tmp_path / "b.json", [oldest, newer, older])])
    assert (second.aspects, second.new_versions) == (3, 1)
    with open_lite_catalog(db, create=False) as catalog:
        events = catalog.timeseries(RAW, "operation")
        assert [e["timestampMillis"] for e in events] == [10 * day, 9 * day, 8 * day]
        assert catalog.timeseries(RAW, "operation", limit=1) == events[:1]
        # What the checks read (stale_source: the node's last update) is the newest event.
        assert catalog.nodes([RAW])[RAW].last_updated == ax.ms_to_datetime(10 * day)
        with pytest.raises(ValueError, match="'schemaMetadata' is not a timeseries aspect"):
            catalog.timeseries(RAW, "schemaMetadata")
    # Lite's own write() can carry on after us: v0 names the highest version.
    from datahub.lite.sqlite_lite import SqliteLite
    from datahub.lite.sqlite_lite_config import SqliteLiteConfig

    from mlcopilot.catalog.loader import read_metadata_file

    lite = SqliteLite(SqliteLiteConfig(file=str(db)))
    later = write_json(tmp_path / "c.json", [operation(RAW, 11 * day, 11 * day)])
    for mcp in read_metadata_file(later)[1]:
        lite.write(mcp)
    lite.sqlite_client.close()
    assert [e["timestampMillis"] for e in LiteCatalog(db).timeseries(RAW, "operation")][:2] == [
        11 * day,
        10 * day,
    ]


# --- change types ---------------------------------------------------------------------------


def status(removed: bool, change: str = "UPSERT", urn: str = RAW) -> dict[str, Any]:
    return {
        **GOOD_MCP,
        "entityUrn": urn,
        "changeType": change,
        "aspect": {"json": {"removed": removed}},
    }


def test_create_writes_only_what_is_absent_and_reports_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    other = dataset_urn("raw.orders")
    records = [
        status(False),
        status(True, "CREATE"),  # status of RAW exists (record 1): left alone
        {**status(True, "CREATE"), "aspectName": "status", "entityUrn": other},  # absent: made
        {
            **GOOD_MCP,
            "changeType": "CREATE_ENTITY",
            "aspectName": "globalTags",
            "aspect": {"json": {"tags": []}},
        },  # RAW exists: left alone
        status(True, "DELETE"),
        status(True, "RESTATE"),
    ]
    path = write_json(tmp_path / "c.json", records)
    summary = load_metadata_files(db, [path])
    assert (summary.records, summary.aspects, summary.new_versions) == (6, 2, 2)
    assert summary.skipped == 4
    assert [s.split(": ", 2)[1] for s in summary.skips] == [
        "record 2",
        "record 4",
        "record 5",
        "record 6",
    ]
    assert "CREATE: aspect 'status' of" in summary.skips[0]
    assert "CREATE_ENTITY:" in summary.skips[1]
    assert "DELETE is not applied" in summary.skips[2]
    with open_lite_catalog(db, create=False) as catalog:
        nodes = catalog.nodes([RAW, other])
    assert not nodes[RAW].removed
    assert nodes[other].removed


# --- PATCH ----------------------------------------------------------------------------------


def tags_patch(*ops: dict[str, Any], urn: str = RAW) -> dict[str, Any]:
    return {
        "entityType": "dataset",
        "entityUrn": urn,
        "changeType": "PATCH",
        "aspectName": "globalTags",
        "aspect": {"json": list(ops)},
    }


def test_patches_apply_in_file_order_to_what_is_stored_then(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    base = {
        **GOOD_MCP,
        "aspectName": "globalTags",
        "aspect": {"json": {"tags": [{"tag": tag_urn("A")}]}},
    }
    load_metadata_files(db, [write_json(tmp_path / "base.json", [base])])
    add_b = {"op": "add", "path": f"/tags/{tag_urn('B')}", "value": {"tag": tag_urn("B")}}
    remove_a = {"op": "remove", "path": f"/tags/{tag_urn('A')}"}
    add_c = {"op": "add", "path": f"/tags/{tag_urn('C')}", "value": {"tag": tag_urn("C")}}
    patches = write_json(
        tmp_path / "p.json",
        [
            tags_patch(add_b),
            tags_patch(remove_a),
            {
                **tags_patch(add_c),
                "aspect": {
                    "value": json.dumps([add_c]),
                    "contentType": "application/json-patch+json",
                },
            },
        ],
    )
    summary = load_metadata_files(db, [patches])
    assert (summary.patches, summary.new_versions) == (3, 3)
    with open_lite_catalog(db, create=False) as catalog:
        assert catalog.nodes([RAW])[RAW].tags == {tag_urn("B"), tag_urn("C")}
    # A patch of an aspect the entity does not have yet starts from the aspect's default.
    fresh = dataset_urn("raw.fresh")
    load_metadata_files(db, [write_json(tmp_path / "f.json", [tags_patch(add_b, urn=fresh)])])
    assert LiteCatalog(db).nodes([fresh])[fresh].tags == {tag_urn("B")}


def test_a_patch_whose_result_is_invalid_is_refused_naming_file_and_record(
    tmp_path: Path, loaded_db: Path
) -> None:
    bad_value = {"op": "add", "path": "/tags/x", "value": {"tag": 5}}
    path = write_json(tmp_path / "p.json", [GOOD_MCP, tags_patch(bad_value)])
    before = rows(loaded_db)
    with pytest.raises(InputError) as raised:
        load_metadata_files(loaded_db, [path])
    assert str(raised.value).startswith(
        f"{path}: record 2: aspect 'globalTags' is not valid: field 'tags[0].tag'"
    )
    assert rows(loaded_db) == before


# --- the command -----------------------------------------------------------------------------


def test_the_command_prints_what_it_loaded_and_skipped(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mlcopilot.cli import app

    path = write_json(
        tmp_path / "c.json", [status(False), status(True, "CREATE"), status(True, "DELETE")]
    )
    db = tmp_path / "catalog.db"
    result = CliRunner().invoke(
        app,
        ["catalog", "load", "--catalog", f"lite:{db}", str(path)],
        env={"MLCOPILOT_HOME": str(tmp_path)},
    )
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())  # the console wraps long lines
    assert (
        f"Loaded 3 records from 1 file(s) into lite:{db}: 1 entities, 1 aspects, 1 new aspect "
        "versions, 0 patches applied, 2 skipped." in printed
    )
    assert f"skipped {path}: record 2: CREATE: aspect 'status'" in printed
    assert f"skipped {path}: record 3: DELETE is not applied" in printed
    # A missing file is refused before any catalog is made.
    missing = CliRunner().invoke(
        app,
        ["catalog", "load", "--catalog", f"lite:{tmp_path / 'new.db'}", str(tmp_path / "no.json")],
        env={"MLCOPILOT_HOME": str(tmp_path)},
    )
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr
    assert not (tmp_path / "new.db").exists()


# --- large loads: read and validated in a second process ----------------------------------


def test_a_second_process_reading_gives_the_same_catalog_and_errors(tmp_path: Path) -> None:
    files = [*sorted(DEMO_DATA.glob("*.json")), DEMO_DATA / "01_catalog.json"]
    alone, paired = tmp_path / "alone.db", tmp_path / "paired.db"
    one = load_metadata_files(alone, files, parallel=False)
    two = load_metadata_files(paired, files, parallel=True)
    assert one == two
    assert lite_rows(alone) == lite_rows(paired)
    assert lite_rows(alone, "metadata_edge_v2") == lite_rows(paired, "metadata_edge_v2")
    before = rows(paired)
    bad = write_json(tmp_path / "bad.json", [GOOD_MCP, {**GOOD_MCP, "aspectName": "fooBar"}])
    with pytest.raises(InputError, match=rf"^{bad}: record 2: unknown aspect 'fooBar'$"):
        load_metadata_files(paired, [files[0], bad], parallel=True)
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"b": ]', encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON at line 2 column 9"):
        load_metadata_files(paired, [files[0], broken], parallel=True)
    assert rows(paired) == before


# --- large loads: the scan index translated in a second process too -----------------------


def test_the_helper_translates_half_of_the_scan_index_as_this_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lite_index, "_BATCH", 1)  # a batch an entity: 8 of them
    sent: list[int] = []
    submit = lite_index.Helper.submit

    def counted(self: lite_index.Helper, batch: lite_index._Gathered) -> None:
        sent.append(len(batch[0]))
        submit(self, batch)

    monkeypatch.setattr(lite_index.Helper, "submit", counted)
    files = sorted(DEMO_DATA.glob("*.json"))
    alone, paired = tmp_path / "alone.db", tmp_path / "paired.db"
    load_metadata_files(alone, files, parallel=False)
    load_metadata_files(paired, files, parallel=True)
    indexed = lite_rows(alone, lite_index.TABLE)
    assert 0 < sum(sent) < len(indexed)  # the helper translated some, this process the rest
    assert lite_rows(paired, lite_index.TABLE) == indexed
    assert lite_rows(paired) == lite_rows(alone)
    assert multiprocessing.active_children() == []  # the helper ended with the load


@pytest.mark.parametrize(
    ("fault", "message"),
    [("raise", r"(?s)helper process failed:.*ZeroDivisionError"), ("die", "helper process died")],
)
def test_a_helper_that_fails_fails_the_load_and_loads_nothing(
    fault: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lite_index, "_BATCH", 1)
    loading = os.getpid()
    build = lite_index._build

    def failing_in_the_helper(gathered: Any) -> Any:
        if os.getpid() != loading:
            if fault == "die":
                os._exit(1)
            raise ZeroDivisionError("a bug in the helper")
        return build(gathered)

    monkeypatch.setattr(lite_index, "_build", failing_in_the_helper)
    db = tmp_path / "catalog.db"
    load_metadata_files(db, [DEMO_DATA / "01_catalog.json"], parallel=False)
    with sqlite3.connect(db) as conn:  # (records of every entity to translate again)
        conn.execute(f"DELETE FROM {lite_index.TABLE}")
    before = lite_rows(db)
    with pytest.raises(RuntimeError, match=message):
        load_metadata_files(db, sorted(DEMO_DATA.glob("*.json")), parallel=True)
    assert lite_rows(db) == before
    assert lite_rows(db, lite_index.TABLE) == []
    assert multiprocessing.active_children() == []
