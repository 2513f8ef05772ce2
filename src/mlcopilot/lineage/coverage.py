"""Coverage gaps: where a model's upstream lineage stops before it reaches a dataset.

A model with no features, no training data and no training runs, a feature with no source, a
training run with no inputs: the checks have nothing to look at there, and "no findings" would
be a false clean bill. The rule: follow lineage upstream from the model until a dataset is
reached; every entity on the way with nothing further upstream is a gap. A feature table is
not followed (it contains features, it does not feed them), and a dataset's own upstream is
not asked for (a dataset was reached).
"""

from __future__ import annotations

from collections import deque

from mlcopilot.model import CoverageGap, Edge, EntityType, Lineage, Node, Urn

NO_LINEAGE = "no upstream lineage recorded"

_MISSING_BY_TYPE = {
    EntityType.ML_MODEL: NO_LINEAGE,
    EntityType.ML_FEATURE: "feature with no source dataset recorded (mlFeatureProperties.sources)",
    EntityType.ML_PRIMARY_KEY: (
        "primary key with no source dataset recorded (mlPrimaryKeyProperties.sources)"
    ),
    EntityType.DATA_JOB: "job with no inputs recorded (dataJobInputOutput)",
    EntityType.DATA_PROCESS_INSTANCE: "training run with no inputs recorded "
    "(dataProcessInstanceInput)",
}


def coverage_gaps(lineage: Lineage) -> tuple[CoverageGap, ...]:
    """Every entity on ``lineage`` where the walk stops without having reached a dataset.

    In walk order from the model. When the walk was truncated, an entity at the cap may have
    upstream that was not walked, and its reason says so.
    """
    feeds: dict[Urn, list[Edge]] = {}
    for edge in lineage.edges:
        if edge.kind != "feature_table":
            feeds.setdefault(edge.downstream, []).append(edge)
    gaps: list[CoverageGap] = []
    seen = {lineage.root}
    queue = deque([lineage.root])
    while queue:
        urn = queue.popleft()
        node = lineage.nodes[urn]
        if node.entity_type is EntityType.DATASET:
            continue
        upstream = feeds.get(urn, ())
        if not upstream:
            gaps.append(CoverageGap(urn, _reason(node, truncated=lineage.truncated)))
        for edge in upstream:
            if edge.upstream not in seen and edge.upstream in lineage.nodes:
                seen.add(edge.upstream)
                queue.append(edge.upstream)
    return tuple(gaps)


def _reason(node: Node, *, truncated: bool) -> str:
    if not node.exists:
        reason = "not in the catalog (referenced by lineage only), so what feeds it is unknown"
    else:
        reason = _MISSING_BY_TYPE.get(node.entity_type) or (
            f"lineage stops at this {_entity_type(node.urn)}: {NO_LINEAGE}"
        )
    if truncated:
        reason += "; or its upstream lies beyond the walk's cap (the walk was truncated)"
    return reason


def _entity_type(urn: Urn) -> str:
    # urn:li:<entityType>:<key>
    parts = urn.split(":", 3)
    return parts[2] if len(parts) > 3 and parts[2] else "entity"
