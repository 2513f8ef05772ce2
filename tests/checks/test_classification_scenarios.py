"""pii_exposure on each classification shape, through every backend.

The shapes DataHub's connectors write (Snowflake's qualified tags, Lake Formation's
``key:value``, BigID's tags and its column terms on a dataset without a schema, dbt's prefixed
tags and meta-mapped terms, DataHub's classifier terms) are loaded into ``lite:``, the stand-in
GMS (``datahub:``) and ``mcp-server-datahub`` over it (``mcp:``); every backend must give the
check the same nodes, so the findings are the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.checks.pii_exposure import PiiExposure, PiiExposureConfig
from mlcopilot.model import ColumnUsage, EntityType, Node
from mlcopilot.protocols import Catalog, CheckContext
from testing.builders import dataset, dataset_urn, model_urn
from tests.checks.backends import BACKENDS, PARAMS

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = model_urn("churn")

SNOWFLAKE = dataset_urn("prod.sales.customers", platform="snowflake")
GLUE = dataset_urn("lake.orders", platform="glue")
BIGID_TAGGED = dataset_urn("public.customers", platform="postgres")
BIGID_COLUMNS = dataset_urn("public.orders", platform="postgres")
DBT = dataset_urn("analytics.users", platform="dbt")
CLASSIFIED = dataset_urn("raw.contacts", platform="mysql")
MARKETPLACE = dataset_urn("shared.listing", platform="snowflake")
AS_PROPERTIES = dataset_urn("prod.hr.staff", platform="snowflake")

FIELDS = [("id", "number"), ("email", "string")]
MCPS: list[MetadataChangeProposalWrapper] = [
    # Snowflake: tags are <db>.<schema>.<tag>:<value>, lower-cased
    *dataset(
        "prod.sales.customers",
        platform="snowflake",
        fields=FIELDS,
        tags=["prod.sales.security:pii"],
        field_tags={"email": ["snowflake.core.privacy_category:identifier"]},
    ),
    # Lake Formation (Glue): key:value as set, on a column
    *dataset(
        "lake.orders",
        platform="glue",
        fields=FIELDS,
        field_tags={"email": ["DataClassification:Sensitive"]},
    ),
    # BigID: a dataset tag, and column terms on a dataset no schema was ingested for
    *dataset(
        "public.customers", platform="postgres", fields=FIELDS, tags=["bigid.Classification:PII"]
    ),
    *dataset(
        "public.orders",
        platform="postgres",
        editable_field_terms={"customer_email": ["Email_Address"]},
        editable_field_tags={"region": ["bigid.DataClass:Internal"]},
    ),
    # dbt: its tag prefix, and a term its meta mapping adds
    *dataset(
        "analytics.users",
        platform="dbt",
        fields=FIELDS,
        tags=["dbt:has_pii"],
        field_terms={"email": ["pii"]},
    ),
    # DataHub's own classifier: the info type as a term; a confidential column edited in the UI
    *dataset(
        "raw.contacts",
        platform="mysql",
        fields=[*FIELDS, ("notes", "string")],
        field_terms={"email": ["Email_Address"]},
        editable_field_terms={"notes": ["Classification.Confidential"]},
    ),
    # Snowflake with extract_tags_as_structured_properties: the tag becomes a property
    *dataset(
        "prod.hr.staff",
        platform="snowflake",
        fields=FIELDS,
        structured_properties={"snowflake.prod.hr.security": ["pii"], "io.mlcopilot.x": [1]},
    ),
    # What Snowflake's marketplace tags: no classification
    *dataset("shared.listing", platform="snowflake", fields=FIELDS, tags=["Marketplace:Imported"]),
]

EXPECTED = {
    SNOWFLAKE: [(None, "high", "PII"), ("email", "high", "PII")],
    GLUE: [("email", "medium", "Sensitive")],
    BIGID_TAGGED: [(None, "high", "PII")],
    BIGID_COLUMNS: [("customer_email", "high", "PII")],
    DBT: [(None, "high", "PII"), ("email", "high", "PII")],
    CLASSIFIED: [("email", "high", "PII"), ("notes", "low", "Confidential")],
    MARKETPLACE: [],
    AS_PROPERTIES: [(None, "high", "PII")],
}


@pytest.fixture(params=PARAMS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    made = BACKENDS[request.param](tmp_path / "catalog", MCPS)
    yield made
    made.close()


def findings_of(node: Node) -> list[tuple[str | None, str, str]]:
    ctx = CheckContext(
        model=Node(urn=MODEL, entity_type=EntityType.ML_MODEL, name="churn"),
        path=(MODEL, node.urn),
        now=NOW,
        usage=ColumnUsage(whole=True),
        baseline=None,
    )
    outcome = PiiExposure(PiiExposureConfig()).run(node, ctx)
    return [
        (f.field, f.severity.value, str(f.evidence["classification"])) for f in outcome.findings
    ]


def test_every_classification_shape_on_every_backend(catalog: Catalog) -> None:
    nodes = catalog.nodes(sorted(EXPECTED))

    assert {urn: findings_of(node) for urn, node in nodes.items()} == EXPECTED


def test_columns_without_a_schema_reach_the_check_on_every_backend(catalog: Catalog) -> None:
    node = catalog.nodes([BIGID_COLUMNS])[BIGID_COLUMNS]

    assert node.schema is None
    assert {c.path: (c.tags, c.terms) for c in node.annotated_columns} == {
        "customer_email": (frozenset(), frozenset({"urn:li:glossaryTerm:Email_Address"})),
        "region": (frozenset({"urn:li:tag:bigid.DataClass:Internal"}), frozenset()),
    }
