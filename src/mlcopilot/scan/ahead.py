"""The scanned models' stored incidents, read on a thread while the walk waits on the catalog.

A second scan of an estate reconciles against every incident its models hold: 282,022 at
10,000 models, 8.5 s of reading after the walk. The walk spends about as long again waiting
on DataHub as it computes, so the read is started with it, on a thread of its own, and is
only checked once the walk is done: the incidents' generations and states, read again (three
columns a row, nothing decoded), must be what the early read saw. An incident opened,
acknowledged or resolved meanwhile (by another scanner, a person, the acknowledgements read
back) fails the check, and the incidents are read again, as if nothing had been read ahead.

A store that cannot be read from another thread, or cannot give the states alone
(:class:`ReadsAhead`), is read after the walk, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from mlcopilot.model import Incident, IncidentState, Urn
from mlcopilot.protocols import StateStore

log = logging.getLogger(__name__)


@runtime_checkable
class ReadsAhead(Protocol):
    """A store that can be read from another thread and give its incidents' states alone."""

    @property
    def reads_concurrently(self) -> bool:
        """Whether a read on another thread sees the same database."""
        ...

    def incident_states(self, models: Sequence[Urn]) -> dict[str, tuple[int, IncidentState]]:
        """``id -> (generation, state)`` of the latest generation of ``models``' incidents."""
        ...


class StoredIncidents:
    """``models``' stored incidents without their content, read ahead where the store can.

    :meth:`take` gives them once the walk is done (the first reconciliation); every later
    one reads anew.
    """

    def __init__(self, store: StateStore, models: Sequence[Urn]) -> None:
        self._store = store
        self._models = list(models)
        self._ahead: Future[list[Incident]] | None = None
        if models and isinstance(store, ReadsAhead) and store.reads_concurrently:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlcopilot-read-ahead")
            self._ahead = pool.submit(store.incidents, models=self._models, content=False)
            pool.shutdown(wait=False)  # the thread ends with its one read

    def take(self) -> list[Incident]:
        """The incidents as stored now: the early read if nothing changed since, else anew."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            try:
                early = ahead.result()
            except Exception as exc:  # read again below, where a failure is the scan's error
                log.debug("reading incidents ahead failed (%s); reading them again", exc)
            else:
                assert isinstance(self._store, ReadsAhead)
                states = self._store.incident_states(self._models)
                if states == {i.id: (i.generation, i.state) for i in early}:
                    return early
                log.debug("incidents changed during the walk; reading them again")
        return self._store.incidents(models=self._models, content=False)
