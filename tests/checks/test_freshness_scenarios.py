"""stale_source through every backend: learned cadence and freshness assertions as stored.

Each scenario is DataHub metadata (operation events, assertions and their runs), written out of
time order as connectors backfill, loaded into ``lite:``, the stand-in GMS (``datahub:``) and
``mcp-server-datahub`` over it (``mcp:``); the node each backend reads goes through the check.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks.stale_source import StaleSource, StaleSourceConfig
from mlcopilot.model import UNKNOWN_USAGE, CheckOutcome, EntityType, Node
from mlcopilot.protocols import Catalog, CheckContext
from testing.builders import dataset, dataset_urn, ml_model, model_urn, ms
from tests.catalog.signals import freshness_assertion, run
from tests.checks.backends import BACKENDS, PARAMS
from tests.conftest import SAMPLES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = model_urn("churn")
ORDERS = dataset_urn("prod.orders", platform="snowflake")

MCPs = list[MetadataChangeProposalWrapper]


@pytest.fixture(params=PARAMS)
def read_node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[MCPs], Node]]:
    """``read_node(mcps)``: the orders dataset as the backend under test reads it."""
    factory = BACKENDS[request.param]
    made: list[Catalog] = []

    def read(mcps: MCPs) -> Node:
        made.append(factory(tmp_path / f"catalog{len(made)}", [*ml_model("churn"), *mcps]))
        return made[-1].nodes([ORDERS])[ORDERS]

    yield read
    for catalog in made:
        catalog.close()


def operations(hours_ago: Sequence[float], *, seed: int = 7) -> MCPs:
    """``operation`` events at ``hours_ago``, written in a shuffled order."""
    order = list(hours_ago)
    random.Random(seed).shuffle(order)
    return [
        MetadataChangeProposalWrapper(
            entityUrn=ORDERS,
            aspect=sc.OperationClass(
                timestampMillis=ms(NOW - timedelta(hours=h)) + 60_000,  # reported a minute later
                lastUpdatedTimestamp=ms(NOW - timedelta(hours=h)),
                operationType=sc.OperationTypeClass.INSERT,
            ),
        )
        for h in order
    ]


def check(node: Node, **config: object) -> CheckOutcome:
    ctx = CheckContext(
        model=Node(urn=MODEL, entity_type=EntityType.ML_MODEL, name="churn"),
        path=(MODEL, ORDERS),
        now=NOW,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )
    return StaleSource(StaleSourceConfig.model_validate(config)).run(node, ctx)


ORDERS_TABLE = dataset("prod.orders", platform="snowflake", fields=[("id", "number")])


@pytest.mark.parametrize(
    ("cadence", "silent_for", "severity"),
    [
        pytest.param(1, 2, None, id="hourly-fresh"),
        pytest.param(1, 4, "medium", id="hourly-stale"),
        pytest.param(24, 50, None, id="daily-fresh"),
        pytest.param(24, 150, "high", id="daily-stale-twice-over"),
        pytest.param(168, 300, None, id="weekly-fresh"),
        pytest.param(168, 600, "medium", id="weekly-stale"),
    ],
)
def test_learned_cadence_on_every_backend(
    read_node: Callable[[MCPs], Node], cadence: float, silent_for: float, severity: str | None
) -> None:
    hours = [silent_for + i * cadence for i in range(8)]

    node = read_node([*ORDERS_TABLE, *operations(hours)])

    assert node.update_times is not None
    assert [NOW - t for t in reversed(node.update_times)] == [timedelta(hours=h) for h in hours]
    assert node.last_updated == NOW - timedelta(hours=silent_for)
    outcome = check(node)
    assert [f.severity.value for f in outcome.findings] == ([severity] if severity else [])
    for finding in outcome.findings:
        assert finding.evidence["expectation"] == "learned cadence"
        assert finding.evidence["learned_interval_hours"] == cadence


def test_too_little_history_is_unknown_on_every_backend(read_node: Callable[[MCPs], Node]) -> None:
    node = read_node([*ORDERS_TABLE, *operations([30, 54, 6])])

    outcome = check(node)

    assert outcome.findings == ()
    assert outcome.unknown == "3 updates in its history, 5 needed to learn its cadence"


def test_no_history_is_not_checked_on_every_backend(read_node: Callable[[MCPs], Node]) -> None:
    assert check(read_node([*ORDERS_TABLE])) == CheckOutcome()


@pytest.mark.parametrize(
    ("results", "stale"),
    [
        # (hours ago, result) in write order: the newest by time decides, not the last written
        pytest.param([(1, "FAILURE"), (25, "SUCCESS"), (49, "SUCCESS")], True, id="newest-failed"),
        pytest.param([(25, "FAILURE"), (1, "SUCCESS"), (49, "FAILURE")], False, id="newest-passed"),
    ],
)
def test_freshness_assertion_runs_out_of_order_on_every_backend(
    read_node: Callable[[MCPs], Node], results: list[tuple[float, str]], stale: bool
) -> None:
    runs = [
        mcp
        for hours, result in results
        for mcp in run("orders_fresh", ORDERS, NOW - timedelta(hours=hours), result)
    ]
    # Hourly history, newest 30 minutes ago: the cadence alone would call it fresh.
    history = operations([0.5 + i for i in range(8)])

    node = read_node([*ORDERS_TABLE, *history, *freshness_assertion("orders_fresh", ORDERS), *runs])

    outcome = check(node)
    assert [f.evidence["expectation"] for f in outcome.findings] == (
        ["freshness assertion"] if stale else []
    )
    if stale:
        assert (
            "its freshness assertion `updated every 24 hours` failed on 2026-11-29 11:00 UTC"
            in (outcome.findings[0].message)
        )


def test_a_freshness_assertion_that_never_ran_gives_its_schedule(
    read_node: Callable[[MCPs], Node],
) -> None:
    node = read_node(
        [*ORDERS_TABLE, *operations([30]), *freshness_assertion("orders_fresh", ORDERS, hours=6)]
    )

    (finding,) = check(node).findings

    assert (finding.severity.value, finding.evidence["sla_hours"]) == ("high", 6.0)
    assert "expects a change every 6 hours" in finding.message


def test_lite_reads_last_modified_versions_as_history(tmp_path: Path) -> None:
    versions = [
        MetadataChangeProposalWrapper(
            entityUrn=ORDERS,
            aspect=sc.DatasetPropertiesClass(
                lastModified=sc.TimeStampClass(time=ms(NOW - timedelta(hours=h)))
            ),
        )
        for h in (78, 30, 102, 54, 126)  # daily, written out of order
    ]
    catalog = LiteCatalog(tmp_path / "catalog.db", create=True)
    catalog.ingest([*ORDERS_TABLE, *versions])
    with catalog:
        node = catalog.nodes([ORDERS])[ORDERS]

    assert node.last_updated == NOW - timedelta(hours=30)
    (finding,) = check(node, cadence_factor=1.2).findings
    assert finding.evidence["learned_interval_hours"] == 24.0


GOLDEN = SAMPLES / "golden"


@pytest.mark.skipif(not GOLDEN.is_dir(), reason=f"DataHub's golden files not found at {GOLDEN}")
def test_the_delta_lake_golden_history_is_one_refresh(tmp_path: Path) -> None:
    # The delta-lake connector writes an operation per table version; its test table got five
    # versions within a second. That is one refresh, not a cadence of milliseconds.
    table = "urn:li:dataset:(urn:li:dataPlatform:delta-lake,delta_tables/my_table_basic,UAT)"
    path = tmp_path / "catalog.db"
    load_metadata_files(path, [GOLDEN / "golden_mces_relative_path.json"])
    with LiteCatalog(path) as catalog:
        node = catalog.nodes([table])[table]

    assert node.update_times is not None
    assert len(node.update_times) == 5
    assert list(node.update_times) == sorted(node.update_times)
    assert node.last_updated == datetime(2022, 6, 21, 17, 11, 17, 768000, tzinfo=UTC)
    assert check(node) == CheckOutcome()
    # Taken as five separate updates, they would be a cadence (and a stale one).
    (finding,) = check(node, burst_minutes=0).findings
    assert finding.evidence["updates_considered"] == 5
