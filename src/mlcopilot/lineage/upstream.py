"""Walk a model's upstream lineage breadth-first, level by level, with honest caps.

The walk asks the catalog for one whole level at a time (one ``upstream`` and one ``nodes``
call per hop, never one per node), so a remote catalog can batch. Cycles terminate because
each urn is visited once; the first (shortest) path that reaches an urn is the one reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
    paths = ShortestPaths(root)
    before = paths.before
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
            if downstream not in before:
                continue  # a backend may answer for more than was asked; keep the walk exact
            if upstream not in before:
                if hops >= max_hops or len(before) >= max_nodes:
                    truncated = True
                    continue
                before[upstream] = downstream
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


class ShortestPaths(Mapping[Urn, tuple[Urn, ...]]):
    """A walk's paths: each reached urn's first (shortest) path from the root, root first.

    Kept as the urn before each one on its path, each path made when it is asked for: a
    tuple per node of every model was an estate's largest part of its lineages (1.7 million
    paths, 250 MB), and the checks ask each once (:meth:`every`, a model at a time).
    """

    __slots__ = ("before",)

    def __init__(self, root: Urn) -> None:
        self.before: dict[Urn, Urn | None] = {root: None}
        """Each reached urn -> the urn before it on its path (None: the root). An urn is
        added after the one before it, so this is in the order of the walk."""

    def __getitem__(self, urn: Urn) -> tuple[Urn, ...]:
        before = self.before
        step = before[urn]
        reversed_path = [urn]
        while step is not None:
            reversed_path.append(step)
            step = before[step]
        reversed_path.reverse()
        return tuple(reversed_path)

    def __contains__(self, urn: object) -> bool:
        return urn in self.before

    def __iter__(self) -> Iterator[Urn]:
        return iter(self.before)

    def __len__(self) -> int:
        return len(self.before)

    def __repr__(self) -> str:
        return repr(self.every())

    def every(self) -> dict[Urn, tuple[Urn, ...]]:
        """Every path at once, each made from the one before it (not walked up again)."""
        made: dict[Urn, tuple[Urn, ...]] = {}
        for urn, step in self.before.items():
            made[urn] = (urn,) if step is None else (*made[step], urn)
        return made
