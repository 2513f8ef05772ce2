from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    DatasetPropertiesClass,
    DomainsClass,
    MLFeaturePropertiesClass,
    MLModelPropertiesClass,
    OperationClass,
    OperationTypeClass,
    StatusClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    TimeStampClass,
)

from mlcopilot.catalog.aspects import node_from_aspects, to_json
from mlcopilot.checks import load_checks
from mlcopilot.checks.stale_source import StaleSource, StaleSourceConfig
from mlcopilot.errors import ConfigError
from mlcopilot.model import (
    UNKNOWN_USAGE,
    AssertionRun,
    AssertionState,
    CheckOutcome,
    FreshnessSchedule,
    Node,
)
from mlcopilot.protocols import CheckContext
from tests.checks.conftest import MakeNode

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
OTHER_MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,ltv,PROD)"
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
        "expectation": "structured property",
        "sla_hours": 24.0,
        "overdue_since": "2026-11-29T05:57:36+00:00",
        "sla_source": "structured property io.mlcopilot.freshnessSlaHours",
    }


def test_the_models_a_stale_dataset_feeds_share_its_message_and_evidence(
    make_node: MakeNode,
) -> None:
    """One copy per dataset, not per model: an estate's models share their upstream."""
    check = StaleSource(StaleSourceConfig())
    node = make_node(DATASET, properties(), sla_property(24.0), operation(30.04))
    other = make_node(
        "urn:li:dataset:(urn:li:dataPlatform:hive,raw.other,PROD)",
        properties(),
        sla_property(24.0),
        operation(30.04),
    )
    ltv = replace(context(make_node), model=make_node(OTHER_MODEL, MLModelPropertiesClass()))
    later = replace(context(make_node), now=NOW + timedelta(days=3))

    (first,) = check.run(node, context(make_node)).findings
    (second,) = check.run(node, ltv).findings
    (third,) = check.run(node, later).findings
    (elsewhere,) = check.run(other, context(make_node)).findings

    assert second.model != first.model
    assert second.message is first.message
    assert second.evidence is first.evidence
    assert third.message is first.message
    assert third.severity != first.severity
    assert elsewhere.evidence == first.evidence
    assert elsewhere.evidence is not first.evidence
    assert elsewhere.entity != first.entity


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


# --- where the expectation comes from: rules, freshness assertions, learned cadence --------

SNOWFLAKE = "urn:li:dataset:(urn:li:dataPlatform:snowflake,prod.sales.orders,PROD)"
MARKETING = "urn:li:domain:marketing"


def history_node(
    urn: str,
    hours_ago: Sequence[float],
    *aspects: Any,
    assertions: tuple[AssertionState, ...] | None = None,
) -> Node:
    """A dataset whose history holds updates ``hours_ago`` (in any order), as a backend reads it."""
    node = node_from_aspects(
        urn,
        {a.ASPECT_NAME: to_json(a) for a in (StatusClass(removed=False), *aspects)},
        updates=[millis(h) for h in hours_ago],
    )
    return replace(node, assertions=assertions)


def every(hours: float, count: int, *, silent_for: float) -> list[float]:
    """Updates every ``hours``, the newest ``silent_for`` hours ago."""
    return [silent_for + i * hours for i in range(count)]


def run_check(node: Node, make_node: MakeNode, **config: Any) -> CheckOutcome:
    return StaleSource(StaleSourceConfig.model_validate(config)).run(node, context(make_node))


@pytest.mark.parametrize(
    ("cadence", "silent_for", "severity"),
    [
        pytest.param(1, 2.5, None, id="hourly-within-three-intervals"),
        pytest.param(1, 3.5, "medium", id="hourly-silent-past-three-intervals"),
        pytest.param(1, 7, "high", id="hourly-silent-past-twice-that"),
        pytest.param(24, 60, None, id="daily-within"),
        pytest.param(24, 80, "medium", id="daily-silent-past-three-days"),
        pytest.param(168, 400, None, id="weekly-within-three-weeks"),
        pytest.param(168, 520, "medium", id="weekly-silent-past-three-weeks"),
    ],
)
def test_learned_cadence(
    make_node: MakeNode, cadence: float, silent_for: float, severity: str | None
) -> None:
    node = history_node(SNOWFLAKE, every(cadence, 12, silent_for=silent_for))

    outcome = run_check(node, make_node)

    assert outcome.unknown is None
    assert [f.severity.value for f in outcome.findings] == ([severity] if severity else [])


def test_learned_cadence_says_what_it_learned(make_node: MakeNode) -> None:
    node = history_node(SNOWFLAKE, every(24, 10, silent_for=80))

    (finding,) = run_check(node, make_node).findings

    assert finding.message == (
        "last updated 2026-11-26 04:00 UTC; it usually updates every 24 hours (the median of "
        "its last 9 intervals) and is expected within 3 times that, 72 hours, so it has been "
        "overdue since 2026-11-29 04:00 UTC"
    )
    assert finding.evidence == {
        "last_updated": "2026-11-26T04:00:00+00:00",
        "expectation": "learned cadence",
        "learned_interval_hours": 24.0,
        "cadence_factor": 3.0,
        "sla_hours": 72.0,
        "updates_considered": 10,
        "overdue_since": "2026-11-29T04:00:00+00:00",
    }


def test_the_median_ignores_a_few_late_runs(make_node: MakeNode) -> None:
    # Daily, with two runs days late in between: the usual interval stays a day.
    hours = [80, 104, 128, 152, 248, 272, 296, 392, 416]
    node = history_node(SNOWFLAKE, hours)

    (finding,) = run_check(node, make_node).findings

    assert finding.evidence["learned_interval_hours"] == 24.0


def test_updates_written_out_of_order_are_ordered_by_time(make_node: MakeNode) -> None:
    node = history_node(SNOWFLAKE, [75, 3, 51, 27, 99, 123])

    assert node.update_times == tuple(sorted(node.update_times or ()))
    assert node.last_updated == NOW - timedelta(hours=3)
    assert run_check(node, make_node).findings == ()


def test_a_burst_of_updates_is_one_refresh(make_node: MakeNode) -> None:
    # A daily job writing in three statements a few minutes apart is still daily.
    daily = every(24, 6, silent_for=80)
    bursts = [h - m / 60 for h in daily for m in (0, 3, 6)]
    node = history_node(SNOWFLAKE, bursts)

    (finding,) = run_check(node, make_node).findings

    assert finding.evidence["learned_interval_hours"] == 24.0
    assert finding.evidence["updates_considered"] == 6


@pytest.mark.parametrize(
    ("hours_ago", "config", "unknown"),
    [
        ([3, 27, 51], {}, "3 updates in its history, 5 needed to learn its cadence"),
        ([3, 27, 51, 75], {"min_updates": 4}, None),
        ([3], {}, None),  # one update is no history: nothing to learn, nothing to report
        ([], {}, None),
    ],
)
def test_too_little_history(
    make_node: MakeNode, hours_ago: list[float], config: dict[str, Any], unknown: str | None
) -> None:
    outcome = run_check(history_node(SNOWFLAKE, hours_ago), make_node, **config)

    assert outcome.findings == ()
    assert outcome.unknown == unknown


def test_cadence_learning_can_be_turned_off(make_node: MakeNode) -> None:
    node = history_node(SNOWFLAKE, every(1, 12, silent_for=30))

    assert run_check(node, make_node, learn_cadence=False) == CheckOutcome()
    assert run_check(node, make_node, learn_cadence=False, default_sla_hours=48).findings == ()


def test_the_default_sla_is_the_last_resort(make_node: MakeNode) -> None:
    hourly = history_node(SNOWFLAKE, every(1, 12, silent_for=5))
    unknown_cadence = history_node(SNOWFLAKE, [5, 29])

    # An hourly table silent for 5 hours is stale by its cadence, whatever the default says.
    assert [
        f.evidence["expectation"]
        for f in run_check(hourly, make_node, default_sla_hours=24).findings
    ] == ["learned cadence"]
    (finding,) = run_check(unknown_cadence, make_node, default_sla_hours=4).findings
    assert finding.evidence["expectation"] == "config default"
    assert "(config default_sla_hours)" in finding.message


@pytest.mark.parametrize(
    ("rule", "selected"),
    [
        ({"platform": "snowflake"}, True),
        ({"platform": "urn:li:dataPlatform:Snowflake"}, True),
        ({"platform": "bigquery"}, False),
        ({"name": "prod.*"}, True),
        ({"name": "PROD.SALES.*"}, True),
        ({"name": "dev.*"}, False),
        ({"platform": "snowflake", "name": "*.orders"}, True),
        ({"platform": "snowflake", "name": "*.customers"}, False),
        ({"domain": "marketing"}, True),
        ({"domain": MARKETING}, True),
        ({"domain": "finance"}, False),
    ],
)
def test_config_rules_select_by_platform_name_and_domain(
    make_node: MakeNode, rule: dict[str, Any], selected: bool
) -> None:
    node = history_node(SNOWFLAKE, [30], DomainsClass(domains=[MARKETING]))

    outcome = run_check(node, make_node, rules=[{**rule, "sla_hours": 24}])

    assert bool(outcome.findings) is selected
    if selected:
        assert outcome.findings[0].evidence["expectation"] == "config rule"
        assert "SLA is 24 hours (config rule " in outcome.findings[0].message


def test_the_first_matching_rule_wins_and_the_datasets_own_sla_wins_over_rules(
    make_node: MakeNode,
) -> None:
    rules = [{"platform": "snowflake", "sla_hours": 48}, {"name": "prod.*", "sla_hours": 1}]
    node = history_node(SNOWFLAKE, [30])
    declared = history_node(SNOWFLAKE, [30], sla_property(12.0))

    assert run_check(node, make_node, rules=rules).findings == ()
    (finding,) = run_check(declared, make_node, rules=rules).findings
    assert finding.evidence["expectation"] == "structured property"


def test_a_rule_must_select_something() -> None:
    with pytest.raises(ConfigError, match="a rule needs at least one of platform, name or domain"):
        load_checks({"stale_source": {"rules": [{"sla_hours": 24}]}})


def freshness(
    name: str,
    result: str | None,
    *,
    hours_ago: float = 1,
    every_hours: int | None = 24,
    severity: str | None = None,
    dataset: str = SNOWFLAKE,
) -> AssertionState:
    return AssertionState(
        urn=f"urn:li:assertion:{name}",
        type="FRESHNESS",
        entity=dataset,
        description=f"{name} changes daily",
        last_run=AssertionRun(
            result=result,
            at=NOW - timedelta(hours=hours_ago),
            severity=severity,
            native_results={"observed": "no change since yesterday"},
        )
        if result
        else None,
        schedule=FreshnessSchedule(type="FIXED_INTERVAL", unit="HOUR", multiple=every_hours)
        if every_hours
        else FreshnessSchedule(type="CRON", cron="0 6 * * *", timezone="UTC"),
    )


def test_a_failing_freshness_assertion_is_stale(make_node: MakeNode) -> None:
    node = history_node(
        SNOWFLAKE,
        every(1, 12, silent_for=0.5),  # the history alone would say fresh
        assertions=(freshness("orders_fresh", "FAILURE", severity="HIGH"),),
    )

    (finding,) = run_check(node, make_node).findings

    assert finding.severity.value == "high"
    assert finding.message == (
        "last updated 2026-11-29 11:30 UTC; its freshness assertion `orders_fresh changes "
        "daily` failed on 2026-11-29 11:00 UTC"
    )
    assert finding.evidence == {
        "expectation": "freshness assertion",
        "assertions": ["urn:li:assertion:orders_fresh"],
        "failed_at": "2026-11-29T11:00:00+00:00",
        "native_results": {"observed": "no change since yesterday"},
        "last_updated": "2026-11-29T11:30:00+00:00",
        "sla_hours": 24.0,
    }


def test_a_passing_freshness_assertion_is_fresh(make_node: MakeNode) -> None:
    node = history_node(
        SNOWFLAKE,
        every(1, 12, silent_for=30),  # the history alone would say stale
        assertions=(freshness("orders_fresh", "SUCCESS"),),
    )

    assert run_check(node, make_node) == CheckOutcome()


@pytest.mark.parametrize("result", [None, "ERROR", "INIT"])
def test_a_freshness_assertion_without_a_verdict_gives_its_schedule(
    make_node: MakeNode, result: str | None
) -> None:
    node = history_node(SNOWFLAKE, [30], assertions=(freshness("orders_fresh", result),))

    (finding,) = run_check(node, make_node).findings

    assert finding.evidence["expectation"] == "freshness assertion"
    assert finding.evidence["sla_hours"] == 24.0
    assert (
        "its freshness assertion `orders_fresh changes daily` expects a change every 24 hours"
        in finding.message
    )


def test_a_cron_freshness_assertion_that_never_ran_leaves_the_cadence_to_decide(
    make_node: MakeNode,
) -> None:
    node = history_node(
        SNOWFLAKE,
        every(1, 12, silent_for=5),
        assertions=(freshness("orders_fresh", None, every_hours=None),),
    )

    (finding,) = run_check(node, make_node).findings

    assert finding.evidence["expectation"] == "learned cadence"


def test_an_explicit_sla_wins_over_a_freshness_assertion(make_node: MakeNode) -> None:
    node = history_node(
        SNOWFLAKE,
        [2],
        sla_property(24.0),
        assertions=(freshness("orders_fresh", "FAILURE"),),
    )

    assert run_check(node, make_node) == CheckOutcome()


def test_other_assertions_do_not_count(make_node: MakeNode) -> None:
    volume = replace(freshness("rows", "FAILURE"), type="VOLUME", schedule=None)
    elsewhere = freshness("other", "FAILURE", dataset=DATASET)
    node = history_node(SNOWFLAKE, [2], assertions=(volume, elsewhere))

    assert run_check(node, make_node) == CheckOutcome()


def test_the_readme_example_loads() -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text(encoding="utf-8").split("\n## What it checks\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    (block,) = [b for b in blocks if "stale_source" in b]
    (check,) = [
        c for c in load_checks(tomllib.loads(block)["checks"]) if isinstance(c, StaleSource)
    ]
    assert [r.label() for r in check.config.rules] == [
        "config rule platform=snowflake name=prod.*",
        "config rule domain=urn:li:domain:marketing",
    ]
