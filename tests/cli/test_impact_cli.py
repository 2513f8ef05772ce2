"""``mlcopilot impact``: formats, exit codes, the gate and bad input, via the installed command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from mlcopilot.cli.render.impact_report import impact_schema
from standin.fixtures import StandInFactory
from testing.builders import dataset, dataset_urn, ml_feature, ml_model, write_metadata_file
from testing.installed_cli import Ran, run_cli
from tests.catalog.datahub_backend import needs_standin
from tests.conftest import DEMO_DATA

NOW = "2026-11-20T09:00:00Z"
CHANGE = str(DEMO_DATA / "02_schema_change.json")
RAW = dataset_urn("raw.customers")
SARIF_SCHEMA = Path(__file__).parent.parent / "data" / "sarif-schema-2.1.0.json"


def impact(home: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    return run_cli(home, "impact", "raw.customers", "--now", NOW, *args, env=env)


def one_error(ran: Ran) -> str:
    """The one ``error:`` line of a refused run (exit 2, nothing on stdout)."""
    assert ran.code == 2, (ran.stdout, ran.stderr)
    assert ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_table_names_the_model_its_severity_features_and_fields(demo: Path) -> None:
    ran = impact(demo, "--schema-file", CHANGE)
    assert ran.code == 0, ran.stderr
    assert "change: drop signup_date; rename country to country_code" in ran.stdout
    model_row = next(line for line in ran.stdout.splitlines() if "churn_predictor_v1  " in line)
    assert "critical" in model_row
    assert "tenure_days" in model_row
    assert "signup_date" in ran.stdout
    assert (
        ran.stdout.rstrip()
        .splitlines()[-1]
        .startswith("1 model downstream of raw.customers: the change affects 1 (worst: critical).")
    )


def test_json_follows_its_schema(demo: Path) -> None:
    ran = impact(demo, "--schema-file", CHANGE, "--format", "json")
    assert ran.code == 0, ran.stderr
    report = ran.json()
    schema = impact_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(report)
    assert report["version"] == 1
    assert report["dataset"] == RAW
    assert report["source"] == "02_schema_change.json"
    assert [c["change"] for c in report["changes"]] == ["dropped", "renamed"]
    [model] = report["models"]
    assert model["name"] == "churn_predictor_v1"
    assert (model["affected"], model["severity"]) == (True, "critical")
    assert "signup_date" in model["fields"]
    assert {f["check"] for f in model["findings"]} == {"schema_drift"}
    assert report["summary"]["worst"] == "critical"
    assert report["gate"] is None
    # The closing line goes to stderr: stdout stays parseable.
    assert "the change affects 1" in ran.stderr


@pytest.mark.parametrize(("fail_on", "code"), [("low", 1), ("medium", 0), ("critical", 0)], ids=str)
def test_fail_on_fails_only_at_or_above_the_worst(demo: Path, fail_on: str, code: int) -> None:
    """Dropping plan: it feeds no feature (column-level lineage says so), so it is low."""
    ran = impact(demo, "--drop", "plan", "--fail-on", fail_on, "--format", "json")
    assert ran.code == code, ran.stderr
    report = ran.json()
    jsonschema.Draft202012Validator(impact_schema()).validate(report)
    assert report["summary"]["worst"] == "low"
    assert report["gate"]["passed"] is (code == 0)
    if code:
        assert "The gate failed: 1 of 1 downstream models" in ran.stderr


def test_without_fail_on_an_affected_model_still_exits_0(demo: Path) -> None:
    ran = impact(demo, "--deprecate", "--decommission", "2026-01-01", "--format", "json")
    assert ran.code == 0, ran.stderr
    [model] = ran.json()["models"]
    assert model["severity"] == "high"  # the decommission date has passed
    assert [f["check"] for f in model["findings"]] == ["deprecated_source"]


def test_markdown_is_a_pull_request_comment(demo: Path) -> None:
    ran = impact(demo, "--schema-file", CHANGE, "--format", "markdown", "--fail-on", "high")
    assert ran.code == 1, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "## mlcopilot impact preview: `raw.customers`"
    assert "Gate (`--fail-on high`): **failed** for 1 model." in lines
    header = lines.index("| Model | Severity | Features | Fields |")
    assert lines[header + 1] == "|---|---|---|---|"
    row = lines[header + 2]
    assert row.startswith("| `churn_predictor_v1` | **critical** | `churn_features.tenure_days` |")
    assert "### What to do" in lines
    assert any(line.startswith("- **Schema drift**: ") for line in lines)


def test_catalog_text_cannot_break_the_markdown_or_the_annotations(tmp_path: Path) -> None:
    nasty = "a|b @octocat\n::add-mask::x <b>"
    home = tmp_path / "home"
    catalog = write_metadata_file(
        tmp_path / "m.json",
        [
            *dataset("raw.t", fields=[(nasty, "string"), ("y", "int")]),
            *ml_feature("fs", "f", sources=["raw.t"], source_column=nasty),
            *ml_model("m", features=["urn:li:mlFeature:(fs,f)"]),
        ],
    )
    assert run_cli(home, "catalog", "load", str(catalog)).code == 0
    summary = tmp_path / "summary.md"
    ran = run_cli(
        home,
        *("impact", "raw.t", "--now", NOW, "--drop", nasty, "--format", "github"),
        *("--format", "markdown", "--output", "-", "--output", str(tmp_path / "out.md")),
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert ran.code == 0, ran.stderr
    # Every line of the annotations is a command mlcopilot wrote: none injected.
    annotations = ran.stdout
    assert annotations.strip()
    for line in annotations.splitlines():
        assert line.startswith("::error title="), line
    assert "\n::add-mask::" not in annotations
    # The markdown table keeps four cells a row: the | in the name is escaped.
    markdown = (tmp_path / "out.md").read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == markdown  # the job summary is the comment
    row = next(line for line in markdown.splitlines() if line.startswith("| `m`"))
    assert row.replace("\\|", "").count("|") == 5
    # The mention and the tag appear only inside code spans, where GitHub renders them inert.
    prose = re.sub(r"`[^`]*`", "", markdown)
    assert "@octocat" in markdown
    assert "@octocat" not in prose
    assert "<b>" not in prose


def test_junit_and_sarif_are_the_scans_own_formats(demo: Path, tmp_path: Path) -> None:
    junit, sarif = tmp_path / "r.xml", tmp_path / "r.sarif"
    ran = impact(
        demo,
        *("--schema-file", CHANGE, "--fail-on", "critical"),
        *("--format", "junit", "--output", str(junit), "--format", "sarif", "--output", str(sarif)),
    )
    assert ran.code == 1, ran.stderr
    root = ET.fromstring(junit.read_text(encoding="utf-8"))
    assert root.tag == "testsuites"
    failed = [c.attrib["name"] for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["schema_drift"]  # only the new finding at or above critical fails
    log = json.loads(sarif.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))).validate(log)
    [run] = log["runs"]
    assert {r["ruleId"] for r in run["results"]} == {"schema_drift"}
    assert len(run["results"]) == 2  # the drop and the rename


def test_a_dbt_manifest_as_the_schema_file_locates_the_sarif_results(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proposed schema's dbt model is the file GitHub shows each result at (issue 25)."""
    from testing.sarif_rules import github_problems

    repo = tmp_path / "repo"
    sql = repo / "models" / "customers.sql"
    sql.parent.mkdir(parents=True)
    sql.write_text("select\n  customer_id,\n  email\nfrom src\n", encoding="utf-8")
    node = {
        "unique_id": "model.shop.customers",
        "resource_type": "model",
        "database": "warehouse",
        "schema": "raw",
        "alias": "customers",
        "name": "customers",
        "original_file_path": "models/customers.sql",
        "columns": {c: {"name": c} for c in ("customer_id", "email")},
    }
    manifest = repo / "target" / "manifest.json"
    manifest.parent.mkdir()
    version = "https://schemas.getdbt.com/dbt/manifest/v12.json"
    manifest.write_text(
        json.dumps({"metadata": {"dbt_schema_version": version}, "nodes": {"m": node}}),
        encoding="utf-8",
    )
    monkeypatch.chdir(repo)
    ran = impact(demo, "--schema-file", str(manifest), "--format", "sarif")

    assert ran.code == 0, ran.stderr
    log = json.loads(ran.stdout)
    assert github_problems(log) == []
    results = log["runs"][0]["results"]
    assert results
    for result in results:
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "models/customers.sql"


def test_unpaired_formats_are_refused_before_the_catalog_is_read(demo: Path) -> None:
    ran = impact(demo, "--drop", "plan", "--format", "json", "--format", "sarif")
    assert "2 --format and 0 --output" in one_error(ran)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--drop", "plna"),
            "error: drop plna: raw.customers has no column 'plna'; did you mean plan?",
        ),
        (("--rename", "plan"), "error: --rename 'plan': expected OLD=NEW"),
        (("--retype", "plan=string"), "error: retype plan to string: it already is string"),
        (("--schema-file", "nope.json"), "error: --schema-file nope.json: cannot read:"),
        (("--schema-file", CHANGE, "--drop", "plan"), "error: --schema-file: the changes are"),
        ((), "error: no change to preview: give --drop, --rename, --retype, --deprecate"),
        (("--drop", "plan", "--format", "html"), "error: --format html: impact writes table,"),
        (("--deprecation-note", "x"), "error: --deprecation-note: only with --deprecate"),
        (("--deprecate", "--decommission", "soon"), "error: --decommission 'soon' is not an"),
    ],
)
def test_bad_input_is_one_error_line(demo: Path, args: tuple[str, ...], message: str) -> None:
    assert one_error(impact(demo, *args)).startswith(message)


def test_an_unknown_dataset_suggests_close_names(demo: Path) -> None:
    by_name = run_cli(demo, "impact", "raw.customer", "--drop", "plan")
    assert one_error(by_name).endswith("did you mean raw.customers, curated.customer_360?")
    typo = dataset_urn("raw.custmers")
    by_urn = run_cli(demo, "impact", typo, "--drop", "plan")
    line = one_error(by_urn)
    assert line.startswith(f"error: {typo}: no such dataset in lite:")
    assert line.endswith("did you mean raw.customers, curated.customer_360?")


def test_the_preview_records_nothing(demo: Path) -> None:
    before = sorted(p.relative_to(demo) for p in demo.rglob("*"))
    ran = impact(demo, "--schema-file", CHANGE, "--deprecate")
    assert ran.code == 0, ran.stderr
    # No state database was created, and the catalog still holds the old schema.
    assert sorted(p.relative_to(demo) for p in demo.rglob("*")) == before
    again = impact(demo, "--drop", "signup_date", "--format", "json")
    assert again.json()["models"][0]["severity"] == "critical"


@needs_standin
def test_through_datahub_the_json_is_lites(standin_factory: StandInFactory, demo: Path) -> None:
    """The same change previewed on the demo loaded into the stand-in GMS and into Lite."""
    records = json.loads((DEMO_DATA / "01_catalog.json").read_text(encoding="utf-8"))
    server = standin_factory(records)
    args = ("--schema-file", CHANGE, "--deprecate", "--format", "json")
    remote = impact(demo, "--catalog", f"datahub:{server.url}", *args)
    assert remote.code == 0, remote.stderr
    local = impact(demo, *args)
    assert local.code == 0, local.stderr
    keep = ("models", "changes", "summary", "dataset")
    assert {k: remote.json()[k] for k in keep} == {k: local.json()[k] for k in keep}
    assert remote.json()["summary"]["worst"] == "critical"
