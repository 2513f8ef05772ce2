"""The walker on random graphs with cycles: it terminates, reaches exactly what it should and
says honestly when a cap stopped it."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.errors import NodeNotFound
from mlcopilot.lineage.upstream import ShortestPaths, walk_upstream
from mlcopilot.model import Edge, EntityType, Node
from mlcopilot.protocols import WalkLimits


class Graph:
    """An in-memory upstream graph: node i's upstreams are ``adjacency[i]``."""

    def __init__(self, adjacency: dict[int, set[int]]) -> None:
        self.adjacency = adjacency
        self.upstream_calls: list[list[str]] = []

    @staticmethod
    def urn(i: int) -> str:
        return f"urn:li:dataset:(urn:li:dataPlatform:hive,t{i},PROD)"

    def nodes(self, urns: Sequence[str]) -> dict[str, Node]:
        return {
            u: Node(u, EntityType.DATASET, u, exists=self._index(u) in self.adjacency) for u in urns
        }

    def upstream(self, urns: Sequence[str]) -> list[Edge]:
        self.upstream_calls.append(list(urns))
        return [
            Edge(u, self.urn(up), "dataset_upstream")
            for u in urns
            for up in sorted(self.adjacency.get(self._index(u), ()))
        ]

    @staticmethod
    def _index(urn: str) -> int:
        return int(urn.split(",")[1][1:])

    def distances(self) -> dict[int, int]:
        dist = {0: 0}
        queue = deque([0])
        while queue:
            n = queue.popleft()
            for up in self.adjacency.get(n, ()):
                if up not in dist:
                    dist[up] = dist[n] + 1
                    queue.append(up)
        return dist


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    size = draw(st.integers(min_value=1, max_value=25))
    adjacency = {i: set(draw(st.lists(st.integers(0, size - 1), max_size=4))) for i in range(size)}
    return Graph(adjacency)


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_uncapped_walk_reaches_exactly_the_reachable_nodes(graph: Graph) -> None:
    lineage = walk_upstream(graph, Graph.urn(0), WalkLimits(max_hops=1000, max_nodes=1000))
    dist = graph.distances()
    assert set(lineage.nodes) == {Graph.urn(i) for i in dist}
    assert not lineage.truncated
    for i, d in dist.items():
        path = lineage.paths[Graph.urn(i)]
        assert path[0] == Graph.urn(0)
        assert path[-1] == Graph.urn(i)
        assert len(path) == d + 1  # shortest path
        for down, up in itertools.pairwise(path):
            assert Graph._index(up) in graph.adjacency[Graph._index(down)]
    # One batched upstream call per level, never one per node.
    assert len(graph.upstream_calls) == max(dist.values()) + 1


@settings(max_examples=200, deadline=None)
@given(graphs(), st.integers(min_value=0, max_value=4))
def test_hop_cap_truncates_honestly(graph: Graph, max_hops: int) -> None:
    lineage = walk_upstream(graph, Graph.urn(0), WalkLimits(max_hops=max_hops, max_nodes=1000))
    dist = graph.distances()
    assert all(len(p) - 1 <= max_hops for p in lineage.paths.values())
    assert set(lineage.nodes) == {Graph.urn(i) for i, d in dist.items() if d <= max_hops}
    assert lineage.truncated == any(d > max_hops for d in dist.values())


@settings(max_examples=200, deadline=None)
@given(graphs(), st.integers(min_value=1, max_value=10))
def test_node_cap_truncates_honestly(graph: Graph, max_nodes: int) -> None:
    lineage = walk_upstream(graph, Graph.urn(0), WalkLimits(max_hops=1000, max_nodes=max_nodes))
    reachable = len(graph.distances())
    assert len(lineage.nodes) == min(reachable, max_nodes)
    assert lineage.truncated == (reachable > max_nodes)
    # Every edge kept joins two walked nodes.
    assert all(e.upstream in lineage.nodes and e.downstream in lineage.nodes for e in lineage.edges)


def _paths_as_tuples(graph: Graph, limits: WalkLimits) -> dict[str, tuple[str, ...]]:
    """The walk's paths as it made them before :class:`ShortestPaths`: a tuple per urn."""
    root = Graph.urn(0)
    paths: dict[str, tuple[str, ...]] = {root: (root,)}
    frontier, hops = [root], 0
    while frontier:
        new: list[str] = []
        for edge in graph.upstream(frontier):
            if edge.downstream in paths and edge.upstream not in paths:
                if hops >= limits.max_hops or len(paths) >= limits.max_nodes:
                    continue
                paths[edge.upstream] = (*paths[edge.downstream], edge.upstream)
                new.append(edge.upstream)
        frontier, hops = new, hops + 1
    return paths


@settings(max_examples=200, deadline=None)
@given(graphs(), st.integers(min_value=0, max_value=4), st.integers(min_value=1, max_value=30))
def test_paths_are_the_tuples_the_walk_made(graph: Graph, max_hops: int, max_nodes: int) -> None:
    limits = WalkLimits(max_hops=max_hops, max_nodes=max_nodes)
    lineage = walk_upstream(graph, Graph.urn(0), limits)
    expected = _paths_as_tuples(graph, limits)
    paths = lineage.paths
    assert isinstance(paths, ShortestPaths)
    assert paths.every() == expected
    assert list(paths.every()) == list(expected)  # the walk's order
    assert dict(paths) == expected
    assert paths == expected
    assert expected == paths
    assert len(paths) == len(expected)
    assert all(urn in paths for urn in expected)
    assert Graph.urn(99) not in paths
    assert paths.get(Graph.urn(99)) is None
    assert repr(paths) == repr(expected)


def test_long_chain_is_walked_to_the_end_within_caps() -> None:
    graph = Graph({i: {i + 1} for i in range(1000)} | {1000: set()})
    lineage = walk_upstream(graph, Graph.urn(0), WalkLimits(max_hops=1000, max_nodes=5000))
    assert len(lineage.nodes) == 1001
    assert not lineage.truncated
    capped = walk_upstream(graph, Graph.urn(0), WalkLimits(max_hops=999, max_nodes=5000))
    assert len(capped.nodes) == 1000
    assert capped.truncated


def test_unknown_root_is_an_error() -> None:
    with pytest.raises(NodeNotFound, match="no such entity"):
        walk_upstream(Graph({}), Graph.urn(0), WalkLimits())
