from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DataJobInfoClass,
    DatasetPropertiesClass,
    EditableSchemaFieldInfoClass,
    EditableSchemaMetadataClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermsClass,
    MLFeaturePropertiesClass,
    MLModelPropertiesClass,
    OtherSchemaClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StringTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    TagAssociationClass,
)

from mlcopilot.checks import load_checks
from mlcopilot.checks.pii_exposure import Marker, PiiExposure, PiiExposureConfig
from mlcopilot.errors import ConfigError
from mlcopilot.model import UNKNOWN_USAGE, ColumnUsage
from mlcopilot.protocols import CheckContext
from tests.checks.conftest import MakeNode

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
FEATURE = "urn:li:mlFeature:(customer_features,email_domain)"
JOB = "urn:li:dataJob:(urn:li:dataFlow:(airflow,etl,PROD),load_customers)"

FEEDS_ALL = ColumnUsage(whole=True)
ONLY_USER_ID = ColumnUsage(columns=frozenset({"user_id"}), complete=True)
_STAMP = AuditStampClass(time=0, actor="urn:li:corpuser:datahub")


def tags(*names: str) -> GlobalTagsClass:
    return GlobalTagsClass(tags=[TagAssociationClass(tag=f"urn:li:tag:{n}") for n in names])


def terms(*names: str) -> GlossaryTermsClass:
    return GlossaryTermsClass(
        terms=[GlossaryTermAssociationClass(urn=f"urn:li:glossaryTerm:{n}") for n in names],
        auditStamp=_STAMP,
    )


def col(path: str, *, tag: str | None = None, term: str | None = None) -> SchemaFieldClass:
    return SchemaFieldClass(
        fieldPath=path,
        # The SDK's generated __init__ has no annotations.
        type=SchemaFieldDataTypeClass(type=StringTypeClass()),  # type: ignore[no-untyped-call]
        nativeDataType="varchar",
        globalTags=tags(tag) if tag else None,
        glossaryTerms=terms(term) if term else None,
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


def model_properties(**values: str | float) -> StructuredPropertiesClass:
    return StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(
                propertyUrn=f"urn:li:structuredProperty:io.mlcopilot.{name}", values=[value]
            )
            for name, value in values.items()
        ]
    )


UNJUSTIFIED: list[Any] = [MLModelPropertiesClass()]
JUSTIFIED = [MLModelPropertiesClass(), model_properties(piiJustification="DPIA-2026-014")]
PLAIN_SCHEMA = schema(col("user_id"), col("email"))
EMAIL_TAGGED = schema(col("user_id"), col("email", tag="PII"))

# (severity, field, facts the message must state)
CASES = [
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [tags("PII"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["dataset `raw.customers`", "tagged PII", "no PII justification"])],
        None,
        id="tagged-dataset-is-high",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [tags("pii"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["tagged pii"])],
        None,
        id="tag-names-match-case-insensitively",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [terms("Classification.Confidential"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("low", None, ["glossary term Classification.Confidential", "(classified Confidential)"])],
        None,
        id="confidential-term-on-dataset-is-low-the-third-level",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [tags("Finance"), terms("Classification.Public"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [],
        None,
        id="other-tags-and-terms-are-not-pii",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [EMAIL_TAGGED],
        FEEDS_ALL,
        [("high", "email", ["column `email`", "tagged PII", "feeds the model"])],
        None,
        id="pii-column-feeding-the-model-is-high",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [
            PLAIN_SCHEMA,
            EditableSchemaMetadataClass(
                editableSchemaFieldInfo=[
                    EditableSchemaFieldInfoClass(fieldPath="email", globalTags=tags("PII"))
                ]
            ),
        ],
        FEEDS_ALL,
        [("high", "email", ["column `email`", "tagged PII"])],
        None,
        id="pii-tag-added-in-the-datahub-ui-counts",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [schema(col("user_id"), col("ssn", term="Classification.PII"))],
        UNKNOWN_USAGE,
        [("medium", "ssn", ["column `ssn`", "may reach the model"])],
        None,
        id="pii-column-with-unknown-lineage-may-reach-medium",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [schema(col("user_id"), col("ssn", term="Classification.HighlyConfidential"))],
        UNKNOWN_USAGE,
        [("low", "ssn", ["(classified Sensitive)", "may reach the model"])],
        None,
        id="sensitive-column-that-may-reach-is-one-step-lower",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [EMAIL_TAGGED],
        ONLY_USER_ID,
        [],
        None,
        id="pii-column-proven-unused-by-column-lineage-is-fine",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        FEATURE,
        [MLFeaturePropertiesClass(), tags("PII")],
        UNKNOWN_USAGE,
        [("high", None, ["ML feature `email_domain`", "tagged PII"])],
        None,
        id="tagged-ml-feature-is-high",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        FEATURE,
        [MLFeaturePropertiesClass(), tags("Sensitive")],
        UNKNOWN_USAGE,
        [("medium", None, ["tagged Sensitive", "(classified Sensitive)"])],
        None,
        id="sensitive-ml-feature-is-medium-the-second-level",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [DatasetPropertiesClass(), tags("PII")],
        FEEDS_ALL,
        [("high", None, ["tagged PII"])],
        "no schemaMetadata: field-level PII cannot be checked",
        id="dataset-without-schema-is-unknown-but-entity-pii-reported",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        DATASET,
        [],
        FEEDS_ALL,
        [],
        "not in the catalog (referenced by lineage only)",
        id="dataset-missing-from-catalog-is-unknown",
    ),
    pytest.param(
        {},
        UNJUSTIFIED,
        JOB,
        [DataJobInfoClass(name="load", type="COMMAND"), tags("PII")],
        FEEDS_ALL,
        [],
        None,
        id="data-jobs-are-not-checked",
    ),
    pytest.param(
        {},
        JUSTIFIED,
        DATASET,
        [tags("PII"), EMAIL_TAGGED],
        FEEDS_ALL,
        [],
        None,
        id="justified-model-has-no-findings",
    ),
    pytest.param(
        {},
        [
            MLModelPropertiesClass(),
            model_properties(piiJustification="DPIA-1", piiJustificationExpires="2027-06-30"),
        ],
        DATASET,
        [EMAIL_TAGGED],
        FEEDS_ALL,
        [],
        None,
        id="justification-until-a-future-date-holds",
    ),
    pytest.param(
        {},
        [
            MLModelPropertiesClass(),
            model_properties(piiJustification="DPIA-1", piiJustificationExpires="2026-11-01"),
        ],
        DATASET,
        [EMAIL_TAGGED],
        FEEDS_ALL,
        [("high", "email", ["PII justification expired on 2026-11-01"])],
        None,
        id="expired-justification-iso-date",
    ),
    pytest.param(
        {},
        [
            MLModelPropertiesClass(),
            model_properties(
                piiJustification="DPIA-1",
                piiJustificationExpires=float(datetime(2026, 1, 15, tzinfo=UTC).timestamp() * 1000),
            ),
        ],
        DATASET,
        [tags("PII"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["expired on 2026-01-15"])],
        None,
        id="expired-justification-epoch-millis",
    ),
    pytest.param(
        {},
        [
            MLModelPropertiesClass(),
            model_properties(piiJustification="DPIA-1", piiJustificationExpires="next spring"),
        ],
        DATASET,
        [tags("PII"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["unreadable expiry 'next spring'"])],
        None,
        id="unreadable-expiry-does-not-justify",
    ),
    pytest.param(
        {},
        [MLModelPropertiesClass(), model_properties(piiJustification="  ")],
        DATASET,
        [tags("PII"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["no PII justification"])],
        None,
        id="blank-justification-does-not-justify",
    ),
    pytest.param(
        {"tags": ["GDPR"], "replace_defaults": True},
        UNJUSTIFIED,
        DATASET,
        [tags("PII"), schema(col("user_id"), col("email", tag="GDPR"))],
        FEEDS_ALL,
        [("high", "email", ["tagged GDPR"])],
        None,
        id="configured-tags-replace-the-defaults",
    ),
    pytest.param(
        {"tags": ["security:pii"], "terms": ["Classification.Restricted"]},
        UNJUSTIFIED,
        DATASET,
        [
            tags("PII"),
            schema(
                col("email", tag="security:pii"),
                col("ssn", term="Classification.Restricted"),
                col("user_id"),
            ),
        ],
        FEEDS_ALL,
        [
            ("high", None, ["tagged PII"]),
            ("high", "email", ["tagged security:pii"]),
            ("high", "ssn", ["glossary term Classification.Restricted"]),
        ],
        None,
        id="configured-tags-and-terms-extend-the-defaults",
    ),
    pytest.param(
        {"tags": ["urn:li:tag:Restricted"]},
        UNJUSTIFIED,
        DATASET,
        [tags("Restricted"), PLAIN_SCHEMA],
        FEEDS_ALL,
        [("high", None, ["tagged Restricted"])],
        None,
        id="configured-tag-given-as-urn",
    ),
]


@pytest.mark.parametrize(
    ("config", "model_aspects", "urn", "aspects", "usage", "expected", "unknown"), CASES
)
def test_pii_exposure(
    make_node: MakeNode,
    config: dict[str, Any],
    model_aspects: list[Any],
    urn: str,
    aspects: list[Any],
    usage: ColumnUsage,
    expected: list[tuple[str, str | None, list[str]]],
    unknown: str | None,
) -> None:
    check = PiiExposure(PiiExposureConfig.model_validate(config))
    ctx = CheckContext(
        model=make_node(MODEL, *model_aspects),
        path=(MODEL, urn),
        now=NOW,
        usage=usage,
        baseline=None,
    )

    outcome = check.run(make_node(urn, *aspects), ctx)

    assert outcome.unknown == unknown
    assert [(f.severity, f.field) for f in outcome.findings] == [e[:2] for e in expected]
    for finding, (*_, facts) in zip(outcome.findings, expected, strict=True):
        assert finding.check == "pii_exposure"
        assert finding.entity == urn
        assert finding.change is None
        assert finding.previous_field is None
        for fact in facts:
            assert fact in finding.message


def test_evidence_names_the_matching_tags_and_terms(make_node: MakeNode) -> None:
    node = make_node(
        DATASET,
        tags("PII", "Finance"),
        terms("Classification.PII"),
        schema(col("email", tag="Sensitive")),
    )
    ctx = CheckContext(
        model=make_node(MODEL, *UNJUSTIFIED),
        path=(MODEL, DATASET),
        now=NOW,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )

    entity, column = PiiExposure(PiiExposureConfig()).run(node, ctx).findings

    assert entity.evidence == {
        "classification": "PII",
        "tags": ["urn:li:tag:PII"],
        "terms": ["urn:li:glossaryTerm:Classification.PII"],
    }
    assert column.evidence == {
        "classification": "Sensitive",
        "tags": ["urn:li:tag:Sensitive"],
        "terms": [],
        "feeds_model": "unknown",
    }


def test_replacing_the_defaults_with_nothing_is_refused() -> None:
    with pytest.raises(ConfigError, match="replace_defaults = true needs at least one"):
        load_checks({"pii_exposure": {"replace_defaults": True}})


def test_configured_markers_extend_the_builtin_ones() -> None:
    config = PiiExposureConfig(tags=["gdpr"])
    assert Marker("gdpr", 0) in config.tag_markers()
    assert Marker("PII", 0) in config.tag_markers()
    assert PiiExposureConfig(tags=["x"], replace_defaults=True).tag_markers() == (Marker("x", 0),)
    assert PiiExposureConfig(tags=["x"], replace_defaults=True).term_markers() == ()
