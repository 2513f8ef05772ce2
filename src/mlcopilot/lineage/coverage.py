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
from collections.abc import Callable, Mapping, Sequence

from mlcopilot.model import (
    UNKNOWN_USAGE,
    ColumnUsage,
    CoverageGap,
    Edge,
    EntityType,
    Lineage,
    Node,
    ProfileReadiness,
    Urn,
)
from mlcopilot.model.profiles import has_distribution

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
    # The walk below never goes past a dataset: only the other nodes' edges are kept (a
    # large lineage is nearly all datasets).
    nodes = lineage.nodes
    feeds: dict[Urn, list[Edge]] = {}
    for edge in lineage.edges:
        if edge.kind != "feature_table":
            node = nodes.get(edge.downstream)
            if node is None or node.entity_type is not EntityType.DATASET:
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


def _count_feeding(names: Sequence[str], usage: ColumnUsage) -> int:
    """How many of ``names`` feed or may feed (``usage.feeds`` not False): counted in sets.

    Every dataset of a large lineage is counted (millions of columns), most with a usage
    that decides all of its columns at once.
    """
    if usage.whole:
        return len(names)
    if usage.complete:
        return sum(1 for c in names if c in usage.columns)
    if not usage.unused:
        return len(names)
    return sum(1 for c in names if c in usage.columns or c not in usage.unused)


def profile_readiness(lineage: Lineage, usage: Mapping[Urn, ColumnUsage]) -> ProfileReadiness:
    """What DataHub profiles of the columns feeding the model (see ``ProfileReadiness``).

    A column counts when it feeds the model or lineage cannot rule it out (``usage``); its
    dataset's schema names it, else (no schema) the newest profile does.
    """
    columns = profiled = quantiles = datasets = 0
    unprofiled: list[Urn] = []
    table_level: list[Urn] = []
    no_quantiles: list[Urn] = []
    for urn, node in lineage.nodes.items():
        if urn == lineage.root or node.entity_type is not EntityType.DATASET or not node.exists:
            continue
        datasets += 1
        used = usage.get(urn, UNKNOWN_USAGE)
        feeds = used.feeds
        if node.profile is None:  # most datasets of most estates: only the count is needed
            if node.schema is not None:
                columns += _count_feeding([f.path for f in node.schema.fields], used)
            unprofiled.append(urn)
            continue
        fields = {f.path: f for f in node.profile.fields}
        numeric = (
            {f.path for f in node.schema.fields if f.type == "NumberType"} if node.schema else set()
        )
        names = [f.path for f in node.schema.fields] if node.schema else list(fields)
        feeding = [c for c in names if feeds(c) is not False]
        columns += len(feeding)
        if not node.profile.fields:
            table_level.append(urn)
            continue
        found = [c for c in feeding if c in fields]
        profiled += len(found)
        with_quantiles = [c for c in found if has_distribution(fields[c])]
        quantiles += len(with_quantiles)
        if any(c in numeric and c not in with_quantiles for c in found):
            no_quantiles.append(urn)
    return ProfileReadiness(
        columns=columns,
        profiled=profiled,
        quantiles=quantiles,
        datasets=datasets,
        unprofiled=tuple(unprofiled),
        table_level=tuple(table_level),
        no_quantiles=tuple(no_quantiles),
    )


READINESS_SETTINGS = {
    "unprofiled": "profiling.enabled: true",
    "table_level": "profiling.profile_table_level_only: false",
    "no_quantiles": "profiling.include_field_quantiles: true",
}
"""The ingestion recipe setting each kind of dataset in a ``ProfileReadiness`` lacks."""


def readiness_parts(
    readiness: ProfileReadiness, name: Callable[[Urn], str]
) -> tuple[str, list[str]]:
    """The readiness in words: a headline, and per kind of dataset what to turn on for which.

    ``3 of 12 columns feeding it are profiled, 1 with quantiles`` and, e.g.,
    ``not profiled (profiling.enabled: true): orders, events``.
    """
    headline = (
        f"{readiness.profiled} of {readiness.columns} column"
        f"{'' if readiness.columns == 1 else 's'} feeding it "
        f"{'is' if readiness.profiled == 1 else 'are'} profiled, "
        f"{readiness.quantiles} with quantiles"
    )
    kinds = (
        ("not profiled", readiness.unprofiled, READINESS_SETTINGS["unprofiled"]),
        ("row counts only", readiness.table_level, READINESS_SETTINGS["table_level"]),
        (
            "numeric columns without quantiles",
            readiness.no_quantiles,
            READINESS_SETTINGS["no_quantiles"],
        ),
    )
    todo = [
        f"{label} ({setting}): {', '.join(name(u) for u in urns)}"
        for label, urns, setting in kinds
        if urns
    ]
    return headline, todo


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
