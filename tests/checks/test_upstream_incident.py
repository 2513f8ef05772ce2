"""upstream_incident: active DataHub incidents others raised upstream, on every backend."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks.upstream_incident import UpstreamIncident, UpstreamIncidentConfig
from mlcopilot.model import (
    UNKNOWN_USAGE,
    EntityType,
    Finding,
    IncidentSignal,
    Node,
    Severity,
)
from mlcopilot.protocols import Catalog, CheckContext
from mlcopilot.scan import Delivery, ScanOptions, scan
from mlcopilot.store import open_store
from testing.builders import (
    T0,
    data_job,
    data_job_urn,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
    model_urn,
)
from tests.catalog.signals import incident, incident_urn
from tests.catalog.test_contract import BACKENDS, PARAMS

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = model_urn("churn")
RAW = dataset_urn("raw.customers")
CLEAN = dataset_urn("clean.customers")
JOB = data_job_urn("nightly", "clean_customers")
FEATURE = feature_urn("customer_features", "email_domain")
OURS = "urn:li:incident:mlcopilot-0123456789abcdef-1"

MCPs = list[MetadataChangeProposalWrapper]


def check(**config: object) -> UpstreamIncident:
    return UpstreamIncident(UpstreamIncidentConfig.model_validate(config))


def dry_scan(
    catalog: Catalog, tmp_path: Path, checker: UpstreamIncident | None = None
) -> list[Finding]:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        result = scan(catalog, store, [checker or check()], ScanOptions(now=NOW, dry_run=True))
    return result.findings


def signal(name: str, priority: int | None, **extra: object) -> IncidentSignal:
    return IncidentSignal(
        urn=incident_urn(name),
        type="OPERATIONAL",
        title=f"{name} broke",
        priority=priority,
        created_at=T0,
        started_at=T0,
        **extra,  # type: ignore[arg-type]
    )


def run_on(*incidents: IncidentSignal, checker: UpstreamIncident | None = None) -> list[Finding]:
    node = Node(RAW, EntityType.DATASET, "raw.customers", incidents=incidents)
    ctx = CheckContext(
        model=Node(MODEL, EntityType.ML_MODEL, "churn"),
        path=(MODEL, RAW),
        now=NOW,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )
    return list((checker or check()).run(node, ctx).findings)


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        (0, Severity.CRITICAL),
        (1, Severity.HIGH),
        (2, Severity.MEDIUM),
        (3, Severity.LOW),
        (None, Severity.MEDIUM),
    ],
)
def test_severity_follows_priority(priority: int | None, expected: Severity) -> None:
    (finding,) = run_on(signal("late", priority))
    assert finding.severity is expected
    assert finding.field is None
    assert finding.evidence["priority"] == priority


def test_an_unprioritized_incident_takes_the_configured_severity() -> None:
    (finding,) = run_on(signal("late", None), checker=check(unprioritized="high"))
    assert finding.severity is Severity.HIGH


def test_our_own_and_ignored_incidents_are_not_reported() -> None:
    ours = IncidentSignal(urn=OURS, type="CUSTOM", custom_type="SCHEMA_DRIFT", priority=0)
    other_tool = signal("monitor-7", 0)
    assert run_on(ours) == []
    assert run_on(other_tool, checker=check(ignore_prefixes=["urn:li:incident:monitor-"])) == []


def test_several_make_one_finding_at_the_most_urgent() -> None:
    (finding,) = run_on(signal("minor", 3), signal("outage", 0), signal("slow", 2))
    assert finding.severity is Severity.CRITICAL
    assert finding.message.startswith('3 active DataHub incidents: "outage broke"')
    assert finding.evidence["incident"] == incident_urn("outage")
    listed = finding.evidence["incidents"]
    assert isinstance(listed, list)
    assert [i["incident"] for i in listed if isinstance(i, dict)] == [
        incident_urn(n) for n in ("outage", "slow", "minor")
    ]


def test_none_or_unreadable_says_nothing() -> None:
    assert run_on() == []
    node = Node(FEATURE, EntityType.ML_FEATURE, "email_domain", incidents=None)
    ctx = CheckContext(
        model=Node(MODEL, EntityType.ML_MODEL, "churn"),
        path=(MODEL, FEATURE),
        now=NOW,
        usage=UNKNOWN_USAGE,
        baseline=None,
    )
    outcome = check().run(node, ctx)
    assert (outcome.findings, outcome.unknown) == ((), None)


# --- every backend: active, resolved, ours, on a dataset and a job ---------------------------


def scenario(later: Sequence[MetadataChangeProposalWrapper] = ()) -> MCPs:
    return [
        *dataset("raw.customers", fields=[("email", "string")]),
        *dataset("clean.customers", fields=[("email", "string")], upstreams=[RAW]),
        *data_job("nightly", "clean_customers", inputs=[RAW], outputs=[CLEAN]),
        *ml_feature("customer_features", "email_domain", sources=[CLEAN], source_column="email"),
        *ml_model("churn", features=[FEATURE]),
        *incident("late", [RAW], title="Orders arrive late", priority=1, created=T0),
        *incident("fixed", [RAW], title="Old outage", priority=0, active=False, created=T0),
        *incident("job", [JOB], title="Job failing", priority=0, created=T0 + timedelta(days=1)),
        # one of ours, as mlcopilot's write-back names its model and the entity
        *incident("mlcopilot-0123456789abcdef-1", [MODEL, CLEAN], priority=0, created=T0),
        *later,
    ]


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_on_every_backend(backend: str, tmp_path: Path) -> None:
    catalog = BACKENDS[backend](tmp_path / "catalog", scenario())
    try:
        found = {f.entity: f for f in dry_scan(catalog, tmp_path)}
    finally:
        catalog.close()
    assert {urn: f.severity for urn, f in found.items()} == {
        RAW: Severity.HIGH,
        JOB: Severity.CRITICAL,
    }
    raw = found[RAW]
    assert raw.message == (
        'active DataHub incident "Orders arrive late" (OPERATIONAL, P1, since 2025-01-01 00:00 UTC)'
    )
    assert raw.evidence["incident"] == incident_urn("late")
    assert raw.evidence["title"] == "Orders arrive late"
    assert raw.evidence["priority_name"] == "HIGH"
    assert raw.evidence["type"] == "OPERATIONAL"
    assert raw.evidence["source_type"] == "MANUAL"
    assert raw.evidence["link"] == (
        "/dataset/urn%3Ali%3Adataset%3A%28urn%3Ali%3AdataPlatform%3Ahive%2Craw.customers%2CPROD%29"
        "/Incidents"
    )
    assert raw.path[0] == MODEL


def test_resolved_in_datahub_resolves_ours(tmp_path: Path) -> None:
    resolved = incident("late", [RAW], title="Orders arrive late", active=False, created=T0)
    quiet = Delivery(write_back=False)
    with (
        LiteCatalog(tmp_path / "catalog.db", create=True) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        catalog.ingest(scenario())
        first = scan(catalog, store, [check()], ScanOptions(now=NOW), delivery=quiet)
        assert {i.entity for i in first.changes.opened} == {RAW, JOB}
        catalog.ingest(resolved)
        later = NOW + timedelta(hours=1)
        second = scan(catalog, store, [check()], ScanOptions(now=later), delivery=quiet)
    assert [i.entity for i in second.changes.resolved] == [RAW]
    assert [f.entity for f in second.findings] == [JOB]
