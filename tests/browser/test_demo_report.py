"""The demo's HTML report in headless Chromium: what a person sees, clicks and prints.

Checked against the lineage walked again from the demo's catalog and the same scan's JSON
report, never against the HTML's own data: the nodes and edges drawn, their risk colours in
the screenshot's pixels, the findings rows, the path a selected finding lights up (by mouse
and by keyboard), search, collapse, and print. No test may see the page ask the network for
anything but its own file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from mlcopilot.store import open_store
from testing.browser import Chromium, OpenedPage, decode_png, parse_css_colour
from tests.browser.conftest import Demo

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

RISKS = ("critical", "high", "medium", "low", "none", "unknown")
SEVERITY_RANK = {"critical": 4, "high": 3, "medium": 2, "low": 1}
# The kinds the DOM contract names, for the lineage's edge kinds it names them for.
CONTRACT_KINDS = {
    "feature": "feature",
    "feature_table": "feature-table",
    "training_data": "training-data",
    "dataset_upstream": "lineage",
}
TOLERANCE = 3
"""Largest difference per channel between a node's pixel and its CSS colour."""


@pytest.fixture
def opened(browser: Chromium, demo: Demo) -> Iterator[OpenedPage]:
    with browser.open(demo.html) as page:
        yield page
        # Whatever the test did, the page fetched nothing and raised nothing.
        assert page.traffic.foreign == []
        assert page.traffic.page_errors == []
        assert page.traffic.console_errors == []


NODES_JS = """() => Array.from(document.querySelectorAll("g.node")).map(n => {
  const box = n.querySelector(":scope > rect").getBoundingClientRect();
  return {urn: n.dataset.urn, type: n.dataset.type, risk: n.dataset.risk,
          label: (n.querySelector(":scope > text") || {}).textContent || "",
          width: box.width, height: box.height,
          classes: Array.from(n.classList),
          columns: Array.from(n.querySelectorAll("text.column")).map(
            c => ({name: c.dataset.column, usage: c.dataset.usage}))};
})"""

EDGES_JS = """() => Array.from(document.querySelectorAll("g.edge")).map(e => ({
  from: e.dataset.from, to: e.dataset.to, kind: e.dataset.kind,
  label: (e.querySelector("text") || {}).textContent || "",
  drawn: !!e.querySelector("path"), classes: Array.from(e.classList)}))"""

ROWS_JS = """() => Array.from(document.querySelectorAll("tr.finding")).map(r => ({
  incident: r.dataset.incident, entity: r.dataset.entity, severity: r.dataset.severity,
  path: r.dataset.path, text: r.innerText, selected: r.classList.contains("selected")}))"""

ON_PATH_JS = """() => ({
  nodes: Array.from(document.querySelectorAll("g.node.on-path")).map(n => n.dataset.urn),
  edges: Array.from(document.querySelectorAll("g.edge.on-path")).map(
    e => [e.dataset.from, e.dataset.to]),
  selected: Array.from(document.querySelectorAll("tr.finding.selected")).map(
    r => r.dataset.incident)})"""

# A point inside each node's box, nearest its centre, that no label, column or marker covers
# (the box's own fill shows there), in page coordinates; and the CSS colour of its risk.
SAMPLES_JS = """() => {
  const root = getComputedStyle(document.documentElement);
  return Array.from(document.querySelectorAll("g.node")).map(n => {
    const rect = n.querySelector(":scope > rect");
    const box = rect.getBoundingClientRect();
    const covers = Array.from(n.querySelectorAll("*"))
      .filter(e => e !== rect && e.tagName.toLowerCase() !== "title")
      .map(e => e.getBoundingClientRect())
      .filter(r => r.width > 0 && r.height > 0);
    const inset = 6, pad = 2;
    const cx = box.left + box.width / 2, cy = box.top + box.height / 2;
    let best = null;
    for (let x = Math.ceil(box.left + inset); x <= box.right - inset; x++) {
      for (let y = Math.ceil(box.top + inset); y <= box.bottom - inset; y++) {
        const covered = covers.some(r => x >= r.left - pad && x <= r.right + pad &&
                                         y >= r.top - pad && y <= r.bottom + pad);
        if (covered) continue;
        const d = (x - cx) ** 2 + (y - cy) ** 2;
        if (best === null || d < best.d) best = {x, y, d};
      }
    }
    return {urn: n.dataset.urn, risk: n.dataset.risk,
            x: best && best.x + window.scrollX, y: best && best.y + window.scrollY,
            fill: getComputedStyle(rect).fill,
            colour: root.getPropertyValue("--risk-" + n.dataset.risk)};
  });
}"""


def _worst_open(demo: Demo) -> dict[str, str]:
    worst: dict[str, str] = {}
    for finding in demo.findings:
        if finding["incident"]["state"] == "resolved":
            continue
        entity, severity = finding["entity"], finding["severity"]
        if SEVERITY_RANK[severity] > SEVERITY_RANK.get(worst.get(entity, ""), 0):
            worst[entity] = severity
    return worst


def _path_edges(path: list[str]) -> set[tuple[str, str]]:
    # Paths run from the model upstream; an edge runs from the upstream end to the downstream.
    return {(up, down) for down, up in itertools.pairwise(path)}


def test_the_graph_has_every_node_and_edge_the_scan_walked(opened: OpenedPage, demo: Demo) -> None:
    nodes: list[dict[str, Any]] = opened.page.evaluate(NODES_JS)
    edges: list[dict[str, Any]] = opened.page.evaluate(EDGES_JS)
    lineage = demo.lineage
    assert len(nodes) == len(lineage.nodes)
    assert {n["urn"] for n in nodes} == set(lineage.nodes)
    worst = _worst_open(demo)
    for node in nodes:
        walked = lineage.nodes[node["urn"]]
        assert node["type"] == walked.entity_type, node["urn"]
        assert node["label"].strip(), node["urn"]
        assert node["width"] > 0, node["urn"]
        assert node["height"] > 0, node["urn"]
        assert node["risk"] == worst.get(node["urn"], "none"), node["urn"]
    assert {n["risk"] for n in nodes} >= {"high", "medium", "none"}
    assert {(e["from"], e["to"]) for e in edges} == {
        (e.upstream, e.downstream) for e in lineage.edges
    }
    kinds = {(e.upstream, e.downstream): e.kind for e in lineage.edges}
    for edge in edges:
        assert edge["drawn"], edge
        assert edge["kind"], edge
        assert edge["label"].strip(), edge
        expected = CONTRACT_KINDS.get(kinds[(edge["from"], edge["to"])])
        if expected is not None:
            assert edge["kind"] == expected, edge
    assert {"feature", "feature-table", "training-data", "lineage"} <= {e["kind"] for e in edges}


def test_the_column_a_finding_names_is_shown_on_its_dataset(opened: OpenedPage, demo: Demo) -> None:
    nodes = {n["urn"]: n for n in opened.page.evaluate(NODES_JS)}
    fields = [(f["entity"], f["field"]) for f in demo.findings if f["field"]]
    assert fields  # the demo has column-level findings: the PII column, the renamed one
    for entity, field in fields:
        shown = {c["name"]: c["usage"] for c in nodes[entity]["columns"]}
        assert field in shown, (entity, field)
        assert shown[field] in ("feeds", "unused", "unknown")
    pii = next(f for f in demo.findings if f["check"] == "pii_exposure")
    assert {c["name"]: c["usage"] for c in nodes[pii["entity"]]["columns"]}[pii["field"]] == "feeds"


def test_the_findings_table_lists_every_finding_with_its_incident(
    opened: OpenedPage, demo: Demo
) -> None:
    rows = {r["incident"]: r for r in opened.page.evaluate(ROWS_JS)}
    assert len(rows) == len(demo.findings)
    for finding in demo.findings:
        row = rows[finding["incident"]["id"]]
        assert row["entity"] == finding["entity"]
        assert row["severity"] == finding["severity"]
        assert row["path"].split(" ") == finding["path"]
        assert finding["incident"]["id"] in row["text"]
        assert finding["check"] in row["text"]
        assert finding["incident"]["state"] in row["text"]
        assert not row["selected"]
    timeline = opened.page.evaluate(
        "() => Array.from(document.querySelectorAll('ol.timeline li'))"
        ".map(li => [li.dataset.incident, li.dataset.event])"
    )
    assert {incident for incident, _ in timeline} >= set(rows)
    assert {event for _, event in timeline} <= {"opened", "acknowledged", "resolved"}


def test_clicking_a_finding_lights_up_its_path_and_clicking_again_clears_it(
    opened: OpenedPage, demo: Demo
) -> None:
    page = opened.page
    for finding in demo.findings:
        incident = finding["incident"]["id"]
        row = page.locator(f'tr.finding[data-incident="{incident}"] td').first
        row.click()
        lit = page.evaluate(ON_PATH_JS)
        assert lit["selected"] == [incident]
        assert set(lit["nodes"]) == set(finding["path"])
        assert {tuple(e) for e in lit["edges"]} == _path_edges(finding["path"])
        row.click()
        assert page.evaluate(ON_PATH_JS) == {"nodes": [], "edges": [], "selected": []}


def test_the_keyboard_reaches_a_finding_selects_it_with_enter_and_space_escape_clears(
    opened: OpenedPage, demo: Demo
) -> None:
    page = opened.page
    first = demo.findings[0]
    incident = first["incident"]["id"]
    for _ in range(200):  # Tab from the top of the page until a finding has the focus
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.matches('tr.finding')"):
            break
    else:
        pytest.fail("Tab never reached a finding row")
    focused = page.evaluate("() => document.activeElement.dataset.incident")
    assert focused == incident  # the first row, in the table's order
    page.keyboard.press("Enter")
    lit = page.evaluate(ON_PATH_JS)
    assert lit["selected"] == [incident]
    assert set(lit["nodes"]) == set(first["path"])
    assert {tuple(e) for e in lit["edges"]} == _path_edges(first["path"])
    page.keyboard.press(" ")
    assert page.evaluate(ON_PATH_JS) == {"nodes": [], "edges": [], "selected": []}
    # Space selects as Enter does, and the page does not scroll away instead.
    page.keyboard.press(" ")
    assert page.evaluate(ON_PATH_JS)["selected"] == [incident]
    page.keyboard.press("Escape")
    assert page.evaluate(ON_PATH_JS) == {"nodes": [], "edges": [], "selected": []}


def test_search_marks_the_nodes_whose_name_matches(opened: OpenedPage, demo: Demo) -> None:
    page = opened.page
    page.fill("input.node-search", "raw.")
    marked = page.evaluate(
        "() => Array.from(document.querySelectorAll('g.node.match')).map(n => n.dataset.urn)"
    )
    expected = {urn for urn, node in demo.lineage.nodes.items() if "raw." in node.name}
    assert expected  # raw.customers, raw.transactions
    assert set(marked) == expected
    page.fill("input.node-search", "")
    assert page.evaluate("() => document.querySelectorAll('g.node.match').length") == 0


def test_collapsing_to_a_level_hides_the_nodes_beyond_it(opened: OpenedPage, demo: Demo) -> None:
    page = opened.page
    paths = demo.lineage.paths
    page.click('button.collapse[data-level="1"]')
    shown = page.evaluate(
        "() => Array.from(document.querySelectorAll('g.node'))"
        ".filter(n => n.getBoundingClientRect().width > 0).map(n => n.dataset.urn)"
    )
    # Level 1: the model and what feeds it directly (a path of two: the model, then the node).
    assert set(shown) == {urn for urn, path in paths.items() if len(path) <= 2}
    deepest = page.evaluate(
        "() => Math.max(...Array.from(document.querySelectorAll('button.collapse'))"
        ".map(b => Number(b.dataset.level)))"
    )
    page.click(f'button.collapse[data-level="{deepest}"]')
    shown = page.evaluate(
        "() => Array.from(document.querySelectorAll('g.node'))"
        ".filter(n => n.getBoundingClientRect().width > 0).map(n => n.dataset.urn)"
    )
    assert set(shown) == set(demo.lineage.nodes)


def _check_node_colours(opened: OpenedPage) -> None:
    samples: list[dict[str, Any]] = opened.page.evaluate(SAMPLES_JS)
    image = decode_png(opened.screenshot())
    size = opened.page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    assert (image.width, image.height) == tuple(size)
    for sample in samples:
        assert sample["risk"] in RISKS, sample
        assert sample["x"] is not None, f"no uncovered point in {sample['urn']}'s box"
        expected = parse_css_colour(sample["colour"])
        assert parse_css_colour(sample["fill"]) == expected, sample
        r, g, b, _ = image.pixel(sample["x"], sample["y"])
        difference = max(abs(r - expected[0]), abs(g - expected[1]), abs(b - expected[2]))
        assert difference <= TOLERANCE, (sample, (r, g, b))


def test_the_screenshot_shows_each_node_in_its_risk_colour(opened: OpenedPage) -> None:
    _check_node_colours(opened)
    colours = {
        risk: opened.page.evaluate(
            f"() => getComputedStyle(document.documentElement).getPropertyValue('--risk-{risk}')"
        )
        for risk in RISKS
    }
    # Six risks, six colours a person can tell apart.
    assert len({parse_css_colour(c) for c in colours.values()}) == len(RISKS)


# Each node drawn inside its SVG's box (not clipped off the page) and not faded.
ON_PAPER_JS = """() => Array.from(document.querySelectorAll("g.node")).filter(n => {
  const box = n.querySelector(":scope > rect").getBoundingClientRect();
  const svg = n.closest("svg").getBoundingClientRect();
  return box.width > 0 && getComputedStyle(n).opacity === "1" &&
    box.left >= svg.left - 1 && box.right <= svg.right + 1 &&
    box.top >= svg.top - 1 && box.bottom <= svg.bottom + 1;
}).map(n => n.dataset.urn)"""


def test_printed_every_node_is_there_in_colour_on_white(browser: Chromium, demo: Demo) -> None:
    with browser.open(demo.html, media="print") as printed:
        page = printed.page
        assert page.evaluate("() => matchMedia('print').matches")
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert parse_css_colour(background) == (255, 255, 255)
        assert set(page.evaluate(ON_PAPER_JS)) == set(demo.lineage.nodes)
        _check_node_colours(printed)
        # Collapsed and with a finding selected on screen, the paper still shows every node:
        # what the page's own beforeprint handler makes of it, read as printing starts.
        page.evaluate("() => document.querySelector('button.collapse[data-level=\"1\"]').click()")
        page.evaluate("() => document.querySelector('tr.finding').click()")
        page.evaluate(
            "on_paper => addEventListener('beforeprint', () => {"
            " window.onPaper = eval(on_paper)(); })",
            ON_PAPER_JS,
        )
        pdf = page.pdf(print_background=True)
        assert set(page.evaluate("() => window.onPaper")) == set(demo.lineage.nodes)
        assert printed.traffic.foreign == []
        assert printed.traffic.page_errors == []
    assert pdf.startswith(b"%PDF-")
    assert b"/Type /Page" in pdf


def test_the_report_commands_page_has_the_whole_incident_history(
    browser: Chromium, demo: Demo
) -> None:
    with open_store(f"sqlite:///{demo.files.home / 'state.db'}") as store:
        incidents = store.incidents(include_resolved=True)
    expected = {(i.id, "opened") for i in incidents}
    expected |= {(i.id, "acknowledged") for i in incidents if i.acknowledged_at is not None}
    expected |= {(i.id, "resolved") for i in incidents if i.resolved_at is not None}
    assert any(event == "resolved" for _, event in expected)  # the demo resolves one
    with browser.open(demo.files.history) as opened:
        timeline = opened.page.evaluate(
            "() => Array.from(document.querySelectorAll('ol.timeline li'))"
            ".filter(li => li.getBoundingClientRect().height > 0)"
            ".map(li => [li.dataset.incident, li.dataset.event])"
        )
        traffic = opened.traffic
    assert {(incident, event) for incident, event in timeline} == expected
    assert traffic.foreign == []
    assert traffic.page_errors == []
