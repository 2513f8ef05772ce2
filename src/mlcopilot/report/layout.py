"""A layered left-to-right layout of a model's upstream graph: pure, deterministic.

Sugiyama's method, small and hand-written (no layout library, no JavaScript):

1. Cycles: a depth-first walk from the root (the model) marks the edges that close a cycle;
   they are drawn but take no part in the layering.
2. Layers: longest path from the root, so every edge points one or more layers toward the
   model, which is alone in layer 0 (drawn at the right; upstream extends to the left).
3. Edges longer than one layer get a dummy point in every layer they cross, so ordering
   sees them and they bend around the nodes rather than through them.
4. Order within each layer: barycentre sweeps, down and up, keeping the order with the
   fewest crossings (counted exactly, by inversions).
5. Coordinates: a layer's x from its number; y where the layer's items come, in total,
   closest to the mean of their neighbours' (least squares, the order kept, no overlap):
   outward from the model, then back and out again looking both ways.

The same input (the same nodes and edges in the same order) gives the same layout, to the
pixel: every choice breaks ties by input order, and coordinates are integers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

Key = str
"""A node's identity (an urn)."""


@dataclass(frozen=True, slots=True)
class Box:
    """A node's size in pixels."""

    width: int
    height: int


@dataclass(frozen=True, slots=True)
class Spacing:
    """The gaps of the layout, in pixels."""

    layer_gap: int = 110
    """Horizontal space between two layers (where edge labels go)."""
    row_gap: int = 14
    """Vertical space between two nodes of a layer."""
    margin: int = 16
    """Around the whole drawing."""
    sweeps: int = 6
    """Barycentre passes (each one down and one up)."""


@dataclass(frozen=True, slots=True)
class Placed:
    """A node as laid out: its layer and its top-left corner."""

    level: int
    """Layers from the root (0: the root itself)."""
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class Route:
    """The points an edge passes through, upstream end first, downstream end last."""

    upstream: Key
    downstream: Key
    points: tuple[tuple[int, int], ...]
    reversed: bool = False
    """The edge closes a cycle: it runs from a layer nearer the model to one further away."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where everything is: nodes by key, one route per distinct (upstream, downstream)."""

    nodes: Mapping[Key, Placed]
    routes: Mapping[tuple[Key, Key], Route]
    width: int
    height: int
    levels: int
    """How many layers (the deepest level plus one)."""
    crossings: int
    """Edge crossings between adjacent layers in the order chosen."""


def layered_layout(
    root: Key,
    boxes: Mapping[Key, Box],
    edges: Sequence[tuple[Key, Key]],
    spacing: Spacing | None = None,
) -> Layout:
    """Lay out the graph of ``boxes`` whose ``edges`` are ``(upstream, downstream)`` pairs.

    Every node should be upstream of ``root`` (as a lineage walk gives them); one that is
    not goes into layer 1. Edges naming an unknown key, self-loops and repeats are ignored.
    """
    spacing = spacing or Spacing()
    keys = list(boxes)
    index = {key: i for i, key in enumerate(keys)}
    pairs = _distinct(edges, index)
    back = _back_edges(root, keys, pairs, index)
    forward = [p for p in pairs if p not in back]
    level = _levels(root, keys, forward)
    layers, down, up, chains = _with_dummies(keys, forward, level)
    crossings = _order(layers, down, up, spacing.sweeps)
    ys = _rows(layers, down, up, boxes, spacing)
    deepest = len(layers) - 1
    widest = max((box.width for box in boxes.values()), default=0)
    column = widest + spacing.layer_gap
    xs = {n: spacing.margin + (deepest - level_of) * column for n, level_of in _all_levels(layers)}
    # The highest point drawn: a node's top edge, or a dummy (an edge passing through).
    top = min((y - boxes[k].height // 2 if k in boxes else y for k, y in ys.items()), default=0)
    nodes: dict[Key, Placed] = {}
    for key in keys:
        box = boxes[key]
        centre = ys[key] - top + spacing.margin
        nodes[key] = Placed(level[key], xs[key], centre - box.height // 2, box.width, box.height)
    routes: dict[tuple[Key, Key], Route] = {}
    for pair in pairs:
        upstream, downstream = pair
        start, end = nodes[upstream], nodes[downstream]
        first = (start.x + start.width, start.y + start.height // 2)
        last = (end.x, end.y + end.height // 2)
        # Through each layer it crosses, the edge runs straight across the column.
        middle = [
            point
            for d in chains.get(pair, ())
            for point in (
                (xs[d], ys[d] - top + spacing.margin),
                (xs[d] + widest, ys[d] - top + spacing.margin),
            )
        ]
        routes[pair] = Route(upstream, downstream, (first, *middle, last), pair in back)
    width = spacing.margin * 2 + (deepest + 1) * column - spacing.layer_gap
    bottom = max((p.y + p.height for p in nodes.values()), default=0)
    bottom = max([bottom, *(y for r in routes.values() for _, y in r.points)])
    return Layout(nodes, routes, max(width, 0), bottom + spacing.margin, deepest + 1, crossings)


def _distinct(edges: Sequence[tuple[Key, Key]], index: Mapping[Key, int]) -> list[tuple[Key, Key]]:
    seen: dict[tuple[Key, Key], None] = {}
    for upstream, downstream in edges:
        if upstream != downstream and upstream in index and downstream in index:
            seen.setdefault((upstream, downstream), None)
    return list(seen)


def _back_edges(
    root: Key, keys: Sequence[Key], pairs: Sequence[tuple[Key, Key]], index: Mapping[Key, int]
) -> set[tuple[Key, Key]]:
    """The edges a depth-first walk upstream from ``root`` finds closing a cycle (iterative)."""
    upstream_of: dict[Key, list[Key]] = {key: [] for key in keys}
    for upstream, downstream in pairs:
        upstream_of[downstream].append(upstream)
    state: dict[Key, int] = {}  # 1: on the stack, 2: done
    back: set[tuple[Key, Key]] = set()
    starts = [root] if root in index else []
    starts += [key for key in keys if key != root]
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack: list[tuple[Key, int]] = [(start, 0)]
        while stack:
            node, at = stack[-1]
            nexts = upstream_of[node]
            if at == len(nexts):
                state[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, at + 1)
            upstream = nexts[at]
            seen = state.get(upstream)
            if seen == 1:
                back.add((upstream, node))
            elif seen is None:
                state[upstream] = 1
                stack.append((upstream, 0))
    return back


def _levels(root: Key, keys: Sequence[Key], forward: Sequence[tuple[Key, Key]]) -> dict[Key, int]:
    """Longest path from the root over the acyclic edges (Kahn's order, downstream first)."""
    downstreams = {key: 0 for key in keys}
    upstream_of: dict[Key, list[Key]] = {key: [] for key in keys}
    for upstream, downstream in forward:
        downstreams[upstream] += 1
        upstream_of[downstream].append(upstream)
    level = {key: 0 for key in keys}
    ready = [key for key in keys if downstreams[key] == 0]
    at = 0
    while at < len(ready):
        node = ready[at]
        at += 1
        for upstream in upstream_of[node]:
            level[upstream] = max(level[upstream], level[node] + 1)
            downstreams[upstream] -= 1
            if downstreams[upstream] == 0:
                ready.append(upstream)
    for key in keys:
        # A node no path from the root reaches, other than through a cycle, sits just upstream.
        if key != root and level[key] == 0:
            level[key] = 1
    return level


_Chains = dict[tuple[Key, Key], tuple[Key, ...]]


def _with_dummies(
    keys: Sequence[Key], forward: Sequence[tuple[Key, Key]], level: Mapping[Key, int]
) -> tuple[list[list[Key]], dict[Key, list[Key]], dict[Key, list[Key]], _Chains]:
    """Layers (root first), neighbours one layer down and up, each long edge's dummies.

    A long edge's dummies are listed from its upstream end (left) to its downstream end.
    """
    deepest = max(level.values(), default=0)
    layers: list[list[Key]] = [[] for _ in range(deepest + 1)]
    for key in _initial_order(keys, forward, level):
        layers[level[key]].append(key)
    down: dict[Key, list[Key]] = {key: [] for key in keys}
    up: dict[Key, list[Key]] = {key: [] for key in keys}
    chains: _Chains = {}
    for upstream, downstream in forward:
        previous = downstream
        dummies: list[Key] = []
        for between in range(level[downstream] + 1, level[upstream]):
            # A key no urn can be: urns never hold a NUL.
            dummy = f"\0{upstream}\0{downstream}\0{between}"
            layers[between].append(dummy)
            down[dummy], up[dummy] = [previous], []
            up[previous].append(dummy)
            dummies.append(dummy)
            previous = dummy
        up[previous].append(upstream)
        down[upstream].append(previous)
        if dummies:
            chains[(upstream, downstream)] = tuple(reversed(dummies))
    return layers, down, up, chains


def _initial_order(
    keys: Sequence[Key], forward: Sequence[tuple[Key, Key]], level: Mapping[Key, int]
) -> list[Key]:
    """Breadth-first from the root over the edges, in input order: related nodes start close."""
    upstream_of: dict[Key, list[Key]] = {key: [] for key in keys}
    for upstream, downstream in forward:
        upstream_of[downstream].append(upstream)
    order: dict[Key, None] = {}
    for start in sorted(keys, key=lambda k: level[k]):
        if start in order:
            continue
        order[start] = None
        queue = [start]
        at = 0
        while at < len(queue):
            for upstream in upstream_of[queue[at]]:
                if upstream not in order:
                    order[upstream] = None
                    queue.append(upstream)
            at += 1
    return list(order)


def _all_levels(layers: Sequence[Sequence[Key]]) -> list[tuple[Key, int]]:
    return [(key, n) for n, layer in enumerate(layers) for key in layer]


def _order(
    layers: list[list[Key]],
    down: Mapping[Key, Sequence[Key]],
    up: Mapping[Key, Sequence[Key]],
    sweeps: int,
) -> int:
    """Reorder ``layers`` in place by barycentre sweeps; return the crossings of the best."""
    best = [list(layer) for layer in layers]
    fewest = _crossings(layers, up)
    for _ in range(sweeps):
        if fewest == 0:
            break
        for n in range(1, len(layers)):
            _by_barycentre(layers[n], layers[n - 1], down)
        for n in range(len(layers) - 2, -1, -1):
            _by_barycentre(layers[n], layers[n + 1], up)
        now = _crossings(layers, up)
        if now < fewest:
            fewest = now
            best = [list(layer) for layer in layers]
    layers[:] = best
    return fewest


def _by_barycentre(
    layer: list[Key], fixed: Sequence[Key], neighbours: Mapping[Key, Sequence[Key]]
) -> None:
    position = {key: i for i, key in enumerate(fixed)}
    scale = len(layer) / max(len(fixed), 1)

    def weight(item: tuple[int, Key]) -> tuple[float, int]:
        at, key = item
        near = [position[n] for n in neighbours[key] if n in position]
        # An item with no neighbour there keeps its place (scaled to the other layer's size).
        centre = sum(near) / len(near) * scale if near else float(at)
        return (centre, at)

    layer[:] = [key for _, key in sorted(enumerate(layer), key=weight)]


def _crossings(layers: Sequence[Sequence[Key]], up: Mapping[Key, Sequence[Key]]) -> int:
    total = 0
    for n in range(len(layers) - 1):
        position = {key: i for i, key in enumerate(layers[n + 1])}
        ends = sorted(
            (i, position[u]) for i, key in enumerate(layers[n]) for u in up[key] if u in position
        )
        total += _inversions([b for _, b in ends], len(layers[n + 1]))
    return total


def _inversions(values: Sequence[int], size: int) -> int:
    """Pairs i < j with values[i] > values[j], with a Fenwick tree: O(n log n)."""
    tree = [0] * (size + 1)
    count = 0
    for seen, value in enumerate(values):
        at = value + 1
        below = 0
        while at > 0:
            below += tree[at]
            at -= at & -at
        count += seen - below
        at = value + 1
        while at <= size:
            tree[at] += 1
            at += at & -at
    return count


def _rows(
    layers: Sequence[Sequence[Key]],
    down: Mapping[Key, Sequence[Key]],
    up: Mapping[Key, Sequence[Key]],
    boxes: Mapping[Key, Box],
    spacing: Spacing,
) -> dict[Key, int]:
    """Each item's vertical centre: near its neighbours, in its layer's order, never overlapping.

    A pass outward from the model places each layer by its neighbours toward the model; a
    pass back and another outward then place each by its neighbours on both sides. Each layer
    goes where its items are, in total, closest to where they want to be (least squares) with
    the order kept and the gaps respected.
    """
    ys: dict[Key, float] = {}
    for layer in layers:
        _place(layer, _wanted(layer, down, ys, spacing), boxes, spacing, ys)
    both = {key: [*down[key], *up[key]] for layer in layers for key in layer}
    for layer in [*reversed(layers[1:]), *layers[1:]]:
        _place(layer, _wanted(layer, both, ys, spacing), boxes, spacing, ys)
    # The model's layer last, between what feeds it.
    _place(layers[0], _wanted(layers[0], up, ys, spacing), boxes, spacing, ys)
    return {key: round(y) for key, y in ys.items()}


def _wanted(
    layer: Sequence[Key],
    neighbours: Mapping[Key, Sequence[Key]],
    ys: Mapping[Key, float],
    spacing: Spacing,
) -> list[float]:
    wanted = []
    for at, key in enumerate(layer):
        near = [ys[n] for n in neighbours.get(key, ()) if n in ys]
        if near:
            wanted.append(sum(near) / len(near))
        else:  # nothing placed to go by: where it is, or in order from the top
            wanted.append(ys.get(key, float(at * spacing.row_gap)))
    return wanted


def _place(
    layer: Sequence[Key],
    wanted: Sequence[float],
    boxes: Mapping[Key, Box],
    spacing: Spacing,
    ys: dict[Key, float],
) -> None:
    """Centres for ``layer`` minimising the squared distance to ``wanted``, in order, apart.

    With ``offset[i]`` the least distance from the first centre to the i-th, the centres are
    ``offset[i] + z[i]`` for a non-decreasing ``z``: the best ``z`` is the isotonic regression
    of ``wanted[i] - offset[i]``, found by pooling adjacent violators.
    """
    if not layer:
        return
    offsets = [0.0]
    for previous, key in pairwise(layer):
        gap = spacing.row_gap if _real(key) and _real(previous) else spacing.row_gap // 2
        offsets.append(offsets[-1] + (_height(previous, boxes) + _height(key, boxes)) / 2 + gap)
    blocks: list[list[float]] = []  # [sum, count] of pooled targets
    for target in (w - o for w, o in zip(wanted, offsets, strict=True)):
        blocks.append([target, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total, size = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += size
    at = 0
    for total, size in blocks:
        for _ in range(int(size)):
            ys[layer[at]] = total / size + offsets[at]
            at += 1


def _real(key: Key) -> bool:
    return not key.startswith("\0")


def _height(key: Key, boxes: Mapping[Key, Box]) -> int:
    box = boxes.get(key)
    return box.height if box is not None else 0
