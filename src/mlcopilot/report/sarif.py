"""``scan --format sarif``: SARIF 2.1.0, for code-scanning UIs (GitHub's ``upload-sarif``).

One run; its driver is mlcopilot with one rule per check that ran (from its
:class:`~mlcopilot.model.CheckInfo`). Each finding is a result: ``level`` from its severity
(critical and high ``error``, medium ``warning``, low ``note``), where it is as logical
locations (the entity's urn and, for a column, its schema field urn), since a catalog finding
has no file and line. ``partialFingerprints`` carries the finding's incident id, stable across
scans, so a code-scanning UI tracks the same risk as one alert from run to run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mlcopilot.model import CheckInfo, Finding, Severity
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
FINGERPRINT = "mlcopilotIncident/v1"
"""The ``partialFingerprints`` key of a result: its incident id (versioned, as SARIF asks)."""

LEVELS = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
}
"""The SARIF ``level`` of a finding of each severity."""


def sarif_dict(result: ScanResult, checks: Sequence[CheckInfo]) -> dict[str, Any]:
    """The scan as a SARIF 2.1.0 log.

    Args:
        result: The scan.
        checks: The checks that ran: the driver's rules, in this order.
    """
    import mlcopilot

    infos = list(checks)
    # A finding of a check not among ``checks`` (none today) still has its rule.
    known = {info.name for info in infos}
    extra = sorted({f.check for m in result.models for f in m.findings} - known)
    infos += [CheckInfo.generic(name) for name in extra]
    index = {info.name: i for i, info in enumerate(infos)}
    results = [_result(f, index[f.check]) for model in result.models for f in model.findings]
    driver = {
        "name": "mlcopilot",
        "version": mlcopilot.__version__,
        "rules": [_rule(info) for info in infos],
    }
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": driver},
                "results": results,
                "properties": {"catalog": result.catalog, "now": result.now.isoformat()},
            }
        ],
    }


def render_sarif(result: ScanResult, checks: Sequence[CheckInfo]) -> str:
    """The SARIF log (see :func:`sarif_dict`), pretty-printed, ending with a newline."""
    return json.dumps(sarif_dict(result, checks), indent=2, ensure_ascii=False) + "\n"


def _rule(info: CheckInfo) -> dict[str, Any]:
    return {
        "id": info.name,
        "name": info.title,
        "shortDescription": {"text": info.title},
        "fullDescription": {"text": info.why},
        "help": {"text": info.action},
        "properties": {"tags": ["mlcopilot", info.incident_type.lower()]},
    }


def _result(finding: Finding, rule_index: int) -> dict[str, Any]:
    locations: list[dict[str, Any]] = [
        {
            "fullyQualifiedName": finding.entity,
            "name": short_name(finding.entity),
            "kind": "resource",
        }
    ]
    if finding.field is not None:
        locations.append(
            {
                "fullyQualifiedName": f"urn:li:schemaField:({finding.entity},{finding.field})",
                "name": finding.field,
                "kind": "member",
            }
        )
    return {
        "ruleId": finding.check,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [{"logicalLocations": locations}],
        "partialFingerprints": {FINGERPRINT: finding.id},
        "properties": {
            "severity": finding.severity.value,
            "model": finding.model,
            "incident": finding.id,
            "path": list(finding.path),
        },
    }
