"""``action.yml``, its script and the CI examples (examples/ci/) agree with one another and with
``mlcopilot scan``; each example's gate runs here against a DataHub (the stand-in).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import yaml

from mlcopilot.cli.scan_guard import OutputFormat
from mlcopilot.model import Severity
from standin.fixtures import StandInFactory
from testing.installed_cli import MLCOPILOT
from tests.ci.runner import SCRIPT, VENV_BIN, action, run_action, step
from tests.conftest import DEMO_DATA, REPO

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "examples" / "ci"
ACTION_REF = re.compile(r"^OWNER/ml-incident-copilot@v\d+$")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def script_words(variable: str) -> list[str]:
    """The words of a ``NAME="a b c"`` line of the action's script."""
    found = re.search(rf'^{variable}="([^"]*)"$', SCRIPT.read_text(encoding="utf-8"), re.M)
    assert found, variable
    return found[1].split()


def scan_options() -> set[str]:
    """Every option ``mlcopilot scan --help`` lists."""
    done = subprocess.run(
        [str(MLCOPILOT), "scan", "--help"], capture_output=True, text=True, check=True
    )
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", done.stdout))


def demo_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(
        (DEMO_DATA / "01_catalog.json").read_text(encoding="utf-8")
    )
    return records


def server_incidents(lite_path: Path) -> int:
    """How many mlcopilot incidents the server's catalog holds (what a write-back adds)."""
    with sqlite3.connect(lite_path) as db:
        found: int = db.execute(
            "select count(distinct urn) from metadata_aspect_v2 "
            "where aspect_name = 'incidentInfo' and urn like 'urn:li:incident:mlcopilot-%'"
        ).fetchone()[0]
    return found


# --- action.yml and its script ---


def test_every_input_reaches_the_script_under_its_own_name() -> None:
    declared = action()["inputs"]
    assert action()["runs"]["using"] == "composite"
    env = step("gate")["env"]
    passed = {key: value for key, value in env.items() if key.startswith("INPUT_")}
    for key, value in passed.items():
        name = key.removeprefix("INPUT_").lower().replace("_", "-")
        assert value == f"${{{{ inputs.{name} }}}}", key
    steps_text = yaml.safe_dump(action()["runs"]["steps"])
    # Each input is used by a step; python-version by setup-python, the rest by the script.
    assert set(re.findall(r"inputs\.([\w-]+)", steps_text)) == set(declared)
    read = set(re.findall(r"\bINPUT_[A-Z_]+", SCRIPT.read_text(encoding="utf-8")))
    assert read == set(passed)
    assert {name for name in declared if f"INPUT_{name.upper().replace('-', '_')}" in read} == (
        set(declared) - {"python-version"}
    )


def test_every_output_is_the_gate_steps_own() -> None:
    for name, output in action()["outputs"].items():
        assert output["value"] == f"${{{{ steps.gate.outputs.{name} }}}}"
        assert output["description"]


def test_the_scripts_formats_and_severities_are_the_scans() -> None:
    formats = script_words("FORMATS")
    # Every scan format but table (for terminals; to a file it is markdown anyway).
    assert set(formats) == {f.value for f in OutputFormat} - {"table"}
    assert set(script_words("SEVERITIES")) == {s.value for s in Severity} | {"none"}
    declared = action()["inputs"]
    assert set(declared["formats"]["default"].split(",")) <= set(formats)
    assert declared["fail-on"]["default"] in script_words("SEVERITIES")
    for each in formats:
        assert each in declared["formats"]["description"], each


def test_the_script_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    done = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


# --- examples/ci/github-workflow.yml ---


def workflow_gate() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The example workflow's step that uses the action, and all its steps."""
    workflow = load(EXAMPLES / "github-workflow.yml")
    [job] = workflow["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    [gate] = [s for s in steps if ACTION_REF.match(s.get("uses", ""))]
    return gate, steps


def test_the_workflow_gives_the_action_only_its_inputs_and_reads_only_its_outputs() -> None:
    gate, steps = workflow_gate()
    declared = action()
    assert set(gate["with"]) <= set(declared["inputs"])
    assert set(gate["with"]["formats"].split(",")) <= set(script_words("FORMATS"))
    text = (EXAMPLES / "github-workflow.yml").read_text(encoding="utf-8")
    read = set(re.findall(rf"steps\.{gate['id']}\.outputs\.([\w-]+)", text))
    assert read
    assert read <= set(declared["outputs"])
    [upload] = [
        s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")
    ]
    assert upload["with"]["sarif_file"] == f"${{{{ steps.{gate['id']}.outputs.sarif-file }}}}"
    assert "always()" in upload["if"]


def test_the_workflows_gate_runs_against_datahub_and_writes_nothing_back(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    gate, _ = workflow_gate()
    server = standin_factory(demo_records())
    # The step's env, as its vars and secrets would fill it in.
    assert set(gate["env"]) == {"DATAHUB_GMS_URL", "DATAHUB_GMS_TOKEN"}
    env = {"DATAHUB_GMS_URL": server.url, "DATAHUB_GMS_TOKEN": "tok-example-0"}
    ran = run_action(tmp_path, {**gate["with"], "install": "false"}, env=env)
    assert ran.code == 1, ran.stdout + ran.stderr
    assert "::error title=mlcopilot pii_exposure (high) on churn_predictor_v1::" in ran.stdout
    assert "::error title=mlcopilot gate::" in ran.stdout
    assert json.loads(ran.file("sarif-file").read_text(encoding="utf-8"))["version"] == "2.1.0"
    assert ET.parse(ran.file("junit-file")).getroot().attrib["failures"] == "2"
    assert "# mlcopilot scan" in ran.summary
    assert "tok-example-0" not in ran.stdout + ran.stderr + ran.summary
    # args: --no-write-back, as its comment says: the pull request's run wrote no incident.
    assert server_incidents(server.lite_path) == 0


# --- examples/ci/gitlab-ci.yml ---


def gitlab_job() -> dict[str, Any]:
    [job] = load(EXAMPLES / "gitlab-ci.yml").values()
    return dict(job)


def gitlab_scan() -> list[str]:
    """The job's ``mlcopilot scan`` command line, split as its shell splits it."""
    [line] = [each for each in gitlab_job()["script"] if each.startswith("mlcopilot scan")]
    return shlex.split(line)


def test_the_gitlab_job_asks_only_for_real_options_and_keeps_what_it_writes() -> None:
    job, words = gitlab_job(), gitlab_scan()
    options = {word for word in words if word.startswith("--")}
    assert options <= scan_options()
    pairs = [
        (words[i + 1], words[i + 3])
        for i, word in enumerate(words)
        if word == "--format" and words[i + 2] == "--output"
    ]
    assert len(pairs) == words.count("--format")
    assert {each for each, _ in pairs} <= {f.value for f in OutputFormat}
    outputs = dict(pairs)
    assert job["artifacts"]["reports"]["junit"] == outputs["junit"]
    assert job["artifacts"]["when"] == "always"
    for each, path in pairs:
        assert path == "-" or any(path.startswith(kept) for kept in job["artifacts"]["paths"]), each


def test_the_gitlab_jobs_script_runs_against_datahub(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    job = gitlab_job()
    server = standin_factory(demo_records())
    project = tmp_path / "project"
    project.mkdir()
    env = {
        **{key: str(value) for key, value in job["variables"].items()},
        "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": os.environ["HOME"],
        "MLCOPILOT_HOME": os.environ["MLCOPILOT_HOME"],
        "DATAHUB_TELEMETRY_ENABLED": "false",
        "DATAHUB_GMS_URL": server.url,
        "DATAHUB_GMS_TOKEN": "tok-example-0",
        "CI": "true",
    }
    # Every line of the job but the install (mlcopilot is installed here already).
    lines = [line for line in job["script"] if not line.startswith("pip install")]
    done = subprocess.run(
        ["bash", "-ec", "\n".join(lines)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    junit = ET.parse(project / job["artifacts"]["reports"]["junit"]).getroot()
    assert junit.attrib["failures"] == "2"
    assert (project / "mlcopilot-reports" / "mlcopilot.sarif").is_file()
    assert done.stdout.startswith("# mlcopilot scan")
    assert server_incidents(server.lite_path) == 0


# --- the README's CI gate section ---


def test_the_readmes_action_snippet_uses_only_what_the_action_declares() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [
        b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "ml-incident-copilot@" in b
    ]
    assert blocks
    declared = action()
    for block in blocks:
        steps = yaml.safe_load(block)
        [gate] = [s for s in steps if ACTION_REF.match(s.get("uses", ""))]
        assert set(gate["with"]) <= set(declared["inputs"])
        assert set(gate["with"]["formats"].split(",")) <= set(script_words("FORMATS"))
        assert gate["with"]["fail-on"] in script_words("SEVERITIES")
        read = set(re.findall(rf"steps\.{gate['id']}\.outputs\.([\w-]+)", block))
        assert read <= set(declared["outputs"])
    for path in ("action.yml", "examples/ci/github-workflow.yml", "examples/ci/gitlab-ci.yml"):
        assert f"]({path})" in readme, path
        assert (REPO / path).is_file()
