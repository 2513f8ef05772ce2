from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    BooleanTypeClass,
    DatasetPropertiesClass,
    MLFeaturePropertiesClass,
    MLModelPropertiesClass,
    NumberTypeClass,
    OtherSchemaClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StringTypeClass,
)

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks.schema_drift import SchemaDrift, SchemaDriftConfig
from mlcopilot.model import UNKNOWN_USAGE, ColumnUsage, Finding, Schema
from mlcopilot.protocols import CheckContext
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import open_store
from testing.builders import (
    T0,
    Field,
    MCPs,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
)
from tests.checks.conftest import MakeNode

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
FEATURE = "urn:li:mlFeature:(customer_features,tenure_days)"

_TYPES: dict[str, type[StringTypeClass | NumberTypeClass | BooleanTypeClass]] = {
    "string": StringTypeClass,
    "number": NumberTypeClass,
    "boolean": BooleanTypeClass,
}

FEEDS_ALL = ColumnUsage(whole=True)


def col(
    path: str, kind: str = "string", native: str = "varchar", description: str | None = None
) -> SchemaFieldClass:
    return SchemaFieldClass(
        fieldPath=path,
        type=SchemaFieldDataTypeClass(type=_TYPES[kind]()),
        nativeDataType=native,
        description=description,
    )


def schema(*fields: SchemaFieldClass) -> SchemaMetadataClass:
    return SchemaMetadataClass(
        schemaName="raw.customers",
        platform="urn:li:dataPlatform:hive",
        version=0,
        hash="",
        platformSchema=OtherSchemaClass(rawSchema=""),
        fields=list(fields),
    )


def context(make_node: MakeNode, usage: ColumnUsage, baseline: Schema | None) -> CheckContext:
    return CheckContext(
        model=make_node(MODEL, MLModelPropertiesClass()),
        path=(MODEL, DATASET),
        now=NOW,
        usage=usage,
        baseline=baseline,
    )


USER_ID = col("user_id", "number", "bigint")
EMAIL = col("email")
# (change, severity, field, previous_field, facts the message must state)
DRIFT_CASES = [
    pytest.param([USER_ID, EMAIL], [USER_ID, EMAIL], FEEDS_ALL, {}, [], id="unchanged-schema"),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID],
        FEEDS_ALL,
        {},
        [("removed", "critical", "email", None, ["`email`", "removed", "feeds the model"])],
        id="removed-feeding-column-is-critical",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID],
        UNKNOWN_USAGE,
        {},
        [("removed", "medium", "email", None, ["`email`", "cannot tell"])],
        id="removed-column-with-unknown-usage-is-medium",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID],
        ColumnUsage(columns=frozenset({"user_id"}), complete=True),
        {},
        [("removed", "low", "email", None, ["`email`", "does not feed the model"])],
        id="removed-column-proven-unused-is-low",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID, col("email_address")],
        FEEDS_ALL,
        {},
        [
            (
                "renamed",
                "critical",
                "email_address",
                "email",
                ["`email` was renamed to `email_address`", "confidence 0.67", "feeds the model"],
            )
        ],
        id="rename-inferred-from-type-position-and-name",
    ),
    pytest.param(
        [USER_ID, col("email", description="Contact address")],
        [USER_ID, col("contact", description="Contact address")],
        FEEDS_ALL,
        {},
        [("renamed", "critical", "contact", "email", ["renamed to `contact`"])],
        id="rename-inferred-from-same-description",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID, col("email_address")],
        ColumnUsage(columns=frozenset({"email_address"}), complete=True),
        {},
        [
            (
                "renamed",
                "low",
                "email_address",
                "email",
                ["does not feed the model", "under its new name `email_address` it feeds"],
            )
        ],
        id="rename-impact-follows-the-baseline-column-name",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [USER_ID, col("email_address")],
        FEEDS_ALL,
        {"rename_confidence": 0.9},
        [
            ("removed", "critical", "email", None, ["`email`", "removed"]),
            ("added", "low", "email_address", None, ["`email_address`", "added"]),
        ],
        id="pair-below-rename-confidence-stays-removed-and-added",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [col("is_active", "boolean", "boolean"), EMAIL],
        FEEDS_ALL,
        {},
        [
            ("removed", "critical", "user_id", None, ["`user_id`"]),
            ("added", "low", "is_active", None, ["`is_active` (boolean)"]),
        ],
        id="unrelated-columns-are-not-a-rename",
    ),
    pytest.param(
        [USER_ID, EMAIL, col("email2")],
        [USER_ID, col("email_address")],
        FEEDS_ALL,
        {},
        [
            ("renamed", "critical", "email_address", "email", ["renamed to `email_address`"]),
            ("removed", "critical", "email2", None, ["`email2`", "removed"]),
        ],
        id="each-added-column-pairs-once-best-score-first",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [col("user_id", "string", "varchar"), EMAIL],
        FEEDS_ALL,
        {},
        [
            (
                "type_changed",
                "high",
                "user_id",
                None,
                ["`user_id`", "from bigint to varchar", "feeds the model"],
            )
        ],
        id="logical-type-change-feeding-is-high",
    ),
    pytest.param(
        [USER_ID, EMAIL],
        [col("user_id", "number", "int"), EMAIL],
        UNKNOWN_USAGE,
        {},
        [("type_changed", "medium", "user_id", None, ["from bigint to int"])],
        id="native-type-change-within-same-logical-type",
    ),
    pytest.param(
        [USER_ID, col("email", native="")],
        [USER_ID, col("email", "number", native="")],
        FEEDS_ALL,
        {},
        [("type_changed", "high", "email", None, ["from StringType to NumberType"])],
        id="logical-type-change-without-native-types",
    ),
    pytest.param(
        [USER_ID, col("email", native="")],
        [USER_ID, EMAIL],
        FEEDS_ALL,
        {},
        [],
        id="native-type-becoming-known-is-not-a-change",
    ),
    pytest.param(
        [USER_ID],
        [USER_ID, EMAIL],
        FEEDS_ALL,
        {},
        [("added", "low", "email", None, ["`email`", "added"])],
        id="added-column-is-always-low",
    ),
]


@pytest.mark.parametrize(("baseline", "current", "usage", "config", "expected"), DRIFT_CASES)
def test_schema_drift(
    make_node: MakeNode,
    baseline: list[SchemaFieldClass],
    current: list[SchemaFieldClass],
    usage: ColumnUsage,
    config: dict[str, Any],
    expected: list[tuple[str, str, str, str | None, list[str]]],
) -> None:
    check = SchemaDrift(SchemaDriftConfig.model_validate(config))
    node = make_node(DATASET, schema(*current))
    ctx = context(make_node, usage, make_node(DATASET, schema(*baseline)).schema)

    outcome = check.run(node, ctx)

    assert outcome.unknown is None
    got = sorted(outcome.findings, key=lambda f: f.field or "")
    want = sorted(expected, key=lambda e: e[2])
    assert [(f.change, f.severity, f.field, f.previous_field) for f in got] == [e[:4] for e in want]
    for finding, (*_, facts) in zip(got, want, strict=True):
        assert finding.check == "schema_drift"
        assert finding.entity == DATASET
        assert finding.model == MODEL
        assert "\n" not in finding.message
        for fact in facts:
            assert fact in finding.message


def test_evidence_carries_types_position_confidence_and_impact(make_node: MakeNode) -> None:
    baseline = make_node(DATASET, schema(USER_ID, EMAIL)).schema
    node = make_node(DATASET, schema(USER_ID, col("email_address")))

    (finding,) = (
        SchemaDrift(SchemaDriftConfig()).run(node, context(make_node, FEEDS_ALL, baseline)).findings
    )

    assert finding.evidence == {
        "confidence": 0.67,
        "baseline_type": "StringType",
        "baseline_native_type": "varchar",
        "baseline_position": 1,
        "current_type": "StringType",
        "current_native_type": "varchar",
        "current_position": 1,
        "feeds_model": "yes",
    }


@pytest.mark.parametrize(
    ("urn", "aspects", "has_baseline", "unknown"),
    [
        pytest.param(DATASET, [], True, "not in the catalog", id="missing-dataset"),
        pytest.param(
            DATASET, [DatasetPropertiesClass()], True, "no schemaMetadata", id="no-schema"
        ),
        pytest.param(DATASET, [schema(USER_ID)], False, "no baseline schema yet", id="no-baseline"),
        pytest.param(FEATURE, [MLFeaturePropertiesClass()], True, None, id="not-a-dataset"),
    ],
)
def test_missing_metadata_is_unknown(
    make_node: MakeNode, urn: str, aspects: list[Any], has_baseline: bool, unknown: str | None
) -> None:
    baseline = make_node(DATASET, schema(USER_ID, EMAIL)).schema if has_baseline else None
    node = make_node(urn, *aspects)

    outcome = SchemaDrift(SchemaDriftConfig()).run(node, context(make_node, FEEDS_ALL, baseline))

    assert outcome.findings == ()
    if unknown is None:
        assert outcome.unknown is None
    else:
        assert outcome.unknown is not None
        assert unknown in outcome.unknown


def test_rename_confidence_must_be_between_0_and_1() -> None:
    with pytest.raises(ValueError, match="rename_confidence"):
        SchemaDriftConfig.model_validate({"rename_confidence": 1.5})


# --- Impact is judged under the baseline's column name: real scans of a Lite catalog --------
# raw.customers had `country` when the model was trained; since then it was removed, renamed
# to `country_code` or retyped. Its impact is decided by how `country`, the name the model
# was trained on, reaches the model, with each lineage rule's default for columns it does not
# mention; the baseline comes from the catalog's history, as in any scan.

TRAINED = T0 + timedelta(days=30)
CHANGED = T0 + timedelta(days=60)
SCANNED = T0 + timedelta(days=61)
CUSTOMERS = "raw.customers"
DAILY = "features.customer_daily"
CUSTOMERS_AT_TRAINING: list[Field] = [
    ("customer_id", "long"),
    ("signup_date", "date"),
    ("country", "string"),
    ("plan", "string"),
]
CHANGES: dict[str, tuple[list[Field], tuple[str, str, str | None]]] = {
    # change: (raw.customers now, (finding's change, field, previous_field))
    "removed": (
        [("customer_id", "long"), ("signup_date", "date"), ("plan", "string")],
        ("removed", "country", None),
    ),
    "renamed": (
        [
            ("customer_id", "long"),
            ("signup_date", "date"),
            ("country_code", "string"),
            ("plan", "string"),
        ],
        ("renamed", "country_code", "country"),
    ),
    "retyped": (
        [("customer_id", "long"), ("signup_date", "date"), ("country", "int"), ("plan", "string")],
        ("type_changed", "country", None),
    ),
}
# Severity per change when `country` feeds the model, is proven unused, or nobody can tell.
FEEDS = {"removed": "critical", "renamed": "critical", "retyped": "high"}
UNUSED = dict.fromkeys(CHANGES, "low")
UNKNOWN = dict.fromkeys(CHANGES, "medium")


def churn_model(*features: str, training_data: Sequence[str] = ()) -> MCPs:
    return ml_model(
        "churn",
        features=[feature_urn("churn_features", f) for f in features],
        training_data=training_data,
        date=TRAINED,
        observed_at=T0,
    )


def churn_feature(name: str, source: str, source_column: str | None = None) -> MCPs:
    return ml_feature(
        "churn_features", name, sources=[source], source_column=source_column, observed_at=T0
    )


def customer_daily(*column_lineage: tuple[str, str], at: datetime = T0) -> MCPs:
    """``features.customer_daily``: its columns are those ``column_lineage`` fills from raw."""
    return dataset(
        DAILY,
        fields=[(down, "string") for _, down in column_lineage],
        column_lineage=[(CUSTOMERS, up, down) for up, down in column_lineage],
        observed_at=at,
    )


LINEAGES: dict[str, tuple[MCPs, dict[str, str]]] = {
    "training data consumed whole": (churn_model(training_data=[CUSTOMERS]), FEEDS),
    "a feature records it as its source column": (
        churn_model("region") + churn_feature("region", CUSTOMERS, "country"),
        FEEDS,
    ),
    "a feature records other source columns": (
        churn_model("plan_tier") + churn_feature("plan_tier", CUSTOMERS, "plan"),
        UNUSED,
    ),
    "a feature named after it": (
        churn_model("country") + churn_feature("country", CUSTOMERS),
        FEEDS,
    ),
    "a feature named after another column": (
        churn_model("plan") + churn_feature("plan", CUSTOMERS),
        UNKNOWN,
    ),
    # The example: both features read customer_daily, whose column-level lineage covers
    # every one of its columns and never reads raw.customers.country.
    "column lineage covers customer_daily and never reads it": (
        churn_model("tenure_days", "plan")
        + churn_feature("tenure_days", DAILY, "tenure_days")
        + churn_feature("plan", DAILY)
        + customer_daily(
            ("customer_id", "customer_id"), ("signup_date", "tenure_days"), ("plan", "plan")
        ),
        UNUSED,
    ),
    "column lineage carries it into a used column": (
        churn_model("region")
        + churn_feature("region", DAILY, "region")
        + customer_daily(("customer_id", "customer_id"), ("country", "region")),
        FEEDS,
    ),
    "a dataset upstream without column lineage": (
        churn_model(training_data=["curated.customer_360"])
        + dataset(
            "curated.customer_360",
            fields=[("customer_id", "long")],
            upstreams=[CUSTOMERS],
            observed_at=T0,
        ),
        UNKNOWN,
    ),
}


def scan_customers(tmp_path: Path, lineage: MCPs, now: list[Field]) -> list[Finding]:
    """Schema drift findings on raw.customers from a dry-run scan after its schema changed."""
    mcps = [
        *dataset(CUSTOMERS, fields=CUSTOMERS_AT_TRAINING, observed_at=T0),
        *lineage,
        *dataset(CUSTOMERS, fields=now, observed_at=CHANGED),
    ]
    with (
        LiteCatalog(tmp_path / "catalog.db", create=True) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        catalog.ingest(mcps)
        result = scan(
            catalog,
            store,
            [SchemaDrift(SchemaDriftConfig())],
            ScanOptions(now=SCANNED, dry_run=True),
        )
    return [f for f in result.findings if f.entity == dataset_urn(CUSTOMERS)]


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("lineage", sorted(LINEAGES))
def test_impact_of_a_changed_column_follows_its_baseline_name(
    tmp_path: Path, lineage: str, change: str
) -> None:
    mcps, severities = LINEAGES[lineage]
    now, (kind, field, previous) = CHANGES[change]

    findings = scan_customers(tmp_path, mcps, now)

    assert [(f.change, f.field, f.previous_field, f.severity) for f in findings] == [
        (kind, field, previous, severities[change])
    ]
    assert (
        findings[0].evidence["feeds_model"]
        == {
            "critical": "yes",
            "high": "yes",
            "low": "no",
            "medium": "unknown",
        }[severities[change]]
    )


def test_a_rename_the_lineage_already_follows_is_low_and_says_so(tmp_path: Path) -> None:
    # customer_daily's column lineage was moved to the new name with the rename: the model's
    # input is fed again, from `country_code`; `country`, as trained on, no longer flows.
    lineage = (
        churn_model("region")
        + churn_feature("region", DAILY, "region")
        + customer_daily(("customer_id", "customer_id"), ("country", "region"))
        + customer_daily(("customer_id", "customer_id"), ("country_code", "region"), at=CHANGED)
    )

    (finding,) = scan_customers(tmp_path, lineage, CHANGES["renamed"][0])

    assert (finding.change, finding.severity) == ("renamed", "low")
    assert "does not feed the model" in finding.message
    assert "under its new name `country_code` it feeds the model" in finding.message
