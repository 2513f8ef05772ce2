"""``scan --format sarif``: a SARIF 2.1.0 log, valid against the OASIS schema (vendored in
tests/data), through the installed command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mlcopilot.report.sarif import FINGERPRINT
from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.installed_cli import run_cli

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
