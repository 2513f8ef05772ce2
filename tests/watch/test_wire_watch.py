"""``mlcopilot watch`` on the real wire: the installed command, tansu, the registry stand-in.

Each test runs the watcher as a user does (a subprocess of the console script) against a Lite
catalog built from the demo's own metadata (``churn_predictor_v1`` over ``raw.customers``),
changes the catalog as DataHub would, publishes the change events GMS sends for it, and looks
only at what a user sees: the incidents in the state database, the Slack messages (the local
fake), the consumer group's committed offsets and the exit code. State is polled with a
deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.errors import MissingStore, StoreError
from mlcopilot.model import Incident, OutboxStatus
from mlcopilot.store import open_store
from testing.broker import Broker, Events, Topics, WatchProcess, entity_change_event, watch_env
from testing.fakes.slack import FakeSlack
from testing.installed_cli import MLCOPILOT, run_cli
from testing.notify_world import notify_env
from testing.schema_registry import SchemaRegistry
from tests.conftest import DEMO_DATA

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
STARTUP_INCIDENTS = 4
"""What the demo catalog opens on its first scan (PII, deprecated, two stale sources)."""


def field_urn(path: str) -> str:
    return f"urn:li:schemaField:({CUSTOMERS},{path})"


def publish_schema_change(events: Events) -> None:
    """What GMS emits for 02_schema_change.json: signup_date removed, country renamed."""
    events.change(
        entity_change_event(
            CUSTOMERS,
            "TECHNICAL_SCHEMA",
            "REMOVE",
            modifier=field_urn("signup_date"),
            parameters={"fieldPath": "signup_date", "nullable": False},
        )
    )
    events.change(
        entity_change_event(
            CUSTOMERS,
            "TECHNICAL_SCHEMA",
            "MODIFY",
            modifier=field_urn("country_code"),
            parameters={"fieldPath": "country_code", "nullable": True},
        )
    )
    events.flush()


@dataclass
class Home:
    """One user's mlcopilot home: Lite catalog, state database, fake Slack, watch settings."""

    path: Path
    env: dict[str, str]
    state_url: str
    slack: FakeSlack
    broker: Broker
    topics: Topics
    group: str

    def cli(self, *args: str) -> Any:
        ran = run_cli(self.path, *args, env=self.env)
        assert ran.code == 0, ran.stderr
        return ran

    def load(self, name: str) -> None:
        self.cli("catalog", "load", str(DEMO_DATA / name))

    def watcher(self, name: str = "watch", *options: str) -> WatchProcess:
        """``mlcopilot [OPTIONS] watch`` in this home, its output in ``<name>.log``."""
        env = {**self.env, "MLCOPILOT_HOME": str(self.path)}
        command = [str(MLCOPILOT), *options]
        return WatchProcess(command, env, self.path.parent / f"{name}.log")

    def incidents(self) -> list[Incident]:
        try:
            with open_store(self.state_url, create=False, read_only=True) as store:
                return store.incidents(include_resolved=True)
        except MissingStore:  # the watcher has not made it yet
            return []
        except StoreError as e:  # the watcher is making it now (the file exists, still empty)
            if "(0 bytes)" not in str(e):
                raise
            return []

    def pending(self) -> int:
        """Rescan requests waiting or claimed, plus outbox rows not delivered yet."""
        with open_store(self.state_url, create=False, read_only=True) as store:
            waiting = len(store.rescans())
            undelivered = store.outbox(statuses=[OutboxStatus.PENDING, OutboxStatus.SENDING])
        return waiting + len(undelivered)

    def requested(self, model: str) -> bool:
        """A rescan of ``model`` (or of every model) is waiting or claimed."""
        with open_store(self.state_url, create=False, read_only=True) as store:
            return any(r.model == model for r in store.rescans())

    def delivered(self) -> bool:
        """No outbox row is waiting to be sent or being sent."""
        with open_store(self.state_url, create=False, read_only=True) as store:
            return not store.outbox(statuses=[OutboxStatus.PENDING, OutboxStatus.SENDING])

    def outbox_rows(self) -> Counter[str]:
        """Outbox rows ever made (any status), by sink."""
        with open_store(self.state_url, create=False, read_only=True) as store:
            return Counter(row.sink for row in store.outbox(limit=100_000))

    def scan_runs(self) -> int:
        """Scans committed in the (SQLite) state database."""
        return _count(self.path / "state.db", "scan_runs")

    def catalog_versions(self) -> int:
        """Aspect versions in the Lite catalog: each write-back to DataHub adds some."""
        return _count(self.path / "catalog.db", "metadata_aspect_v2")

    def drifts(self) -> list[Incident]:
        return [i for i in self.incidents() if i.check == "schema_drift"]

    def acked_all(self, events: Events) -> bool:
        """The group has committed past every message ``events`` delivered, on each topic."""
        for topic in self.topics.all:
            wanted: dict[int, int] = {}
            for sent_topic, partition, offset in events.sent:
                if sent_topic == topic:
                    wanted[partition] = max(wanted.get(partition, 0), offset + 1)
            if not wanted:
                continue
            committed = self.broker.committed(self.group, topic, max(wanted) + 1)
            if any(committed.get(p, -1) < o for p, o in wanted.items()):
                return False
        return True

    def idle(self, events: Events) -> bool:
        """Every event acked, every request scanned, every notification delivered."""
        return self.acked_all(events) and self.pending() == 0


def _count(path: Path, table: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        count: int = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()
    return count


def slack_keys(slack: FakeSlack) -> list[str]:
    """The dedupe key of every message the bot posted (roots and thread replies)."""
    keys = []
    for message in slack.messages:
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        if message.get("bot_id") and payload.get("dedupe_key"):
            keys.append(str(payload["dedupe_key"]))
    return keys


def assert_no_duplicates(home: Home) -> None:
    twice = [k for k, n in Counter(slack_keys(home.slack)).items() if n > 1]
    assert not twice, f"Slack got these notifications more than once: {twice}"
    opened = Counter((i.check, i.entity, i.field) for i in home.incidents())
    assert all(n == 1 for n in opened.values()), opened


@contextmanager
def lite_home(
    tmp_path: Path, broker: Broker, schema_registry: SchemaRegistry, topics: Topics
) -> Iterator[Home]:
    """The demo catalog loaded, Slack faked, the watch settings pointing at this test's topics.

    The ``home`` fixture (tests/watch/conftest.py), so the scale-out tests share it.
    """
    slack = FakeSlack()
    group = f"mlcopilot-watch-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "home"
    with slack.running():
        env = {
            **notify_env(slack=slack),
            **watch_env(broker, schema_registry.url, topics, group),
            # a new incident's notification goes at once (the default waits 30 s to group)
            "MLCOPILOT_GROUP_WAIT": "0s",
            "MLCOPILOT_TEST_WRITE_SPACING": "0s",
        }
        made = Home(path, env, f"sqlite:///{path / 'state.db'}", slack, broker, topics, group)
        made.load("01_catalog.json")
        yield made


def start_and_settle(
    home: Home, events: Events, name: str = "watch", *options: str
) -> WatchProcess:
    """A watcher started, its startup scan committed and its notifications delivered."""
    watcher = home.watcher(name, *options).start()
    try:
        watcher.wait_until(lambda: len(home.incidents()) >= STARTUP_INCIDENTS, "the startup scan")
        watcher.wait_until(lambda: home.idle(events), "the startup scan's notifications")
    except BaseException:
        watcher.kill()  # a test that fails here leaves no watcher running
        raise
    return watcher


def test_a_schema_change_event_opens_the_drift_incident_and_sigterm_exits_0(
    home: Home, events: Events
) -> None:
    with start_and_settle(home, events) as watcher:
        assert home.drifts() == []
        # DataHub changed the schema, then GMS published its change events.
        home.load("02_schema_change.json")
        publish_schema_change(events)

        watcher.wait_until(lambda: len(home.drifts()) >= 1, "a drift incident")
        watcher.wait_until(lambda: home.idle(events), "the drift notifications")
        removed = [i for i in home.drifts() if i.field == "signup_date"]
        assert [(i.model, i.entity, i.change, i.state) for i in removed] == [
            (MODEL, CUSTOMERS, "removed", "open")
        ]
        assert any("signup_date" in str(m) for m in home.slack.messages), home.slack.messages
        assert_no_duplicates(home)

        relays = watcher.children()
        assert relays, "no relay process"  # one per lane: the write-back, Slack
        assert watcher.terminate() == 0
        assert watcher.gone(relays), f"relay processes {relays} outlived the watcher's exit"
    assert home.acked_all(events)


def test_the_same_events_replayed_find_nothing_new(home: Home, events: Events) -> None:
    with start_and_settle(home, events) as watcher:
        home.load("02_schema_change.json")
        publish_schema_change(events)
        watcher.wait_until(lambda: len(home.drifts()) >= 1, "a drift incident")
        watcher.wait_until(lambda: home.idle(events), "the first scan's notifications")
        before = {(i.id, i.generation, i.state) for i in home.incidents()}
        posted = len(home.slack.messages)
        written = home.catalog_versions()
        rows = home.outbox_rows()
        scans = home.scan_runs()

        publish_schema_change(events)  # the same events again (a redelivery, a replay)
        watcher.wait_until(lambda: home.scan_runs() > scans, "the replayed events' rescan")
        watcher.wait_until(lambda: home.idle(events), "the replayed events handled")

        assert {(i.id, i.generation, i.state) for i in home.incidents()} == before
        assert len(home.slack.messages) == posted
        # The rescan plans the write-back again (one outbox row per scan, its DataHub state
        # in full), and the relay finds DataHub already holds it: nothing is written there,
        # so no change event comes back, and no notification row is added.
        assert home.catalog_versions() == written
        added = home.outbox_rows() - rows
        assert added <= Counter({"datahub": home.scan_runs() - scans}), added
        assert watcher.terminate() == 0


def test_sigkill_mid_scan_then_restart_loses_and_duplicates_nothing(
    home: Home, events: Events
) -> None:
    watcher = start_and_settle(home, events, "first")
    home.load("02_schema_change.json")
    # Another writer holds the Lite catalog (rollback-journal mode, so readers wait): the
    # rescan the events ask for starts and cannot finish while this lock is held.
    lock = sqlite3.connect(home.path / "catalog.db", isolation_level=None, timeout=30)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        publish_schema_change(events)
        # Acked: the broker will never deliver these events again; only the state database
        # remembers that the model must be rescanned.
        watcher.wait_until(lambda: home.acked_all(events), "the events acked")
        watcher.wait_until(lambda: home.requested(MODEL), "the rescan request recorded")
        relays = watcher.children()
        assert relays, "no relay process"
        watcher.kill()
        # Its relay lanes die with it, as threads would: none delivers on as an orphan.
        assert watcher.gone(relays), f"relay processes {relays} outlived the killed watcher"
    finally:
        lock.rollback()
        lock.close()
    assert home.drifts() == []  # the scan never committed

    with home.watcher("second").start() as again:
        again.wait_until(lambda: len(home.drifts()) >= 1, "the drift incident after restart")
        again.wait_until(lambda: home.delivered(), "the restarted watcher's notifications")
        removed = [i for i in home.drifts() if i.field == "signup_date"]
        assert [(i.change, i.state, i.generation) for i in removed] == [("removed", "open", 1)]
        assert any("signup_date" in str(m) for m in home.slack.messages), home.slack.messages
        assert_no_duplicates(home)
        assert again.terminate() == 0
