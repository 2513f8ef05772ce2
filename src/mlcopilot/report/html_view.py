"""The HTML report's view model: a scan's result shaped into what the templates show.

Plain frozen data and no markup: per model, its graph (:mod:`.html_graph`), the findings with
their state, age and details (baseline against now, with a quantile chart, for evidence that
compares profiles), the profiles, the coverage gaps and the incident timeline, each as the
words and numbers the page writes. The templates (``templates/*.html.j2``) only arrange them;
:mod:`.html` renders them.

Catalog text is kept here as the catalog wrote it: the page's environment makes every string
it writes inert (:func:`.html_graph.inert`) and escapes it, so nothing here has to remember
to. Only the JSON the script reads (``script_data``) is made inert here, as it bypasses the
templates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import Any

from mlcopilot.lineage.coverage import readiness_parts
from mlcopilot.model import (
    CheckInfo,
    Finding,
    Incident,
    IncidentState,
    ModelReport,
    Urn,
    plain_json,
)
from mlcopilot.notify.content import entity_url
from mlcopilot.report.html_graph import EDGE_KINDS, RISKS, Graph, graph_view, inert
from mlcopilot.report.summary import ScanOutcome, summary_lines
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

_LEGEND_WORDS = {"none": "no finding", "unknown": "not checked (metadata missing)"}


@dataclass(frozen=True, slots=True)
class ReportLinks:
    """Where the page may link to: DataHub's UI (``datahub.ui_url``) and known GitHub issues."""

    datahub_url: str | None = None
    issues: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """An incident occurrence, ``(id, generation)``, to the URL of its group's GitHub issue."""


# --- the view: what the templates read


@dataclass(frozen=True, slots=True)
class Page:
    """The whole page (``page.html.j2``)."""

    title: str
    when: str
    catalog: str
    notes: tuple[str, ...]
    summary: str
    summary_lines: tuple[str, ...]
    legend: tuple[tuple[str, str], ...]
    """Each risk and the words the legend gives it."""
    models: tuple[ModelView, ...]
    script_data: dict[str, Any]
    """What the script reads (embedded as JSON): each finding's path, each level's view."""
    summarised: tuple[ModelView, ...] = ()
    """Models past the page's size budget: in the index and a closing list, without a section."""
    budget: str = ""
    """The page's size budget, in words, when models had to be summarised."""

    def within(self, detailed: int, budget: str) -> Page:
        """This page with its first ``detailed`` models in full and the rest summarised."""
        data = dict(self.script_data)
        data["models"] = self.script_data["models"][:detailed]
        return replace(
            self,
            models=self.models[:detailed],
            summarised=self.models[detailed:],
            script_data=data,
            budget=budget,
        )


@dataclass(frozen=True, slots=True)
class ModelView:
    """One model's ``<section>`` (``model.html.j2``)."""

    anchor: str
    urn: Urn
    name: str
    link: str | None
    coverage: str
    graph: Graph
    findings: tuple[FindingRow, ...]
    profiles: Profiles | None
    gaps: tuple[GapItem, ...]
    truncated: bool
    timeline: tuple[Event, ...]
    script_data: dict[str, Any]
    worst: str
    """The severity of its worst finding (``none`` without any): the index shows it."""
    tally: str
    """Its findings by severity (``2 high, 1 medium``; ``no findings``)."""
    rank: int
    """1 + its worst finding's severity rank (0 without any): the index is ordered by it."""


@dataclass(frozen=True, slots=True)
class FindingRow:
    """One row of the findings table (``findings.html.j2``)."""

    incident: str
    entity: Urn
    entity_name: str
    entity_link: str | None
    severity: str
    path: str
    issue: str | None
    check: str
    field: str | None
    previous_field: str | None
    state: str
    age: str
    message: str
    details: Details | None


@dataclass(frozen=True, slots=True)
class Details:
    """Folded under a finding's message: why it matters, what to do, the evidence."""

    why: str | None
    action: str | None
    compared: Compared | None
    evidence: tuple[str, ...]
    """``key: value`` lines; empty without evidence."""


@dataclass(frozen=True, slots=True)
class Compared:
    """Baseline against now: a table of statistics, and the quantiles as a chart."""

    rows: tuple[tuple[str, str, str], ...]
    chart: Chart | None


@dataclass(frozen=True, slots=True)
class Chart:
    """Both quantile functions in one small SVG: quantile across, value up."""

    width: int
    height: int
    pad: int
    label: str
    high: str
    low: str
    lines: tuple[ChartLine, ...]


@dataclass(frozen=True, slots=True)
class ChartLine:
    """One quantile function: ``baseline`` or ``current``, its points as SVG coordinates."""

    css: str
    points: tuple[tuple[str, str], ...]

    @property
    def polyline(self) -> str:
        """The points as a ``<polyline points>`` value."""
        return " ".join(f"{x},{y}" for x, y in self.points)


@dataclass(frozen=True, slots=True)
class Profiles:
    """What DataHub profiles of the data feeding the model, and what to turn on."""

    headline: str
    todo: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GapItem:
    """A coverage gap, listed under the graph."""

    entity: Urn
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Event:
    """One incident event of the timeline (``timeline.html.j2``)."""

    incident: str
    event: str
    severity: str
    at: str
    when: str
    generation: int
    what: str
    dry: bool
    """This dry run's own event: not recorded."""
    issue: str | None


# --- building it


def page_view(
    result: ScanResult,
    *,
    closing: ScanOutcome,
    history: Sequence[Incident] | None,
    links: ReportLinks,
    checks: Sequence[CheckInfo],
    title: str,
) -> Page:
    """The page of ``result`` (the arguments are :func:`.html.render_html`'s)."""
    known = _incidents(result, history)
    timeline = list(history) if history is not None else list(known.values())
    infos = {info.name: info for info in checks}
    models = tuple(
        _model_view(
            number,
            report,
            result,
            known,
            links,
            infos,
            [i for i in timeline if i.model == report.urn],
        )
        for number, report in enumerate(result.models)
    )
    # Worst first: the models with trouble lead the index and the page, whatever their names.
    models = tuple(sorted(models, key=lambda m: (-m.rank, -len(m.findings), m.name, m.anchor)))
    head, *rest = summary_lines(closing, gate=closing.verdict is not None)
    return Page(
        title=title,
        when=_when(result.now),
        catalog=_catalog(result.catalog),
        notes=tuple(result.notes),
        summary=head,
        summary_lines=tuple(line.strip() for line in rest),
        legend=tuple((risk, _LEGEND_WORDS.get(risk, risk)) for risk in RISKS),
        models=models,
        script_data={
            "version": 1,
            "now": result.now.isoformat(timespec="seconds"),
            "edge_kinds": {kind: names[0] for kind, names in EDGE_KINDS.items()},
            "models": [model.script_data for model in models],
        },
    )


def _incidents(result: ScanResult, history: Sequence[Incident] | None) -> dict[str, Incident]:
    """Each incident by id: the scan's own (this scan's state of it) over the history's."""
    known = {i.id: i for i in history or ()}
    for incident in (*result.changes.resolved, *result.changes.updated, *result.changes.opened):
        known[incident.id] = incident
    return known


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _catalog(label: str) -> str:
    """A Lite file by its name, not its path (the page is attached and shared)."""
    if label.startswith("lite:"):
        return "lite:" + PurePath(label.removeprefix("lite:")).name
    return label


def _model_view(
    number: int,
    report: ModelReport,
    result: ScanResult,
    known: Mapping[str, Incident],
    links: ReportLinks,
    infos: Mapping[str, CheckInfo],
    incidents: Sequence[Incident],
) -> ModelView:
    """One model's section: its graph, findings, profiles, gaps and timeline."""
    anchor = f"model-{number}"
    lineage = report.lineage
    graph = graph_view(report, anchor, links.datahub_url)
    coverage = f"{count(len(lineage.nodes), 'node')}, {count(len(lineage.edges), 'edge')}"
    if lineage.truncated:
        coverage += "; truncated: a hop or node cap stopped the walk (marked ! on the graph)"
    if report.gaps:
        coverage += f"; {count(len(report.gaps), 'coverage gap')} (marked !)"
    if report.unknown:
        coverage += f"; {count(len(report.unknown), 'entity')} lacked metadata a check needed"
    opened = {incident.id for incident in result.changes.opened}
    # Worst first, whatever the graph shows (the table and the script's data in one order).
    findings = sorted(report.findings, key=lambda f: (-f.severity.rank, f.entity, f.field or ""))
    by_severity: dict[str, int] = {}
    for f in findings:
        by_severity[f.severity.value] = by_severity.get(f.severity.value, 0) + 1
    return ModelView(
        anchor=anchor,
        urn=report.urn,
        name=short_name(report.urn),
        link=entity_url(links.datahub_url, report.urn),
        coverage=coverage,
        graph=graph,
        findings=tuple(
            _finding_row(f, result, known.get(f.id), f.id in opened, links, infos) for f in findings
        ),
        profiles=_profiles(report),
        gaps=tuple(GapItem(g.entity, short_name(g.entity), g.reason) for g in report.gaps),
        truncated=lineage.truncated,
        timeline=_timeline(incidents, result, links),
        script_data={
            "urn": inert(report.urn),
            "findings": [
                {"incident": f.id, "entity": inert(f.entity), "path": [inert(u) for u in f.path]}
                for f in findings
            ],
            "views": {str(level): box for level, box in graph.views.items()},
        },
        worst=findings[0].severity.value if findings else "none",
        tally=", ".join(f"{n} {s}" for s, n in by_severity.items()) or "no findings",
        rank=findings[0].severity.rank + 1 if findings else 0,
    )


def _finding_row(
    finding: Finding,
    result: ScanResult,
    incident: Incident | None,
    new: bool,
    links: ReportLinks,
    infos: Mapping[str, CheckInfo],
) -> FindingRow:
    state = incident.state.value if incident is not None else "open"
    if new:
        state = "would open" if result.dry_run else "new"
    # The occurrence shown: a finding that reopens an incident is not its old issue's.
    issue = links.issues.get((finding.id, incident.generation)) if incident else None
    return FindingRow(
        incident=finding.id,
        entity=finding.entity,
        entity_name=short_name(finding.entity),
        entity_link=entity_url(links.datahub_url, finding.entity),
        severity=finding.severity.value,
        path=" ".join(finding.path),
        issue=issue,
        check=finding.check,
        field=finding.field or None,
        previous_field=finding.previous_field or None,
        state=state,
        age=_age(result.now - incident.opened_at) if incident is not None else "—",
        message=finding.message,
        details=_details(finding, infos.get(finding.check)),
    )


def _details(finding: Finding, info: CheckInfo | None) -> Details | None:
    """Why it matters, what to do and the evidence, folded under the message."""
    evidence = plain_json(finding.evidence)
    compared = None
    lines: tuple[str, ...] = ()
    if isinstance(evidence, Mapping) and evidence:
        compared = _side_by_side(evidence)
        text = "\n".join(f"{key}: {_shown(value)}" for key, value in sorted(evidence.items()))
        lines = tuple(text.split("\n"))  # a value's own line breaks kept too
    if info is None and not lines:
        return None
    return Details(
        why=info.why if info is not None else None,
        action=info.action if info is not None else None,
        compared=compared,
        evidence=lines,
    )


def _shown(value: object) -> str:
    """An evidence value: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _profiles(report: ModelReport) -> Profiles | None:
    readiness = report.profiles
    if readiness is None or not readiness.datasets:
        return None
    headline, todo = readiness_parts(readiness, short_name)
    return Profiles(headline=headline, todo=tuple(todo))


def _timeline(
    incidents: Iterable[Incident], result: ScanResult, links: ReportLinks
) -> tuple[Event, ...]:
    """Every incident's events, oldest first: opened, acknowledged (by whom), resolved (why).

    Each event links its occurrence's GitHub issue, where one is known.
    """
    events: list[tuple[datetime, str, int, str, Incident]] = []
    for incident in incidents:
        events.append((incident.opened_at, incident.id, 0, "opened", incident))
        if incident.acknowledged_at is not None:
            at = incident.acknowledged_at
            events.append((at, incident.id, 1, "acknowledged", incident))
        if incident.state is IncidentState.RESOLVED and incident.resolved_at is not None:
            events.append((incident.resolved_at, incident.id, 2, "resolved", incident))
    opened = {i.id for i in result.changes.opened}
    resolved = {i.id for i in result.changes.resolved}
    shown = []
    for at, incident_id, _, event, incident in sorted(events, key=lambda e: e[:3]):
        what = f"{incident.check} at {short_name(incident.entity)}"
        if incident.field:
            what += f" ({incident.field})"
        if event == "acknowledged" and incident.acknowledged_by:
            what += f", by {incident.acknowledged_by}"
        if event == "resolved" and incident.resolution:
            what += f": {incident.resolution}"
        this_scan = (event == "opened" and incident_id in opened) or (
            event == "resolved" and incident_id in resolved
        )
        shown.append(
            Event(
                incident=incident_id,
                event=event,
                severity=incident.severity.value,
                at=at.isoformat(timespec="seconds"),
                when=_when(at),
                generation=incident.generation,
                what=what,
                dry=result.dry_run and this_scan,
                issue=links.issues.get((incident_id, incident.generation)),
            )
        )
    return tuple(shown)


def _age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds < 60:
        return "new"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h"
    return f"{rest // 60} min"


# --- profiles compared


_COMPARED = (
    ("row count", "baseline_rows", "current_rows"),
    ("taken", "baseline_profile_at", "current_profile_at"),
)


_STATISTICS = (
    "null_proportion",
    "unique_count",
    "unique_proportion",
    "mean",
    "stdev",
    "median",
    "min",
    "max",
)


def _side_by_side(evidence: Mapping[str, Any]) -> Compared | None:
    """A baseline-versus-now table (and quantile chart) for evidence that compares profiles.

    Read from the evidence alone (``baseline`` and ``current`` statistics, their rows and
    times), so any check recording it that way gets the same view.
    """
    before, after = evidence.get("baseline"), evidence.get("current")
    rows = [
        (label, evidence.get(b), evidence.get(a))
        for label, b, a in _COMPARED
        if evidence.get(b) is not None or evidence.get(a) is not None
    ]
    chart = None
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        rows += [
            (key.replace("_", " "), before.get(key), after.get(key))
            for key in _STATISTICS
            if before.get(key) is not None or after.get(key) is not None
        ]
        chart = _quantile_chart(_points(before.get("quantiles")), _points(after.get("quantiles")))
    if not rows and chart is None:
        return None
    return Compared(rows=tuple((label, _stat(b), _stat(a)) for label, b, a in rows), chart=chart)


def _points(raw: object) -> list[tuple[float, float]]:
    """``[[quantile, value], ...]`` as numbers, by quantile; unparsable ones left out."""
    points: list[tuple[float, float]] = []
    for pair in raw if isinstance(raw, list) else []:
        if isinstance(pair, list) and len(pair) == 2:
            try:
                p, x = float(pair[0]), float(pair[1])
            except (TypeError, ValueError):
                continue
            if 0.0 <= p <= 1.0 and abs(x) < 1e300:
                points.append((p, x))
    return sorted(points)


def _quantile_chart(
    before: list[tuple[float, float]], after: list[tuple[float, float]]
) -> Chart | None:
    """Both quantile functions, scaled to one small chart (none with fewer than 2 points)."""
    if len(before) < 2 and len(after) < 2:
        return None
    values = [x for _, x in (*before, *after)]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    width, height, pad = 260, 130, 28

    def at(p: float, x: float) -> tuple[str, str]:
        across = pad + p * (width - 2 * pad)
        up = height - pad - (x - low) / span * (height - 2 * pad)
        return f"{across:.1f}", f"{up:.1f}"

    lines = tuple(
        ChartLine(css, tuple(at(p, x) for p, x in points))
        for points, css in ((before, "baseline"), (after, "current"))
        if points
    )
    return Chart(
        width=width,
        height=height,
        pad=pad,
        label="Quantiles, baseline (dashed) and now (solid): "
        f"values from {_stat(low)} to {_stat(high)}",
        high=_stat(high),
        low=_stat(low),
        lines=lines,
    )


def _stat(value: object) -> str:
    """A statistic for the comparison table: numbers short, text as DataHub wrote it."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
