"""The scan index of a Lite file: written by every write, dropped by any change, never stale.

A scan reads an entity from its record when it has one, else from its aspects' JSON; these
tests hold that the two never disagree, whoever wrote the file last (mlcopilot, ``datahub lite``
or plain SQL), and that the file stays a Lite catalog. That whole scans read the same with and
without records is ``test_lite_scan_identical.py``.
"""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog import lite_index
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.model import EntityType
from mlcopilot.protocols import WalkLimits
from testing.builders import (
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
    model_urn,
    tag,
    tag_urn,
)

RAW = dataset_urn("raw.customers")
CLEAN = dataset_urn("clean.customers")
MODEL = model_urn("churn")
FEATURE = feature_urn("customer", "email_domain")
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def catalog_mcps() -> list[MetadataChangeProposalWrapper]:
    return [
        *dataset(
            "raw.customers",
            fields=[("email", "string"), ("id", "long")],
            field_tags={"email": ["PII"]},
            last_operation=T0,
        ),
        *dataset(
            "clean.customers",
            fields=[("email", "string"), ("id", "long")],
            upstreams=["raw.customers"],
            column_lineage=[("raw.customers", "email", "email"), ("raw.customers", "id", "id")],
        ),
        *ml_feature("customer", "email_domain", sources=["clean.customers"]),
        *ml_model("churn", features=[FEATURE], date=T0),
        *tag("Tier1"),
    ]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.db"
    with LiteCatalog(path, create=True) as catalog:
        catalog.ingest(catalog_mcps())
    return path


def records(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        found = {u for (u,) in db.execute(f"SELECT urn FROM {lite_index.TABLE}")}
    db.close()
    return found


def held(path: Path) -> set[str]:
    """The entities of the file a walk reads as nodes (tags, users... get no record)."""
    with sqlite3.connect(path) as db:
        found = {u for (u,) in db.execute("SELECT DISTINCT urn FROM metadata_aspect_v2")}
    db.close()
    walked = {u for u in found if ax.entity_type_of(u) is not EntityType.OTHER}
    assert walked != found  # the tag
    return walked


def read_slowly(path: Path, urns: list[str]) -> dict[str, object]:
    """What a catalog reads of ``urns`` without the index (as for a file nobody indexed)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lite_index, "usable", lambda client: False)
        return read(path, urns)


def read(path: Path, urns: list[str]) -> dict[str, object]:
    with LiteCatalog(path) as catalog:
        return {"nodes": catalog.nodes(urns), "edges": catalog.upstream(urns)}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The urns read from records, in order."""
    built: list[str] = []
    node = lite_index.Reader.node

    def counting(self: lite_index.Reader, urn: str, *args: object) -> object:
        built.append(urn)
        return node(self, urn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(lite_index.Reader, "node", counting)
    return built


def test_every_write_gives_every_entity_a_record(path: Path) -> None:
    assert records(path) == held(path)
    with LiteCatalog(path) as catalog:
        catalog.ingest(dataset("raw.orders", fields=[("id", "long")]))
    assert records(path) == held(path)
    assert dataset_urn("raw.orders") in records(path)


def test_a_scan_reads_records_and_gets_what_the_json_gives(path: Path, counted: list[str]) -> None:
    urns = sorted(held(path) | {dataset_urn("not.in.catalog"), tag_urn("Tier1")})
    fast = read(path, urns)
    assert set(counted) == held(path)  # every entity of the file, from its record
    counted.clear()
    slow = read_slowly(path, urns)
    assert not counted
    assert fast == slow
    with LiteCatalog(path) as catalog:
        lineage = catalog.lineage(MODEL, WalkLimits())
    assert set(lineage.nodes) == {MODEL, FEATURE, CLEAN, RAW}
    assert lineage.nodes[CLEAN].column_lineage == (
        ax.column_lineage(CLEAN, read_json(path, CLEAN, "upstreamLineage"))
    )


def read_json(path: Path, urn: str, aspect: str) -> dict[str, object]:
    with sqlite3.connect(path) as db:
        (text,) = db.execute(
            "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ? "
            "AND version = 0",
            (urn, aspect),
        ).fetchone()
    db.close()
    value: dict[str, object] = json.loads(text)
    return value


def test_a_plain_sql_write_drops_the_record_and_the_scan_sees_it(path: Path) -> None:
    deprecation = json.dumps(
        {"deprecated": True, "note": "use clean", "actor": "urn:li:corpuser:x"}
    )
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO metadata_aspect_v2 VALUES (?, 'deprecation', 0, ?, '{}', 1)",
            (RAW, deprecation),
        )
    db.close()
    assert RAW not in records(path)
    assert CLEAN in records(path)
    with LiteCatalog(path) as catalog:
        node = catalog.nodes([RAW])[RAW]
    assert node.deprecation is not None
    assert node.deprecation.note == "use clean"
    with LiteCatalog(path) as catalog, catalog.writing():
        pass  # the next write of mlcopilot gives it a record again
    assert RAW in records(path)
    assert read(path, [RAW]) == read_slowly(path, [RAW])


def test_datahub_lite_writing_the_file_drops_the_record(path: Path) -> None:
    lite = SqliteLite(SqliteLiteConfig(file=str(path)))
    lite.write(
        MetadataChangeProposalWrapper(
            entityUrn=RAW,
            aspect=sc.GlobalTagsClass(tags=[sc.TagAssociationClass("urn:li:tag:Deprecated")]),
        )
    )
    lite.close()
    assert RAW not in records(path)
    with LiteCatalog(path) as catalog:
        assert catalog.nodes([RAW])[RAW].tags == frozenset({"urn:li:tag:Deprecated"})


def test_the_file_stays_a_lite_catalog(path: Path) -> None:
    lite = SqliteLite(SqliteLiteConfig(file=str(path), read_only=True))
    try:
        assert set(lite.list_ids()) >= {RAW, CLEAN, MODEL}
        assert lite.get(RAW, aspects=["schemaMetadata"]) is not None
    finally:
        lite.close()


def test_redating_an_unchanged_aspect_keeps_the_record(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE metadata_aspect_v2 SET system_metadata = ? WHERE urn = ? AND version = 0",
            (json.dumps({"lastObserved": 5}), RAW),
        )
    db.close()
    assert RAW in records(path)


def test_records_of_other_code_or_without_triggers_are_not_used(
    path: Path, counted: list[str]
) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {lite_index.META} SET value = 'other code' WHERE key = 'stamp'")
    db.close()
    read(path, [RAW])
    assert not counted
    with LiteCatalog(path) as catalog, catalog.writing():
        pass  # rebuilt for this code
    read(path, [RAW])
    assert counted == [RAW]
    counted.clear()
    with sqlite3.connect(path) as db:
        db.execute(f"DROP TRIGGER {lite_index.TABLE}_update")
    db.close()
    read(path, [RAW])
    assert not counted  # a change could have gone unseen: none is trusted
    with LiteCatalog(path) as catalog, catalog.writing():
        pass
    read(path, [RAW])
    assert counted == [RAW]


def test_a_record_that_does_not_decode_is_read_the_slow_way(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {lite_index.TABLE} SET entry = x'c1' WHERE urn = ?", (RAW,))
    db.close()
    assert read(path, [RAW]) == read_slowly(path, [RAW])


def test_the_schema_as_of_training_time_with_and_without_records(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    before, after = T0 - timedelta(days=2), T0 + timedelta(days=2)
    with LiteCatalog(path, create=True) as catalog:
        catalog.ingest(
            [
                *_observed(dataset("raw.customers", fields=[("email", "string")]), before),
                *_observed(dataset("raw.orders", fields=[("id", "long")]), before),
            ]
        )
        catalog.ingest(
            _observed(dataset("raw.customers", fields=[("email", "string"), ("id", "long")]), after)
        )
    urns = [RAW, dataset_urn("raw.orders"), dataset_urn("raw.none")]
    for when in (T0 - timedelta(days=5), T0, T0 + timedelta(days=5)):
        with LiteCatalog(path) as catalog:
            catalog.nodes(urns)
            fast = catalog.schemas_as_of(urns, when)
        with pytest.MonkeyPatch.context() as patch, LiteCatalog(path) as catalog:
            patch.setattr(lite_index, "usable", lambda client: False)
            catalog.nodes(urns)
            slow = catalog.schemas_as_of(urns, when)
        assert fast == slow
    schema = fast[RAW]
    assert schema is not None
    assert [f.path for f in schema.fields] == ["email", "id"]


def _observed(
    mcps: list[MetadataChangeProposalWrapper], at: datetime
) -> list[MetadataChangeProposalWrapper]:
    for mcp in mcps:
        mcp.systemMetadata = sc.SystemMetadataClass(lastObserved=int(at.timestamp() * 1000))
    return mcps


@pytest.mark.parametrize(
    "text",
    [
        '{"a": NaN, "b": Infinity, "c": -Infinity}',
        '{"a": 1e400}',
        '{"a": 123456789012345678901234567890, "b": -0.0, "c": 5e-324}',
        '{"a": "\\ud800", "b": "\\ud83d\\ude00"}',
        '{"a": 1, "a": 2}',
        "[" * 900 + "]" * 900,
        '{"a": "é\\u00e9\\n"}',
    ],
)
def test_loads_reads_json_as_the_standard_library_does(text: str) -> None:
    expected = json.loads(text)
    found = lite_index.loads(text)
    assert repr(found) == repr(expected)
    if isinstance(expected, dict) and isinstance(expected.get("a"), float):
        assert math.isnan(found["a"]) == math.isnan(expected["a"])


@pytest.mark.parametrize("text", ['{"a": 1', '{"a": "x\ny"}', "[1,]", "{'a': 1}"])
def test_loads_refuses_what_the_standard_library_refuses(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        lite_index.loads(text)  # the standard library's error, with its line and column
