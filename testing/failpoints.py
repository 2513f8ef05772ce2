"""Crash tests in process: a failpoint that "kills" the scan at a named step.

:class:`Killed` is a ``BaseException``: no ``except Exception`` catches it, so nothing cleans
up after it — as after ``kill -9``, the row being delivered stays ``sending`` under its lease.
"""

from __future__ import annotations

from collections.abc import Callable


class Killed(BaseException):
    """The process died here (no ``except Exception`` cleans up after it)."""


def kill_at(point: str) -> Callable[[str], None]:
    """A failpoint raising :class:`Killed` at ``point`` (``after_send:slack``...)."""

    def failpoint(name: str) -> None:
        if name == point:
            raise Killed(name)

    return failpoint
