"""The layered layout: the model at the right, upstream to the left, nothing overlapping,
crossings reduced, cycles survived, and the same input always placed the same."""

from __future__ import annotations

from itertools import combinations

from mlcopilot.report.layout import Box, Layout, Spacing, layered_layout

BOX = Box(100, 30)


def lay(edges: list[tuple[str, str]], root: str = "model") -> Layout:
    keys = dict.fromkeys([root, *(k for edge in edges for k in edge)])
    return layered_layout(root, {key: BOX for key in keys}, edges)


def test_the_root_is_alone_at_the_right_and_every_edge_points_toward_it() -> None:
    edges = [("f1", "model"), ("f2", "model"), ("d1", "f1"), ("d2", "f2"), ("d0", "d1")]
    layout = lay(edges)
    root = layout.nodes["model"]
    assert root.level == 0
    assert all(p.x < root.x for key, p in layout.nodes.items() if key != "model")
    for upstream, downstream in edges:
        assert layout.nodes[upstream].x < layout.nodes[downstream].x
        assert layout.nodes[upstream].level > layout.nodes[downstream].level
    assert layout.levels == 4


def test_longest_path_layers_and_long_edges_bend_through_the_layers_they_cross() -> None:
    # d feeds the model directly and through two hops: longest path puts it 3 layers out.
    edges = [("d", "model"), ("d", "b"), ("b", "a"), ("a", "model")]
    layout = lay(edges)
    assert [layout.nodes[k].level for k in ("model", "a", "b", "d")] == [0, 1, 2, 3]
    long = layout.routes[("d", "model")]
    assert len(long.points) == 2 + 2 * 2  # both ends, and across each of the 2 layers between
    xs = [x for x, _ in long.points]
    assert xs == sorted(xs)
    assert len(layout.routes[("b", "a")].points) == 2


def test_nodes_of_a_layer_never_overlap() -> None:
    edges = [(f"d{i}", f"f{i % 5}") for i in range(30)] + [(f"f{i}", "model") for i in range(5)]
    layout = lay(edges)
    for a, b in combinations(layout.nodes.values(), 2):
        if a.x == b.x:
            assert a.y + a.height <= b.y or b.y + b.height <= a.y, (a, b)
    assert all(p.y >= 0 for p in layout.nodes.values())
    assert all(p.y + p.height <= layout.height for p in layout.nodes.values())
    assert all(p.x + p.width <= layout.width for p in layout.nodes.values())


def test_barycentre_ordering_undoes_the_crossings_of_the_input_order() -> None:
    # Given in this order, the sources of f1 and f2 would be drawn crossed: a2 before a1.
    edges = [("f1", "model"), ("f2", "model"), ("a2", "f2"), ("a1", "f1")]
    layout = lay(edges)
    assert layout.crossings == 0
    order = sorted(["f1", "f2"], key=lambda k: layout.nodes[k].y)
    sources = sorted(["a1", "a2"], key=lambda k: layout.nodes[k].y)
    assert [s[1] for s in sources] == [f[1] for f in order]


def test_a_cycle_is_laid_out_with_its_closing_edge_marked() -> None:
    edges = [("a", "model"), ("b", "a"), ("a", "b")]
    layout = lay(edges)
    assert set(layout.nodes) == {"model", "a", "b"}
    assert [route.reversed for route in layout.routes.values()].count(True) == 1
    assert layout.nodes["b"].level == 2


def test_the_same_input_gives_the_same_layout() -> None:
    edges = [(f"d{i}", f"f{(i * 7) % 6}") for i in range(24)] + [
        (f"f{i}", "model") for i in range(6)
    ]
    assert lay(edges) == lay(list(edges))


def test_repeats_self_loops_and_unknown_keys_are_ignored() -> None:
    boxes = {"model": BOX, "a": BOX}
    layout = layered_layout(
        "model", boxes, [("a", "model"), ("a", "model"), ("a", "a"), ("x", "a")]
    )
    assert list(layout.routes) == [("a", "model")]


def _segments(layout: Layout) -> dict[int, list[tuple[int, int]]]:
    """Each route's steps between two adjacent columns, by the step's left x: (y left, y right)."""
    steps: dict[int, list[tuple[int, int]]] = {}
    for route in layout.routes.values():
        if route.reversed:
            continue
        for (x1, y1), (x2, y2) in zip(route.points, route.points[1:], strict=False):
            if x1 != x2 and (x1, y1) != (x2, y2) and x2 - x1 < 2 * BOX.width:
                steps.setdefault(x1, []).append((y1, y2))
    return steps


def test_the_crossings_reported_are_the_crossings_drawn() -> None:
    # A pseudo-random layered graph with long edges (through dummies) and shared ends.
    edges = [(f"f{i}", "model") for i in range(6)]
    edges += [(f"d{i}", f"f{(i * 5) % 6}") for i in range(12)]
    edges += [(f"s{i}", f"d{(i * 7) % 12}") for i in range(15)]
    edges += [(f"s{i}", f"f{i % 6}") for i in range(0, 15, 4)]  # two layers long
    layout = lay(edges)
    drawn = 0
    for steps in _segments(layout).values():
        for (a1, a2), (b1, b2) in combinations(steps, 2):
            drawn += (a1 - b1) * (a2 - b2) < 0
    assert drawn == layout.crossings
    assert layout.crossings < _crossings_in_input_order(edges)


def _crossings_in_input_order(edges: list[tuple[str, str]]) -> int:
    """What a layout with no ordering step would cross: the same graph with 0 sweeps."""
    keys = dict.fromkeys(["model", *(k for edge in edges for k in edge)])
    boxes = {key: BOX for key in keys}
    return layered_layout("model", boxes, edges, Spacing(sweeps=0)).crossings


def _centre(layout: Layout, key: str) -> float:
    placed = layout.nodes[key]
    return placed.y + placed.height / 2


def test_a_chain_is_drawn_straight_and_the_model_sits_between_what_feeds_it() -> None:
    chain = lay([("a", "model"), ("b", "a"), ("c", "b")])
    assert len({_centre(chain, key) for key in ("model", "a", "b", "c")}) == 1
    fan = lay([("f1", "model"), ("f2", "model"), ("f3", "model"), ("d", "f3")])
    features = [_centre(fan, f) for f in ("f1", "f2", "f3")]
    assert abs(_centre(fan, "model") - sum(features) / 3) <= 1
    assert abs(_centre(fan, "d") - _centre(fan, "f3")) <= 1  # level with what it feeds


def test_a_model_alone_and_an_empty_graph_are_laid_out() -> None:
    alone = layered_layout("model", {"model": BOX}, [])
    assert alone.levels == 1
    assert alone.nodes["model"].x >= 0
    assert alone.width >= BOX.width
    empty = layered_layout("model", {}, [])
    assert empty.nodes == {}
