"""Two spellings of one type are not a retype (issue 25, item 7): the table and schema drift.

A dbt manifest, a connector and a person spell one type differently (``long``/``bigint``,
``string``/``varchar``, ``long``/``LONG``, Snowflake's ``INT``/``NUMBER(38,0)``); schema drift
and ``mlcopilot impact`` report a retype only when the logical type changes.
"""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import SchemaFieldClass

from mlcopilot.checks.column_types import platform_of, same_type, type_family
from mlcopilot.checks.schema_drift import SchemaDrift, SchemaDriftConfig
from mlcopilot.model import SchemaField
from tests.checks.conftest import MakeNode
from tests.checks.test_schema_drift import DATASET, FEEDS_ALL, col, context, schema


def field(native: str, logical: str = "NumberType") -> SchemaField:
    return SchemaField("x", logical, native, "", 0)


@pytest.mark.parametrize(
    ("platform", "old", "new"),
    [
        ("hive", "long", "bigint"),
        ("hive", "long", "LONG"),
        ("hive", "string", "varchar"),
        ("hive", "string", "STRING"),
        ("hive", "varchar(20)", "string"),
        ("hive", "double", "DOUBLE PRECISION"),
        ("hive", "array<long>", "ARRAY<BIGINT>"),
        ("hive", "struct<a:long,b:string>", "struct<a: bigint, b: varchar(10)>"),
        ("spark", "int", "integer"),
        ("postgres", "int8", "bigint"),
        ("postgres", "character varying(255)", "text"),
        ("postgres", "timestamp with time zone", "timestamptz"),
        ("postgres", "float", "double precision"),
        ("postgres", "numeric", "numeric(10,2)"),
        ("snowflake", "NUMBER(38,0)", "int"),
        ("snowflake", "NUMBER(38,0)", "BIGINT"),
        ("snowflake", "VARCHAR(16777216)", "string"),
        ("snowflake", "FLOAT", "double"),
        ("snowflake", "TIMESTAMP_NTZ", "datetime"),
        ("bigquery", "INT64", "integer"),
        ("bigquery", "FLOAT64", "float"),
        ("bigquery", "TIMESTAMP", "timestamp_tz"),
        ("mysql", "tinyint(1)", "boolean"),
        ("mysql", "INT(11)", "integer"),
        ("mysql", "DATETIME(6)", "datetime"),
        (None, "geography", "GEOGRAPHY"),  # unknown to the table: case and spaces only
    ],
)
def test_spellings_of_one_type_are_one_type(platform: str | None, old: str, new: str) -> None:
    assert same_type(field(old), field(new), platform)


@pytest.mark.parametrize(
    ("platform", "old", "new"),
    [
        ("hive", "int", "bigint"),  # 32 to 64 bits
        ("hive", "long", "string"),
        ("hive", "float", "double"),
        ("hive", "date", "timestamp"),
        ("hive", "array<long>", "array<string>"),
        ("postgres", "timestamp", "timestamptz"),
        ("postgres", "float", "real"),  # PostgreSQL's float is double precision
        ("postgres", "decimal(10,2)", "decimal(10,4)"),
        ("postgres", "char(10)", "varchar(10)"),  # padded or not
        ("snowflake", "NUMBER(38,0)", "NUMBER(10,2)"),
        ("bigquery", "DATETIME", "TIMESTAMP"),  # a wall time, an instant
        ("mysql", "long", "bigint"),  # MySQL's LONG is MEDIUMTEXT
        ("mysql", "datetime", "timestamp"),
        (None, "long", "frobnicator"),  # known to unknown
        (None, "geography", "geometry"),
    ],
)
def test_a_change_of_logical_type_is_a_retype(platform: str | None, old: str, new: str) -> None:
    assert not same_type(field(old), field(new), platform)


def test_without_native_types_datahubs_logical_types_decide() -> None:
    assert same_type(field("", "NumberType"), field("", "NumberType"))
    assert not same_type(field("", "NumberType"), field("", "StringType"))
    # Known native types decide alone: a connector's logical type mapping is not the type.
    assert same_type(field("long", "NullType"), field("bigint", "NumberType"), "hive")


def test_families_and_platforms_as_the_readme_tells_them() -> None:
    assert type_family("LONG", "hive") == "int64"
    assert type_family("INT", "snowflake") == "decimal(38,0)"
    assert type_family("timestamp(6) with time zone") == "timestamp_tz"
    assert type_family("array<struct<a:long>>") == "array<struct<a:int64>>"
    assert type_family("frobnicator") is None
    assert platform_of(DATASET) == "hive"
    assert platform_of("urn:li:mlModel:(urn:li:dataPlatform:mlflow,m,PROD)") is None


@pytest.mark.parametrize(
    ("baseline", "current"),
    [
        (col("user_id", "number", "long"), col("user_id", "number", "bigint")),
        (col("user_id", "number", "long"), col("user_id", "number", "LONG")),
        (col("email", "string", "string"), col("email", "string", "varchar(320)")),
    ],
)
def test_schema_drift_does_not_cry_wolf_on_a_spelling(
    make_node: MakeNode, baseline: SchemaFieldClass, current: SchemaFieldClass
) -> None:
    check = SchemaDrift(SchemaDriftConfig())
    node = make_node(DATASET, schema(current))
    ctx = context(make_node, FEEDS_ALL, make_node(DATASET, schema(baseline)).schema)
    assert check.run(node, ctx).findings == ()


def test_schema_drift_still_reports_a_real_retype(make_node: MakeNode) -> None:
    check = SchemaDrift(SchemaDriftConfig())
    node = make_node(DATASET, schema(col("user_id", "string", "string")))
    ctx = context(
        make_node, FEEDS_ALL, make_node(DATASET, schema(col("user_id", "number", "long"))).schema
    )
    (finding,) = check.run(node, ctx).findings
    assert finding.change == "type_changed"
    assert "changed type from long to string" in finding.message
