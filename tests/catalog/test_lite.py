"""What only the Lite backend does: opening files, their failure modes, and what it stores."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.errors import CatalogError, NodeNotFound
from mlcopilot.model import DocumentWrite, EntityType, IncidentWrite, PropertyWrite, TagWrite
from mlcopilot.protocols import WalkLimits
from testing.builders import T0, dataset, dataset_urn, ml_model, model_urn, ms, tag, tag_urn

RAW = dataset_urn("raw.customers")
MODEL = model_urn("churn")


def stored(db: Path, urn: str, aspect: str) -> Any:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ? "
            "AND version = 0",
            [urn, aspect],
        ).fetchone()
    return None if row is None else json.loads(row[0])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.db"
    with LiteCatalog(path, create=True) as catalog:
        catalog.ingest([*ml_model("churn"), *dataset("raw.customers", tags=["Tier1"])])
    return path


def test_construction_does_no_io(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "catalog.db"
    catalog = LiteCatalog(path, create=True)
    assert catalog.label == f"lite:{path}"
    assert not path.parent.exists()
    catalog.close()
    assert not path.parent.exists()


def test_missing_catalog_says_how_to_make_one(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    message = f"no catalog at {path} — load metadata first with `mlcopilot catalog load FILE`"
    with pytest.raises(CatalogError) as raised:
        open_lite_catalog(path, create=False)
    assert str(raised.value) == message
    with pytest.raises(CatalogError, match="no catalog at"):
        LiteCatalog(path).models()
    assert not path.exists()


def test_created_catalog_without_models_has_none(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "catalog.db"
    with open_lite_catalog(path, create=True) as catalog:
        assert catalog.models() == []
    assert path.exists()


def test_corrupt_file_is_a_catalog_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    path.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(CatalogError, match=f"^{path} is not a DataHub Lite catalog"):
        open_lite_catalog(path, create=False)
    with pytest.raises(CatalogError, match=str(path)):
        open_lite_catalog(path, create=True)


def test_foreign_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE incidents (id TEXT)")
    before = path.read_bytes()
    for create in (False, True):
        with pytest.raises(CatalogError, match="is not a DataHub Lite catalog"):
            open_lite_catalog(path, create=create)
    assert path.read_bytes() == before


def test_reading_never_changes_the_file(db: Path) -> None:
    before = db.read_bytes()
    with open_lite_catalog(db, create=False) as catalog:
        catalog.nodes(catalog.models())
        catalog.upstream([MODEL, RAW])
        catalog.lineage(MODEL, WalkLimits())
        catalog.schema_as_of(RAW, T0)
        assert catalog.apply([TagWrite(RAW, tag_urn("PII"), present=True)], dry_run=True)
    assert db.read_bytes() == before


def test_lineage_of_an_unknown_root_is_node_not_found(db: Path) -> None:
    with LiteCatalog(db) as catalog, pytest.raises(NodeNotFound):
        catalog.lineage(model_urn("nope"), WalkLimits())


def test_odd_urns_are_other_and_absent(db: Path) -> None:
    with LiteCatalog(db) as catalog:
        nodes = catalog.nodes(["not-an-urn", "urn:li:chart:(looker,baz1)"])
    assert nodes["not-an-urn"].entity_type is EntityType.OTHER
    assert nodes["not-an-urn"].name == "not-an-urn"
    assert not nodes["not-an-urn"].exists
    assert nodes["urn:li:chart:(looker,baz1)"].entity_type is EntityType.OTHER


def test_large_batches_are_split(tmp_path: Path) -> None:
    names = [f"raw.t{i}" for i in range(510)]
    with LiteCatalog(tmp_path / "catalog.db", create=True) as catalog:
        catalog.ingest([m for n in names for m in dataset(n, upstreams=["raw.source"])])
        urns = [dataset_urn(n) for n in names]
        assert all(node.exists for node in catalog.nodes(urns).values())
        assert len(catalog.upstream(urns)) == 510


def test_incident_is_stored_as_datahub_incident_info(db: Path) -> None:
    incident = IncidentWrite(
        urn="urn:li:incident:mlcopilot-abc-1",
        incident_type="CUSTOM",
        custom_type="SCHEMA_DRIFT",
        title="email removed",
        description="raw.customers lost `email`",
        priority=0,
        entities=(MODEL, RAW),
        active=False,
        created_at=T0,
        status_changed_at=T0 + timedelta(hours=1),
    )
    with LiteCatalog(db) as catalog:
        assert catalog.apply([incident]) == [incident]
    actor = "urn:li:corpuser:mlcopilot"
    assert stored(db, incident.urn, "incidentInfo") == {
        "type": "CUSTOM",
        "customType": "SCHEMA_DRIFT",
        "title": "email removed",
        "description": "raw.customers lost `email`",
        "priority": 0,
        "entities": [MODEL, RAW],
        "status": {
            "state": "RESOLVED",
            "lastUpdated": {"time": ms(T0 + timedelta(hours=1)), "actor": actor},
        },
        "source": {"type": "MANUAL"},
        "startedAt": ms(T0),
        "created": {"time": ms(T0), "actor": actor},
    }


def test_document_is_stored_as_datahub_document_info(db: Path) -> None:
    document = DocumentWrite(
        urn="urn:li:document:mlcopilot-abc-1",
        title="email removed",
        text="# Schema drift\n\nÄnderung ✓",
        related_assets=(MODEL,),
        created_at=T0,
        modified_at=T0 + timedelta(days=1),
    )
    with LiteCatalog(db) as catalog:
        catalog.apply([document])
    info = stored(db, document.urn, "documentInfo")
    actor = "urn:li:corpuser:mlcopilot"
    assert info == {
        "title": "email removed",
        "customProperties": {},
        "source": {"sourceType": "NATIVE"},
        "status": {"state": "PUBLISHED"},
        "contents": {"text": "# Schema drift\n\nÄnderung ✓"},
        "created": {"time": ms(T0), "actor": actor},
        "lastModified": {"time": ms(T0 + timedelta(days=1)), "actor": actor},
        "relatedAssets": [{"asset": MODEL}],
    }


def test_tag_and_property_definitions_are_created_once(db: Path) -> None:
    pii = tag_urn("PII")
    risk = "urn:li:structuredProperty:io.mlcopilot.risk"
    with LiteCatalog(db) as catalog:
        catalog.apply([TagWrite(RAW, pii, present=True), PropertyWrite(RAW, risk, (0.5,))])
        assert stored(db, pii, "tagProperties")["name"] == "PII"
        definition = stored(db, risk, "propertyDefinition")
        assert definition["qualifiedName"] == "io.mlcopilot.risk"
        assert definition["valueType"] == "urn:li:dataType:datahub.number"
        assert "urn:li:entityType:datahub.mlModel" in definition["entityTypes"]
        catalog.ingest(tag("PII", description="Personal data, edited by a steward"))
        assert catalog.apply([TagWrite(MODEL, pii, present=True)]) != []
    assert stored(db, pii, "tagProperties")["description"] == "Personal data, edited by a steward"


def test_unusable_write_is_a_catalog_error(db: Path) -> None:
    with LiteCatalog(db) as catalog, pytest.raises(CatalogError, match="cannot apply"):
        catalog.apply([TagWrite(RAW, "PII", present=True)])
