"""The JSON report contract, version 3: the shipped schema, what each key carries, old versions.

Every JSON report any test produces is also validated against the schema, by the autouse
fixture of ``testing/report_contract.py``; the last tests here show that fixture does fail.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from enum import Enum
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.lineage.coverage import readiness_parts
from mlcopilot.model import plain_json
from mlcopilot.report.json import render_markdown, report_dict
from mlcopilot.report.models import Report, main, report_json_schema_text
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import open_store
from mlcopilot.text.names import short_name
from testing import demo_home as demo_fixtures
from testing.builders import dataset, dataset_urn, ml_model, model_urn, write_metadata_file
from testing.installed_cli import run_cli
from testing.report_contract import OLDER_KEYS, check_report
from tests.conftest import DEMO_DATA, REPO

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
TRANSACTIONS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.transactions,PROD)"
SEGMENTS = "urn:li:dataset:(urn:li:dataPlatform:hive,legacy.customer_segments,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"

# The cli tests' fixtures (tests/cli/conftest.py): the demo loaded once, a copy per test.
demo_home = demo_fixtures.demo_home
demo = demo_fixtures.demo


def scan_json(home: Path, *args: str) -> dict[str, Any]:
    done = run_cli(home, "scan", "--format", "json", *args)
    assert done.code == 0, done.stderr
    report: dict[str, Any] = done.json()
    return report


def by_check(report: dict[str, Any]) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    return {
        (f["check"], f["entity"], f["field"]): f for m in report["models"] for f in m["findings"]
    }


def test_the_schema_ships_as_package_data_and_is_a_valid_2020_12_schema() -> None:
    shipped = resources.files("mlcopilot").joinpath("schemas/report-v3.json")
    schema = json.loads(shipped.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["version"]["const"] == 3
    # A wheel carries it: the package-data globs name it.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["mlcopilot"]
    assert any(fnmatch("schemas/report-v3.json", g) for g in globs)


def test_the_shipped_schema_is_the_one_the_models_generate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = resources.files("mlcopilot").joinpath("schemas/report-v3.json")
    assert shipped.read_text(encoding="utf-8") == report_json_schema_text(), (
        "src/mlcopilot/schemas/report-v3.json is not the schema the report's models "
        "(src/mlcopilot/report/models.py) generate. After changing the models, regenerate it:\n"
        "    .venv/bin/python -m mlcopilot.report.models > src/mlcopilot/schemas/report-v3.json\n"
        "and check the difference: a key may be added to version 3 only as an optional one; "
        "a new required key, or a changed one, is a new version (report/json.py)."
    )
    # What the command that message names prints (its `__main__` calls main()).
    main()
    assert capsys.readouterr().out == report_json_schema_text()


def test_a_scan_report_is_version_3_with_incidents_and_evidence(demo: Path) -> None:
    report = scan_json(demo, "--now", DAY1)
    check_report(report)
    assert report["version"] == 3
    assert report["dry_run"] is False
    assert report["now"] == "2026-11-20T09:00:00+00:00"
    found = by_check(report)
    for finding in found.values():
        assert finding["incident"] == {
            "id": finding["id"],
            "generation": 1,
            "state": "open",
            "new": True,
            "targets": [],  # no sink configured: nobody is told
        }
    stale = found[("stale_source", TRANSACTIONS, None)]["evidence"]
    assert stale["sla_hours"] == 24
    assert stale["last_updated"] == "2026-11-16T06:00:00+00:00"
    assert stale["overdue_since"] == "2026-11-17T06:00:00+00:00"
    deprecated = found[("deprecated_source", SEGMENTS, None)]["evidence"]
    assert deprecated["decommission_time"].startswith("2026-12-15")
    pii = found[("pii_exposure", CUSTOMERS, "email")]["evidence"]
    assert pii["feeds_model"] == "yes"
    assert pii["tags"]
    summary = report["summary"]
    assert summary["findings_by_severity"] == {"critical": 0, "high": 2, "medium": 1, "low": 0}
    assert summary["findings_by_check"] == {
        "deprecated_source": 1,
        "pii_exposure": 1,
        "stale_source": 1,
    }
    assert summary["incidents"] == {"opened": 3, "updated": 0, "resolved": 0}
    assert summary["delivery"] == {"delivered": summary["delivery"]["delivered"],
                                   "retrying": 0, "dead": 0}  # fmt: skip
    assert summary["duration_seconds"] >= 0
    assert summary["gate"] is None  # no --fail-on


def test_a_rename_carries_its_confidence_as_evidence(demo: Path) -> None:
    scan_json(demo, "--now", DAY1)
    assert run_cli(demo, "catalog", "load", str(DEMO_DATA / "02_schema_change.json")).code == 0
    report = scan_json(demo, "--now", DAY2)
    renamed = by_check(report)[("schema_drift", CUSTOMERS, "country_code")]
    assert renamed["change"] == "renamed"
    confidence = renamed["evidence"]["confidence"]
    assert isinstance(confidence, float)
    assert 0 < confidence <= 1
    assert f"(confidence {confidence:.2f})" in renamed["message"]  # the same number, as data
    # The incidents of the first scan are still open: not new, same generation.
    stale = by_check(report)[("stale_source", TRANSACTIONS, None)]
    assert stale["incident"]["new"] is False
    assert stale["incident"]["state"] == "open"
    assert renamed["incident"]["new"] is True


def test_a_dry_run_report_says_so(demo: Path) -> None:
    report = scan_json(demo, "--now", DAY1, "--dry-run")
    assert report["dry_run"] is True
    assert len(report["incidents"]["opened"]) == 3  # what a real scan would open
    assert report["summary"]["delivery"] is None  # nothing was sent


def test_now_is_to_the_second_without_now(demo: Path) -> None:
    report = scan_json(demo, "--dry-run")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", report["now"]), report["now"]


def test_unknown_says_why_per_entity_and_check(tmp_path: Path) -> None:
    no_schema, absent = dataset_urn("raw.no_schema"), dataset_urn("raw.absent")
    metadata = write_metadata_file(
        tmp_path / "m.json",
        [
            *dataset("raw.no_schema", description="no schema"),
            *ml_model("m", training_data=[no_schema, absent]),
        ],
    )
    home = tmp_path / "home"
    assert run_cli(home, "catalog", "load", str(metadata)).code == 0
    report = scan_json(home, "--now", DAY1, "--dry-run")
    coverage = report["models"][0]["coverage"]
    reasons = coverage["unknown_reasons"]
    no_fields = "no schemaMetadata: field-level PII cannot be checked"
    assert {"entity": no_schema, "check": "pii_exposure", "reason": no_fields} in reasons
    absent_checks = {r["check"] for r in reasons if r["entity"] == absent}
    assert absent_checks == {"deprecated_source", "pii_exposure", "schema_drift", "stale_source"}
    assert {r["reason"] for r in reasons if r["entity"] == absent} == {
        "not in the catalog (referenced by lineage only)"
    }
    # `unknown` keeps its version-1 meaning: the entities, each once.
    assert coverage["unknown"] == sorted({r["entity"] for r in reasons})


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_stay_a_flag_away(demo: Path, version: int) -> None:
    report = scan_json(demo, "--now", DAY1, "--dry-run", "--json-version", str(version))
    assert report["version"] == version
    assert set(report) == OLDER_KEYS[version]
    model = report["models"][0]
    expected = {"nodes", "truncated", "unknown"} | ({"gaps"} if version == 2 else set())
    assert set(model["coverage"]) == expected
    assert model["coverage"]["unknown"] == []
    assert {key for f in model["findings"] for key in f} == {
        "id", "check", "severity", "entity", "field", "change", "previous_field", "message",
        "path",
    }  # fmt: skip
    if version == 2:
        assert report["summary"] == {
            "models": 1, "findings": 3, "unknown": 0, "gaps": 0, "models_with_gaps": 0
        }  # fmt: skip


def test_each_model_says_its_profile_readiness_when_profile_drift_ran(tmp_path: Path) -> None:
    bare = dataset_urn("raw.bare")
    catalog = LiteCatalog(tmp_path / "catalog.db", create=True)
    catalog.ingest(
        [
            *dataset("raw.bare", fields=[("age", "int"), ("name", "string")]),
            *ml_model("m", training_data=[bare]),
            *ml_model("no_datasets"),
        ]
    )
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    options = ScanOptions(now=datetime(2026, 11, 20, 9, tzinfo=UTC), dry_run=True)
    try:
        every_check = scan(catalog, store, load_checks(), options)
        without = scan(catalog, store, load_checks(enabled=["schema_drift"]), options)
    finally:
        store.close()
        catalog.close()
    report = report_dict(every_check)
    by_urn = {m["urn"]: m["coverage"] for m in report["models"]}
    assert by_urn[model_urn("m")]["profiles"] == {
        "columns": 2,
        "profiled": 0,
        "quantiles": 0,
        "datasets": 1,
        "unprofiled": [bare],
        "table_level": [],
        "no_quantiles": [],
    }
    assert by_urn[model_urn("no_datasets")]["profiles"]["datasets"] == 0
    # The markdown report says the same numbers in words.
    readiness = next(m.profiles for m in every_check.models if m.urn == model_urn("m"))
    assert readiness is not None
    headline, _ = readiness_parts(readiness, short_name)
    assert headline == "0 of 2 columns feeding it are profiled, 0 with quantiles"
    assert f"Profiles (for profile drift): {headline}." in render_markdown(every_check)
    # The key is optional: left out (never null) when profile drift did not run, and in no
    # older version.
    assert all("profiles" not in m["coverage"] for m in report_dict(without)["models"])
    for version in (1, 2):
        older = report_dict(every_check, version=version)
        assert all("profiles" not in m["coverage"] for m in older["models"])
    assert "profiles" not in Report.model_json_schema()["$defs"]["Coverage"]["required"]


def test_an_unknown_json_version_is_refused(demo: Path) -> None:
    done = run_cli(demo, "scan", "--format", "json", "--json-version", "4")
    assert done.code == 2
    assert done.stdout == ""


def test_the_markdown_report_has_the_verdict_and_no_runner_path(demo: Path) -> None:
    done = run_cli(demo, "scan", "--now", DAY1, "--fail-on", "high", "--format", "markdown")
    assert done.code == 1
    text = done.stdout
    title = text.splitlines()[0]
    assert title == "# mlcopilot scan — 2026-11-20 09:00 UTC"
    assert "Catalog: `lite:catalog.db`" in text
    assert str(demo) not in text
    assert "## Summary" in text
    assert "**Gate: FAILED (--fail-on high; coverage gaps fail it)**" in text
    assert "- churn_predictor_v1: 2 findings at or above high: " in text
    assert "- incidents: 3 opened, 0 still open, 0 resolved" in text


def test_evidence_a_plugin_did_not_make_json_is_made_json() -> None:
    class Colour(Enum):
        RED = "red"

    seen = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    value = plain_json(
        {"at": seen, "set": {"b", "a"}, "pair": (1, 2), "nan": math.nan, "c": Colour.RED, 3: None}
    )
    assert value == {
        "at": "2026-01-02T03:04:00+00:00",
        "set": ["a", "b"],
        "pair": [1, 2],
        "nan": "nan",
        "c": "red",
        "3": None,
    }
    json.dumps(value, allow_nan=False)  # plain JSON: no NaN, nothing json cannot write


def test_the_schema_check_rejects_a_report_that_breaks_the_contract(demo: Path) -> None:
    report = scan_json(demo, "--now", DAY1, "--dry-run")
    del report["dry_run"]
    report["models"][0]["findings"][0]["evidence"] = "not a mapping"
    with pytest.raises(AssertionError) as failed:
        check_report(report)
    assert "'dry_run' is a required property" in str(failed.value)
    assert "models/0/findings/0/evidence" in str(failed.value)


def test_every_json_scan_output_a_test_runs_is_checked() -> None:
    # Anything run as `... scan --format json` is checked, whatever prints it.
    fake = [sys.executable, "-c", "print('{\"version\": 3}')", "scan", "--format", "json"]
    with pytest.raises(AssertionError, match=re.escape("breaks schemas/report-v3.json")):
        subprocess.run(fake, capture_output=True, text=True, check=False)
