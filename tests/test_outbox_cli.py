"""`mlcopilot outbox list|retry|deliver`, exit code 5, and notifying hand-made changes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.cli import app
from mlcopilot.store import open_store
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

DAY1 = "2026-11-20T09:00:00Z"

Cli = tuple[CliRunner, FakeGitHub, FakeSlack, list[str]]
"""The runner, the fakes it notifies, and the catalog and state options every call takes."""


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    catalog = tmp_path / "catalog.db"
    with LiteCatalog(catalog, create=True) as lite:
        load_metadata_files(lite, [DEMO_DATA / "01_catalog.json"])
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = notify_env(github, slack, MLCOPILOT_GROUP_WAIT="0", MLCOPILOT_TEST_WRITE_SPACING="0")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        common = ["--catalog", f"lite:{catalog}", "--state-url", f"sqlite:///{tmp_path / 's.db'}"]
        yield CliRunner(), github, slack, common


def test_undelivered_notifications_exit_5_and_are_retried_from_the_outbox(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, github, slack, common = cli
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "W" * 36)  # wrong: GitHub answers 401
    scanned = runner.invoke(app, ["scan", *common, "--now", DAY1])
    assert scanned.exit_code == 5, scanned.output
    assert "dead" in scanned.output
    assert "HTTP 401" in scanned.output
    assert "ghp_" not in scanned.output
    assert len(slack.roots()) == 3
    assert github.issues == {}

    listed = runner.invoke(app, ["outbox", "list", "--format", "json", common[2], common[3]])
    rows = json.loads(listed.output)
    assert {(r["sink"], r["status"]) for r in rows} == {("github", "dead")}
    assert all("HTTP 401" in r["last_error"] for r in rows)

    monkeypatch.setenv("GITHUB_TOKEN", github.token)
    retried = runner.invoke(app, ["outbox", "retry", *common])
    assert retried.exit_code == 0, retried.output
    assert "3 dead rows made pending again" in retried.output
    assert len(github.issues) == 3
    empty = runner.invoke(app, ["outbox", "list", common[2], common[3]])
    assert "No waiting outbox rows." in empty.output


def test_no_deliver_leaves_rows_for_outbox_deliver(cli: Cli) -> None:
    runner, github, slack, common = cli
    scanned = runner.invoke(app, ["scan", *common, "--now", DAY1, "--no-deliver"])
    assert scanned.exit_code == 0, scanned.output
    assert github.issues == {}
    assert slack.roots() == []
    table = runner.invoke(app, ["outbox", "list", common[2], common[3]])
    assert table.output.count("pending") == 7  # one write-back, three groups on two sinks
    delivered = runner.invoke(app, ["outbox", "deliver", *common])
    assert delivered.exit_code == 0, delivered.output
    assert len(github.issues) == 3
    assert len(slack.roots()) == 3


def test_resolving_by_hand_closes_the_issue_and_acknowledging_silences(cli: Cli) -> None:
    runner, github, _slack, common = cli
    assert runner.invoke(app, ["scan", *common, "--now", DAY1, "--format", "json"]).exit_code == 0
    incidents = json.loads(
        runner.invoke(app, ["incidents", "list", "--format", "json", common[2], common[3]]).output
    )
    pii = next(i for i in incidents if i["check"] == "pii_exposure")
    stale = next(i for i in incidents if i["check"] == "stale_source")
    resolved = runner.invoke(app, ["incidents", "resolve", pii["id"], *common])
    assert resolved.exit_code == 0, resolved.output
    closed = [i for i in github.issues.values() if i["state"] == "closed"]
    assert len(closed) == 1
    assert "PII exposure" in closed[0]["title"]
    state = [common[2], common[3]]
    acked = runner.invoke(app, ["incidents", "ack", stale["id"], "--by", "alice", *state])
    assert acked.exit_code == 0, acked.output
    later = runner.invoke(app, ["scan", *common, "--now", "2026-11-21T09:00:00Z"])
    assert later.exit_code == 0, later.output
    reminded = [c["body"] for cs in github.comments.values() for c in cs if "Reminder" in c["body"]]
    assert len(reminded) == 1  # the deprecated source; the acknowledged stale source is quiet


UTC_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def test_a_row_under_a_dead_relays_lease_exits_5_and_says_when_it_goes_out(cli: Cli) -> None:
    runner, github, slack, common = cli
    assert runner.invoke(app, ["scan", *common, "--now", DAY1, "--no-deliver"]).exit_code == 0
    with open_store(common[3]) as store:  # a relay claimed one row, then its process died
        now = datetime.now(UTC)
        (claim,) = store.claim(
            sinks=["github"], owner="ci-7:4242:dead", now=now, lease=timedelta(minutes=2)
        )
    claimed = claim.item
    delivered = runner.invoke(app, ["outbox", "deliver", *common])
    assert delivered.exit_code == 5, delivered.output
    said = " ".join(delivered.output.split())
    assert "Nothing was due" not in said
    assert re.search(
        rf"outbox row {claimed.id}, github open\): still being sent by ci-7:4242:dead \(its "
        rf"lease runs until {UTC_TIME}\); if that process died, the row goes out after "
        rf"{UTC_TIME}",
        said,
    ), said
    assert len(github.issues) == 2  # the other groups went out
    assert len(slack.roots()) == 3
    rescanned = runner.invoke(app, ["scan", *common])
    assert rescanned.exit_code == 5, rescanned.output
    assert "still being sent by ci-7:4242:dead" in " ".join(rescanned.output.split())
    listed = runner.invoke(app, ["outbox", "list", "--format", "json", common[2], common[3]])
    (row,) = [r for r in json.loads(listed.output) if r["id"] == claimed.id]
    assert row["status"] == "sending"


def test_outbox_list_shows_rows_waiting_on_a_rate_limit_and_until_when(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, github, _slack, common = cli
    monkeypatch.setenv("COLUMNS", "300")  # one table row per line
    github.fail(
        "POST",
        r"/repos/acme/ml-alerts/issues",
        403,
        {"message": "You have exceeded a secondary rate limit."},
        {"retry-after": "600"},
    )
    scanned = runner.invoke(app, ["scan", *common, "--now", DAY1])
    assert scanned.exit_code == 5, scanned.output
    assert re.search(rf"next attempt at {UTC_TIME}", " ".join(scanned.output.split()))
    listed = runner.invoke(app, ["outbox", "list", "--format", "json", common[2], common[3]])
    rows = json.loads(listed.output)
    assert {r["status"] for r in rows} == {"pending"}  # the limited row; the others wait behind
    (row,) = [r for r in rows if r["last_error"]]
    waits_until = datetime.fromisoformat(row["next_attempt_at"])
    shown = waits_until.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert row["last_error"].startswith(f"rate limited until {shown}: GitHub POST /issues")
    table = runner.invoke(app, ["outbox", "list", common[2], common[3]])
    assert "next attempt" in table.output
    (line,) = [x for x in table.output.splitlines() if x.strip().startswith(str(row["id"]))]
    assert line.count(shown) == 2  # when it goes out, and why: rate limited until then
    assert "rate limited until" in line
