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
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from mlcopilot.model import ColumnEdge, ColumnUsage, Edge, EntityType, Lineage, Node, Schema, Urn

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
_SETTLED: list[_Rule] = []
"""The rules of a settled node: none kept (never appended to: settled nodes get no more)."""
# A large lineage has a usage per node: the common ones are shared, and so is the empty set
# (216 bytes each, two per usage), instead of one of each per node.


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
    root, nodes, paths = lineage.root, lineage.nodes, lineage.paths
    rules: dict[Urn, list[_Rule]] = {}
    usage: dict[Urn, ColumnUsage] = {root: _WHOLE_USAGE}
    upstream_edges: dict[Urn, list[Edge]] = {}
    for edge in lineage.edges:
        upstream_edges.setdefault(edge.downstream, []).append(edge)
    # Equal column sets and usages are one object each: a large lineage repeats them.
    shared = _Shared()
    mentioned = _columns_mentioned(lineage, trained_on, shared)
    pending_downstreams = _count_downstreams(lineage)
    queue = deque([root])
    done: set[Urn] = set()
    # Nodes that have rules, nearest the model first: where a cycle is broken (a heap, so a
    # graph with many cycles does not rescan every node for each of them). Made the first
    # time the queue runs dry (on a graph without cycles, only at the end), kept after.
    holders: list[Urn] = []
    waiting: list[tuple[int, Urn]] | None = None
    while True:
        while queue:
            urn = queue.popleft()
            if urn in done:
                continue
            done.add(urn)
            if urn != root:
                usage[urn] = _combine(rules.get(urn, ()), mentioned.pop(urn, _NONE), shared)
                rules[urn] = _SETTLED  # its rules are read once: free them now
            settled = usage[urn]
            for edge in upstream_edges.get(urn, ()):
                upstream = edge.upstream
                if upstream not in done:  # a settled node's later rules are never read
                    found = rules.get(upstream)
                    if found is None:
                        rules[upstream] = found = []
                        if waiting is None:
                            holders.append(upstream)
                        else:
                            heapq.heappush(waiting, (len(paths.get(upstream, ())), upstream))
                    found.append(
                        _rule_for(
                            edge, nodes.get(edge.downstream), settled, lineage, trained_on, shared
                        )
                    )
                pending_downstreams[upstream] -= 1
                if pending_downstreams[upstream] == 0:
                    queue.append(upstream)
        # On a cycle no node ever sees all its downstreams settle: settle the one nearest the
        # model with what it has so far, and carry on from there.
        if waiting is None:
            waiting = [(len(paths.get(u, ())), u) for u in holders if u not in done]
            heapq.heapify(waiting)
        while waiting and waiting[0][1] in done:
            heapq.heappop(waiting)
        if not waiting:
            break
        queue.append(heapq.heappop(waiting)[1])
    for urn in nodes:
        usage.setdefault(urn, _NO_USAGE)
    del usage[root]
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
    shared: _Shared,
) -> _Rule:
    if edge.kind == "training_data":
        return _WHOLE
    if edge.kind == "feature_source" and downstream is not None:
        return _feature_rule(
            downstream, lineage.nodes.get(edge.upstream), baselines.get(edge.upstream), shared
        )
    if edge.kind == "dataset_upstream" and downstream is not None:
        mapped = shared.mapped(downstream).get(edge.upstream)
        return _column_lineage_rule(mapped, downstream_usage, shared) if mapped else _UNKNOWN
    if edge.kind in ("feature", "feature_table", "primary_key"):
        # An ML entity is consumed whole by the entity that uses it; it has no columns anyway.
        return _WHOLE if downstream_usage.whole else _UNKNOWN
    return _UNKNOWN


def _feature_rule(
    feature: Node, source: Node | None, baseline: Schema | None, shared: _Shared
) -> _Rule:
    if feature.entity_type not in _FEATURE_TYPES:
        return _UNKNOWN
    if feature.source_columns:
        return shared.rule(shared.set(frozenset(feature.source_columns)), _NONE, _NONE)
    # The column the feature is named after may be gone from the current schema (removed or
    # renamed since training): the baseline still names it, and the model was trained on it.
    for schema in (source.schema if source is not None else None, baseline):
        if schema is not None and any(f.path == feature.name for f in schema.fields):
            return shared.rule(shared.set({feature.name}), _NONE, _NONE, None)
    return _UNKNOWN


def _column_lineage_rule(mapped: _Mapped, downstream_usage: ColumnUsage, shared: _Shared) -> _Rule:
    """The rule column-level lineage into a dataset gives its upstream's columns.

    ``mapped``: that lineage (:meth:`_Shared.mapped`). An upstream column feeds when any
    column it maps to feeds, is unused when every one is unused, and is unknown otherwise.
    Column-level lineage is taken as authoritative for the edge: an unmentioned column does
    not flow into the downstream dataset (the rule's default is False).
    """
    pairs, seen, same_names = mapped
    if downstream_usage.whole:
        return shared.rule(seen, _NONE, _NONE)
    if same_names:  # then the rule depends on the two sets alone: worked out once for them
        key = (id(seen), id(downstream_usage))
        known = shared.lineage_rules.get(key)
        if known is not None:
            return known
    # ColumnUsage.feeds, inlined: True for its columns, False for its unused ones (all
    # others when it is complete), None for the rest.
    columns, unused_there = downstream_usage.columns, downstream_usage.unused
    complete = downstream_usage.complete
    feeding: AbstractSet[str]
    unknown: AbstractSet[str]
    if same_names:  # each column feeds the one of its own name: sets do it all
        feeding = seen & columns
        unknown = _NONE if complete else seen - columns - unused_there
    else:
        fed: set[str] = set()
        maybe: set[str] = set()
        for col in pairs:
            if col.downstream_field in columns:
                fed.add(col.upstream_field)
            elif not complete and col.downstream_field not in unused_there:
                maybe.add(col.upstream_field)
        feeding, unknown = fed, maybe - fed
    unused = seen - feeding - unknown
    rule = shared.rule(shared.set(feeding), shared.set(unknown), shared.set(unused))
    if same_names:
        shared.lineage_rules[key] = rule
    return rule


def _columns_mentioned(
    lineage: Lineage, baselines: Mapping[Urn, Schema], shared: _Shared
) -> dict[Urn, AbstractSet[str]]:
    """Per node, every column name that anything says something about.

    That is its schema, its baseline, column-level lineage from it, and source columns of
    features computed from it.
    """
    names: dict[Urn, AbstractSet[str]] = {}

    def add(urn: Urn, items: AbstractSet[str]) -> None:
        held = names.get(urn)
        if held is None:
            names[urn] = items  # shared until something else is added (copied then)
        elif held is not items and not items <= held:
            if not isinstance(held, set):
                held = names[urn] = set(held)
            held |= items

    nodes, paths_of = lineage.nodes, shared.paths
    for urn, baseline in baselines.items():
        if urn in nodes:
            names[urn] = paths_of(baseline)
    for urn, node in nodes.items():
        if node.schema is not None:
            paths = paths_of(node.schema)
            if names.get(urn) is not paths:  # mostly: the baseline is the current schema
                add(urn, paths)
        if node.column_lineage:
            for upstream, (_, fields, _) in shared.mapped(node).items():
                add(upstream, fields)
    for edge in lineage.edges:
        feature = nodes.get(edge.downstream)
        if edge.kind == "feature_source" and feature is not None and feature.source_columns:
            add(edge.upstream, shared.set(frozenset(feature.source_columns)))
    return names


def _combine(rules: Sequence[_Rule], columns: AbstractSet[str], shared: _Shared) -> ColumnUsage:
    """One node's usage from the rules of the edges into it, over the columns it names.

    A column feeds when any rule says it feeds, is unused when every rule says it is, and is
    unknown otherwise (each rule's verdicts computed as sets: see :meth:`_Rule.feeds`).
    """
    if not rules:
        return _NO_USAGE
    for rule in rules:
        if rule.default is True and not rule.unused and not rule.unknown:
            return _WHOLE_USAGE
    if len(rules) == 1:  # most nodes
        rule = rules[0]
        if rule is _UNKNOWN:
            return _NO_USAGE
        # One rule over a shared column set (most nodes): worked out once for the two.
        key = (id(rule), id(columns)) if type(columns) is frozenset else None
        known = shared.combined.get(key) if key is not None else None
        if known is not None:
            return known
        feeding = _feeding(rule, columns)
        unused = _unused(rule, columns)
        complete = rule.default is False and not rule.unknown
        usage = _usage(feeding, unused, complete, shared)
        if key is not None:
            shared.combined[key] = usage
        return usage
    else:
        fed: set[str] = set()
        not_fed: set[str] | None = None
        complete = True
        for rule in rules:
            fed |= _feeding(rule, columns)
            unused_by = _unused(rule, columns)
            not_fed = set(unused_by) if not_fed is None else not_fed & unused_by
            complete = complete and rule.default is False and not rule.unknown
        feeding, unused = fed, not_fed or _NONE
    return _usage(feeding, unused, complete, shared)


def _usage(
    feeding: AbstractSet[str], unused: AbstractSet[str], complete: bool, shared: _Shared
) -> ColumnUsage:
    if not feeding and not unused and not complete:
        return _NO_USAGE
    return shared.usage(shared.set(feeding), shared.set(unused), complete)


def _feeding(rule: _Rule, columns: AbstractSet[str]) -> AbstractSet[str]:
    """The columns ``rule.feeds`` says True of: named feeding, or unnamed by a feeding default."""
    if rule.default is True:
        return columns - ((rule.unknown | rule.unused) - rule.feeding)
    return columns & rule.feeding


def _unused(rule: _Rule, columns: AbstractSet[str]) -> AbstractSet[str]:
    """The columns ``rule.feeds`` says False of: neither feeding nor unknown, and unused."""
    if rule.default is False:
        return columns - rule.feeding - rule.unknown
    return (columns & rule.unused) - rule.feeding - rule.unknown


_Mapped = tuple[list[ColumnEdge], frozenset[str], bool]
"""Column lineage from one upstream dataset: its column edges in order, their upstream columns,
and whether every edge joins two columns of the same name."""


class _Shared:
    """Equal frozen sets, usages and rules as one object each, within one :func:`column_usage`.

    Every rule and usage is one of these (or a module constant), and so is every frozen
    column set :func:`_columns_mentioned` gives: all stay alive to the end of the call, so
    results worked out from them are kept by their ``id`` (:attr:`lineage_rules`,
    :attr:`combined`).
    """

    def __init__(self) -> None:
        self._sets: dict[frozenset[str], frozenset[str]] = {}
        self._usages: dict[tuple[frozenset[str], frozenset[str], bool], ColumnUsage] = {}
        self._rules: dict[
            tuple[frozenset[str], frozenset[str], frozenset[str], bool | None], _Rule
        ] = {}
        self.lineage_rules: dict[tuple[int, int], _Rule] = {}
        """Column lineage of same-named columns: (upstream columns, downstream usage) → rule."""
        self.combined: dict[tuple[int, int] | None, ColumnUsage] = {}
        """A node's one rule over its columns → its usage."""
        self._mapped: dict[Urn, dict[Urn, _Mapped]] = {}
        self._paths: dict[int, tuple[Schema, frozenset[str]]] = {}

    def set(self, items: AbstractSet[str]) -> frozenset[str]:
        if not items:
            return _NONE
        frozen = items if type(items) is frozenset else frozenset(items)
        return self._sets.setdefault(frozen, frozen)

    def usage(self, columns: frozenset[str], unused: frozenset[str], complete: bool) -> ColumnUsage:
        """``ColumnUsage(columns=..., unused=..., complete=...)``, of shared sets."""
        key = (columns, unused, complete)
        found = self._usages.get(key)
        if found is None:
            found = ColumnUsage(columns=columns, unused=unused, complete=complete)
            self._usages[key] = found
        return found

    def rule(
        self,
        feeding: frozenset[str],
        unknown: frozenset[str],
        unused: frozenset[str],
        default: bool | None = False,
    ) -> _Rule:
        """``_Rule(feeding, unknown, unused, default)``, of shared sets."""
        key = (feeding, unknown, unused, default)
        found = self._rules.get(key)
        if found is None:
            found = _Rule(feeding, unknown, unused, default)
            self._rules[key] = found
        return found

    def mapped(self, node: Node) -> dict[Urn, _Mapped]:
        """The node's column lineage by upstream dataset (see :data:`_Mapped`)."""
        found = self._mapped.get(node.urn)
        if found is None:
            groups: dict[Urn, list[ColumnEdge]] = {}
            last: Urn | None = None
            group: list[ColumnEdge] = []
            for col in node.column_lineage:  # in runs of one upstream, mostly
                if col.upstream != last:
                    last = col.upstream
                    group = groups.setdefault(last, [])
                group.append(col)
            found = {
                upstream: (
                    cols,
                    self.set({c.upstream_field for c in cols}),
                    all(c.upstream_field == c.downstream_field for c in cols),
                )
                for upstream, cols in groups.items()
            }
            self._mapped[node.urn] = found
        return found

    def paths(self, schema: Schema) -> frozenset[str]:
        """The schema's field paths (one set per schema object)."""
        held = self._paths.get(id(schema))
        if held is None or held[0] is not schema:
            held = (schema, self.set({f.path for f in schema.fields}))
            self._paths[id(schema)] = held
        return held[1]


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
