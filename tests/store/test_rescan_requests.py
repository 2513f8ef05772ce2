"""Rescan requests (``mlcopilot watch``) on SQLite and PostgreSQL: coalesced per model,
claimed once under a lease, re-run when asked again mid-scan, retried with backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mlcopilot.protocols import ALL_MODELS
from mlcopilot.store import SqlStore, open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=15)
A = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,a,PROD)"
B = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,b,PROD)"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_second_request_before_the_claim_is_coalesced(store: SqlStore) -> None:
    assert store.request_rescans([A, B], reason="TAG ADD", now=at(0)) == 2
    assert store.request_rescans([A], reason="TECHNICAL_SCHEMA REMOVE", now=at(5)) == 0
    rows = {r.model: r for r in store.rescans()}
    assert set(rows) == {A, B}
    assert rows[A].reason == "TECHNICAL_SCHEMA REMOVE"
    assert rows[A].requested_at == at(5)
    assert rows[A].due_at == at(0)


def test_two_watchers_never_claim_the_same_request(store: SqlStore, store_url: str) -> None:
    store.request_rescans([A, B], reason="r", now=at(0))
    with open_store(store_url) as other:
        first = store.claim_rescans(owner="w1", now=at(1), lease=LEASE, limit=1)
        second = other.claim_rescans(owner="w2", now=at(1), lease=LEASE, limit=10)
        third = other.claim_rescans(owner="w3", now=at(1), lease=LEASE, limit=10)
    assert [r.model for r in first] == [A]
    assert [r.model for r in second] == [B]
    assert third == []


def test_a_dead_watchers_lease_expires_and_another_takes_over(store: SqlStore) -> None:
    store.request_rescans([A], reason="r", now=at(0))
    lost = store.claim_rescans(owner="dead", now=at(1), lease=LEASE)
    assert store.claim_rescans(owner="w2", now=at(60), lease=LEASE) == []
    taken = store.claim_rescans(owner="w2", now=at(1) + LEASE, lease=LEASE)
    assert [r.model for r in taken] == [A]
    assert store.complete_rescans(lost, owner="dead", now=at(2000)) == 0, "not its row any more"
    assert store.complete_rescans(taken, owner="w2", now=at(2000)) == 1
    assert store.rescans() == []


def test_a_request_made_during_the_scan_runs_again(store: SqlStore) -> None:
    store.request_rescans([A], reason="first", now=at(0))
    claimed = store.claim_rescans(owner="w", now=at(1), lease=LEASE)
    store.request_rescans([A], reason="second", now=at(2))
    store.complete_rescans(claimed, owner="w", now=at(3))
    [row] = store.rescans()
    assert (row.reason, row.claimed_by, row.due_at) == ("second", None, at(3))


def test_a_failed_scan_backs_off_and_a_new_event_does_not_cut_it_short(store: SqlStore) -> None:
    store.request_rescans([A], reason="r", now=at(0))
    claimed = store.claim_rescans(owner="w", now=at(1), lease=LEASE)
    store.fail_rescans(claimed, owner="w", error="catalog down", now=at(2), retry_at=at(32))
    store.request_rescans([A], reason="again", now=at(3))
    [row] = store.rescans()
    assert (row.attempts, row.due_at, row.last_error) == (1, at(32), "catalog down")
    assert store.claim_rescans(owner="w", now=at(31), lease=LEASE) == []
    assert [r.attempts for r in store.claim_rescans(owner="w", now=at(32), lease=LEASE)] == [1]


def test_the_periodic_full_rescan_is_rescheduled_and_a_start_brings_it_forward(
    store: SqlStore,
) -> None:
    store.request_rescans([ALL_MODELS], reason="watch started", now=at(0))
    claimed = store.claim_rescans(owner="w", now=at(0), lease=LEASE)
    store.complete_rescans(claimed, owner="w", now=at(10), again_at=at(3600))
    [row] = store.rescans()
    assert (row.model, row.due_at, row.claimed_by) == (ALL_MODELS, at(3600), None)
    store.request_rescans([ALL_MODELS], reason="watch started", now=at(100))
    assert store.rescans()[0].due_at == at(100)
