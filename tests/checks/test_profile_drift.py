"""profile_drift through whole scans, on every backend: DataHub profiles in, findings out.

The catalog is a model trained on 2026-08-15 reading ``prod.orders`` (every column it reads
named by its features' source columns, so the others are proven unused) and ``prod.events``
(a feature named like a column, no column-level lineage: the rest cannot be placed). Profiles
are written out of time order, as connectors backfill, in the shapes DataHub's connectors
write (field profiles with quantiles, table-level only from dbt, BigID's without a row count,
MySQL's small ones with histograms).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.checks.profile_drift import NO_PROFILE_NOW, ProfileDrift, ProfileDriftConfig
from mlcopilot.model import Finding, IncidentState, Severity
from mlcopilot.protocols import Catalog
from mlcopilot.report.html import render_html
from mlcopilot.report.json import render_markdown
from mlcopilot.scan import ScanOptions, ScanResult, accept_all_baselines, scan
from mlcopilot.store import open_store
from testing.builders import (
    MCPs,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
    ms,
)
from tests.catalog.datahub_backend import TEST_OPTIONS, needs_standin, standin_catalog
from tests.checks.backends import BACKENDS, PARAMS

TRAINED = datetime(2026, 8, 15, tzinfo=UTC)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ORDERS = dataset_urn("prod.orders", platform="snowflake")
EVENTS = dataset_urn("prod.events", platform="snowflake")
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
Z = [-1.645, -0.6745, 0.0, 0.6745, 1.645]
PS = ("0.05", "0.25", "0.5", "0.75", "0.95")


def day(month: int, d: int) -> datetime:
    return datetime(2026, month, d, 6, 0, tzinfo=UTC)


def numeric(mean: float, sd: float, *, nulls: float = 0.0, unique: int = 90_000) -> dict[str, Any]:
    """A numeric column as the SQL profiler writes it with quantiles on: strings."""
    return {
        "uniqueCount": unique,
        "uniqueProportion": round(unique / 100_000, 6),
        "nullCount": int(nulls * 100_000),
        "nullProportion": nulls,
        "min": repr(mean - 6 * sd),
        "max": repr(mean + 9 * sd),
        "mean": repr(mean),
        "median": repr(mean),
        "stdev": repr(sd),
        "quantiles": [(p, repr(mean + sd * z)) for p, z in zip(PS, Z, strict=True)],
    }


def categorical(distinct: int, *, nulls: float = 0.0, rows: int = 100_000) -> dict[str, Any]:
    return {
        "uniqueCount": distinct,
        "uniqueProportion": distinct / rows,
        "nullCount": int(nulls * rows),
        "nullProportion": nulls,
    }


def profile(
    urn: str, at: datetime, rows: int | None, fields: Mapping[str, Mapping[str, Any]]
) -> MetadataChangeProposalWrapper:
    field_profiles = []
    for path, stats in fields.items():
        stats = dict(stats)
        quantiles = stats.pop("quantiles", None)
        field_profiles.append(
            sc.DatasetFieldProfileClass(
                fieldPath=path,
                quantiles=[sc.QuantileClass(quantile=p, value=v) for p, v in quantiles]
                if quantiles
                else None,
                **stats,
            )
        )
    return MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=sc.DatasetProfileClass(
            timestampMillis=ms(at),
            rowCount=rows,
            columnCount=len(fields) or None,
            fieldProfiles=field_profiles or None,
            partitionSpec=sc.PartitionSpecClass(
                partition="FULL_TABLE_SNAPSHOT", type=sc.PartitionTypeClass.FULL_TABLE
            ),
        ),
    )


AT_TRAINING: dict[str, dict[str, Any]] = {
    "amount": numeric(100, 15),
    "region": categorical(4),
    "status": categorical(3, nulls=0.0),
    "notes": categorical(5_000, nulls=0.01),
}
DRIFTED: dict[str, dict[str, Any]] = {
    "amount": numeric(107.5, 15),  # +0.5 sd
    "region": categorical(1),  # collapsed to one value
    "status": categorical(3, nulls=0.0),
    "notes": categorical(5_000, nulls=0.6),  # unused by the model: not reported
}


def world(profiles: Sequence[MetadataChangeProposalWrapper], *, seed: int = 3) -> MCPs:
    """The model, its features and datasets, and ``profiles`` in a shuffled write order."""
    written = list(profiles)
    random.Random(seed).shuffle(written)
    return [
        *dataset(
            "prod.orders",
            platform="snowflake",
            fields=[
                ("amount", "number"),
                ("region", "string"),
                ("status", "string"),
                ("notes", "string"),
            ],
        ),
        *dataset(
            "prod.events",
            platform="snowflake",
            fields=[("clicks", "number"), ("sessions", "number")],
        ),
        *ml_feature("churn", "amount", sources=[ORDERS], source_column="amount"),
        *ml_feature("churn", "region", sources=[ORDERS], source_column="region"),
        *ml_feature("churn", "status", sources=[ORDERS], source_column="status"),
        *ml_feature("churn", "clicks", sources=[EVENTS]),
        *ml_model(
            "churn",
            features=[feature_urn("churn", n) for n in ("amount", "region", "status", "clicks")],
            date=TRAINED,
        ),
        *written,
    ]


class World:
    """One backend's catalog and a state database, scanned at will."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        self.tmp = tmp_path
        self.store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
        self.catalogs: list[Catalog] = []

    def load(self, mcps: MCPs) -> Catalog:
        catalog = BACKENDS[self.backend](self.tmp / f"catalog{len(self.catalogs)}", mcps)
        self.catalogs.append(catalog)
        return catalog

    def scan(
        self,
        mcps: MCPs | None = None,
        *,
        at: datetime = NOW,
        dry_run: bool = False,
        **config: Any,
    ) -> ScanResult:
        catalog = self.load(mcps) if mcps is not None else self.catalogs[-1]
        check = ProfileDrift(ProfileDriftConfig.model_validate(config))
        return scan(catalog, self.store, [check], ScanOptions(now=at, dry_run=dry_run))

    def close(self) -> None:
        for catalog in self.catalogs:
            catalog.close()
        self.store.close()


@pytest.fixture(params=PARAMS)
def world_on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    made = World(request.param, tmp_path)
    yield made
    made.close()


def found(result: ScanResult, entity: str = ORDERS) -> dict[str | None, Finding]:
    return {f.field: f for f in result.findings if f.entity == entity}


HISTORY = [
    profile(ORDERS, day(7, 1), 100_000, AT_TRAINING),
    profile(ORDERS, day(8, 1), 100_000, AT_TRAINING),
    profile(ORDERS, day(9, 1), 100_000, DRIFTED),
    profile(ORDERS, day(10, 1), 100_000, DRIFTED),
    profile(ORDERS, day(11, 28), 100_000, DRIFTED),
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_drift_after_training_and_steady_since_is_still_reported(
    world_on: World, seed: int
) -> None:
    result = world_on.scan(world(HISTORY, seed=seed))

    drift = found(result)
    assert sorted(drift, key=str) == ["amount", "region"]
    amount, region = drift["amount"], drift["region"]
    assert (amount.severity, region.severity) == (Severity.HIGH, Severity.HIGH)
    assert amount.change is None
    assert amount.evidence["statistic"] == "wasserstein_iqr"
    assert amount.evidence["value"] == pytest.approx(0.5, abs=1e-6)
    assert amount.evidence["threshold"] == 0.1
    assert amount.evidence["baseline_source"] == "history"
    assert amount.evidence["baseline_profile_at"] == "2026-08-01T06:00:00Z"
    assert amount.evidence["current_profile_at"] == "2026-11-28T06:00:00Z"
    assert "quantiles" in amount.evidence["available"]  # type: ignore[operator]
    assert amount.evidence["feeds_model"] == "yes"
    assert "the newest at or before the model's training" in amount.message
    assert region.evidence["statistic"] == "distinct_count_ratio"
    assert "distinct values 4 → 1" in region.message
    # The string column's distribution was not evaluated, and the finding says why.
    assert "distribution" in region.evidence["not_evaluated"]  # type: ignore[operator]


def test_profiles_unchanged_since_training_raise_nothing(world_on: World) -> None:
    steady = [profile(ORDERS, day(m, 1), 100_000 + m, AT_TRAINING) for m in (6, 7, 8, 9, 10, 11)]

    result = world_on.scan(world(steady))

    assert result.findings == []
    assert ORDERS not in result.models[0].unknown


def test_no_profile_by_training_time_takes_the_oldest(world_on: World) -> None:
    later = [
        profile(ORDERS, day(9, 1), 100_000, AT_TRAINING),
        profile(ORDERS, day(10, 1), 100_000, AT_TRAINING),
        profile(ORDERS, day(11, 28), 100_000, DRIFTED),
    ]

    result = world_on.scan(world(later))

    amount = found(result)["amount"]
    assert amount.evidence["baseline_source"] == "first_scan"
    assert amount.evidence["baseline_profile_at"] == "2026-09-01T06:00:00Z"
    assert "the oldest DataHub held when first scanned" in amount.message


def test_no_profiles_at_all_raise_nothing_and_readiness_names_them(world_on: World) -> None:
    result = world_on.scan(world([]))

    assert result.findings == []
    assert world_on.store.profile_baselines_of([MODEL]) == {MODEL: []}
    readiness = result.models[0].profiles
    assert readiness is not None
    # orders: amount, region, status feed (notes is proven unused); events: clicks feeds,
    # sessions cannot be ruled out.
    assert (readiness.columns, readiness.profiled, readiness.quantiles) == (5, 0, 0)
    assert set(readiness.unprofiled) == {ORDERS, EVENTS}


def test_readiness_counts_profiled_columns_and_names_what_to_turn_on(world_on: World) -> None:
    shaped = [
        profile(ORDERS, day(8, 1), 100_000, {"amount": numeric(1, 1), "region": categorical(4)}),
        profile(EVENTS, day(8, 1), 50_000, {}),  # dbt: row counts only
    ]

    readiness = world_on.scan(world(shaped)).models[0].profiles

    assert readiness is not None
    assert (readiness.columns, readiness.profiled, readiness.quantiles) == (5, 2, 1)
    assert readiness.unprofiled == ()
    assert readiness.table_level == (EVENTS,)
    assert readiness.no_quantiles == ()


def test_readiness_names_numeric_columns_without_quantiles(world_on: World) -> None:
    no_quantiles = {k: v for k, v in numeric(1, 1).items() if k != "quantiles"}
    shaped = [profile(ORDERS, day(8, 1), 100_000, {"amount": no_quantiles})]

    readiness = world_on.scan(world(shaped)).models[0].profiles

    assert readiness is not None
    assert readiness.no_quantiles == (ORDERS,)
    assert readiness.unprofiled == (EVENTS,)


def test_profiles_gone_after_a_baseline_was_stored_are_not_evaluated(world_on: World) -> None:
    world_on.scan(world(HISTORY))

    later = world_on.scan(world([]), at=NOW + timedelta(days=1))

    assert later.models[0].unknown[ORDERS] == (f"profile_drift: {NO_PROFILE_NOW}",)
    assert later.changes.resolved == ()  # the open drift stays open


def test_a_column_without_column_level_lineage_is_medium(world_on: World) -> None:
    events = [
        profile(EVENTS, day(8, 1), 50_000, {"clicks": numeric(5, 2), "sessions": numeric(3, 1)}),
        profile(EVENTS, day(11, 1), 50_000, {"clicks": numeric(5, 2), "sessions": numeric(4, 1)}),
    ]

    result = world_on.scan(world(events))

    drift = found(result, EVENTS)
    assert list(drift) == ["sessions"]
    assert drift["sessions"].severity is Severity.MEDIUM
    assert drift["sessions"].evidence["feeds_model"] == "unknown"
    assert "lineage cannot tell whether it feeds the model" in drift["sessions"].message


@pytest.mark.parametrize(
    ("rows", "severity"),
    [(300_000, Severity.MEDIUM), (10_000, Severity.HIGH), (10_001, Severity.MEDIUM)],
)
def test_volume_is_a_finding_on_the_dataset(world_on: World, rows: int, severity: Severity) -> None:
    # dbt writes table-level profiles only: row count, column count, size.
    table_level = [
        profile(ORDERS, day(8, 1), 100_000, {}),
        profile(ORDERS, day(11, 1), rows, {}),
    ]

    result = world_on.scan(world(table_level))

    volume = found(result)[None]
    assert volume.severity is severity
    assert volume.evidence["statistic"] == "row_count_ratio"
    assert (volume.evidence["baseline_rows"], volume.evidence["current_rows"]) == (100_000, rows)


def test_bigid_profiles_without_row_counts_are_compared_by_their_column_counts(
    world_on: World,
) -> None:
    def bigid(nulls: float) -> dict[str, dict[str, Any]]:
        return {
            "amount": {"uniqueCount": 22_600, "uniqueProportion": 0.452, "nullCount": 0,
                       "nullProportion": 0.0, "min": "0.01", "max": "99999.99",
                       "mean": "127.43", "stdev": "342.11"},
            "region": {"uniqueCount": 2_500, "uniqueProportion": 0.05,
                       "nullCount": int(nulls * 50_000), "nullProportion": nulls},
        }  # fmt: skip

    shaped = [
        profile(ORDERS, day(8, 1), None, bigid(0.01)),
        profile(ORDERS, day(11, 1), None, bigid(0.2)),
    ]

    result = world_on.scan(world(shaped))

    drift = found(result)
    assert list(drift) == ["region"]
    assert drift["region"].evidence["statistic"] == "cohens_h"


def test_small_mysql_profiles_are_not_evaluated_per_column(world_on: World) -> None:
    # The MySQL golden file's shape: under 100 rows, histograms and value frequencies.
    def mysql(rows: int, male: int) -> sc.DatasetProfileClass:
        return sc.DatasetProfileClass(
            timestampMillis=0,
            rowCount=rows,
            columnCount=2,
            fieldProfiles=[
                sc.DatasetFieldProfileClass(
                    fieldPath="region",
                    uniqueCount=2,
                    uniqueProportion=2 / rows,
                    nullCount=0,
                    nullProportion=0.0,
                    distinctValueFrequencies=[
                        sc.ValueFrequencyClass(value="M", frequency=male),
                        sc.ValueFrequencyClass(value="F", frequency=rows - male),
                    ],
                ),
                sc.DatasetFieldProfileClass(
                    fieldPath="amount",
                    min="10001",
                    max="10010",
                    mean="10005.5",
                    median="10005.5",
                    stdev="3.03",
                    histogram=sc.HistogramClass(
                        boundaries=["10001", "10005", "10010"], heights=[5, 5]
                    ),
                ),
            ],
        )

    small = []
    for at, rows, male in ((day(8, 1), 10, 5), (day(11, 1), 12, 11)):
        aspect = mysql(rows, male)
        aspect.timestampMillis = ms(at)
        small.append(MetadataChangeProposalWrapper(entityUrn=ORDERS, aspect=aspect))

    result = world_on.scan(world(small))

    assert found(result) == {}  # 10 → 12 rows: no volume drift, columns below 100 rows
    assert ORDERS not in result.models[0].unknown  # volume was evaluated


def test_the_baseline_outlives_datahubs_retention(world_on: World) -> None:
    world_on.scan(world(HISTORY))
    assert {b.source for b in world_on.store.profile_baselines_of([MODEL])[MODEL]} == {"history"}

    # DataHub's timeseries retention has dropped everything up to September.
    retained = [p for p in HISTORY if p.aspect.timestampMillis >= ms(day(10, 1))]  # type: ignore[union-attr]
    result = world_on.scan(world(retained), at=NOW + timedelta(days=1))

    amount = found(result)["amount"]
    assert amount.evidence["baseline_profile_at"] == "2026-08-01T06:00:00Z"
    assert amount.evidence["baseline_source"] == "history"


def test_drift_resolves_when_a_later_profile_is_back(world_on: World) -> None:
    first = world_on.scan(world(HISTORY))
    assert sorted(found(first), key=str) == ["amount", "region"]

    back = [*HISTORY, profile(ORDERS, day(11, 29), 100_000, AT_TRAINING)]
    second = world_on.scan(world(back), at=NOW + timedelta(days=1))

    assert found(second) == {}
    resolved = {i.field for i in second.changes.resolved}
    assert resolved == {"amount", "region"}


def test_a_column_no_longer_profiled_keeps_its_incident_open(world_on: World) -> None:
    world_on.scan(world(HISTORY))
    without_amount = {k: v for k, v in AT_TRAINING.items() if k != "amount"}

    later = [*HISTORY, profile(ORDERS, day(11, 29), 100_000, without_amount)]
    second = world_on.scan(world(later), at=NOW + timedelta(days=1))

    assert [i.field for i in second.changes.resolved] == ["region"]
    amount = [i for i in world_on.store.incidents() if i.field == "amount"]
    assert [i.state for i in amount] == [IncidentState.OPEN]


def test_baseline_accept_takes_todays_profiles(world_on: World) -> None:
    world_on.scan(world(HISTORY))

    schemas, profiles = accept_all_baselines(
        world_on.catalogs[-1], world_on.store, MODEL, now=NOW + timedelta(hours=1)
    )
    assert [p.dataset for p in profiles] == [ORDERS]
    assert profiles[0].profile.at == day(11, 28)
    assert {s.dataset for s in schemas} == {ORDERS, EVENTS}
    again = world_on.scan(at=NOW + timedelta(days=1))

    assert found(again) == {}
    assert {i.field for i in again.changes.resolved} == {"amount", "region"}


def test_thresholds_are_configurable(world_on: World) -> None:
    result = world_on.scan(world(HISTORY), distribution_threshold=0.6, cardinality_ratio=5)

    assert found(result) == {}


def test_a_dry_run_stores_no_baseline(world_on: World) -> None:
    world_on.scan(world(HISTORY), dry_run=True)

    assert world_on.store.profile_baselines_of([MODEL]) == {MODEL: []}


@needs_standin
def test_datahub_reads_only_the_profiles_it_needs(tmp_path: Path) -> None:
    events = [profile(EVENTS, day(m, 1), 50_000, {"clicks": numeric(5, 2)}) for m in (9, 10, 11)]
    with (
        standin_catalog(tmp_path / "gms", world([*HISTORY, *events])) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        checks = [ProfileDrift(ProfileDriftConfig())]
        catalog.server.clear_requests()
        scan(catalog, store, checks, ScanOptions(now=NOW))

        def asked(operation: str) -> list[Any]:
            return [r for r in catalog.server.requests if r.operation == operation]

        def timeseries() -> list[Any]:
            return [
                r
                for r in catalog.server.requests
                if r.path == "/aspects" and r.query.get("action") == ["getTimeseriesAspectValues"]
            ]

        # Newest profiles come with the entities; one batch as of the training time (both
        # datasets); the oldest only of events, which has no profile by then.
        assert len(asked("mlcopilotProfilesBefore")) == 1
        assert len(timeseries()) == 1

        catalog.server.clear_requests()
        again = DataHubCatalog(catalog.server.url, **TEST_OPTIONS)
        with again:
            scan(again, store, checks, ScanOptions(now=NOW + timedelta(days=1)))
        # The baselines are stored: no history is read again.
        assert asked("mlcopilotProfilesBefore") == []
        assert timeseries() == []


def test_reports_show_readiness_and_the_distributions_side_by_side(tmp_path: Path) -> None:
    lite = World("lite", tmp_path)
    try:
        result = lite.scan(world(HISTORY))
    finally:
        lite.close()

    page = render_html(result, checks=[ProfileDrift.info])
    amount = next(f for f in result.findings if f.field == "amount")
    assert '<svg class="quantiles"' in page
    assert "Baseline and now" in page
    assert "Profiles</h3>" in page
    assert "profiling.enabled: true): prod.events" in page
    assert f'data-incident="{amount.id}"' in page

    markdown = render_markdown(result)
    assert "Profiles (for profile drift): 3 of 5 columns feeding it are profiled" in markdown
    assert "- not profiled (profiling.enabled: true): prod.events" in markdown
