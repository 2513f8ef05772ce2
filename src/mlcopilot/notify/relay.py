"""The relay: delivers committed outbox rows to DataHub, GitHub and Slack, at least once.

Rows are claimed a batch at a time (``sending``, with a lease), each handed to its sink, then
marked ``done`` in the state store; claimed rows a run does not try go back to ``pending``. A
sink failure puts a row back to ``pending`` with capped, fully jittered exponential backoff
(AWS's formula), or makes it ``dead`` with the last error (redacted) once the attempts are
spent or the error is permanent. Rate limits are honoured, not counted as
attempts: a short wait happens here (on the clock, after the row went back to ``pending``, so
no wait outlives the lease), a long one reschedules the row. Every wait is bounded: at least
``min_wait``, at most ``max_rate_limited`` rate-limited tries of one row and
``max_rate_limited_run`` of all rows in one run, and the run ends by ``max_run`` (its linger
aside); past a bound the row is rescheduled, not dead, and the report says when it goes out.
A sink that failed is skipped for the rest of the run; other sinks go on.

The report is honest about what this run could not vouch for: a row still ``sending`` under
another process's lease (maybe a dead one: it goes out once the lease expires), and a row
this process delivered after its lease had expired (another relay may have delivered it too:
a possible duplicate, named with where to look). Both make :attr:`RelayReport.ok` false,
except a row whose lease holder is a process still running on this host (a second scanner,
``outbox deliver``): that one is being delivered, by it, and the report says so
(:attr:`RelayReport.elsewhere`) without failing the run. A holder on another host cannot be
told from a dead one, so its rows still count as not delivered until its lease expires.

Idempotency lives in the sinks (deterministic DataHub urns, GitHub markers, Slack metadata);
the relay's job is to never lose a row and to say plainly what it could not do.

``failpoint`` is called between the steps with names like ``after_send:github``; the crash
tests use it to kill the process exactly there (:func:`env_failpoint`, from the settings'
``MLCOPILOT_FAILPOINT``).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import (
    Delivered,
    DeliveryError,
    OutboxItem,
    Sink,
    SinkName,
    SinkRef,
)
from mlcopilot.model import Claimed, sink_of
from mlcopilot.protocols import OutboxStore
from mlcopilot.redact import redact, redact_exception

log = logging.getLogger(__name__)

Failpoint = Callable[[str], None]
CLAIM_BATCH = 20
"""Rows one claim takes: one transaction for them all rather than one per row. Each row's
lease is renewed when its turn comes (:meth:`Relay._still_ours`), and rows a run will not try
go back (:meth:`Relay._release`)."""
_FOREVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries: ``max_attempts`` with full-jitter backoff between ``base`` and ``cap``.

    A rate-limit wait up to ``max_inline_wait`` is waited out within the run; longer ones
    reschedule the row instead, as does any wait past the run's deadline (``max_run`` after
    it started, or its linger if longer) and any rate limit past the counts below.
    """

    max_attempts: int = 8
    base: timedelta = timedelta(seconds=30)
    cap: timedelta = timedelta(minutes=30)
    max_inline_wait: timedelta = timedelta(seconds=90)
    lease: timedelta = timedelta(seconds=120)
    min_wait: timedelta = timedelta(seconds=1)
    """The floor of every wait before a retry, whatever a server asked (``Retry-After: 0``)."""
    max_rate_limited: int = 3
    """Rate-limited tries of one row within one run; then it waits for a later run."""
    max_rate_limited_run: int = 10
    """Rate-limited tries of all rows within one run; then every limited sink waits."""
    max_run: timedelta = timedelta(minutes=10)
    """A run claims no row after this long (or after its linger, if longer)."""

    def backoff(self, attempts: int, rng: random.Random) -> timedelta:
        """``uniform(0, min(cap, base * 2**attempts))``, at least ``min_wait``."""
        ceiling = min(self.cap.total_seconds(), self.base.total_seconds() * 2 ** max(0, attempts))
        floor = self.min_wait.total_seconds()
        return timedelta(seconds=max(floor, rng.uniform(0, ceiling)))


@dataclass(slots=True)
class RelayReport:
    """What one relay run did."""

    delivered: list[OutboxItem] = field(default_factory=list)
    """Rows this run delivered and marked done (a possible duplicate is not among them)."""
    retrying: list[tuple[OutboxItem, str]] = field(default_factory=list)
    """Rows not delivered by this run, each with why; :attr:`next_attempts` says when."""
    dead: list[tuple[OutboxItem, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped_sinks: dict[SinkName, str] = field(default_factory=dict)
    pending_left: bool = False
    """Rows are left for later (not yet due, rescheduled, or behind a failed row)."""
    next_attempts: dict[int, datetime] = field(default_factory=dict)
    """When each row in :attr:`retrying` goes out next (by row id)."""
    possible_duplicates: list[tuple[OutboxItem, str]] = field(default_factory=list)
    """Rows this run delivered after its lease had expired: another relay may have too."""
    stopped: str | None = None
    """Why the run stopped with rows still due (its deadline), if it did."""
    elsewhere: list[tuple[OutboxItem, str]] = field(default_factory=list)
    """Rows another process still running on this host holds under its lease: it is
    delivering them (each with who and until when). Not this run's failure: :attr:`ok`
    does not count them."""

    @property
    def ok(self) -> bool:
        """True when everything due was delivered, once (rows not due yet do not count)."""
        return (
            not self.retrying
            and not self.dead
            and not self.possible_duplicates
            and self.stopped is None
        )


def no_failpoint(name: str) -> None:
    """The production failpoint: does nothing."""


def env_failpoint(wanted: str) -> Failpoint:
    """A failpoint that kills the process (exit 137, no cleanup) at the points named.

    ``wanted`` is the settings' ``MLCOPILOT_FAILPOINT`` (comma-separated names), for the crash
    tests only; empty, it does nothing.
    """
    names = {w.strip() for w in wanted.split(",") if w.strip()}
    if not names:
        return no_failpoint

    def failpoint(name: str) -> None:
        if name in names:
            logging.shutdown()
            os._exit(137)

    return failpoint


class Relay:
    """Delivers due outbox rows through ``sinks`` until none is due (or ``linger`` runs out)."""

    def __init__(
        self,
        store: OutboxStore,
        sinks: Sequence[Sink],
        *,
        clock: Clock,
        retry: RetryPolicy | None = None,
        failpoint: Failpoint = no_failpoint,
        owner: str | None = None,
        rng: random.Random | None = None,
        batch: int = CLAIM_BATCH,
    ) -> None:
        self._store = store
        self._sinks: dict[SinkName, Sink] = {s.name: s for s in sinks}
        self._clock = clock
        self._retry = retry or RetryPolicy()
        self._failpoint = failpoint
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._rng = rng or random.Random()
        self._batch = batch
        self._claimed: deque[Claimed] = deque()
        """Rows claimed and not yet tried, oldest first (each of a different group)."""
        self._fresh = False
        """The next row is the first of a claim just made (no need to ask the store)."""
        self._renewed: set[int] | None = None
        """The queued rows the row just completed renewed, still ours (None: ask the store)."""
        # Per run (reset by run()): the linger deadline, the hard one, rate limits so far.
        self._deadline = clock.now()
        self._hard_deadline = self._deadline
        self._limited_row: dict[int, int] = {}
        self._limited_run = 0

    @property
    def sinks(self) -> tuple[SinkName, ...]:
        """The sinks this relay delivers to."""
        return tuple(self._sinks)

    def run(self, *, linger: timedelta = timedelta(0)) -> RelayReport:
        """Deliver every due row; wait (on the clock) up to ``linger`` for rows soon due."""
        report = RelayReport()
        started = self._clock.now()
        self._deadline = started + linger
        self._hard_deadline = started + max(linger, self._retry.max_run)
        self._limited_row = {}
        self._limited_run = 0
        paused: dict[SinkName, datetime] = {}
        try:
            while True:
                now = self._clock.now()
                active = [s for s in self._sinks if paused.get(s, now) <= now]
                if active and now >= self._hard_deadline:
                    self._give_back()
                    due = self._store.next_due(sinks=active)
                    if due is not None and due <= now:
                        report.stopped = _stopped(_span(now - started), report.dead, active)
                        report.pending_left = True
                        log.warning("outbox: %s", report.stopped)
                    break
                self._release_unready(active)
                if not self._claimed and active:
                    self._claim(active, now)
                if self._claimed:
                    claimed = self._claimed.popleft()
                    if self._still_ours(claimed, now):
                        self._deliver(claimed, report, paused)
                    continue
                wake = self._next_wake(paused)
                report.pending_left = wake is not None
                # Due but not claimable means blocked (behind a dead row, or leased): stop.
                if wake is None or wake > self._deadline or wake <= now:
                    break
                self._clock.sleep((wake - now).total_seconds())
        finally:
            self._give_back()
        for sink, until in paused.items():
            if until == _FOREVER:
                report.skipped_sinks[sink] = "failed in this run; its rows wait for the next"
        self._report_held(report)
        return report

    def _claim(self, sinks: list[SinkName], now: datetime) -> None:
        self._claimed.extend(
            self._store.claim(
                sinks=sinks, owner=self._owner, now=now, lease=self._retry.lease, limit=self._batch
            )
        )
        self._fresh = True
        self._renewed = None

    def _still_ours(self, claimed: Claimed, now: datetime) -> bool:
        """Whether this relay still holds ``claimed``, its batch-mates' leases renewed.

        The first row of a claim is ours. The others waited while earlier rows were sent,
        and a relay whose clock runs behind (or that stalled) may have seen their leases run
        out elsewhere: another relay may have taken them over, and sending them too would be
        a duplicate. So before each, the store says which are still ours, and extends them.
        """
        if self._fresh:
            self._fresh = False
            return True
        queued = [claimed, *self._claimed]
        held = self._renewed
        self._renewed = None
        if held is None:  # the previous row failed, or was given back: ask now
            held = self._store.renew(
                [c.item for c in queued], owner=self._owner, now=now, lease=self._retry.lease
            )
        lost = [c for c in queued if c.item.id not in held]
        if lost:
            log.info(
                "outbox: rows %s were taken over by another relay before this one sent them",
                " ".join(str(c.item.id) for c in lost),
            )
            self._claimed = deque(c for c in self._claimed if c.item.id in held)
        return claimed.item.id in held

    def _release_unready(self, active: list[SinkName]) -> None:
        """Give back claimed rows whose sink is paused (it failed or is rate limited)."""
        self._release([c for c in self._claimed if sink_of(c.item.sink) not in active])

    def _release(self, claimed: list[Claimed]) -> None:
        if claimed:
            self._store.release([c.item for c in claimed], owner=self._owner)
            gone = {c.item.id for c in claimed}
            self._claimed = deque(c for c in self._claimed if c.item.id not in gone)

    def _give_back(self) -> None:
        """The run ends (an error, an interrupt, the deadline): rows not tried go back."""
        if not self._claimed:
            return
        try:
            self._release(list(self._claimed))
        except Exception as exc:  # the store failing is likely why the run ended: say so, go on
            log.warning(
                "outbox: %d claimed rows could not be given back (%s); they go out once their "
                "lease runs out",
                len(self._claimed),
                redact_exception(exc),
            )
            self._claimed.clear()

    def _next_wake(self, paused: dict[SinkName, datetime]) -> datetime | None:
        times = []
        for sink in self._sinks:
            until = paused.get(sink)
            if until == _FOREVER:
                continue
            due = self._store.next_due(sinks=[sink])
            if due is not None:
                times.append(max(due, until) if until is not None else due)
        return min(times) if times else None

    def _report_held(self, report: RelayReport) -> None:
        """Rows another process holds: this run cannot say they were delivered."""
        now = self._clock.now()
        for item in self._store.held(sinks=list(self._sinks), now=now):
            if item.lease_owner == self._owner or item.lease_expires_at is None:
                continue
            expires = item.lease_expires_at
            owner = item.lease_owner or "another process"
            running = _running(item.lease_owner)
            if running:
                reason = (
                    f"being delivered by {owner}, a process still running on this host (its "
                    f"lease runs until {_at(expires)})"
                )
                report.elsewhere.append((item, reason))
                log.info("outbox row %s: %s", item.id, reason)
                continue
            if running is False:
                reason = (
                    f"held by {owner}, a process on this host that is no longer running: the "
                    f"row goes out after its lease ends at {_at(expires)}, checked against "
                    f"{item.sink} first"
                )
            else:
                reason = (
                    f"still being sent by {owner} (its lease runs until {_at(expires)}); if "
                    f"that process died, the row goes out after {_at(expires)}, checked "
                    f"against {item.sink} first"
                )
            report.retrying.append((item, reason))
            report.next_attempts[item.id] = expires
            report.pending_left = True
            log.warning("outbox row %s: %s", item.id, reason)

    def _deliver(
        self, claimed: Claimed, report: RelayReport, paused: dict[SinkName, datetime]
    ) -> None:
        item, ref = claimed.item, claimed.ref
        sink = self._sinks[sink_of(item.sink)]
        self._renewed = None  # only a completion right before the next row renews for it
        self._failpoint(f"before_send:{sink_of(item.sink)}")
        try:
            delivered = sink.deliver(item, ref)
        except DeliveryError as exc:
            self._failed(item, exc, report, paused)
            return
        except Exception as exc:  # a sink bug must not lose the row: retry it, loudly
            log.exception("sink %s crashed on outbox row %s", item.sink, item.id)
            error = DeliveryError(f"{item.sink}: {redact_exception(exc)}", sent=True)
            self._failed(item, error, report, paused)
            return
        self._failpoint(f"after_send:{sink_of(item.sink)}")
        if self._claimed:
            # The rows still queued are renewed in the same transaction (one statement less
            # a row than asking again before the next): _still_ours reads what it held.
            kept, self._renewed = self._store.complete_and_renew(
                item,
                delivered,
                owner=self._owner,
                now=self._clock.now(),
                renew=[c.item for c in self._claimed],
                lease=self._retry.lease,
            )
        else:
            kept = self._store.complete(item, delivered, owner=self._owner, now=self._clock.now())
        self._failpoint(f"after_done:{sink_of(item.sink)}")
        self._warn(item, delivered, report)
        if not kept:
            self._lost_lease(item, delivered.ref or ref, report)
            return
        report.delivered.append(item)

    def _lost_lease(self, item: OutboxItem, ref: SinkRef | None, report: RelayReport) -> None:
        # Another relay claimed the row once our lease expired and may have sent it too.
        where = _where(item, ref)
        warning = (
            f"row {item.id} was delivered by this process after its lease expired; another "
            f"process may also have delivered it — check {where}"
        )
        report.possible_duplicates.append((item, warning))
        report.warnings.append(warning)
        log.warning("outbox: %s", warning)

    def _failed(
        self,
        item: OutboxItem,
        exc: DeliveryError,
        report: RelayReport,
        paused: dict[SinkName, datetime],
    ) -> None:
        now = self._clock.now()
        error = redact(str(exc))
        if exc.retry_after is not None:
            self._rate_limited(item, exc, error, now, report, paused)
            return
        if exc.permanent or item.attempts >= self._retry.max_attempts:
            self._store.fail(
                item, owner=self._owner, error=error, now=now, retry_at=None, uncertain=exc.sent
            )
            report.dead.append((item, error))
            log.error("outbox row %s (%s) is dead: %s", item.id, item.dedupe_key, error)
            return
        retry_at = now + self._retry.backoff(item.attempts, self._rng)
        self._store.fail(
            item, owner=self._owner, error=error, now=now, retry_at=retry_at, uncertain=exc.sent
        )
        paused[sink_of(item.sink)] = _FOREVER
        report.retrying.append((item, error))
        report.next_attempts[item.id] = retry_at
        log.warning(
            "outbox row %s (%s) failed (attempt %s): %s; retrying at %s",
            item.id,
            item.dedupe_key,
            item.attempts,
            error,
            retry_at.isoformat(),
        )

    def _rate_limited(
        self,
        item: OutboxItem,
        exc: DeliveryError,
        error: str,
        now: datetime,
        report: RelayReport,
        paused: dict[SinkName, datetime],
    ) -> None:
        # A rate limit is GitHub's or Slack's schedule, not a failure: honour it (never
        # sooner than min_wait), without spending an attempt.
        assert exc.retry_after is not None
        until = now + max(exc.retry_after, self._retry.min_wait)
        tries = self._limited_row.get(item.id, 0) + 1
        self._limited_row[item.id] = tries
        self._limited_run += 1
        # The row goes back to pending before any wait: the lease never outlives the claim.
        self._store.fail(
            item,
            owner=self._owner,
            error=f"rate limited until {_at(until)}: {error}",
            now=now,
            retry_at=until,
            uncertain=exc.sent,
            count_attempt=False,
        )
        bound = self._inline_bound(until - now, until, tries)
        if bound is None:
            paused[sink_of(item.sink)] = until
            self._deadline = max(self._deadline, until)
            log.warning("%s rate limited; next attempt at %s", item.sink, until.isoformat())
            return
        paused[sink_of(item.sink)] = _FOREVER
        reason = f"{error}; next attempt at {_at(until)} ({bound})"
        report.retrying.append((item, reason))
        report.next_attempts[item.id] = until
        log.warning("outbox row %s: %s", item.id, reason)

    def _inline_bound(self, wait: timedelta, until: datetime, tries: int) -> str | None:
        """Which bound stops this run from waiting the rate limit out (None: none does)."""
        retry = self._retry
        if wait > retry.max_inline_wait:
            return f"longer than the {_span(retry.max_inline_wait)} this run waits"
        if tries > retry.max_rate_limited:
            return f"rate limited {tries} times in this run"
        if self._limited_run > retry.max_rate_limited_run:
            return f"{self._limited_run} rate limits in this run"
        if until > self._hard_deadline:
            return "past this run's deadline"
        return None

    def _warn(self, item: OutboxItem, delivered: Delivered, report: RelayReport) -> None:
        if delivered.warning:
            warning = redact(delivered.warning)
            report.warnings.append(warning)
            log.warning("outbox row %s: %s", item.id, warning)


def _stopped(took: str, dead: Sequence[tuple[OutboxItem, str]], sinks: Sequence[SinkName]) -> str:
    """Why the run stopped, and what holds the rows it left.

    A row behind a dead one of its group and sink (a notification's open died: its updates
    wait) is never claimed, however many runs come: it is not "due", it waits for a retry of
    the dead row. Only the dead rows this run made are known here; the others are listed by
    ``mlcopilot outbox list --state dead``.
    """
    head = f"the relay run reached its deadline ({took})"
    # A dead write-back row blocks nothing (each holds the whole desired state).
    blocking = [item for item, _ in dead if item.sink != "datahub" and sink_of(item.sink) in sinks]
    if not blocking:
        return f"{head}; rows still due go out with the next run (`mlcopilot outbox deliver`)"
    ids = " ".join(str(item.id) for item in blocking)
    rows = "row" if len(blocking) == 1 else "rows"
    return (
        f"{head}; later rows of the same group wait behind dead outbox {rows} {ids} and go out "
        f"only once {'it is' if len(blocking) == 1 else 'they are'} retried (fix the cause, "
        f"then `mlcopilot outbox retry {ids}`); rows of other groups go out with the next run "
        "(`mlcopilot outbox deliver`)"
    )


def _running(owner: str | None) -> bool | None:
    """Whether the process behind a lease owner (``host:pid:tag``) is running.

    Only a process on this host can be looked at: None for any other (or an owner named
    some other way), which cannot be told from a dead one.
    """
    parts = (owner or "").split(":")
    if len(parts) < 3 or ":".join(parts[:-2]) != socket.gethostname():
        return None
    try:
        pid = int(parts[-2])
    except ValueError:
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # running, as another user
        return True
    except OSError:
        return None
    return True


def _at(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"


def _where(item: OutboxItem, ref: SinkRef | None) -> str:
    if ref is None:
        return f"{item.sink} for group {item.group_key} (generation {item.group_generation})"
    if ref.url:
        return ref.url
    return f"{ref.sink} {ref.key}"
