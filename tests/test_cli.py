"""End to end: the `mlcopilot` command as a user runs it (in-process), on a Lite catalog."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import pytest

from testing.installed_cli import Ran, run_cli
from testing.report_contract import check_report
from tests.conftest import DEMO_DATA

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
TRANSACTIONS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.transactions,PROD)"
SEGMENTS = "urn:li:dataset:(urn:li:dataPlatform:hive,legacy.customer_segments,PROD)"
DAY1, DAY2, DAY3 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z", "2026-11-22T09:00:00Z"


class Mlcopilot(Protocol):
    """The ``mlcopilot`` fixture: run the command with these arguments."""

    def __call__(self, *args: str) -> Ran: ...


@pytest.fixture
def mlcopilot(tmp_path: Path) -> Mlcopilot:
    """Run `mlcopilot ARGS` with MLCOPILOT_HOME in tmp_path."""

    def run(*args: str) -> Ran:
        return run_cli(tmp_path / "home", *args, columns=200)

    return run


@pytest.fixture
def demo_catalog(mlcopilot: Mlcopilot) -> Mlcopilot:
    assert mlcopilot("catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    return mlcopilot


def assert_report_contract(report: dict[str, Any]) -> None:
    """The public JSON report, version 3: its shipped schema, and what a schema cannot say."""
    check_report(report)
    assert report["version"] == 3
    assert report["summary"]["models"] == len(report["models"])
    for model in report["models"]:
        for finding in model["findings"]:
            assert finding["check"] in {
                "schema_drift", "pii_exposure", "stale_source", "deprecated_source"
            }  # fmt: skip
            assert finding["path"][0] == model["urn"]
            assert finding["path"][-1] == finding["entity"]
            assert finding["incident"]["id"] == finding["id"]


def findings_by(report: dict[str, Any]) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    return {
        (f["check"], f["entity"], f["field"]): f for m in report["models"] for f in m["findings"]
    }


def scan_json(run: Mlcopilot, now: str, *extra: str) -> dict[str, Any]:
    result = run("scan", "--now", now, "--format", "json", *extra)
    assert result.code == 0, result.stderr
    report: dict[str, Any] = result.json()
    assert_report_contract(report)
    return report


def test_first_scan_finds_pii_stale_and_deprecated(demo_catalog: Mlcopilot) -> None:
    report = scan_json(demo_catalog, DAY1)
    found = findings_by(report)
    assert found[("pii_exposure", CUSTOMERS, "email")]["severity"] == "high"
    assert found[("stale_source", TRANSACTIONS, None)]["severity"] == "high"
    assert found[("deprecated_source", SEGMENTS, None)]["severity"] == "medium"
    assert not [k for k in found if k[0] == "schema_drift"]
    # The curated table is reached only through mlModelTrainingData, which DataHub's own
    # lineage index does not follow: the path proves the walk closed that gap.
    deprecated = found[("deprecated_source", SEGMENTS, None)]
    assert "curated.customer_360" in deprecated["path"][1]
    assert sorted(report["incidents"]["opened"]) == sorted(f["id"] for f in found.values())
    assert report["models"][0]["coverage"]["truncated"] is False


def test_second_identical_scan_opens_nothing_and_writes_nothing(demo_catalog: Mlcopilot) -> None:
    first = scan_json(demo_catalog, DAY1)
    second = scan_json(demo_catalog, DAY1)
    assert second["incidents"]["opened"] == []
    assert sorted(second["incidents"]["updated"]) == sorted(first["incidents"]["opened"])
    table = demo_catalog("scan", "--now", DAY1)
    assert table.code == 0
    assert "already up to date" in table.stdout


def test_schema_change_is_drift_with_impact_aware_severity(demo_catalog: Mlcopilot) -> None:
    scan_json(demo_catalog, DAY1)
    assert demo_catalog("catalog", "load", str(DEMO_DATA / "02_schema_change.json")).code == 0
    report = scan_json(demo_catalog, DAY2)
    drift = {k[2]: f for k, f in findings_by(report).items() if k[0] == "schema_drift"}
    assert drift["signup_date"]["change"] == "removed"
    assert drift["signup_date"]["severity"] == "critical"  # feeds tenure_days and the training data
    assert drift["country_code"]["change"] == "renamed"
    assert drift["country_code"]["previous_field"] == "country"
    assert drift["country_code"]["severity"] == "low"  # column lineage proves it unused
    assert set(report["incidents"]["opened"]) == {f["id"] for f in drift.values()}


def test_restored_column_resolves_its_incident_and_only_that(demo_catalog: Mlcopilot) -> None:
    scan_json(demo_catalog, DAY1)
    demo_catalog("catalog", "load", str(DEMO_DATA / "02_schema_change.json"))
    drift = {
        k[2]: f["id"]
        for k, f in findings_by(scan_json(demo_catalog, DAY2)).items()
        if k[0] == "schema_drift"
    }
    demo_catalog("catalog", "load", str(DEMO_DATA / "03_restore_column.json"))
    report = scan_json(demo_catalog, DAY3)
    assert report["incidents"]["resolved"] == [drift["signup_date"]]
    listed = json.loads(
        demo_catalog("incidents", "list", "--state", "all", "--format", "json").stdout
    )
    states = {i["id"]: i["state"] for i in listed}
    assert states[drift["signup_date"]] == "resolved"
    assert states[drift["country_code"]] == "open"


def test_baseline_accept_clears_drift_on_next_scan(demo_catalog: Mlcopilot) -> None:
    scan_json(demo_catalog, DAY1)
    demo_catalog("catalog", "load", str(DEMO_DATA / "02_schema_change.json"))
    opened = scan_json(demo_catalog, DAY2)["incidents"]["opened"]
    accepted = demo_catalog("baseline", "accept", MODEL)
    assert accepted.code == 0, accepted.stderr
    report = scan_json(demo_catalog, DAY3)
    assert sorted(report["incidents"]["resolved"]) == sorted(opened)


def test_baseline_accept_takes_the_models_name_as_every_command_does(
    demo_catalog: Mlcopilot,
) -> None:
    scan_json(demo_catalog, DAY1)
    demo_catalog("catalog", "load", str(DEMO_DATA / "02_schema_change.json"))
    opened = scan_json(demo_catalog, DAY2)["incidents"]["opened"]
    accepted = demo_catalog("baseline", "accept", "churn_predictor_v1")
    assert accepted.code == 0, accepted.stderr
    report = scan_json(demo_catalog, DAY3)
    assert sorted(report["incidents"]["resolved"]) == sorted(opened)
    unknown = demo_catalog("baseline", "accept", "churn_predictor_v9")
    assert unknown.code == 2
    assert "did you mean churn_predictor_v1" in unknown.stderr


def test_fail_on_gates_ci(demo_catalog: Mlcopilot) -> None:
    assert demo_catalog("scan", "--now", DAY1, "--fail-on", "critical").code == 0
    assert demo_catalog("scan", "--now", DAY1, "--fail-on", "high").code == 1


def test_dry_run_writes_nothing(demo_catalog: Mlcopilot, tmp_path: Path) -> None:
    catalog_db = tmp_path / "home" / "catalog.db"
    before = (
        sqlite3.connect(catalog_db).execute("select count(*) from metadata_aspect_v2").fetchone()
    )
    dry = demo_catalog("scan", "--now", DAY1, "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "would write" in dry.stdout
    after = (
        sqlite3.connect(catalog_db).execute("select count(*) from metadata_aspect_v2").fetchone()
    )
    assert before == after
    assert not (tmp_path / "home" / "state.db").exists()  # nothing recorded, no file made
    listed = demo_catalog("incidents", "list", "--state", "all", "--format", "json")
    assert listed.code == 2
    assert "no state database at" in listed.stderr


def test_write_back_lands_on_the_catalog(demo_catalog: Mlcopilot, tmp_path: Path) -> None:
    report = scan_json(demo_catalog, DAY1)
    pii_id = findings_by(report)[("pii_exposure", CUSTOMERS, "email")]["id"]
    db = sqlite3.connect(tmp_path / "home" / "catalog.db")

    def aspect(urn: str, name: str) -> Any:
        row = db.execute(
            "select metadata from metadata_aspect_v2 where urn=? and aspect_name=? and version=0",
            (urn, name),
        ).fetchone()
        return json.loads(row[0]) if row else None

    tags = {t["tag"] for t in aspect(CUSTOMERS, "globalTags")["tags"]}
    assert "urn:li:tag:mlcopilot-pii-exposure" in tags
    incident = aspect(f"urn:li:incident:mlcopilot-{pii_id}-1", "incidentInfo")
    assert incident["status"]["state"] == "ACTIVE"
    assert set(incident["entities"]) == {CUSTOMERS, MODEL}
    document = aspect(f"urn:li:document:mlcopilot-{pii_id}-1", "documentInfo")
    assert "email" in document["contents"]["text"]
    assert {a["asset"] for a in document["relatedAssets"]} == {CUSTOMERS, MODEL}
    risks = aspect(MODEL, "structuredProperties")["properties"]
    assert any("pii_exposure" in str(p["values"]) for p in risks)


def test_incident_ack_and_manual_resolve(demo_catalog: Mlcopilot) -> None:
    report = scan_json(demo_catalog, DAY1)
    some_id = report["incidents"]["opened"][0]
    assert demo_catalog("incidents", "ack", some_id, "--by", "alice").code == 0
    listed = json.loads(demo_catalog("incidents", "list", "--format", "json").stdout)
    acked = next(i for i in listed if i["id"] == some_id)
    assert acked["state"] == "acknowledged"
    assert acked["acknowledged_by"] == "alice"
    # The last scan that found it, not the acknowledgement (made on the wall clock).
    assert datetime.fromisoformat(acked["seen_at"]) == datetime.fromisoformat(DAY1)
    assert acked["updated_at"] == acked["acknowledged_at"] != acked["seen_at"]
    resolved = demo_catalog("incidents", "resolve", some_id, "--reason", "fixed upstream")
    assert resolved.code == 0, resolved.stderr
    missing = demo_catalog("incidents", "ack", "0000000000000000")
    assert missing.code == 2
    assert "0000000000000000" in missing.stderr


def test_markdown_report_to_file(demo_catalog: Mlcopilot, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "scan.md"
    result = demo_catalog("scan", "--now", DAY1, "--format", "markdown", "--output", str(out))
    assert result.code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "churn_predictor_v1" in text
    assert "pii_exposure" in text


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # Not an urn: taken for a model's name, and none has it.
        (["scan", "--model", "not-an-urn"], 2, "no model of that name"),
        (["scan", "--model", "urn:li:dataset:(urn:li:dataPlatform:x,y,PROD)"], 2, "not an mlModel"),
        (
            ["scan", "--model", "urn:li:mlModel:(urn:li:dataPlatform:x,nope,PROD)"],
            2,
            "no such model",
        ),
        (["scan", "--now", "yesterday"], 2, "not an ISO-8601 time"),
        (["scan", "--catalog", "bogus"], 2, "expected lite:PATH"),
        # Nothing listens on the discard port: the DataHub backend says so, exit 3.
        (["scan", "--catalog", "datahub:http://127.0.0.1:9"], 3, "cannot reach DataHub at"),
        # Nothing was ever scanned here: no state database, and none is made.
        (["incidents", "resolve", "ffffffffffffffff"], 2, "no state database at"),
    ],
)
def test_bad_usage_is_one_clear_line(
    demo_catalog: Mlcopilot, args: list[str], code: int, message: str
) -> None:
    result = demo_catalog(*args)
    assert result.code == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_catalog_says_how_to_fix(mlcopilot: Mlcopilot) -> None:
    result = mlcopilot("scan")
    assert result.code == 2
    assert "catalog load" in result.stderr
    assert "Traceback" not in result.stderr


def test_empty_catalog_is_reported(mlcopilot: Mlcopilot, tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    assert mlcopilot("catalog", "load", str(empty)).code == 0
    result = mlcopilot("scan")
    assert result.code == 2
    assert "no ML models" in result.stderr


def test_invalid_metadata_file_writes_nothing(mlcopilot: Mlcopilot, tmp_path: Path) -> None:
    good = DEMO_DATA / "01_catalog.json"
    bad = tmp_path / "bad.json"
    bad.write_text('[{"entityUrn": "urn:li:dataset:x"', encoding="utf-8")
    result = mlcopilot("catalog", "load", str(good), str(bad))
    assert result.code == 2
    assert "bad.json" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # Validation comes first: the good file was not half-loaded either.
    assert mlcopilot("scan").code == 2


def test_corrupt_state_database_is_one_line(demo_catalog: Mlcopilot, tmp_path: Path) -> None:
    (tmp_path / "home" / "state.db").write_bytes(b"this is not a database" * 100)
    result = demo_catalog("scan", "--now", DAY1)
    assert result.code == 2
    assert "state.db" in result.stderr
    assert "Traceback" not in result.stderr
