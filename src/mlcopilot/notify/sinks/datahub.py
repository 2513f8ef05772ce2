"""The DataHub write-back as an outbox sink, and acknowledgements read back from DataHub.

A scan's write-back rows hold its whole catalog plan (tags, the model's open-risks property,
incidents on deterministic urns, documents), a part of it each. Applying a row is idempotent
— the catalog writes only what differs — so a row delivered twice (a crash after the write,
before ``done``) changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, Protocol, overload, runtime_checkable

from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.incidents.payload import Delivered, DeliveryError, OutboxItem, SinkName, SinkRef
from mlcopilot.model import DocumentWrite, IncidentWrite, PropertyWrite, TagWrite, Urn, Write
from mlcopilot.protocols import Catalog
from mlcopilot.redact import redact_exception

_KINDS: dict[str, type[Any]] = {
    "tag": TagWrite,
    "property": PropertyWrite,
    "incident": IncidentWrite,
    "document": DocumentWrite,
}
_TIMES = ("created_at", "status_changed_at", "modified_at")


_FIELDS: dict[type[Any], tuple[str, tuple[str, ...]]] = {
    cls: (kind, tuple(f.name for f in fields(cls))) for kind, cls in _KINDS.items()
}
"""Write class -> (kind, field names in declaration order, as ``asdict`` yields them)."""


def encode_writes(writes: Sequence[Write]) -> list[dict[str, Any]]:
    """Catalog writes as JSON for an outbox row.

    Equal to ``{"kind": kind, **dataclasses.asdict(write)}`` with the times in ISO form, built
    field by field: every field is a string, number, bool, datetime or a tuple of strings and
    numbers, which ``asdict`` would only copy (deeply, at a cost per write in a large scan).
    """
    encoded = []
    for write in writes:
        kind, names = _FIELDS[type(write)]
        data: dict[str, Any] = {"kind": kind}
        for name in names:
            value = getattr(write, name)
            data[name] = value.isoformat() if name in _TIMES else value
        encoded.append(data)
    return encoded


ENCODED_SLICE = 10_000
"""Writes :class:`EncodedWrites` encodes at a time when iterated."""


class EncodedWrites(Sequence[Mapping[str, Any]]):
    """:func:`encode_writes` of ``writes``, each encoded when it is read, none kept.

    A scan's write-back rows hold its whole plan: an estate's is half a million writes, whose
    encoded copies (a dict and new time strings each) were a quarter of a dry run's peak
    memory, made for rows it never stores. They are made when a row is recorded, or not at
    all; a slice is a part of the plan, encoded when read too. Equal to the list
    :func:`encode_writes` returns.
    """

    __slots__ = ("_writes",)

    def __init__(self, writes: Sequence[Write]) -> None:
        self._writes = writes
        """Not copied: the caller's plan, which it does not change afterwards."""

    def __len__(self) -> int:
        return len(self._writes)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):  # a part of the plan, encoded when read as this is
            return EncodedWrites(self._writes[index])
        return encode_writes([self._writes[index]])[0]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for start in range(0, len(self._writes), ENCODED_SLICE):
            yield from encode_writes(self._writes[start : start + ENCODED_SLICE])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as one is

    def __repr__(self) -> str:
        return f"EncodedWrites({len(self)} writes)"


def decode_writes(rows: Sequence[Mapping[str, Any]]) -> list[Write]:
    """The catalog writes an outbox row holds."""
    writes: list[Write] = []
    for row in rows:
        data = {k: v for k, v in row.items() if k != "kind"}
        for name in _TIMES:
            if name in data:
                data[name] = datetime.fromisoformat(data[name])
        for name in ("values", "entities", "related_assets"):
            if name in data:
                data[name] = tuple(data[name])
        writes.append(_KINDS[row["kind"]](**data))
    return writes


class DataHubSink:
    """Applies write-back rows to the catalog (DataHub, or the embedded Lite catalog)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.applied: list[Write] = []
        """Every write that changed the catalog, in order (what a scan reports)."""

    @property
    def name(self) -> SinkName:
        """``datahub``."""
        return "datahub"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Apply the row's writes; only the differences reach the catalog."""
        writes = decode_writes(item.payload.get("writes", []))
        try:
            changed = self._catalog.apply(writes)
        except CatalogUnavailable as exc:
            raise DeliveryError(f"{self._catalog.label}: {redact_exception(exc)}") from exc
        except CatalogError as exc:
            raise DeliveryError(
                f"{self._catalog.label}: {redact_exception(exc)}", permanent=True
            ) from exc
        self.applied.extend(changed)
        return Delivered(detail=changed)


@runtime_checkable
class IncidentStatusReader(Protocol):
    """A catalog that can say how people have triaged our DataHub incidents."""

    def incident_status(self, urns: Sequence[Urn]) -> dict[Urn, tuple[str, str | None, int]]:
        """``urn -> (state, stage, number of assignees)`` for the incidents that exist."""
        ...


def datahub_acknowledger(status: tuple[str, str | None, int]) -> str | None:
    """Who acknowledged, from a DataHub incident's state, stage and assignees (None: nobody).

    An active incident moved past triage (INVESTIGATION, WORK_IN_PROGRESS) or given an
    assignee counts as acknowledged.
    """
    state, stage, assignees = status
    if state != "ACTIVE":
        return None
    if stage in ("INVESTIGATION", "WORK_IN_PROGRESS"):
        return f"datahub:{stage.lower()}"
    if assignees:
        return "datahub:assignee"
    return None
