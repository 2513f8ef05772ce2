"""The HTML report in Chromium at 1,000 nodes, and with hostile catalog names.

Big: the page opens collapsed near the model, search finds a node that collapse hides and
Enter brings it into view, selecting a finding whose path runs through hidden levels shows
the whole path. Hostile: names built to run script (``<script>``, ``onerror``, a quote that
closes an attribute) run nothing when the page is opened, hovered, searched and clicked, and
fetch nothing; they show as the text they are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlcopilot.report.html import inert, render_html
from testing.browser import Chromium
from testing.hostile_names import COLUMNS, ENTITY, SCRIPTED, STYLE, WATCH, hostile_report
from testing.synthetic_lineage import MODEL, big_scan

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

VISIBLE_JS = """() => Array.from(document.querySelectorAll("g.node"))
  .filter(n => n.getBoundingClientRect().width > 0).map(n => n.dataset.urn)"""


@pytest.fixture(scope="module")
def big_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.html"
    path.write_text(render_html(big_scan(1_000)), encoding="utf-8")
    return path


def test_a_thousand_nodes_open_collapsed_near_the_model(browser: Chromium, big_page: Path) -> None:
    with browser.open(big_page) as opened:
        page = opened.page
        assert page.evaluate("() => document.querySelectorAll('g.node').length") == 1_000
        shown = page.evaluate(VISIBLE_JS)
        assert MODEL in shown
        assert 0 < len(shown) < 1_000
        # The model, at the right, is scrolled into the graph's frame.
        inside = page.evaluate(
            """urn => {
              const node = document.querySelector(`g.node[data-urn="${urn}"]`);
              const box = node.getBoundingClientRect();
              const frame = node.closest("svg").parentNode.getBoundingClientRect();
              return box.left >= frame.left && box.right <= frame.right &&
                     box.top >= frame.top && box.bottom <= frame.bottom;
            }""",
            MODEL,
        )
        assert inside
        assert opened.traffic.foreign == []
        assert opened.traffic.page_errors == []


def test_search_and_enter_bring_a_hidden_node_into_view(browser: Chromium, big_page: Path) -> None:
    with browser.open(big_page) as opened:
        page = opened.page
        hidden = page.evaluate(
            "() => Array.from(document.querySelectorAll('g.node.collapsed'))"
            ".map(n => [n.dataset.urn, n.querySelector('.label').textContent])"
        )
        assert hidden
        urn, label = hidden[-1]
        page.fill("input.node-search", urn)
        assert page.evaluate(
            "() => Array.from(document.querySelectorAll('g.node.match')).map(n => n.dataset.urn)"
        ) == [urn]
        page.press("input.node-search", "Enter")
        assert page.evaluate("() => document.activeElement.dataset.urn") == urn
        assert urn in page.evaluate(VISIBLE_JS)
        assert label
        assert opened.traffic.foreign == []
        assert opened.traffic.page_errors == []


def test_selecting_a_finding_beyond_the_open_levels_shows_its_whole_path(
    browser: Chromium, big_page: Path
) -> None:
    with browser.open(big_page) as opened:
        page = opened.page
        hidden = set(
            page.evaluate(
                "() => Array.from(document.querySelectorAll('g.node.collapsed'))"
                ".map(n => n.dataset.urn)"
            )
        )
        rows = page.evaluate(
            "() => Array.from(document.querySelectorAll('tr.finding'))"
            ".map(r => [r.dataset.incident, r.dataset.path.split(' ')])"
        )
        incident, path = next((i, p) for i, p in rows if hidden & set(p))
        page.locator(f'tr.finding[data-incident="{incident}"] td').first.click()
        shown = set(page.evaluate(VISIBLE_JS))
        lit = page.evaluate(
            "() => Array.from(document.querySelectorAll('g.node.on-path')).map(n => n.dataset.urn)"
        )
        assert set(path) <= shown
        assert set(lit) == set(path)
        assert opened.traffic.foreign == []
        assert opened.traffic.page_errors == []


# --- hostile names


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_report(tmp_path_factory.mktemp("hostile"))


def test_hostile_names_run_nothing_fetch_nothing_and_read_as_text(
    browser: Chromium, hostile_page: Path
) -> None:
    with browser.open(hostile_page, init_script=WATCH) as opened:
        page = opened.page
        for selector in ("g.node", "tr.finding", "text.column"):
            for element in page.locator(selector).all():
                element.hover(force=True)
        for row in page.locator("tr.finding td:first-child").all():
            row.click()
        page.fill("input.node-search", "script")
        page.wait_for_timeout(200)  # a late onerror or timer would have fired by now
        assert page.evaluate("() => window.hostile || []") == []
        assert page.evaluate("() => document.scripts.length") == 2  # the data and the code
        assert page.evaluate("() => document.querySelectorAll('img, iframe, svg svg').length") == 0
        columns = page.evaluate(
            "() => Array.from(document.querySelectorAll('text.column')).map(c => c.dataset.column)"
        )
        cells = page.evaluate(
            "() => Array.from(document.querySelectorAll('tr.finding')).map(r => r.innerText)"
        )
        background = page.evaluate("() => getComputedStyle(document.body).backgroundImage")
        traffic = opened.traffic
    assert set(columns) == {inert(name) for name in COLUMNS}
    shown = "\n".join(cells)
    for name in (*SCRIPTED, ENTITY, STYLE):
        assert name in shown, name
    assert background == "none"
    assert traffic.foreign == []
    assert traffic.page_errors == []


def test_a_big_graph_opens_with_its_worst_finding_in_view(
    browser: Chromium, tmp_path: Path
) -> None:
    """Its one critical finding sits at the outermost level: on load that node is shown."""
    from tests.render_html.test_html_trouble_first import deep_trouble

    result = deep_trouble()
    page_file = tmp_path / "deep.html"
    page_file.write_text(render_html(result), encoding="utf-8")
    critical = result.models[0].findings[1]
    with browser.open(page_file) as opened:
        shown = opened.page.evaluate(VISIBLE_JS)
        assert critical.entity in shown
        first = opened.page.evaluate("() => document.querySelector('tr.finding').dataset.severity")
        assert first == "critical"
        assert opened.traffic.page_errors == []
