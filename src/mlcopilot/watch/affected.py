"""Which models a change affects: the watched models downstream of the changed entity.

The reverse walk itself (the index and the optional catalog capability) is
:mod:`mlcopilot.downstream`, shared with the impact preview.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlcopilot.downstream import MODEL_PREFIX, DownstreamIndex, DownstreamModels
from mlcopilot.model import Urn
from mlcopilot.protocols import Catalog


def affected_models(
    changed: Iterable[Urn],
    index: DownstreamIndex,
    catalog: Catalog | None = None,
) -> list[Urn]:
    """The watched models downstream of any of ``changed``, sorted.

    A changed model is affected itself (a new model too: nothing indexes it yet). With a
    catalog offering :class:`DownstreamModels`, its answer is added to the index's.
    """
    found: set[Urn] = set()
    for urn in changed:
        found |= index.downstream(urn)
        if urn.startswith(MODEL_PREFIX):
            found.add(urn)
        if isinstance(catalog, DownstreamModels):
            found.update(catalog.downstream_models(urn))
    return sorted(m for m in found if index.watches(m))
