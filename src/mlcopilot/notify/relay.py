"""The relay: delivers committed outbox rows to DataHub, GitHub and Slack, at least once.

Each row is claimed (``sending``, with a lease), handed to its sink, then marked ``done`` in
the state store; a sink failure puts it back to ``pending`` with capped, fully jittered
exponential backoff (AWS's formula), or makes it ``dead`` with the last error (redacted) once
the attempts are spent or the error is permanent. Rate limits are honoured, not counted as
attempts: a short wait happens here (on the clock), a long one reschedules the row. A sink
that failed is skipped for the rest of the run; other sinks go on.

Idempotency lives in the sinks (deterministic DataHub urns, GitHub markers, Slack metadata);
the relay's job is to never lose a row and to say plainly what it could not do.

``failpoint`` is called between the steps with names like ``after_send:github``; the crash
tests use it to kill the process exactly there.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from mlcopilot.clock import Clock
from mlcopilot.notify.codec import (
    Delivered,
    DeliveryError,
    OutboxItem,
    Sink,
    SinkName,
)
from mlcopilot.protocols import OutboxStore
from mlcopilot.redact import redact, redact_exception

log = logging.getLogger(__name__)

Failpoint = Callable[[str], None]
_FOREVER = datetime.max.replace(tzinfo=UTC)
FAILPOINT_ENV = "MLCOPILOT_FAILPOINT"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries: ``max_attempts`` with full-jitter backoff between ``base`` and ``cap``.

    A rate-limit wait up to ``max_inline_wait`` is waited out within the run; longer ones (and
    every wait past ``deadline`` of the run) reschedule the row instead.
    """

    max_attempts: int = 8
    base: timedelta = timedelta(seconds=30)
    cap: timedelta = timedelta(minutes=30)
    max_inline_wait: timedelta = timedelta(seconds=90)
    lease: timedelta = timedelta(seconds=120)

    def backoff(self, attempts: int, rng: random.Random) -> timedelta:
        """``uniform(0, min(cap, base * 2**attempts))``, at least one second."""
        ceiling = min(self.cap.total_seconds(), self.base.total_seconds() * 2 ** max(0, attempts))
        return timedelta(seconds=max(1.0, rng.uniform(0, ceiling)))


@dataclass(slots=True)
class RelayReport:
    """What one relay run did."""

    delivered: list[OutboxItem] = field(default_factory=list)
    retrying: list[tuple[OutboxItem, str]] = field(default_factory=list)
    dead: list[tuple[OutboxItem, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped_sinks: dict[SinkName, str] = field(default_factory=dict)
    pending_left: bool = False
    """Rows are left for later (not yet due, rescheduled, or behind a failed row)."""

    @property
    def ok(self) -> bool:
        """True when nothing failed (rows merely not due yet do not count)."""
        return not self.retrying and not self.dead


def no_failpoint(name: str) -> None:
    """The production failpoint: does nothing."""


def env_failpoint(environ: Mapping[str, str] | None = None) -> Failpoint:
    """A failpoint that kills the process (exit 137, no cleanup) at ``$MLCOPILOT_FAILPOINT``.

    For the crash tests only; unset, it does nothing.
    """
    wanted = (environ if environ is not None else os.environ).get(FAILPOINT_ENV, "")
    if not wanted:
        return no_failpoint
    names = {w.strip() for w in wanted.split(",") if w.strip()}

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
    ) -> None:
        self._store = store
        self._sinks: dict[SinkName, Sink] = {s.name: s for s in sinks}
        self._clock = clock
        self._retry = retry or RetryPolicy()
        self._failpoint = failpoint
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._rng = rng or random.Random()
        self._deadline = clock.now()

    @property
    def sinks(self) -> tuple[SinkName, ...]:
        """The sinks this relay delivers to."""
        return tuple(self._sinks)

    def run(self, *, linger: timedelta = timedelta(0)) -> RelayReport:
        """Deliver every due row; wait (on the clock) up to ``linger`` for rows soon due."""
        report = RelayReport()
        self._deadline = self._clock.now() + linger
        paused: dict[SinkName, datetime] = {}
        while True:
            now = self._clock.now()
            active = [s for s in self._sinks if paused.get(s, now) <= now]
            item = None
            if active:
                item = self._store.claim(
                    sinks=active, owner=self._owner, now=now, lease=self._retry.lease
                )
            if item is not None:
                self._deliver(item, report, paused)
                continue
            wake = self._next_wake(paused)
            report.pending_left = wake is not None
            # Due but not claimable means blocked (behind a dead row, or leased): stop.
            if wake is None or wake > self._deadline or wake <= now:
                break
            self._clock.sleep((wake - now).total_seconds())
        for sink, until in paused.items():
            if until == _FOREVER:
                report.skipped_sinks[sink] = "failed in this run; its rows wait for the next"
        return report

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

    def _deliver(
        self, item: OutboxItem, report: RelayReport, paused: dict[SinkName, datetime]
    ) -> None:
        sink = self._sinks[item.sink]
        ref = None
        if item.action != "writeback":
            ref = self._store.sink_ref(item.group_key, item.group_generation, item.sink)
        self._failpoint(f"before_send:{item.sink}")
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
        self._failpoint(f"after_send:{item.sink}")
        self._store.complete(item, delivered, owner=self._owner, now=self._clock.now())
        self._failpoint(f"after_done:{item.sink}")
        report.delivered.append(item)
        self._warn(item, delivered, report)

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
            # A rate limit is GitHub's or Slack's schedule, not a failure: honour it exactly.
            until = now + exc.retry_after
            self._store.fail(
                item,
                owner=self._owner,
                error=error,
                now=now,
                retry_at=until,
                uncertain=exc.sent,
                count_attempt=False,
            )
            if exc.retry_after <= self._retry.max_inline_wait:
                paused[item.sink] = until
                self._deadline = max(self._deadline, until)
            else:
                paused[item.sink] = _FOREVER
                report.retrying.append((item, error))
            log.warning("%s rate limited; next attempt at %s", item.sink, until.isoformat())
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
        paused[item.sink] = _FOREVER
        report.retrying.append((item, error))
        log.warning(
            "outbox row %s (%s) failed (attempt %s): %s; retrying at %s",
            item.id,
            item.dedupe_key,
            item.attempts,
            error,
            retry_at.isoformat(),
        )

    def _warn(self, item: OutboxItem, delivered: Delivered, report: RelayReport) -> None:
        if delivered.warning:
            warning = redact(delivered.warning)
            report.warnings.append(warning)
            log.warning("outbox row %s: %s", item.id, warning)
