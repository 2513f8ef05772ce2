"""Walk a model's upstream lineage breadth-first, level by level, with honest caps.

The walk asks the catalog for one whole level at a time (one ``upstream`` and one ``nodes``
call per hop, never one per node), so a remote catalog can batch. Cycles terminate because
each urn is visited once; the first (shortest) path that reaches an urn is the one reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mlcopilot.errors import NodeNotFound
from mlcopilot.model import Edge, Lineage, Node, Urn
from mlcopilot.protocols import WalkLimits


class UpstreamSource(Protocol):
    """The two catalog reads a walk needs."""

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """Current metadata of each urn."""
        ...

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Edges one hop upstream of each urn."""
        ...


def walk_upstream(source: UpstreamSource, root: Urn, limits: WalkLimits) -> Lineage:
    """Return the upstream lineage of ``root``, stopping at ``limits`` and saying so.

    Raises:
        NodeNotFound: when the catalog has no entity ``root``.
    """
    root_node = source.nodes([root])[root]
    if not root_node.exists:
        raise NodeNotFound(f"{root}: no such entity in the catalog")

    nodes: dict[Urn, Node] = {root: root_node}
    paths: dict[Urn, tuple[Urn, ...]] = {root: (root,)}
    edges: dict[tuple[Urn, Urn, str], Edge] = {}
    frontier: list[Urn] = [root]
    truncated = False
    hops = 0

    max_hops, max_nodes = limits.max_hops, limits.max_nodes
    while frontier:
        level_edges = source.upstream(frontier)
        new: list[Urn] = []
        for edge in level_edges:
            downstream, upstream = edge.downstream, edge.upstream
            if downstream not in paths:
                continue  # a backend may answer for more than was asked; keep the walk exact
            if upstream not in paths:
                if hops >= max_hops or len(paths) >= max_nodes:
                    truncated = True
                    continue
                paths[upstream] = (*paths[downstream], upstream)
                new.append(upstream)
            edges.setdefault((downstream, upstream, edge.kind), edge)
        if new:
            nodes.update(source.nodes(new))
        frontier = new
        hops += 1

    return Lineage(
        root=root,
        nodes=nodes,
        edges=tuple(edges.values()),
        paths=paths,
        truncated=truncated,
    )
