"""The HTML report at scale shows trouble first (issue 25, item 10).

A big graph opens deep enough to show a node with its worst finding; findings are listed worst
first whatever order they come in; the model index is ordered by worst severity and shows it;
node labels are cut in the middle, so siblings that share a long start stay distinguishable.
"""

from __future__ import annotations

from dataclasses import replace

from mlcopilot.model import Finding, Severity
from mlcopilot.report.html import OPEN_NODES, render_html
from mlcopilot.report.html_graph import _LABEL_CHARS, _cut
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name
from testing.synthetic_lineage import big_scan
from tests.render_html.dom import Element, parse


def deep_trouble() -> ScanResult:
    """1,000 nodes whose one critical finding sits at the outermost level."""
    result = big_scan(1_000)
    report = result.models[0]
    deepest = max(report.lineage.paths, key=lambda u: len(report.lineage.paths[u]))
    low = replace(report.findings[0], severity=Severity.LOW)
    critical = Finding(
        check="schema_drift",
        severity=Severity.CRITICAL,
        model=report.urn,
        entity=deepest,
        field="amount",
        message="column `amount` was removed",
        path=report.lineage.paths[deepest],
        change="removed",
    )
    # Listed low first: the page must not keep the order it is given.
    return replace(result, models=(replace(report, findings=(low, critical)),))


def _levels(tree: Element) -> dict[str, int]:
    return {n.attrs["data-urn"]: int(n.attrs["data-level"]) for n in tree.find("g", "node")}


def test_a_big_graph_opens_showing_its_worst_finding() -> None:
    result = deep_trouble()
    tree = parse(render_html(result))
    [svg] = tree.find("svg", "lineage")
    critical = result.models[0].findings[1]
    level = _levels(tree)[critical.entity]
    opens = svg.attrs.get("data-open-level")
    assert opens is None or int(opens) >= level


def test_a_big_graph_with_trouble_near_the_model_still_opens_near_it() -> None:
    tree = parse(render_html(big_scan(1_000)))
    [svg] = tree.find("svg", "lineage")
    opens = int(svg.attrs["data-open-level"])
    assert len([lv for lv in _levels(tree).values() if lv <= opens]) <= OPEN_NODES


def test_findings_are_listed_worst_first() -> None:
    tree = parse(render_html(deep_trouble()))
    severities = [r.attrs["data-severity"] for r in tree.find("tr", "finding")]
    assert severities == ["critical", "low"]


def test_the_model_index_is_worst_first_and_shows_the_severity() -> None:
    result = big_scan(60, models=3)
    clean, mild, bad = result.models
    mild = replace(mild, findings=tuple(replace(f, severity=Severity.LOW) for f in mild.findings))
    bad = replace(bad, findings=(replace(bad.findings[0], severity=Severity.CRITICAL),))
    clean = replace(clean, findings=())
    tree = parse(render_html(replace(result, models=(clean, mild, bad))))
    [index] = [n for n in tree.find("nav") if "Models" in n.attrs.get("aria-label", "")]
    items = index.find("li")
    assert [li.attrs["data-risk"] for li in items] == ["critical", "low", "none"]
    assert "1 critical" in items[0].text
    assert "no findings" in items[2].text


def test_labels_are_cut_in_the_middle_so_siblings_stay_distinguishable() -> None:
    siblings = [f"b2fd91.order_entry_db.order_{kind}_history" for kind in ("lines", "items")]
    shown = [_cut(name, _LABEL_CHARS) for name in siblings]
    assert len(set(shown)) == 2, shown
    for name, label in zip(siblings, shown, strict=True):
        assert len(label) == _LABEL_CHARS
        assert label.startswith(name[:8])
        assert "…" in label
        assert label.endswith(name[-(_LABEL_CHARS // 2) + 1 :])


def test_a_cut_label_keeps_the_full_name_on_hover() -> None:
    tree = parse(render_html(big_scan(300)))
    for node in tree.find("g", "node"):
        [title] = node.find("title")
        assert short_name(node.attrs["data-urn"]) in title.text
