"""A 1,000-node lineage: every node and edge drawn, nothing overlapping, collapse controls and
an opening view near the model, coverage gaps and the truncated walk marked, same bytes twice.

The scan result is synthetic (``testing/synthetic_lineage.py``: the product's own types, no
catalog), so this stays fast; the demo's tests go through the command.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from itertools import combinations

import pytest

from mlcopilot.model import Edge, IncidentChanges
from mlcopilot.report.html import OPEN_NODES, render_html
from mlcopilot.scan import ScanResult
from testing.synthetic_lineage import big_scan
from tests.render_html.dom import Element, parse


@pytest.fixture(scope="module")
def result() -> ScanResult:
    return big_scan(1_000)


@pytest.fixture(scope="module")
def tree(result: ScanResult) -> Element:
    return parse(render_html(result))


def _position(node: Element) -> tuple[int, int, int, int]:
    match = re.fullmatch(r"translate\((-?\d+) (-?\d+)\)", node.attrs["transform"])
    assert match is not None
    [rect] = [r for r in node.find("rect") if r.attrs.get("class") == "box"]
    x, y = int(match[1]), int(match[2])
    return x, y, int(rect.attrs["width"]), int(rect.attrs["height"])


def test_every_node_and_edge_is_drawn(result: ScanResult, tree: Element) -> None:
    lineage = result.models[0].lineage
    nodes = tree.find("g", "node")
    assert len(nodes) == len(lineage.nodes) == 1_000
    assert {n.attrs["data-urn"] for n in nodes} == set(lineage.nodes)
    assert len(tree.find("g", "edge")) == len(lineage.edges)
    assert len(tree.find("tr", "finding")) == len(result.models[0].findings)


def test_no_two_nodes_overlap_and_the_model_is_at_the_right(tree: Element) -> None:
    nodes = tree.find("g", "node")
    boxes = [_position(n) for n in nodes]
    for (x1, y1, w1, h1), (x2, y2, w2, h2) in combinations(boxes, 2):
        apart = x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
        assert apart, ((x1, y1, w1, h1), (x2, y2, w2, h2))
    [model] = [n for n in nodes if n.attrs["data-type"] == "mlModel"]
    assert model.attrs["data-level"] == "0"
    assert _position(model)[0] == max(x for x, *_ in boxes)
    [svg] = tree.find("svg", "lineage")
    width, height = int(svg.attrs["width"]), int(svg.attrs["height"])
    assert all(x >= 0 and y >= 0 and x + w <= width and y + h <= height for x, y, w, h in boxes)


def test_levels_collapse_and_a_big_graph_opens_near_the_model(tree: Element) -> None:
    levels = sorted({int(n.attrs["data-level"]) for n in tree.find("g", "node")})
    buttons = [int(b.attrs["data-level"]) for b in tree.find("button", "collapse")]
    assert buttons == levels[1:]
    [svg] = tree.find("svg", "lineage")
    opens = int(svg.attrs["data-open-level"])
    near = [n for n in tree.find("g", "node") if int(n.attrs["data-level"]) <= opens]
    assert 1 <= opens < levels[-1]
    assert len(near) <= OPEN_NODES
    data = json.loads(tree.find("script")[0].text)
    views = data["models"][0]["views"]
    assert sorted(int(level) for level in views) == levels
    x, y, w, h = views[str(opens)]
    for node in near:  # the opening view shows every node it keeps
        nx, ny, nw, nh = _position(node)
        assert x <= nx
        assert y <= ny
        assert nx + nw <= x + w
        assert ny + nh <= y + h
    level = {n.attrs["data-urn"]: int(n.attrs["data-level"]) for n in tree.find("g", "node")}
    for edge in tree.find("g", "edge"):  # an edge is hidden with its outer end
        ends = (level[edge.attrs["data-from"]], level[edge.attrs["data-to"]])
        assert int(edge.attrs["data-level"]) == max(ends)
    assert int(svg.attrs["width"]) > w  # the whole drawing is wider than the opening view


def test_gaps_and_the_truncated_walk_are_marked_on_their_nodes(
    result: ScanResult, tree: Element
) -> None:
    report = result.models[0]
    marked = {n.attrs["data-urn"]: n for n in tree.find("g", "node") if "data-gap" in n.attrs}
    for gap in report.gaps:
        assert marked[gap.entity].attrs["data-gap"] == gap.reason
    deepest = max(len(p) for p in report.lineage.paths.values())
    outermost = {u for u, p in report.lineage.paths.items() if len(p) == deepest}
    assert outermost <= set(marked)
    assert all(node.find("g", "gap-marker") for node in marked.values())
    assert set(marked) == outermost | {gap.entity for gap in report.gaps}


def test_a_small_graph_opens_whole() -> None:
    small = parse(render_html(big_scan(120)))
    [svg] = small.find("svg", "lineage")
    assert "data-open-level" not in svg.attrs
    assert small.find("button", "collapse")


def test_the_same_result_renders_to_the_same_bytes(result: ScanResult) -> None:
    assert render_html(result) == render_html(big_scan(1_000))


def test_several_models_each_have_their_section_graph_and_findings() -> None:
    result = big_scan(60, models=3)
    tree = parse(render_html(result))
    sections = tree.find("section", "model")
    assert [s.attrs["data-urn"] for s in sections] == [m.urn for m in result.models]
    for section, report in zip(sections, result.models, strict=True):
        assert len(section.find("g", "node")) == len(report.lineage.nodes)
        rows = section.find("tr", "finding")
        assert [r.attrs["data-incident"] for r in rows] == [f.id for f in report.findings]
    ids = [e.attrs["id"] for e in tree.walk() if "id" in e.attrs]
    assert len(ids) == len(set(ids))
    links = [a.attrs["href"] for a in tree.find("nav")[0].find("a")]
    assert links == [f"#{s.attrs['id']}" for s in sections]
    data = json.loads(tree.find("script")[0].text)
    assert [m["urn"] for m in data["models"]] == [m.urn for m in result.models]


def test_a_scan_of_no_model_is_still_a_page() -> None:
    empty = replace(big_scan(10), models=(), changes=IncidentChanges(), notes=("nothing here",))
    tree = parse(render_html(empty))
    assert not tree.find("section", "model")
    assert "No model was scanned." in tree.find("main")[0].text
    assert "nothing here" in tree.find("header")[0].text


def test_a_nodes_details_name_its_owners() -> None:
    result = big_scan(20)
    report = result.models[0]
    urn = list(report.lineage.nodes)[1]
    owners = ("urn:li:corpuser:jdoe", "urn:li:corpGroup:data-eng")
    nodes = {**report.lineage.nodes, urn: replace(report.lineage.nodes[urn], owners=owners)}
    owned = replace(report, lineage=replace(report.lineage, nodes=nodes))
    tree = parse(render_html(replace(result, models=(owned,))))
    titles = {n.attrs["data-urn"]: n.find("title")[0].text for n in tree.find("g", "node")}
    assert "owners: jdoe, data-eng" in titles[urn].splitlines()
    assert all("owners:" not in text for u, text in titles.items() if u != urn)


def test_an_edge_closing_a_cycle_is_drawn_and_marked() -> None:
    result = big_scan(20)
    report = result.models[0]
    feature_source = next(e for e in report.lineage.edges if e.kind == "feature_source")
    # The feature feeding its own source dataset: a cycle.
    back = Edge(feature_source.upstream, feature_source.downstream, "job_input")
    cyclic = replace(report, lineage=replace(report.lineage, edges=(*report.lineage.edges, back)))
    tree = parse(render_html(replace(result, models=(cyclic,))))
    edges = tree.find("g", "edge")
    assert len(edges) == len(cyclic.lineage.edges)
    marked = [(e.attrs["data-from"], e.attrs["data-to"]) for e in edges if "data-cycle" in e.attrs]
    assert len(marked) == 1
    assert set(marked[0]) == {feature_source.upstream, feature_source.downstream}


def test_past_its_size_budget_the_page_keeps_the_worst_models_and_lists_the_rest() -> None:
    result = big_scan(60, models=40)
    whole = render_html(result)
    budget = len(whole.encode("utf-8")) // 4
    page = render_html(result, budget=budget)
    assert len(page.encode("utf-8")) <= budget
    dom = parse(page)
    sections = dom.find("section", "model")
    listed = [li.attrs["data-urn"] for li in dom.find("ul", "summarised")[0].find("li")]
    data = json.loads(dom.find("script")[0].text)
    # The script reads one entry per section, in order; no model is lost, none shown twice.
    assert len(data["models"]) == len(sections) >= 1
    shown = [s.attrs["data-urn"] for s in sections]
    assert sorted(shown + listed) == sorted(m.urn for m in result.models)
    assert len(dom.find("ul", "model-index")[0].find("li")) == len(result.models)
    assert f"({budget / 1_000_000:g} MB)" in page


def test_within_its_budget_the_page_summarises_nothing() -> None:
    page = render_html(big_scan(60, models=3))
    assert 'class="summarised"' not in page
