"""Two ``mlcopilot watch`` processes in one consumer group, on one PostgreSQL state database.

The group splits the topic's partitions between them (each reads what the other does not),
and the state database's rescan requests and outbox leases make sure a change is reported
once, whichever watcher saw its events.
"""

from __future__ import annotations

import re
import time

import pytest

from testing.broker import Events, WatchProcess, entity_change_event
from tests.watch.test_wire_watch import (
    CUSTOMERS,
    MODEL,
    Home,
    assert_no_duplicates,
    field_urn,
    publish_schema_change,
    start_and_settle,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")

_RECEIVED = re.compile(r"Kafka msg received: (\S+), (\d+), (\d+)")


def received(watcher: WatchProcess, topic: str) -> set[int]:
    """The partitions of ``topic`` this watcher consumed from (DataHub's own debug line)."""
    return {int(m[2]) for m in _RECEIVED.finditer(watcher.output()) if m[1].rstrip(",") == topic}


@pytest.mark.postgres
def test_two_watchers_in_one_group_split_partitions_and_never_duplicate(
    home: Home, events: Events, postgres_state_url: str
) -> None:
    home.env["MLCOPILOT_STATE_URL"] = home.state_url = postgres_state_url
    # --debug: the Kafka source logs each message's topic and partition as it consumes it
    first = start_and_settle(home, events, "first", "--debug")
    second = home.watcher("second", "--debug").start()
    with first, second:
        topic = home.topics.platform_event
        home.load("02_schema_change.json")
        publish_schema_change(events)
        # Tag events on the dataset and on a column: keyed by the dataset's urn and by the
        # schemaField urn, they land on both partitions. They go on (one pair a second, a
        # bounded number) until each watcher has consumed from a partition, since the group
        # rebalances once the second watcher joins, at a moment no one is told of.
        for _ in range(60):
            if received(first, topic) and received(second, topic):
                break
            for urn in (CUSTOMERS, field_urn("email")):
                events.change(
                    entity_change_event(urn, "TAG", "ADD", modifier="urn:li:tag:Reviewed")
                )
            events.flush()
            time.sleep(1.0)
        assert {p for t, p, _ in events.sent if t == topic} == {0, 1}
        first.wait_until(lambda: len(home.drifts()) >= 1, "a drift incident")
        first.wait_until(lambda: home.idle(events), "both watchers idle")

        # After the group settled each member reads its own partition: the split.
        mine, theirs = received(first, topic), received(second, topic)
        assert mine, (mine, theirs)
        assert theirs, (mine, theirs)
        assert mine | theirs == {0, 1}
        removed = [i for i in home.drifts() if i.field == "signup_date"]
        assert [(i.model, i.generation) for i in removed] == [(MODEL, 1)]
        assert_no_duplicates(home)
        assert first.terminate() == 0
        assert second.terminate() == 0
