"""Before a scan reads anything: which models it scans, and whether its clock may run.

A model is named by its urn or its name (close names suggested when none matches); no model
named means every ML model in the catalog, and an empty catalog is told apart from one that
holds entities but no model. A clock earlier than the last committed scan is refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from mlcopilot.errors import CatalogError, ClockBehind, UsageError
from mlcopilot.model import Urn
from mlcopilot.protocols import Catalog, EntityCensus, StateStore
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count


def check_clock(store: StateStore, now: datetime) -> None:
    """Refuse a clock earlier than the last committed scan's, before anything is read or written.

    Reconciling against the past would resolve incidents before they were opened and send
    reminders backwards. A dry run is held to the same rule: it previews what this scan
    would do, and this scan would be refused.
    """
    last = store.last_scan_at()
    if last is not None and now < last:
        raise ClockBehind(
            f"--now {_instant(now)} is earlier than the last committed scan "
            f"({_instant(last)}) in the state database: scans move forward in time; use a "
            "later --now (or none), or another --state-url"
        )


def clock_for(store: StateStore) -> datetime:
    """The system clock for a scan sharing ``store`` with others: never behind the last one.

    Another scanner or watcher that read its clock a few milliseconds later may commit
    first, and :func:`check_clock` would refuse this scan (seen in a clean-clone run of two
    shared scans, 8 ms apart). What is left is the moment between this read and the check:
    :func:`on_shared_clock` takes a fresh clock then.
    """
    now = datetime.now(UTC)
    last = store.last_scan_at()
    return max(now, last) if last is not None else now


T = TypeVar("T")

SHARED_CLOCK_ATTEMPTS = 3
"""Scans a shared batch starts on a fresh clock, each refused only by another's commit."""


def on_shared_clock(store: StateStore, scan: Callable[[datetime], T]) -> T:
    """``scan`` on :func:`clock_for`'s clock, again on a fresh one if it was refused.

    Refused means another process committed a later scan between the clock's read and the
    scan's own check (:class:`ClockBehind`), which comes before the scan reads or writes
    anything, so starting again is safe. After :data:`SHARED_CLOCK_ATTEMPTS` the refusal
    stands (the clocks of the processes sharing the store would be far apart).
    """
    for _ in range(SHARED_CLOCK_ATTEMPTS - 1):
        try:
            return scan(clock_for(store))
        except ClockBehind:
            continue
    return scan(clock_for(store))


def _instant(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def models_to_scan(catalog: Catalog, requested: Sequence[Urn]) -> list[Urn]:
    """The models to scan; empty when the catalog holds entities but no ML model."""
    if not requested:
        models = catalog.models()
        if not models and isinstance(catalog, EntityCensus) and not catalog.entity_counts():
            raise CatalogError(
                f"{catalog.label}: the catalog is empty, it has no ML models (mlModel "
                "entities) to scan; load metadata with `mlcopilot catalog load FILE`"
            )
        return models
    urns = [u if u.startswith("urn:li:") else _model_named(catalog, u) for u in requested]
    for urn in urns:
        if not urn.startswith("urn:li:mlModel:("):
            raise UsageError(
                f"--model {urn!r} is not an mlModel urn; expected a model's name or "
                "urn:li:mlModel:(urn:li:dataPlatform:PLATFORM,NAME,ENV) "
                "(`mlcopilot catalog models` lists them)"
            )
    found = catalog.nodes(urns)
    missing = [u for u in urns if not found[u].exists]
    if missing:
        raise UsageError(
            f"--model {missing[0]}: no such model in {catalog.label}"
            + _did_you_mean(catalog, short_name(missing[0]))
        )
    return list(dict.fromkeys(urns))


def _model_named(catalog: Catalog, name: str) -> Urn:
    """The one model whose name (its urn's name part) is ``name``.

    Raises:
        UsageError: No model has that name (close names are suggested), or several do (in
            different platforms or environments: they are listed, to pick one by urn).
    """
    models = catalog.models()
    named = [u for u in models if short_name(u) == name]
    if not named:  # a name typed in another case is still unambiguous if only one matches
        named = [u for u in models if short_name(u).lower() == name.lower()]
    if len(named) == 1:
        return named[0]
    if named:
        raise UsageError(
            f"--model {name}: {len(named)} models have this name; give one's urn: "
            + ", ".join(named)
        )
    raise UsageError(
        f"--model {name}: no model of that name in {catalog.label}"
        + _did_you_mean(catalog, name, models)
    )


def _did_you_mean(catalog: Catalog, name: str, models: Sequence[Urn] | None = None) -> str:
    """``; did you mean a, b?`` with the models named most like ``name`` (or nothing)."""
    names = sorted({short_name(u) for u in (catalog.models() if models is None else models)})
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(close)}? (`mlcopilot catalog models` lists them all)"
    return "; `mlcopilot catalog models` lists the models it holds"


def nothing_to_scan(catalog: Catalog) -> str:
    """What a catalog without ML models holds, e.g. ``No ML models in lite:PATH (...).``."""
    held = ""
    if isinstance(catalog, EntityCensus):
        counts = catalog.entity_counts()
        by_type = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        detail = ", ".join(count(n, entity_type) for entity_type, n in by_type)
        held = f" (it holds {count(sum(counts.values()), 'entity')}: {detail})"
    return f"No ML models in {catalog.label}{held}. Nothing to scan."
