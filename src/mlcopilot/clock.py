"""Time as a dependency: the relay and the notification policy never read the wall clock.

Production uses :class:`SystemClock` (or :class:`OffsetClock`, which keeps a scan's ``--now``
and lets real time pass from there); tests use a fake clock whose ``sleep`` only moves time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Reads the time and waits."""

    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Really wait."""
        if seconds > 0:
            time.sleep(seconds)


class OffsetClock:
    """Starts at ``start`` and advances with real (monotonic) time; sleeps for real."""

    def __init__(self, start: datetime) -> None:
        self._start = start
        self._origin = time.monotonic()

    def now(self) -> datetime:
        """``start`` plus the real time elapsed since construction."""
        return self._start + timedelta(seconds=time.monotonic() - self._origin)

    def sleep(self, seconds: float) -> None:
        """Really wait."""
        if seconds > 0:
            time.sleep(seconds)
