"""A store's listeners hear of rescan requests made due by any process, on their schema only.

PostgreSQL's LISTEN/NOTIFY (:mod:`mlcopilot.store.wakeups`): each store below is opened on
its own, as another process's would be. SQLite cannot tell: its listeners return at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from mlcopilot.protocols import ALL_MODELS
from mlcopilot.store import SqlStore, open_store
from testing.postgres import fresh_schema

WAIT_S = 30.0
"""The longest a wake is waited for before the test fails (nothing sleeps a fixed time)."""
M1, M2 = "urn:li:mlModel:a", "urn:li:mlModel:b"


class _Wakes:
    """Counts the wakes a listener gave, and lets a test wait for the next ones."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def __call__(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def reach(self, count: int) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, WAIT_S)


@contextmanager
def listening(url: str) -> Iterator[_Wakes]:
    """A store on ``url`` listening on a thread of its own, stopped and closed afterwards.

    Yielded once it listens: its first wake, given as soon as it does.
    """
    wakes, stop = _Wakes(), threading.Event()
    store = open_store(url)
    outcome: list[object] = []

    def listen() -> None:
        try:
            outcome.append(store.listen_for_rescans(wakes, stop))
        except Exception as exc:  # shown by the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        assert wakes.reach(1), "the listener never started listening"
        yield wakes
    finally:
        stop.set()
        thread.join(WAIT_S)
        store.close()
    assert not thread.is_alive(), "the listener did not stop when asked"
    assert outcome == [True]


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema("mlc_wake") as url:
        open_store(url).close()  # the tables, before two stores open it at once
        yield url


@pytest.mark.postgres
def test_requests_a_split_and_a_request_made_again_while_scanned_each_wake_a_listener(
    pg_url: str,
) -> None:
    with listening(pg_url) as wakes, open_store(pg_url) as other:
        now = datetime.now(UTC)
        other.request_rescans([ALL_MODELS], reason="the hour", now=now)
        assert wakes.reach(2)
        [full] = other.claim_rescans(owner="w1", now=now, lease=timedelta(minutes=5))
        split = other.split_rescan(
            [M1, M2],
            size=1,
            reason="the hour",
            now=now,
            stale_after=timedelta(hours=1),
            owner="w1",
            held=[full],
            again_at=now + timedelta(hours=1),
        )
        assert split.batches == 2
        assert wakes.reach(3)  # the other watchers take batches at once

        other.request_rescans([M1], reason="an event", now=now)
        assert wakes.reach(4)
        [held] = other.claim_rescans(owner="w1", now=now, lease=timedelta(minutes=5))
        later = now + timedelta(seconds=1)
        other.request_rescans([M1], reason="another event while scanned", now=later)
        assert wakes.reach(5)
        assert other.complete_rescans([held], owner="w1", now=later) == 1
        assert wakes.reach(6)  # due again now: what changed may postdate what was read


@pytest.mark.postgres
def test_a_listener_hears_its_own_schema_only(pg_url: str) -> None:
    with fresh_schema("mlc_wake") as elsewhere, listening(pg_url) as wakes:
        with open_store(elsewhere) as stranger, open_store(pg_url) as neighbour:
            stranger.request_rescans([M1], reason="another schema", now=datetime.now(UTC))
            neighbour.request_rescans([M1], reason="this schema", now=datetime.now(UTC))
        assert wakes.reach(2)
        # Notifications arrive in commit order: had the stranger's woken it, this would be 3.
        assert wakes.count == 2


def test_a_sqlite_store_cannot_tell_and_says_so_at_once(store: SqlStore) -> None:
    if not store.url.startswith("sqlite"):
        pytest.skip("PostgreSQL listens: the tests above")
    assert store.listen_for_rescans(lambda: None, threading.Event()) is False
