"""``scan --format sarif``: a SARIF 2.1.0 log, valid against the OASIS schema (vendored in
tests/data) and against GitHub's documented rules for code scanning (testing/sarif_rules.py):
every result at a file of the repository, its alert identity the incident id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mlcopilot.report.sarif import FINGERPRINT, LINE_HASH, Locator
from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.installed_cli import run_cli
from testing.sarif_rules import github_problems

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
SCHEMA = Path(__file__).parent.parent / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def sarif(home: Path, *args: str) -> dict[str, Any]:
    ran = run_cli(home, "scan", "--format", "sarif", *args)
    assert ran.code in (0, 1), ran.stderr
    log: dict[str, Any] = json.loads(ran.stdout)
    return log


def test_the_log_is_valid_sarif_with_rules_levels_and_logical_locations(
    demo: Path, validator: jsonschema.Draft4Validator
) -> None:
    log = sarif(demo, "--now", DAY1)
    assert [e.message for e in validator.iter_errors(log)] == []
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mlcopilot"
    assert driver["version"]
    rules = [rule["id"] for rule in driver["rules"]]
    assert {"schema_drift", "pii_exposure", "stale_source", "deprecated_source"} <= set(rules)
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {
        "pii_exposure": "error",
        "stale_source": "error",
        "deprecated_source": "warning",
    }
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    pii = next(r for r in run["results"] if r["ruleId"] == "pii_exposure")
    [location] = pii["locations"]
    names = [logical["fullyQualifiedName"] for logical in location["logicalLocations"]]
    assert names == [dataset_urn("raw.customers"), f"urn:li:schemaField:({names[0]},email)"]
    assert "email" in pii["message"]["text"]


def test_fingerprints_are_the_incident_ids_and_stable_across_scans(demo: Path) -> None:
    def prints(log: dict[str, Any]) -> dict[tuple[str, str], str]:
        return {
            (r["ruleId"], r["locations"][0]["logicalLocations"][-1]["fullyQualifiedName"]): (
                r["partialFingerprints"][FINGERPRINT]
            )
            for r in log["runs"][0]["results"]
        }

    first, second = prints(sarif(demo, "--now", DAY1)), prints(sarif(demo, "--now", DAY2))
    seen_twice = first.keys() & second.keys()
    # The PII column and the deprecated source are found on both days: the same alerts.
    assert len(seen_twice) >= 2
    assert {key: first[key] for key in seen_twice} == {key: second[key] for key in seen_twice}
    assert len(set(first.values())) == len(first)
    report = json.loads(run_cli(demo, "scan", "--now", DAY2, "--format", "json").stdout)
    ids = {f["incident"]["id"] for m in report["models"] for f in m["findings"]}
    assert set(second.values()) == ids


def test_catalog_text_stays_data_and_the_log_stays_valid(
    tmp_path: Path, validator: jsonschema.Draft4Validator
) -> None:
    nasty = 'a"b\\c\x00d\n</script>'
    mcps = [
        *dataset("raw.events", fields=[(nasty, "string")], field_tags={nasty: ["PII"]}),
        *ml_model("model", training_data=[dataset_urn("raw.events")]),
    ]
    home = tmp_path / "home"
    path = write_metadata_file(tmp_path / "metadata.json", mcps)
    assert run_cli(home, "catalog", "load", str(path)).code == 0
    out = tmp_path / "report.sarif"
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "sarif", "--output", str(out))
    assert ran.code == 0, ran.stderr
    log = json.loads(out.read_text(encoding="utf-8"))
    assert [e.message for e in validator.iter_errors(log)] == []
    [result] = log["runs"][0]["results"]
    assert result["locations"][0]["logicalLocations"][1]["name"] == nasty


def test_the_schema_rejects_what_it_should(validator: jsonschema.Draft4Validator) -> None:
    # The vendored schema is the strict one: a made-up level fails, so the tests above can too.
    def log(level: str) -> dict[str, Any]:
        run = {
            "tool": {"driver": {"name": "x"}},
            "results": [{"message": {"text": "m"}, "level": level}],
        }
        return {"version": "2.1.0", "runs": [run]}

    assert not validator.is_valid(log("fatal"))
    assert validator.is_valid(log("error"))


# --- what GitHub's code scanning needs: a file location and primaryLocationLineHash (issue 25)


def _where(result: dict[str, Any]) -> tuple[str, int]:
    physical = result["locations"][0]["physicalLocation"]
    return physical["artifactLocation"]["uri"], physical["region"]["startLine"]


def test_every_result_is_at_a_file_github_can_show(
    demo: Path, validator: jsonschema.Draft4Validator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(demo)  # the repository's root: the catalog file lies in it
    log = sarif(demo, "--now", DAY1)

    assert [e.message for e in validator.iter_errors(log)] == []
    assert github_problems(log) == []
    results = log["runs"][0]["results"]
    assert len(results) == 3
    for result in results:
        # Nothing else configured: the catalog file, from the repository's root.
        assert _where(result) == ("catalog.db", 1)
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        incident = result["properties"]["incident"]
        assert result["partialFingerprints"] == {LINE_HASH: f"{incident}:1", FINGERPRINT: incident}
        assert result["properties"]["location"] == "catalog"


def test_a_catalog_outside_the_repository_is_an_absolute_file_uri(demo: Path) -> None:
    log = sarif(demo, "--now", DAY1)  # the tests run from the checkout: the home is elsewhere
    assert github_problems(log) == []
    uris = {_where(r)[0] for r in log["runs"][0]["results"]}
    assert uris == {(demo / "catalog.db").resolve().as_uri()}


def _dbt_project(repo: Path) -> Path:
    """A dbt project in ``repo/analytics`` whose model ``raw.customers`` mentions email on
    line 3; its manifest where dbt writes it (``target/``)."""
    sql = repo / "analytics" / "models" / "raw" / "customers.sql"
    sql.parent.mkdir(parents=True)
    sql.write_text("select\n  customer_id,\n  email,\n  country\nfrom src\n", encoding="utf-8")
    node = {
        "unique_id": "model.shop.customers",
        "resource_type": "model",
        "database": "warehouse",
        "schema": "raw",
        "name": "customers",
        "alias": "customers",
        "original_file_path": "models/raw/customers.sql",
        "columns": {"email": {"name": "email", "data_type": "varchar"}},
    }
    manifest = repo / "analytics" / "target" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(
        json.dumps(
            {
                "metadata": {
                    "dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"
                },
                "nodes": {node["unique_id"]: node},
                "sources": {},
            }
        ),
        encoding="utf-8",
    )
    return manifest


def test_the_dbt_model_file_then_the_configured_location(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    _dbt_project(repo)
    monkeypatch.chdir(repo)
    env = {
        "MLCOPILOT_SARIF_DBT_MANIFEST": "analytics/target/manifest.json",
        "MLCOPILOT_SARIF_LOCATION": "./ml/train.py",
    }
    ran = run_cli(demo, "scan", "--now", DAY1, "--format", "sarif", env=env)
    assert ran.code == 0, ran.stderr
    log = json.loads(ran.stdout)

    assert github_problems(log) == []
    where = {
        r["ruleId"]: (_where(r), r["properties"]["location"]) for r in log["runs"][0]["results"]
    }
    assert where == {
        # raw.customers is a dbt model: its file, at the column's line.
        "pii_exposure": (("analytics/models/raw/customers.sql", 3), "dbt"),
        # raw.transactions and legacy.customer_segments are not: the configured file.
        "stale_source": (("ml/train.py", 1), "location"),
        "deprecated_source": (("ml/train.py", 1), "location"),
    }


def test_a_manifest_that_cannot_be_used_fails_before_the_scan(demo: Path, tmp_path: Path) -> None:
    bad = tmp_path / "manifest.json"
    bad.write_text('{"nodes": {}}', encoding="utf-8")
    ran = run_cli(
        demo,
        "scan",
        "--now",
        DAY1,
        "--format",
        "sarif",
        env={"MLCOPILOT_SARIF_DBT_MANIFEST": str(bad)},
    )
    assert ran.code == 2
    [line] = ran.stderr.splitlines()
    assert line == (
        f"error: MLCOPILOT_SARIF_DBT_MANIFEST: {bad}: not a dbt manifest.json (no nodes and "
        "metadata.dbt_schema_version)"
    )
    assert not (demo / "state.db").exists()  # nothing was scanned, nothing recorded


def test_a_catalog_that_is_no_file_names_the_dataset(tmp_path: Path) -> None:
    from mlcopilot.model import Finding, Severity

    finding = Finding(
        check="pii_exposure",
        severity=Severity.HIGH,
        model="urn:li:mlModel:(urn:li:dataPlatform:mlflow,m,PROD)",
        entity=dataset_urn("raw.customers"),
        field="email",
        message="m",
        path=(),
    )
    physical, how = Locator(root=tmp_path).physical(finding, "datahub:https://gms.example")
    assert how == "entity"
    assert physical["artifactLocation"] == {"uri": "raw.customers", "uriBaseId": "%SRCROOT%"}
    assert physical["region"]["startLine"] == 1


def test_the_line_hash_is_stable_across_scans(demo: Path) -> None:
    def hashes(log: dict[str, Any]) -> dict[str, str]:
        return {
            r["properties"]["incident"]: r["partialFingerprints"][LINE_HASH]
            for r in log["runs"][0]["results"]
        }

    first, second = hashes(sarif(demo, "--now", DAY1)), hashes(sarif(demo, "--now", DAY2))
    both = first.keys() & second.keys()
    assert len(both) >= 2
    assert {i: first[i] for i in both} == {i: second[i] for i in both}
