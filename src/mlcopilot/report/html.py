"""``scan --format html`` and ``mlcopilot report``: one self-contained HTML file per scan.

Per model: its upstream graph as inline SVG, laid out in Python (:mod:`.graph_layout`: the
model at the right, upstream to the left), so the picture is there without JavaScript; nodes
coloured by their worst finding, edges labelled by kind, the affected columns on dataset
nodes, coverage gaps and a truncated walk marked on the nodes. Then the findings (incident
id, state, age; why it matters, what to do, the evidence), the coverage gaps and the incident
timeline. A small inline script adds the interaction only: select a finding (click, Enter or
Space) to highlight its path, search the nodes, collapse the layers far from the model (a
graph of more than :data:`OPEN_NODES` opens so), describe a focused node.

The file fetches nothing: no ``src=``, stylesheet link, ``url()`` or ``@import``; the only
addresses are ``<a href>`` links to DataHub's UI and GitHub issues. The data the script needs
is embedded once, as ``<script type="application/json" id="report-data">`` with ``<``, ``>``
and ``&`` written as JSON escapes, so no catalog text can close the script. Every piece of
catalog text goes through :func:`inert` (control, bidi override and isolate, zero-width and
other invisible characters removed) and :func:`html.escape`. The same scan renders to the
same bytes: nothing depends on the time of rendering, the machine or hash order.

The DOM is a contract the tests read (classes and ``data-`` attributes): ``tests/render_html``
without a browser, ``tests/browser`` in Chromium. Edge kinds are written as :data:`EDGE_KINDS`
names them.
"""

from __future__ import annotations

import html
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import PurePath
from typing import Any

from mlcopilot.lineage.columns import column_usage
from mlcopilot.lineage.coverage import readiness_parts
from mlcopilot.model import (
    CheckInfo,
    EdgeKind,
    EntityType,
    Finding,
    Incident,
    IncidentState,
    ModelReport,
    Node,
    Severity,
    Urn,
    plain_json,
)
from mlcopilot.notify.content import entity_url
from mlcopilot.protocols import Catalog, Check, StateStore
from mlcopilot.report.layout import Box, Layout, Placed, Route, layered_layout
from mlcopilot.report.summary import ScanOutcome, summary_lines
from mlcopilot.scan import ScanOptions, ScanResult, scan
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

EDGE_KINDS: Mapping[EdgeKind, tuple[str, str]] = {
    "feature": ("feature", "feature"),
    "feature_source": ("feature-source", "feature source"),
    "feature_table": ("feature-table", "feature table"),
    "primary_key": ("primary-key", "primary key"),
    "training_data": ("training-data", "training data"),
    "training_job": ("job", "training job"),
    "job_input": ("job-input", "job input"),
    "dataset_upstream": ("lineage", "lineage"),
    "produced_by": ("produced-by", "produced by"),
}
"""Each lineage edge kind as the page writes it: its ``data-kind`` and its label. A
dataset-to-dataset edge backed by column-level lineage is labelled ``column lineage``."""

RISKS = ("critical", "high", "medium", "low", "none", "unknown")
"""A node's ``data-risk``: its worst finding's severity, ``none`` when checked and clean,
``unknown`` when some check lacked the metadata it needed there (and found nothing)."""

_RISK_COLOURS = {
    "critical": "#e57373",
    "high": "#ffb74d",
    "medium": "#fff176",
    "low": "#81d4fa",
    "none": "#c8e6c9",
    "unknown": "#e0e0e0",
}
"""Light fills with dark text: legible on screen and on paper, in colour or grey."""

OPEN_NODES = 150
"""A graph with more nodes than this opens collapsed to the levels nearest the model."""
_NODE_WIDTH = 220
_NODE_HEIGHT = 40
_COLUMN_HEIGHT = 15
_COLUMNS_SHOWN = 6
"""Columns listed on a dataset node; more are counted (``+ 3 more``) and all are in the table."""
_LABEL_CHARS = 28
"""What fits on a node at 12 px; the full name is in the node's tooltip and detail line."""

_TYPE_WORDS = {
    EntityType.ML_MODEL: "model",
    EntityType.ML_MODEL_GROUP: "model group",
    EntityType.ML_FEATURE: "feature",
    EntityType.ML_FEATURE_TABLE: "feature table",
    EntityType.ML_PRIMARY_KEY: "primary key",
    EntityType.DATASET: "dataset",
    EntityType.DATA_JOB: "job",
    EntityType.DATA_PROCESS_INSTANCE: "training run",
    EntityType.OTHER: "entity",
}

_USAGE_WORDS = {"feeds": "feeds model", "unused": "not used", "unknown": "use unknown"}


@dataclass(frozen=True, slots=True)
class ReportLinks:
    """Where the page may link to: DataHub's UI (``datahub.ui_url``) and known GitHub issues."""

    datahub_url: str | None = None
    issues: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """An incident occurrence, ``(id, generation)``, to the URL of its group's GitHub issue."""


def report_links(store: StateStore, datahub_url: str | None) -> ReportLinks:
    """The links the store knows: each incident occurrence's GitHub issue, with DataHub's UI.

    Every state counts (``StateStore.incident_refs``): an acknowledged or resolved incident
    keeps the link to the issue it was reported in. Only ``https://`` addresses are kept.
    """
    issues = {
        occurrence: ref.url
        for occurrence, ref in sorted(store.incident_refs("github").items())
        if ref.url and ref.url.startswith("https://")
    }
    return ReportLinks(datahub_url=datahub_url, issues=issues)


def report_page(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    options: ScanOptions,
    *,
    datahub_url: str | None,
) -> tuple[ScanResult, str]:
    """The scan and the page ``mlcopilot report`` writes (and the demo, by this same code).

    ``options`` should be a dry run (a report records nothing). The page adds the store's
    incident history of the scanned models and every known GitHub issue link.
    """
    result = scan(catalog, store, checks, options)
    scanned = {report.urn for report in result.models}
    history = [i for i in store.incidents(include_resolved=True) if i.model in scanned]
    links = report_links(store, datahub_url)
    infos = [check.info for check in checks]
    page = render_html(result, history=history, links=links, checks=infos, title="mlcopilot report")
    return result, page


def inert(text: str) -> str:
    """``text`` without the characters that can hide or reorder what it shows.

    Removes control characters (Cc, but tab and line breaks become spaces), format characters
    (Cf: the bidi embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069,
    zero-width spaces and joiners, BOM), surrogates, private-use and unassigned code points.
    Whitespace is kept as it is, so an urn stays the urn (only ever less its invisible
    characters); escaping for HTML is the caller's :func:`html.escape`.
    """
    if text.isascii() and text.isprintable():
        return text  # nearly every urn and name: nothing to remove
    return _inert(text)


@lru_cache(maxsize=65_536)
def _inert(text: str) -> str:
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "\t\n\r" or category in ("Zl", "Zp"):
            kept.append(" ")
        elif category not in ("Cc", "Cf", "Cs", "Co", "Cn"):
            kept.append(char)
    return "".join(kept)


def _text(value: str) -> str:
    """Catalog text for an element's content or an attribute's value."""
    return html.escape(inert(value), quote=True)


def _shown(value: object) -> str:
    """An evidence value: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _text_block(value: str) -> str:
    """Catalog text kept on its lines (for ``<pre>``), otherwise as :func:`_text`."""
    return "\n".join(_text(line) for line in value.split("\n"))


def _cut(value: str, limit: int) -> str:
    value = inert(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: ``<``, ``>``, ``&`` escaped.

    No ``</script>`` or ``<!--`` can appear in it, whatever the strings hold; ``JSON.parse``
    reads the escapes back as the characters.
    """
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(
    result: ScanResult,
    *,
    closing: ScanOutcome | None = None,
    history: Sequence[Incident] | None = None,
    links: ReportLinks | None = None,
    checks: Sequence[CheckInfo] = (),
    title: str = "mlcopilot scan",
) -> str:
    """The report page of ``result``.

    Args:
        result: The scan.
        closing: Its summary (the gate's verdict); default: no gate.
        history: The incidents whose events make the timeline (``mlcopilot report``: the
            store's); default: the incidents this scan opened, saw again or resolved.
        links: DataHub's UI and GitHub issues, where known.
        checks: What the checks say of their findings (why it matters, what to do), shown
            with each finding of theirs; a check not given gets only its evidence shown.
        title: The page's heading.
    """
    # Without the time taken: the same scan renders to the same bytes.
    closing = ScanOutcome(result, closing.verdict if closing is not None else None)
    links = links or ReportLinks()
    known = _incidents(result, history)
    timeline = list(history) if history is not None else list(known.values())
    infos = {info.name: info for info in checks}
    models = [
        _Model(i, report, result, known, links, infos) for i, report in enumerate(result.models)
    ]
    when = _when(result.now)
    data = {
        "version": 1,
        "now": result.now.isoformat(timespec="seconds"),
        "edge_kinds": {kind: names[0] for kind, names in EDGE_KINDS.items()},
        "models": [model.data() for model in models],
    }
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_text(title)} — {when}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{_text(title)} — {when}</h1>",
        f'<p class="catalog">Catalog: <code>{_text(_catalog(result.catalog))}</code></p>',
        *(f'<p class="note">{_text(note)}</p>' for note in result.notes),
        _summary(closing),
        _legend(),
        '<p class="search"><label>Find nodes <input type="search" class="node-search" '
        'placeholder="name or urn" aria-describedby="search-count" autocomplete="off">'
        '</label> <output id="search-count" class="search-count" aria-live="polite">'
        "</output></p>",
    ]
    if len(models) > 1:
        parts.append('<nav aria-label="Models"><ul>')
        parts += [f'<li><a href="#{m.anchor}">{_text(m.name)}</a></li>' for m in models]
        parts.append("</ul></nav>")
    parts.append("</header>")
    parts.append("<main>")
    for model in models:
        events = [i for i in timeline if i.model == model.report.urn]
        parts += model.section(_timeline(events, result, links))
    if not models:
        parts.append("<p>No model was scanned.</p>")
    parts += [
        "</main>",
        f'<script type="application/json" id="report-data">{script_json(data)}</script>',
        f"<script>{_SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


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


def _summary(closing: ScanOutcome) -> str:
    lines = summary_lines(closing, gate=closing.verdict is not None)
    head, *rest = lines
    items = "".join(f"<li>{_text(line.strip())}</li>" for line in rest)
    return f'<div class="summary"><p>{_text(head)}</p><ul>{items}</ul></div>'


def _legend() -> str:
    words = {
        "none": "no finding",
        "unknown": "not checked (metadata missing)",
    }
    items = "".join(
        f'<li data-risk="{risk}"><span class="swatch"></span>{words.get(risk, risk)}</li>'
        for risk in RISKS
    )
    return (
        f'<ul class="legend" aria-label="Node colours">{items}'
        '<li class="gap-legend"><span class="gap-badge">!</span>coverage gap or truncated '
        "walk</li></ul>"
    )


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    usage: str
    checks: tuple[str, ...]
    change: str | None


class _Model:
    """One model's section: its graph laid out, findings, gaps."""

    def __init__(
        self,
        number: int,
        report: ModelReport,
        result: ScanResult,
        known: Mapping[str, Incident],
        links: ReportLinks,
        infos: Mapping[str, CheckInfo],
    ) -> None:
        self.number = number
        self.infos = infos
        self.report = report
        self.result = result
        self.known = known
        self.links = links
        self.anchor = f"model-{number}"
        self.opened = {incident.id for incident in result.changes.opened}
        self.name = short_name(report.urn)
        lineage = report.lineage
        self.risk = _risks(report)
        self.gaps = _gap_reasons(report)
        self.columns = _columns(report)
        boxes = {
            urn: Box(_NODE_WIDTH, _node_height(len(self.columns.get(urn, ()))))
            for urn in lineage.nodes
        }
        pairs = [(edge.upstream, edge.downstream) for edge in lineage.edges]
        self.layout: Layout = layered_layout(report.urn, boxes, pairs)
        self.labels: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
        """Edge labels placed so far, by a coarse grid cell: where the next may not go."""

    def data(self) -> dict[str, Any]:
        """What the script needs: each finding's path, and the view of each collapse level."""
        return {
            "urn": inert(self.report.urn),
            "findings": [
                {"incident": f.id, "entity": inert(f.entity), "path": [inert(u) for u in f.path]}
                for f in self.report.findings
            ],
            "views": {str(level): box for level, box in self._views().items()},
        }

    def _views(self) -> dict[int, list[int]]:
        """For each level N, the drawing's box (x, y, width, height) showing levels up to N."""
        layout = self.layout
        views: dict[int, list[int]] = {}
        margin = 16
        for level in range(layout.levels):
            shown = [p for p in layout.nodes.values() if p.level <= level]
            points = [
                point
                for route in layout.routes.values()
                if max(layout.nodes[route.upstream].level, layout.nodes[route.downstream].level)
                <= level
                for point in route.points
            ]
            left = min(p.x for p in shown) - margin
            top = min([*(p.y for p in shown), *(y for _, y in points)]) - margin
            bottom = max([*(p.y + p.height for p in shown), *(y for _, y in points)]) + margin
            views[level] = [left, top, layout.width - left, bottom - top]
        return views

    def section(self, timeline: str) -> list[str]:
        """The model's ``<section>``: heading, coverage, graph, findings, gaps, timeline."""
        report = self.report
        lineage = report.lineage
        link = _link(entity_url(self.links.datahub_url, report.urn), report.urn)
        coverage = f"{count(len(lineage.nodes), 'node')}, {count(len(lineage.edges), 'edge')}"
        if lineage.truncated:
            coverage += "; truncated: a hop or node cap stopped the walk (marked ! on the graph)"
        if report.gaps:
            coverage += f"; {count(len(report.gaps), 'coverage gap')} (marked !)"
        if report.unknown:
            coverage += f"; {count(len(report.unknown), 'entity')} lacked metadata a check needed"
        out = [
            f'<section class="model" data-urn="{_text(report.urn)}" id="{self.anchor}" '
            f'aria-labelledby="{self.anchor}-title">',
            f'<h2 id="{self.anchor}-title">{_text(self.name)}</h2>',
            f'<p class="urn">{link}</p>',
            f'<p class="coverage">Lineage: {_text(coverage)}.</p>',
            *self._controls(),
            f'<div class="graph" role="group" aria-label="Upstream lineage of {_text(self.name)}">',
            *self._svg(),
            "</div>",
            f'<p class="node-info" id="{self.anchor}-info" aria-live="polite">'
            "Focus or click a node for its details (Enter opens it in DataHub when linked); select "
            "a finding to highlight its path.</p>",
            *self._findings(),
            *self._profiles(),
            *self._gap_list(),
            f'<h3 id="{self.anchor}-timeline">Incident timeline</h3>',
            timeline,
            "</section>",
        ]
        return out

    def open_level(self) -> int | None:
        """The level a big graph opens collapsed to (the script does it); None: all shown.

        The deepest level that keeps :data:`OPEN_NODES` nodes or fewer in view, at least 1.
        """
        layout = self.layout
        if len(layout.nodes) <= OPEN_NODES or layout.levels < 3:
            return None
        per_level = [0] * layout.levels
        for placed in layout.nodes.values():
            per_level[placed.level] += 1
        shown, level = per_level[0], 0
        while level + 1 < layout.levels - 1 and shown + per_level[level + 1] <= OPEN_NODES:
            level += 1
            shown += per_level[level]
        return max(level, 1)

    def _opens_at(self) -> str:
        level = self.open_level()
        return "" if level is None else f' data-open-level="{level}"'

    def _controls(self) -> list[str]:
        levels = self.layout.levels
        if levels < 3:
            return []
        buttons = [
            f'<button type="button" class="collapse" data-level="{level}" aria-pressed="false">'
            f"{count(level, 'hop')}</button>"
            for level in range(1, levels - 1)
        ]
        buttons.append(
            f'<button type="button" class="collapse" data-level="{levels - 1}" '
            'aria-pressed="true">all</button>'
        )
        opens = self.open_level()
        note = (
            ""
            if opens is None
            else f' <span class="opens">({count(len(self.layout.nodes), "node")}: it opens '
            f"showing {count(opens, 'hop')}; every node is in the file and printed)</span>"
        )
        return [
            '<p class="controls" role="group" aria-label="Levels shown">Show upstream up to: '
            + " ".join(buttons)
            + note
            + "</p>"
        ]

    def _svg(self) -> list[str]:
        layout = self.layout
        lineage = self.report.lineage
        out = [
            f'<svg class="lineage" width="{layout.width}" '
            f'height="{layout.height}" viewBox="0 0 {layout.width} {layout.height}" '
            f'aria-labelledby="{self.anchor}-svg-title"{self._opens_at()}>',
            f'<title id="{self.anchor}-svg-title">Upstream lineage of {_text(self.name)}: '
            f"{count(len(lineage.nodes), 'node')}, model at the right</title>",
            '<g class="edges">',
        ]
        by_pair: dict[tuple[Urn, Urn], list[EdgeKind]] = {}
        for edge in lineage.edges:
            by_pair.setdefault((edge.upstream, edge.downstream), []).append(edge.kind)
        for pair, route in layout.routes.items():
            for at, kind in enumerate(by_pair.get(pair, ())):
                out.append(self._edge(route, kind, at))
        out.append("</g>")
        out.append('<g class="nodes">')
        for number, (urn, node) in enumerate(lineage.nodes.items()):
            out.append(self._node(number, urn, node, layout.nodes[urn]))
        out.append("</g>")
        out.append("</svg>")
        return out

    def _edge(self, route: Route, kind: EdgeKind, at: int) -> str:
        layout = self.layout
        level = max(layout.nodes[route.upstream].level, layout.nodes[route.downstream].level)
        name, label = EDGE_KINDS.get(kind, (kind.replace("_", "-"), kind.replace("_", " ")))
        if kind == "dataset_upstream" and _column_lineage(self.report, route):
            label = "column lineage"
        points = route.points
        x2, y2 = points[-1]
        label_x, label_y = self._label_spot(points, label)
        cycle = ' data-cycle="true"' if route.reversed else ""
        return (
            f'<g class="edge" data-from="{_text(route.upstream)}" '
            f'data-to="{_text(route.downstream)}" data-kind="{_text(name)}" '
            f'data-level="{level}"{cycle}>'
            f'<path d="{_curve(points)}"/><path class="arrow" d="M{x2} {y2}l-7-4v8z"/>'
            f'<text x="{label_x}" y="{label_y}">'
            f"{_text(label)}</text></g>"
        )

    def _label_spot(self, points: Sequence[tuple[int, int]], label: str) -> tuple[int, int]:
        """Where on its edge a label overlaps no label placed before (else the middle)."""
        width, height = len(label) * 6 + 6, 12
        first, last = (points[0], points[1]), (points[-2], points[-1])
        spots = [_on_step(*first, 0.5)] if len(points) == 2 else []
        spots += [_on_step(*first, t) for t in (0.3, 0.7, 0.15)]
        spots += [_on_step(*last, t) for t in (0.7, 0.3, 0.85, 0.5)]
        for x, y in [*spots, spots[0]]:
            box = (x - width // 2, y - height, x + width // 2, y)
            cells = [
                (cx, cy)
                for cx in range(box[0] // 64, box[2] // 64 + 1)
                for cy in range(box[1] // 16, box[3] // 16 + 1)
            ]
            if any(_overlap(box, other) for cell in cells for other in self.labels.get(cell, ())):
                continue
            break
        for cell in cells:
            self.labels.setdefault(cell, []).append(box)
        return x, y - 3

    def _node(self, number: int, urn: Urn, node: Node, placed: Placed) -> str:
        risk = self.risk.get(urn, "none")
        kind = node.entity_type.value
        word = _TYPE_WORDS.get(node.entity_type, kind)
        name = short_name(urn)
        gap = self.gaps.get(urn)
        details = [name, f"{word} · {_risk_words(risk)}", urn]
        if not node.exists:
            details.append("not in the catalog (referenced by lineage only)")
        if node.owners:
            details.append("owners: " + ", ".join(short_name(owner) for owner in node.owners))
        if gap:
            details.append(f"coverage gap: {gap}")
        for reason in self.report.unknown.get(urn, ()):
            details.append(f"unknown: {reason}")
        link = entity_url(self.links.datahub_url, urn)
        attrs = (
            f'class="node" data-urn="{_text(urn)}" data-type="{_text(kind)}" '
            f'data-risk="{risk}" data-level="{placed.level}" tabindex="0" '
            f'id="{self.anchor}-n{number}" transform="translate({placed.x} {placed.y})"'
        )
        if gap:
            attrs += f' data-gap="{_text(gap)}"'
        out = [
            f"<g {attrs}>",
            f"<title>{chr(10).join(_text(line) for line in details)}</title>",
            f'<rect class="box" width="{placed.width}" height="{placed.height}" rx="5"/>',
            _linked(
                link, f'<text class="label" x="10" y="17">{_text(_cut(name, _LABEL_CHARS))}</text>'
            ),
            f'<text class="kind" x="10" y="32">{_text(f"{word} · {_risk_words(risk)}")}</text>',
        ]
        if gap:
            out.append(
                f'<g class="gap-marker"><rect x="{placed.width - 20}" y="4" width="16" '
                f'height="16" rx="8"/><text x="{placed.width - 12}" y="16" '
                'text-anchor="middle">!</text></g>'
            )
        columns = self.columns.get(urn, ())
        if columns:
            out.append('<g class="columns">')
            for at, column in enumerate(columns[:_COLUMNS_SHOWN]):
                y = _NODE_HEIGHT + 11 + at * _COLUMN_HEIGHT
                change = f' data-change="{_text(column.change)}"' if column.change else ""
                shown = _cut(column.name, 17)
                out.append(
                    f'<text class="column" x="10" y="{y}" data-column="{_text(column.name)}" '
                    f'data-usage="{column.usage}" data-checks="{_text(" ".join(column.checks))}"'
                    f"{change}>{_text(shown)} · "
                    f"{_USAGE_WORDS[column.usage]}</text>"
                )
            if len(columns) > _COLUMNS_SHOWN:
                y = _NODE_HEIGHT + 11 + _COLUMNS_SHOWN * _COLUMN_HEIGHT
                more = len(columns) - _COLUMNS_SHOWN
                out.append(f'<text class="more" x="10" y="{y}">+ {more} more</text>')
            out.append("</g>")
        out.append("</g>")
        return "".join(out)

    def _findings(self) -> list[str]:
        report = self.report
        out = [
            f'<h3 id="{self.anchor}-findings">Findings</h3>',
            f'<table class="findings" aria-labelledby="{self.anchor}-findings">',
            "<thead><tr><th>Incident</th><th>Severity</th><th>Check</th><th>Entity</th>"
            "<th>Field</th><th>State</th><th>Age</th><th>Finding</th></tr></thead>",
            "<tbody>",
        ]
        for finding in report.findings:
            out.append(self._finding_row(finding))
        if not report.findings:
            out.append('<tr class="empty"><td colspan="8">No findings.</td></tr>')
        out += ["</tbody>", "</table>"]
        return out

    def _finding_row(self, finding: Finding) -> str:
        incident = self.known.get(finding.id)
        state = incident.state.value if incident is not None else "open"
        new = finding.id in self.opened
        if new:
            state = "would open" if self.result.dry_run else "new"
        age = _age(self.result.now - incident.opened_at) if incident is not None else "—"
        # The occurrence shown: a finding that reopens an incident is not its old issue's.
        issue = self.links.issues.get((finding.id, incident.generation)) if incident else None
        incident_cell = f"<code>{_text(finding.id)}</code>{_issue_link(issue)}"
        entity = _link(
            entity_url(self.links.datahub_url, finding.entity), short_name(finding.entity)
        )
        field_cell = f"<code>{_text(finding.field)}</code>" if finding.field else ""
        if finding.previous_field:
            field_cell += f" (was <code>{_text(finding.previous_field)}</code>)"
        path = " ".join(inert(urn) for urn in finding.path)
        return (
            f'<tr class="finding" data-incident="{_text(finding.id)}" '
            f'data-entity="{_text(finding.entity)}" data-severity="{finding.severity.value}" '
            f'data-path="{html.escape(path, quote=True)}" tabindex="0" aria-selected="false">'
            f"<td>{incident_cell}</td>"
            f'<td class="severity" data-risk="{finding.severity.value}">'
            f"{finding.severity.value}</td>"
            f"<td>{_text(finding.check)}</td>"
            f'<td title="{_text(finding.entity)}">{entity}</td>'
            f"<td>{field_cell}</td>"
            f'<td class="state">{_text(state)}</td>'
            f'<td class="age">{age}</td>'
            f"<td>{_text(finding.message)}{self._details(finding)}</td></tr>"
        )

    def _details(self, finding: Finding) -> str:
        """Why it matters, what to do and the evidence, folded under the message."""
        info = self.infos.get(finding.check)
        items = []
        if info is not None:
            items.append(f"<dt>Why it matters</dt><dd>{_text(info.why)}</dd>")
            items.append(f"<dt>What to do</dt><dd>{_text(info.action)}</dd>")
        evidence = plain_json(finding.evidence)
        if isinstance(evidence, Mapping) and evidence:
            compared = _side_by_side(evidence)
            if compared:
                items.append(f"<dt>Baseline and now</dt><dd>{compared}</dd>")
            lines = "\n".join(f"{key}: {_shown(value)}" for key, value in sorted(evidence.items()))
            items.append(f"<dt>Evidence</dt><dd><pre>{_text_block(lines)}</pre></dd>")
        if not items:
            return ""
        return f"<details><summary>details</summary><dl>{''.join(items)}</dl></details>"

    def _profiles(self) -> list[str]:
        """What DataHub profiles of the data feeding the model, and what to turn on."""
        readiness = self.report.profiles
        if readiness is None or not readiness.datasets:
            return []
        headline, todo = readiness_parts(readiness, short_name)
        out = [
            f'<h3 id="{self.anchor}-profiles">Profiles</h3>',
            f'<p class="profiles">{_text(headline)}.</p>',
        ]
        if todo:
            out.append('<ul class="profiles">')
            out += [f"<li>{_text(line)}</li>" for line in todo]
            out.append("</ul>")
        return out

    def _gap_list(self) -> list[str]:
        report = self.report
        if not report.gaps and not report.lineage.truncated:
            return []
        out = [f'<h3 id="{self.anchor}-gaps">Coverage gaps</h3>', '<ul class="gaps">']
        out += [
            f'<li data-entity="{_text(gap.entity)}"><code>{_text(short_name(gap.entity))}</code>: '
            f"{_text(gap.reason)}</li>"
            for gap in report.gaps
        ]
        if report.lineage.truncated:
            out.append(
                '<li class="truncated">The walk was truncated: a hop or node cap was reached, '
                "so upstream of the outermost nodes may be missing (--max-hops, --max-nodes).</li>"
            )
        out.append("</ul>")
        return out


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


def _side_by_side(evidence: Mapping[str, Any]) -> str:
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
    chart = ""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        rows += [
            (key.replace("_", " "), before.get(key), after.get(key))
            for key in _STATISTICS
            if before.get(key) is not None or after.get(key) is not None
        ]
        chart = _quantile_chart(_points(before.get("quantiles")), _points(after.get("quantiles")))
    if not rows and not chart:
        return ""
    cells = "".join(
        f"<tr><th>{_text(label)}</th><td>{_text(_stat(b))}</td><td>{_text(_stat(a))}</td></tr>"
        for label, b, a in rows
    )
    table = (
        '<table class="compare"><thead><tr><th></th><th>baseline</th><th>now</th></tr></thead>'
        f"<tbody>{cells}</tbody></table>"
    )
    return f'<div class="compare">{table}{chart}</div>'


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


def _quantile_chart(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> str:
    """Both quantile functions in one small SVG: quantile across, value up."""
    if len(before) < 2 and len(after) < 2:
        return ""
    values = [x for _, x in (*before, *after)]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    width, height, pad = 260, 130, 28

    def at(p: float, x: float) -> tuple[str, str]:
        across = pad + p * (width - 2 * pad)
        up = height - pad - (x - low) / span * (height - 2 * pad)
        return f"{across:.1f}", f"{up:.1f}"

    def line(points: list[tuple[float, float]], css: str) -> str:
        if not points:
            return ""
        spots = [at(p, x) for p, x in points]
        path = " ".join(f"{cx},{cy}" for cx, cy in spots)
        dots = "".join(f'<circle cx="{cx}" cy="{cy}" r="2.5"/>' for cx, cy in spots)
        return f'<g class="{css}"><polyline points="{path}"/>{dots}</g>'

    label = (
        f"Quantiles, baseline (dashed) and now (solid): values from {_stat(low)} to {_stat(high)}"
    )
    return (
        f'<svg class="quantiles" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_text(label)}">'
        f'<line class="axis" x1="{pad}" y1="{height - pad}" '
        f'x2="{width - pad}" y2="{height - pad}"/>'
        f'<text x="{pad}" y="{height - 8}">p 0</text>'
        f'<text x="{width - pad}" y="{height - 8}" text-anchor="end">p 1</text>'
        f'<text x="2" y="{pad - 8}">{_text(_stat(high))}</text>'
        f'<text x="2" y="{height - pad - 4}">{_text(_stat(low))}</text>'
        f"{line(before, 'baseline')}{line(after, 'current')}</svg>"
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


def _node_height(columns: int) -> int:
    if not columns:
        return _NODE_HEIGHT
    shown = min(columns, _COLUMNS_SHOWN) + (1 if columns > _COLUMNS_SHOWN else 0)
    return _NODE_HEIGHT + shown * _COLUMN_HEIGHT + 4


def _risk_words(risk: str) -> str:
    return {"none": "no finding", "unknown": "not checked"}.get(risk, risk)


def _risks(report: ModelReport) -> dict[Urn, str]:
    """Each node's worst finding, else ``unknown`` where a check could not tell."""
    worst: dict[Urn, Severity] = {}
    for finding in report.findings:
        seen = worst.get(finding.entity)
        if seen is None or finding.severity.rank > seen.rank:
            worst[finding.entity] = finding.severity
    risks = {urn: severity.value for urn, severity in worst.items()}
    for urn, node in report.lineage.nodes.items():
        if urn not in risks and (urn in report.unknown or not node.exists):
            risks[urn] = "unknown"
    return risks


def _gap_reasons(report: ModelReport) -> dict[Urn, str]:
    """Coverage gaps by node; with a truncated walk, the outermost nodes too."""
    reasons: dict[Urn, str] = {}
    lineage = report.lineage
    if lineage.truncated and lineage.paths:
        deepest = max(len(path) for path in lineage.paths.values())
        for urn, path in lineage.paths.items():
            if len(path) == deepest and urn != lineage.root:
                reasons[urn] = "truncated: the walk stopped here (a hop or node cap)"
    for gap in report.gaps:
        reasons[gap.entity] = gap.reason
    return reasons


def _columns(report: ModelReport) -> dict[Urn, tuple[_Column, ...]]:
    """The columns findings name on each dataset node, and whether each feeds the model."""
    lineage = report.lineage
    named: dict[Urn, dict[str, list[Finding]]] = {}
    for finding in report.findings:
        node = lineage.nodes.get(finding.entity)
        if finding.field and node is not None and node.entity_type is EntityType.DATASET:
            named.setdefault(finding.entity, {}).setdefault(finding.field, []).append(finding)
    if not named:
        return {}
    usage = column_usage(lineage)
    columns: dict[Urn, tuple[_Column, ...]] = {}
    for urn, fields in named.items():
        shown = []
        for name, findings in sorted(fields.items()):
            said = [_said_usage(f.evidence) for f in findings]
            known = [u for u in said if u is not None]
            if known:
                # The check judged with the baseline schema the report does not carry.
                verdict = "feeds" if "feeds" in known else known[0]
            else:
                feeds = usage[urn].feeds(name) if urn in usage else None
                verdict = {True: "feeds", False: "unused", None: "unknown"}[feeds]
            checks = tuple(sorted({f.check for f in findings}))
            change = next((f.change for f in findings if f.change), None)
            shown.append(_Column(name, verdict, checks, change))
        columns[urn] = tuple(shown)
    return columns


def _said_usage(evidence: Mapping[str, object]) -> str | None:
    """What a finding's evidence says of its column's use (``feeds_model``), if anything."""
    for key in ("feeds_model", "column_feeds_model"):
        value = evidence.get(key)
        if value in ("yes", True):
            return "feeds"
        if value in ("no", False):
            return "unused"
        if value == "unknown":
            return "unknown"
    return None


def _column_lineage(report: ModelReport, route: Route) -> bool:
    node = report.lineage.nodes.get(route.downstream)
    return node is not None and any(e.upstream == route.upstream for e in node.column_lineage)


def _on_step(start: tuple[int, int], end: tuple[int, int], t: float) -> tuple[int, int]:
    """The point at ``t`` (0 to 1) along one :func:`_curve` step from ``start`` to ``end``."""
    (x1, y1), (x2, y2) = start, end
    # Control points at half the width, level with each end: x moves as a symmetric ease,
    # y as the smoothstep 3t² - 2t³.
    bend = (x2 - x1) // 2
    u = 1 - t
    x = u**3 * x1 + 3 * u * u * t * (x1 + bend) + 3 * u * t * t * (x2 - bend) + t**3 * x2
    y = y1 + (y2 - y1) * (3 * t * t - 2 * t**3)
    return round(x), round(y)


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _curve(points: Sequence[tuple[int, int]]) -> str:
    """Through ``points`` left to right, each step a curve leaving and arriving level."""
    (x, y), *rest = points
    d = [f"M{x} {y}"]
    for nx, ny in rest:
        if ny == y:
            d.append(f"H{nx}")
        else:
            bend = (nx - x) // 2
            d.append(f"C{x + bend} {y} {nx - bend} {ny} {nx} {ny}")
        x, y = nx, ny
    return "".join(d)


def _linked(url: str | None, label: str) -> str:
    """An SVG label as a link to ``url``; out of the tab order (Enter on the node follows it)."""
    if not url:
        return label
    return f'<a href="{_text(url)}" tabindex="-1" target="_blank" rel="noreferrer">{label}</a>'


def _link(url: str | None, label: str) -> str:
    text = f"<code>{_text(label)}</code>"
    if not url:
        return text
    return f'<a href="{_text(url)}" rel="noreferrer">{text}</a>'


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


def _issue_link(url: str | None) -> str:
    """`` issue``, linked to ``url``; nothing without one."""
    return f' <a href="{_text(url)}" rel="noreferrer">issue</a>' if url else ""


def _timeline(incidents: Iterable[Incident], result: ScanResult, links: ReportLinks) -> str:
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
    if not events:
        return '<ol class="timeline"><li class="empty">No incidents.</li></ol>'
    opened = {i.id for i in result.changes.opened}
    resolved = {i.id for i in result.changes.resolved}
    out = ['<ol class="timeline">']
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
        note = ""
        if result.dry_run and this_scan:
            note = ' <span class="dry">(this dry run: not recorded)</span>'
        generation = f" (occurrence {incident.generation})" if incident.generation > 1 else ""
        out.append(
            f'<li data-incident="{_text(incident_id)}" data-event="{event}" '
            f'data-severity="{incident.severity.value}">'
            f'<time datetime="{at.isoformat(timespec="seconds")}">{_when(at)}</time> '
            f'<span class="event">{event}</span> <code>{_text(incident_id)}</code>'
            f"{generation}: {_text(what)}{note}"
            f"{_issue_link(links.issues.get((incident_id, incident.generation)))}</li>"
        )
    out.append("</ol>")
    return "\n".join(out)


_CSS = (
    ":root {\n"
    + "".join(f"  --risk-{risk}: {colour};\n" for risk, colour in _RISK_COLOURS.items())
    + """
  --ink: #1b1f24;
  --muted: #57606a;
  --line: #8c959f;
  --path: #c2185b;
  --match: #1565c0;
  color-scheme: light;
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 100rem; padding: 1rem 1.5rem 3rem; color: var(--ink);
  background: #fff; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 1.4rem; margin: .2rem 0 .4rem; }
h2 { font-size: 1.2rem; margin: 0 0 .2rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
code { font: 12px/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.urn code, .gaps code { overflow-wrap: anywhere; }
td:first-child code, td.age { white-space: nowrap; }
a { color: #0b57d0; }
section.model { border-top: 2px solid #d0d7de; margin-top: 1.5rem; padding-top: 1rem; }
.summary p { margin: .3rem 0 0; font-weight: 600; }
.summary ul { margin: .2rem 0 .5rem; padding-left: 1.2rem; }
.legend { display: flex; flex-wrap: wrap; gap: .4rem 1rem; list-style: none; padding: 0;
  margin: .5rem 0; }
.legend li { display: flex; align-items: center; gap: .35rem; }
.swatch { display: inline-block; width: 1rem; height: .8rem; border: 1px solid var(--ink);
  border-radius: 2px; }
.legend li[data-risk] .swatch { background: var(--swatch); }
[data-risk="critical"] { --swatch: var(--risk-critical); }
[data-risk="high"] { --swatch: var(--risk-high); }
[data-risk="medium"] { --swatch: var(--risk-medium); }
[data-risk="low"] { --swatch: var(--risk-low); }
[data-risk="none"] { --swatch: var(--risk-none); }
[data-risk="unknown"] { --swatch: var(--risk-unknown); }
.gap-badge { display: inline-block; width: 1rem; height: 1rem; border-radius: 50%;
  background: #fff; border: 2px solid #6a1b9a; color: #6a1b9a; font-weight: 700;
  font-size: .7rem; text-align: center; line-height: .8rem; }
.search input { font: inherit; padding: .2rem .4rem; min-width: 18rem; }
.controls button { font: inherit; padding: .1rem .5rem; margin: 0 .1rem; cursor: pointer; }
.opens { color: var(--muted); }
.controls button[aria-pressed="true"] { font-weight: 700; outline: 2px solid var(--ink); }
.graph { overflow: auto; max-height: 80vh; border: 1px solid #d0d7de; border-radius: 6px;
  background: #fff; }
svg.lineage { display: block; font-family: system-ui, -apple-system, "Segoe UI", Roboto,
  sans-serif; }
.node .box { fill: var(--swatch); stroke: #3d444d; stroke-width: 1.2; }
.node[data-risk="unknown"] .box { stroke-dasharray: 4 3; }
.node .label { font-size: 12px; font-weight: 600; fill: var(--ink); }
.node .kind { font-size: 10.5px; fill: #30363d; }
.node .column, .node .more { font-size: 10.5px; fill: var(--ink);
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.node .column[data-usage="feeds"] { font-weight: 700; }
.node .column[data-change="removed"] { text-decoration: line-through; }
.node .gap-marker rect { fill: #fff; stroke: #6a1b9a; stroke-width: 2; }
.node .gap-marker text { font-size: 12px; font-weight: 700; fill: #6a1b9a; }
.node[data-gap] .box { stroke: #6a1b9a; stroke-width: 2; }
.node { cursor: pointer; outline: none; }
.node:focus-visible .box, .node:focus .box { stroke: var(--match); stroke-width: 3; }
.edge path { fill: none; stroke: var(--line); stroke-width: 1.4; }
.edge path.arrow { fill: var(--line); stroke: none; }
.edge[data-cycle] path { stroke-dasharray: 5 3; }
.edge text { font-size: 10px; fill: var(--muted); paint-order: stroke; stroke: #fff;
  stroke-width: 3px; text-anchor: middle; }
.node.match .box { stroke: var(--match); stroke-width: 3.5; }
.has-selection .node:not(.on-path), .has-selection .edge:not(.on-path) { opacity: .35; }
.node.on-path .box { stroke: var(--path); stroke-width: 3.5; }
.edge.on-path path { stroke: var(--path); stroke-width: 3; }
.edge.on-path path.arrow { fill: var(--path); stroke: none; }
.edge.on-path text { fill: var(--path); font-weight: 700; }
.collapsed { display: none; }
.node-info { color: var(--muted); margin: .4rem 0 0; min-height: 1.4em; overflow-wrap: anywhere; }
table.findings { border-collapse: collapse; width: 100%; }
table.findings th, table.findings td { border-bottom: 1px solid #d0d7de; padding: .3rem .45rem;
  text-align: left; vertical-align: top; }
table.findings th { background: #f6f8fa; }
tr.finding { cursor: pointer; }
tr.finding:hover { background: #f6f8fa; }
tr.finding:focus { outline: 3px solid var(--match); outline-offset: -3px; }
tr.finding.selected { background: #fce4ec; box-shadow: inset 4px 0 0 var(--path); }
td.severity { font-weight: 700; background: var(--swatch); }
.timeline { padding-left: 1.4rem; }
.timeline li { margin: .15rem 0; }
.timeline time { font-variant-numeric: tabular-nums; color: var(--muted); }
.timeline .event { font-weight: 700; }
.timeline li[data-event="resolved"] .event { color: #1b5e20; }
.timeline li[data-event="opened"] .event { color: #b71c1c; }
.dry { color: var(--muted); font-style: italic; }
.gaps li { margin: .15rem 0; }
table.findings details { margin-top: .2rem; color: var(--muted); }
table.findings summary { cursor: pointer; }
table.findings dl { margin: .2rem 0 0; }
table.findings dt { font-weight: 600; color: var(--ink); }
table.findings dd { margin: 0 0 .3rem; }
table.findings pre { margin: 0; font-size: 11px; white-space: pre-wrap; overflow-wrap: anywhere; }
div.compare { display: flex; flex-wrap: wrap; gap: .6rem; align-items: flex-start; }
table.compare { border-collapse: collapse; font-size: 11px; }
table.compare th, table.compare td { padding: 0 .4rem; text-align: right; }
table.compare tbody th { text-align: left; font-weight: 600; }
svg.quantiles { width: 260px; height: 130px; font-size: 9px; fill: var(--muted); }
svg.quantiles .axis { stroke: var(--muted); }
svg.quantiles polyline { fill: none; stroke-width: 1.5; }
svg.quantiles .baseline polyline { stroke: #757575; stroke-dasharray: 4 3; }
svg.quantiles .baseline circle { fill: #757575; }
svg.quantiles .current polyline { stroke: #b71c1c; }
svg.quantiles .current circle { fill: #b71c1c; }
.profiles li { margin: .15rem 0; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  .search, .controls, .node-info { display: none; }
  .graph { overflow: visible; max-height: none; border: none; }
  svg.lineage { max-width: 100%; height: auto; }
  .collapsed { display: inline !important; }
  .has-selection .node, .has-selection .edge { opacity: 1 !important; }
  tr.finding { break-inside: avoid; }
  a { color: inherit; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""
).strip()
"""The page's style: the risk colours are defined once, as ``--risk-*`` properties."""


_SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var sections = document.querySelectorAll("section.model");
  var allNodes = Array.prototype.slice.call(document.querySelectorAll("g.node"));

  Array.prototype.forEach.call(sections, function (section, number) {
    var model = data.models[number];
    var svg = section.querySelector("svg.lineage");
    var info = section.querySelector(".node-info");
    var nodes = new Map();
    var edges = new Map();
    section.querySelectorAll("g.node").forEach(function (node) {
      nodes.set(node.getAttribute("data-urn"), node);
    });
    section.querySelectorAll("g.edge").forEach(function (edge) {
      var key = edge.getAttribute("data-from") + "\\u0000" + edge.getAttribute("data-to");
      if (!edges.has(key)) { edges.set(key, []); }
      edges.get(key).push(edge);
    });
    var full = svg.getAttribute("viewBox");
    var level = null;

    function clear() {
      section.querySelectorAll(".on-path").forEach(function (el) {
        el.classList.remove("on-path");
      });
      section.querySelectorAll("tr.finding.selected").forEach(function (row) {
        row.classList.remove("selected");
        row.setAttribute("aria-selected", "false");
      });
      section.classList.remove("has-selection");
    }

    function select(row, index) {
      var was = row.classList.contains("selected");
      clear();
      if (was) { return; }
      var path = model.findings[index].path;
      row.classList.add("selected");
      row.setAttribute("aria-selected", "true");
      section.classList.add("has-selection");
      path.forEach(function (urn, at) {
        var node = nodes.get(urn);
        if (node) { node.classList.add("on-path"); }
        if (at + 1 < path.length) {
          (edges.get(path[at + 1] + "\\u0000" + urn) || []).forEach(function (edge) {
            edge.classList.add("on-path");
          });
        }
      });
      var hidden = path.some(function (urn) {
        var node = nodes.get(urn);
        return node && node.classList.contains("collapsed");
      });
      if (hidden) { collapse(null); }
      var entity = nodes.get(model.findings[index].entity);
      if (entity && entity.scrollIntoView) {
        entity.scrollIntoView({block: "nearest", inline: "nearest"});
      }
    }

    section.querySelectorAll("tr.finding").forEach(function (row, index) {
      row.addEventListener("click", function (event) {
        if (event.target.closest("a, details")) { return; }
        select(row, index);
      });
      row.addEventListener("keydown", function (event) {
        if (event.target !== row) { return; }  // a link's or the details' own keys
        if (event.key === "Enter" || event.key === " " || event.key === "Spacebar") {
          event.preventDefault();
          select(row, index);
        } else if (event.key === "Escape") {
          clear();
        }
      });
    });

    function describe(node) {
      var title = node.querySelector("title");
      info.textContent = title ? title.textContent.split("\\n").join(" · ") : "";
    }
    nodes.forEach(function (node) {
      node.addEventListener("focus", function () { describe(node); });
      node.addEventListener("click", function () { describe(node); });
      node.addEventListener("keydown", function (event) {
        var link = node.querySelector("a[href]");
        if (event.key === "Enter" && link) {
          window.open(link.getAttribute("href"), "_blank", "noreferrer");
        }
      });
    });

    function collapse(upTo) {
      level = upTo;
      var deepest = null;
      section.querySelectorAll("button.collapse").forEach(function (button) {
        var n = Number(button.getAttribute("data-level"));
        deepest = deepest === null ? n : Math.max(deepest, n);
      });
      var shown = upTo === null ? deepest : upTo;
      section.querySelectorAll("g.node, g.edge").forEach(function (el) {
        var hide = upTo !== null && Number(el.getAttribute("data-level")) > upTo;
        el.classList.toggle("collapsed", hide);
      });
      section.querySelectorAll("button.collapse").forEach(function (button) {
        var n = Number(button.getAttribute("data-level"));
        button.setAttribute("aria-pressed", String(n === shown));
      });
      var view = upTo === null ? null : model.views[String(upTo)];
      if (view) {
        svg.setAttribute("viewBox", view.join(" "));
        svg.setAttribute("width", String(view[2]));
        svg.setAttribute("height", String(view[3]));
      } else {
        var box = full.split(" ");
        svg.setAttribute("viewBox", full);
        svg.setAttribute("width", box[2]);
        svg.setAttribute("height", box[3]);
      }
    }
    section.querySelectorAll("button.collapse").forEach(function (button) {
      button.addEventListener("click", function () {
        var n = Number(button.getAttribute("data-level"));
        var deepest = Number(button.parentNode.lastElementChild.getAttribute("data-level"));
        collapse(n >= deepest ? null : n);
      });
    });
    section.printRestore = function () { var at = level; return function () { collapse(at); }; };
    section.collapseTo = collapse;
    var opens = svg.getAttribute("data-open-level");
    if (opens !== null) { collapse(Number(opens)); }
    // The model is at the right: bring it into view in the scrolled graph.
    var root = nodes.get(model.urn);
    var frame = svg.parentNode;
    var scrolls = frame.scrollWidth > frame.clientWidth || frame.scrollHeight > frame.clientHeight;
    if (root && scrolls) {
      var at = root.getBoundingClientRect();
      var box = frame.getBoundingClientRect();
      frame.scrollLeft += at.left - box.left - (box.width - at.width) / 2;
      frame.scrollTop += at.top - box.top - (box.height - at.height) / 2;
    }
  });

  var search = document.querySelector("input.node-search");
  var found = document.getElementById("search-count");
  function mark() {
    var query = search.value.trim().toLowerCase();
    var hits = 0;
    allNodes.forEach(function (node) {
      var label = node.querySelector(".label");
      var text = (node.getAttribute("data-urn") + " " + (label ? label.textContent : ""));
      var hit = query !== "" && text.toLowerCase().indexOf(query) >= 0;
      node.classList.toggle("match", hit);
      if (hit) { hits += 1; }
    });
    found.textContent = query === "" ? "" : hits + (hits === 1 ? " node" : " nodes");
  }
  if (search) {
    search.addEventListener("input", mark);
    search.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") { return; }
      var first = document.querySelector("g.node.match");
      if (!first) { return; }
      if (first.classList.contains("collapsed")) {
        first.closest("section.model").collapseTo(null);
      }
      first.focus();
    });
  }

  var restore = [];
  window.addEventListener("beforeprint", function () {
    restore = Array.prototype.map.call(sections, function (section) {
      var back = section.printRestore();
      section.collapseTo(null);
      return back;
    });
    document.querySelectorAll("details:not([open])").forEach(function (details) {
      details.open = true;
      restore.push(function () { details.open = false; });
    });
  });
  window.addEventListener("afterprint", function () {
    restore.forEach(function (back) { back(); });
    restore = [];
  });
})();
""".strip()
"""The interaction: select a finding, describe a node, collapse levels, search, print all."""
