"""A scan's bound on its walk: past ``[datahub] walk_timeout`` it stops, saying how far it got.

Each call to DataHub has a deadline of its own, but a slow server that answers every call just
in time can still keep a scan of a large estate walking for hours. So the walk as a whole
(listing the models, their lineage, the history their baselines come from, the checks) gets a
bound: a catalog that can hold its calls to a deadline (:class:`~mlcopilot.protocols.TimedWalk`,
the ``datahub:`` and ``mcp:`` backends) is given it, and the walk checks it between models.
Past it the scan raises :class:`~mlcopilot.errors.CatalogUnavailable` (exit 3) naming what it
had reached; it has recorded nothing (the walk comes before the one transaction).
"""

from __future__ import annotations

import time
from datetime import timedelta
from types import TracebackType

from mlcopilot.errors import CatalogUnavailable
from mlcopilot.protocols import Catalog, TimedWalk
from mlcopilot.scan.checking import Progress
from mlcopilot.settings import format_duration
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

SETTING = "[datahub] walk_timeout, MLCOPILOT_WALK_TIMEOUT"
"""Where the bound is set, as messages name it."""


class WalkBound:
    """The bound of one scan's walk (``timeout`` None: none), used as ``with bound:``.

    :meth:`step` and :meth:`progress` say how far the walk got; leaving the block past the
    deadline with the catalog unavailable (its calls cut short) becomes the bound's error.
    """

    def __init__(self, catalog: Catalog, timeout: timedelta | None) -> None:
        self._catalog = catalog
        self._timeout = timeout
        self._deadline: float | None = None
        self._step = "listing the catalog's models"

    def __enter__(self) -> WalkBound:
        if self._timeout is not None:
            self._deadline = time.monotonic() + self._timeout.total_seconds()
            if isinstance(self._catalog, TimedWalk):
                self._catalog.walk_until(self._deadline)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._deadline is not None and isinstance(self._catalog, TimedWalk):
            self._catalog.walk_until(None)  # what follows the walk (delivery) has bounds of its own
        if isinstance(exc, CatalogUnavailable) and self.passed():
            raise self._error() from exc

    def passed(self) -> bool:
        """Whether the deadline has passed (never, without a bound)."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    def step(self, what: str) -> None:
        """The walk goes on to ``what`` (e.g. "reading the schemas the models were trained on")."""
        self._check()
        self._step = what

    def progress(self, inner: Progress | None) -> Progress:
        """``inner`` (may be None), also keeping count of the models walked."""

        def walked(done: int, total: int, model: str) -> None:
            if model:
                self.step(
                    f"walking the lineage of {short_name(model)} ({done} of "
                    f"{count(total, 'model')} walked)"
                )
            if inner is not None:
                inner(done, total, model)

        return walked

    def _check(self) -> None:
        if self.passed():
            raise self._error()

    def _error(self) -> CatalogUnavailable:
        assert self._timeout is not None
        return CatalogUnavailable(
            f"the scan's walk did not finish within {format_duration(self._timeout)} "
            f"({SETTING}): it stopped {self._step}; nothing was recorded. Raise the bound, or "
            "scan fewer models at a time (--model)"
        )
