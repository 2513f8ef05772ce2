"""Profile drift: the data under a model has moved since it was trained, per DataHub's profiles."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from mlcopilot.checks import profile_stats as ps
from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    CheckInfo,
    CheckOutcome,
    DatasetProfile,
    EntityType,
    FieldProfile,
    Finding,
    Node,
    ProfileBaseline,
    Severity,
    field_statistics,
)
from mlcopilot.protocols import CheckContext

NO_PROFILE_NOW = (
    "DataHub holds no datasetProfile of it now (its baseline profile is stored): "
    "profiling was turned off, or retention removed every profile"
)
"""Why a dataset that had profiles, and has none now, is not evaluated."""

RECIPE_SETTINGS = (
    "profiling.enabled: true",
    "profiling.include_field_quantiles: true",
    "profiling.profile_table_level_only: false",
)
"""The ingestion recipe settings that give this check what it needs, in recipe terms."""

_STATISTIC_NAMES = {
    "wasserstein_iqr": "distribution distance",
    "mean_shift": "mean shift",
    "cohens_h": "Cohen's h",
    "distinct_count_ratio": "distinct-count ratio",
    "distinct_proportion_ratio": "distinct-proportion ratio",
    "row_count_ratio": "row-count ratio",
}


_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


class ProfileDriftConfig(PluginConfig):
    """Settings of the ``profile_drift`` check: each rule's threshold."""

    distribution_threshold: float = Field(default=0.1, gt=0)
    """Distance between the quantile functions (over 0.05–0.95) in baseline IQR/1.349 units
    at or above which a numeric column has drifted (Evidently's default, 0.1)."""
    mean_shift_threshold: float = Field(default=0.1, gt=0)
    """|Δmean| / baseline stdev at or above which a numeric column without quantiles has
    drifted."""
    null_threshold: float = Field(default=0.2, gt=0)
    """Cohen's h between the null proportions at or above which missing values have drifted
    (0 % → 3 % is 0.35; 2.0 % → 2.1 % is 0.007)."""
    cardinality_ratio: float = Field(default=2.0, gt=1)
    """The distinct proportion (or count) changing more than this many times, either way."""
    distinct_counts_up_to: int = Field(default=100, ge=0)
    """Distinct counts, not proportions, are compared when either side has at most this many
    distinct values."""
    volume_ratio: float = Field(default=2.0, gt=1)
    """The row count changing more than this many times, either way."""
    volume_high_drop: float = Field(default=0.9, gt=0, le=1)
    """A fall in rows by this fraction or more (inclusive) is high, not medium."""
    min_rows: int = Field(default=100, ge=1)
    """Rows both profiles need for the column rules (volume has no minimum)."""

    def thresholds(self) -> ps.Thresholds:
        """The settings as the statistics module takes them."""
        return ps.Thresholds(
            wasserstein=self.distribution_threshold,
            mean_shift=self.mean_shift_threshold,
            cohens_h=self.null_threshold,
            cardinality_ratio=self.cardinality_ratio,
            counts_up_to=self.distinct_counts_up_to,
            volume_ratio=self.volume_ratio,
            volume_high_drop=self.volume_high_drop,
            min_rows=self.min_rows,
        )


class ProfileDrift:
    """A dataset feeding the model holds data unlike the data the model was trained on.

    What it flags: for every upstream dataset with DataHub profiles (`datasetProfile`), the
    difference between the baseline profile and the newest one. The baseline is the newest
    profile taken at or before the model's training time (the time schema drift uses);
    when DataHub has none that old, the oldest profile it held when a scan first read the
    dataset, and the finding says so. Profiles are ordered by their own timestamp, never
    by the order they were written in. The baseline is kept in the state database from
    its first use, so DataHub's retention cannot take it away. Each rule is an effect size
    (at catalog row counts every significance test says "significant"), with its
    threshold under `[checks.profile_drift]`:

    - distribution of a numeric column: the mean distance between the two quantile
      functions over the quantiles 0.05 to 0.95, in units of the baseline's spread (IQR /
      1.349), at least `distribution_threshold` (0.1); without quantiles, the mean shift
      |Δmean| / baseline stdev, at least `mean_shift_threshold` (0.1). Min and max never
      decide: one extreme row must not raise a finding;
    - missing values: Cohen's h between the null proportions, at least `null_threshold`
      (0.2: 0 % → 3 % fires, 2.0 % → 2.1 % does not, however many rows);
    - cardinality: the distinct proportion changing more than `cardinality_ratio` (2)
      times either way; where either side has at most `distinct_counts_up_to` (100)
      distinct values, the distinct counts instead (a categorical collapsing to one value,
      an id column starting to repeat);
    - volume: the row count changing more than `volume_ratio` (2) times either way, a
      finding on the dataset itself.

    Column rules need `min_rows` (100) rows on both sides; below that, or where a statistic
    is missing on either side, the column is not evaluated (never "clean"), and its open
    incident stays open. A dataset with no profile at all is reported as not evaluated.

    Severity follows relevance, as for schema drift: a column that feeds the model by
    column-level lineage is high; one lineage cannot place (no column-level lineage) is
    medium; one that complete column-level lineage proves unused is not reported. Volume
    is medium, high when the rows fell by `volume_high_drop` (90 %) or more. The finding's
    evidence holds both values and the profiles' times, the statistic, its value and
    threshold, and which statistics both profiles had. A finding resolves when a later
    profile is back within the thresholds.

    Enabling it: profiling is off by default in DataHub's connectors, and quantiles are off
    even when it is on. For the datasets the report lists as unprofiled, set in the
    ingestion recipe `profiling.enabled: true`, `profiling.include_field_quantiles: true`
    (numeric distributions) and `profiling.profile_table_level_only: false` (column
    statistics).

    Why it matters: a model degrades silently when the data under it moves: a feature's
    distribution shifts, a column starts arriving half empty, a categorical collapses to
    one value, a table loses most of its rows. Nothing fails; the predictions get worse.

    How to fix: find out why the data moved (a pipeline change, an upstream outage, a real
    change in the world). Fix the data, or retrain on data like today's and run `mlcopilot
    baseline accept MODEL` to make today's profiles the new baseline.
    """

    name: ClassVar[str] = "profile_drift"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="profile_drift",
        title="Profile drift",
        tag="urn:li:tag:mlcopilot-profile-drift",
        tag_description=(
            "The data of this upstream moved since a model was trained on it (DataHub profiles)."
        ),
        incident_type="CUSTOM",
        custom_incident_type="DATA_DRIFT",
        why=(
            "The data feeding these models no longer looks like the data they were trained "
            "on: predictions can degrade with no error anywhere."
        ),
        action=(
            "Find out why the data moved; fix it upstream, or retrain on today's data and run "
            "`mlcopilot baseline accept MODEL` to make today's profiles the baseline."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = ProfileDriftConfig
    reads_profiles: ClassVar[bool] = True
    """The scan works out each model's profile readiness for the report when a check says so."""

    def __init__(self, config: ProfileDriftConfig) -> None:
        self.config = config
        self._thresholds = config.thresholds()

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """A finding per drifted column that may feed the model, and one for the volume."""
        if node.entity_type is not EntityType.DATASET or not node.exists:
            return _NOTHING  # nothing profiled: said by the report's profile readiness
        baseline = ctx.profile_baseline
        if node.profile is None:
            # Never profiled: not evaluated, and the report's readiness lists it. Profiled
            # once but no longer: its incidents must stay as they are.
            return _NOTHING if baseline is None else CheckOutcome(unknown=NO_PROFILE_NOW)
        if baseline is None:
            return CheckOutcome(unknown="no baseline profile yet")
        comparison = ps.compare(baseline.profile, node.profile, self._thresholds)
        findings: list[Finding] = []
        undecided: set[str | None] = set()
        evaluated = False
        volume = comparison.volume
        if volume.result.evaluated:
            evaluated = True
            if volume.result.drifted:
                findings.append(self._volume(node, ctx, baseline, volume))
        else:
            undecided.add(None)
        for column in comparison.columns:
            feeds = ctx.usage.feeds(column.path)
            if feeds is False:
                continue  # complete column-level lineage proves it unused
            if not any(r.evaluated for r in column.results):
                undecided.add(column.path)
                continue
            evaluated = True
            if column.drifted:
                findings.append(self._column(node, ctx, baseline, column, feeds))
        undecided.update(
            path for path in comparison.only_baseline if ctx.usage.feeds(path) is not False
        )
        if not evaluated:
            return CheckOutcome(unknown=_nothing_evaluated(comparison))
        return CheckOutcome(findings=tuple(findings), undecided=frozenset(undecided))

    def _volume(
        self, node: Node, ctx: CheckContext, baseline: ProfileBaseline, volume: ps.VolumeDrift
    ) -> Finding:
        assert node.profile is not None
        result = volume.result
        before, after = baseline.profile.row_count or 0, node.profile.row_count or 0
        if after < before:
            moved = f"fell from {before:,} to {after:,} rows ({_percent_change(before, after)})"
        else:
            moved = f"grew from {before:,} to {after:,} rows ({_times(before, after)})"
        message = (
            f"the table {moved} since {_baseline_phrase(baseline)} "
            f"(more than {_number(result.threshold)}× either way is drift)"
        )
        evidence = _common_evidence(baseline, node.profile)
        evidence.update(_rule_evidence(result))
        evidence["rules"] = [_rule_json(result)]
        evidence["available"] = ["rowCount"]
        evidence["baseline_rows"] = before
        evidence["current_rows"] = after
        evidence["high_drop"] = self.config.volume_high_drop
        return ctx.finding(
            self.name,
            Severity.HIGH if volume.high else Severity.MEDIUM,
            node,
            None,
            message,
            evidence=evidence,
        )

    def _column(
        self,
        node: Node,
        ctx: CheckContext,
        baseline: ProfileBaseline,
        column: ps.ColumnDrift,
        feeds: bool | None,
    ) -> Finding:
        assert node.profile is not None
        fired = column.drifted
        said = "; ".join(_describe(r) for r in fired)
        impact = "it feeds the model" if feeds else "lineage cannot tell whether it feeds the model"
        message = (
            f"column `{column.path}` moved since {_baseline_phrase(baseline)}: {said}; {impact}"
        )
        evidence = _common_evidence(baseline, node.profile)
        evidence.update(_rule_evidence(fired[0]))
        evidence["rules"] = [_rule_json(r) for r in column.results]
        evidence["not_evaluated"] = {r.rule: r.reason for r in column.not_evaluated}
        evidence["available"] = list(column.available)
        evidence["baseline_rows"] = column.baseline_rows
        evidence["current_rows"] = column.current_rows
        before = baseline.profile.field(column.path)
        after = node.profile.field(column.path)
        evidence["baseline"] = _field_json(before)
        evidence["current"] = _field_json(after)
        evidence["feeds_model"] = "yes" if feeds else "unknown"
        return ctx.finding(
            self.name,
            Severity.HIGH if feeds else Severity.MEDIUM,
            node,
            column.path,
            message,
            evidence=evidence,
        )


def _nothing_evaluated(comparison: ps.ProfileComparison) -> str:
    """Why no rule could decide anywhere on the dataset (the first reason of each kind)."""
    reasons = [comparison.volume.result.reason or ""]
    reasons += [r.reason or "" for c in comparison.columns for r in c.results]
    first = list(dict.fromkeys(r for r in reasons if r))
    if not comparison.columns and not comparison.only_baseline:
        first.append("no column profiled in both profiles")
    return "profiles not comparable: " + "; ".join(first[:3])


def _baseline_phrase(baseline: ProfileBaseline) -> str:
    """``the baseline profile of 2026-08-01 (...)``: which profile, and why that one."""
    when = _day(baseline.profile.at)
    if baseline.source == "history":
        return f"the profile of {when}, the newest at or before the model's training"
    if baseline.source == "accepted":
        return f"the profile of {when}, accepted as the baseline on {_day(baseline.captured_at)}"
    return (
        f"the profile of {when}, the oldest DataHub held when first scanned "
        "(none was taken by the model's training time)"
    )


def _describe(result: ps.RuleResult) -> str:
    """One fired rule in words, e.g. ``null share 0.0 % → 3.1 % (Cohen's h 0.35 ≥ 0.2)``."""
    value = _number(result.value) if result.value is not None else "∞"
    threshold = _number(result.threshold)
    before, after = result.baseline, result.current
    if result.statistic == "wasserstein_iqr":
        return (
            f"its distribution moved {value} × the baseline's spread (quantile distance ≥ "
            f"{threshold}; median {_number(before)} → {_number(after)})"
        )
    if result.statistic == "mean_shift":
        return (
            f"its mean moved {value} × the baseline's stdev ({_number(before)} → "
            f"{_number(after)}; ≥ {threshold}; no quantiles to compare)"
        )
    if result.statistic == "cohens_h":
        return (
            f"null share {_percent(before)} → {_percent(after)} (Cohen's h {value} ≥ {threshold})"
        )
    if result.statistic == "distinct_count_ratio":
        return (
            f"distinct values {_number(before)} → {_number(after)} "
            f"(more than {threshold}× either way)"
        )
    return (
        f"distinct share {_percent(before)} → {_percent(after)} (more than {threshold}× either way)"
    )


def _common_evidence(baseline: ProfileBaseline, current: DatasetProfile) -> dict[str, JSON]:
    return {
        "baseline_source": baseline.source,
        "baseline_profile_at": _instant(baseline.profile.at),
        "current_profile_at": _instant(current.at),
    }


def _rule_evidence(result: ps.RuleResult) -> dict[str, JSON]:
    return {
        "statistic": result.statistic,
        "value": _rounded(result.value),
        "threshold": result.threshold,
    }


def _rule_json(result: ps.RuleResult) -> dict[str, JSON]:
    out: dict[str, JSON] = {
        "rule": result.rule,
        "statistic": result.statistic,
        "threshold": result.threshold,
    }
    if result.evaluated:
        out["value"] = _rounded(result.value)
        out["drifted"] = result.drifted
        out["baseline"] = _rounded(result.baseline)
        out["current"] = _rounded(result.current)
    else:
        out["not_evaluated"] = result.reason
    return out


def _field_json(field: FieldProfile | None) -> dict[str, JSON]:
    """The column's statistics as DataHub wrote them (strings stay strings)."""
    if field is None:
        return {}
    out: dict[str, JSON] = dict(field_statistics(field))
    if field.quantiles:
        out["quantiles"] = [[q, v] for q, v in field.quantiles]
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _number(value: float | None) -> str:
    """``0.35``, ``1,200``, ``3.1e-05``: short, without losing a small value."""
    if value is None:
        return "?"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 0.01:
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:.2g}"


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value * 100:.1f} %"


def _percent_change(before: int, after: int) -> str:
    return f"−{(before - after) / before * 100:.0f} %" if before else "from none"


def _times(before: int, after: int) -> str:
    return f"{after / before:.1f}×" if before else "from none"


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d")


def _instant(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")
