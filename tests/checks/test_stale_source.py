from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    DatasetPropertiesClass,
    MLFeaturePropertiesClass,
    MLModelPropertiesClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    TimeStampClass,
)

from mlcopilot.checks.stale_source import StaleSource, StaleSourceConfig
from mlcopilot.model import UNKNOWN_USAGE
from mlcopilot.protocols import CheckContext
from tests.checks.conftest import MakeNode

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.events,PROD)"
FEATURE = "urn:li:mlFeature:(customer_features,tenure_days)"


def millis(hours_ago: float) -> int:
    return int((NOW - timedelta(hours=hours_ago)).timestamp() * 1000)


def operation(hours_ago: float) -> OperationClass:
    return OperationClass(
        timestampMillis=millis(hours_ago),
        lastUpdatedTimestamp=millis(hours_ago),
        operationType=OperationTypeClass.INSERT,
    )


def sla_property(value: str | float) -> StructuredPropertiesClass:
    return StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(
                propertyUrn="urn:li:structuredProperty:io.mlcopilot.freshnessSlaHours",
                values=[value],
            )
        ]
    )


def properties(
    sla: str | None = None, modified_hours_ago: float | None = None
) -> DatasetPropertiesClass:
    return DatasetPropertiesClass(
        customProperties={"freshness_sla_hours": sla} if sla is not None else {},
        lastModified=TimeStampClass(time=millis(modified_hours_ago))
        if modified_hours_ago is not None
        else None,
    )


# expected: (severity, facts the message must state) or None
CASES = [
    pytest.param(
        {},
        [properties(), sla_property(24.0), operation(30)],
        (
            "medium",
            [
                "last updated 2026-11-28 06:00 UTC",
                "SLA is 24 hours",
                "overdue since 2026-11-29 06:00 UTC",
            ],
        ),
        None,
        id="older-than-sla-is-medium",
    ),
    pytest.param(
        {},
        [properties(), sla_property(24.0), operation(51)],
        (
            "high",
            [
                "last updated 2026-11-27 09:00 UTC",
                "SLA is 24 hours",
                "overdue since 2026-11-28 09:00 UTC",
            ],
        ),
        None,
        id="older-than-twice-the-sla-is-high",
    ),
    pytest.param(
        {},
        [properties(), sla_property(24.0), operation(10)],
        None,
        None,
        id="within-sla-is-fine",
    ),
    pytest.param(
        {},
        [properties(sla="12", modified_hours_ago=20)],
        ("medium", ["overdue since 2026-11-29 04:00 UTC", "SLA is 12 hours"]),
        None,
        id="sla-from-custom-property-and-last-modified",
    ),
    pytest.param(
        {},
        [properties(sla="12"), sla_property(48.0), operation(30)],
        None,
        None,
        id="structured-property-wins-over-custom-property",
    ),
    pytest.param(
        {},
        [properties(), sla_property("1.5"), operation(2)],
        ("medium", ["overdue since 2026-11-29 11:30 UTC", "SLA is 1.5 hours"]),
        None,
        id="numeric-string-sla",
    ),
    pytest.param(
        {"default_sla_hours": 6},
        [properties(), operation(7.5)],
        ("medium", ["overdue since 2026-11-29 10:30 UTC", "SLA is 6 hours"]),
        None,
        id="config-default-sla-applies-when-none-declared",
    ),
    pytest.param(
        {},
        [properties()],
        None,
        None,
        id="no-sla-nothing-to-check",
    ),
    pytest.param(
        {},
        [properties(sla="daily"), operation(30)],
        None,
        "invalid freshness SLA 'daily' in custom property freshness_sla_hours",
        id="non-numeric-sla-is-unknown",
    ),
    pytest.param(
        {},
        [properties(), sla_property(0.0), operation(30)],
        None,
        "invalid freshness SLA '0.0' in structured property io.mlcopilot.freshnessSlaHours",
        id="non-positive-sla-is-unknown",
    ),
    pytest.param(
        {},
        [properties(), sla_property(24.0)],
        None,
        "no operation or lastModified timestamp",
        id="sla-without-update-time-is-unknown",
    ),
    pytest.param(
        {"default_sla_hours": 6},
        [],
        None,
        "not in the catalog (referenced by lineage only)",
        id="dataset-missing-from-catalog-is-unknown",
    ),
]


@pytest.mark.parametrize(("config", "aspects", "expected", "unknown"), CASES)
def test_stale_source(
    make_node: MakeNode,
    config: dict[str, Any],
    aspects: list[Any],
    expected: tuple[str, list[str]] | None,
    unknown: str | None,
) -> None:
    check = StaleSource(StaleSourceConfig.model_validate(config))

    outcome = check.run(make_node(DATASET, *aspects), context(make_node))

    assert outcome.unknown == unknown
    if expected is None:
        assert outcome.findings == ()
        return
    severity, facts = expected
    (finding,) = outcome.findings
    assert (finding.check, finding.severity, finding.field, finding.change) == (
        "stale_source",
        severity,
        None,
        None,
    )
    for fact in facts:
        assert fact in finding.message


def test_only_datasets_are_checked(make_node: MakeNode) -> None:
    check = StaleSource(StaleSourceConfig(default_sla_hours=1))

    outcome = check.run(make_node(FEATURE, MLFeaturePropertiesClass()), context(make_node))

    assert outcome.findings == ()
    assert outcome.unknown is None


def test_evidence(make_node: MakeNode) -> None:
    node = make_node(DATASET, properties(), sla_property(24.0), operation(30.04))

    (finding,) = StaleSource(StaleSourceConfig()).run(node, context(make_node)).findings

    assert finding.evidence == {
        "last_updated": "2026-11-28T05:57:36+00:00",
        "sla_hours": 24.0,
        "overdue_since": "2026-11-29T05:57:36+00:00",
        "sla_source": "structured property io.mlcopilot.freshnessSlaHours",
    }


def test_default_sla_must_be_positive() -> None:
    with pytest.raises(ValueError, match="default_sla_hours"):
        StaleSourceConfig.model_validate({"default_sla_hours": 0})


def context(make_node: MakeNode) -> CheckContext:
    return CheckContext(
        model=make_node(MODEL, MLModelPropertiesClass()),
        path=(MODEL, DATASET),
        now=NOW,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )
