"""Scan reports as data: the versioned JSON contract and a markdown summary.

The JSON shape is a public contract (``version``); add to it only in a new version. Version 2
is version 1 plus ``coverage.gaps`` per model, ``summary`` and ``notes``; nothing of version 1
changed meaning, so a version-1 reader that ignores unknown keys reads version 2 unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mlcopilot.model import Finding, Incident, ModelReport
from mlcopilot.names import short_name
from mlcopilot.notify.codec import OutboxItem
from mlcopilot.redact import redact
from mlcopilot.scan import ScanResult
from mlcopilot.wording import count

REPORT_VERSION = 2


def report_dict(result: ScanResult) -> dict[str, Any]:
    """The scan report in the public JSON shape (version 2)."""
    summary = result.summary
    return {
        "version": REPORT_VERSION,
        "now": result.now.isoformat(),
        "catalog": result.catalog,
        "models": [_model_dict(m) for m in result.models],
        "incidents": {
            "opened": [i.id for i in result.changes.opened],
            "updated": [i.id for i in result.changes.updated],
            "resolved": [i.id for i in result.changes.resolved],
        },
        "summary": {
            "models": summary.models,
            "findings": summary.findings,
            "unknown": summary.unknown,
            "gaps": summary.gaps,
            "models_with_gaps": summary.models_with_gaps,
        },
        "notes": list(result.notes),
    }


def _model_dict(report: ModelReport) -> dict[str, Any]:
    return {
        "urn": report.urn,
        "coverage": {
            "nodes": len(report.lineage.nodes),
            "truncated": report.lineage.truncated,
            "unknown": sorted(report.unknown),
            "gaps": [{"entity": g.entity, "reason": g.reason} for g in report.gaps],
        },
        "findings": [finding_dict(f) for f in report.findings],
    }


def finding_dict(finding: Finding) -> dict[str, Any]:
    """One finding in the public JSON shape."""
    return {
        "id": finding.id,
        "check": finding.check,
        "severity": finding.severity.value,
        "entity": finding.entity,
        "field": finding.field,
        "change": finding.change,
        "previous_field": finding.previous_field,
        "message": finding.message,
        "path": list(finding.path),
    }


def render_json(result: ScanResult) -> str:
    """The JSON report, pretty-printed, ending with a newline."""
    return json.dumps(report_dict(result), indent=2, ensure_ascii=False) + "\n"


def incident_dict(incident: Incident) -> dict[str, Any]:
    """One incident as ``incidents list --format json`` shows it."""
    return {
        "id": incident.id,
        "generation": incident.generation,
        "state": incident.state.value,
        "check": incident.check,
        "severity": incident.severity.value,
        "model": incident.model,
        "entity": incident.entity,
        "field": incident.field,
        "change": incident.change,
        "message": incident.message,
        "opened_at": incident.opened_at.isoformat(),
        "updated_at": incident.updated_at.isoformat(),
        "acknowledged_at": _iso(incident.acknowledged_at),
        "acknowledged_by": incident.acknowledged_by,
        "resolved_at": _iso(incident.resolved_at),
        "resolution": incident.resolution,
    }


def render_incidents_json(incidents: Sequence[Incident]) -> str:
    """``incidents list --format json``."""
    return json.dumps([incident_dict(i) for i in incidents], indent=2, ensure_ascii=False) + "\n"


def render_markdown(result: ScanResult) -> str:
    """A markdown report, for pull-request comments and CI job summaries."""
    lines = [f"# mlcopilot scan — {result.now.isoformat()}", "", f"Catalog: `{result.catalog}`", ""]
    lines += [item for note in result.notes for item in (_md(note), "")]
    if not result.models:
        return "\n".join(lines)
    for model in result.models:
        lines += _markdown_model(model)
    changes = result.changes
    lines.append(
        f"Incidents: {len(changes.opened)} opened, {len(changes.updated)} still open, "
        f"{len(changes.resolved)} resolved."
    )
    lines += ["", result.summary.sentence()]
    return "\n".join(lines) + "\n"


def _markdown_model(model: ModelReport) -> list[str]:
    lineage = model.lineage
    lines = [f"## {_md(short_name(model.urn))}", "", f"`{model.urn}`", ""]
    coverage = f"Walked {count(len(lineage.nodes), 'node')}"
    if lineage.truncated:
        coverage += " (**truncated**: a hop or node cap was reached)"
    if model.unknown:
        coverage += f"; {count(len(model.unknown), 'entity')} lacked metadata a check needed"
    if model.gaps:
        coverage += f"; {count(len(model.gaps), 'coverage gap')}"
    lines += [coverage + ".", ""]
    if model.findings:
        lines += ["| Severity | Check | Entity | Field | Finding |", "|---|---|---|---|---|"]
        lines += [
            f"| {f.severity.value} | {f.check} | {_md(short_name(f.entity))} "
            f"| {_md(f.field or '')} | {_md(f.message)} |"
            for f in model.findings
        ]
    elif model.gaps:
        lines.append("No findings, but coverage is incomplete: see the gaps below.")
    else:
        lines.append("No findings.")
    if model.gaps:
        lines += ["", "Coverage gaps (lineage stops before a dataset; not checked):", ""]
        lines += [f"- `{gap.entity}`: {_md(gap.reason)}" for gap in model.gaps]
    if model.unknown:
        lines += ["", "Unknown (not checked):", ""]
        lines += [
            f"- `{urn}`: {'; '.join(reasons)}" for urn, reasons in sorted(model.unknown.items())
        ]
    lines.append("")
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def outbox_dict(item: OutboxItem) -> dict[str, Any]:
    """One outbox row as ``outbox list --format json`` shows it (its content left out)."""
    return {
        "id": item.id,
        "sink": item.sink,
        "action": item.action,
        "seq": item.seq,
        "group": item.group_key,
        "generation": item.group_generation,
        "dedupe_key": item.dedupe_key,
        "status": item.status.value,
        "attempts": item.attempts,
        "uncertain": item.uncertain,
        "created_at": item.created_at.isoformat(),
        "not_before": item.not_before.isoformat(),
        "next_attempt_at": item.next_attempt_at.isoformat(),
        "delivered_at": _iso(item.delivered_at),
        "last_error": redact(item.last_error) if item.last_error else None,
        "warning": redact(item.warning) if item.warning else None,
    }


def render_outbox_json(items: Sequence[OutboxItem]) -> str:
    """``outbox list --format json``."""
    return json.dumps([outbox_dict(i) for i in items], indent=2, ensure_ascii=False) + "\n"
