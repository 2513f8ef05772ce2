"""``action.yml`` run as a workflow would run it, under a fake GitHub runner (tests/ci/runner.py),
against the demo's metadata files: the annotations, the outputs, the job summary, the reports,
the gate's exit code, and bad input refused before anything is installed or written.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from testing.builders import dataset, dataset_urn, ml_model, model_urn, write_metadata_file
from tests.ci.runner import VENV_BIN, Ran, action, run_action
from tests.conftest import DEMO_DATA, REPO

pytestmark = pytest.mark.slow

DAY1 = "2026-11-20T09:00:00Z"
CATALOG = str(DEMO_DATA / "01_catalog.json")
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


def gate(tmp_path: Path, **inputs: str) -> Ran:
    """The action on the demo catalog, mlcopilot already on PATH, the clock at DAY1."""
    given = {"catalog": CATALOG, "install": "false", "args": f"--now {DAY1}"}
    given.update({name.replace("_", "-"): value for name, value in inputs.items()})
    return run_action(tmp_path, given)


def annotated(ran: Ran) -> list[str]:
    return [line for line in ran.stdout.splitlines() if line.startswith("::") and " title=" in line]


def test_a_failed_gate_annotates_summarises_writes_the_reports_and_exits_1(tmp_path: Path) -> None:
    ran = run_action(
        tmp_path,
        {"catalog": CATALOG, "install": "false", "args": f"--now {DAY1}"},
        summary_before="## An earlier step's summary\n",
    )
    assert ran.code == 1, ran.stdout + ran.stderr
    # The defaults: fail-on high, formats github,sarif,junit.
    commands = [line.split(" ", 1)[0] for line in annotated(ran)]
    assert commands == ["::error", "::error", "::warning", "::error"]
    assert "::error title=mlcopilot pii_exposure (high) on churn_predictor_v1::" in ran.stdout
    assert "::warning title=mlcopilot deprecated_source (medium)" in ran.stdout
    assert "::error title=mlcopilot gate::The gate failed: churn_predictor_v1" in ran.stdout
    # Every output action.yml declares, and no other; the ones not asked for are empty.
    assert set(ran.outputs) == set(action()["outputs"])
    assert ran.outputs["exit-code"] == "1"
    assert ran.outputs["report-dir"] == "mlcopilot-reports"
    assert (
        ran.outputs["json-file"] == ran.outputs["markdown-file"] == ran.outputs["html-file"] == ""
    )
    # The job summary: what was there, then the markdown report with the verdict.
    assert ran.summary.startswith("## An earlier step's summary\n# mlcopilot scan — 2026-11-20")
    assert "pii_exposure" in ran.summary
    assert "FAILED" in ran.summary.upper()
    # The reports, in the workspace, where the outputs say.
    log = json.loads(ran.file("sarif-file").read_text(encoding="utf-8"))
    validator = jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8")))
    assert [error.message for error in validator.iter_errors(log)] == []
    rules = {result["ruleId"] for result in log["runs"][0]["results"]}
    assert rules == {"pii_exposure", "stale_source", "deprecated_source"}
    junit = ET.parse(ran.file("junit-file")).getroot()
    assert junit.attrib["failures"] == "2"
    assert ran.file("sarif-file").parent == ran.workspace / "mlcopilot-reports"


@pytest.mark.parametrize(
    ("fail_on", "code", "gate_line"),
    [("critical", 0, False), ("none", 0, False), ("medium", 1, True), ("HIGH", 1, True)],
)
def test_the_exit_code_is_the_gates(
    tmp_path: Path, fail_on: str, code: int, gate_line: bool
) -> None:
    ran = gate(tmp_path, fail_on=fail_on)
    assert ran.code == code, ran.stdout + ran.stderr
    assert ran.outputs["exit-code"] == str(code)
    # The findings are annotated whatever the threshold; the gate's own error only on failure.
    assert len([a for a in annotated(ran) if "mlcopilot gate" not in a]) == 3
    assert ("title=mlcopilot gate::" in ran.stdout) is gate_line


def test_formats_choose_the_reports(tmp_path: Path) -> None:
    ran = gate(tmp_path, formats=" json , markdown,html", output_dir="out/reports")
    assert ran.code == 1, ran.stdout + ran.stderr
    # No github format: no annotation, and the job summary is left alone.
    assert annotated(ran) == []
    assert ran.summary == ""
    assert ran.outputs["sarif-file"] == ran.outputs["junit-file"] == ""
    report = json.loads(ran.file("json-file").read_text(encoding="utf-8"))
    assert report["summary"]["gate"]["passed"] is False
    assert ran.file("markdown-file").read_text(encoding="utf-8").startswith("# mlcopilot scan")
    assert "<html" in ran.file("html-file").read_text(encoding="utf-8").lower()
    assert sorted(p.name for p in (ran.workspace / "out" / "reports").iterdir()) == [
        "mlcopilot.html",
        "mlcopilot.json",
        "mlcopilot.md",
    ]


def test_a_folder_is_loaded_in_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "metadata"
    folder.mkdir(parents=True)
    # Copied newest first: the order is the names', not the files' age.
    for name in ("02_schema_change.json", "01_catalog.json"):
        shutil.copy(DEMO_DATA / name, folder / name)
    ran = gate(tmp_path, catalog="metadata", fail_on="critical", args="--now 2026-11-22T09:00:00Z")
    assert ran.code == 1, ran.stdout + ran.stderr
    # The column removed by the second file is drift only against the first one's schema.
    assert "::error title=mlcopilot schema_drift (critical)" in ran.stdout
    assert "signup_date" in ran.stdout
    assert "Loading 2 metadata file(s)" in ran.stdout
    # Code scanning shows each SARIF result at the metadata the catalog was loaded from.
    log = json.loads(ran.file("sarif-file").read_text(encoding="utf-8"))
    locations = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert locations == {"metadata"}


def test_a_lite_spec_is_scanned_where_it_is(tmp_path: Path) -> None:
    catalog = tmp_path / "kept" / "catalog.db"
    loaded = subprocess.run(
        [str(VENV_BIN / "mlcopilot"), "catalog", "load", "--catalog", f"lite:{catalog}", CATALOG],
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    ran = gate(tmp_path, catalog=f"lite:{catalog}", formats="json")
    assert ran.code == 1, ran.stdout + ran.stderr
    assert "Loading" not in ran.stdout
    report = json.loads(ran.file("json-file").read_text(encoding="utf-8"))
    assert report["catalog"] == f"lite:{catalog}"
    assert len(report["models"][0]["findings"]) == 3


def test_models_are_lines_and_commas_outside_an_urns_parentheses(tmp_path: Path) -> None:
    mcps = [*dataset("raw.events", fields=[("email", "string")], field_tags={"email": ["PII"]})]
    for name in ("alpha", "beta", "gamma"):
        mcps += ml_model(name, training_data=[dataset_urn("raw.events")])
    metadata = write_metadata_file(tmp_path / "models.json", mcps)
    ran = gate(
        tmp_path,
        catalog=str(metadata),
        model=f"{model_urn('alpha')}, gamma\n\n",
        formats="json",
        fail_on="none",
    )
    assert ran.code == 0, ran.stdout + ran.stderr
    report = json.loads(ran.file("json-file").read_text(encoding="utf-8"))
    assert sorted(m["urn"] for m in report["models"]) == [model_urn("alpha"), model_urn("gamma")]


def test_an_unknown_model_is_the_scans_usage_error(tmp_path: Path) -> None:
    ran = gate(tmp_path, model="no_such_model")
    assert ran.code == 2
    assert ran.outputs["exit-code"] == "2"
    assert "error:" in ran.stderr
    assert ran.outputs["sarif-file"] == ""


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        ({"formats": "github,xml"}, "input formats: unknown format 'xml'"),
        ({"formats": "table"}, "input formats: unknown format 'table'"),
        ({"formats": "sarif, sarif"}, "input formats: 'sarif' is given twice"),
        ({"formats": " , "}, "input formats: empty"),
        ({"fail-on": "severe"}, "input fail-on: 'severe' is not one of critical, high"),
        ({"install": "maybe"}, "input install: 'maybe' is not true or false"),
        ({"output-dir": " "}, "input output-dir: empty"),
        ({"catalog": ""}, "input catalog: empty"),
        ({"catalog": "missing.json"}, "input catalog: 'missing.json' is no file or folder"),
        ({"catalog": "."}, "input catalog: no .json metadata file in the folder '.'"),
        ({"catalog": "mcp"}, "input catalog: mcp needs DATAHUB_GMS_URL"),
        ({"version": "--index-url=x", "install": "true"}, "input version: '--index-url=x'"),
    ],
)
def test_bad_input_is_one_error_line_exit_2_and_nothing_written(
    tmp_path: Path, inputs: dict[str, str], said: str
) -> None:
    ran = run_action(tmp_path, {"catalog": CATALOG, "install": "false", **inputs})
    assert ran.code == 2
    [line] = ran.stdout.splitlines()
    assert line.startswith("::error::mlcopilot action: ")
    assert said in line
    assert ran.outputs["exit-code"] == "2"
    assert list(ran.workspace.iterdir()) == []
    assert list(ran.runner_temp.iterdir()) == []


def test_input_text_cannot_inject_a_workflow_command(tmp_path: Path) -> None:
    ran = run_action(
        tmp_path, {"catalog": "x\n::add-mask::secret\r\n%0A::warning::y", "install": "false"}
    )
    assert ran.code == 2
    [line] = ran.stdout.splitlines()
    assert line.startswith("::error::")
    assert "x%0A::add-mask::secret%0D%0A%250A::warning::y" in line


def test_without_mlcopilot_on_path_install_false_is_refused(tmp_path: Path) -> None:
    ran = run_action(tmp_path, {"catalog": CATALOG, "install": "false"}, path="/usr/bin:/bin")
    assert ran.code == 2
    assert "input install: false, but there is no mlcopilot on PATH" in ran.stdout


FAKE_PYTHON = """#!/bin/bash
# Stands in for setup-python's interpreter (and the venv's): no network in tests.
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && ln -s "{mlcopilot}" "$3/bin/mlcopilot"
    exit
fi
if [ "$1 $2 $3" = "-m pip install" ]; then
    printf '%s\\n' "$@" > "{log}"
    exit {pip_exit}
fi
exit 99
"""


def fake_python(tmp_path: Path, pip_exit: int = 0) -> tuple[Path, Path]:
    """An interpreter whose venv holds the project's mlcopilot and whose pip logs its call."""
    log = tmp_path / "pip-call.txt"
    python = tmp_path / "fake-python"
    python.write_text(
        FAKE_PYTHON.format(mlcopilot=VENV_BIN / "mlcopilot", log=log, pip_exit=pip_exit),
        encoding="utf-8",
    )
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python, log


@pytest.mark.parametrize(
    ("version", "installed"),
    [("", str(REPO)), ("ml-incident-copilot==0.1.0", "ml-incident-copilot==0.1.0")],
)
def test_install_puts_the_version_in_a_venv_of_its_own_and_scans_with_it(
    tmp_path: Path, version: str, installed: str
) -> None:
    python, log = fake_python(tmp_path)
    # No mlcopilot on PATH: the scan can only have run with the one installed.
    ran = run_action(
        tmp_path,
        {"catalog": CATALOG, "version": version, "args": f"--now {DAY1}"},
        path=f"/usr/bin{os.pathsep}/bin",
        python_path=str(python),
    )
    assert ran.code == 1, ran.stdout + ran.stderr
    assert log.read_text(encoding="utf-8").splitlines()[-1] == installed
    assert "::group::Installing mlcopilot" in ran.stdout
    [venv] = [p for p in ran.runner_temp.glob("mlcopilot.*/venv")]
    assert (venv / "bin" / "mlcopilot").is_symlink()
    assert ran.outputs["exit-code"] == "1"


def test_a_failed_install_is_one_error_and_exit_3(tmp_path: Path) -> None:
    python, _ = fake_python(tmp_path, pip_exit=1)
    ran = run_action(tmp_path, {"catalog": CATALOG}, python_path=str(python))
    assert ran.code == 3
    assert f"::error::mlcopilot action: installing {REPO} failed (exit 1)" in ran.stdout
    assert ran.outputs["exit-code"] == "3"
    assert list(ran.workspace.iterdir()) == []


def test_a_bad_metadata_file_fails_the_load_with_its_exit_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}', encoding="utf-8")
    ran = gate(tmp_path, catalog=str(bad))
    assert ran.code == 2
    assert "error:" in ran.stderr
    assert "::error::mlcopilot action: loading the catalog failed (exit 2)" in ran.stdout
    assert ran.outputs["exit-code"] == "2"
    assert not (ran.workspace / "mlcopilot-reports").exists()
