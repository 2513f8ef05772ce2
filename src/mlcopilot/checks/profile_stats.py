"""Drift statistics between two DataHub profiles: pure functions, no catalog, no clock.

Every rule is an effect size with a threshold, never a significance test: at catalog row
counts every test says "significant" (a null rate going from 2.0 % to 2.1 % over 10⁸ rows has
z ≈ 50), while the effect sizes below stay put however many rows there are. The choices and
their defaults follow ``next-anchors.md`` §3 (Evidently's defaults, and a probe of how each
statistic survives DataHub's summaries):

- **distribution** of a numeric column: the mean of ``|Q_current(p) − Q_baseline(p)|`` over
  ``p ∈ [0.05, 0.95]``, each quantile function linear between the quantile points DataHub
  gives inside that range (flat beyond the outermost one), divided by the baseline's spread
  ``(Q(0.75) − Q(0.25)) / 1.349``. It needs three such points on each side. Points outside
  the range, and min and max, are never used: one extreme row must not decide. Without
  quantiles (or with a baseline IQR of zero): the standardised mean difference
  ``|Δmean| / baseline stdev``.
- **missing values**: Cohen's h between the two null proportions.
- **cardinality**: the ratio of the distinct proportions (distinct / non-null rows), or of
  the distinct counts when either side has at most ``counts_up_to`` distinct values (a
  categorical of four values does not "change" when its table grows).
- **volume**: the ratio of the row counts.

A statistic that cannot be computed (missing on a side, too few rows, not numeric) is a
:class:`RuleResult` that is *not evaluated*, with the reason: never a clean result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from mlcopilot.model.profiles import (
    HIGH_P,
    LOW_P,
    MIN_QUANTILES,
    DatasetProfile,
    FieldProfile,
    interior_quantiles,
    statistic,
)

IQR_TO_SIGMA = 1.349
"""A normal distribution's IQR in standard deviations: IQR / 1.349 is a robust sigma."""
_EPS = 1e-9
"""Relative tolerance of a threshold comparison (float representation error only)."""

Rule = Literal["distribution", "missing", "cardinality", "volume"]
Statistic = Literal[
    "wasserstein_iqr",
    "mean_shift",
    "cohens_h",
    "distinct_count_ratio",
    "distinct_proportion_ratio",
    "row_count_ratio",
]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every threshold of the rules (``[checks.profile_drift]``), with the issue's defaults."""

    wasserstein: float = 0.1
    """Distribution distance (quantile W1 / baseline IQR-sigma) at or above which it drifted."""
    mean_shift: float = 0.1
    """|Δmean| / baseline stdev at or above which it drifted (no quantiles)."""
    cohens_h: float = 0.2
    """Cohen's h between the null proportions at or above which it drifted."""
    cardinality_ratio: float = 2.0
    """Distinct ratio beyond which (more than this, or less than its inverse) it drifted."""
    counts_up_to: int = 100
    """Distinct counts, not proportions, are compared when either side has at most this many."""
    volume_ratio: float = 2.0
    """Row-count ratio beyond which (either way) the dataset drifted."""
    volume_high_drop: float = 0.9
    """A fall in rows by this fraction or more (inclusive) makes the volume finding high."""
    min_rows: int = 100
    """Rows each side needs for the column rules (volume has no minimum)."""


@dataclass(frozen=True, slots=True)
class RuleResult:
    """One rule applied to one column (or, for volume, the dataset).

    When ``reason`` is set the rule was not evaluated: ``value`` is None and ``drifted`` False.
    ``baseline`` and ``current`` are the compared values (proportions, counts, means); for
    the distribution distance, the baseline and current medians of the quantile functions.
    """

    rule: Rule
    statistic: Statistic | None
    threshold: float
    value: float | None = None
    drifted: bool = False
    baseline: float | None = None
    current: float | None = None
    reason: str | None = None

    @property
    def evaluated(self) -> bool:
        """True when the rule could decide."""
        return self.reason is None


@dataclass(frozen=True, slots=True)
class ColumnDrift:
    """The column rules applied to one column of two profiles."""

    path: str
    results: tuple[RuleResult, ...]
    available: tuple[str, ...] = ()
    """The statistics both profiles hold for the column (``quantiles``, ``mean``, ...)."""
    baseline_rows: int | None = None
    current_rows: int | None = None

    @property
    def drifted(self) -> tuple[RuleResult, ...]:
        """The rules that fired."""
        return tuple(r for r in self.results if r.drifted)

    @property
    def not_evaluated(self) -> tuple[RuleResult, ...]:
        """The rules that could not decide."""
        return tuple(r for r in self.results if not r.evaluated)


@dataclass(frozen=True, slots=True)
class VolumeDrift:
    """The volume rule: the row counts of two profiles."""

    result: RuleResult
    high: bool = False
    """The rows fell by ``volume_high_drop`` or more."""


@dataclass(frozen=True, slots=True)
class ProfileComparison:
    """Two profiles compared: the volume rule and every column both profile."""

    volume: VolumeDrift
    columns: tuple[ColumnDrift, ...] = ()
    only_baseline: tuple[str, ...] = ()
    """Columns profiled in the baseline but not now (not evaluated)."""
    only_current: tuple[str, ...] = ()
    """Columns profiled now but not in the baseline (not evaluated)."""


# --- parsing -------------------------------------------------------------------------------


number = statistic
"""A statistic DataHub wrote as a string, as a finite float (see ``model.profiles``)."""
quantile_points = interior_quantiles
"""The quantile points in ``[LOW_P, HIGH_P]``, by ``p`` (see ``model.profiles``)."""


def column_rows(profile: FieldProfile, row_count: int | None) -> int | None:
    """How many rows the column's profile covers.

    The profile's ``rowCount`` when it has one; otherwise what the column's own counts imply
    (BigID writes no ``rowCount``): non-null rows (distinct count / distinct proportion) plus
    nulls, else nulls / null proportion.
    """
    if row_count is not None:
        return row_count
    unique, proportion, nulls = profile.unique_count, profile.unique_proportion, profile.null_count
    if unique is not None and proportion is not None and proportion > 0:
        return round(unique / proportion) + (nulls or 0)
    if nulls is not None and profile.null_proportion and profile.null_proportion > 0:
        return round(nulls / profile.null_proportion)
    return None


def available(profile: FieldProfile) -> list[str]:
    """The statistics a column profile holds, by DataHub's names (quantiles: 3 usable)."""
    found = [
        name
        for name, value in (
            ("uniqueCount", profile.unique_count),
            ("uniqueProportion", profile.unique_proportion),
            ("nullCount", profile.null_count),
            ("nullProportion", profile.null_proportion),
            ("min", number(profile.min)),
            ("max", number(profile.max)),
            ("mean", number(profile.mean)),
            ("median", number(profile.median)),
            ("stdev", number(profile.stdev)),
        )
        if value is not None
    ]
    if len(quantile_points(profile)) >= MIN_QUANTILES:
        found.append("quantiles")
    return found


# --- the statistics ------------------------------------------------------------------------


def interpolate(points: Sequence[tuple[float, float]], p: float) -> float:
    """The quantile function through ``points`` at ``p``: linear between, flat beyond."""
    if p <= points[0][0]:
        return points[0][1]
    if p >= points[-1][0]:
        return points[-1][1]
    for (p0, x0), (p1, x1) in itertools.pairwise(points):
        if p0 <= p <= p1:
            return x0 if p1 == p0 else x0 + (x1 - x0) * (p - p0) / (p1 - p0)
    return points[-1][1]  # pragma: no cover - the points are sorted


def quantile_distance(
    baseline: Sequence[tuple[float, float]], current: Sequence[tuple[float, float]]
) -> float:
    """The mean of ``|Q_current − Q_baseline|`` over ``[LOW_P, HIGH_P]``, computed exactly.

    Both quantile functions are piecewise linear, so their difference is linear between the
    union of their points, and ``|difference|`` integrates in closed form segment by segment.
    """
    cuts = sorted({LOW_P, HIGH_P, *(p for p, _ in baseline), *(p for p, _ in current)})
    total = 0.0
    for a, b in itertools.pairwise(cuts):
        d0 = interpolate(current, a) - interpolate(baseline, a)
        d1 = interpolate(current, b) - interpolate(baseline, b)
        width = b - a
        if d0 * d1 >= 0:
            total += width * (abs(d0) + abs(d1)) / 2
        else:  # the difference crosses zero inside the segment
            total += width * (d0 * d0 + d1 * d1) / (2 * (abs(d0) + abs(d1)))
    return total / (HIGH_P - LOW_P)


def cohens_h(p1: float, p2: float) -> float:
    """Cohen's h between two proportions: ``|2·asin(√p2) − 2·asin(√p1)|``."""
    p1, p2 = min(max(p1, 0.0), 1.0), min(max(p2, 0.0), 1.0)
    return abs(2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1)))


def at_least(value: float, threshold: float) -> bool:
    """``value ≥ threshold``, forgiving float representation error at the boundary."""
    return value >= threshold - _EPS * max(1.0, abs(threshold))


def beyond_ratio(baseline: float, current: float, ratio: float) -> bool:
    """Whether ``current`` is more than ``ratio`` × ``baseline``, or less than baseline / ratio.

    Exact for whole numbers (counts); exactly ``ratio`` times is not beyond.
    """
    if isinstance(baseline, int) and isinstance(current, int):
        r = Fraction(str(ratio))
        return current > r * baseline or current * r < baseline
    if baseline <= 0:
        return current > 0
    value = current / baseline
    return value > ratio * (1 + _EPS) or value < (1 / ratio) * (1 - _EPS)


def distribution(
    baseline: FieldProfile, current: FieldProfile, thresholds: Thresholds
) -> RuleResult:
    """The distribution rule: quantile distance if both sides have quantiles, else mean shift."""
    before, after = quantile_points(baseline), quantile_points(current)
    if len(before) >= MIN_QUANTILES and len(after) >= MIN_QUANTILES:
        iqr = interpolate(before, 0.75) - interpolate(before, 0.25)
        if iqr > 0:
            value = quantile_distance(before, after) / (iqr / IQR_TO_SIGMA)
            return RuleResult(
                "distribution",
                "wasserstein_iqr",
                thresholds.wasserstein,
                value=value,
                drifted=at_least(value, thresholds.wasserstein),
                baseline=interpolate(before, 0.5),
                current=interpolate(after, 0.5),
            )
    mean_before, mean_after = number(baseline.mean), number(current.mean)
    stdev = number(baseline.stdev)
    if mean_before is None or mean_after is None or stdev is None:
        return RuleResult(
            "distribution",
            None,
            thresholds.wasserstein,
            reason=_no_distribution(baseline, current),
        )
    if stdev <= 0:
        return RuleResult(
            "distribution",
            "mean_shift",
            thresholds.mean_shift,
            baseline=mean_before,
            current=mean_after,
            reason="the baseline's standard deviation is 0",
        )
    value = abs(mean_after - mean_before) / stdev
    return RuleResult(
        "distribution",
        "mean_shift",
        thresholds.mean_shift,
        value=value,
        drifted=at_least(value, thresholds.mean_shift),
        baseline=mean_before,
        current=mean_after,
    )


def null_share(profile: FieldProfile, rows: int | None) -> float | None:
    """The column's null proportion: as written, else null count over rows."""
    if profile.null_proportion is not None:
        return profile.null_proportion
    if profile.null_count is not None and rows:
        return profile.null_count / rows
    return None


def missing(
    baseline: FieldProfile,
    current: FieldProfile,
    rows: tuple[int | None, int | None],
    thresholds: Thresholds,
) -> RuleResult:
    """The missing-values rule: Cohen's h between the null proportions."""
    before, after = null_share(baseline, rows[0]), null_share(current, rows[1])
    if before is None or after is None:
        return RuleResult(
            "missing",
            "cohens_h",
            thresholds.cohens_h,
            reason=_missing("null proportion", before is not None, after is not None),
        )
    value = cohens_h(before, after)
    return RuleResult(
        "missing",
        "cohens_h",
        thresholds.cohens_h,
        value=value,
        drifted=at_least(value, thresholds.cohens_h),
        baseline=before,
        current=after,
    )


def distinct_share(profile: FieldProfile, rows: int | None) -> float | None:
    """DataHub's ``uniqueProportion`` (distinct / non-null rows), else computed from counts."""
    if profile.unique_proportion is not None:
        return profile.unique_proportion
    if profile.unique_count is not None and rows is not None:
        non_null = rows - (profile.null_count or 0)
        return profile.unique_count / non_null if non_null > 0 else None
    return None


def cardinality(
    baseline: FieldProfile,
    current: FieldProfile,
    rows: tuple[int | None, int | None],
    thresholds: Thresholds,
) -> RuleResult:
    """The cardinality rule: distinct counts when either side is small, else proportions."""
    limit = thresholds.cardinality_ratio
    before_n, after_n = baseline.unique_count, current.unique_count
    if (
        before_n is not None
        and after_n is not None
        and min(before_n, after_n) <= thresholds.counts_up_to
    ):
        return _ratio_result("distinct_count_ratio", before_n, after_n, limit)
    before, after = distinct_share(baseline, rows[0]), distinct_share(current, rows[1])
    if before is None or after is None:
        return RuleResult(
            "cardinality",
            "distinct_proportion_ratio",
            limit,
            reason=_missing("distinct count or proportion", before is not None, after is not None),
        )
    return _ratio_result("distinct_proportion_ratio", before, after, limit)


def volume(baseline: int | None, current: int | None, thresholds: Thresholds) -> VolumeDrift:
    """The volume rule: the row counts, either way; high when they fell by enough."""
    limit = thresholds.volume_ratio
    if baseline is None or current is None:
        reason = _missing("row count", baseline is not None, current is not None)
        return VolumeDrift(RuleResult("volume", "row_count_ratio", limit, reason=reason))
    drifted = beyond_ratio(baseline, current, limit)
    drop = Fraction(str(thresholds.volume_high_drop))
    high = drifted and baseline > 0 and current <= Fraction(baseline) * (1 - drop)
    return VolumeDrift(
        RuleResult(
            "volume",
            "row_count_ratio",
            limit,
            value=current / baseline if baseline > 0 else None,
            drifted=drifted,
            baseline=baseline,
            current=current,
        ),
        high=high,
    )


def compare_column(
    baseline: FieldProfile,
    current: FieldProfile,
    rows: tuple[int | None, int | None],
    thresholds: Thresholds,
) -> ColumnDrift:
    """Every column rule on one column; below ``min_rows`` on either side, none is evaluated.

    Args:
        baseline: The column in the baseline profile.
        current: The column in the current profile.
        rows: The two profiles' ``rowCount`` (None: not given; the column's counts are used).
        thresholds: The rules' thresholds.
    """
    before_rows, after_rows = column_rows(baseline, rows[0]), column_rows(current, rows[1])
    both = [s for s in available(baseline) if s in set(available(current))]
    results: tuple[RuleResult, ...]
    if before_rows is None or after_rows is None:
        reason = _missing("row count", before_rows is not None, after_rows is not None)
        results = _none_evaluated(thresholds, reason)
    elif min(before_rows, after_rows) < thresholds.min_rows:
        results = _none_evaluated(
            thresholds,
            f"fewer than {thresholds.min_rows} rows "
            f"(baseline {before_rows:,}, current {after_rows:,})",
        )
    else:
        counted = (before_rows, after_rows)
        results = (
            distribution(baseline, current, thresholds),
            missing(baseline, current, counted, thresholds),
            cardinality(baseline, current, counted, thresholds),
        )
    return ColumnDrift(
        path=baseline.path,
        results=results,
        available=tuple(both),
        baseline_rows=before_rows,
        current_rows=after_rows,
    )


def compare(
    baseline: DatasetProfile, current: DatasetProfile, thresholds: Thresholds
) -> ProfileComparison:
    """Two profiles compared: volume, and every column both have, in the current's order."""
    before = {f.path: f for f in baseline.fields}
    after = {f.path: f for f in current.fields}
    rows = (baseline.row_count, current.row_count)
    return ProfileComparison(
        volume=volume(baseline.row_count, current.row_count, thresholds),
        columns=tuple(
            compare_column(before[f.path], f, rows, thresholds)
            for f in current.fields
            if f.path in before
        ),
        only_baseline=tuple(p for p in before if p not in after),
        only_current=tuple(p for p in after if p not in before),
    )


def _ratio_result(statistic: Statistic, before: float, after: float, limit: float) -> RuleResult:
    if before == 0 and after == 0:
        value: float | None = 1.0
    else:
        value = after / before if before else None
    return RuleResult(
        "cardinality",
        statistic,
        limit,
        value=value,
        drifted=beyond_ratio(before, after, limit),
        baseline=before,
        current=after,
    )


def _none_evaluated(thresholds: Thresholds, reason: str) -> tuple[RuleResult, ...]:
    return (
        RuleResult("distribution", None, thresholds.wasserstein, reason=reason),
        RuleResult("missing", "cohens_h", thresholds.cohens_h, reason=reason),
        RuleResult("cardinality", None, thresholds.cardinality_ratio, reason=reason),
    )


def _missing(what: str, baseline: bool, current: bool) -> str:
    """``no X in the baseline profile`` (or current, or either)."""
    if not baseline and not current:
        return f"no {what} in either profile"
    return f"no {what} in the {'current' if baseline else 'baseline'} profile"


def _no_distribution(baseline: FieldProfile, current: FieldProfile) -> str:
    """Why the distribution rule could not decide: what each side has of what it needs."""
    sides = {"baseline": baseline, "current": current}
    held = {name: _numeric_summary(side) for name, side in sides.items()}
    if not any(held.values()):
        return (
            "no quantiles, mean or stdev in either profile "
            "(not a numeric column, or not profiled so)"
        )
    if all(len(quantile_points(side)) >= MIN_QUANTILES for side in sides.values()):
        return "the baseline's interquartile range is 0, and no mean and stdev to fall back on"
    return (
        f"needs {MIN_QUANTILES} quantiles between {LOW_P} and {HIGH_P} on both sides, or both "
        "means and the baseline's stdev; "
        + "; ".join(f"the {name} has {', '.join(h) or 'none'}" for name, h in held.items())
    )


def _numeric_summary(profile: FieldProfile) -> list[str]:
    points = len(quantile_points(profile))
    held = [f"{points} quantile{'s' if points != 1 else ''}"] if points else []
    held += [
        n for n, v in (("mean", profile.mean), ("stdev", profile.stdev)) if number(v) is not None
    ]
    return held
