"""The relay's bounds and leases: how long it waits, how often it retries, and what it says
when another relay held (or took over) a row — on SQLite and, with two relays, PostgreSQL."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from mlcopilot.incidents.payload import OutboxStatus
from mlcopilot.model import OutboxItem, Severity
from mlcopilot.notify.relay import Relay, RelayReport, RetryPolicy, no_failpoint
from mlcopilot.notify.sinks.github import GitHubSink
from mlcopilot.protocols import StateStore
from testing.notify_world import CUSTOMERS, Script, World, world
from testing.postgres import fresh_schema

PII: Script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
LEASE = RetryPolicy().lease


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a fresh schema on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    with fresh_schema() as url:
        yield url


def github_sink(w: World) -> GitHubSink:
    gh = w.settings().github
    assert gh is not None
    return GitHubSink(gh, clock=w.clock)


def github_rows(w: World) -> list[OutboxItem]:
    with w.store() as store:
        return [i for i in store.outbox() if i.sink == "github"]


def relay_github(
    w: World, owner: str, failpoint: Callable[[str], None] | None = None
) -> RelayReport:
    """One relay process (its own store connection) delivering the GitHub rows."""
    with w.store() as store:
        relay = Relay(
            store, [github_sink(w)], clock=w.clock, owner=owner, failpoint=failpoint or no_failpoint
        )
        return relay.run()


def committed(w: World) -> None:
    """A scan that commits its outbox rows and delivers none; then they are due."""
    w.scan(deliver=False)
    w.clock.advance(timedelta(minutes=1))


def test_a_delivery_that_outlived_its_lease_is_reported_as_a_possible_duplicate(
    tmp_path: Path, state_url: str
) -> None:
    with world(tmp_path, state_url=state_url) as w:
        w.script = PII
        committed(w)
        second: list[RelayReport] = []

        def slow_then_overtaken(name: str) -> None:
            # Relay A's create landed, then A stalled past its lease; relay B claimed the row.
            if name == "after_send:github" and not second:
                w.clock.advance(LEASE + timedelta(seconds=1))
                second.append(relay_github(w, "relay-b"))

        first = relay_github(w, "relay-a", slow_then_overtaken)
        (overtaken,) = second
        assert overtaken.ok
        assert overtaken.warnings == ["GitHub: reused issue #1, created by an earlier attempt"]
        assert len(w.github.issues) == 1
        assert not first.ok
        assert first.delivered == []
        ((item, warning),) = first.possible_duplicates
        assert warning == (
            f"row {item.id} was delivered by this process after its lease expired; another "
            "process may also have delivered it — check https://github.com/acme/ml-alerts/issues/1"
        )
        assert warning in first.warnings
        (row,) = github_rows(w)
        assert row.status is OutboxStatus.DONE  # as relay B left it


def test_a_row_under_a_dead_relays_lease_is_not_delivered_and_says_when_it_will_be(
    tmp_path: Path, state_url: str
) -> None:
    with world(tmp_path, state_url=state_url) as w:
        w.script = PII
        committed(w)
        with w.store() as store:  # a relay that claimed the row, then died
            (claim,) = store.claim(
                sinks=["github"], owner="ci-7:4242:dead", now=w.clock.now(), lease=LEASE
            )
        claimed = claim.item
        expires = w.clock.now() + LEASE
        rerun = relay_github(w, "relay-b")
        assert not rerun.ok
        ((item, reason),) = rerun.retrying
        assert item.id == claimed.id
        assert reason == (
            "still being sent by ci-7:4242:dead (its lease runs until 2026-03-02 09:03:00 UTC); "
            "if that process died, the row goes out after 2026-03-02 09:03:00 UTC, checked "
            "against github first"
        )
        assert rerun.next_attempts == {claimed.id: expires}
        assert w.github.issues == {}
        w.clock.advance(LEASE)
        after = relay_github(w, "relay-c")
        assert after.ok
        assert [i.id for i in after.delivered] == [claimed.id]
        assert len(w.github.issues) == 1


@pytest.fixture
def another_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process running on this host (a second scanner, as far as a lease can tell)."""
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) as process:
        try:
            yield process
        finally:
            process.kill()


def test_rows_a_running_process_is_delivering_are_said_and_fail_nothing(
    tmp_path: Path, state_url: str, another_process: subprocess.Popen[bytes]
) -> None:
    """Issue 25, item 5: the scanner whose rows another is delivering does not exit 5."""
    owner = f"{socket.gethostname()}:{another_process.pid}:5c4a1e2b"
    with world(tmp_path, state_url=state_url, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        with w.store() as store:  # the other scanner's relay claimed both rows
            claims = store.claim(
                sinks=["github"], owner=owner, now=w.clock.now(), lease=LEASE, limit=20
            )
        assert len(claims) == 2
        report = relay_github(w, "relay-b")
        assert report.ok  # nothing of this run failed: nothing to retry here
        assert report.retrying == []
        assert sorted(i.id for i, _ in report.elsewhere) == sorted(c.item.id for c in claims)
        assert {reason for _, reason in report.elsewhere} == {
            f"being delivered by {owner}, a process still running on this host (its lease runs "
            "until 2026-03-02 09:03:00 UTC)"
        }
        assert w.github.issues == {}
        another_process.kill()  # it died before delivering them: now they are not delivered
        another_process.wait()
        rerun = relay_github(w, "relay-c")
        assert not rerun.ok
        assert rerun.elsewhere == []
        assert {reason for _, reason in rerun.retrying} == {
            f"held by {owner}, a process on this host that is no longer running: the row goes "
            "out after its lease ends at 2026-03-02 09:03:00 UTC, checked against github first"
        }


def test_no_inline_wait_holds_the_lease(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        committed(w)
        w.github.fail(
            "POST",
            r"/repos/acme/ml-alerts/issues",
            403,
            {"message": "secondary rate limit"},
            {"retry-after": "30"},
        )
        during: list[OutboxItem] = []
        sleep = w.clock.sleep

        def look_while_waiting(seconds: float) -> None:
            if seconds >= 30:
                during.extend(github_rows(w))
            sleep(seconds)

        w.clock.sleep = look_while_waiting  # type: ignore[method-assign]
        assert relay_github(w, "relay-a").ok
        (row,) = during
        assert row.status is OutboxStatus.PENDING  # released before the wait: others may claim
        assert row.lease_owner is None
        assert len(w.github.issues) == 1


def test_all_rate_limits_of_a_run_are_counted_together(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        committed(w)
        w.github.always_429(retry_after="2")
        retry = RetryPolicy(max_rate_limited=10, max_rate_limited_run=2)
        with w.store() as store:
            report = Relay(store, [github_sink(w)], clock=w.clock, retry=retry).run()
        assert len(w.github.requests) == 3
        ((_item, reason),) = report.retrying
        assert "(3 rate limits in this run)" in reason


def test_no_rate_limit_is_waited_past_the_runs_deadline(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        committed(w)
        w.github.reset_in_the_past()
        retry = RetryPolicy(max_rate_limited=10, max_run=timedelta(seconds=90))
        with w.store() as store:
            report = Relay(store, [github_sink(w)], clock=w.clock, retry=retry).run()
        assert len(w.github.requests) == 2  # 60 s fits in 90 s, a second 60 s does not
        ((item, reason),) = report.retrying
        assert "(past this run's deadline)" in reason
        (row,) = github_rows(w)
        assert row.status is OutboxStatus.PENDING
        assert report.next_attempts[item.id] == row.next_attempt_at


def test_a_reset_already_past_is_waited_no_longer_than_githubs_bound(tmp_path: Path) -> None:
    """A skewed clock: the reset is already past, which stands for GitHub's minute, capped."""
    with world(tmp_path) as w:
        w.script = PII
        committed(w)
        w.github.reset_in_the_past()
        settings = w.settings().github
        assert settings is not None
        bounded = settings.model_copy(update={"max_rate_limit_wait_s": 45.0})
        with w.store() as store:
            report = Relay(store, [GitHubSink(bounded, clock=w.clock)], clock=w.clock).run()
        waits = [s for s in w.clock.sleeps if s > 5]  # not the 1 s between two writes
        assert waits == [45.0, 45.0, 45.0]  # not 60 s: the bound holds
        assert len(w.github.requests) == 4
        ((item, reason),) = report.retrying
        assert "rate limited 4 times in this run" in reason
        (row,) = github_rows(w)
        assert row.next_attempt_at == report.next_attempts[item.id]
        assert row.next_attempt_at is not None
        assert row.next_attempt_at <= w.clock.now() + timedelta(seconds=45)


def test_a_run_claims_nothing_after_its_deadline_and_says_rows_are_left(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = {
            "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]},
            "schema_drift": {CUSTOMERS: [("b", Severity.CRITICAL, "removed")]},
        }
        committed(w)
        retry = RetryPolicy(max_run=timedelta(seconds=1))  # GitHub writes are 1 s apart
        with w.store() as store:
            report = Relay(store, [github_sink(w)], clock=w.clock, retry=retry).run()
        assert not report.ok
        assert report.stopped is not None
        assert "rows still due go out with the next run" in report.stopped
        assert len(report.delivered) == 1
        assert [r.status for r in github_rows(w)].count(OutboxStatus.PENDING) == 1
        assert relay_github(w, "next-run").ok
        assert len(w.github.issues) == 2


TWO_GROUPS: Script = {
    "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]},
    "schema_drift": {CUSTOMERS: [("b", Severity.CRITICAL, "removed")]},
}


def test_rows_claimed_with_a_failed_one_go_back_untried(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        w.github.fail("POST", r"/repos/acme/ml-alerts/issues", 502, {"message": "bad gateway"})
        report = relay_github(w, "relay-a")  # one claim takes both opens
        assert report.skipped_sinks == {"github": "failed in this run; its rows wait for the next"}
        ((failed, _),) = report.retrying
        (other,) = [r for r in github_rows(w) if r.id != failed.id]
        assert other.status is OutboxStatus.PENDING
        assert other.lease_owner is None
        assert other.attempts == 0  # claimed, never tried: no attempt spent
        assert not other.uncertain
        w.clock.advance(timedelta(hours=1))
        assert relay_github(w, "relay-b").ok
        assert len(w.github.issues) == 2


def test_a_rate_limit_gives_back_every_claimed_row_before_it_waits(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        w.github.fail(
            "POST",
            r"/repos/acme/ml-alerts/issues",
            403,
            {"message": "secondary rate limit"},
            {"retry-after": "30"},
        )
        during: list[OutboxItem] = []
        sleep = w.clock.sleep

        def look_while_waiting(seconds: float) -> None:
            if seconds >= 30:
                during.extend(github_rows(w))
            sleep(seconds)

        w.clock.sleep = look_while_waiting  # type: ignore[method-assign]
        assert relay_github(w, "relay-a").ok
        assert [(r.status, r.lease_owner) for r in during] == [(OutboxStatus.PENDING, None)] * 2
        assert len(w.github.issues) == 2


def test_a_claimed_row_is_sent_with_at_least_half_its_lease_left(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        left: list[timedelta] = []

        def slow_sends(name: str) -> None:
            # Each send takes 70 s: the second row of the batch would go out with 50 s of
            # its lease left, and be taken over by another relay while it is being sent.
            if name.startswith("before_send:"):
                # The row about to go out: the oldest one claimed (rows go out in order).
                sending = min(
                    (r for r in github_rows(w) if r.status is OutboxStatus.SENDING),
                    key=lambda r: r.id,
                )
                assert sending.lease_expires_at is not None
                left.append(sending.lease_expires_at - w.clock.now())
                w.clock.advance(timedelta(seconds=70))

        assert relay_github(w, "relay-a", slow_sends).ok
        assert len(left) == 2
        assert min(left) >= LEASE / 2
        assert len(w.github.issues) == 2


def test_an_interrupted_run_gives_back_the_rows_it_had_not_tried(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)

        def ctrl_c(name: str) -> None:
            if name == "before_send:github":
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            relay_github(w, "relay-a", ctrl_c)
        rows = github_rows(w)
        # The row being sent stays "sending" (it may have gone out: checked after its lease);
        # the other was never tried and is due again at once, no attempt spent.
        assert sorted((r.status, r.attempts) for r in rows) == [
            (OutboxStatus.PENDING, 0),
            (OutboxStatus.SENDING, 1),
        ]
        assert relay_github(w, "relay-b").retrying  # the held one waits for its lease
        assert len(w.github.issues) == 1


def test_batch_mates_taken_over_meanwhile_are_not_sent_again(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        second: list[RelayReport] = []

        def stalled_then_overtaken(name: str) -> None:
            # Relay A sent its batch's first row, then stalled past the lease: relay B took
            # over both rows of A's batch and delivered them.
            if name == "after_send:github" and not second:
                w.clock.advance(LEASE + timedelta(seconds=1))
                second.append(relay_github(w, "relay-b"))

        first = relay_github(w, "relay-a", stalled_then_overtaken)
        (overtaken,) = second
        assert len(overtaken.delivered) == 2
        # A reports the one it sent late, and leaves B's other row alone.
        assert len(first.possible_duplicates) == 1
        assert first.delivered == []
        assert len(w.github.issues) == 2
        assert {r.status for r in github_rows(w)} == {OutboxStatus.DONE}


class CountingStore:
    """The real store, counting the lease statements a relay asks of it."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.renewals = 0
        self.completions_with_renewal = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def renew(self, items: Sequence[OutboxItem], **kwargs: Any) -> set[int]:
        self.renewals += 1
        return self._store.renew(items, **kwargs)

    def complete_and_renew(self, *args: Any, **kwargs: Any) -> tuple[bool, set[int]]:
        self.completions_with_renewal += 1
        return self._store.complete_and_renew(*args, **kwargs)


def test_a_completion_renews_the_rows_still_queued_in_its_own_transaction(
    tmp_path: Path,
) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = TWO_GROUPS
        committed(w)
        with w.store() as store:
            counting = CountingStore(store)
            relay = Relay(cast(StateStore, counting), [github_sink(w)], clock=w.clock, owner="a")
            report = relay.run()
        assert len(report.delivered) == 2
        # The first row's completion renewed the second's lease: no statement of its own.
        assert counting.completions_with_renewal == 1
        assert counting.renewals == 0
        assert len(w.github.issues) == 2
