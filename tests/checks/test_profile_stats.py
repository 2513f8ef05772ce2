"""The profile-drift statistics, at and around every threshold, on DataHub-shaped profiles.

Profiles are built the way DataHub's profilers write them: statistics as strings, quantiles at
0.05/0.25/0.5/0.75/0.95 (the SQLAlchemy profiler's points), min and max the extreme rows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from statistics import NormalDist, fmean, stdev

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.checks import profile_stats as ps
from mlcopilot.model import DatasetProfile, FieldProfile

T = ps.Thresholds()
PS = (0.05, 0.25, 0.5, 0.75, 0.95)
Z = [-1.645, -0.6745, 0.0, 0.6745, 1.645]
"""Standard normal quantiles, rounded so the IQR is exactly 1.349: the distance is in σ."""


def numeric(
    values: Sequence[float] | None = None,
    *,
    quantiles: Sequence[float] | None = None,
    points: Sequence[float] = PS,
    mean: float | None = None,
    sd: float | None = None,
    lo: float | None = None,
    hi: float | None = None,
    nulls: float | None = 0.0,
    unique: int | None = None,
    unique_share: float | None = None,
) -> FieldProfile:
    """A numeric column profile, from raw ``values`` or given statistics (as strings)."""
    if values is not None:
        ordered = sorted(values)
        quantiles = [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in points]
        mean, sd, lo, hi = fmean(ordered), stdev(ordered), ordered[0], ordered[-1]
    return FieldProfile(
        path="x",
        unique_count=unique,
        unique_proportion=unique_share,
        null_proportion=nulls,
        min=None if lo is None else repr(lo),
        max=None if hi is None else repr(hi),
        mean=None if mean is None else repr(mean),
        stdev=None if sd is None else repr(sd),
        quantiles=tuple((str(p), repr(v)) for p, v in zip(points, quantiles or (), strict=False)),
    )


def dist(before: FieldProfile, after: FieldProfile) -> ps.RuleResult:
    return ps.distribution(before, after, T)


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.5", 12.5),
        (" 3 ", 3.0),
        ("1e3", 1000.0),
        ("-0.25", -0.25),
        ("NaN", None),
        ("inf", None),
        ("", None),
        ("None", None),
        ("2021-03-01", None),
        (None, None),
    ],
)
def test_statistics_are_parsed_from_datahubs_strings(text: str | None, value: float | None) -> None:
    assert ps.number(text) == value


def test_only_interior_quantiles_count_sorted_and_first_of_a_duplicate() -> None:
    field = FieldProfile(
        path="x",
        quantiles=(
            ("0.5", "5"),
            ("0.0", "-1000"),
            ("0.25", "2"),
            ("0.05", "1"),
            ("1.0", "1000"),
            ("0.5", "7"),
            ("0.75", "not a number"),
            ("0.99", "99"),
        ),
    )
    assert ps.quantile_points(field) == [(0.05, 1.0), (0.25, 2.0), (0.5, 5.0)]


# --- distribution: quantile distance -------------------------------------------------------


def test_identical_quantiles_have_distance_zero() -> None:
    same = numeric(quantiles=Z, mean=0, sd=1)
    result = dist(same, same)
    assert (result.statistic, result.value, result.drifted) == ("wasserstein_iqr", 0.0, False)


@pytest.mark.parametrize(
    ("shift", "drifted"),
    [(0.0999, False), (0.1, True), (0.1001, True), (-0.1, True), (-0.0999, False)],
)
def test_distance_threshold_is_inclusive(shift: float, drifted: bool) -> None:
    before = numeric(quantiles=Z)
    after = numeric(quantiles=[z + shift for z in Z])
    result = dist(before, after)
    assert result.statistic == "wasserstein_iqr"
    assert result.value == pytest.approx(abs(shift), rel=1e-9)
    assert result.drifted is drifted


def test_distance_is_in_units_of_the_baselines_robust_sigma() -> None:
    before = numeric(quantiles=[100 + 15 * z for z in Z])  # N(100, 15)
    after = numeric(quantiles=[103.75 + 15 * z for z in Z])  # +0.25 sd
    assert dist(before, after).value == pytest.approx(0.25, rel=1e-6)


def test_the_distance_crossing_zero_is_integrated_exactly() -> None:
    # Spread grows around the same median: the difference is -a at 0.05, +a at 0.95.
    before = numeric(quantiles=[0, 1, 2, 3, 4], points=(0.05, 0.25, 0.5, 0.75, 0.95))
    after = numeric(quantiles=[-1, 0.5, 2, 3.5, 5])
    # |diff| is 1 at the ends, 0.5 at 0.25 and 0.75, 0 at 0.5: triangles, exactly.
    expected = (0.2 * (1 + 0.5) / 2 * 2 + 0.25 * 0.5 / 2 * 2) / 0.9 / (2 / 1.349)
    assert dist(before, after).value == pytest.approx(expected, rel=1e-12)


def test_min_max_and_outer_quantiles_never_decide() -> None:
    before = numeric(quantiles=[-1000.0, *Z, 1000.0], points=(0.0, *PS, 1.0), lo=-1e3, hi=1e3)
    after = numeric(quantiles=[-1e9, *Z, 1e9], points=(0.0, *PS, 1.0), lo=-1e9, hi=1e9)
    result = dist(before, after)
    assert (result.value, result.drifted) == (0.0, False)


def test_quantiles_given_at_other_points_are_interpolated() -> None:
    deciles = tuple(round(0.1 * i, 1) for i in range(1, 10))
    before = numeric(quantiles=[NormalDist().inv_cdf(p) for p in deciles], points=deciles)
    after = numeric(quantiles=[z + 0.3 for z in Z])
    result = dist(before, after)
    assert result.statistic == "wasserstein_iqr"
    # Deciles: linear between 0.2 and 0.3 widens the IQR a little, flat beyond 0.1 and 0.9
    # adds a little distance; the shift of 0.3 σ is still read as about that.
    assert result.value == pytest.approx(0.3, abs=0.02)
    assert result.drifted


def _sample(
    draw: random.Random, n: int, kind: str, shift: float = 0.0, sigma: float = 1.0
) -> list[float]:
    if kind == "normal":
        return [draw.gauss(100 + 15 * shift, 15 * sigma) for _ in range(n)]
    return [draw.lognormvariate(3, sigma) for _ in range(n)]


def test_heavy_tailed_data_with_no_drift_raises_nothing() -> None:
    before = _sample(random.Random(1), 100_000, "lognormal")
    after = _sample(random.Random(2), 100_000, "lognormal")
    after[-1] = 1e9  # one far extreme row: max and mean and stdev move, the body does not
    base, cur = numeric(before), numeric(after)
    result = dist(base, cur)
    assert result.statistic == "wasserstein_iqr"
    assert result.value is not None
    assert result.value < 0.02
    assert not result.drifted
    # The mean-shift fallback alone would be hijacked by the one row: quantiles prevent it.
    no_quantiles = ps.distribution(
        FieldProfile("x", mean=base.mean, stdev=base.stdev),
        FieldProfile("x", mean=cur.mean, stdev=cur.stdev),
        T,
    )
    assert no_quantiles.drifted


@pytest.mark.parametrize(
    ("kind", "shift", "sigma"),
    [("normal", 0.15, 1.0), ("normal", 0.0, 1.5), ("lognormal", 0.0, 1.2)],
    ids=["mean+0.15sd", "scale-x1.5", "lognormal-sigma-1.2"],
)
def test_a_small_shift_is_found(kind: str, shift: float, sigma: float) -> None:
    before = _sample(random.Random(3), 50_000, kind)
    after = _sample(random.Random(4), 50_000, kind, shift=shift, sigma=sigma)
    result = dist(numeric(before), numeric(after))
    assert result.statistic == "wasserstein_iqr"
    assert result.drifted, result


def test_no_drift_on_a_fresh_normal_sample() -> None:
    before = _sample(random.Random(5), 50_000, "normal")
    after = _sample(random.Random(6), 50_000, "normal")
    result = dist(numeric(before), numeric(after))
    assert result.value is not None
    assert result.value < 0.03
    assert not result.drifted


quantile_vectors = st.lists(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=5, max_size=5
).map(sorted)


@settings(max_examples=200, deadline=None)
@given(quantile_vectors, st.floats(min_value=-1e3, max_value=1e3), st.floats(0.01, 100.0))
def test_distance_is_the_shift_over_sigma_and_scale_free(
    qs: list[float], shift: float, scale: float
) -> None:
    before = numeric(quantiles=qs)
    iqr = qs[3] - qs[1]
    after = numeric(quantiles=[q + shift for q in qs])
    result = dist(before, after)
    if iqr <= 1e-3:
        return  # no spread: the mean-shift fallback (not given here) decides
    assert result.value == pytest.approx(abs(shift) * 1.349 / iqr, rel=1e-6, abs=1e-6)
    scaled = dist(
        numeric(quantiles=[q * scale for q in qs]),
        numeric(quantiles=[(q + shift) * scale for q in qs]),
    )
    assert scaled.value == pytest.approx(result.value, rel=1e-6, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(quantile_vectors)
def test_a_profile_compared_with_itself_never_drifts(qs: list[float]) -> None:
    field = numeric(quantiles=qs, mean=qs[2], sd=1.0, unique=500, unique_share=0.5, nulls=0.1)
    drift = ps.compare_column(field, field, (10_000, 10_000), T)
    assert drift.drifted == ()


# --- distribution: the mean-shift fallback -------------------------------------------------


@pytest.mark.parametrize(
    ("mean", "drifted"), [(0.0999, False), (0.1, True), (-0.1, True), (0.2, True)]
)
def test_mean_shift_without_quantiles(mean: float, drifted: bool) -> None:
    result = dist(numeric(mean=0.0, sd=1.0), numeric(mean=mean, sd=1.0))
    assert result.statistic == "mean_shift"
    assert result.value == pytest.approx(abs(mean))
    assert result.drifted is drifted


def test_too_few_quantiles_fall_back_to_the_mean_shift() -> None:
    before = numeric(quantiles=[1, 2], points=(0.25, 0.75), mean=10, sd=2)
    after = numeric(quantiles=[1, 2, 3], points=(0.25, 0.5, 0.75), mean=10.1, sd=2)
    result = dist(before, after)
    assert (result.statistic, result.drifted) == ("mean_shift", False)
    assert result.value == pytest.approx(0.05)


def test_a_zero_iqr_falls_back_to_the_mean_shift() -> None:
    flags = numeric(quantiles=[0, 0, 0, 0, 1], mean=0.1, sd=0.3)
    now = numeric(quantiles=[0, 0, 0, 1, 1], mean=0.3, sd=0.46)
    result = dist(flags, now)
    assert result.statistic == "mean_shift"
    assert result.drifted


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        (
            FieldProfile("x"),
            FieldProfile("x"),
            "no quantiles, mean or stdev in either profile",
        ),
        (
            FieldProfile("x", mean="1", stdev="1"),
            FieldProfile("x"),
            "the current has none",
        ),
        (
            FieldProfile("x", mean="1"),
            FieldProfile("x", mean="2"),
            "the baseline has mean",
        ),
    ],
    ids=["string-column", "missing-current", "no-baseline-stdev"],
)
def test_distribution_not_evaluated_says_why(
    before: FieldProfile, after: FieldProfile, reason: str
) -> None:
    result = dist(before, after)
    assert not result.evaluated
    assert not result.drifted
    assert result.value is None
    assert result.reason is not None
    assert reason in result.reason


def test_a_constant_baseline_is_not_evaluated() -> None:
    result = dist(FieldProfile("x", mean="1", stdev="0"), FieldProfile("x", mean="2", stdev="0"))
    assert result.reason == "the baseline's standard deviation is 0"


# --- missing values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "drifted"),
    [
        (0.0, 0.03, True),  # 0 % → 3 %: h = 0.35
        (0.02, 0.021, False),  # h = 0.007, however many rows
        (0.0, math.sin(0.1) ** 2, True),  # h = 0.2 exactly
        (0.0, math.sin(0.0999) ** 2, False),
        (0.5, 0.4, True),  # h = 0.201
        (0.5, 0.45, False),
        (0.3, 0.0, True),  # the other way
    ],
)
def test_missing_values_by_cohens_h(before: float, after: float, drifted: bool) -> None:
    result = ps.missing(numeric(nulls=before), numeric(nulls=after), (10**8, 10**8), T)
    assert result.statistic == "cohens_h"
    assert result.value == pytest.approx(
        abs(2 * math.asin(math.sqrt(after)) - 2 * math.asin(math.sqrt(before)))
    )
    assert result.drifted is drifted


def test_null_proportion_from_counts_when_not_written() -> None:
    before = FieldProfile("x", null_count=0)
    after = FieldProfile("x", null_count=300)
    result = ps.missing(before, after, (10_000, 10_000), T)
    assert result.current == pytest.approx(0.03)
    assert result.drifted


def test_missing_not_evaluated_without_nulls_on_a_side() -> None:
    result = ps.missing(FieldProfile("x", null_proportion=0.1), FieldProfile("x"), (500, 500), T)
    assert result.reason == "no null proportion in the current profile"


# --- cardinality --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "statistic", "drifted"),
    [
        ((4, 4 / 1_000), (4, 4 / 100_000), "distinct_count_ratio", False),  # table grew
        ((4, 0.004), (1, 0.00001), "distinct_count_ratio", True),  # collapsed to one value
        ((50, 0.05), (100, 0.1), "distinct_count_ratio", False),  # exactly 2×
        ((50, 0.05), (101, 0.1), "distinct_count_ratio", True),
        ((50, 0.05), (25, 0.1), "distinct_count_ratio", False),  # exactly half
        ((50, 0.05), (24, 0.1), "distinct_count_ratio", True),
        ((100, 0.5), (500, 0.5), "distinct_count_ratio", True),  # one side at 100
        ((101, 0.5), (500, 0.5), "distinct_proportion_ratio", False),  # both above: proportions
        ((10_000, 1.0), (10_000, 0.5), "distinct_proportion_ratio", False),  # exactly half
        ((10_000, 1.0), (10_000, 0.49), "distinct_proportion_ratio", True),  # an id repeats
        ((10_000, 0.2), (30_000, 0.41), "distinct_proportion_ratio", True),
    ],
)
def test_cardinality(
    before: tuple[int, float], after: tuple[int, float], statistic: str, drifted: bool
) -> None:
    result = ps.cardinality(
        FieldProfile("x", unique_count=before[0], unique_proportion=before[1]),
        FieldProfile("x", unique_count=after[0], unique_proportion=after[1]),
        (100_000, 100_000),
        T,
    )
    assert (result.statistic, result.drifted) == (statistic, drifted)


def test_distinct_proportion_from_counts_when_not_written() -> None:
    result = ps.cardinality(
        FieldProfile("x", unique_count=1_000, null_count=0),
        FieldProfile("x", unique_count=1_000, null_count=1_000),
        (1_000, 3_000),
        T,
    )
    assert result.statistic == "distinct_proportion_ratio"
    assert (result.baseline, result.current) == (1.0, 0.5)
    assert not result.drifted


def test_cardinality_not_evaluated_without_counts() -> None:
    result = ps.cardinality(FieldProfile("x"), FieldProfile("x", unique_count=500), (500, 500), T)
    assert result.reason == "no distinct count or proportion in the baseline profile"


# --- volume --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "drifted", "high"),
    [
        (1000, 2000, False, False),  # exactly 2×
        (1000, 2001, True, False),
        (1000, 500, False, False),  # exactly half
        (1000, 499, True, False),
        (1000, 101, True, False),  # fell 89.9 %
        (1000, 100, True, True),  # fell 90 %: inclusive
        (1000, 0, True, True),
        (50, 5, True, True),  # no row minimum for volume
        (0, 0, False, False),
        (0, 10, True, False),
        (10**12, 10**12 + 1, False, False),
    ],
)
def test_volume(before: int, after: int, drifted: bool, high: bool) -> None:
    found = ps.volume(before, after, T)
    assert (found.result.drifted, found.high) == (drifted, high)


def test_volume_not_evaluated_without_row_counts() -> None:
    assert ps.volume(None, 10, T).result.reason == "no row count in the baseline profile"


def test_volume_high_drop_is_configurable() -> None:
    loose = ps.Thresholds(volume_high_drop=0.5)
    assert ps.volume(1000, 499, loose).high
    assert not ps.volume(1000, 499, T).high


# --- the column rules together ---------------------------------------------------------------


@pytest.mark.parametrize(("rows", "evaluated"), [(99, False), (100, True), (10_000, True)])
def test_column_rules_need_100_rows_on_both_sides(rows: int, evaluated: bool) -> None:
    field = numeric(quantiles=Z, nulls=0.0, unique=5, unique_share=0.05)
    moved = numeric(quantiles=[z + 1 for z in Z], nulls=0.5, unique=1, unique_share=0.01)
    drift = ps.compare_column(field, moved, (10_000, rows), T)
    assert all(r.evaluated for r in drift.results) is evaluated
    assert bool(drift.drifted) is evaluated
    if not evaluated:
        assert drift.results[0].reason == f"fewer than 100 rows (baseline 10,000, current {rows})"


def test_rows_come_from_the_columns_counts_without_a_row_count() -> None:
    # BigID writes field profiles without a rowCount.
    order_id = FieldProfile("order_id", unique_count=50_000, unique_proportion=1.0, null_count=0)
    region = FieldProfile("region", unique_count=2_500, unique_proportion=0.05, null_count=500)
    assert ps.column_rows(order_id, None) == 50_000
    assert ps.column_rows(region, None) == 50_500
    assert ps.column_rows(FieldProfile("x", null_count=20, null_proportion=0.002), None) == 10_000
    assert ps.column_rows(FieldProfile("x"), None) is None


def test_compare_matches_columns_by_path_and_names_the_unmatched() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    before = DatasetProfile(at, row_count=1000, fields=(FieldProfile("a"), FieldProfile("b")))
    after = DatasetProfile(at, row_count=3000, fields=(FieldProfile("c"), FieldProfile("a")))
    comparison = ps.compare(before, after, T)
    assert [c.path for c in comparison.columns] == ["a"]
    assert (comparison.only_baseline, comparison.only_current) == (("b",), ("c",))
    assert comparison.volume.result.drifted


def test_available_statistics_are_named() -> None:
    field = numeric(quantiles=Z, mean=0, sd=1, lo=-3, hi=3, unique=10, unique_share=0.1)
    assert ps.available(field) == [
        "uniqueCount",
        "uniqueProportion",
        "nullProportion",
        "min",
        "max",
        "mean",
        "stdev",
        "quantiles",
    ]
