"""Stored incidents packed into a few arrays: what a scan needs of the ones it will refresh.

A second scan of an estate reads back every incident of its models (282,022 at 10,000
models) and refreshes nearly all of them. A refresh keeps only their generation, state,
times and acknowledgement, and takes everything else from the finding; the stored content
digest tells whether that changes anything. Read as objects,
they were 49.5 MB of :class:`~mlcopilot.model.Incident` and about 20 MB of strings, read
while the walk allocates what it keeps; let go after reconciling, they left the allocator's
pages among the walk's partly used, and the second scan peaked above the first. Packed, they
are a few arrays (27 bytes an incident with its 8-byte digest, 37 before their row numbers
took a byte each and without the digest; each
array one block that is given back whole), and an incident's :class:`IncidentHead` is made
only when it is looked up.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from mlcopilot.model.findings import Incident, IncidentState, content_digest

_V = TypeVar("_V")

_STATES: tuple[IncidentState, ...] = tuple(IncidentState)
_CODES: dict[str, int] = {state.value: code for code, state in enumerate(_STATES)}
_RESOLVED = _CODES[IncidentState.RESOLVED.value]

_NO_DIGEST = -1
"""A row's digest when none is stored (written before digests were): never a digest."""

_Row = Sequence[Any]
"""A stored incident's ``(id, generation, state, opened_at, resolved_at, acknowledged_at,
acknowledged_by, resolution, seen_at, content_digest)``, its times as the store holds them."""


@dataclass(frozen=True, slots=True)
class IncidentHead:
    """What a refresh keeps of a stored incident: generation, state, times, acknowledgement.

    ``seen_at`` is not kept by a refresh (it sets its own) but tells whether a scan that read
    DataHub later committed meanwhile (:func:`mlcopilot.incidents.lifecycle.reconcile`).
    """

    generation: int
    state: IncidentState
    opened_at: datetime
    resolved_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolution: str | None
    seen_at: datetime | None
    digest: int | None = None
    """The stored :func:`~mlcopilot.model.findings.content_digest`; None when not known."""

    @property
    def is_open(self) -> bool:
        """True for open and acknowledged incidents."""
        return self.state is not IncidentState.RESOLVED


_WIDTHS: tuple[tuple[str, int], ...] = (("B", 1 << 8), ("H", 1 << 16), ("I", 1 << 32))
"""Row number arrays from the narrowest: the typecode, and how many values it can number."""


class _Repeated(Generic[_V]):
    """A column whose values repeat: each distinct value kept once, each row a number.

    A scan stamps all it writes with its clock, so a time column holds few distinct values,
    and each row's number takes a byte until there are more than 256 of them (six columns of
    282,022 rows at 10,000 models: 1.7 MB, against 6.8 MB at four bytes a row).
    """

    def __init__(self, decode: Callable[[Any], _V] | None = None) -> None:
        self.values: list[_V] = []
        self.rows = array("B")
        self._limit = 1 << 8
        self._index: dict[Hashable, int] = {}
        self._decode = decode

    def add(self, raw: Any) -> None:
        index = self._index.get(raw)
        if index is None:
            index = self._index[raw] = len(self.values)
            self.values.append(self._decode(raw) if self._decode is not None else raw)
            if index == self._limit:
                self._widen()
        self.rows.append(index)

    def __getitem__(self, row: int) -> _V:
        return self.values[self.rows[row]]

    def reordered(self, order: Sequence[int]) -> None:
        """Its rows in ``order`` (and only those)."""
        rows = self.rows
        self.rows = array(rows.typecode, [rows[row] for row in order])
        self._index = {}

    def _widen(self) -> None:
        code, self._limit = next((c, n) for c, n in _WIDTHS if n > self._limit)
        self.rows = array(code, self.rows)


def _key(incident_id: str) -> int | None:
    """The 64-bit number a 16-hex-digit id spells, or None for any other id."""
    if len(incident_id) != 16:
        return None
    try:
        key = int(incident_id, 16)
    except ValueError:
        return None
    # int() also takes upper case and underscores: only the one spelling is this number's.
    return key if f"{key:016x}" == incident_id else None


class IncidentHeads:
    """The latest generation of each of many stored incidents, packed, looked up by id.

    ``rows`` may hold several generations of an incident, in any order: the latest is kept.
    Ids are 16 hex digits (:func:`~mlcopilot.model.findings.finding_id`), each kept as one
    64-bit number in a sorted array; any other id (none this product makes) by its string.
    ``decode_time``: a stored time as a datetime (once per distinct value).
    """

    def __init__(
        self, rows: Iterable[_Row], decode_time: Callable[[Any], datetime | None] | None = None
    ) -> None:
        keys = array("Q")
        generations = array("I")
        states = bytearray()
        digests = array("q")
        self._opened_at: _Repeated[datetime] = _Repeated(decode_time)  # type: ignore[arg-type]
        self._resolved_at: _Repeated[datetime | None] = _Repeated(decode_time)
        self._acknowledged_at: _Repeated[datetime | None] = _Repeated(decode_time)
        self._acknowledged_by: _Repeated[str | None] = _Repeated()
        self._resolution: _Repeated[str | None] = _Repeated()
        self._seen_at: _Repeated[datetime | None] = _Repeated(decode_time)
        self._other: dict[str, IncidentHead] = {}
        for incident_id, generation, state, *rest in rows:
            key = _key(incident_id)
            if key is None:
                self._keep_other(incident_id, generation, state, rest, decode_time)
                continue
            keys.append(key)
            generations.append(generation)
            states.append(_CODES[state])
            opened_at, resolved_at, acknowledged_at, acknowledged_by, resolution, seen_at = rest[:6]
            digests.append(_NO_DIGEST if rest[6] is None else rest[6])
            self._opened_at.add(opened_at)
            self._resolved_at.add(resolved_at)
            self._acknowledged_at.add(acknowledged_at)
            self._acknowledged_by.add(acknowledged_by)
            self._resolution.add(resolution)
            self._seen_at.add(seen_at)
        # By id, the latest generation last; then one row an id, the last of its run.
        order = sorted(range(len(keys)), key=lambda row: (keys[row], generations[row]))
        order = [
            row
            for n, row in enumerate(order)
            if n + 1 == len(order) or keys[order[n + 1]] != keys[row]
        ]
        self._keys = array("Q", [keys[row] for row in order])
        self._generations = array("I", [generations[row] for row in order])
        self._states = bytes(states[row] for row in order)
        self._digests = array("q", [digests[row] for row in order])
        for column in self._columns():
            column.reordered(order)

    @classmethod
    def of(cls, incidents: Iterable[Incident]) -> IncidentHeads:
        """The heads of ``incidents`` already read whole."""
        return cls(
            (
                i.id,
                i.generation,
                i.state.value,
                i.opened_at,
                i.resolved_at,
                i.acknowledged_at,
                i.acknowledged_by,
                i.resolution,
                i.seen_at,
                content_digest(i),
            )
            for i in incidents
        )

    def __len__(self) -> int:
        return len(self._keys) + len(self._other)

    def get(self, incident_id: str) -> IncidentHead | None:
        """The head of ``incident_id``'s latest generation, or None when it is not here."""
        key = _key(incident_id)
        if key is None:
            return self._other.get(incident_id)
        row = bisect_left(self._keys, key)
        if row == len(self._keys) or self._keys[row] != key:
            return None
        digest = self._digests[row]
        return IncidentHead(
            self._generations[row],
            _STATES[self._states[row]],
            self._opened_at[row],
            self._resolved_at[row],
            self._acknowledged_at[row],
            self._acknowledged_by[row],
            self._resolution[row],
            self._seen_at[row],
            None if digest == _NO_DIGEST else digest,
        )

    def ids(self, *, open: bool) -> Iterator[str]:
        """The ids of the open (and acknowledged) incidents, or of the resolved ones."""
        keys, states = self._keys, self._states
        for row in range(len(keys)):
            if (states[row] != _RESOLVED) is open:
                yield f"{keys[row]:016x}"
        yield from (i for i, head in self._other.items() if head.is_open is open)

    def _columns(self) -> tuple[_Repeated[Any], ...]:
        return (
            self._opened_at,
            self._resolved_at,
            self._acknowledged_at,
            self._acknowledged_by,
            self._resolution,
            self._seen_at,
        )

    def _keep_other(
        self,
        incident_id: str,
        generation: int,
        state: str,
        rest: list[Any],
        decode_time: Callable[[Any], datetime | None] | None,
    ) -> None:
        known = self._other.get(incident_id)
        if known is not None and known.generation >= generation:
            return
        opened_at, resolved_at, acknowledged_at, acknowledged_by, resolution, seen_at, digest = rest
        time = decode_time or (lambda value: value)
        self._other[incident_id] = IncidentHead(
            generation,
            _STATES[_CODES[state]],
            time(opened_at),  # type: ignore[arg-type]
            time(resolved_at),
            time(acknowledged_at),
            acknowledged_by,
            resolution,
            time(seen_at),
            digest,
        )
