"""The crash matrix: the process dies at each step between the commit and every sink; the
next run delivers the rest exactly once (reliability.md §3.2, T1–T4), with the Slack channel
given by name and by id.

In process, a failpoint raises an exception nothing catches (as a kill, the relay does no
cleanup: the row stays ``sending`` with its lease). One case kills a real ``mlcopilot scan``
process with ``os._exit(137)`` at the failpoint.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from mlcopilot.incidents.payload import OutboxStatus
from mlcopilot.model import Severity
from testing.builders import dataset, ml_model, write_metadata_file
from testing.failpoints import Killed, kill_at
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import CHANNEL_ID, FakeSlack
from testing.notify_world import CUSTOMERS, World, notify_env, world

pytestmark = pytest.mark.slow


def datahub_incidents(w: World) -> int:
    with sqlite3.connect(w.catalog_path) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(DISTINCT urn) FROM metadata_aspect_v2 "
            "WHERE aspect_name = 'incidentInfo' AND version = 0"
        ).fetchone()
    return int(count)


POINTS = [
    "after_commit",
    "before_send:datahub",
    "after_send:datahub",
    "after_done:datahub",
    "before_send:github",
    "after_send:github",
    "after_done:github",
    "before_send:slack",
    "after_done:slack",
]


# The channel as most people write it (a name: looked up, then its id used everywhere) and as
# an id (used as it is).
CHANNELS = ["#ml-alerts", CHANNEL_ID]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("point", POINTS)
def test_killed_anywhere_then_rerun_delivers_each_exactly_once(
    tmp_path: Path, point: str, channel: str
) -> None:
    with world(tmp_path, MLCOPILOT_SLACK_CHANNEL=channel) as w:
        w.script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at(point))
        w.clock.advance(timedelta(minutes=5))  # past the dead relay's lease
        again = w.scan()
        assert again.relay is not None
        assert again.relay.ok, again.relay
        w.clock.advance(timedelta(minutes=5))
        w.scan()
        assert len(w.github.created()) == 1
        assert len(w.github.issues) == 1
        assert len(w.slack.roots()) == 1
        assert datahub_incidents(w) == 1
        with w.store() as store:
            waiting = store.outbox(statuses=[OutboxStatus.PENDING, OutboxStatus.SENDING])
        assert waiting == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_killed_after_slack_accepted_is_reconciled_from_message_metadata(
    tmp_path: Path, channel: str
) -> None:
    with world(tmp_path, MLCOPILOT_SLACK_CHANNEL=channel) as w:
        w.script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at("after_send:slack"))
        w.clock.advance(timedelta(minutes=5))
        again = w.scan()
        assert len(w.slack.roots()) == 1  # found by its metadata in the channel history
        (read,) = w.slack.calls("POST", "/api/conversations.history")
        assert read.json()["channel"] == CHANNEL_ID  # the id, whatever the setting said
        assert again.relay is not None
        assert again.relay.warnings == ["Slack: reused the root message an earlier attempt posted"]


def test_the_window_slack_cannot_close_is_detected_and_reported(tmp_path: Path) -> None:
    with world(tmp_path, MLCOPILOT_SLACK_NO_RECONCILE="1") as w:
        w.script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at("after_send:slack"))
        w.clock.advance(timedelta(minutes=5))
        again = w.scan()
        assert len(w.slack.roots()) == 2  # the documented duplicate: at most one per crash
        assert again.relay is not None
        (warning,) = again.relay.warnings
        assert "may be a duplicate" in warning
        with w.store() as store:
            slack_rows = [
                i for i in store.outbox(statuses=[OutboxStatus.DONE]) if i.sink == "slack"
            ]
        assert slack_rows[0].warning is not None
        assert slack_rows[0].uncertain


def test_a_real_process_killed_after_github_accepted_never_opens_a_second_issue(
    tmp_path: Path,
) -> None:
    catalog = tmp_path / "catalog.db"
    metadata = write_metadata_file(
        tmp_path / "meta.json",
        [
            *dataset("raw.customers", fields=[("email", "string")], field_tags={"email": ["PII"]}),
            *ml_model("churn", training_data=["raw.customers"]),
        ],
    )
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = {
            **os.environ,
            **notify_env(github, slack),
            "MLCOPILOT_GROUP_WAIT": "0",
            "MLCOPILOT_TEST_WRITE_SPACING": "0",
            "MLCOPILOT_HOME": str(tmp_path / "home"),
        }

        def mlcopilot(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "mlcopilot", *args],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={**env, **extra},
            )

        assert (
            mlcopilot("catalog", "load", str(metadata), "--catalog", f"lite:{catalog}").returncode
            == 0
        )
        state = f"sqlite:///{tmp_path / 'state.db'}"
        common = ("--catalog", f"lite:{catalog}", "--state-url", state)
        killed = mlcopilot(
            "scan",
            *common,
            "--now",
            "2026-03-02T09:00:00Z",
            MLCOPILOT_FAILPOINT="after_send:github",
        )
        assert killed.returncode == 137, killed.stderr
        assert len(github.created()) == 1
        assert len(slack.roots()) == 0
        rerun = mlcopilot("scan", *common, "--now", "2026-03-02T10:00:00Z")
        assert rerun.returncode == 0, rerun.stderr
        assert "reused issue #1" in rerun.stdout
        assert len(github.created()) == 1
        assert len(github.issues) == 1
        assert len(slack.roots()) == 1
