"""``mlcopilot impact`` reports: the terminal table, the versioned JSON and a PR comment.

The CI formats (JUnit, SARIF, GitHub annotations) are the scan's own renderers, given the
preview's new findings as a scan result (:meth:`ImpactReport.as_scan_result`).

JSON version 1 (``mlcopilot/schemas/impact-v1.json``): ``version``, ``now``, ``catalog``,
``dataset``, ``source``, ``changes`` (each ``change``, ``column``, ``new_name``,
``new_type``), ``deprecation``, ``models`` (every model downstream of the dataset, affected
ones first: ``urn``, ``name``, ``affected``, ``severity``, ``features``, ``fields``,
``findings``), ``summary``, ``gate`` and ``notes``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from importlib import resources
from typing import Any

from rich.console import Console

from mlcopilot.cli.render.terminal import (
    SEVERITY_STYLE,
    Cell,
    Column,
    name,
    plain,
    print_rows,
    safe,
)
from mlcopilot.model import CheckInfo, Severity, plain_json
from mlcopilot.report.json import finding_dict
from mlcopilot.scan.whatif import ImpactReport, ModelImpact
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import md_code, md_text
from mlcopilot.text.wording import count

IMPACT_VERSION = 1
"""The version ``impact --format json`` writes."""
SCHEMA_RESOURCE = "schemas/impact-v1.json"
"""The JSON Schema (draft 2020-12) of version 1, inside the ``mlcopilot`` package."""

_TEXT_LIMIT = 2_000
_URN_LIMIT = 2_000


def impact_schema() -> dict[str, Any]:
    """The JSON Schema of the impact report, as shipped in the package."""
    text = resources.files("mlcopilot").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def impact_dict(report: ImpactReport, fail_on: Severity | None = None) -> dict[str, Any]:
    """The preview in the public JSON shape (version 1)."""
    deprecation = report.changes.deprecation
    by_severity = {s.value: 0 for s in Severity}
    for finding in report.findings:
        by_severity[finding.severity.value] += 1
    worst = report.worst
    return {
        "version": IMPACT_VERSION,
        "now": report.now.astimezone(UTC).isoformat(timespec="seconds"),
        "catalog": report.catalog,
        "dataset": report.dataset,
        "source": report.changes.source,
        "changes": [
            {
                "change": c.kind,
                "column": c.column,
                "new_name": c.new_name,
                "new_type": c.new_type,
            }
            for c in report.changes.columns
        ],
        "deprecation": None
        if deprecation is None
        else {
            "note": deprecation.note,
            "decommission_time": deprecation.decommission_time.isoformat()
            if deprecation.decommission_time is not None
            else None,
            "replacement": deprecation.replacement,
        },
        "models": [_model_dict(m) for m in report.models],
        "summary": {
            "models": len(report.models),
            "affected": len(report.affected),
            "worst": worst.value if worst is not None else None,
            "findings": len(report.findings),
            "by_severity": by_severity,
        },
        "gate": None
        if fail_on is None
        else {
            "fail_on": fail_on.value,
            "passed": not report.fails(fail_on),
            "failing": [m.urn for m in report.fails(fail_on)],
        },
        "notes": list(report.notes),
    }


def _model_dict(model: ModelImpact) -> dict[str, Any]:
    return {
        "urn": model.urn,
        "name": short_name(model.urn),
        "affected": model.affected,
        "severity": model.severity.value if model.severity is not None else None,
        "features": list(model.features),
        "fields": list(model.fields),
        "findings": [
            {**finding_dict(f), "evidence": plain_json(dict(f.evidence))} for f in model.findings
        ],
    }


def render_impact_json(report: ImpactReport, fail_on: Severity | None = None) -> str:
    """The JSON report, indented, ending with a newline."""
    return json.dumps(impact_dict(report, fail_on), indent=2) + "\n"


def headline(report: ImpactReport) -> str:
    """One sentence: how many models read the dataset, how many the change affects."""
    dataset = short_name(report.dataset)
    if not report.models:
        return f"No model reads {dataset}: the change affects none."
    affected = len(report.affected)
    reading = f"{count(len(report.models), 'model')} downstream of {dataset}"
    if not affected:
        return f"{reading}: the change affects none of them."
    worst = report.worst.value if report.worst is not None else ""
    return f"{reading}: the change affects {affected} (worst: {worst})."


def _changes_line(report: ImpactReport) -> str:
    return "; ".join(report.changes.describe())


def render_impact_markdown(
    report: ImpactReport, checks: Sequence[CheckInfo], fail_on: Severity | None = None
) -> str:
    """The preview as a pull-request comment: a heading, the models table, what to do.

    Catalog text is made safe as the scan's markdown report makes it (code spans for names,
    escaped prose): a column named to inject markdown or a mention renders inert.
    """
    dataset = md_code(short_name(report.dataset), in_table=False)
    lines = [
        f"## mlcopilot impact preview: {dataset}",
        "",
        f"Proposed change to {md_code(report.dataset, _URN_LIMIT)}: "
        + md_text(_changes_line(report), _TEXT_LIMIT),
        "",
        f"**{md_text(headline(report), _TEXT_LIMIT)}**",
        "",
    ]
    if fail_on is not None:
        failing = report.fails(fail_on)
        verdict = (
            f"Gate (`--fail-on {fail_on.value}`): **failed** for {count(len(failing), 'model')}."
            if failing
            else f"Gate (`--fail-on {fail_on.value}`): passed."
        )
        lines += [verdict, ""]
    if report.models:
        lines += ["| Model | Severity | Features | Fields |", "|---|---|---|---|"]
        for model in report.models:
            severity = f"**{model.severity.value}**" if model.severity is not None else "—"
            features = ", ".join(md_code(short_name(u), in_table=True) for u in model.features)
            fields = ", ".join(md_code(f, in_table=True) for f in model.fields)
            lines.append(
                f"| {md_code(short_name(model.urn), in_table=True)} | {severity} "
                f"| {features or '—'} | {fields or '—'} |"
            )
        lines.append("")
    findings = report.findings
    if findings:
        lines += [f"<details><summary>{count(len(findings), 'new finding')}</summary>", ""]
        lines += [
            f"- **{f.severity.value}** {md_text(f.check)} on "
            f"{md_code(short_name(f.model))}, {md_code(short_name(f.entity))}"
            + (f" {md_code(f.field)}" if f.field else "")
            + f": {md_text(f.message, _TEXT_LIMIT)}"
            for f in findings
        ]
        lines += ["", "</details>", ""]
        lines += ["### What to do", ""]
        infos = {c.name: c for c in checks}
        for check in dict.fromkeys(f.check for f in findings):
            info = infos.get(check) or CheckInfo.generic(check)
            lines.append(f"- **{md_text(info.title)}**: {md_text(info.action, _TEXT_LIMIT)}")
        lines += [
            "- Or change the proposal so that no model loses what it reads (keep or alias the "
            "column), and run the preview again.",
            "",
        ]
    lines += [md_text(note, _TEXT_LIMIT) for note in report.notes if report.models]
    return "\n".join(lines).rstrip("\n") + "\n"


MODEL_COLUMNS = (
    Column("model", cut=16),
    Column("severity"),
    Column("features", cut=16),
    Column("fields", detail=True),
)
FINDING_COLUMNS = (
    Column("severity"),
    Column("check"),
    Column("entity", cut=12),
    Column("field", cut=8),
    Column("finding", detail=True),
)


def print_impact(report: ImpactReport, console: Console) -> None:
    """The preview as tables: the models, then each affected model's new findings."""
    console.print(
        f"[bold]Impact preview[/] of {safe(name(report.dataset))} in {safe(report.catalog)}"
    )
    console.print(f"  change: {safe(_changes_line(report))}")
    console.print()
    if report.models:
        rows = [
            [
                Cell(name(m.urn)),
                Cell(m.severity.value, SEVERITY_STYLE[m.severity])
                if m.severity is not None
                else Cell("not affected", "green"),
                Cell(", ".join(name(u) for u in m.features) or "-"),
                Cell(plain(", ".join(m.fields)) or "-"),
            ]
            for m in report.models
        ]
        print_rows(MODEL_COLUMNS, rows, console)
    for model in report.affected:
        console.print()
        console.print(f"[bold]{safe(short_name(model.urn))}[/]  [dim]{safe(model.urn)}[/]")
        print_rows(
            FINDING_COLUMNS,
            [
                [
                    Cell(f.severity.value, SEVERITY_STYLE[f.severity]),
                    Cell(plain(f.check)),
                    Cell(name(f.entity)),
                    Cell(plain(f.field or "")),
                    Cell(plain(f.message)),
                ]
                for f in model.findings
            ],
            console,
        )
