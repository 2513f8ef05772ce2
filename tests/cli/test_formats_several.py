"""Several report formats in one scan: ``--format``/``--output`` in pairs, through the
installed command.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from testing.installed_cli import run_cli

DAY1 = "2026-11-20T09:00:00Z"


def test_each_format_goes_to_its_output_from_one_scan(demo: Path, tmp_path: Path) -> None:
    report, log = tmp_path / "r.json", tmp_path / "r.sarif"
    ran = run_cli(
        demo,
        *("scan", "--now", DAY1, "--fail-on", "high"),
        *("--format", "json", "--output", str(report)),
        *("--format", "sarif", "--output", str(log)),
        *("--format", "junit", "--output", "-"),
    )
    assert ran.code == 1, ran.stderr
    findings = {f["id"] for m in json.loads(report.read_text())["models"] for f in m["findings"]}
    results = json.loads(log.read_text())["runs"][0]["results"]
    assert {r["partialFingerprints"]["mlcopilotIncident/v1"] for r in results} == findings
    assert len(findings) == 3
    assert ET.fromstring(ran.stdout).attrib["failures"] == "2"
    # One scan made all three: it opened the incidents, and one summary closes stderr.
    assert sorted(json.loads(report.read_text())["incidents"]["opened"]) == sorted(findings)
    assert ran.stderr.count("Summary:") == 1
    assert f"Report written to {report}" in ran.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--format", "json", "--format", "sarif"), "2 --format and 0 --output"),
        (("--format", "json", "--output", "-", "--format", "sarif", "--output", "-"), "stdout"),
    ],
)
def test_unpaired_or_two_stdout_reports_are_refused_before_scanning(
    demo: Path, args: tuple[str, ...], said: str
) -> None:
    ran = run_cli(demo, "scan", "--now", DAY1, *args)
    assert ran.code == 2
    assert said in ran.stderr
    # Refused before the scan: nothing was recorded, so a later scan still opens them.
    later = run_cli(demo, "scan", "--now", DAY1, "--format", "json")
    assert len(later.json()["incidents"]["opened"]) == 3


def test_report_files_get_the_umask_mode_and_keep_a_replaced_files(
    demo: Path, tmp_path: Path
) -> None:
    # Written through a private temp file, yet meant to be read, attached or served.
    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.sarif"
    kept.write_text("old")
    kept.chmod(0o640)
    umask = os.umask(0o022)
    try:
        ran = run_cli(
            demo,
            *("scan", "--now", DAY1, "--dry-run"),
            *("--format", "json", "--output", str(fresh)),
            *("--format", "sarif", "--output", str(kept)),
        )
    finally:
        os.umask(umask)
    assert ran.code == 0, ran.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert json.loads(kept.read_text())["version"] == "2.1.0"
