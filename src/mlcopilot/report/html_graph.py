"""The HTML report's graph, as its view model: a model's upstream lineage laid out for SVG.

Each node placed by the layered layout (:mod:`.layout`), coloured by its worst finding, marked
where coverage has a gap or the walk was truncated, with the columns findings name on it; each
edge routed as a curve, labelled by kind where no label placed before it is; for each level,
the box the script zooms to when the graph is collapsed to it. Plain frozen data and no
markup: ``templates/graph.html.j2`` writes it.

Also the page's one text rule, :func:`inert`: what no catalog text may bring onto the page
(the page's environment applies it to every value). Catalog text is kept here as it is, but
where a name is cut to fit a node (:func:`_cut` makes it inert first, to count what shows).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from mlcopilot.lineage.columns import column_usage
from mlcopilot.model import EdgeKind, EntityType, Finding, ModelReport, Node, Severity, Urn
from mlcopilot.notify.content import entity_url
from mlcopilot.report.layout import Box, Layout, Placed, Route, layered_layout
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
``unknown`` when some check lacked the metadata it needed there (and found nothing). Their
colours are ``--risk-*`` in ``static/report.css``."""

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


def inert(text: str) -> str:
    """``text`` without the characters that can hide or reorder what it shows.

    Removes control characters (Cc, but tab and line breaks become spaces), format characters
    (Cf: the bidi embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069,
    zero-width spaces and joiners, BOM), surrogates, private-use and unassigned code points.
    Whitespace is kept as it is, so an urn stays the urn (only ever less its invisible
    characters); escaping for HTML is the page's autoescape.
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


@dataclass(frozen=True, slots=True)
class Graph:
    """A model's upstream graph (``graph.html.j2``): its size, edges and nodes, and levels."""

    width: int
    height: int
    title: str
    edges: tuple[EdgeView, ...]
    nodes: tuple[NodeView, ...]
    controls: Controls | None
    """The levels it can be collapsed to; None for a graph of fewer than 3 levels."""
    open_level: int | None
    """The level a big graph opens collapsed to (the script does it); None: all shown."""
    views: dict[int, list[int]]
    """For each level N, the drawing's box (x, y, width, height) showing levels up to N."""


@dataclass(frozen=True, slots=True)
class Controls:
    """The buttons that show upstream up to a level, and what a big graph opens showing."""

    buttons: tuple[tuple[int, str], ...]
    """Each level but the last, with its words (``2 hops``); the last is ``all``."""
    last: int
    opens: str | None


@dataclass(frozen=True, slots=True)
class EdgeView:
    """One lineage edge: its route as an SVG path and its label's spot."""

    upstream: Urn
    downstream: Urn
    kind: str
    level: int
    cycle: bool
    path: str
    arrow: str
    label: str
    label_x: int
    label_y: int


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node: where it is, its colour, its words and the columns findings name on it."""

    urn: Urn
    type: str
    risk: str
    level: int
    id: str
    x: int
    y: int
    width: int
    height: int
    details: tuple[str, ...]
    """The tooltip, a line each: name, kind and risk, urn, then what else is known."""
    link: str | None
    label: str
    kind: str
    gap: str | None
    columns: tuple[ColumnView, ...]
    more: tuple[int, int] | None
    """``(y, n)``: the line saying ``+ n more`` columns, when not all are listed."""


@dataclass(frozen=True, slots=True)
class ColumnView:
    """A column a finding names, on its dataset node."""

    name: str
    shown: str
    usage: str
    usage_words: str
    checks: str
    change: str | None
    y: int


def graph_view(report: ModelReport, anchor: str, datahub_url: str | None) -> Graph:
    """The upstream graph of ``report``'s model, its ids starting ``anchor``, linked to DataHub."""
    lineage = report.lineage
    columns = _columns(report)
    boxes = {
        urn: Box(_NODE_WIDTH, _node_height(len(columns.get(urn, ())))) for urn in lineage.nodes
    }
    pairs = [(edge.upstream, edge.downstream) for edge in lineage.edges]
    layout = layered_layout(report.urn, boxes, pairs)
    worst = max((f.severity.rank for f in report.findings), default=None)
    opens = _open_level(layout, {f.entity for f in report.findings if f.severity.rank == worst})
    return Graph(
        width=layout.width,
        height=layout.height,
        title=f"Upstream lineage of {short_name(report.urn)}: "
        f"{count(len(lineage.nodes), 'node')}, model at the right",
        edges=_edges(report, layout),
        nodes=_nodes(report, layout, columns, anchor, datahub_url),
        controls=_controls(layout, opens),
        open_level=opens,
        views=_views(layout),
    )


def _views(layout: Layout) -> dict[int, list[int]]:
    """For each level N, the drawing's box (x, y, width, height) showing levels up to N."""
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


def _open_level(layout: Layout, worst: Collection[Urn] = ()) -> int | None:
    """The level a big graph opens collapsed to (the script does it); None: all shown.

    The deepest level that keeps :data:`OPEN_NODES` nodes or fewer in view, at least 1, but
    deep enough to show at least one of the nodes with the worst findings (``worst``): a big
    graph never opens looking all green with its trouble hidden further upstream.
    """
    if len(layout.nodes) <= OPEN_NODES or layout.levels < 3:
        return None
    per_level = [0] * layout.levels
    for placed in layout.nodes.values():
        per_level[placed.level] += 1
    shown, level = per_level[0], 0
    while level + 1 < layout.levels - 1 and shown + per_level[level + 1] <= OPEN_NODES:
        level += 1
        shown += per_level[level]
    trouble = min((layout.nodes[u].level for u in worst if u in layout.nodes), default=0)
    level = max(level, trouble, 1)
    return None if level >= layout.levels - 1 else level


def _controls(layout: Layout, opens: int | None) -> Controls | None:
    levels = layout.levels
    if levels < 3:
        return None
    note = (
        None
        if opens is None
        else f"({count(len(layout.nodes), 'node')}: it opens showing {count(opens, 'hop')}; "
        "every node is in the file and printed)"
    )
    buttons = tuple((level, count(level, "hop")) for level in range(1, levels - 1))
    return Controls(buttons=buttons, last=levels - 1, opens=note)


def _edges(report: ModelReport, layout: Layout) -> tuple[EdgeView, ...]:
    """Every edge along its route, labels placed so that none overlaps one before it."""
    by_pair: dict[tuple[Urn, Urn], list[EdgeKind]] = {}
    for edge in report.lineage.edges:
        by_pair.setdefault((edge.upstream, edge.downstream), []).append(edge.kind)
    labels = _Labels()
    edges = []
    for pair, route in layout.routes.items():
        for kind in by_pair.get(pair, ()):
            level = max(layout.nodes[route.upstream].level, layout.nodes[route.downstream].level)
            name, label = EDGE_KINDS.get(kind, (kind.replace("_", "-"), kind.replace("_", " ")))
            if kind == "dataset_upstream" and _column_lineage(report, route):
                label = "column lineage"
            x2, y2 = route.points[-1]
            label_x, label_y = labels.place(route.points, label)
            edges.append(
                EdgeView(
                    upstream=route.upstream,
                    downstream=route.downstream,
                    kind=name,
                    level=level,
                    cycle=route.reversed,
                    path=_curve(route.points),
                    arrow=f"M{x2} {y2}l-7-4v8z",
                    label=label,
                    label_x=label_x,
                    label_y=label_y,
                )
            )
    return tuple(edges)


class _Labels:
    """Edge labels placed so far, by a coarse grid cell: where the next may not go."""

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}

    def place(self, points: Sequence[tuple[int, int]], label: str) -> tuple[int, int]:
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
            if any(_overlap(box, other) for cell in cells for other in self.cells.get(cell, ())):
                continue
            break
        for cell in cells:
            self.cells.setdefault(cell, []).append(box)
        return x, y - 3


def _nodes(
    report: ModelReport,
    layout: Layout,
    columns: Mapping[Urn, tuple[_Column, ...]],
    anchor: str,
    datahub_url: str | None,
) -> tuple[NodeView, ...]:
    risks = _risks(report)
    gaps = _gap_reasons(report)
    return tuple(
        _node(
            f"{anchor}-n{number}",
            urn,
            node,
            layout.nodes[urn],
            risks.get(urn, "none"),
            gaps.get(urn),
            columns.get(urn, ()),
            report,
            datahub_url,
        )
        for number, (urn, node) in enumerate(report.lineage.nodes.items())
    )


def _node(
    node_id: str,
    urn: Urn,
    node: Node,
    placed: Placed,
    risk: str,
    gap: str | None,
    columns: Sequence[_Column],
    report: ModelReport,
    datahub_url: str | None,
) -> NodeView:
    word = _TYPE_WORDS.get(node.entity_type, node.entity_type.value)
    name = short_name(urn)
    kind = f"{word} · {_risk_words(risk)}"
    details = [name, kind, urn]
    if not node.exists:
        details.append("not in the catalog (referenced by lineage only)")
    if node.owners:
        details.append("owners: " + ", ".join(short_name(owner) for owner in node.owners))
    if gap:
        details.append(f"coverage gap: {gap}")
    for reason in report.unknown.get(urn, ()):
        details.append(f"unknown: {reason}")
    shown = tuple(
        ColumnView(
            name=column.name,
            shown=_cut(column.name, 17),
            usage=column.usage,
            usage_words=_USAGE_WORDS[column.usage],
            checks=" ".join(column.checks),
            change=column.change,
            y=_NODE_HEIGHT + 11 + at * _COLUMN_HEIGHT,
        )
        for at, column in enumerate(columns[:_COLUMNS_SHOWN])
    )
    more = None
    if len(columns) > _COLUMNS_SHOWN:
        more = (_NODE_HEIGHT + 11 + _COLUMNS_SHOWN * _COLUMN_HEIGHT, len(columns) - _COLUMNS_SHOWN)
    return NodeView(
        urn=urn,
        type=node.entity_type.value,
        risk=risk,
        level=placed.level,
        id=node_id,
        x=placed.x,
        y=placed.y,
        width=placed.width,
        height=placed.height,
        details=tuple(details),
        link=entity_url(datahub_url, urn),
        label=_cut(name, _LABEL_CHARS),
        kind=kind,
        gap=gap or None,
        columns=shown,
        more=more,
    )


# --- nodes: size, colour, gaps, columns


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    usage: str
    checks: tuple[str, ...]
    change: str | None


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


# --- geometry and words


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


def _cut(value: str, limit: int) -> str:
    """``value`` made inert and cut to ``limit`` characters in the middle, ``…`` there.

    Siblings share their start (``db.schema.orders_2024``, ``db.schema.orders_2025``) far more
    often than their end, so both ends stay: the full name is in the node's tooltip.
    """
    value = inert(value)
    if len(value) <= limit:
        return value
    tail = (limit - 1) // 2
    return value[: limit - 1 - tail] + "…" + value[len(value) - tail :]
