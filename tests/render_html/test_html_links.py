"""The report links each finding to its GitHub issue once the issue exists (read from the
store's sink references), next to DataHub's pages: a scan notifies a fake GitHub, then
``mlcopilot report`` and ``scan --format html`` link the issues it opened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.cli import app
from testing.fakes.github import FakeGitHub
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA
from tests.render_html.dom import parse

DAY1, LATER = "2026-11-20T09:00:00Z", "2026-11-20T10:00:00Z"


@pytest.fixture
def common(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeGitHub, list[str]]]:
    catalog = tmp_path / "catalog.db"
    with LiteCatalog(catalog, create=True) as lite:
        load_metadata_files(lite, [DEMO_DATA / "01_catalog.json"])
    github = FakeGitHub()
    with github.running():
        env = notify_env(github, MLCOPILOT_GROUP_WAIT="0", MLCOPILOT_TEST_WRITE_SPACING="0")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield (
            github,
            ["--catalog", f"lite:{catalog}", "--state-url", f"sqlite:///{tmp_path / 's.db'}"],
        )


def _issue_links(page: Path) -> dict[str, list[str]]:
    rows = parse(page.read_text(encoding="utf-8")).find("tr", "finding")
    assert rows
    return {
        row.attrs["data-incident"]: [
            a.attrs["href"] for a in row.find("a") if a.attrs["href"].startswith("https://github")
        ]
        for row in rows
    }


def test_findings_link_their_github_issue(
    common: tuple[FakeGitHub, list[str]], tmp_path: Path
) -> None:
    github, options = common
    runner = CliRunner()
    scan_page, report_page = tmp_path / "scan.html", tmp_path / "report.html"
    args = ["scan", *options, "--now", DAY1, "--format", "html", "--output", str(scan_page)]
    scanned = runner.invoke(app, args, catch_exceptions=False)
    assert scanned.exit_code == 0, scanned.output
    args = ["report", *options, "--now", LATER, "--output", str(report_page)]
    ran = runner.invoke(app, args, catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    expected = {i["html_url"] for i in github.issues.values()}
    assert expected
    for page in (scan_page, report_page):  # the scan's page: the issues its relay just opened
        links = _issue_links(page)
        assert {href for hrefs in links.values() for href in hrefs} == expected
        assert all(len(hrefs) == 1 for hrefs in links.values())


def _timeline_links(page: Path) -> dict[tuple[str, str], list[str]]:
    events = parse(page.read_text(encoding="utf-8")).find("li")
    return {
        (li.attrs["data-incident"], li.attrs["data-event"]): [
            a.attrs["href"] for a in li.find("a") if a.attrs["href"].startswith("https://github")
        ]
        for li in events
        if "data-event" in li.attrs
    }


def test_an_acknowledged_then_resolved_incident_keeps_its_issue_link(
    common: tuple[FakeGitHub, list[str]], tmp_path: Path
) -> None:
    github, options = common
    state = options[options.index("--state-url") :][:2]
    runner = CliRunner()
    page = tmp_path / "report.html"

    def report() -> None:
        ran = runner.invoke(app, ["report", *options, "--output", str(page)])
        assert ran.exit_code == 0, ran.output

    scanned = runner.invoke(app, ["scan", *options, "--now", DAY1], catch_exceptions=False)
    assert scanned.exit_code == 0, scanned.output
    report()
    before = _issue_links(page)
    incident, (issue,) = next((i, hrefs) for i, hrefs in sorted(before.items()) if hrefs)
    assert issue in {i["html_url"] for i in github.issues.values()}

    acked = runner.invoke(app, ["incidents", "ack", incident, "--by", "alice", *state])
    assert acked.exit_code == 0, acked.output
    report()
    assert _issue_links(page)[incident] == [issue]
    assert _timeline_links(page)[(incident, "opened")] == [issue]
    assert _timeline_links(page)[(incident, "acknowledged")] == [issue]

    args = ["incidents", "resolve", incident, "--reason", "fixed upstream", *options]
    resolved = runner.invoke(app, args)
    assert resolved.exit_code == 0, resolved.output
    report()
    timeline = _timeline_links(page)
    for event in ("opened", "acknowledged", "resolved"):
        assert timeline[(incident, event)] == [issue], event
    # Its risk is still in the catalog, so the report's scan would open it again: a new
    # occurrence, not yet reported anywhere, shown without the old issue.
    row = parse(page.read_text(encoding="utf-8")).find("tr", "finding")
    state_cell = {r.attrs["data-incident"]: r for r in row}[incident].find("td", "state")
    assert [td.text for td in state_cell] == ["would open"]
    assert _issue_links(page)[incident] == []
