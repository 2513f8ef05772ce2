"""Which models a change affects: the watched models downstream of the changed entity.

The watcher answers from its in-memory :class:`~mlcopilot.lineage.downstream.DownstreamIndex` alone
(every rescan's walk keeps it current), never from the catalog: an event costs no request.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlcopilot.lineage.downstream import MODEL_PREFIX, DownstreamIndex
from mlcopilot.model import Urn


def affected_models(changed: Iterable[Urn], index: DownstreamIndex) -> list[Urn]:
    """The watched models downstream of any of ``changed``, sorted.

    A changed model is affected itself (a new model too: nothing indexes it yet).
    """
    found: set[Urn] = set()
    for urn in changed:
        found |= index.downstream(urn)
        if urn.startswith(MODEL_PREFIX):
            found.add(urn)
    return sorted(m for m in found if index.watches(m))
