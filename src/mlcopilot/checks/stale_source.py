"""Stale source: an upstream dataset not updated as often as it is expected to be.

The expectation comes, in this order, from an explicit SLA (the dataset's structured or custom
property, else a configured rule), a DataHub freshness assertion on the dataset, the dataset's
own update cadence as its history shows it, and finally the configured default. The finding
names which one it used.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import math
import statistics
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from pydantic import Field, model_validator

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    NOT_IN_CATALOG,
    AssertionState,
    CheckInfo,
    CheckOutcome,
    EntityType,
    Finding,
    Node,
    Severity,
    Urn,
)
from mlcopilot.protocols import CheckContext

SLA_PROPERTY = "io.mlcopilot.freshnessSlaHours"
"""The dataset's structured property holding its freshness SLA in hours."""
SLA_CUSTOM_PROPERTY = "freshness_sla_hours"
"""The dataset's custom property (``datasetProperties.customProperties``) used otherwise."""

_PROPERTY_PREFIX = "urn:li:structuredProperty:"
_PLATFORM_PREFIX = "urn:li:dataPlatform:"
_DOMAIN_PREFIX = "urn:li:domain:"
_DATASET_PREFIX = "urn:li:dataset:("
_ASSERTION_SEVERITY = {"HIGH": Severity.HIGH, "MEDIUM": Severity.MEDIUM, "LOW": Severity.LOW}


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""
_SAID_KEPT = 100_000
"""Stale datasets whose message and evidence a check keeps to share (then it starts over)."""


class FreshnessRule(PluginConfig):
    """One ``[[checks.stale_source.rules]]`` entry: an SLA for the datasets it selects.

    A dataset is selected when it matches every selector given (at least one is required).
    """

    platform: str | None = None
    """The data platform, by name (``snowflake``) or urn; case-insensitive."""
    name: str | None = None
    """A glob over the dataset's name as its urn has it (``prod.*``, ``*.events_*``);
    case-insensitive."""
    domain: str | None = None
    """A domain the dataset is in, by id or urn (``urn:li:domain:marketing``)."""
    sla_hours: float = Field(gt=0, allow_inf_nan=False)
    """Hours within which a selected dataset must have been updated."""

    @model_validator(mode="after")
    def _selects_something(self) -> FreshnessRule:
        if self.platform is None and self.name is None and self.domain is None:
            raise ValueError("a rule needs at least one of platform, name or domain")
        return self

    def selects(self, node: Node) -> bool:
        """Whether the rule applies to the dataset ``node``."""
        platform, name = _platform_and_name(node.urn)
        if self.platform is not None and (
            platform is None or platform.lower() != _strip(self.platform, _PLATFORM_PREFIX)
        ):
            return False
        if self.name is not None and (
            name is None or not fnmatch.fnmatchcase(name.lower(), self.name.lower())
        ):
            return False
        if self.domain is not None:
            wanted = _strip(self.domain, _DOMAIN_PREFIX)
            if all(_strip(d, _DOMAIN_PREFIX) != wanted for d in node.domains):
                return False
        return True

    def label(self) -> str:
        """``rule platform=snowflake name=prod.*``: how the finding names the rule."""
        parts = [
            f"{key}={value}"
            for key, value in (
                ("platform", self.platform),
                ("name", self.name),
                ("domain", self.domain),
            )
            if value is not None
        ]
        return "config rule " + " ".join(parts)


class StaleSourceConfig(PluginConfig):
    """Settings of the ``stale_source`` check (``[checks.stale_source]``)."""

    rules: list[FreshnessRule] = Field(default_factory=list)
    """SLAs by platform, name pattern or domain; the first rule that selects a dataset wins.
    A dataset's own SLA property wins over every rule."""
    learn_cadence: bool = True
    """Learn the expectation of a dataset with no SLA and no freshness assertion from its own
    update history; False checks only datasets with a declared expectation."""
    cadence_factor: float = Field(default=3, gt=1, allow_inf_nan=False)
    """How many of its usual intervals a dataset may stay silent before it is stale."""
    min_updates: int = Field(default=5, ge=3)
    """How many updates (after bursts are merged) a history needs before a cadence is learned."""
    burst_minutes: float = Field(default=10, ge=0, allow_inf_nan=False)
    """Updates this close to the one before them are one update: a job that writes a table in
    several statements is one refresh, not many."""
    default_sla_hours: float | None = Field(default=None, gt=0)
    """The SLA of datasets nothing else gives an expectation (no SLA, rule, freshness assertion
    or learnable history); None leaves them unchecked."""


@dataclass(frozen=True, slots=True)
class _Expectation:
    """How often a dataset should change, and what said so."""

    within: timedelta
    source: str
    """What the expectation came from, as the finding says it."""
    kind: str
    """``structured property``, ``custom property``, ``config rule``, ``freshness assertion``,
    ``learned cadence`` or ``config default``: the evidence's ``expectation``."""
    evidence: dict[str, JSON]


class StaleSource:
    """A dataset feeding the model has not been updated as often as it is expected to be.

    What it flags: an upstream dataset whose last update (the newest `operation` or
    `lastModified` time DataHub holds) is older than it is expected to be. The expectation
    comes from the first of:

    1. an explicit SLA in hours: the dataset's structured property
       `io.mlcopilot.freshnessSlaHours`, else its custom property `freshness_sla_hours`,
       else the first `[[checks.stale_source.rules]]` entry that selects it by `platform`,
       `name` (a glob over the name in its urn, e.g. `prod.*`) and/or `domain`;
    2. a DataHub freshness assertion on the dataset (DataHub's own, or dbt's source
       freshness): when it has run, its latest run by time decides (FAILURE is stale,
       SUCCESS fresh); otherwise a fixed-interval schedule is the SLA;
    3. the dataset's own cadence, learned from its update history (up to its 50 latest
       `operation` events and, on `lite:`, `lastModified` versions; updates within
       `burst_minutes`, default 10, count as one): a dataset that usually updates every N
       hours (the median interval) is stale once silent for `cadence_factor` (default 3) ×
       N. Fewer than `min_updates` (default 5) updates in its history is reported as
       unknown;
    4. the check's `default_sla_hours` setting (unset by default).

    A dataset none of these applies to is not checked. Overdue is medium severity; overdue
    by twice the expectation is high; a failing freshness assertion takes its run's
    severity (medium when it gives none). An SLA that is not a positive number, or an SLA
    without any update time, is reported as unknown. The finding says where its
    expectation came from, and its evidence holds the learned interval.

    Why it matters: a model scoring on stale inputs makes predictions about a world that
    has moved on, and nothing fails loudly; retraining on stale data bakes the gap in.

    How to fix: find out why the pipeline that writes the dataset stopped (failed job,
    paused schedule, upstream outage) and rerun it. If the dataset legitimately updates less
    often, declare it: set its `io.mlcopilot.freshnessSlaHours`, or add a rule.
    """

    name: ClassVar[str] = "stale_source"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="stale_source",
        title="Stale source",
        tag="urn:li:tag:mlcopilot-stale-source",
        tag_description="A source dataset stopped refreshing on time while feeding a model.",
        incident_type="FRESHNESS",
        why=(
            "The source stopped refreshing when it was expected to: these models train or "
            "predict on outdated data."
        ),
        action=(
            "Find out why the source stopped refreshing (failed job, paused ingestion) and "
            "re-run it; if the expectation is wrong, set `io.mlcopilot.freshnessSlaHours` on "
            "the dataset."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = StaleSourceConfig

    def __init__(self, config: StaleSourceConfig) -> None:
        self.config = config
        self._said: dict[tuple[object, ...], tuple[str, dict[str, JSON]]] = {}

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """A finding when the dataset is older than it is expected to be."""
        if node.entity_type is not EntityType.DATASET:
            return _NOTHING
        if not node.exists:
            return NOT_IN_CATALOG
        declared = self._declared_sla(node)
        if declared is not None:
            raw, where, kind = declared
            sla_hours = _positive_number(raw)
            if sla_hours is None:
                return CheckOutcome(unknown=f"invalid freshness SLA {str(raw)!r} in {where}")
            return self._judge(node, ctx, _sla(sla_hours, where, kind))

        outcome = self._by_assertions(node, ctx)
        if outcome is not None:
            return outcome

        unknown = None
        if self.config.learn_cadence:
            learned = self._learned(node)
            if isinstance(learned, _Expectation):
                return self._judge(node, ctx, learned)
            unknown = learned
        if self.config.default_sla_hours is not None:
            sla = _sla(self.config.default_sla_hours, "config default_sla_hours", "config default")
            return self._judge(node, ctx, sla)
        return _NOTHING if unknown is None else CheckOutcome(unknown=unknown)

    def _declared_sla(self, node: Node) -> tuple[str | float, str, str] | None:
        """The raw SLA, where it came from and its kind, by precedence; None when none."""
        values = node.structured_properties.get(SLA_PROPERTY)
        if not values:
            values = node.structured_properties.get(_PROPERTY_PREFIX + SLA_PROPERTY)
        if values:
            return values[0], f"structured property {SLA_PROPERTY}", "structured property"
        if SLA_CUSTOM_PROPERTY in node.custom_properties:
            return (
                node.custom_properties[SLA_CUSTOM_PROPERTY],
                f"custom property {SLA_CUSTOM_PROPERTY}",
                "custom property",
            )
        if not self.config.rules:
            return None
        rule = next((r for r in self.config.rules if r.selects(node)), None)
        if rule is not None:
            return rule.sla_hours, rule.label(), "config rule"
        return None

    def _judge(self, node: Node, ctx: CheckContext, expected: _Expectation) -> CheckOutcome:
        """A finding when the dataset's last update is older than ``expected`` allows."""
        if node.last_updated is None:
            return CheckOutcome(unknown="no operation or lastModified timestamp")
        last_updated = _as_utc(node.last_updated)
        age = ctx.now - last_updated
        if age <= expected.within:
            return _NOTHING
        message, evidence = self._overdue(node.urn, last_updated, expected)
        finding = ctx.finding(
            self.name,
            Severity.HIGH if age > 2 * expected.within else Severity.MEDIUM,
            node,
            None,
            message,
            evidence=evidence,
        )
        return CheckOutcome(findings=(finding,))

    def _overdue(
        self, urn: Urn, last_updated: datetime, expected: _Expectation
    ) -> tuple[str, dict[str, JSON]]:
        """What a finding says of an overdue dataset: its message and evidence.

        Neither depends on the model or the clock, so the findings of every model a dataset
        feeds share one pair (never changed once made): the 1,000-model estate's 29,738 stale
        findings held 15 MB of equal messages and evidence, one copy each.
        """
        evidence_text = json.dumps(expected.evidence, sort_keys=True, default=str)
        key = (urn, last_updated, expected.within, expected.source, expected.kind, evidence_text)
        said = self._said.get(key)
        if said is None:
            if len(self._said) >= _SAID_KEPT:
                self._said.clear()  # a watcher's check lives on: keep what it holds bounded
            # Absolute times only: the message is written back to DataHub, and a relative age
            # would rewrite the incident on every scan.
            overdue_since = last_updated + expected.within
            message = (
                f"last updated {_format_time(last_updated)}; {expected.source}, so it has been "
                f"overdue since {_format_time(overdue_since)}"
            )
            evidence: dict[str, JSON] = {
                "last_updated": last_updated.isoformat(),
                "expectation": expected.kind,
                **expected.evidence,
                "overdue_since": overdue_since.isoformat(),
            }
            said = self._said[key] = (message, evidence)
        return said

    def _by_assertions(self, node: Node, ctx: CheckContext) -> CheckOutcome | None:
        """The verdict of the dataset's freshness assertions; None when they give none."""
        if not node.assertions:
            return None  # most datasets: nothing below has anything to go on
        assertions = sorted(
            (a for a in node.assertions or () if a.is_freshness and a.entity == node.urn),
            key=lambda a: a.urn,
        )
        judged = [a for a in assertions if a.last_run is not None]
        failed = [a for a in judged if a.last_run is not None and a.last_run.result == "FAILURE"]
        if failed:
            return CheckOutcome(findings=(self._failed(node, ctx, failed),))
        if any(a.last_run is not None and a.last_run.result == "SUCCESS" for a in judged):
            return _NOTHING
        # Never run (or only errors): a fixed-interval schedule still says how often.
        scheduled = [
            (a.schedule.interval, a.urn, a)
            for a in assertions
            if a.schedule is not None and a.schedule.interval is not None
        ]
        if not scheduled:
            return None
        interval, _, assertion = min(scheduled, key=lambda s: (s[0], s[1]))  # the strictest
        hours = interval / timedelta(hours=1)
        expected = _Expectation(
            within=interval,
            source=(
                f"its freshness assertion `{assertion.label}` expects a change every "
                f"{_format_hours(hours)}"
            ),
            kind="freshness assertion",
            evidence={"sla_hours": hours, "assertion": assertion.urn},
        )
        return self._judge(node, ctx, expected)

    def _failed(self, node: Node, ctx: CheckContext, failed: Sequence[AssertionState]) -> Finding:
        """The finding for freshness assertions whose latest run failed (the newest run speaks)."""
        runs = [(a.last_run.at, a.urn, a.last_run, a) for a in failed if a.last_run is not None]
        _, _, run, first = max(runs, key=lambda r: (_as_utc(r[0]), r[1]))
        labels = ", ".join(f"`{a.label}`" for a in failed)
        noun = "assertions" if len(failed) > 1 else "assertion"
        updated = (
            f"last updated {_format_time(_as_utc(node.last_updated))}; "
            if node.last_updated is not None
            else ""
        )
        message = (
            f"{updated}its freshness {noun} {labels} failed on {_format_time(_as_utc(run.at))}"
        )
        evidence: dict[str, JSON] = {
            "expectation": "freshness assertion",
            "assertions": [a.urn for a in failed],
            "failed_at": _as_utc(run.at).isoformat(),
            "native_results": dict(run.native_results),
        }
        if node.last_updated is not None:
            evidence["last_updated"] = _as_utc(node.last_updated).isoformat()
        if first.schedule is not None and first.schedule.interval is not None:
            evidence["sla_hours"] = first.schedule.interval / timedelta(hours=1)
        if run.external_url or first.external_url:
            evidence["url"] = run.external_url or first.external_url
        return ctx.finding(
            self.name,
            _ASSERTION_SEVERITY.get((run.severity or "").upper(), Severity.MEDIUM),
            node,
            None,
            message,
            evidence=evidence,
        )

    def _learned(self, node: Node) -> _Expectation | str | None:
        """The cadence the dataset's history shows; why not (unknown), or None: no history."""
        if node.update_times is None or len(node.update_times) < 2:
            return None  # merging bursts never adds updates: too few to learn from
        updates = _merge_bursts(node.update_times or (), self.config.burst_minutes)
        if len(updates) < 2:
            return None  # no history at all: nothing to learn from, and nothing to report
        if len(updates) < self.config.min_updates:
            return (
                f"{len(updates)} updates in its history, {self.config.min_updates} needed to "
                "learn its cadence"
            )
        intervals = [(b - a) / timedelta(hours=1) for a, b in itertools.pairwise(updates)]
        # The median: a few late runs or a long weekend do not move it.
        hours = statistics.median(intervals)
        factor = self.config.cadence_factor
        return _Expectation(
            within=timedelta(hours=hours * factor),
            source=(
                f"it usually updates every {_format_hours(hours)} (the median of its last "
                f"{len(intervals)} intervals) and is expected within {factor:g} times that, "
                f"{_format_hours(hours * factor)}"
            ),
            kind="learned cadence",
            evidence={
                "learned_interval_hours": round(hours, 4),
                "cadence_factor": factor,
                "sla_hours": round(hours * factor, 4),
                "updates_considered": len(updates),
            },
        )


def _sla(hours: float, where: str, kind: str) -> _Expectation:
    return _Expectation(
        within=timedelta(hours=hours),
        source=f"its freshness SLA is {_format_hours(hours)} ({where})",
        kind=kind,
        evidence={"sla_hours": hours, "sla_source": where},
    )


def _merge_bursts(times: Sequence[datetime], burst_minutes: float) -> list[datetime]:
    """``times`` (oldest first) with each burst of updates reduced to its first."""
    window = timedelta(minutes=burst_minutes)
    merged: list[datetime] = []
    for when in sorted(_as_utc(t) for t in times):
        if not merged or when - merged[-1] > window:
            merged.append(when)
    return merged


def _platform_and_name(urn: str) -> tuple[str | None, str | None]:
    """The platform name and dataset name of a dataset urn; None for what it lacks."""
    if not (urn.startswith(_DATASET_PREFIX) and urn.endswith(")")):
        return None, None
    platform, _, rest = urn[len(_DATASET_PREFIX) : -1].partition(",")
    name, _, _env = rest.rpartition(",")
    return (
        platform.removeprefix(_PLATFORM_PREFIX) or None,
        urllib.parse.unquote(name) or None,
    )


def _strip(value: str, prefix: str) -> str:
    return (value[len(prefix) :] if value.lower().startswith(prefix.lower()) else value).lower()


def _positive_number(raw: str | float) -> float | None:
    """``raw`` as a finite number of hours above zero, or None."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _as_utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive time is taken to be UTC already."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _format_time(when: datetime) -> str:
    """``2026-11-27 09:00 UTC``."""
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _format_hours(hours: float) -> str:
    """``24 hours``, ``1 hour``, ``1.5 hours``; a week or more in days (``7 days``)."""
    if hours >= 168 and (hours / 24) == round(hours / 24, 1):
        days = f"{hours / 24:g}"
        return f"{days} day" if days == "1" else f"{days} days"
    text = f"{hours:.4g}" if hours < 1000 else f"{round(hours):d}"
    return f"{text} hour" if text == "1" else f"{text} hours"
