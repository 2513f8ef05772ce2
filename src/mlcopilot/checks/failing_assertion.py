"""Failing assertion: a DataHub assertion on an upstream dataset (or its column) last failed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    AssertionState,
    CheckInfo,
    CheckOutcome,
    Node,
    Severity,
)
from mlcopilot.protocols import CheckContext

_LOWER = {
    Severity.CRITICAL: Severity.HIGH,
    Severity.HIGH: Severity.MEDIUM,
    Severity.MEDIUM: Severity.LOW,
    Severity.LOW: Severity.LOW,
}
_PRODUCERS = {
    "urn:li:dataPlatform:dbt": "dbt test",
    "urn:li:dataPlatform:great-expectations": "Great Expectations expectation",
}


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


class FailingAssertionConfig(PluginConfig):
    """Settings of the ``failing_assertion`` check."""

    report_errors: bool = True
    """Report an assertion whose latest run could not complete (``ERROR``), at low severity."""


class FailingAssertion:
    """A DataHub assertion on something upstream of the model failed its latest run.

    What it flags: an assertion in DataHub (a dbt test, a Great Expectations expectation,
    a DataHub-native or any SDK-written assertion) on an upstream dataset, or on one of its
    columns, whose latest completed run (the newest by run time, not the last one written)
    is a `FAILURE`, or an `ERROR` (the assertion could not run at all). The finding names the
    assertion, the run's time and what the producer reported (`nativeResults`, row counts,
    its link); it resolves when a later run passes.

    - A failure on a column that feeds the model (per column-level lineage): high.
    - A failure of a dataset-level assertion, or on a column lineage cannot place: medium.
    - A failure on a column lineage proves unused by the model: low.
    - A failure the producer itself rates low severity (dbt's `warn`): one step lower.
    - An `ERROR` (the data was not checked, so it may be fine or not): low; switch these off
      with `report_errors = false`.

    Several failing assertions on the same column (or the same dataset) make one finding,
    at the highest of their severities, listing them all. An assertion that has never run
    says nothing about the data and is not reported; neither is one whose latest run passed.
    Assertions are read for datasets, on every backend (DataHub's GraphQL has them on
    datasets only); a dataset known only from lineage has none to report.

    Why it matters: the team that owns the data already knows it is wrong; the model
    training or predicting on it does not, unless someone tells its owners.

    How to fix: look at the assertion's latest run in DataHub (or the producer's link),
    ask the dataset's owners for the fix or a backfill, and hold retraining on that data
    until the assertion passes again.
    """

    name: ClassVar[str] = "failing_assertion"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="failing_assertion",
        title="Failing assertion",
        tag="urn:li:tag:mlcopilot-failing-assertion",
        tag_description="A DataHub assertion on this upstream of an ML model is failing.",
        incident_type="CUSTOM",
        custom_incident_type="FAILING_ASSERTION",
        why=(
            "A data-quality assertion on a source of these models failed its latest run: "
            "they train or predict on data its owners know is wrong."
        ),
        action=(
            "Read the assertion's latest run in DataHub, get the source fixed or backfilled "
            "by its owners, and hold retraining until the assertion passes again."
        ),
        # An incident raised by the failing assertion itself is the same news.
        folds_in=frozenset({"upstream_incident"}),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = FailingAssertionConfig

    def __init__(self, config: FailingAssertionConfig) -> None:
        self.config = config

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """One finding per column (or the dataset) with failing assertions."""
        if not node.assertions:
            return _NOTHING  # none, or not readable here: nothing DataHub says
        groups: dict[str | None, list[tuple[Severity, AssertionState]]] = {}
        for assertion in node.assertions:
            run = assertion.last_run
            if run is None or run.result not in ("FAILURE", "ERROR"):
                continue
            if run.result == "ERROR" and not self.config.report_errors:
                continue
            field = _place(assertion, ctx)
            groups.setdefault(field, []).append((_severity(assertion, field, ctx), assertion))
        findings = []
        for field, failing in groups.items():
            failing.sort(key=lambda pair: (-pair[0].rank, pair[1].urn))
            severity = failing[0][0]
            feeds = ctx.usage.feeds(field) if field is not None else None
            message = _message([a for _, a in failing], field, feeds)
            evidence = _evidence([a for _, a in failing], feeds)
            findings.append(
                ctx.finding(self.name, severity, node, field, message, evidence=evidence)
            )
        return CheckOutcome(findings=tuple(findings))


def _severity(assertion: AssertionState, field: str | None, ctx: CheckContext) -> Severity:
    """By where the failure sits; one step lower when its producer rates it low."""
    run = assertion.last_run
    assert run is not None
    if run.result == "ERROR":
        return Severity.LOW
    feeds = ctx.usage.feeds(field) if field is not None else None
    severity = {True: Severity.HIGH, None: Severity.MEDIUM, False: Severity.LOW}[feeds]
    if (run.severity or "").upper() == "LOW":
        severity = _LOWER[severity]
    return severity


def _place(assertion: AssertionState, ctx: CheckContext) -> str | None:
    """The column a finding sits on; None for a dataset-level assertion.

    Of several columns, the first that feeds the model, else the first listed.
    """
    if not assertion.fields:
        return None
    return next((f for f in assertion.fields if ctx.usage.feeds(f)), assertion.fields[0])


def _message(failing: Sequence[AssertionState], field: str | None, feeds: bool | None) -> str:
    where = _where(field, feeds)
    if len(failing) == 1:
        (assertion,) = failing
        return f"{_describe(assertion)} {_verb(assertion)} {where}: {_run_text(assertion)}"
    listed = "; ".join(f"{_describe(a)} ({_run_text(a)})" for a in failing)
    return f"{len(failing)} assertions failing {where}: {listed}"


def _where(field: str | None, feeds: bool | None) -> str:
    if field is None:
        return "on the dataset"
    return {
        True: f"on column {field}, which feeds the model",
        None: f"on column {field}",
        False: f"on column {field}, which does not feed the model",
    }[feeds]


def _describe(assertion: AssertionState) -> str:
    producer = _PRODUCERS.get(assertion.platform or "", "assertion")
    kind = "" if assertion.type in ("DATASET", "CUSTOM") else f" {assertion.type.lower()}"
    return f'{producer}{kind} "{_shorten(assertion.label)}"'


def _verb(assertion: AssertionState) -> str:
    run = assertion.last_run
    return "could not run" if run is not None and run.result == "ERROR" else "failed"


def _run_text(assertion: AssertionState) -> str:
    """The run's result and absolute time (a relative age would rewrite the incident)."""
    run = assertion.last_run
    assert run is not None
    word = "error" if run.result == "ERROR" else "failure"
    counts = []
    if run.unexpected_count is not None:
        counts.append(f"{run.unexpected_count} unexpected")
    if run.missing_count is not None:
        counts.append(f"{run.missing_count} missing")
    if run.row_count is not None:
        counts.append(f"of {run.row_count} rows")
    tail = f", {' '.join(counts)}" if counts else ""
    return f"{word} in the run of {_format_time(run.at)}{tail}"


def _evidence(failing: Sequence[AssertionState], feeds: bool | None) -> dict[str, JSON]:
    """The first (most severe) assertion's facts at the top, every one under ``assertions``."""
    every = [_facts(a) for a in failing]
    return {**every[0], "column_feeds_model": feeds, "assertions": every}


def _facts(assertion: AssertionState) -> dict[str, JSON]:
    run = assertion.last_run
    assert run is not None
    return {
        "assertion": assertion.urn,
        "description": assertion.description or None,
        "native_type": assertion.native_type or None,
        "type": assertion.type,
        "platform": assertion.platform,
        "source_type": assertion.source_type,
        "fields": list(assertion.fields),
        "result": run.result,
        "result_severity": run.severity,
        "run_at": _as_utc(run.at).isoformat(),
        "run_id": run.run_id or None,
        "native_results": dict(run.native_results),
        "row_count": run.row_count,
        "unexpected_count": run.unexpected_count,
        "missing_count": run.missing_count,
        "actual_value": run.actual_value,
        "error_type": run.error_type,
        "url": run.external_url or assertion.external_url,
    }


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _as_utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive time is taken to be UTC already."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _format_time(when: datetime) -> str:
    """``2026-11-27 09:00 UTC``."""
    return _as_utc(when).strftime("%Y-%m-%d %H:%M UTC")
