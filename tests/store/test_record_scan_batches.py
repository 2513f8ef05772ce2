"""What a full rescan's batch asks of the store, at a batch's size, on SQLite and PostgreSQL.

``record_scan`` opens, refreshes and resolves incidents an executemany per part of
``WRITE_CHUNK`` rows, not a statement per incident: each row must still get its own values,
and one changed underneath must still be a conflict with nothing written. Incidents found
again as stored are stamped seen, a statement per slice of ids, under the same rule. ``open_kinds``
answers which kinds other models hold open on entities (what keeps a tag) without reading
their incidents: it must say what the incidents say.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from mlcopilot.errors import StoreError
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.model import Finding, IncidentChanges, Severity
from mlcopilot.store import SqlStore, StoreConflict
from mlcopilot.store import schema as tables
from mlcopilot.store import sql as sql_module

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
T2 = T0 + timedelta(days=2)
CHECKS = ("schema_drift", "pii_exposure")
MANY = 620
"""Past one ``IN`` list (500): the conflict's incident is looked up in slices."""


def model(n: int) -> str:
    return f"urn:li:mlModel:(urn:li:dataPlatform:mlflow,m{n},PROD)"


def dataset(n: int) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:hive,raw.t{n},PROD)"


def finding(n: int, *, message: str = "seen", m: int = 0, entity: int = 0) -> Finding:
    return Finding(
        check="pii_exposure",
        severity=Severity.HIGH,
        model=model(m),
        entity=dataset(entity),
        field=f"f{n:04d}",
        message=f"{message} {n}",
        path=(model(m), dataset(entity)),
        evidence={"n": n, "message": message},
    )


def record(store: SqlStore, changes: IncidentChanges, now: datetime) -> None:
    store.record_scan(changes, started_at=now, now=now, catalog="c", models=[model(0)], findings=0)


def everything(findings: list[Finding]) -> frozenset[tuple[str, str, str]]:
    return frozenset((f.model, f.check, f.entity) for f in findings)


def stored_rows(raw: Engine) -> list[tuple[Any, ...]]:
    i = tables.incidents
    with raw.connect() as conn:
        return [tuple(r) for r in conn.execute(select(i).order_by(i.c.id, i.c.generation))]


@pytest.fixture(params=[None, 100], ids=["one-part", "parts-of-100"])
def parts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written in one statement, or in parts of 100 (a conflict then falls in a later
    part than the first, whose rows must be undone with the rest)."""
    if request.param is not None:
        monkeypatch.setattr(sql_module, "WRITE_CHUNK", request.param)
        monkeypatch.setattr("mlcopilot.store.notify_sql.WRITE_CHUNK", request.param)


@pytest.mark.usefixtures("parts")
def test_each_refreshed_incident_gets_its_own_values(store: SqlStore, raw: Engine) -> None:
    first = [finding(n) for n in range(MANY)]
    record(store, reconcile([], first, evaluated=everything(first), now=T0), T0)
    again = [finding(n, message="changed") for n in range(MANY)]
    changes = reconcile(store.incidents(), again, evaluated=everything(again), now=T1)
    assert len(changes.updated) == MANY
    record(store, changes, T1)

    stored = {i.field: i for i in store.incidents()}
    for n in range(MANY):
        incident = stored[f"f{n:04d}"]
        assert (incident.message, incident.evidence) == (
            f"changed {n}",
            {"n": n, "message": "changed"},
        )
        assert incident.updated_at == T1
    with raw.connect() as conn:
        runs = conn.execute(text("SELECT DISTINCT last_run_id FROM incidents")).scalars().all()
    assert len(runs) == 1  # every row was refreshed by the second run


@pytest.mark.usefixtures("parts")
def test_many_updates_with_one_resolved_underneath_is_a_conflict(
    store: SqlStore, raw: Engine
) -> None:
    first = [finding(n) for n in range(MANY)]
    record(store, reconcile([], first, evaluated=everything(first), now=T0), T0)
    again = [finding(n, message="changed") for n in range(MANY)]
    changes = reconcile(store.incidents(), again, evaluated=everything(again), now=T1)
    gone = first[MANY // 2]  # neither first nor last of the statement's rows
    store.resolve(gone.id, at=T1, reason="by hand")
    before = stored_rows(raw)

    with pytest.raises(StoreConflict, match=f"incident {gone.id} .* updated is no longer open"):
        record(store, changes, T1)
    assert stored_rows(raw) == before


@pytest.mark.usefixtures("parts")
def test_many_resolutions_with_one_resolved_underneath_is_a_conflict(
    store: SqlStore, raw: Engine
) -> None:
    first = [finding(n) for n in range(MANY)]
    record(store, reconcile([], first, evaluated=everything(first), now=T0), T0)
    changes = reconcile(store.incidents(), [], evaluated=everything(first), now=T1)
    assert len(changes.resolved) == MANY
    gone = first[-1]
    store.resolve(gone.id, at=T1, reason="by hand")
    before = stored_rows(raw)

    with pytest.raises(StoreConflict, match=f"incident {gone.id} .* resolved is no longer open"):
        record(store, changes, T1)
    assert stored_rows(raw) == before


def test_updates_given_out_of_order_are_stored_each_on_its_row(store: SqlStore) -> None:
    first = [finding(n) for n in range(40)]
    record(store, reconcile([], first, evaluated=everything(first), now=T0), T0)
    again = [finding(n, message="changed") for n in range(40)]
    changes = reconcile(store.incidents(), again, evaluated=everything(again), now=T1)
    shuffled = dataclasses.replace(changes, updated=tuple(reversed(changes.updated)))
    record(store, shuffled, T1)
    assert {i.field: i.message for i in store.incidents()} == {
        f"f{n:04d}": f"changed {n}" for n in range(40)
    }


# --- found again as stored: only stamped seen


def as_a_scan(store: SqlStore, findings: list[Finding], now: datetime) -> IncidentChanges:
    """Reconcile as a scan does: the incidents it will refresh read as heads, with digests."""
    heads = store.incident_heads([model(0)])
    return reconcile([], findings, evaluated=everything(findings), now=now, refreshing=heads.get)


def contents(raw: Engine) -> dict[str, tuple[Any, ...]]:
    """Each incident's stored text, JSON and digest, by field."""
    i = tables.incidents
    columns = (i.c.field, i.c.message, i.c.path, i.c.evidence, i.c.content_digest)
    with raw.connect() as conn:
        return {r.field: tuple(r)[1:] for r in conn.execute(select(*columns))}


@pytest.mark.usefixtures("parts")
def test_incidents_found_again_as_stored_are_stamped_and_the_changed_rewritten(
    store: SqlStore, raw: Engine
) -> None:
    first = [finding(n) for n in range(MANY)]
    record(store, as_a_scan(store, first, T0), T0)
    written = contents(raw)
    assert all(digest is not None for *_, digest in written.values())

    reworded = {n for n in range(MANY) if n % 7 == 3}
    again = [finding(n, message="changed" if n in reworded else "seen") for n in range(MANY)]
    changes = as_a_scan(store, again, T1)
    assert changes.unchanged == bytes(
        int((i.field or "")[1:]) not in reworded for i in changes.updated
    )
    record(store, changes, T1)

    now_stored = contents(raw)
    stored = {i.field: i for i in store.incidents()}
    for n in range(MANY):
        field = f"f{n:04d}"
        assert (stored[field].seen_at, stored[field].updated_at) == (T1, T1)
        if n in reworded:
            assert stored[field].message == f"changed {n}"
            assert now_stored[field][-1] != written[field][-1]
        else:
            assert now_stored[field] == written[field]
    with raw.connect() as conn:
        runs = conn.execute(text("SELECT DISTINCT last_run_id FROM incidents")).scalars().all()
    assert len(runs) == 1  # every row was found again by the second run
    # The rewritten ones' new digests are what the next scan compares with.
    assert as_a_scan(store, again, T2).unchanged == bytes([1]) * MANY


@pytest.mark.parametrize("gone_at", [MANY // 2, MANY - 1])
def test_stamping_seen_with_one_resolved_underneath_is_a_conflict(
    store: SqlStore, raw: Engine, gone_at: int
) -> None:
    first = [finding(n) for n in range(MANY)]
    record(store, as_a_scan(store, first, T0), T0)
    changes = as_a_scan(store, first, T1)
    assert changes.unchanged == bytes([1]) * MANY
    gone = first[gone_at]  # in the first statement's slice of ids, or in the last one's
    store.resolve(gone.id, at=T1, reason="by hand")
    before = stored_rows(raw)

    with pytest.raises(StoreConflict, match=f"incident {gone.id} .* updated is no longer open"):
        record(store, changes, T1)
    assert stored_rows(raw) == before


def test_a_row_written_before_digests_is_rewritten_once(store: SqlStore, raw: Engine) -> None:
    first = [finding(n) for n in range(3)]
    record(store, as_a_scan(store, first, T0), T0)
    with raw.begin() as conn:
        conn.execute(
            text("UPDATE incidents SET content_digest = NULL")
        )  # as migration 0010 left it
    changes = as_a_scan(store, first, T1)
    assert changes.unchanged == bytes(3)
    record(store, changes, T1)
    assert all(digest is not None for *_, digest in contents(raw).values())
    assert as_a_scan(store, first, T2).unchanged == bytes([1, 1, 1])


# --- which kinds other models hold open (what keeps a tag)


def kinds_from_incidents(
    store: SqlStore, entities: list[str], other_than: list[str]
) -> set[tuple[str, str]]:
    """What :meth:`SqlStore.open_kinds` says, from the incidents themselves."""
    found = store.incidents(entities=entities, include_resolved=False, other_than=other_than)
    return {(i.entity, i.check) for i in found}


def estate(store: SqlStore) -> list[Finding]:
    """Five models over four datasets, two checks; some incidents resolved, some reopened."""
    findings = [
        dataclasses.replace(finding(n, m=n % 5, entity=n % 4), check=CHECKS[n % 2])
        for n in range(60)
    ]
    record(store, reconcile([], findings, evaluated=everything(findings), now=T0), T0)
    kept = [f for f in findings if f.entity != dataset(3) or f.model == model(1)]
    changes = reconcile(store.incidents(), kept, evaluated=everything(findings), now=T1)
    record(store, changes, T1)
    record(
        store, reconcile(store.incidents(), findings, evaluated=everything(findings), now=T2), T2
    )
    record(store, reconcile(store.incidents(), kept, evaluated=everything(findings), now=T2), T2)
    return findings


@pytest.mark.parametrize(
    "other_than",
    [[], [model(0)], [model(1), model(2)], [model(n) for n in range(5)], ["urn:li:mlModel:no"]],
)
def test_open_kinds_say_what_the_incidents_say(store: SqlStore, other_than: list[str]) -> None:
    estate(store)
    entities = [dataset(n) for n in range(5)]  # one without incidents
    assert store.open_kinds(entities, other_than=other_than) == kinds_from_incidents(
        store, entities, other_than
    )


def test_open_kinds_past_one_in_list_and_many_models_left_out(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    estate(store)
    entities = [dataset(n) for n in range(1200)]
    left_out = [model(n) for n in range(100, 1300)] + [model(2)]
    expected = kinds_from_incidents(store, entities, left_out)
    assert expected  # the others' kinds are there
    assert store.open_kinds(entities, other_than=left_out) == expected
    # More models than the database is asked to leave out: they are left out here instead,
    # or the few others with open incidents are asked for.
    for most in (3, 4):
        monkeypatch.setattr(sql_module, "_SKIPPED_IN_SQL", most)
        assert store.open_kinds(entities, other_than=left_out) == expected
        assert store.open_kinds([], other_than=left_out) == set()
    # Every model left out (a full rescan's batch of all): nothing, as the incidents say.
    every = [*left_out, *(model(n) for n in range(5))]
    assert store.open_kinds(entities, other_than=every) == set()
    assert kinds_from_incidents(store, entities, every) == set()


# --- a deadlock PostgreSQL broke is a conflict the scan retries


class _Deadlock(Exception):
    sqlstate = "40P01"


class _Other(Exception):
    sqlstate = "23505"


@pytest.mark.parametrize(("orig", "raised"), [(_Deadlock(), StoreConflict), (_Other(), StoreError)])
def test_a_broken_deadlock_is_a_conflict_and_nothing_else_is(
    store: SqlStore, orig: Exception, raised: type[Exception]
) -> None:
    cause = type("DBAPIFailure", (Exception,), {"orig": orig})()
    with pytest.raises(raised) as caught, store._deadlock_is_a_conflict():
        raise StoreError("recording the scan failed") from cause
    assert type(caught.value) is raised
    if raised is StoreConflict:
        assert "nothing from this scan was saved" in str(caught.value)
