"""``scan --format junit``: the gate as JUnit XML, for GitLab's, Jenkins' and GitHub's reporters.

One ``<testsuite>`` per model, one ``<testcase>`` per (model, check that ran). A test case
fails (``<failure>``) for its findings at or above ``--fail-on``, or for any finding when no
threshold was given; findings below the threshold are listed in its ``<system-out>``. A model
whose walk was cut short gets one more case, ``lineage walk``, ``<skipped>`` with why: its
checks passing says nothing of what lies beyond the cut, so the suite must not read as clean.

Catalog text reaches XML through :mod:`xml.etree.ElementTree`, which escapes markup; the
characters XML 1.0 forbids outright (NUL and most C0 controls, lone surrogates) are removed
first, since no escaping can carry them and a reader rejects the whole file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from xml.etree import ElementTree as ET

from mlcopilot.incidents.gate import truncated_walk
from mlcopilot.model import CheckInfo, Finding, ModelReport, Severity
from mlcopilot.scan import ScanResult
from mlcopilot.text.wording import count

WALK_CASE = "lineage walk"
"""The test case of a model whose walk was cut short (skipped: not everything was checked)."""

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""What XML 1.0's ``Char`` production leaves out."""


def xml_safe(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold at all (escaping does the rest)."""
    return _NOT_XML.sub("", text)


def fails(finding: Finding, fail_on: Severity | None) -> bool:
    """Whether ``finding`` fails its test case: at or above ``fail_on``; any, without one."""
    return fail_on is None or finding.severity.at_least(fail_on)


def render_junit(result: ScanResult, checks: Sequence[CheckInfo], fail_on: Severity | None) -> str:
    """The scan as a JUnit XML document (``<testsuites>``), ending with a newline.

    Args:
        result: The scan.
        checks: The checks that ran, in the order the scan ran them.
        fail_on: The gate's threshold; None: every finding is a failure.
    """
    names = [c.name for c in checks]
    # A finding of a check not in ``checks`` (none today) still gets its test case.
    names += sorted({f.check for m in result.models for f in m.findings} - set(names))
    root = ET.Element("testsuites", name="mlcopilot scan")
    total_tests = total_failures = 0
    for model in result.models:
        suite, tests, failures = _suite(model, names, fail_on)
        root.append(suite)
        total_tests += tests
        total_failures += failures
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    root.set("errors", "0")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _suite(
    model: ModelReport, checks: Sequence[str], fail_on: Severity | None
) -> tuple[ET.Element, int, int]:
    suite = ET.Element("testsuite", name=xml_safe(model.urn))
    failures = 0
    for check in checks:
        found = [f for f in model.findings if f.check == check]
        case = ET.SubElement(suite, "testcase", name=check, classname=xml_safe(model.urn))
        failing = [f for f in found if fails(f, fail_on)]
        passing = [f for f in found if not fails(f, fail_on)]
        if failing:
            failures += 1
            worst = max(failing, key=lambda f: f.severity.rank).severity
            summary = f"{count(len(failing), 'finding')}, worst {worst.value}: {failing[0].message}"
            failure = ET.SubElement(case, "failure", message=xml_safe(summary), type=worst.value)
            failure.text = "\n".join(_line(f) for f in failing)
        if passing:
            below = ET.SubElement(case, "system-out")
            below.text = "Below the gate's threshold:\n" + "\n".join(_line(f) for f in passing)
    tests, skipped = len(checks), 0
    if model.lineage.truncated:
        case = ET.SubElement(suite, "testcase", name=WALK_CASE, classname=xml_safe(model.urn))
        ET.SubElement(case, "skipped", message=xml_safe(truncated_walk(model.lineage)))
        tests, skipped = tests + 1, 1
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    return suite, tests, failures


def _line(finding: Finding) -> str:
    where = finding.entity + (f" field {finding.field}" if finding.field else "")
    return xml_safe(
        f"[{finding.severity.value}] {where}: {finding.message} (incident {finding.id})"
    )
