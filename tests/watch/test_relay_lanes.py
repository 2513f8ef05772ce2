"""The watcher delivers each sink on its own lane: a stalled DataHub write-back holds back no Slack.

The installed ``mlcopilot watch`` reads DataHub (the stand-in) and posts to the fake Slack. The
stand-in holds every Rest.li ingestion (``POST /aspects``, how the write-back emits) until the
test lets it go: the write-back row of the start-up scan is then stuck in its first attempt.
Its Slack rows come after it in the outbox; with one relay loop over all sinks they would wait
for it (until the SDK's timeout failed it). With a lane per sink, Slack has them all while the
write-back is still on that first attempt.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from mlcopilot.lineage.downstream import DownstreamIndex
from mlcopilot.model import OutboxItem, OutboxStatus
from mlcopilot.settings import load_settings
from mlcopilot.store import open_store
from mlcopilot.watch.worker import Worker, WorkerOptions
from standin.fixtures import StandInFactory
from standin.server import StandIn
from testing.broker import Events, WatchProcess
from testing.installed_cli import MLCOPILOT
from tests.watch.test_lease import demo_records
from tests.watch.test_wire_watch import STARTUP_INCIDENTS, Home, assert_no_duplicates

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")

STALL_BOUND_S = 120.0
"""The longest the stand-in holds a write: a failing test never leaves a request hung for good."""


class StalledWrites:
    """Holds every ``POST /aspects`` on the stand-in until :meth:`release`."""

    def __init__(self, server: StandIn) -> None:
        self.reached = threading.Event()
        self._released = threading.Event()
        server.inject("POST /aspects", hook=self._hold)

    def _hold(self) -> None:
        self.reached.set()
        self._released.wait(STALL_BOUND_S)

    def release(self) -> None:
        self._released.set()


def rows(home: Home) -> list[OutboxItem]:
    """Every outbox row ever made."""
    with open_store(home.state_url, create=False, read_only=True) as store:
        return store.outbox(limit=100_000)


def slack_caught_up(home: Home) -> bool:
    """The start-up scan's Slack rows exist, and Slack has all of them."""
    slack = [r for r in rows(home) if r.sink == "slack"]
    return bool(slack) and all(r.status == OutboxStatus.DONE for r in slack)


def test_a_stalled_writeback_does_not_hold_back_slack(
    home: Home, events: Events, standin_factory: StandInFactory
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    home.env["MLCOPILOT_CATALOG"] = f"datahub:{server.url}"
    stalled = StalledWrites(server)
    env = {**home.env, "MLCOPILOT_HOME": str(home.path)}
    watcher = WatchProcess([str(MLCOPILOT)], env, home.path.parent / "lanes.log").start()
    try:
        watcher.wait_until(lambda: len(home.incidents()) >= STARTUP_INCIDENTS, "the startup scan")
        watcher.wait_until(stalled.reached.is_set, "the write-back reaching DataHub")
        watcher.wait_until(lambda: slack_caught_up(home), "Slack's notifications")

        # Slack has every message while the write-back is still in its first attempt: it
        # neither failed (the SDK's timeout) nor went through before Slack's rows did.
        writeback = [r for r in rows(home) if r.sink == "datahub"]
        assert [(r.status, r.attempts, r.last_error) for r in writeback] == [
            (OutboxStatus.SENDING, 1, None)
        ]
        assert home.slack.messages
        assert_no_duplicates(home)

        stalled.release()
        watcher.wait_until(lambda: home.idle(events), "the write-back once DataHub answers")
        assert Counter(r.status for r in rows(home) if r.sink == "datahub") == Counter(
            {OutboxStatus.DONE: 1}
        )
        assert watcher.terminate() == 0
    finally:
        stalled.release()
        watcher.kill()


SLACK = {"SLACK_BOT_TOKEN": "xoxb-not-a-token", "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts"}
GITHUB = {"MLCOPILOT_GITHUB_REPO": "acme/ml-alerts", "GITHUB_TOKEN": "not-a-token"}


@pytest.mark.parametrize(
    ("extra", "lanes"),
    [
        ({}, ("datahub",)),
        ({"MLCOPILOT_WRITE_BACK": "false"}, ()),
        (SLACK, ("datahub", "slack")),
        ({**GITHUB, **SLACK, "MLCOPILOT_WRITE_BACK": "false"}, ("github", "slack")),
        ({**GITHUB, **SLACK}, ("datahub", "github", "slack")),
    ],
)
def test_one_relay_lane_per_configured_sink(
    tmp_path: Path, extra: dict[str, str], lanes: tuple[str, ...]
) -> None:
    settings = load_settings(environ={"MLCOPILOT_HOME": str(tmp_path), **extra})
    worker = Worker(settings, DownstreamIndex(), WorkerOptions())
    assert worker.lanes == lanes
