"""``scan --format junit``: JUnit XML a test reporter reads, through the installed command."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from junitparser import JUnitXml

from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.installed_cli import run_cli

DAY1 = "2026-11-20T09:00:00Z"
NASTY = "a]]>b<c&d\x00e\x1bf"
"""A column name that ends a CDATA section, opens a tag, starts an entity and holds NUL."""


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_one_case_per_model_and_check_failing_at_the_threshold(demo: Path) -> None:
    ran = run_cli(demo, "scan", "--now", DAY1, "--format", "junit", "--fail-on", "high")
    assert ran.code == 1, ran.stderr
    root = ET.fromstring(ran.stdout)
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    assert "churn_predictor_v1" in suite.attrib["name"]
    by_name = cases(root)
    # Every configured check ran, so each has its case, failing or not.
    assert {"schema_drift", "pii_exposure", "stale_source", "deprecated_source"} <= set(by_name)
    failed = {name for name, case in by_name.items() if case.find("failure") is not None}
    assert failed == {"pii_exposure", "stale_source"}
    assert suite.attrib["tests"] == root.attrib["tests"] == str(len(by_name))
    assert suite.attrib["failures"] == root.attrib["failures"] == "2"
    pii = by_name["pii_exposure"].find("failure")
    assert pii is not None
    assert pii.attrib["type"] == "high"
    assert "email" in pii.attrib["message"]
    assert "field email" in (pii.text or "")
    # The medium deprecation is below the threshold: reported, not failed.
    deprecated = by_name["deprecated_source"]
    assert deprecated.find("failure") is None
    assert "legacy.customer_segments" in (deprecated.findtext("system-out") or "")


def test_a_junit_reader_sees_the_cases_and_failures(demo: Path, tmp_path: Path) -> None:
    # junitparser reads JUnit the way test reporters do (suites, cases, results).
    report = tmp_path / "mlcopilot.xml"
    ran = run_cli(
        demo,
        *("scan", "--now", DAY1, "--fail-on", "high"),
        *("--format", "junit", "--output", str(report)),
    )
    assert ran.code == 1, ran.stderr
    xml = JUnitXml.fromfile(str(report))
    suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
    [suite] = suites
    results = {case.name: [type(r).__name__ for r in case.result] for case in suite}
    failed = {name for name, kinds in results.items() if "Failure" in kinds}
    assert failed == {"pii_exposure", "stale_source"}
    assert suite.tests == len(results)
    assert suite.failures == 2
    assert all(kinds in ([], ["Failure"]) for kinds in results.values())


def test_without_fail_on_every_finding_fails_its_case(demo: Path) -> None:
    ran = run_cli(demo, "scan", "--now", DAY1, "--format", "junit")
    assert ran.code == 0, ran.stderr
    root = ET.fromstring(ran.stdout)
    failed = {n for n, case in cases(root).items() if case.find("failure") is not None}
    assert failed == {"pii_exposure", "stale_source", "deprecated_source"}
    assert root.attrib["failures"] == "3"
    # The closing summary went to stderr: stdout is the XML alone.
    assert "Summary:" in ran.stderr


def test_catalog_text_cannot_break_the_xml(tmp_path: Path) -> None:
    mcps = [
        *dataset("raw.events", fields=[(NASTY, "string")], field_tags={NASTY: ["PII"]}),
        *ml_model("model", training_data=[dataset_urn("raw.events")]),
    ]
    home = tmp_path / "home"
    path = write_metadata_file(tmp_path / "metadata.json", mcps)
    assert run_cli(home, "catalog", "load", str(path)).code == 0
    out = tmp_path / "report.xml"
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "junit", "--output", str(out))
    assert ran.code == 0, ran.stderr
    root = ET.parse(out).getroot()
    failure = cases(root)["pii_exposure"].find("failure")
    assert failure is not None
    # The name survives, markup and all, less what XML 1.0 cannot hold (NUL, ESC).
    assert "a]]>b<c&def" in (failure.text or "")
    assert "a]]>b<c&def" in failure.attrib["message"]
    assert "\x00" not in out.read_text(encoding="utf-8")
