"""Stored incidents packed as heads: the latest generation of each, looked up by id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mlcopilot.model import IncidentState
from mlcopilot.model.findings import finding_id
from mlcopilot.model.incident_heads import IncidentHead, IncidentHeads

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
OPEN, ACK, RESOLVED = IncidentState.OPEN, IncidentState.ACKNOWLEDGED, IncidentState.RESOLVED
A = finding_id("urn:li:mlModel:a", "pii_exposure", "urn:li:dataset:x", "email")
B = finding_id("urn:li:mlModel:a", "pii_exposure", "urn:li:dataset:x", "phone")


def row(
    incident_id: str,
    generation: int,
    state: IncidentState,
    at: str = "t0",
    by: str | None = None,
    seen: str = "t0",
    digest: int | None = None,
) -> tuple[object, ...]:
    """A stored row, its time as the store holds it (decoded by the heads)."""
    acked = at if state is ACK else None
    resolved = at if state is RESOLVED else None
    resolution = "fixed" if state is RESOLVED else None
    return (incident_id, generation, state.value, at, resolved, acked, by, resolution, seen, digest)


def decode(raw: str | None) -> datetime | None:
    return None if raw is None else T0 + timedelta(hours=int(raw[1:]))


def test_the_latest_generation_of_each_is_kept_whatever_the_order() -> None:
    heads = IncidentHeads(
        [
            row(B, 2, OPEN, "t3", seen="t4", digest=7),
            row(A, 1, ACK, "t1", "ana"),
            row(B, 1, RESOLVED, "t2", digest=5),
        ],
        decode_time=decode,
    )
    assert len(heads) == 2
    hour = timedelta(hours=1)
    assert heads.get(A) == IncidentHead(1, ACK, T0 + hour, None, T0 + hour, "ana", None, T0)
    assert heads.get(B) == IncidentHead(
        2, OPEN, T0 + 3 * hour, None, None, None, None, T0 + 4 * hour, digest=7
    )
    assert heads.get(finding_id("m", "c", "e", None)) is None
    assert list(heads.ids(open=True)) == sorted([A, B])
    assert list(heads.ids(open=False)) == []


def test_an_id_that_is_not_16_lowercase_hex_digits_is_kept_by_its_string() -> None:
    odd = ["inc-1", A.upper(), A[:-1], "0000_00000000000"]
    heads = IncidentHeads(
        [row(odd[0], 1, OPEN), row(odd[0], 2, RESOLVED), *(row(i, 1, OPEN) for i in odd[1:])],
        decode_time=decode,
    )
    assert len(heads) == 4
    first = heads.get(odd[0])
    assert first is not None
    assert (first.generation, first.state, first.resolution) == (2, RESOLVED, "fixed")
    assert all(heads.get(i) is not None for i in odd[1:])
    assert heads.get(A) is None  # the upper-case spelling is not A
    assert sorted(heads.ids(open=True)) == sorted(odd[1:])
    assert list(heads.ids(open=False)) == [odd[0]]


def test_a_new_generation_an_acknowledgement_a_resolution_and_a_sighting_each_show() -> None:
    base = [row(A, 1, OPEN), row(B, 1, OPEN), row("inc-1", 1, OPEN)]
    ids = [A, B, "inc-1"]

    def read(rows: list[tuple[object, ...]]) -> dict[str, IncidentHead | None]:
        heads = IncidentHeads(rows, decode_time=decode)
        return {i: heads.get(i) for i in ids}

    assert read(base) == read(list(reversed(base)))
    changed = [
        [row(A, 2, OPEN), *base[1:]],
        [row(A, 1, ACK, by="ana"), *base[1:]],
        [*base[:2], row("inc-1", 1, RESOLVED)],
        [row(A, 1, OPEN, seen="t5"), *base[1:]],
        [*base[:2], row("inc-1", 1, OPEN, seen="t5")],
        [row(A, 1, OPEN, digest=0), *base[1:]],
        [*base[:2], row("inc-1", 1, OPEN, digest=2**63 - 1)],
        base[:2],
    ]
    for rows in changed:
        assert read(rows) != read(base)


def test_each_distinct_time_is_decoded_once() -> None:
    seen: list[str | None] = []

    def counting(raw: str | None) -> datetime | None:
        seen.append(raw)
        return decode(raw)

    rows = [row(A, 1, OPEN, "t1", seen="t1"), row(B, 1, OPEN, "t1", seen="t1")]
    IncidentHeads(rows, decode_time=counting)
    # t1 once each for opened_at and seen_at, and None once each for the two other time columns
    assert sorted(seen, key=str) == [None, None, "t1", "t1"]


def test_a_column_of_many_distinct_values_keeps_every_row() -> None:
    """Row numbers take a byte each until a column has more than 256 values, then widen."""
    ids = [f"{n:016x}" for n in range(1, 70_002)]
    rows = [row(i, 1, OPEN, f"t{n}", by=f"user{n % 300}", seen=f"t{n}") for n, i in enumerate(ids)]
    heads = IncidentHeads(reversed(rows), decode_time=decode)
    for n in (0, 255, 256, 299, 300, 65_535, 65_536, 70_000):
        head = heads.get(ids[n])
        assert head is not None
        assert head.opened_at == head.seen_at == T0 + timedelta(hours=n)
        assert head.acknowledged_by == f"user{n % 300}"
