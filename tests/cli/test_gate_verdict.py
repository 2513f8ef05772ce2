"""The CI gate's verdict (mlcopilot.incidents.gate.evaluate_gate), a pure function: every rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime

from mlcopilot.incidents.gate import GateRules, evaluate_gate
from mlcopilot.incidents.lifecycle import acknowledge, reconcile
from mlcopilot.model import (
    CoverageGap,
    EntityType,
    Finding,
    Incident,
    IncidentChanges,
    Lineage,
    ModelReport,
    Node,
    Severity,
)
from testing.builders import dataset_urn, feature_urn, model_urn

NOW = datetime(2026, 11, 20, 9, tzinfo=UTC)
MODEL = model_urn("churn")
OTHER = model_urn("other")
FEATURE = feature_urn("churn_features", "tenure")
CUSTOMERS = dataset_urn("raw.customers")
ORDERS = dataset_urn("raw.orders")


def lineage(model: str = MODEL, *, truncated: bool = False) -> Lineage:
    nodes = {
        model: Node(model, EntityType.ML_MODEL, "model"),
        FEATURE: Node(FEATURE, EntityType.ML_FEATURE, "tenure"),
        CUSTOMERS: Node(CUSTOMERS, EntityType.DATASET, "raw.customers"),
        ORDERS: Node(ORDERS, EntityType.DATASET, "raw.orders"),
    }
    paths = {
        model: (model,),
        FEATURE: (model, FEATURE),
        CUSTOMERS: (model, FEATURE, CUSTOMERS),
        ORDERS: (model, ORDERS),
    }
    return Lineage(model, nodes, (), paths, truncated=truncated)


def finding(severity: Severity, entity: str = CUSTOMERS, model: str = MODEL) -> Finding:
    return Finding(
        check="pii_exposure",
        severity=severity,
        model=model,
        entity=entity,
        field=None,
        message="tagged PII",
        path=(model, entity),
    )


def report(
    *findings: Finding,
    model: str = MODEL,
    truncated: bool = False,
    unknown: Mapping[str, tuple[str, ...]] | None = None,
    gaps: tuple[CoverageGap, ...] = (),
) -> ModelReport:
    walked = lineage(model, truncated=truncated)
    return ModelReport(model, walked, tuple(findings), unknown or {}, gaps=gaps)


def opened(*findings: Finding) -> IncidentChanges:
    """The changes of a first scan: every finding opens its incident."""
    return reconcile([], findings, evaluated=set(), now=NOW)


def stored(*findings: Finding) -> list[Incident]:
    return list(opened(*findings).opened)


def test_a_finding_at_the_threshold_fails_and_is_named_by_model_and_incident() -> None:
    high, low = finding(Severity.HIGH), finding(Severity.LOW, ORDERS)
    rules = GateRules(fail_on=Severity.HIGH)
    verdict = evaluate_gate(rules, [report(high, low)], opened(high, low))
    assert not verdict.passed
    [reason] = verdict.reasons
    assert (reason.rule, reason.model, reason.incidents) == ("severity", MODEL, (high.id,))
    assert reason.message == "1 finding at or above high"


def test_findings_below_the_threshold_pass() -> None:
    medium = finding(Severity.MEDIUM)
    verdict = evaluate_gate(GateRules(fail_on=Severity.HIGH), [report(medium)], opened(medium))
    assert verdict.passed
    assert verdict.reasons == ()


def test_each_model_fails_on_its_own_findings() -> None:
    mine, theirs = finding(Severity.CRITICAL), finding(Severity.HIGH, model=OTHER)
    verdict = evaluate_gate(
        GateRules(fail_on=Severity.HIGH),
        [report(mine), report(theirs, model=OTHER)],
        opened(mine, theirs),
    )
    assert [(r.model, r.incidents) for r in verdict.reasons] == [
        (MODEL, (mine.id,)),
        (OTHER, (theirs.id,)),
    ]


def test_acknowledged_incidents_count_unless_ignored() -> None:
    high = finding(Severity.HIGH)
    [incident] = stored(high)
    acked = acknowledge(incident, by="ana", at=NOW)
    changes = reconcile([acked], [high], evaluated=set(), now=NOW)
    assert changes.updated[0].state.value == "acknowledged"
    counted = evaluate_gate(GateRules(fail_on=Severity.HIGH), [report(high)], changes)
    assert not counted.passed
    ignored = evaluate_gate(
        GateRules(fail_on=Severity.HIGH, acknowledged=False), [report(high)], changes
    )
    assert ignored.passed


def test_new_only_counts_the_incidents_this_scan_opened() -> None:
    old, new = finding(Severity.HIGH), finding(Severity.HIGH, ORDERS)
    changes = reconcile(stored(old), [old, new], evaluated=set(), now=NOW)
    verdict = evaluate_gate(
        GateRules(fail_on=Severity.HIGH, new_only=True), [report(old, new)], changes
    )
    assert [r.incidents for r in verdict.reasons] == [(new.id,)]
    only_old = reconcile(stored(old), [old], evaluated=set(), now=NOW)
    assert evaluate_gate(
        GateRules(fail_on=Severity.HIGH, new_only=True), [report(old)], only_old
    ).passed


def test_a_recurrence_is_new() -> None:
    high = finding(Severity.HIGH)
    [incident] = stored(high)
    resolved = dataclasses.replace(incident, state=incident.state.RESOLVED, resolved_at=NOW)
    changes = reconcile([resolved], [high], evaluated=set(), now=NOW)
    assert changes.opened[0].generation == 2
    rules = GateRules(fail_on=Severity.HIGH, new_only=True)
    assert not evaluate_gate(rules, [report(high)], changes).passed


def test_a_truncated_walk_fails_the_gate_unless_gaps_are_ignored() -> None:
    truncated = report(truncated=True)
    verdict = evaluate_gate(GateRules(fail_on=Severity.HIGH), [truncated], IncidentChanges())
    assert [r.rule for r in verdict.reasons] == ["truncated"]
    assert "4 nodes" in verdict.reasons[0].message
    ignored = GateRules(fail_on=Severity.HIGH, fail_on_gaps=False)
    assert evaluate_gate(ignored, [truncated], IncidentChanges()).passed


def test_an_upstream_that_all_lacked_metadata_fails_the_gate() -> None:
    why = ("pii_exposure: not in the catalog",)
    blind = report(unknown={FEATURE: why, CUSTOMERS: why, ORDERS: why})
    verdict = evaluate_gate(GateRules(fail_on=Severity.HIGH), [blind], IncidentChanges())
    assert [r.rule for r in verdict.reasons] == ["all_unknown"]
    # One upstream entity the checks could decide is not "nothing".
    partly = report(unknown={FEATURE: why, CUSTOMERS: why})
    assert evaluate_gate(GateRules(fail_on=Severity.HIGH), [partly], IncidentChanges()).passed


def test_a_coverage_gap_fails_the_gate_and_names_where_lineage_stops() -> None:
    gapped = report(gaps=(CoverageGap(FEATURE, "feature with no source dataset recorded"),))
    verdict = evaluate_gate(GateRules(fail_on=Severity.CRITICAL), [gapped], IncidentChanges())
    [reason] = verdict.reasons
    assert reason.rule == "coverage_gap"
    assert "tenure" in reason.message
    assert reason.model == MODEL


def test_severity_reasons_come_before_coverage_ones_within_a_model() -> None:
    high = finding(Severity.HIGH)
    both = report(high, truncated=True)
    verdict = evaluate_gate(GateRules(fail_on=Severity.LOW), [both], opened(high))
    assert [r.rule for r in verdict.reasons] == ["severity", "truncated"]


def test_nothing_scanned_never_passes_a_gate_on_gaps() -> None:
    verdict = evaluate_gate(GateRules(fail_on=Severity.LOW), [], IncidentChanges())
    assert [(r.rule, r.model) for r in verdict.reasons] == [("nothing_scanned", None)]
    ignored = GateRules(fail_on=Severity.LOW, fail_on_gaps=False)
    assert evaluate_gate(ignored, [], IncidentChanges()).passed


def test_a_gate_on_gaps_alone_ignores_findings() -> None:
    critical = finding(Severity.CRITICAL)
    verdict = evaluate_gate(GateRules(fail_on=None), [report(critical)], opened(critical))
    assert verdict.passed
