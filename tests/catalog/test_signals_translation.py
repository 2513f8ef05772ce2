"""Assertions, runs and incidents as DataHub's producers write them, translated once for all.

Real aspects: the golden files (dbt and Great Expectations, older connector versions) and the
pinned acryl-datahub's own dbt functions (``dbt_tests.py``: tests as ``CUSTOM`` assertions,
source freshness with ``warn_after``/``error_after``, result statuses as it maps them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.source.dbt import dbt_tests
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog import aspects as ax
from mlcopilot.model import AssertionState, FreshnessSchedule
from testing.builders import dataset_urn, schema_field_urn
from tests.conftest import SAMPLES

GOLDEN = SAMPLES / "golden"
RAW = dataset_urn("raw.orders")
URN = "urn:li:assertion:x"


def golden(name: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every aspect of every assertion in a golden file, in write order."""
    path = GOLDEN / name
    if not path.exists():
        pytest.skip(f"no golden file {path}")
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for record in json.loads(path.read_text()):
        if record.get("entityType") == "assertion":
            aspects = found.setdefault(record["entityUrn"], {})
            aspects.setdefault(record["aspectName"], []).append(record["aspect"]["json"])
    return found


def translated(aspects: Mapping[str, list[dict[str, Any]]]) -> AssertionState | None:
    current = {name: values[-1] for name, values in aspects.items() if name != "assertionRunEvent"}
    return ax.assertion_from_aspects(
        URN, current, ax.latest_run(aspects.get("assertionRunEvent", []))
    )


def as_json(mcp: MetadataChangeProposalWrapper) -> dict[str, Any]:
    assert mcp.aspect is not None
    return ax.to_json(mcp.aspect)


def test_golden_dbt_tests() -> None:
    states = [translated(a) for a in golden("dbt_test_events_golden.json").values()]
    assert all(s is not None for s in states)
    errored = {
        s.native_type: s for s in states if s and s.last_run and s.last_run.result != "SUCCESS"
    }
    assert len(states) == 25
    assert len(errored) == 2
    state = next(s for name, s in errored.items() if "customer_id" in name)
    assert state.type == "DATASET"
    assert state.entity == (
        "urn:li:dataset:(urn:li:dataPlatform:dbt,calm-pagoda-323403.jaffle_shop.customers,PROD)"
    )
    assert state.fields == ("customer_id",)
    assert state.platform == "urn:li:dataPlatform:dbt"
    assert state.source_type == "EXTERNAL"
    assert state.custom_properties["dbt_test_upstream_unique_id"] == "model.jaffle_shop.customers"
    assert state.last_run is not None
    assert state.last_run.result == "ERROR"
    assert state.last_run.run_id == "c7a6b778-0e0f-4789-b567-ca7e124a6840"
    assert "Database Error" in state.last_run.native_results["message"]
    rows = [s for s in states if s is not None and not s.fields]
    assert len(rows) == 1  # the one DATASET_ROWS test covers no column


def test_golden_great_expectations() -> None:
    states = [translated(a) for a in golden("ge_mcps_golden.json").values()]
    failed = [s for s in states if s and s.last_run and s.last_run.result == "FAILURE"]
    assert len(failed) == 3
    assert {s.native_type for s in failed} == {"expect_column_values_to_be_between"}
    assert {s.fields for s in failed} == {("score",)}
    counted = next(s for s in failed if s.last_run and s.last_run.row_count is not None)
    assert counted.last_run is not None
    assert (counted.last_run.row_count, counted.last_run.unexpected_count) == (5, 2)
    assert counted.last_run.missing_count == 0
    assert counted.platform == "urn:li:dataPlatform:great-expectations"
    assert counted.source_type is None  # GE's action writes no source


def freshness_node(status: str, **criteria: tuple[int, str] | None) -> SimpleNamespace:
    bounds = {
        k: dbt_tests.DBTFreshnessCriteria(count=v[0], period=v[1]) if v else None
        for k, v in criteria.items()
    }
    info = dbt_tests.DBTFreshnessInfo(
        invocation_id="inv-1",
        status=status,
        max_loaded_at=datetime(2026, 1, 1, tzinfo=UTC),
        snapshotted_at=datetime(2026, 1, 2, tzinfo=UTC),
        max_loaded_at_time_ago_in_s=86400.0,
        warn_after=bounds.get("warn_after"),
        error_after=bounds.get("error_after"),
    )
    return SimpleNamespace(freshness_info=info)


@pytest.mark.parametrize(
    ("criteria", "unit", "multiple"),
    [
        ({"warn_after": (6, "hour"), "error_after": (12, "hour")}, "HOUR", 12),
        ({"warn_after": (2, "day"), "error_after": None}, "DAY", 2),
    ],
)
def test_dbt_source_freshness_as_the_pinned_connector_writes_it(
    criteria: dict[str, tuple[int, str] | None], unit: str, multiple: int
) -> None:
    node = freshness_node("error", **criteria)
    info = as_json(dbt_tests.make_assertion_from_freshness({}, node, URN, RAW))  # type: ignore[arg-type]
    event = as_json(dbt_tests.make_assertion_result_from_freshness(node, URN, RAW, False))  # type: ignore[arg-type]
    state = ax.assertion_from_aspects(URN, {"assertionInfo": info}, ax.latest_run([event]))
    assert state is not None
    assert (state.type, state.entity, state.fields) == ("CUSTOM", RAW, ())
    assert state.native_type == "dbt Freshness"
    assert state.is_freshness
    assert state.schedule == FreshnessSchedule(type="FIXED_INTERVAL", unit=unit, multiple=multiple)
    assert state.last_run is not None
    assert (state.last_run.result, state.last_run.severity) == ("FAILURE", "HIGH")
    assert state.last_run.native_results["status"] == "error"


@pytest.mark.parametrize(
    ("status", "warnings_are_errors", "result", "severity"),
    [
        ("pass", False, "SUCCESS", None),
        ("fail", False, "FAILURE", "HIGH"),
        ("warn", True, "FAILURE", "LOW"),
        ("warn", False, "SUCCESS", None),
        ("error", False, "ERROR", None),
    ],
)
def test_dbt_test_results_as_the_pinned_connector_maps_them(
    status: str, warnings_are_errors: bool, result: str, severity: str | None
) -> None:
    outcome = dbt_tests.DBTTestResult(
        invocation_id="inv-2",
        status=status,
        execution_time=datetime(2026, 1, 3, 4, 5, tzinfo=UTC),
        native_results={"failures": "3"},
    )
    mcp = dbt_tests.make_assertion_result_from_test(
        SimpleNamespace(),  # type: ignore[arg-type]
        outcome,
        URN,
        RAW,
        warnings_are_errors,
    )
    run = ax.assertion_run(as_json(mcp))
    assert run is not None
    assert (run.result, run.severity) == (result, severity)
    assert run.at == datetime(2026, 1, 3, 4, 5, tzinfo=UTC)
    assert run.run_id == "inv-2"


def test_a_dbt_test_in_the_current_custom_shape() -> None:
    info = sc.AssertionInfoClass(
        type=sc.AssertionTypeClass.CUSTOM,
        customAssertion=sc.CustomAssertionInfoClass(
            type="dbt",
            entity=RAW,
            field=schema_field_urn(RAW, "status"),
            fields=[schema_field_urn(RAW, "status")],
            nativeType="accepted_values_orders_status",
        ),
        source=sc.AssertionSourceClass(type=sc.AssertionSourceTypeClass.EXTERNAL),
    )
    state = ax.assertion_from_aspects(URN, {"assertionInfo": ax.to_json(info)}, None)
    assert state is not None
    assert (state.entity, state.fields, state.native_type) == (
        RAW,
        ("status",),
        "accepted_values_orders_status",
    )
    assert state.label == "accepted_values_orders_status"
    assert state.last_run is None


def test_a_field_assertion_and_a_column_as_the_target() -> None:
    field_info = {
        "type": "FIELD",
        "fieldAssertion": {
            "type": "FIELD_VALUES",
            "entity": RAW,
            "fieldValuesAssertion": {"field": {"path": "[version=2.0].[type=string].email"}},
        },
    }
    state = ax.assertion_from_aspects(URN, {"assertionInfo": field_info}, None)
    assert state is not None
    assert (state.entity, state.fields) == (RAW, ("email",))
    on_column = {"type": "SQL", "sqlAssertion": {"entity": schema_field_urn(RAW, "amount")}}
    state = ax.assertion_from_aspects(URN, {"assertionInfo": on_column}, None)
    assert state is not None
    assert (state.entity, state.fields) == (RAW, ("amount",))


def test_an_assertion_datahub_would_not_list() -> None:
    info: dict[str, Any] = {
        "type": "DATASET",
        "datasetAssertion": {"dataset": RAW, "scope": "DATASET_ROWS"},
    }
    gone = {"assertionInfo": info, "status": {"removed": True}}
    assert ax.assertion_from_aspects(URN, gone, None) is None
    assert ax.assertion_from_aspects(URN, {"status": {"removed": False}}, None) is None
    # No target in the info: the run's assertee names it.
    run = {"timestampMillis": 1, "status": "COMPLETE", "asserteeUrn": RAW, "result": {}}
    state = ax.assertion_from_aspects(URN, {"assertionInfo": {"type": "CUSTOM"}}, run)
    assert state is not None
    assert state.entity == RAW
    assert state.last_run is not None
    assert state.last_run.result == "INIT"  # complete without a result: no verdict


def test_the_latest_run_is_by_time_and_complete() -> None:
    def event(stamp: int, result: str, status: str = "COMPLETE") -> dict[str, Any]:
        return {"timestampMillis": stamp, "status": status, "result": {"type": result}}

    events = [event(3, "FAILURE"), event(1, "SUCCESS"), event(9, "SUCCESS", status="RUNNING")]
    latest = ax.latest_run(events)
    assert latest is not None
    assert latest["result"]["type"] == "FAILURE"
    tie = ax.latest_run([event(5, "SUCCESS"), event(5, "FAILURE")])
    assert tie is not None
    assert tie["result"]["type"] == "FAILURE"  # of two at once, the later written
    assert ax.latest_run([]) is None


@pytest.mark.parametrize(
    ("unit", "multiple", "interval"),
    [
        ("HOUR", 6, timedelta(hours=6)),
        ("DAY", None, timedelta(days=1)),
        ("MONTH", 1, timedelta(days=31)),
        ("FORTNIGHT", 1, None),
    ],
)
def test_fixed_interval(unit: str, multiple: int | None, interval: timedelta | None) -> None:
    schedule = FreshnessSchedule(type="FIXED_INTERVAL", unit=unit, multiple=multiple)
    assert schedule.interval == interval
    assert FreshnessSchedule(type="CRON", cron="0 * * * *", timezone="UTC").interval is None


def test_freshness_schedules() -> None:
    info = sc.AssertionInfoClass(
        type=sc.AssertionTypeClass.FRESHNESS,
        freshnessAssertion=sc.FreshnessAssertionInfoClass(
            type=sc.FreshnessAssertionTypeClass.DATASET_CHANGE,
            entity=RAW,
            schedule=sc.FreshnessAssertionScheduleClass(
                type=sc.FreshnessAssertionScheduleTypeClass.CRON,
                cron=sc.FreshnessCronScheduleClass(
                    cron="0 6 * * *", timezone="Europe/Paris", windowStartOffsetMs=3_600_000
                ),
            ),
        ),
    )
    state = ax.assertion_from_aspects(URN, {"assertionInfo": ax.to_json(info)}, None)
    assert state is not None
    assert state.schedule == FreshnessSchedule(
        type="CRON",
        cron="0 6 * * *",
        timezone="Europe/Paris",
        window_start_offset=timedelta(hours=1),
    )


def test_incidents() -> None:
    stamp = sc.AuditStampClass(time=1_700_000_000_000, actor="urn:li:corpuser:ops")
    info = sc.IncidentInfoClass(
        type="CUSTOM",
        customType="LATE_LOAD",
        title="Late",
        entities=[RAW],
        priority=2,
        status=sc.IncidentStatusClass(state="ACTIVE", lastUpdated=stamp, stage="TRIAGE"),
        source=sc.IncidentSourceClass(type="ASSERTION_FAILURE", sourceUrn=URN),
        created=stamp,
    )
    raw = ax.to_json(info)
    signal = ax.incident_from_info("urn:li:incident:1", raw)
    assert signal is not None
    assert (signal.type, signal.custom_type, signal.priority, signal.stage) == (
        "CUSTOM",
        "LATE_LOAD",
        2,
        "TRIAGE",
    )
    assert (signal.source_type, signal.source_urn) == ("ASSERTION_FAILURE", URN)
    assert signal.started_at is None
    assert signal.created_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert ax.incident_entities(raw) == [RAW]
    resolved = {**raw, "status": {"state": "RESOLVED", "lastUpdated": raw["created"]}}
    assert ax.incident_from_info("urn:li:incident:1", resolved) is None
    removed = {"incidentInfo": raw, "status": {"removed": True}}
    assert ax.incident_from_info("urn:li:incident:1", raw, removed) is None
