"""Links from GitHub issues and Slack messages to the published HTML report (``report.url``).

A scan's rows carry the link in their payload (``report``), made when the scan plans them:
the fakes receive it in the issue body, its comments, the Slack root message and its thread;
a row delivered later by a relay configured with another URL still links to its own scan's
report; without the setting nothing changes (no key, no line); a bad URL is refused before
anything is scanned.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.cli import app
from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import decode_notification, encode_notification
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.config import NotifySettings
from testing.builders import model_urn
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.notify_world import CUSTOMERS, Script, notify_env, world
from tests.conftest import DEMO_DATA

REPORT = "https://ci.example.com/acme/ml/runs/1842/mlcopilot-report.html"


def _drift() -> Script:
    return {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}


def _texts(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(b["text"]["text"] for b in blocks if b.get("type") == "section")


def test_the_issue_its_comments_and_the_slack_thread_link_to_the_report(tmp_path: Path) -> None:
    with world(tmp_path, MLCOPILOT_REPORT_URL=REPORT) as w:
        w.script = _drift()
        w.scan()
        (issue,) = w.github.issues.values()
        assert f"**Report:** [lineage, findings and timeline]({REPORT})" in issue["body"]
        (root,) = w.slack.roots()
        assert f"<{REPORT}|Open the HTML report>" in _texts(root["blocks"])

        w.clock.advance(timedelta(hours=1))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.CRITICAL, "removed"))
        w.scan()
        (update,) = w.github.comments[issue["number"]]
        assert f"({REPORT})" in update["body"]
        (reply,) = w.slack.replies(root["ts"])
        assert f"<{REPORT}|Open the HTML report>" in _texts(reply["blocks"])


def test_a_report_per_model_gives_each_model_its_link(tmp_path: Path) -> None:
    template = "https://reports.example.com/ml/{model}.html"
    models = {"churn": ["raw.customers"], "ltv model": ["raw.customers"]}
    with world(tmp_path, models=models, MLCOPILOT_REPORT_URL=template) as w:
        w.script = _drift()
        w.scan()
        (issue,) = w.github.issues.values()
        body = issue["body"]
        (root,) = w.slack.roots()
        text = _texts(root["blocks"])
    churn = "https://reports.example.com/ml/churn.html"
    ltv = "https://reports.example.com/ml/ltv%20model.html"  # the name, quoted
    assert f"- `churn`: [HTML report]({churn})" in body
    assert f"- `ltv model`: [HTML report]({ltv})" in body
    assert f"<{churn}|HTML report: churn>" in text
    assert f"<{ltv}|HTML report: ltv model>" in text


def test_without_the_setting_rows_keep_their_old_shape_and_say_nothing_of_a_report(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        w.script = _drift()
        w.scan()
        (issue,) = w.github.issues.values()
        (root,) = w.slack.roots()
        with w.store() as store:
            payloads = [row.payload for row in store.outbox()]
    assert "Report" not in issue["body"]
    assert "HTML report" not in _texts(root["blocks"])
    assert payloads
    assert all("report" not in p for p in payloads)


def test_a_payload_carries_the_links_and_reads_them_back(tmp_path: Path) -> None:
    with world(tmp_path, MLCOPILOT_REPORT_URL=REPORT) as w:
        w.script = _drift()
        w.scan(deliver=False)
        with w.store() as store:
            rows = [r for r in store.outbox() if r.sink in ("github", "slack")]
    assert {r.sink for r in rows} == {"github", "slack"}
    for row in rows:
        assert row.payload["report"] == {model_urn("churn"): REPORT}
        notification = decode_notification(row.payload)
        assert notification.report_urls == {model_urn("churn"): REPORT}
        again = encode_notification(notification)
        assert again["report"] == row.payload["report"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://ci.example.com/r.html", "must be an https:// URL with a host"),
        ("https:///r.html", "must be an https:// URL with a host"),
        ("https://bot:pw@ci.example.com/r.html", "user@ credentials"),
        ("https://ci.example.com/{run_id}/r.html", "the only placeholder is {model}"),
        ("https://ci.example.com/r.html) [x](https://evil.example", "characters a link cannot"),
        ("https://ci.example.com/a|b>", "characters a link cannot"),
        ("javascript:alert(1)", "characters a link cannot"),
    ],
)
def test_a_bad_report_url_is_refused_naming_the_variable(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        NotifySettings.from_env({"MLCOPILOT_REPORT_URL": url})
    message = str(caught.value)
    assert message.startswith("MLCOPILOT_REPORT_URL: ")
    assert problem in message
    assert "pw" not in message


# --- through the command line


@pytest.fixture
def demo_catalog(tmp_path: Path) -> list[str]:
    catalog = tmp_path / "catalog.db"
    with LiteCatalog(catalog, create=True) as lite:
        load_metadata_files(lite, [DEMO_DATA / "01_catalog.json"])
    return ["--catalog", f"lite:{catalog}", "--state-url", f"sqlite:///{tmp_path / 's.db'}"]


def test_a_row_delivered_later_links_to_the_report_of_the_scan_that_planned_it(
    demo_catalog: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = notify_env(github, slack, MLCOPILOT_GROUP_WAIT="0", MLCOPILOT_TEST_WRITE_SPACING="0")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MLCOPILOT_REPORT_URL", "https://ci.example.com/runs/1/report.html")
        scanned = runner.invoke(
            app, ["scan", *demo_catalog, "--now", "2026-11-20T09:00:00Z", "--no-deliver"]
        )
        assert scanned.exit_code == 0, scanned.output
        assert github.issues == {}
        # The next CI run publishes its own report; its relay delivers the first run's rows.
        monkeypatch.setenv("MLCOPILOT_REPORT_URL", "https://ci.example.com/runs/2/report.html")
        delivered = runner.invoke(app, ["outbox", "deliver", *demo_catalog])
        assert delivered.exit_code == 0, delivered.output
    assert len(github.issues) == 3
    for issue in github.issues.values():
        assert "(https://ci.example.com/runs/1/report.html)" in issue["body"]
        assert "runs/2" not in issue["body"]
    for root in slack.roots():
        assert "<https://ci.example.com/runs/1/report.html|" in _texts(root["blocks"])


def test_a_bad_report_url_stops_the_scan_with_one_error_line(
    demo_catalog: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MLCOPILOT_REPORT_URL", "http://ci.example.com/report.html")
    done = CliRunner().invoke(app, ["scan", *demo_catalog, "--now", "2026-11-20T09:00:00Z"])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "error: MLCOPILOT_REPORT_URL: it must be an https:// URL with a host"
    ]
    assert not (tmp_path / "s.db").exists()  # refused before anything was stored


def test_config_show_lists_the_report_url_and_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLCOPILOT_REPORT_URL", REPORT)
    shown = CliRunner().invoke(app, ["config", "show", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["report.url"] == {
        "value": REPORT,
        "source": "MLCOPILOT_REPORT_URL",
    }


STORED = Path(__file__).parent / "stored"


@pytest.mark.parametrize("name", sorted(p.name for p in STORED.glob("*.json")))
def test_rows_stored_before_the_links_read_back_without_one(name: str) -> None:
    payload = json.loads((STORED / name).read_text(encoding="utf-8"))
    assert "report" not in payload
    notification = decode_notification(payload)
    assert notification.report_urls == {}
    assert "report" not in encode_notification(notification)
