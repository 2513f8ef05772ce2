"""pii_exposure on classification as DataHub's connectors write it.

The shapes come from the pinned acryl-datahub's connectors (Snowflake's qualified
``<db>.<schema>.<tag>:<value>``, Lake Formation's and Unity's ``key:value``, BigID's
``bigid.<attribute>:<value>``, dbt's ``dbt:`` tag prefix and meta-mapped terms, the terms
DataHub's classifier names after info types) and from the golden files, loaded as a user
loads them (``catalog load``).
"""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    EditableSchemaFieldInfoClass,
    EditableSchemaMetadataClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermsClass,
    MLModelPropertiesClass,
    StatusClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    TagAssociationClass,
)

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import load_checks
from mlcopilot.checks.pii_exposure import PiiExposure, PiiExposureConfig, normalized
from mlcopilot.errors import ConfigError
from mlcopilot.model import UNKNOWN_USAGE, ColumnUsage, Node
from mlcopilot.protocols import CheckContext
from tests.checks.conftest import MakeNode
from tests.conftest import SAMPLES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:snowflake,prod.sales.customers,PROD)"
GOLDEN = SAMPLES / "golden"
README = Path(__file__).resolve().parents[2] / "README.md"
_STAMP = AuditStampClass(time=0, actor="urn:li:corpuser:datahub")


def tagged(*names: str) -> GlobalTagsClass:
    return GlobalTagsClass(tags=[TagAssociationClass(tag=f"urn:li:tag:{n}") for n in names])


def termed(*names: str) -> GlossaryTermsClass:
    return GlossaryTermsClass(
        terms=[GlossaryTermAssociationClass(urn=f"urn:li:glossaryTerm:{n}") for n in names],
        auditStamp=_STAMP,
    )


def context(make_node: MakeNode, usage: ColumnUsage = UNKNOWN_USAGE) -> CheckContext:
    return CheckContext(
        model=make_node(MODEL, MLModelPropertiesClass()),
        path=(MODEL, DATASET),
        now=NOW,
        usage=usage,
        baseline=None,
    )


def verdict(check: PiiExposure, node: Node, ctx: CheckContext) -> list[tuple[str, str | None]]:
    """(severity, classification) of each finding."""
    return [
        (f.severity.value, str(f.evidence.get("classification")))
        for f in check.run(node, ctx).findings
    ]


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        # Snowflake: a tag's urn is <db>.<schema>.<name>:<value>, lower-cased by default
        ("prod_db.governance.security:pii", [("high", "PII")]),
        ("PROD_DB.GOVERNANCE.SECURITY:PII", [("high", "PII")]),  # convert_urns_to_lowercase off
        ("prod_db.governance.pii:true", [("high", "PII")]),
        ("prod_db.governance.pii:false", []),
        ("snowflake.core.privacy_category:identifier", [("high", "PII")]),
        ("snowflake.core.privacy_category:quasi_identifier", [("high", "PII")]),
        ("snowflake.core.privacy_category:sensitive", [("medium", "Sensitive")]),
        # Lake Formation and Unity Catalog: key:value as the tag was set
        ("DataClassification:Sensitive", [("medium", "Sensitive")]),
        ("DataClassification:Confidential", [("low", "Confidential")]),
        ("DataClassification:PII", [("high", "PII")]),
        ("DataClassification:Public", []),
        # BigID: bigid.<attribute>:<value>
        ("bigid.Classification:PII", [("high", "PII")]),
        ("bigid.DataClass:Internal", []),
        ("bigid.confidence:HIGH", []),
        # dbt: its tags get the dbt: prefix
        ("dbt:pii", [("high", "PII")]),
        ("dbt:has_pii", [("high", "PII")]),
        # the same marker spelt otherwise
        ("Security_PII", [("high", "PII")]),
        ("SECURITY.PII", [("high", "PII")]),
        ("Highly Confidential", [("medium", "Sensitive")]),
        # a tail never starts inside a word
        ("no_pii", []),
        ("nonconfidential", []),
        ("Marketplace:Imported", []),  # what Snowflake's marketplace golden file tags
    ],
)
def test_tag_shapes(make_node: MakeNode, tag: str, expected: list[tuple[str, str]]) -> None:
    check = PiiExposure(PiiExposureConfig())
    node = make_node(DATASET, StatusClass(removed=False), tagged(tag))

    assert verdict(check, node, context(make_node)) == expected


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("Classification.PII", [("high", "PII")]),
        ("Classification.Sensitive", [("medium", "Sensitive")]),
        ("Classification.HighlyConfidential", [("medium", "Sensitive")]),
        ("Classification.Confidential", [("low", "Confidential")]),
        ("Classification.Public", []),
        ("pii", [("high", "PII")]),  # dbt meta mapping: add_term pii
        ("Email_Address", [("high", "PII")]),  # DataHub's classifier: the info type
        ("US_Social_Security_Number", [("high", "PII")]),
        ("Swift_Code", []),
    ],
)
def test_term_shapes(make_node: MakeNode, term: str, expected: list[tuple[str, str]]) -> None:
    check = PiiExposure(PiiExposureConfig())
    node = make_node(DATASET, StatusClass(removed=False), termed(term))

    assert verdict(check, node, context(make_node)) == expected


def test_the_most_sensitive_marker_sets_the_level_and_all_are_named(make_node: MakeNode) -> None:
    check = PiiExposure(PiiExposureConfig())
    node = make_node(
        DATASET,
        tagged("DataClassification:Confidential", "dbt:pii", "Finance"),
        termed("Classification.Sensitive"),
    )

    (finding,) = check.run(node, context(make_node)).findings

    assert finding.severity.value == "high"
    assert finding.evidence == {
        "classification": "PII",
        "tags": ["urn:li:tag:DataClassification:Confidential", "urn:li:tag:dbt:pii"],
        "terms": ["urn:li:glossaryTerm:Classification.Sensitive"],
    }
    assert "tagged DataClassification:Confidential, dbt:pii" in finding.message
    assert "(classified PII)" in finding.message


def test_tags_written_as_structured_properties_are_markers(make_node: MakeNode) -> None:
    # Snowflake ingestion with extract_tags_as_structured_properties: tag security = PII on
    # prod.governance becomes the property snowflake.prod.governance.security.
    check = PiiExposure(PiiExposureConfig())
    properties = StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(
                propertyUrn="urn:li:structuredProperty:snowflake.prod.governance.security",
                values=["PII"],
            ),
            StructuredPropertyValueAssignmentClass(
                propertyUrn="urn:li:structuredProperty:io.mlcopilot.freshnessSlaHours",
                values=[24.0],
            ),
        ]
    )

    (finding,) = check.run(make_node(DATASET, properties), context(make_node)).findings

    assert finding.severity.value == "high"
    assert "has structured property snowflake.prod.governance.security = PII" in finding.message
    assert finding.evidence["properties"] == ["snowflake.prod.governance.security = PII"]


def test_normalisation_ignores_case_separators_and_percent_encoding() -> None:
    assert normalized("security:pii") == normalized("Security_PII") == "securitypii"
    assert normalized("DataClassification") == normalized("data_classification")
    assert normalized("Email%20Address") == normalized("Email_Address")


@pytest.mark.parametrize(
    ("config", "tag", "term", "expected"),
    [
        ({"terms": ["Classification.*"]}, None, "Classification.Restricted", [("high", "PII")]),
        ({"terms": ["Classification.*"]}, None, "Finance.Revenue", []),
        (
            {"tags": {"Sensitive": ["finance:salary*"]}},
            "hr.finance:Salary_Band",
            None,
            [("medium", "Sensitive")],
        ),
        ({"tags": ["urn:li:tag:gdpr"]}, "GDPR", None, [("high", "PII")]),
        # a term whose urn is an id (BigID's, the UI's): named by its urn
        (
            {"terms": ["urn:li:glossaryTerm:fa48e094409c7e0b93e0104e7bc0c4b2"]},
            None,
            "fa48e094409c7e0b93e0104e7bc0c4b2",
            [("high", "PII")],
        ),
        ({"ranking": ["PII"]}, "DataClassification:Sensitive", None, []),
        (
            {"ranking": ["Restricted", "PII"], "tags": {"Restricted": ["*:restricted"]}},
            "DataClassification:PII",
            None,
            [("medium", "PII")],
        ),
        ({"tags": ["GDPR"], "replace_defaults": True}, "security:pii", None, []),
    ],
)
def test_configured_markers(
    make_node: MakeNode,
    config: dict[str, Any],
    tag: str | None,
    term: str | None,
    expected: list[tuple[str, str]],
) -> None:
    check = PiiExposure(PiiExposureConfig.model_validate(config))
    aspects: list[Any] = [StatusClass(removed=False)]
    if tag:
        aspects.append(tagged(tag))
    if term:
        aspects.append(termed(term))

    assert verdict(check, make_node(DATASET, *aspects), context(make_node)) == expected


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"tags": {"Secret": ["x"]}}, "tags names level 'Secret', which is not in the ranking"),
        ({"ranking": ["PII", "pii"]}, "ranking names level 'pii' twice"),
        ({"ranking": []}, "ranking"),
        ({"replace_defaults": True, "tags": {"PII": []}}, "needs at least one of tags or terms"),
    ],
)
def test_bad_configs_are_refused(config: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_checks({"pii_exposure": config})


def test_columns_of_a_dataset_without_schema_metadata_are_checked(make_node: MakeNode) -> None:
    node = make_node(
        DATASET,
        StatusClass(removed=False),
        EditableSchemaMetadataClass(
            editableSchemaFieldInfo=[
                EditableSchemaFieldInfoClass(fieldPath="email", glossaryTerms=termed("PII")),
                EditableSchemaFieldInfoClass(fieldPath="region", description="sales region"),
            ]
        ),
    )
    check = PiiExposure(PiiExposureConfig())

    outcome = check.run(node, context(make_node, ColumnUsage(whole=True)))

    assert [(f.field, f.severity.value) for f in outcome.findings] == [("email", "high")]
    assert (
        outcome.unknown == "no schemaMetadata: only the columns other aspects annotate were checked"
    )


# --- the golden files, as `catalog load` stores them ----------------------------------------

needs_golden = pytest.mark.skipif(
    not GOLDEN.is_dir(), reason=f"DataHub's golden files not found at {GOLDEN}"
)


@pytest.fixture(scope="module")
def bigid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bigid") / "catalog.db"
    load_metadata_files(path, [GOLDEN / "test_bigid_source.json"])
    return path


@needs_golden
def test_bigid_dataset_classification_is_flagged(make_node: MakeNode, bigid: Path) -> None:
    customers = "urn:li:dataset:(urn:li:dataPlatform:snowflake,public.customers,PROD)"
    documents = "urn:li:dataset:(urn:li:dataPlatform:sharepoint,documents,PROD)"
    with LiteCatalog(bigid) as catalog:
        nodes = catalog.nodes([customers, documents])
    check = PiiExposure(PiiExposureConfig())
    ctx = context(make_node)

    (finding,) = check.run(nodes[customers], ctx).findings
    assert (finding.field, finding.severity.value) == (None, "high")
    assert "tagged bigid.Classification:PII (classified PII)" in finding.message
    # bigid.DataClass:Internal is not a classification that restricts use
    assert check.run(nodes[documents], ctx).findings == ()


@needs_golden
def test_bigid_column_terms_without_a_schema_are_visible(make_node: MakeNode, bigid: Path) -> None:
    orders = "urn:li:dataset:(urn:li:dataPlatform:postgres,public.orders,PROD)"
    email_term = "urn:li:glossaryTerm:fa48e094409c7e0b93e0104e7bc0c4b2"  # "Email Address"
    with LiteCatalog(bigid) as catalog:
        node = catalog.nodes([orders])[orders]
    assert node.schema is None
    assert {c.path: c.terms for c in node.annotated_columns}["customer_email"] == {email_term}
    # BigID's term urns are ids: its Email Address term is named by urn in the config.
    check = PiiExposure(PiiExposureConfig(terms=[email_term]))

    outcome = check.run(node, context(make_node, ColumnUsage(whole=True)))

    assert [(f.field, f.severity.value) for f in outcome.findings] == [("customer_email", "high")]
    assert outcome.unknown == (
        "no schemaMetadata: only the columns other aspects annotate were checked"
    )


def test_the_readme_example_loads() -> None:
    section = README.read_text(encoding="utf-8").split("\n## What it checks\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", section, re.DOTALL) if "pii" in b]
    (check,) = [
        c for c in load_checks(tomllib.loads(block)["checks"]) if isinstance(c, PiiExposure)
    ]
    assert check.config.ranking == ["PII", "Sensitive", "Confidential"]
