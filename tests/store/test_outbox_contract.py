"""The outbox in the state store, on SQLite and PostgreSQL: one transaction with the incidents,
uniqueness enforced by the database, ordered claims, leases, retries, the 0001 → 0002 upgrade."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, create_engine, insert, text

from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import (
    Delivered,
    NotifyPolicy,
    NotifyRequest,
    OutboxStatus,
    SinkRef,
)
from mlcopilot.model import Finding, OutboxItem, Severity, SinkName
from mlcopilot.store import SqlStore, StoreConflict, open_store
from mlcopilot.store import schema as tables
from testing.migrations import migrate
from tests.store.test_store_contract import DS, EVERYTHING, MODEL, count, finding

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTIFY = NotifyRequest(
    policy=NotifyPolicy(group_wait=timedelta(0)),
    sinks=("github", "slack"),
    writeback=({"kind": "tag", "entity": DS, "tag": "urn:li:tag:x", "present": True},),
)
LEASE = timedelta(minutes=2)


def record(store: SqlStore, findings: list[Finding], now: datetime) -> int:
    changes = reconcile(store.incidents(), findings, evaluated=EVERYTHING, now=now)
    return store.record_scan(
        changes, started_at=now, now=now, catalog="c", models=[MODEL], findings=1, notify=NOTIFY
    ).run_id


def claim(
    store: SqlStore,
    now: datetime,
    owner: str = "me",
    sinks: Sequence[SinkName] = ("github", "slack", "datahub"),
) -> OutboxItem | None:
    claimed = store.claim(sinks=list(sinks), owner=owner, now=now, lease=LEASE)
    return claimed[0].item if claimed else None


def test_a_scan_commits_incidents_and_their_outbox_rows_together(
    store: SqlStore, raw: Engine
) -> None:
    record(store, [finding()], T0)
    rows = store.outbox()
    assert sorted((r.sink, r.action) for r in rows) == [
        ("datahub", "writeback"),
        ("github", "open"),
        ("slack", "open"),
    ]
    assert count(raw, "notify_groups") == 1
    with raw.connect() as conn:
        (key,) = conn.execute(text("SELECT group_key FROM incidents")).one()
    assert key == rows[0].group_key or key in {r.group_key for r in rows}


def test_nothing_is_committed_when_the_scan_conflicts(store_url: str, raw: Engine) -> None:
    f = finding()
    with open_store(store_url) as one, open_store(store_url) as two:
        first = reconcile(one.incidents(), [f], evaluated=EVERYTHING, now=T0)
        second = reconcile(two.incidents(), [f], evaluated=EVERYTHING, now=T0)
        one.record_scan(
            first, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=1, notify=NOTIFY
        )
        with pytest.raises(StoreConflict):
            two.record_scan(
                second,
                started_at=T0,
                now=T0,
                catalog="c",
                models=[MODEL],
                findings=1,
                notify=NOTIFY,
            )
    assert count(raw, "outbox") == 3  # one write-back, one open per sink: the loser wrote none
    assert count(raw, "notify_groups") == 1


def test_the_database_refuses_a_second_row_with_the_same_dedupe_key(
    store: SqlStore, raw: Engine
) -> None:
    record(store, [finding()], T0)
    (row,) = [r for r in store.outbox() if r.sink == "github"]
    values = {
        "dedupe_key": row.dedupe_key,
        "sink": "github",
        "action": "open",
        "group_key": row.group_key,
        "group_generation": 1,
        "seq": 0,
        "payload": {},
        "status": "pending",
        "attempts": 0,
        "uncertain": False,
        "created_at": T0,
        "not_before": T0,
        "next_attempt_at": T0,
    }
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), raw.begin() as conn:
        conn.execute(insert(tables.outbox), values)


def test_claims_follow_the_order_within_a_group(store: SqlStore) -> None:
    record(store, [finding()], T0)
    (claimed,) = store.claim(sinks=["github"], owner="me", now=T0, lease=timedelta(days=1))
    first = claimed.item
    assert first.action == "open"
    record(store, [finding(), finding("phone")], T0 + timedelta(hours=1))  # an update
    now = T0 + timedelta(hours=2)
    assert claim(store, now, sinks=["github"]) is None  # the update waits for the open
    store.complete(first, Delivered(ref=SinkRef("github", "7")), owner="me", now=now)
    second = claim(store, now, sinks=["github"])
    assert second is not None
    assert second.action == "update"
    assert store.sink_ref(first.group_key, 1, "github") == SinkRef("github", "7", None, {})


def test_a_batch_claim_takes_one_row_per_group_with_its_sink_reference(store: SqlStore) -> None:
    for n in range(3):
        record(store, [finding(entity=f"{DS}{n}")], T0)
    day = timedelta(days=1)
    opens = store.claim(sinks=["github"], owner="me", now=T0, lease=day, limit=10)
    assert [c.item.action for c in opens] == ["open"] * 3
    assert [c.ref for c in opens] == [None] * 3
    first = opens[0].item
    store.complete(first, Delivered(ref=SinkRef("github", "7")), owner="me", now=T0)
    for n in range(3):  # each group gets an update; two of them wait behind their open
        record(store, [finding(entity=f"{DS}{n}"), finding("phone", entity=f"{DS}{n}")], T0)
    now = T0 + timedelta(hours=1)  # the other two opens are still being sent
    (update,) = store.claim(sinks=["github"], owner="me", now=now, lease=LEASE, limit=10)
    assert (update.item.action, update.item.group_key) == ("update", first.group_key)
    assert update.ref == SinkRef("github", "7", None, {})


def test_released_rows_are_pending_again_as_they_were(store: SqlStore) -> None:
    for n in range(3):
        record(store, [finding(entity=f"{DS}{n}")], T0)
    dead = store.claim(sinks=["slack"], owner="dead", now=T0, lease=LEASE, limit=1)
    taken = store.claim(sinks=["slack"], owner="me", now=T0 + LEASE, lease=LEASE, limit=10)
    assert taken[0].item.id == dead[0].item.id  # its lease ran out: taken over
    assert [c.item.uncertain for c in taken] == [True, False, False]
    store.release([c.item for c in taken[1:]], owner="someone else")  # not theirs: no effect
    store.release([c.item for c in taken], owner="me")
    rows = {r.id: r for r in store.outbox() if r.sink == "slack"}
    assert {r.status for r in rows.values()} == {OutboxStatus.PENDING}
    assert {r.lease_owner for r in rows.values()} == {None}
    # The dead relay's attempt counts (it may have sent); the released claims do not.
    assert [(rows[c.item.id].attempts, rows[c.item.id].uncertain) for c in taken] == [
        (1, True),
        (0, False),
        (0, False),
    ]
    again = store.claim(sinks=["slack"], owner="me", now=T0 + LEASE, lease=LEASE, limit=10)
    assert [c.item.id for c in again] == [c.item.id for c in taken]


def test_a_renewal_extends_only_the_leases_still_held(store: SqlStore) -> None:
    for n in range(2):
        record(store, [finding(entity=f"{DS}{n}")], T0)
    mine = store.claim(sinks=["slack"], owner="me", now=T0, lease=LEASE, limit=10)
    (taken,) = store.claim(sinks=["slack"], owner="other", now=T0 + LEASE, lease=LEASE, limit=1)
    later = T0 + LEASE + timedelta(seconds=5)
    held = store.renew([c.item for c in mine], owner="me", now=later, lease=LEASE)
    assert held == {mine[1].item.id}  # the first was taken over once its lease ran out
    rows = {r.id: r for r in store.outbox() if r.sink == "slack"}
    assert rows[taken.item.id].lease_owner == "other"
    assert rows[mine[1].item.id].lease_expires_at == later + LEASE


def test_a_completion_renews_the_rows_still_queued_in_the_same_transaction(
    store: SqlStore,
) -> None:
    for n in range(3):
        record(store, [finding(entity=f"{DS}{n}")], T0)
    first, *queued = store.claim(sinks=["slack"], owner="me", now=T0, lease=LEASE, limit=10)
    (taken,) = store.claim(sinks=["slack"], owner="other", now=T0 + LEASE, lease=LEASE, limit=1)
    later = T0 + LEASE + timedelta(seconds=5)
    kept, held = store.complete_and_renew(
        first.item,
        Delivered(),
        owner="me",
        now=later,
        renew=[c.item for c in queued],
        lease=LEASE,
    )
    assert not kept  # the first was taken over once its lease ran out: left to its new owner
    assert taken.item.id == first.item.id
    assert held == {queued[0].item.id, queued[1].item.id}
    rows = {r.id: r for r in store.outbox() if r.sink == "slack"}
    assert rows[first.item.id].status is OutboxStatus.SENDING
    assert rows[first.item.id].lease_owner == "other"
    assert {rows[c.item.id].lease_expires_at for c in queued} == {later + LEASE}


def test_a_completion_that_kept_its_lease_is_done_with_its_reference_and_warning(
    store: SqlStore,
) -> None:
    for n in range(3):
        record(store, [finding(entity=f"{DS}{n}")], T0)
    first, *queued = store.claim(sinks=["slack"], owner="me", now=T0, lease=LEASE, limit=10)
    ref = SinkRef("slack", "C1/1.5", "https://slack.example/1", {"channel": "C1", "ts": "1.5"})
    later = T0 + timedelta(seconds=30)
    kept, held = store.complete_and_renew(
        first.item,
        Delivered(ref=ref, warning="posted without the token xoxb-1234-5678-abcdefghijkl"),
        owner="me",
        now=later,
        renew=[first.item, *(c.item for c in queued)],  # the row done is never renewed
        lease=LEASE,
    )
    assert kept
    assert held == {c.item.id for c in queued}
    rows = {r.id: r for r in store.outbox() if r.sink == "slack"}
    done = rows[first.item.id]
    assert (done.status, done.delivered_at, done.lease_owner) == (OutboxStatus.DONE, later, None)
    assert done.warning is not None
    assert "xoxb-1234" not in done.warning
    assert {rows[c.item.id].lease_expires_at for c in queued} == {later + LEASE}
    assert store.sink_ref(first.item.group_key, 1, "slack") == ref
    # The last row of a claim: nothing left to renew. A reference already known stays.
    last = queued[-1].item
    other = SinkRef("slack", "C1/9.9", None, {})
    assert store.complete(last, Delivered(ref=other), owner="me", now=later)
    assert store.complete(last, Delivered(), owner="me", now=later) is False  # done already
    assert store.sink_ref(last.group_key, 1, "slack") == other
    kept, held = store.complete_and_renew(
        first.item, Delivered(ref=other), owner="me", now=later, renew=[], lease=LEASE
    )
    assert (kept, held) == (False, set())
    assert store.sink_ref(first.item.group_key, 1, "slack") == ref


def test_a_change_before_the_open_was_sent_folds_into_it(store: SqlStore) -> None:
    record(store, [finding()], T0)
    record(store, [finding(), finding("phone")], T0 + timedelta(seconds=10))
    github = [r for r in store.outbox() if r.sink == "github"]
    assert [r.action for r in github] == ["open"]
    assert len(github[0].payload["group"]["members"]) == 2


def test_a_dead_relays_row_is_taken_over_after_its_lease_as_uncertain(store: SqlStore) -> None:
    record(store, [finding()], T0)
    taken = claim(store, T0, owner="dead", sinks=["slack"])
    assert taken is not None
    assert not taken.uncertain
    assert claim(store, T0 + timedelta(minutes=1), owner="me", sinks=["slack"]) is None
    again = claim(store, T0 + LEASE, owner="me", sinks=["slack"])
    assert again is not None
    assert again.id == taken.id
    assert again.uncertain
    assert again.attempts == 2


def test_failures_back_off_then_die_and_retry_revives(store: SqlStore) -> None:
    record(store, [finding()], T0)
    item = claim(store, T0, sinks=["github"])
    assert item is not None
    store.fail(
        item,
        owner="me",
        error="HTTP 502",
        now=T0,
        retry_at=T0 + timedelta(minutes=1),
        uncertain=True,
    )
    assert claim(store, T0 + timedelta(seconds=30), sinks=["github"]) is None
    item = claim(store, T0 + timedelta(minutes=1), sinks=["github"])
    assert item is not None
    assert item.uncertain
    assert item.attempts == 2
    store.fail(
        item, owner="me", error="token ghp_" + "x" * 36, now=T0, retry_at=None, uncertain=False
    )
    (dead,) = store.outbox(statuses=[OutboxStatus.DEAD])
    assert dead.last_error is not None
    assert "ghp_" not in dead.last_error
    assert store.retry_outbox(now=T0 + timedelta(hours=1)) == 1
    revived = claim(store, T0 + timedelta(hours=1), sinks=["github"])
    assert revived is not None
    assert revived.attempts == 1


@pytest.mark.parametrize("batch", [1, 4])
def test_concurrent_relays_never_claim_the_same_row(store_url: str, batch: int) -> None:
    with open_store(store_url) as setup:
        for n in range(6):
            record(setup, [finding(f"f{n}", entity=f"{DS}{n}")], T0 + timedelta(seconds=n))
    taken: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(3)

    def relay(owner: str) -> None:
        with open_store(store_url) as mine:
            barrier.wait(timeout=10)
            now = T0 + timedelta(hours=1)
            sinks: list[SinkName] = ["github", "slack", "datahub"]
            while claimed := mine.claim(
                sinks=sinks, owner=owner, now=now, lease=LEASE, limit=batch
            ):
                with lock:
                    taken.extend(c.item.id for c in claimed)
                for c in claimed:
                    mine.complete(c.item, Delivered(), owner=owner, now=now)

    threads = [threading.Thread(target=relay, args=(f"r{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(taken) == len(set(taken)) == 18


def test_upgrading_a_0001_database_keeps_its_incidents(store_url: str) -> None:
    migrate(store_url, "0001")
    engine = create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO incidents (id, generation, state, check_name, severity, model, "
                "entity, message, path, evidence, opened_at, updated_at) VALUES ('old', 1, 'open', "
                "'pii_exposure', 'high', :m, :e, 'm', '[]', '{}', :t, :t)"
            ),
            {"m": MODEL, "e": DS, "t": T0},
        )
    engine.dispose()
    with open_store(store_url) as store:
        (old,) = store.incidents()
        assert old.id == "old"
        record(store, [finding(severity=Severity.HIGH)], T0 + timedelta(days=1))
        assert {i.id for i in store.incidents()} == {"old", finding().id}
