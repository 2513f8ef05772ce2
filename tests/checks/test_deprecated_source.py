from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    DataJobInfoClass,
    DatasetPropertiesClass,
    DeprecationClass,
    MLFeaturePropertiesClass,
    MLModelPropertiesClass,
    StatusClass,
)

from mlcopilot.checks.deprecated_source import DeprecatedSource, DeprecatedSourceConfig
from mlcopilot.model import UNKNOWN_USAGE
from mlcopilot.protocols import CheckContext
from tests.checks.conftest import MakeNode

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
UPSTREAM_MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,embeddings,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
REPLACEMENT = "urn:li:dataset:(urn:li:dataPlatform:hive,core.customers,PROD)"
FEATURE = "urn:li:mlFeature:(customer_features,tenure_days)"
JOB = "urn:li:dataJob:(urn:li:dataFlow:(airflow,etl,PROD),load_customers)"


def deprecated(
    note: str = "", *, days: float | None = None, replacement: str | None = None
) -> DeprecationClass:
    """A deprecation aspect; ``days`` until decommissioning (negative: already past)."""
    when = None if days is None else int((NOW + timedelta(days=days)).timestamp() * 1000)
    return DeprecationClass(
        deprecated=True,
        note=note,
        actor="urn:li:corpuser:data-platform",
        decommissionTime=when,
        replacement=replacement,
    )


# expected: (severity, facts the message must state) or None
CASES = [
    pytest.param(
        DATASET,
        [DatasetPropertiesClass(), StatusClass(removed=True)],
        ("critical", ["soft-deleted in DataHub (status.removed) but still upstream of the model"]),
        None,
        id="soft-deleted-is-critical",
    ),
    pytest.param(
        DATASET,
        [DatasetPropertiesClass(), StatusClass(removed=True), deprecated("old", days=-3)],
        ("critical", ["soft-deleted"]),
        None,
        id="soft-deleted-wins-over-deprecation",
    ),
    pytest.param(
        DATASET,
        [DatasetPropertiesClass(), deprecated("Moved to core", days=-59.5)],
        (
            "high",
            ["was to be decommissioned on 2026-10-01 (", "Moved to core"],
        ),
        None,
        id="past-decommission-date-is-high",
    ),
    pytest.param(
        DATASET,
        [
            DatasetPropertiesClass(),
            deprecated("Use core.customers instead", days=33.5, replacement=REPLACEMENT),
        ],
        (
            "medium",
            [
                '"Use core.customers instead"',
                "replacement: core.customers",
                "to be decommissioned on 2027-01-02",
            ],
        ),
        None,
        id="deprecated-with-future-decommission-is-medium",
    ),
    pytest.param(
        FEATURE,
        [MLFeaturePropertiesClass(), deprecated("Superseded by tenure_months")],
        ("medium", ['"Superseded by tenure_months"', "no decommission date"]),
        None,
        id="deprecated-feature-without-date-is-medium",
    ),
    pytest.param(
        JOB,
        [DataJobInfoClass(name="load", type="COMMAND"), deprecated()],
        ("medium", ["deprecated in DataHub"]),
        None,
        id="deprecated-job-is-reported",
    ),
    pytest.param(
        DATASET,
        [
            DatasetPropertiesClass(),
            DeprecationClass(deprecated=False, note="", actor="urn:li:corpuser:x"),
        ],
        None,
        None,
        id="deprecation-lifted-is-fine",
    ),
    pytest.param(DATASET, [DatasetPropertiesClass()], None, None, id="healthy-dataset"),
    pytest.param(
        DATASET,
        [],
        None,
        "not in the catalog (referenced by lineage only)",
        id="missing-from-catalog-is-unknown",
    ),
    pytest.param(
        UPSTREAM_MODEL,
        [MLModelPropertiesClass(), StatusClass(removed=True)],
        None,
        None,
        id="ml-models-are-not-checked",
    ),
]


@pytest.mark.parametrize(("urn", "aspects", "expected", "unknown"), CASES)
def test_deprecated_source(
    make_node: MakeNode,
    urn: str,
    aspects: list[Any],
    expected: tuple[str, list[str]] | None,
    unknown: str | None,
) -> None:
    outcome = DeprecatedSource(DeprecatedSourceConfig()).run(
        make_node(urn, *aspects), context(make_node, urn)
    )

    assert outcome.unknown == unknown
    if expected is None:
        assert outcome.findings == ()
        return
    severity, facts = expected
    (finding,) = outcome.findings
    assert (finding.check, finding.severity, finding.field, finding.entity) == (
        "deprecated_source",
        severity,
        None,
        urn,
    )
    for fact in facts:
        assert fact in finding.message


@pytest.mark.parametrize("days", [pytest.param(33.5, id="future"), pytest.param(-59.5, id="past")])
def test_evidence(make_node: MakeNode, days: float) -> None:
    node = make_node(
        DATASET, DatasetPropertiesClass(), deprecated("Moved", days=days, replacement=REPLACEMENT)
    )

    (finding,) = (
        DeprecatedSource(DeprecatedSourceConfig()).run(node, context(make_node, DATASET)).findings
    )

    assert finding.evidence == {
        "note": "Moved",
        "replacement": REPLACEMENT,
        "decommission_time": (NOW + timedelta(days=days)).isoformat(),
    }


def test_the_message_is_the_same_every_day(make_node: MakeNode) -> None:
    # It is written back to DataHub: a countdown would rewrite the incident daily.
    node = make_node(DATASET, DatasetPropertiesClass(), deprecated("Moved", days=33.5))
    check = DeprecatedSource(DeprecatedSourceConfig())
    today = check.run(node, context(make_node, DATASET)).findings
    tomorrow = check.run(node, context(make_node, DATASET, now=NOW + timedelta(days=1))).findings

    assert [f.message for f in today] == [f.message for f in tomorrow]
    assert [f.evidence for f in today] == [f.evidence for f in tomorrow]


def test_has_no_settings() -> None:
    with pytest.raises(ValueError, match="extra"):
        DeprecatedSourceConfig.model_validate({"grace_days": 3})


def context(make_node: MakeNode, urn: str, now: datetime = NOW) -> CheckContext:
    return CheckContext(
        model=make_node(MODEL, MLModelPropertiesClass()),
        path=(MODEL, urn),
        now=now,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )
