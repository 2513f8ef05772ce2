"""Scan reports as data: the versioned JSON contract and a markdown summary.

The JSON shape is a public contract (``version``). Its one description is the models of
:mod:`mlcopilot.report.models`: the report is their ``model_dump(mode="json")``, its JSON
Schema is generated from them and ships in the package (``mlcopilot/schemas/report-v3.json``,
:func:`report_schema`), and the MCP server's answers reuse them.

A required key is added only in a new version, and the old ones stay a flag away
(``scan --json-version``). Each version is the one before plus keys: a reader that ignores
unknown keys reads a newer report as it read the older one. An optional key (not in the
schema's ``required``) may be added within a version.

- 1: ``now``, ``catalog``, ``models`` (coverage and findings), ``incidents``.
- 2: ``coverage.gaps`` per model, ``summary`` (totals) and ``notes``.
- 3: ``dry_run``; per finding its ``evidence`` and its ``incident`` (id, generation, state,
  whether this scan opened it); per model ``coverage.unknown_reasons`` (entity, check,
  reason); in ``summary`` findings by severity and by check, incident counts, delivery, the
  time taken and the gate's verdict with its reasons. ``now`` is to the second. Optional, per
  model: ``coverage.profiles``, its profile readiness (what DataHub profiles of the columns
  feeding it), whenever the profile_drift check ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import PurePath
from typing import Any

from mlcopilot.incidents.gate import GateVerdict
from mlcopilot.incidents.payload import OutboxItem
from mlcopilot.lineage.coverage import readiness_parts
from mlcopilot.model import Finding, Incident, ModelReport, ProfileReadiness, plain_json
from mlcopilot.redact import redact
from mlcopilot.report import models as shape
from mlcopilot.report.summary import ScanOutcome, gate_lines, summary_lines
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import md_code, md_text
from mlcopilot.text.wording import count

REPORT_VERSION = 3
"""The version ``scan --format json`` writes unless ``--json-version`` asks for another."""
REPORT_VERSIONS = (1, 2, 3)
"""Every version ``scan --json-version`` can write."""
SCHEMA_RESOURCE = "schemas/report-v3.json"
"""The JSON Schema (draft 2020-12) of version 3, inside the ``mlcopilot`` package."""


def report_schema() -> dict[str, Any]:
    """The JSON Schema of the current report version, as shipped in the package."""
    text = resources.files("mlcopilot").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def report_model(
    result: ScanResult,
    *,
    verdict: GateVerdict | None = None,
    seconds: float = 0.0,
) -> shape.Report:
    """The scan report, version 3, as its typed model (see :mod:`mlcopilot.report.models`).

    Args:
        result: The scan.
        verdict: The gate's verdict (None: no gate was asked for).
        seconds: How long the scan took.
    """
    incidents = {i.id: (i, True) for i in result.changes.opened}
    incidents.update((i.id, (i, False)) for i in result.changes.updated)
    return shape.Report(
        version=3,
        now=result.now.isoformat(timespec="seconds"),
        catalog=result.catalog,
        dry_run=result.dry_run,
        models=[_model_scan(m, incidents, result.targets) for m in result.models],
        incidents=shape.IncidentIds(
            opened=[i.id for i in result.changes.opened],
            updated=[i.id for i in result.changes.updated],
            resolved=[i.id for i in result.changes.resolved],
        ),
        summary=_summary(ScanOutcome(result, verdict, seconds)),
        notes=list(result.notes),
    )


def report_dict(
    result: ScanResult,
    *,
    version: int = REPORT_VERSION,
    verdict: GateVerdict | None = None,
    seconds: float = 0.0,
) -> dict[str, Any]:
    """The scan report in the public JSON shape of ``version``.

    Version 3 is :func:`report_model`'s dump; an older version is the same dump without the
    keys it did not have yet (:data:`~mlcopilot.report.models.OLDER_VERSIONS`), and with
    ``now`` as it wrote it (ISO 8601, microseconds when there are some).

    Args:
        result: The scan.
        version: One of :data:`REPORT_VERSIONS`.
        verdict: The gate's verdict (version 3; None: no gate was asked for).
        seconds: How long the scan took (version 3).

    Raises:
        ValueError: ``version`` is not one of :data:`REPORT_VERSIONS`.
    """
    if version not in REPORT_VERSIONS:
        raise ValueError(f"no JSON report version {version}; there are {REPORT_VERSIONS}")
    report = report_model(result, verdict=verdict, seconds=seconds)
    if version == REPORT_VERSION:
        return report.model_dump(mode="json")
    older = report.model_copy(update={"version": version, "now": result.now.isoformat()})
    return older.model_dump(mode="json", exclude=shape.OLDER_VERSIONS[version])


_Incidents = dict[str, tuple[Incident, bool]]
"""Each incident of this scan's findings by id, and whether this scan opened it."""
_Targets = Mapping[tuple[str, int], Sequence[str]]


def _model_scan(report: ModelReport, incidents: _Incidents, targets: _Targets) -> shape.ModelScan:
    coverage = shape.Coverage(
        nodes=len(report.lineage.nodes),
        truncated=report.lineage.truncated,
        unknown=sorted(report.unknown),
        gaps=[shape.Gap(entity=g.entity, reason=g.reason) for g in report.gaps],
        unknown_reasons=_unknown_reasons(report),
        profiles=_profiles(report.profiles) if report.profiles is not None else None,
    )
    findings = [
        shape.Finding(
            **_facts(finding),
            evidence=plain_json(finding.evidence),
            incident=_incident_ref(incidents[finding.id], targets),
        )
        for finding in report.findings
    ]
    return shape.ModelScan(urn=report.urn, coverage=coverage, findings=findings)


def _unknown_reasons(report: ModelReport) -> list[shape.UnknownReason]:
    """Why each entity was not checked, one entry per check that could not decide there."""
    reasons = []
    for urn, texts in sorted(report.unknown.items()):
        for text in texts:
            # The scan words each reason "<check>: <why>" (check names hold no ": ").
            check, _, why = text.partition(": ")
            reasons.append(shape.UnknownReason(entity=urn, check=check, reason=why or text))
    return reasons


def _profiles(readiness: ProfileReadiness) -> shape.Profiles:
    return shape.Profiles(
        columns=readiness.columns,
        profiled=readiness.profiled,
        quantiles=readiness.quantiles,
        datasets=readiness.datasets,
        unprofiled=list(readiness.unprofiled),
        table_level=list(readiness.table_level),
        no_quantiles=list(readiness.no_quantiles),
    )


def _incident_ref(entry: tuple[Incident, bool], targets: _Targets) -> shape.IncidentRef:
    incident, new = entry
    return shape.IncidentRef(
        id=incident.id,
        generation=incident.generation,
        state=incident.state.value,
        new=new,
        targets=list(targets.get((incident.id, incident.generation), ())),
    )


def _summary(closing: ScanOutcome) -> shape.Summary:
    """The ``summary`` of version 3 (version 2's first five keys, and more)."""
    result = closing.result
    totals = result.summary
    changes = result.changes
    relay = result.relay
    return shape.Summary(
        models=totals.models,
        findings=totals.findings,
        unknown=totals.unknown,
        gaps=totals.gaps,
        models_with_gaps=totals.models_with_gaps,
        models_truncated=closing.truncated,
        findings_by_severity=shape.SeverityCounts(**closing.by_severity),
        findings_by_check=closing.by_check,
        incidents=shape.IncidentCounts(
            opened=len(changes.opened), updated=len(changes.updated), resolved=len(changes.resolved)
        ),
        delivery=None
        if relay is None
        else shape.Delivery(
            delivered=len(relay.delivered), retrying=len(relay.retrying), dead=len(relay.dead)
        ),
        duration_seconds=None if closing.seconds is None else round(closing.seconds, 3),
        gate=None if closing.verdict is None else _gate(closing.verdict),
    )


def _gate(verdict: GateVerdict) -> shape.Gate:
    """The gate's verdict as JSON data: the rules applied and every reason it failed."""
    rules = verdict.rules
    return shape.Gate(
        passed=verdict.passed,
        fail_on=rules.fail_on,
        fail_on_gaps=rules.fail_on_gaps,
        fail_on_acknowledged=rules.acknowledged,
        fail_on_new=rules.new_only,
        reasons=[
            shape.GateFailure(
                rule=r.rule, model=r.model, message=r.message, incidents=list(r.incidents)
            )
            for r in verdict.reasons
        ],
    )


def _facts(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "check": finding.check,
        "severity": finding.severity,
        "entity": finding.entity,
        "field": finding.field,
        "change": finding.change,
        "previous_field": finding.previous_field,
        "message": finding.message,
        "path": list(finding.path),
    }


def finding_dict(finding: Finding) -> dict[str, Any]:
    """One finding in the public JSON shape (the keys every version has)."""
    facts = shape.FindingFacts(**_facts(finding), evidence={})
    return facts.model_dump(mode="json", exclude={"evidence"})


def render_json(
    result: ScanResult,
    *,
    version: int = REPORT_VERSION,
    verdict: GateVerdict | None = None,
    seconds: float = 0.0,
) -> str:
    """The JSON report (see :func:`report_dict`), pretty-printed, ending with a newline."""
    report = report_dict(result, version=version, verdict=verdict, seconds=seconds)
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def incident_dict(incident: Incident, targets: Sequence[str] = ()) -> dict[str, Any]:
    """One incident as ``incidents list --format json`` shows it.

    ``targets``: where its notifications go, its group's targets (``slack:C0PAYMENTS``,
    ``pagerduty``...); empty while no group holds it.
    """
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
        "seen_at": _iso(incident.seen_at),
        "acknowledged_at": _iso(incident.acknowledged_at),
        "acknowledged_by": incident.acknowledged_by,
        "resolved_at": _iso(incident.resolved_at),
        "resolution": incident.resolution,
        "targets": list(targets),
    }


def render_incidents_json(
    incidents: Sequence[Incident],
    targets: Mapping[tuple[str, int], Sequence[str]] | None = None,
) -> str:
    """``incidents list --format json``."""
    targets = targets or {}
    shown = [incident_dict(i, targets.get((i.id, i.generation), ())) for i in incidents]
    return json.dumps(shown, indent=2, ensure_ascii=False) + "\n"


def render_markdown(result: ScanResult, closing: ScanOutcome | None = None) -> str:
    """A markdown report, for pull-request comments and CI job summaries.

    It ends with the gate's verdict and the closing summary (``closing``; default: no gate,
    time not measured). Its title and catalog line name no runner's path or microsecond.

    Catalog text is made safe as the GitHub sink makes it (it usually becomes a pull-request
    comment): names and urns in code spans, prose with every markdown character escaped and
    mentions in code spans (:func:`~mlcopilot.text.safe.md_text`).
    """
    closing = closing or ScanOutcome(result, None)
    when = result.now.strftime("%Y-%m-%d %H:%M UTC")
    catalog = md_code(_catalog(result.catalog), _URN_LIMIT)
    lines = [f"# mlcopilot scan — {when}", "", f"Catalog: {catalog}", ""]
    lines += [item for note in result.notes for item in (md_text(note, _TEXT_LIMIT), "")]
    for model in result.models:
        lines += _markdown_model(model)
    return "\n".join(lines + _markdown_summary(closing)) + "\n"


def _markdown_summary(closing: ScanOutcome) -> list[str]:
    head, *rest = summary_lines(closing, gate=False)
    gate, *reasons = gate_lines(closing.verdict)
    lines = ["## Summary", "", f"**{md_text(gate[0].upper() + gate[1:], _TEXT_LIMIT)}**", ""]
    if reasons:
        shown = [md_text(reason.strip().removeprefix("- "), _TEXT_LIMIT) for reason in reasons]
        lines += [f"- {reason}" for reason in shown] + [""]
    lines += [md_text(head.removeprefix("Summary: ").capitalize(), _TEXT_LIMIT), ""]
    lines += [f"- {md_text(line, _TEXT_LIMIT)}" for line in rest]
    return lines


def _catalog(label: str) -> str:
    """The catalog as the markdown report names it: a Lite file by its name, not its path."""
    if label.startswith("lite:"):
        return "lite:" + PurePath(label.removeprefix("lite:")).name
    return label


def _markdown_model(model: ModelReport) -> list[str]:
    lineage = model.lineage
    lines = [f"## {md_text(short_name(model.urn))}", "", md_code(model.urn, _URN_LIMIT), ""]
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
            f"| {f.severity.value} | {md_text(f.check, in_table=True)} "
            f"| {md_code(short_name(f.entity), in_table=True)} "
            f"| {md_code(f.field, in_table=True) if f.field else ''} "
            f"| {md_text(f.message, _TEXT_LIMIT, in_table=True)} |"
            for f in model.findings
        ]
    elif model.gaps:
        lines.append("No findings, but coverage is incomplete: see the gaps below.")
    else:
        lines.append("No findings.")
    if model.gaps:
        lines += ["", "Coverage gaps (lineage stops before a dataset; not checked):", ""]
        lines += [
            f"- {md_code(gap.entity, _URN_LIMIT)}: {md_text(gap.reason, _TEXT_LIMIT)}"
            for gap in model.gaps
        ]
    if model.unknown:
        lines += ["", "Unknown (not checked):", ""]
        lines += [
            f"- {md_code(urn, _URN_LIMIT)}: {md_text('; '.join(reasons), _TEXT_LIMIT)}"
            for urn, reasons in sorted(model.unknown.items())
        ]
    if model.profiles is not None and model.profiles.datasets:
        headline, todo = readiness_parts(model.profiles, short_name)
        lines += ["", f"Profiles (for profile drift): {md_text(headline, _TEXT_LIMIT)}."]
        if todo:
            lines += ["", "To profile, in their ingestion recipes:", ""]
            lines += [f"- {md_text(line, _TEXT_LIMIT)}" for line in todo]
    lines.append("")
    return lines


_URN_LIMIT = 2_000
"""Urns are shown whole in the markdown report (a cut one cannot be looked up)."""
_TEXT_LIMIT = 2_000
"""Messages and reasons likewise: the sinks cut theirs to fit an issue or a Slack block."""


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


def render_models_json(models: Sequence[tuple[str, str, str, str, int]]) -> str:
    """``catalog models --format json``: each model's urn, name, platform, env, upstream count."""
    shown = [
        {"urn": urn, "name": name, "platform": platform, "env": env, "upstream": upstream}
        for urn, name, platform, env, upstream in models
    ]
    return json.dumps(shown, indent=2, ensure_ascii=False) + "\n"
