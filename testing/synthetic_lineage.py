"""Synthetic scan results with a big upstream graph, for the HTML report's tests and benchmark.

Built from the product's own types (no catalog, no checks): a model, its features, their
source datasets and layers of datasets upstream of those, each fed by two or three of the
next layer, with findings on some datasets, a long edge, coverage gaps and a truncated walk.
The same arguments give the same result.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

from mlcopilot.model import (
    CoverageGap,
    Edge,
    EdgeKind,
    EntityType,
    Finding,
    Incident,
    IncidentChanges,
    IncidentState,
    Lineage,
    ModelReport,
    Node,
    Severity,
    Urn,
)
from mlcopilot.scan import ScanResult

NOW = datetime(2026, 11, 21, 9, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,big_model,PROD)"
"""The model of :func:`big_scan` unless told another name."""
_SEVERITIES = (Severity.CRITICAL, Severity.HIGH, Severity.MEDIUM, Severity.LOW)


def _dataset(name: str) -> Urn:
    return f"urn:li:dataset:(urn:li:dataPlatform:hive,{name},PROD)"


def big_scan(
    nodes: int = 1_000, *, features: int = 40, width: int = 120, models: int = 1
) -> ScanResult:
    """A scan of ``models`` models whose lineages have ``nodes`` nodes each (model included).

    The first model is :data:`MODEL`; the others are ``big_model_2``... over the same upstream.
    """
    report = _model_report(MODEL, nodes, features, width)
    others = [
        _model_report(MODEL.replace("big_model", f"big_model_{n}"), nodes, features, width)
        for n in range(2, models + 1)
    ]
    reports = (report, *others)
    opened = tuple(
        _incident(f, NOW - timedelta(days=n)) for r in reports for n, f in enumerate(r.findings)
    )
    return ScanResult(
        now=NOW,
        catalog="lite:catalog.db",
        models=reports,
        changes=IncidentChanges(opened=opened),
        writes=(),
        dry_run=True,
        run_id=None,
    )


def _model_report(model: Urn, nodes: int, features: int, width: int) -> ModelReport:
    graph: dict[Urn, Node] = {model: Node(model, EntityType.ML_MODEL, model)}
    edges: list[Edge] = []

    def add(urn: Urn, kind: EntityType, name: str) -> None:
        graph[urn] = Node(urn, kind, name)

    def link(upstream: Urn, downstream: Urn, kind: EdgeKind) -> None:
        edges.append(Edge(downstream=downstream, upstream=upstream, kind=kind))

    feature_urns = [f"urn:li:mlFeature:(big,feature_{i:03d})" for i in range(features)]
    for urn in feature_urns:
        add(urn, EntityType.ML_FEATURE, urn)
        link(urn, model, "feature")
    layer = []
    for i, feature in enumerate(feature_urns):
        if i % 13 == 12:  # every 13th feature has no source: a coverage gap
            continue
        urn = _dataset(f"layer1.source_{i:03d}")
        add(urn, EntityType.DATASET, urn)
        link(urn, feature, "feature_source")
        layer.append(urn)
    depth = 1
    while len(graph) < nodes:
        depth += 1
        size = min(width, nodes - len(graph))
        upper = [_dataset(f"layer{depth}.table_{i:03d}") for i in range(size)]
        for urn in upper:
            add(urn, EntityType.DATASET, urn)
        for i, downstream in enumerate(layer):
            for k in range(2 + i % 2):
                link(upper[(i * 7 + k * 13 + depth) % size], downstream, "dataset_upstream")
        for i, upstream in enumerate(upper):  # none left without a downstream
            if not any(e.upstream == upstream for e in edges[-3 * len(layer) :]):
                link(upstream, layer[i % len(layer)], "dataset_upstream")
        layer = upper
    # A long edge: the model trained on a deep dataset directly.
    link(layer[0], model, "training_data")
    paths = _paths(model, edges)
    findings = tuple(
        Finding(
            check="schema_drift",
            severity=_SEVERITIES[n % 4],
            model=model,
            entity=urn,
            field=f"column_{n}",
            message=f"column `column_{n}` was removed",
            path=paths[urn],
            change="removed",
        )
        for n, urn in enumerate(u for u in list(graph)[features + 1 :: 97])
    )
    gaps = tuple(
        CoverageGap(feature_urns[i], "feature with no source dataset recorded")
        for i in range(12, features, 13)
    )
    lineage = Lineage(model, graph, tuple(edges), paths, truncated=True)
    return ModelReport(model, lineage, findings, {}, gaps=gaps)


def _paths(root: Urn, edges: list[Edge]) -> dict[Urn, tuple[Urn, ...]]:
    upstream_of: dict[Urn, list[Urn]] = {}
    for edge in edges:
        upstream_of.setdefault(edge.downstream, []).append(edge.upstream)
    paths: dict[Urn, tuple[Urn, ...]] = {root: (root,)}
    queue = deque([root])
    while queue:
        node = queue.popleft()
        for upstream in upstream_of.get(node, ()):
            if upstream not in paths:
                paths[upstream] = (*paths[node], upstream)
                queue.append(upstream)
    return paths


def _incident(finding: Finding, opened_at: datetime) -> Incident:
    return Incident(
        id=finding.id,
        generation=1,
        state=IncidentState.OPEN,
        check=finding.check,
        severity=finding.severity,
        model=finding.model,
        entity=finding.entity,
        field=finding.field,
        change=finding.change,
        previous_field=None,
        message=finding.message,
        path=finding.path,
        evidence={},
        opened_at=opened_at,
        updated_at=opened_at,
    )
