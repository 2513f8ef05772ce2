"""A full rescan split into batch requests, on SQLite and PostgreSQL: made in one transaction
with the full-rescan request's completion, claimed one at a time after the models' requests,
joined rather than doubled while one is under way, taken over once a holder's lease lapses."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from mlcopilot.protocols import ALL_MODELS, BATCH_PREFIX, RescanRequest
from mlcopilot.store import SqlStore, open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=15)
HOUR = timedelta(hours=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def model(i: int) -> str:
    return f"urn:li:mlModel:(urn:li:dataPlatform:mlflow,m{i:03d},PROD)"


MODELS = [model(i) for i in range(10)]


def batches(store: SqlStore) -> list[RescanRequest]:
    return [r for r in store.rescans() if r.is_batch]


def split(store: SqlStore, now: datetime) -> int:
    """Start (or join) a full rescan of ``MODELS`` in batches of 4; how many batches it made."""
    done = store.split_rescan(MODELS, size=4, reason="test", now=now, stale_after=LEASE)
    return done.batches


def test_the_claimed_full_rescan_becomes_batches_in_the_transaction_that_reschedules_it(
    store: SqlStore,
) -> None:
    store.request_rescans([ALL_MODELS], reason="watch started", now=at(0))
    held = store.claim_rescans(owner="w1", now=at(1), lease=LEASE)
    assert [r.model for r in held] == [ALL_MODELS]
    done = store.split_rescan(
        MODELS,
        size=4,
        reason="watch started",
        now=at(2),
        stale_after=LEASE,
        owner="w1",
        held=held,
        again_at=at(1) + HOUR,
    )
    assert (done.batches, done.under_way, done.held) == (3, 0, True)
    made = batches(store)
    assert [list(b.models) for b in made] == [MODELS[0:4], MODELS[4:8], MODELS[8:10]]
    assert all(b.model.startswith(BATCH_PREFIX) and b.due_at == at(2) for b in made)
    assert made[0].reason == "full rescan, batch 1 of 3: watch started"
    [full] = [r for r in store.rescans() if r.model == ALL_MODELS]
    assert (full.claimed_by, full.due_at) == (None, at(1) + HOUR)


def test_a_watcher_that_lost_the_full_rescan_request_makes_no_batches(store: SqlStore) -> None:
    store.request_rescans([ALL_MODELS], reason="r", now=at(0))
    held = store.claim_rescans(owner="w1", now=at(1), lease=LEASE)
    store.claim_rescans(owner="w2", now=at(1) + LEASE, lease=LEASE)  # w1 missed its renewals
    done = store.split_rescan(
        MODELS, size=4, reason="r", now=at(1000), stale_after=LEASE, owner="w1", held=held
    )
    assert (done.batches, done.held) == (0, False)
    assert batches(store) == []
    assert [r.claimed_by for r in store.rescans()] == ["w2"]


def test_one_batch_per_claim_and_only_once_no_models_request_is_due(store: SqlStore) -> None:
    split(store, at(0))
    store.request_rescans([model(99)], reason="TAG ADD", now=at(5))
    first = store.claim_rescans(owner="w1", now=at(6), lease=LEASE)
    assert [r.model for r in first] == [model(99)], "an event's rescan goes before the batches"
    second = store.claim_rescans(owner="w1", now=at(6), lease=LEASE)
    assert len(second) == 1
    assert second[0].is_batch
    assert list(second[0].models) == MODELS[0:4]
    assert second[0].lease_until == at(6) + LEASE


def test_only_batches_leaves_the_models_requests_to_the_watchers(store: SqlStore) -> None:
    store.request_rescans([model(99), ALL_MODELS], reason="r", now=at(0))
    assert store.claim_rescans(owner="scan", now=at(1), lease=LEASE, only_batches=True) == []
    split(store, at(2))
    [taken] = store.claim_rescans(owner="scan", now=at(3), lease=LEASE, only_batches=True)
    assert taken.is_batch
    assert {r.model for r in store.rescans() if r.claimed_by is None} >= {model(99), ALL_MODELS}


def test_two_claimers_take_every_batch_once(store: SqlStore, store_url: str) -> None:
    split(store, at(0))
    taken: dict[str, list[str]] = {"w1": [], "w2": []}
    with open_store(store_url) as other:
        for _ in range(3):
            for owner, claimer in (("w1", store), ("w2", other)):
                for r in claimer.claim_rescans(owner=owner, now=at(1), lease=LEASE):
                    taken[owner].append(r.model)
    assert len(taken["w1"]) == 2
    assert len(taken["w2"]) == 1
    assert sorted(taken["w1"] + taken["w2"]) == sorted(b.model for b in batches(store))


def test_a_rescan_under_way_is_joined_not_doubled(store: SqlStore) -> None:
    assert split(store, at(0)) == 3
    held = store.claim_rescans(owner="w1", now=at(1), lease=LEASE)
    # Asked again while batches wait or are held: joined.
    done = store.split_rescan(MODELS, size=4, reason="again", now=at(2), stale_after=LEASE)
    assert (done.batches, done.under_way) == (0, 3)
    # Long after it was split, one batch is still held under a live lease: still joined.
    store.renew_rescans(held, owner="w1", now=at(5000), lease=LEASE)
    assert split(store, at(5001)) == 0
    assert len(batches(store)) == 3


def test_the_leftovers_of_a_rescan_whose_holders_died_are_replaced(store: SqlStore) -> None:
    assert split(store, at(0)) == 3
    store.claim_rescans(owner="dead", now=at(1), lease=LEASE)  # then never renewed
    later = at(1) + LEASE + timedelta(seconds=1)
    assert split(store, later) == 3
    made = batches(store)
    assert len(made) == 3
    assert all(b.requested_at == later and b.claimed_by is None for b in made)


def test_a_dead_holders_batch_is_taken_over_after_its_lease(store: SqlStore) -> None:
    split(store, at(0))
    lost = store.claim_rescans(owner="dead", now=at(1), lease=LEASE, only_batches=True)
    others = [
        store.claim_rescans(owner="w2", now=at(2), lease=LEASE, only_batches=True) for _ in range(3)
    ]
    assert [len(o) for o in others] == [1, 1, 0]
    for claim in others[:2]:
        store.complete_rescans(claim, owner="w2", now=at(3))
    taken = store.claim_rescans(owner="w2", now=at(1) + LEASE, lease=LEASE, only_batches=True)
    assert [r.model for r in taken] == [r.model for r in lost]
    assert store.complete_rescans(lost, owner="dead", now=at(2000)) == 0, "not its batch any more"
    assert store.complete_rescans(taken, owner="w2", now=at(2000)) == 1
    assert batches(store) == []


def test_a_failed_batch_backs_off_and_does_not_hold_up_the_next_rescan(store: SqlStore) -> None:
    split(store, at(0))
    for _ in range(3):
        claimed = store.claim_rescans(owner="w", now=at(1), lease=LEASE)
        if claimed[0].models[0] == MODELS[0]:
            store.fail_rescans(claimed, owner="w", error="boom", now=at(2), retry_at=at(62))
        else:
            store.complete_rescans(claimed, owner="w", now=at(2))
    [failing] = batches(store)
    assert (failing.attempts, failing.due_at, failing.last_error) == (1, at(62), "boom")
    assert store.claim_rescans(owner="w", now=at(61), lease=LEASE) == []
    # An hour later the failing batch is not a rescan under way: a new one replaces it.
    assert split(store, at(3600)) == 3


def test_concurrent_splits_make_one_rescan(store: SqlStore, store_url: str) -> None:
    barrier = threading.Barrier(4)
    made: list[int] = []

    def splitter() -> None:
        with open_store(store_url) as own:
            barrier.wait(timeout=10)
            made.append(split(own, at(0)))

    threads = [threading.Thread(target=splitter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(made) == [0, 0, 0, 3]
    assert sorted(m for b in batches(store) for m in b.models) == MODELS
