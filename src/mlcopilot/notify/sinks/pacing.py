"""Spacing between writes: ≥1 s between GitHub mutations, ~1 s per Slack channel."""

from __future__ import annotations

from datetime import datetime

from mlcopilot.clock import Clock


class Pacer:
    """Waits so that two writes under the same key are at least ``gap_s`` apart."""

    def __init__(self, clock: Clock, gap_s: float) -> None:
        self._clock = clock
        self._gap_s = gap_s
        self._last: dict[str, datetime] = {}

    def wait(self, key: str = "") -> None:
        """Block (on the clock) until a write under ``key`` may go, and note that it goes now."""
        last = self._last.get(key)
        if last is not None:
            remaining = self._gap_s - (self._clock.now() - last).total_seconds()
            if remaining > 0:
                self._clock.sleep(remaining)
        self._last[key] = self._clock.now()
