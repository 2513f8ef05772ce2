"""``scan --format html`` and ``mlcopilot report`` on the demo's story, read without a browser.

The story: the demo catalog is scanned (three findings), a column is removed and another
renamed (two more), the removal is acknowledged, then the column comes back (resolved). The
page is parsed with :mod:`html.parser` and held to the DOM contract the browser tests read;
what it should show comes from the JSON report of the same run and from the catalog's walk.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from mlcopilot.catalog.lite import open_lite_catalog
from mlcopilot.checks import builtin_infos
from mlcopilot.protocols import WalkLimits
from mlcopilot.report.html import EDGE_KINDS, RISKS
from testing.installed_cli import run_cli
from tests.conftest import DEMO_DATA
from tests.render_html.dom import parse

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
DAY1, DAY2, DAY3 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z", "2026-11-22T09:00:00Z"
LATER = "2026-11-22T10:00:00Z"
DATAHUB = "https://datahub.example.com"


def ok(home: Path, *args: str) -> str:
    ran = run_cli(home, *args, env={"MLCOPILOT_DATAHUB_URL": DATAHUB})
    assert ran.code == 0, ran.stderr
    return ran.stdout


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("story") / "home"
    ok(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    ok(home, "scan", "--now", DAY1, "--format", "json", "--output", str(home / "day1.json"))
    ok(home, "catalog", "load", str(DEMO_DATA / "02_schema_change.json"))
    ran = ok(home, "scan", "--now", DAY2, "--format", "json")
    removed = next(
        f["id"] for f in json.loads(ran)["models"][0]["findings"] if f["change"] == "removed"
    )
    ok(home, "incidents", "ack", removed, "--by", "alice")
    ok(home, "catalog", "load", str(DEMO_DATA / "03_restore_column.json"))
    ok(home, "scan", "--now", DAY3, "--format", "json")
    return home


@pytest.fixture(scope="module")
def pages(story: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("pages")
    args = ["--dry-run", "--now", LATER, "--format", "json", "--output", str(out / "r.json")]
    ok(story, "scan", *args, "--format", "html", "--output", str(out / "r.html"))
    ok(story, "report", "--now", LATER, "--output", str(out / "report.html"))
    incidents = json.loads(ok(story, "incidents", "list", "--state", "all", "--format", "json"))
    return {
        "scan": (out / "r.html").read_text(encoding="utf-8"),
        "report": (out / "report.html").read_text(encoding="utf-8"),
        "json": json.loads((out / "r.json").read_text(encoding="utf-8")),
        "incidents": incidents,
    }


def test_the_page_holds_the_dom_contract_for_the_lineage(
    story: Path, pages: dict[str, Any]
) -> None:
    lineage = open_lite_catalog(story / "catalog.db", create=False).lineage(MODEL, WalkLimits())
    page = parse(pages["scan"])
    [section] = page.find("section", "model")
    assert section.attrs["data-urn"] == MODEL
    [svg] = section.find("svg", "lineage")
    nodes = {n.attrs["data-urn"]: n for n in svg.find("g", "node")}
    assert set(nodes) == set(lineage.nodes)
    assert len(nodes) == pages["json"]["models"][0]["coverage"]["nodes"]
    for urn, node in nodes.items():
        assert node.attrs["data-type"] == lineage.nodes[urn].entity_type.value
        assert node.attrs["data-risk"] in RISKS
        assert node.attrs["tabindex"] == "0"
        assert node.find("rect")[0].attrs["class"] == "box"
        [label] = node.find("text", "label")
        assert label.text.strip()
    edges = svg.find("g", "edge")
    kinds = {kind: name for kind, (name, _) in EDGE_KINDS.items()}
    expected = {(e.upstream, e.downstream, kinds[e.kind]) for e in lineage.edges}
    shown = {(e.attrs["data-from"], e.attrs["data-to"], e.attrs["data-kind"]) for e in edges}
    assert shown == expected
    assert len(edges) == len(lineage.edges)
    for edge in edges:
        assert edge.find("path")
        [label] = edge.find("text")
        assert label.text in {"column lineage", *(label for _, label in EDGE_KINDS.values())}
    assert {"feature", "feature-source", "training-data", "lineage"} <= {k for *_, k in shown}


def test_nodes_are_coloured_by_their_worst_finding(pages: dict[str, Any]) -> None:
    findings = pages["json"]["models"][0]["findings"]
    order = ["low", "medium", "high", "critical"]
    worst: dict[str, str] = {}
    for finding in findings:
        seen = worst.get(finding["entity"], "low")
        worst[finding["entity"]] = max(seen, finding["severity"], key=order.index)
    nodes = {n.attrs["data-urn"]: n for n in parse(pages["scan"]).find("g", "node")}
    assert {urn: nodes[urn].attrs["data-risk"] for urn in worst} == worst
    assert {n.attrs["data-risk"] for u, n in nodes.items() if u not in worst} == {"none"}
    css = re.search(r"<style>(.*?)</style>", pages["scan"], re.S)
    assert css is not None
    for risk in RISKS:  # each risk colour defined once, as a custom property
        assert len(re.findall(rf"--risk-{risk}:", css.group(1))) == 1


def test_the_changed_columns_show_on_the_dataset_with_whether_they_feed_the_model(
    pages: dict[str, Any],
) -> None:
    nodes = {n.attrs["data-urn"]: n for n in parse(pages["scan"]).find("g", "node")}
    [columns] = nodes[CUSTOMERS].find("g", "columns")
    shown = {c.attrs["data-column"]: c.attrs["data-usage"] for c in columns.find("text", "column")}
    fields = {
        f["field"]
        for f in pages["json"]["models"][0]["findings"]
        if f["entity"] == CUSTOMERS and f["field"]
    }
    assert set(shown) == fields
    assert shown["email"] == "feeds"  # PII that feeds the model
    assert shown["country_code"] == "unused"  # column-level lineage says it does not feed
    others = [n for u, n in nodes.items() if u != CUSTOMERS and n.attrs["data-type"] != "dataset"]
    assert all(not n.find("g", "columns") for n in others)


def test_the_findings_table_has_incident_id_state_and_age(pages: dict[str, Any]) -> None:
    findings = pages["json"]["models"][0]["findings"]
    [table] = parse(pages["scan"]).find("table", "findings")
    rows = table.find("tr", "finding")
    assert [r.attrs["data-incident"] for r in rows] == [f["incident"]["id"] for f in findings]
    for row, finding in zip(rows, findings, strict=True):
        assert row.attrs["data-entity"] == finding["entity"]
        assert row.attrs["data-severity"] == finding["severity"]
        assert row.attrs["data-path"] == " ".join(finding["path"])
        assert row.attrs["tabindex"] == "0"
        cells = row.find("td")
        assert finding["incident"]["id"] in cells[0].text
        [state] = row.find("td", "state")
        assert state.text == finding["incident"]["state"]
        assert re.fullmatch(r"\d+ d( \d+ h)?|\d+ h|\d+ min|new", cells[6].text), cells[6].text
    assert {f["incident"]["state"] for f in findings} == {"open"}
    pii = next(r for r, f in zip(rows, findings, strict=True) if f["check"] == "pii_exposure")
    assert pii.find("td")[6].text == "2 d 1 h"  # opened on day 1 at 09:00, now day 3 at 10:00


def test_the_report_timeline_has_every_recorded_event(pages: dict[str, Any]) -> None:
    expected = []
    for incident in pages["incidents"]:
        expected.append((incident["id"], "opened"))
        if incident["acknowledged_at"]:
            expected.append((incident["id"], "acknowledged"))
        if incident["state"] == "resolved":
            expected.append((incident["id"], "resolved"))
    [timeline] = parse(pages["report"]).find("ol", "timeline")
    events = [(li.attrs["data-incident"], li.attrs["data-event"]) for li in timeline.find("li")]
    assert sorted(events) == sorted(expected)
    assert {"opened", "acknowledged", "resolved"} == {event for _, event in events}
    acknowledged = next(
        li for li in timeline.find("li") if li.attrs["data-event"] == "acknowledged"
    )
    assert "by alice" in acknowledged.text
    times = [li.find("time")[0].attrs["datetime"] for li in timeline.find("li")]
    assert times == sorted(times)  # oldest first


def test_the_scan_page_timeline_has_the_incidents_of_this_scan(pages: dict[str, Any]) -> None:
    [timeline] = parse(pages["scan"]).find("ol", "timeline")
    ids = {li.attrs["data-incident"] for li in timeline.find("li")}
    assert ids == {f["incident"]["id"] for f in pages["json"]["models"][0]["findings"]}


def test_links_go_to_datahub_and_only_links_carry_addresses(pages: dict[str, Any]) -> None:
    for name in ("scan", "report"):
        text = pages[name]
        page = parse(text)
        hrefs = [e.attrs["href"] for e in page.walk() if e.tag == "a" and "href" in e.attrs]
        addresses = [h for h in hrefs if h.startswith(("http://", "https://"))]
        assert addresses
        assert all(h.startswith(f"{DATAHUB}/") for h in addresses)
        assert f"{DATAHUB}/dataset/{quote(CUSTOMERS, safe='')}" in hrefs
        # Every address in the file is one of those links: no other reference to fetch.
        assert len(re.findall(r"https?://", text)) == len(addresses)


def test_the_page_fetches_nothing(pages: dict[str, Any]) -> None:
    for name in ("scan", "report"):
        text = pages[name]
        page = parse(text)
        for element in page.walk():
            assert "src" not in element.attrs, element.tag
            assert not any(a.startswith("on") for a in element.attrs), element.attrs
            assert element.tag not in {"link", "img", "iframe", "object", "embed", "image", "use"}
        assert "url(" not in text.lower()
        assert "@import" not in text.lower()
        scripts = page.find("script")
        assert [s.attrs for s in scripts] == [
            {"type": "application/json", "id": "report-data"},
            {},
        ]
        json.loads(scripts[0].text)


def test_the_same_scan_renders_to_the_same_bytes(tmp_path: Path) -> None:
    digests = []
    for n in range(2):
        home = tmp_path / f"home{n}"
        ok(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
        page = tmp_path / f"{n}.html"
        ok(home, "scan", "--dry-run", "--now", DAY1, "--format", "html", "--output", str(page))
        digests.append(hashlib.sha256(page.read_bytes()).hexdigest())
    assert digests[0] == digests[1]


def test_the_demo_page_is_small(pages: dict[str, Any]) -> None:
    assert len(pages["scan"].encode("utf-8")) < 150_000
    assert len(pages["report"].encode("utf-8")) < 150_000


def test_html_to_stdout_keeps_the_summary_on_stderr(story: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(story, home)
    ran = run_cli(home, "scan", "--dry-run", "--now", LATER, "--format", "html")
    assert ran.code == 0, ran.stderr
    assert ran.stdout.startswith("<!DOCTYPE html>\n")
    assert ran.stdout.endswith("</html>\n")
    assert "Summary: scanned 1 model" in ran.stderr
    parse(ran.stdout)


def _files(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def test_report_writes_nothing_but_the_page(story: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(story, home)
    before = _files(home)
    page = tmp_path / "out" / "report.html"
    ran = run_cli(home, "report", "--now", LATER, "--output", str(page))
    assert ran.code == 0, ran.stderr
    assert _files(home) == before
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "dry run" in ran.stderr


def test_report_refuses_an_unknown_model_before_writing(story: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    ran = run_cli(story, "report", "--model", "no_such_model", "--output", str(page))
    assert ran.code == 2
    [line] = [line for line in ran.stderr.splitlines() if line.strip()]
    assert line.startswith("error: --model no_such_model")
    assert not page.exists()


def test_report_needs_an_output(story: Path) -> None:
    ran = run_cli(story, "report")
    assert ran.code == 2
    assert "--output" in ran.stderr


def test_report_before_any_scan_shows_the_findings_and_creates_no_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ok(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    page = tmp_path / "report.html"
    ok(home, "report", "--now", DAY1, "--output", str(page))
    assert not (home / "state.db").exists()
    tree = parse(page.read_text(encoding="utf-8"))
    states = {td.text for td in tree.find("td", "state")}
    assert states == {"would open"}
    [timeline] = tree.find("ol", "timeline")
    assert [li.attrs.get("class") for li in timeline.find("li")] == ["empty"]


def test_report_on_an_unreachable_catalog_exits_3_and_writes_no_page(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    ran = run_cli(
        tmp_path / "home", "report", "--catalog", "datahub:http://127.0.0.1:9", "-o", str(page)
    )
    assert ran.code == 3
    assert ran.stderr.splitlines()[-1].startswith("error: cannot reach DataHub")
    assert not page.exists()


def test_each_finding_says_why_it_matters_what_to_do_and_its_evidence(
    pages: dict[str, Any],
) -> None:
    infos = builtin_infos()
    findings = pages["json"]["models"][0]["findings"]
    for name in ("scan", "report"):
        rows = parse(pages[name]).find("tr", "finding")
        for row, finding in zip(rows, findings, strict=True):
            [details] = row.find("details")
            text = " ".join(dd.text for dd in details.find("dd"))
            info = infos[finding["check"]]
            assert info.why in text
            assert info.action in text
            for key in finding["evidence"]:
                assert f"{key}: " in details.find("pre")[0].text
