"""Which columns of each upstream node actually feed the model.

DataHub records column-level lineage between datasets (``fineGrainedLineages``) but not from a
dataset column to an ML feature. So usage is propagated from the model outwards, one edge at a
time, and every edge contributes a *rule* for the upstream node's columns:

- training data: the model consumes the whole dataset, every column feeds;
- a feature (or primary key) whose source columns are recorded: exactly those columns feed;
- a feature without recorded source columns: a column named like the feature (in the current
  schema or the baseline) feeds, the rest is unknown;
- a dataset with column-level lineage from its upstream: an upstream column feeds if it maps to
  a column that feeds, is unused if it maps only to unused columns, and a column that column-level
  lineage does not mention at all does not flow downstream;
- anything else (jobs, tables without column-level lineage): unknown.

A column feeds when any rule says so, is unused only when every rule says so, and is unknown
otherwise. Unknown is reported as such ("medium" impact), never guessed healthy.

Columns are judged by name, and the names judged include the *baseline*'s (the schema as of
training time): a removed or renamed column is in no current schema, yet it is exactly what
schema drift asks about, under the name the model was trained on. Each rule then gives it its
default for columns it does not mention (unused where column-level lineage or recorded source
columns leave it out, feeding where the data is consumed whole).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mlcopilot.model import ColumnUsage, Edge, EntityType, Lineage, Node, Schema, Urn

_FEATURE_TYPES = {EntityType.ML_FEATURE, EntityType.ML_PRIMARY_KEY}


@dataclass(frozen=True, slots=True)
class _Rule:
    """What one downstream edge says about the upstream node's columns."""

    feeding: frozenset[str] = frozenset()
    unknown: frozenset[str] = frozenset()
    unused: frozenset[str] = frozenset()
    default: bool | None = None
    """The verdict for a column the rule does not name."""

    def feeds(self, column: str) -> bool | None:
        if column in self.feeding:
            return True
        if column in self.unknown:
            return None
        if column in self.unused:
            return False
        return self.default


_WHOLE = _Rule(default=True)
_UNKNOWN = _Rule()
_NONE: frozenset[str] = frozenset()
_WHOLE_USAGE = ColumnUsage(whole=True)
_NO_USAGE = ColumnUsage()
# A large lineage has a usage per node: the common ones are shared, and so is the empty set
# (216 bytes each, two per usage), instead of one of each per node.


def _frozen(items: Iterable[str]) -> frozenset[str]:
    found = frozenset(items)
    return found if found else _NONE


def column_usage(
    lineage: Lineage, baselines: Mapping[Urn, Schema] | None = None
) -> dict[Urn, ColumnUsage]:
    """Return, for every node of ``lineage`` except the model, which of its columns feed it.

    Args:
        lineage: The model's upstream lineage.
        baselines: Per dataset, the schema the model was trained on. Its columns are judged
            too, and a feature's name is matched against them.
    """
    trained_on = baselines or {}
    rules: dict[Urn, list[_Rule]] = {}
    usage: dict[Urn, ColumnUsage] = {lineage.root: _WHOLE_USAGE}
    upstream_edges: dict[Urn, list[Edge]] = {}
    for edge in lineage.edges:
        upstream_edges.setdefault(edge.downstream, []).append(edge)
    mentioned = _columns_mentioned(lineage, trained_on)
    pending_downstreams = _count_downstreams(lineage)
    queue = deque([lineage.root])
    done: set[Urn] = set()
    # Nodes that have rules, nearest the model first: where a cycle is broken (a heap, so a
    # graph with many cycles does not rescan every node for each of them).
    waiting: list[tuple[int, Urn]] = []
    while True:
        while queue:
            urn = queue.popleft()
            if urn in done:
                continue
            done.add(urn)
            if urn != lineage.root:
                usage[urn] = _combine(rules.get(urn, []), mentioned.get(urn, set()))
            for edge in upstream_edges.get(urn, []):
                if edge.upstream not in rules:
                    rules[edge.upstream] = []
                    depth = len(lineage.paths.get(edge.upstream, ()))
                    heapq.heappush(waiting, (depth, edge.upstream))
                rules[edge.upstream].append(
                    _rule_for(
                        edge, lineage.nodes.get(edge.downstream), usage[urn], lineage, trained_on
                    )
                )
                pending_downstreams[edge.upstream] -= 1
                if pending_downstreams[edge.upstream] == 0:
                    queue.append(edge.upstream)
        # On a cycle no node ever sees all its downstreams settle: settle the one nearest the
        # model with what it has so far, and carry on from there.
        while waiting and waiting[0][1] in done:
            heapq.heappop(waiting)
        if not waiting:
            break
        queue.append(heapq.heappop(waiting)[1])
    for urn in lineage.nodes:
        usage.setdefault(urn, _NO_USAGE)
    del usage[lineage.root]
    return usage


def _count_downstreams(lineage: Lineage) -> dict[Urn, int]:
    counts = dict.fromkeys(lineage.nodes, 0)
    for edge in lineage.edges:
        counts[edge.upstream] = counts.get(edge.upstream, 0) + 1
    return counts


def _rule_for(
    edge: Edge,
    downstream: Node | None,
    downstream_usage: ColumnUsage,
    lineage: Lineage,
    baselines: Mapping[Urn, Schema],
) -> _Rule:
    if edge.kind == "training_data":
        return _WHOLE
    if edge.kind == "feature_source" and downstream is not None:
        return _feature_rule(
            downstream, lineage.nodes.get(edge.upstream), baselines.get(edge.upstream)
        )
    if edge.kind == "dataset_upstream" and downstream is not None:
        return _column_lineage_rule(edge.upstream, downstream, downstream_usage)
    if edge.kind in ("feature", "feature_table", "primary_key"):
        # An ML entity is consumed whole by the entity that uses it; it has no columns anyway.
        return _WHOLE if downstream_usage.whole else _UNKNOWN
    return _UNKNOWN


def _feature_rule(feature: Node, source: Node | None, baseline: Schema | None) -> _Rule:
    if feature.entity_type not in _FEATURE_TYPES:
        return _UNKNOWN
    if feature.source_columns:
        return _Rule(feeding=frozenset(feature.source_columns), default=False)
    # The column the feature is named after may be gone from the current schema (removed or
    # renamed since training): the baseline still names it, and the model was trained on it.
    for schema in (source.schema if source is not None else None, baseline):
        if schema is not None and any(f.path == feature.name for f in schema.fields):
            return _Rule(feeding=frozenset({feature.name}))
    return _UNKNOWN


def _column_lineage_rule(upstream: Urn, downstream: Node, downstream_usage: ColumnUsage) -> _Rule:
    mapped = [c for c in downstream.column_lineage if c.upstream == upstream]
    if not mapped:
        return _UNKNOWN
    verdicts: dict[str, list[bool | None]] = {}
    for col in mapped:
        verdicts.setdefault(col.upstream_field, []).append(
            downstream_usage.feeds(col.downstream_field)
        )
    feeding = {c for c, v in verdicts.items() if True in v}
    unused = {c for c, v in verdicts.items() if all(x is False for x in v)}
    unknown = set(verdicts) - feeding - unused
    # Column-level lineage is taken as authoritative for this edge: an unmentioned column
    # does not flow into the downstream dataset.
    return _Rule(_frozen(feeding), _frozen(unknown), _frozen(unused), default=False)


def _columns_mentioned(lineage: Lineage, baselines: Mapping[Urn, Schema]) -> dict[Urn, set[str]]:
    """Per node, every column name that anything says something about.

    That is its schema, its baseline, column-level lineage from it, and source columns of
    features computed from it.
    """
    names: dict[Urn, set[str]] = {}
    for urn, baseline in baselines.items():
        if urn in lineage.nodes:
            names.setdefault(urn, set()).update(f.path for f in baseline.fields)
    for urn, node in lineage.nodes.items():
        if node.schema is not None:
            names.setdefault(urn, set()).update(f.path for f in node.schema.fields)
        for col in node.column_lineage:
            names.setdefault(col.upstream, set()).add(col.upstream_field)
    for edge in lineage.edges:
        feature = lineage.nodes.get(edge.downstream)
        if edge.kind == "feature_source" and feature is not None:
            names.setdefault(edge.upstream, set()).update(feature.source_columns)
    return names


def _combine(rules: Iterable[_Rule], columns: Iterable[str]) -> ColumnUsage:
    rule_list = list(rules)
    if not rule_list:
        return _NO_USAGE
    if any(r.default is True and not r.unused and not r.unknown for r in rule_list):
        return _WHOLE_USAGE
    verdicts: Mapping[str, list[bool | None]] = {
        c: [r.feeds(c) for r in rule_list] for c in columns
    }
    complete = all(r.default is False and not r.unknown for r in rule_list)
    feeding = _frozen(c for c, v in verdicts.items() if True in v)
    unused = _frozen(c for c, v in verdicts.items() if all(x is False for x in v))
    if not feeding and not unused and not complete:
        return _NO_USAGE
    return ColumnUsage(columns=feeding, unused=unused, complete=complete)


class ColumnPaths:
    """The path by which a column reaches the model, where lineage names it edge by edge.

    A finding about a column shows this path rather than the walk's first path to its node:
    the two differ when the node reaches the model in several ways (``raw.customers.email``
    flows through ``curated.customer_360``, the training data, while the walk first reached
    ``raw.customers`` through a feature computed from another column).

    The search goes downstream from ``(node, column)`` to the model, one edge at a time, over
    what :func:`column_usage` also trusts: column-level lineage between datasets (only into
    columns that feed), a feature's recorded source columns (or the column it is named
    after), training data (the dataset consumed whole) and ML entities consumed whole. Jobs
    and edges that name no columns end the search there. The shortest such path wins; none
    at all gives None, and the finding keeps its node's path.
    """

    def __init__(self, lineage: Lineage, usage: Mapping[Urn, ColumnUsage]) -> None:
        self._lineage = lineage
        self._usage = usage
        self._downstream: dict[Urn, list[Edge]] | None = None

    def path(self, urn: Urn, column: str) -> tuple[Urn, ...] | None:
        """The path from the model to ``urn`` along which ``column`` flows, model first."""
        root = self._lineage.root
        if urn == root:
            return None
        start: tuple[Urn, str | None] = (urn, column)
        came_from: dict[tuple[Urn, str | None], tuple[Urn, str | None] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            if state[0] == root:
                return self._unwind(state, came_from)
            for following in self._next(*state):
                if following not in came_from:
                    came_from[following] = state
                    queue.append(following)
        return None

    @staticmethod
    def _unwind(
        state: tuple[Urn, str | None],
        came_from: Mapping[tuple[Urn, str | None], tuple[Urn, str | None] | None],
    ) -> tuple[Urn, ...]:
        urns: list[Urn] = []
        at: tuple[Urn, str | None] | None = state
        while at is not None:
            urns.append(at[0])
            at = came_from[at]
        return tuple(urns)  # model first: the search ran from the node towards the model

    def _next(self, urn: Urn, column: str | None) -> list[tuple[Urn, str | None]]:
        """Where ``column`` of ``urn`` (None: the entity as a whole) flows one edge down."""
        found: list[tuple[Urn, str | None]] = []
        for edge in self._edges_from(urn):
            downstream = self._lineage.nodes.get(edge.downstream)
            if downstream is None:
                continue
            if edge.kind == "training_data" or (
                column is None and edge.kind in ("feature", "feature_table", "primary_key")
            ):
                found.append((edge.downstream, None))
            elif edge.kind == "feature_source" and downstream.entity_type in _FEATURE_TYPES:
                sources = downstream.source_columns or (downstream.name,)
                if column is None or column in sources:
                    found.append((edge.downstream, None))
            elif edge.kind == "dataset_upstream":
                found.extend(
                    (edge.downstream, c.downstream_field)
                    for c in downstream.column_lineage
                    if c.upstream == urn
                    and (column is None or c.upstream_field == column)
                    and self._feeds(edge.downstream, c.downstream_field)
                )
        return found

    def _feeds(self, urn: Urn, column: str) -> bool:
        if urn == self._lineage.root:
            return True
        usage = self._usage.get(urn)
        return usage is not None and usage.feeds(column) is True

    def _edges_from(self, urn: Urn) -> list[Edge]:
        if self._downstream is None:
            self._downstream = {}
            for edge in self._lineage.edges:
                self._downstream.setdefault(edge.upstream, []).append(edge)
        return self._downstream.get(urn, [])
