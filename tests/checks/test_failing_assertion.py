"""failing_assertion: DataHub assertions whose latest run failed, on every backend.

The golden files are what dbt's and Great Expectations' DataHub integrations wrote (old
shapes: ``DATASET`` assertions); :mod:`tests.catalog.signals` writes the current dbt shape
(``CUSTOM`` with ``customAssertion``). Models over those datasets are written here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks.failing_assertion import FailingAssertion, FailingAssertionConfig
from mlcopilot.model import (
    AssertionRun,
    AssertionState,
    ColumnUsage,
    EntityType,
    Finding,
    Node,
    Severity,
)
from mlcopilot.protocols import Catalog, CheckContext
from mlcopilot.scan import Delivery, ScanOptions, scan
from mlcopilot.store import open_store
from testing.builders import (
    T0,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
    model_urn,
    write_metadata_file,
)
from tests.catalog.signals import assertion_urn, dbt_test, ge_expectation, run
from tests.catalog.test_contract import BACKENDS, PARAMS
from tests.conftest import SAMPLES

GOLDEN = SAMPLES / "golden"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = model_urn("churn")
RAW = dataset_urn("raw.customers")

DBT = "urn:li:dataPlatform:dbt"
DBT_CUSTOMERS = f"urn:li:dataset:({DBT},calm-pagoda-323403.jaffle_shop.customers,PROD)"
DBT_ORDERS = f"urn:li:dataset:({DBT},calm-pagoda-323403.jaffle_shop.orders,PROD)"
GE_TABLES = [f"postgres1.postgres.public.foo{i}" for i in (1, 2, 3)]
FOO1, FOO2, FOO3 = (dataset_urn(t, platform="postgres") for t in GE_TABLES)

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason=f"no golden files at {GOLDEN}")


def check(**config: bool) -> FailingAssertion:
    return FailingAssertion(FailingAssertionConfig(**config))


def dry_scan(catalog: Catalog, tmp_path: Path, *, now: datetime = NOW) -> list[Finding]:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        result = scan(catalog, store, [check()], ScanOptions(now=now, dry_run=True))
    return result.findings


# --- the golden files: dbt tests and Great Expectations, as their integrations wrote them ----


def golden_model(tmp_path: Path) -> Path:
    """A model over the golden files' datasets: dbt's customers and orders as training data,
    GE's foo1 through a feature computed from its ``score``, foo2 and foo3 as training data.

    The GE tables are written as postgres ingestion would have (GE only validates them).
    """
    mcps = [
        *(
            m
            for t in GE_TABLES
            for m in dataset(t, platform="postgres", fields=[("score", "long")])
        ),
        *ml_feature("shop", "score_band", sources=[FOO1], source_column="score"),
        *ml_model(
            "churn",
            features=[feature_urn("shop", "score_band")],
            training_data=[DBT_CUSTOMERS, DBT_ORDERS, FOO2, FOO3],
        ),
    ]
    return write_metadata_file(tmp_path / "model.json", mcps)


@pytest.fixture
def golden(tmp_path: Path) -> Iterator[LiteCatalog]:
    files = [GOLDEN / "dbt_test_events_golden.json", GOLDEN / "ge_mcps_golden.json"]
    load_metadata_files(tmp_path / "catalog.db", [*files, golden_model(tmp_path)])
    with LiteCatalog(tmp_path / "catalog.db") as catalog:
        yield catalog


def test_the_golden_dbt_and_ge_failures_reach_the_model(
    golden: LiteCatalog, tmp_path: Path
) -> None:
    found = {(f.entity, f.field): f for f in dry_scan(golden, tmp_path)}
    assert {key: f.severity for key, f in found.items()} == {
        # dbt's two tests that could not run (a type error in their SQL): the data is unchecked
        (DBT_CUSTOMERS, "customer_id"): Severity.LOW,
        (DBT_ORDERS, "credit_card_amount"): Severity.LOW,
        # GE's failed expectations on columns the model reads
        (FOO1, "score"): Severity.HIGH,
        (FOO2, "score"): Severity.HIGH,
        (FOO3, "score"): Severity.HIGH,
    }
    dbt = found[(DBT_CUSTOMERS, "customer_id")]
    assert dbt.message.startswith('dbt test "dbt_expectations_expect_column_values_to_be_in_set')
    assert "could not run on column customer_id, which feeds the model" in dbt.message
    assert "error in the run of 2022-06-18 15:12 UTC" in dbt.message
    assert dbt.evidence["result"] == "ERROR"
    assert dbt.evidence["assertion"] == "urn:li:assertion:bf7fd2b46d2c32ee9bb036acd1559782"
    assert dbt.evidence["run_at"] == "2022-06-18T15:12:17.668000+00:00"
    native = dbt.evidence["native_results"]
    assert isinstance(native, dict)
    assert "No matching signature for operator =" in str(native["message"])
    ge = found[(FOO2, "score")]
    assert ge.message == (
        'Great Expectations expectation "expect_column_values_to_be_between" failed on column '
        "score, which feeds the model: failure in the run of 2021-12-28 12:00 UTC, "
        "2 unexpected 0 missing of 5 rows"
    )
    assert ge.evidence["unexpected_count"] == 2
    assert ge.evidence["native_results"] == {
        "partial_unexpected_list": '["10", "9"]',
        "partial_unexpected_counts": '[{"value": "9", "count": 1}, {"value": "10", "count": 1}]',
    }
    assert ge.evidence["platform"] == "urn:li:dataPlatform:great-expectations"
    assert {f.path[0] for f in found.values()} == {MODEL}
    assert found[(FOO1, "score")].path == (MODEL, feature_urn("shop", "score_band"), FOO1)


def test_the_golden_errors_can_be_left_out(golden: LiteCatalog, tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        result = scan(
            golden, store, [check(report_errors=False)], ScanOptions(now=NOW, dry_run=True)
        )
    assert {f.entity for f in result.findings} == {FOO1, FOO2, FOO3}


# --- severity from where the assertion sits --------------------------------------------


def assertion(
    name: str,
    result: str | None,
    *fields: str,
    severity: str | None = None,
    at: datetime = T0,
) -> AssertionState:
    last = None if result is None else AssertionRun(result=result, at=at, severity=severity)
    return AssertionState(
        urn=assertion_urn(name),
        type="CUSTOM",
        entity=RAW,
        fields=fields,
        native_type=name,
        platform=DBT,
        last_run=last,
    )


def findings(*assertions: AssertionState, usage: ColumnUsage | None = None) -> list[Finding]:
    node = Node(RAW, EntityType.DATASET, "raw.customers", assertions=assertions)
    ctx = CheckContext(
        model=Node(MODEL, EntityType.ML_MODEL, "churn"),
        path=(MODEL, RAW),
        now=NOW,
        usage=usage or ColumnUsage(columns=frozenset({"email"}), complete=True),
        baseline=None,
    )
    return list(check().run(node, ctx).findings)


@pytest.mark.parametrize(
    ("state", "usage", "expected"),
    [
        pytest.param(assertion("a", "FAILURE", "email"), None, Severity.HIGH, id="feeding-column"),
        pytest.param(assertion("a", "FAILURE", "id"), None, Severity.LOW, id="unused-column"),
        pytest.param(
            assertion("a", "FAILURE", "id"), ColumnUsage(), Severity.MEDIUM, id="unknown-column"
        ),
        pytest.param(assertion("a", "FAILURE"), None, Severity.MEDIUM, id="dataset-level"),
        pytest.param(
            assertion("a", "FAILURE", "email", severity="LOW"),
            None,
            Severity.MEDIUM,
            id="dbt-warn-one-step-lower",
        ),
        pytest.param(
            assertion("a", "FAILURE", "email", severity="HIGH"), None, Severity.HIGH, id="dbt-fail"
        ),
        pytest.param(assertion("a", "ERROR", "email"), None, Severity.LOW, id="error-is-low"),
        pytest.param(
            assertion("a", "FAILURE", "id", "email"), None, Severity.HIGH, id="any-feeding-column"
        ),
    ],
)
def test_severity_from_where_it_sits(
    state: AssertionState, usage: ColumnUsage | None, expected: Severity
) -> None:
    (finding,) = findings(state, usage=usage)
    assert finding.severity is expected
    # the column it covers; of several, the one that feeds the model
    assert finding.field == ("email" if "email" in state.fields else next(iter(state.fields), None))


@pytest.mark.parametrize("result", ["SUCCESS", "INIT", None])
def test_passing_or_never_run_is_not_reported(result: str | None) -> None:
    assert findings(assertion("a", result, "email")) == []


def test_no_assertions_or_unreadable_says_nothing() -> None:
    ctx_free = Node(RAW, EntityType.DATASET, "raw.customers", assertions=None)
    ctx = CheckContext(
        model=Node(MODEL, EntityType.ML_MODEL, "churn"),
        path=(MODEL, RAW),
        now=NOW,
        usage=ColumnUsage(),
        baseline=None,
    )
    outcome = check().run(ctx_free, ctx)
    assert outcome.findings == ()
    assert outcome.unknown is None


def test_several_on_one_column_make_one_finding_at_the_worst() -> None:
    (finding,) = findings(
        assertion("not_null", "ERROR", "email"),
        assertion("accepted_values", "FAILURE", "email", at=T0 + timedelta(hours=1)),
    )
    assert finding.severity is Severity.HIGH
    assert finding.field == "email"
    assert finding.message.startswith("2 assertions failing on column email, which feeds")
    # the worst first, at the top of the evidence; every one under "assertions"
    assert finding.evidence["assertion"] == assertion_urn("accepted_values")
    listed = finding.evidence["assertions"]
    assert isinstance(listed, list)
    assert [a["assertion"] for a in listed if isinstance(a, dict)] == [
        assertion_urn("accepted_values"),
        assertion_urn("not_null"),
    ]


def test_columns_and_dataset_get_a_finding_each() -> None:
    found = findings(
        assertion("a", "FAILURE", "email"),
        assertion("b", "FAILURE", "id"),
        assertion("rows", "FAILURE"),
    )
    assert sorted((f.field or "", f.severity.value) for f in found) == [
        ("", "medium"),
        ("email", "high"),
        ("id", "low"),
    ]
    assert len({f.id for f in found}) == 3


# --- every backend: runs written out of time order, a recovery, the current dbt shape ------


def scenario(
    later: Sequence[MetadataChangeProposalWrapper] = (),
) -> list[MetadataChangeProposalWrapper]:
    t1, t2 = T0, T0 + timedelta(hours=6)
    return [
        *dataset("raw.customers", fields=[("email", "string"), ("id", "long")]),
        *ml_feature("customer_features", "email_domain", sources=[RAW], source_column="email"),
        *ml_model("churn", features=[feature_urn("customer_features", "email_domain")]),
        *dbt_test("email_not_null", RAW, column="email"),
        # the newest run is written first: the last one written passed, the latest failed
        *run("email_not_null", RAW, t2, "FAILURE", severity="HIGH", unexpected=3,
             native={"failures": "3"}, url="https://ci.example/runs/42"),
        *run("email_not_null", RAW, t1, "SUCCESS"),
        *dbt_test("id_unique", RAW, column="id", test_name="unique"),
        *run("id_unique", RAW, t1, "FAILURE"),
        *ge_expectation("rows", RAW),
        *run("rows", RAW, t1, "FAILURE"),
        *run("rows", RAW, t2, "SUCCESS"),  # recovered
        *later,
    ]  # fmt: skip


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_on_every_backend(backend: str, tmp_path: Path) -> None:
    catalog = BACKENDS[backend](tmp_path / "catalog", scenario())
    try:
        found = {f.field: f for f in dry_scan(catalog, tmp_path)}
    finally:
        catalog.close()
    assert {k: f.severity for k, f in found.items()} == {"email": Severity.HIGH, "id": Severity.LOW}
    email = found["email"]
    assert email.message == (
        'dbt test "not_null_email" failed on column email, which feeds the model: failure in '
        "the run of 2025-01-01 06:00 UTC, 3 unexpected"
    )
    assert email.evidence["url"] == "https://ci.example/runs/42"
    assert email.evidence["native_results"] == {"failures": "3"}
    assert email.evidence["result_severity"] == "HIGH"
    assert email.evidence["column_feeds_model"] is True


def test_a_later_passing_run_resolves_the_incident(tmp_path: Path) -> None:
    passed = run("email_not_null", RAW, T0 + timedelta(days=1), "SUCCESS")
    quiet = Delivery(write_back=False)
    with (
        LiteCatalog(tmp_path / "catalog.db", create=True) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        catalog.ingest(scenario())
        first = scan(catalog, store, [check()], ScanOptions(now=NOW), delivery=quiet)
        assert {i.field for i in first.changes.opened} == {"email", "id"}
        catalog.ingest(passed)
        later = NOW + timedelta(hours=1)
        second = scan(catalog, store, [check()], ScanOptions(now=later), delivery=quiet)
    assert [i.field for i in second.changes.resolved] == ["email"]
    assert [f.field for f in second.findings] == ["id"]
