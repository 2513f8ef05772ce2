"""``--schema-file``: schemaMetadata, its MCP/MCE wrappers, a dbt manifest, and bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.errors import InputError
from mlcopilot.model import Schema, SchemaField
from mlcopilot.scan.whatif import derive_changes, read_schema_file
from testing.builders import dataset, dataset_urn
from tests.conftest import DEMO_DATA

URN = dataset_urn("raw.customers")
DBT_URN = "urn:li:dataset:(urn:li:dataPlatform:dbt,analytics.public.customers,PROD)"
CURRENT = Schema(
    (
        SchemaField("id", "NumberType", "bigint", "The key", 0),
        SchemaField("email", "StringType", "varchar", "", 1, tags=frozenset({"urn:li:tag:PII"})),
    )
)


def aspect_json() -> dict[str, Any]:
    """A real schemaMetadata aspect, as the SDK writes it (ids and email, then age)."""
    [mcp] = [
        m
        for m in dataset(
            "raw.customers", fields=[("id", "long"), ("email", "string"), ("age", "int")]
        )
        if m.aspectName == "schemaMetadata"
    ]
    assert mcp.aspect is not None
    aspect: dict[str, Any] = mcp.aspect.to_obj()
    return aspect


def write(tmp_path: Path, data: object, name: str = "new.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def paths(schema: Schema) -> list[str]:
    return [f.path for f in schema.fields]


def test_a_bare_schema_metadata_aspect(tmp_path: Path) -> None:
    schema = read_schema_file(write(tmp_path, aspect_json()), URN, CURRENT)
    assert paths(schema) == ["id", "email", "age"]
    assert schema.by_path()["age"].type == "NumberType"
    # The current column's UI annotations survive: the proposal does not carry them.
    assert schema.by_path()["email"].tags == frozenset({"urn:li:tag:PII"})


@pytest.mark.parametrize("wrapping", ["json", "value"])
def test_an_mcp_holding_it(tmp_path: Path, wrapping: str) -> None:
    inner: object = aspect_json() if wrapping == "json" else json.dumps(aspect_json())
    record = {
        "entityType": "dataset",
        "entityUrn": URN,
        "changeType": "UPSERT",
        "aspectName": "schemaMetadata",
        "aspect": {wrapping: inner, "contentType": "application/json"},
    }
    assert paths(read_schema_file(write(tmp_path, record), URN, CURRENT)) == ["id", "email", "age"]


def test_an_mce_holding_it(tmp_path: Path) -> None:
    record = {
        "proposedSnapshot": {
            "com.linkedin.pegasus2avro.metadata.snapshot.DatasetSnapshot": {
                "urn": URN,
                "aspects": [
                    {"com.linkedin.pegasus2avro.common.Status": {"removed": False}},
                    {"com.linkedin.pegasus2avro.schema.SchemaMetadata": aspect_json()},
                ],
            }
        }
    }
    assert paths(read_schema_file(write(tmp_path, record), URN, CURRENT)) == ["id", "email", "age"]


def test_a_metadata_file_takes_the_datasets_record() -> None:
    """The demo's own change file: a list of MCPs (schemaMetadata and an operation)."""
    schema = read_schema_file(DEMO_DATA / "02_schema_change.json", URN, None)
    assert paths(schema) == ["customer_id", "email", "country_code", "plan"]


def test_a_metadata_file_for_another_dataset_is_refused(tmp_path: Path) -> None:
    other = dataset_urn("raw.orders")
    with pytest.raises(InputError) as raised:
        read_schema_file(DEMO_DATA / "02_schema_change.json", other, None)
    assert str(raised.value) == (
        f"--schema-file {DEMO_DATA / '02_schema_change.json'}: no schemaMetadata for {other} "
        f"(it has one for {URN})"
    )
    single = {"entityUrn": URN, "aspectName": "schemaMetadata", "aspect": {"json": aspect_json()}}
    with pytest.raises(InputError, match=r"its schemaMetadata is for .*raw\.customers.*, not "):
        read_schema_file(write(tmp_path, single), other, None)


def manifest(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"},
        "nodes": {n["unique_id"]: n for n in nodes if n["resource_type"] != "source"},
        "sources": {n["unique_id"]: n for n in nodes if n["resource_type"] == "source"},
    }


def dbt_node(name: str, columns: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "unique_id": f"model.shop.{name}",
        "resource_type": "model",
        "database": "analytics",
        "schema": "public",
        "name": name,
        "alias": name,
        "columns": columns,
        **extra,
    }


def test_a_dbt_manifest_node_named_like_the_dataset(tmp_path: Path) -> None:
    data = manifest(
        dbt_node("orders", {"x": {"name": "x", "data_type": "int"}}),
        dbt_node(
            "customers",
            {
                "id": {"name": "id", "data_type": "varchar", "description": ""},
                "email": {"name": "email", "data_type": None, "description": "Where to write"},
                "age": {"name": "age", "data_type": "integer"},
            },
        ),
    )
    schema = read_schema_file(write(tmp_path, data, "manifest.json"), DBT_URN, CURRENT)
    fields = schema.by_path()
    assert paths(schema) == ["id", "email", "age"]
    assert (fields["id"].type, fields["id"].native_type) == ("StringType", "varchar")
    # No data_type: the column keeps its current type (dbt knows it only after docs generate).
    assert (fields["email"].type, fields["email"].native_type) == ("StringType", "varchar")
    assert fields["email"].description == "Where to write"
    assert fields["id"].description == "The key"  # none in dbt: the current one stays
    assert (fields["age"].type, fields["age"].native_type) == ("NumberType", "integer")
    assert derive_changes(CURRENT, schema, source="m").describe() == [
        "retype id to varchar",
        "add age (integer)",
    ]


def test_a_dbt_node_matched_by_the_tail_of_the_name(tmp_path: Path) -> None:
    """A hive-style urn ``public.customers`` finds the node by schema and alias."""
    data = manifest(dbt_node("customers", {"id": {"name": "id", "data_type": "bigint"}}))
    hive = dataset_urn("public.customers")
    assert paths(read_schema_file(write(tmp_path, data), hive, CURRENT)) == ["id"]


def test_dbt_refusals(tmp_path: Path) -> None:
    twice = manifest(
        dbt_node("customers", {"id": {"name": "id"}}),
        dbt_node("customers", {"id": {"name": "id"}}, unique_id="model.other.customers"),
    )
    with pytest.raises(InputError, match=r"several dbt nodes are named 'analytics\.public\.cust"):
        read_schema_file(write(tmp_path, twice), DBT_URN, CURRENT)
    none = manifest(dbt_node("orders", {"id": {"name": "id"}}))
    with pytest.raises(InputError, match="no dbt model, seed, snapshot or source is the relation"):
        read_schema_file(write(tmp_path, none), DBT_URN, CURRENT)
    undocumented = manifest(dbt_node("customers", {}))
    with pytest.raises(InputError, match=r"model\.shop\.customers lists no columns"):
        read_schema_file(write(tmp_path, undocumented), DBT_URN, CURRENT)


def test_files_that_cannot_be_used_say_which_and_why(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(InputError, match=r"^--schema-file .*missing\.json: cannot read: No such"):
        read_schema_file(missing, URN, CURRENT)
    broken = tmp_path / "broken.json"
    broken.write_text("{\n  oops", encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.json: not JSON \(line 2, column 3"):
        read_schema_file(broken, URN, CURRENT)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match=r"binary\.json: not UTF-8 text"):
        read_schema_file(binary, URN, CURRENT)
    with pytest.raises(InputError, match="neither a schemaMetadata aspect"):
        read_schema_file(write(tmp_path, {"name": "x"}), URN, CURRENT)
    with pytest.raises(InputError, match="no schemaMetadata aspect among its records"):
        read_schema_file(write(tmp_path, [{"entityUrn": URN, "aspectName": "status"}]), URN, None)
