"""A walk cut short is partial in every report, never clean: JUnit, SARIF, GitHub, JSON, text.

``--max-hops 1`` stops the demo model's walk after one hop. The checks then pass or fail on
what was read; every format must also say that the rest was not read, and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema

from mlcopilot.report.junit import WALK_CASE
from mlcopilot.report.sarif import PARTIAL_WALK
from testing.installed_cli import run_cli
from testing.sarif_rules import github_problems

DAY1 = "2026-11-20T09:00:00Z"
SCHEMA = Path(__file__).parent.parent / "data" / "sarif-schema-2.1.0.json"
WHY = "(a hop or node cap was reached): what lies beyond was not checked"


def scan(home: Path, *args: str) -> str:
    ran = run_cli(home, "scan", "--now", DAY1, "--max-hops", "1", *args)
    assert ran.code in (0, 1), ran.stderr
    return ran.stdout


def test_junit_skips_the_walk_of_a_model_it_did_not_finish(demo: Path) -> None:
    root = ET.fromstring(scan(demo, "--format", "junit"))
    [suite] = root.findall("testsuite")
    [case] = [c for c in suite.iter("testcase") if c.attrib["name"] == WALK_CASE]
    skipped = case.find("skipped")
    assert skipped is not None
    assert skipped.attrib["message"].startswith("the walk was truncated at ")
    assert skipped.attrib["message"].endswith(WHY)
    assert suite.attrib["skipped"] == "1"
    assert suite.attrib["tests"] == str(len(list(suite.iter("testcase"))))
    # A full walk has no such case.
    full = ET.fromstring(run_cli(demo, "scan", "--now", DAY1, "--format", "junit").stdout)
    assert WALK_CASE not in {c.attrib["name"] for c in full.iter("testcase")}


def test_sarif_says_which_walk_stopped_short_and_stays_valid(demo: Path) -> None:
    log = json.loads(scan(demo, "--format", "sarif"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(log)] == []
    assert github_problems(log) == []
    [run] = log["runs"]
    [invocation] = run["invocations"]
    [note] = invocation["toolExecutionNotifications"]
    assert note["descriptor"]["id"] == PARTIAL_WALK
    assert note["level"] == "warning"
    assert note["message"]["text"].startswith("urn:li:mlModel:")
    assert note["message"]["text"].endswith(WHY)
    full = json.loads(run_cli(demo, "scan", "--now", DAY1, "--format", "sarif").stdout)
    assert "invocations" not in full["runs"][0]


def test_github_warns_of_a_partial_walk_even_without_a_gate(demo: Path) -> None:
    lines = scan(demo, "--format", "github").splitlines()
    [warning] = [line for line in lines if "partial walk" in line]
    assert warning.startswith("::warning title=mlcopilot partial walk of churn_predictor_v1::")
    assert warning.endswith(WHY)


def test_json_and_text_say_truncated(demo: Path) -> None:
    report = json.loads(scan(demo, "--format", "json"))
    [model] = report["models"]
    assert model["coverage"]["truncated"] is True
    text = scan(demo)
    assert "truncated" in text
    assert "complete (no gaps" not in text
