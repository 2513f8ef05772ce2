"""A watcher's notification lane keeps its sink from one pass to the next.

What a sink learns is meant to outlive a pass: the Slack channel's id, looked up by name with
``conversations.list`` (a method Slack rate-limits at about 20 calls a minute), and the labels
the GitHub sink made sure of. The lane here is the watcher's own relay loop
(``watch.relays._relay``), run in a thread over a real store, fake Slack and GitHub servers
speaking their APIs, and two scans, each followed by the lane's pass over what it committed.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from mlcopilot.incidents.payload import SinkName
from mlcopilot.model import OutboxStatus, Severity
from mlcopilot.settings import load_settings
from mlcopilot.store import open_store
from mlcopilot.watch.relays import _relay
from testing.builders import ds
from testing.notify_world import CUSTOMERS, World, world

WAIT_S = 30.0
MODELS = {"churn": ["raw.customers"], "fraud": ["raw.transactions"]}
TRANSACTIONS = ds("raw.transactions")


@contextmanager
def lane(w: World, tmp_path: Path, name: SinkName) -> Iterator[Callable[[], None]]:
    """The watcher's relay loop for ``name`` in a thread; yields what wakes it."""
    settings = load_settings(
        environ={
            "MLCOPILOT_HOME": str(tmp_path / "home"),
            "MLCOPILOT_STATE_URL": w.state_url,
            "MLCOPILOT_WRITE_BACK": "false",
            **w.env,
        }
    )
    spawn = multiprocessing.get_context("spawn")
    wake, stop = spawn.Event(), spawn.Event()
    thread = threading.Thread(
        target=_relay, args=(settings, name, timedelta(seconds=1), wake, stop), daemon=True
    )
    thread.start()
    try:
        yield wake.set
    finally:
        stop.set()
        wake.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()


def wait_for(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def delivered(w: World, sink: SinkName) -> bool:
    """Every outbox row of ``sink`` is delivered."""
    with open_store(w.state_url, create=False, read_only=True) as store:
        rows = [r for r in store.outbox(limit=1000) if r.sink == sink]
    return bool(rows) and all(r.status == OutboxStatus.DONE for r in rows)


def scan_twice(w: World, sink: SinkName, wake: Callable[[], None]) -> None:
    """Two scans, each opening an incident on a model of its own, each delivered by a pass."""
    for n, datasets in enumerate(([CUSTOMERS], [CUSTOMERS, TRANSACTIONS]), start=1):
        w.script = {"pii_exposure": {d: [("a", Severity.HIGH, None)] for d in datasets}}
        w.clock.advance(timedelta(hours=1))
        w.scan(deliver=False)
        wake()
        wait_for(lambda: delivered(w, sink), f"the lane's delivery of scan {n}")


def test_the_slack_lane_looks_the_channel_up_once(tmp_path: Path) -> None:
    with world(tmp_path, models=MODELS, MLCOPILOT_TEST_WRITE_SPACING="0s") as w:
        assert w.env["MLCOPILOT_SLACK_CHANNEL"] == "#ml-alerts"  # by name: looked up
        with lane(w, tmp_path, "slack") as wake:
            scan_twice(w, "slack", wake)
        assert len(w.slack.roots()) == 2  # one a model
        assert len(w.slack.calls("POST", "/api/conversations.list")) == 1


def test_the_github_lane_makes_sure_of_its_labels_once(tmp_path: Path) -> None:
    with world(tmp_path, models=MODELS, MLCOPILOT_TEST_WRITE_SPACING="0s") as w:
        w.env.pop("SLACK_BOT_TOKEN")
        with lane(w, tmp_path, "github") as wake:
            scan_twice(w, "github", wake)
        assert len(w.github.calls("POST", r"/repos/[^/]+/[^/]+/issues")) == 2  # one a model
        looked_up = [r.path for r in w.github.calls("GET", r"/repos/[^/]+/[^/]+/labels/.+")]
        assert looked_up
        assert len(looked_up) == len(set(looked_up))  # each label once, not once a pass
