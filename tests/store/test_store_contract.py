"""The state-store contract, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, func, insert, inspect, select, text, update
from sqlalchemy.exc import IntegrityError

from mlcopilot.errors import ClockBehind, StoreError, UsageError
from mlcopilot.incidents.lifecycle import CLEARED, reconcile
from mlcopilot.model import (
    Baseline,
    DatasetProfile,
    FieldProfile,
    Finding,
    Incident,
    IncidentChanges,
    IncidentState,
    ProfileBaseline,
    Schema,
    SchemaField,
    Severity,
    content_digest,
)
from mlcopilot.model.incident_heads import IncidentHead, IncidentHeads
from mlcopilot.scan.selection import check_clock, clock_for, on_shared_clock
from mlcopilot.store import SqlStore, StoreConflict, open_store
from mlcopilot.store import schema as tables

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
OTHER_MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,ltv,PROD)"
DS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
DS2 = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.orders,PROD)"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
T2 = T0 + timedelta(days=2)
T3 = T0 + timedelta(days=3)
EVERYTHING = frozenset(
    (m, c, e)
    for m in (MODEL, OTHER_MODEL)
    for c in ("schema_drift", "pii_exposure", "stale_source", "deprecated_source")
    for e in (DS, DS2)
)


def finding(
    field: str | None = "email",
    *,
    model: str = MODEL,
    entity: str = DS,
    check: str = "pii_exposure",
    severity: Severity = Severity.HIGH,
    message: str = "PII column email feeds the model",
) -> Finding:
    return Finding(
        check=check,
        severity=severity,
        model=model,
        entity=entity,
        field=field,
        message=message,
        path=(model, entity),
        evidence={"tags": ["urn:li:tag:pii"], "nested": {"n": 1, "ok": True}},
    )


def scan(store: SqlStore, findings: list[Finding], now: datetime, **kw: object) -> IncidentChanges:
    """Reconcile like a real scan does and record the result."""
    previous = store.incidents(include_resolved=True)
    changes = reconcile(previous, findings, evaluated=EVERYTHING, now=now)
    store.record_scan(
        changes,
        started_at=now - timedelta(seconds=5),
        now=now,
        catalog="lite:/tmp/catalog.db",
        models=[MODEL],
        findings=len(findings),
        finished_at=now,
        **kw,  # type: ignore[arg-type]
    )
    return changes


def count(raw: Engine, table: str) -> int:
    with raw.connect() as conn:
        return int(conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


# --- migrations


def test_open_creates_the_schema_at_head(store: SqlStore, raw: Engine) -> None:
    assert set(inspect(raw).get_table_names()) >= {
        "alembic_version",
        "baseline_schemas",
        "baselines",
        "scan_runs",
        "incidents",
    }
    with raw.connect() as conn:
        assert MigrationContext.configure(conn).get_current_heads() == ("0010",)
        # the tables the migrations built are exactly the ones the queries are written against
        diff = compare_metadata(MigrationContext.configure(conn), tables.metadata)
    assert diff == []


def test_reopen_is_a_no_op_and_keeps_data(store_url: str, raw: Engine) -> None:
    first = open_store(store_url)
    scan(first, [finding()], T0)
    first.close()
    with raw.connect() as conn:
        before = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    with open_store(store_url) as again:
        assert [i.id for i in again.incidents()] == [finding().id]
    with raw.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == before


def test_newer_schema_revision_is_refused(store_url: str, raw: Engine) -> None:
    open_store(store_url).close()
    with raw.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(StoreError) as caught:
        open_store(store_url)
    message = str(caught.value)
    assert "\n" not in message
    assert "newer mlcopilot" in message
    assert "9999_future" in message


# --- baselines


ODD_FIELDS = (
    SchemaField(
        path="naïve.名前",
        type="STRING",
        native_type="varchar(64)",
        description="Ünïcödé — with “quotes” and 'single' and \"double\"",
        position=0,
        tags=frozenset({"urn:li:tag:pii", "urn:li:tag:a"}),
        terms=frozenset({"urn:li:glossaryTerm:Classification.Email"}),
    ),
    SchemaField(path="[version=2.0].[type=struct].addr.zip code", type="NUMBER", position=1),
    SchemaField(path="emoji_🚀; DROP TABLE baselines;--", type="BYTES", position=2),
    SchemaField(path="", type="NULL", position=3),
)


def test_baselines_round_trip_unicode_and_odd_field_names(store: SqlStore) -> None:
    stored = Baseline(
        model=MODEL,
        dataset=DS,
        schema=Schema(fields=ODD_FIELDS),
        source="history",
        captured_at=T0,
    )
    store.save_baselines([stored])

    assert store.baseline(MODEL, DS) == stored
    assert store.baseline(MODEL, DS2) is None
    assert store.baseline(OTHER_MODEL, DS) is None


def test_save_baselines_replaces_and_lists_per_model(store: SqlStore) -> None:
    def baseline(model: str, dataset: str, field: str, at: datetime) -> Baseline:
        schema = Schema(fields=(SchemaField(path=field, type="STRING"),))
        return Baseline(model, dataset, schema, "first_scan", at)

    store.save_baselines([baseline(MODEL, DS2, "a", T0), baseline(MODEL, DS, "a", T0)])
    store.save_baselines([baseline(OTHER_MODEL, DS, "x", T0)])
    replaced = dataclasses.replace(baseline(MODEL, DS, "b", T1), source="accepted")
    store.save_baselines([baseline(MODEL, DS, "dup", T1), replaced])  # last one wins
    store.save_baselines([])

    assert store.baselines(MODEL) == [replaced, baseline(MODEL, DS2, "a", T0)]
    assert [b.dataset for b in store.baselines(OTHER_MODEL)] == [DS]
    assert store.baselines("urn:li:mlModel:nope") == []


def test_baselined_datasets_name_what_baselines_of_would_read(store: SqlStore) -> None:
    schema = Schema(fields=(SchemaField(path="id", type="NUMBER"),))
    store.save_baselines(
        [
            Baseline(MODEL, DS, schema, "first_scan", T0),
            Baseline(MODEL, DS2, schema, "history", T0),
            Baseline(OTHER_MODEL, DS, schema, "accepted", T1),
        ]
    )
    nobody = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,nobody,PROD)"
    models = [MODEL, OTHER_MODEL, nobody]
    read = store.baselines_of(models)
    assert store.baselined_datasets(models) == {m: {b.dataset for b in read[m]} for m in models}
    assert store.baselined_datasets(models)[nobody] == set()


def test_many_baselines_are_saved_a_part_at_a_time_the_last_per_pair_winning(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parts of 3 rows: a pair saved twice has its copies in different parts.
    monkeypatch.setattr("mlcopilot.store.sql.WRITE_CHUNK", 3)
    shared = Schema(fields=(SchemaField(path="id", type="NUMBER"), *ODD_FIELDS))
    other = Schema(fields=(SchemaField(path="id", type="STRING"),))
    datasets = [f"urn:li:dataset:(urn:li:dataPlatform:hive,t{n},PROD)" for n in range(4)]
    saved = [
        Baseline(m, d, shared, "first_scan", T0) for m in (MODEL, OTHER_MODEL) for d in datasets
    ]
    later = Baseline(MODEL, datasets[0], other, "accepted", T1)
    store.record_scan(
        IncidentChanges(),
        started_at=T0,
        now=T1,
        catalog="lite:x",
        models=[MODEL, OTHER_MODEL],
        findings=0,
        baselines=[*saved, later],
    )

    assert store.baselines(MODEL) == [later, *saved[1:4]]
    assert store.baselines(OTHER_MODEL) == saved[4:]
    # One schema text for every baseline holding the shared schema, read back as one schema.
    read = store.baselines_of([MODEL, OTHER_MODEL])
    assert len({id(b.schema) for b in [*read[MODEL][1:], *read[OTHER_MODEL]]}) == 1


PROFILE = DatasetProfile(
    at=datetime(2026, 8, 1, 6, 0, 0, 123000, tzinfo=UTC),
    row_count=100_000,
    column_count=3,
    size_in_bytes=None,
    fields=(
        FieldProfile(
            "naïve.名前",
            unique_count=4,
            unique_proportion=4e-05,
            null_count=0,
            null_proportion=0.0,
        ),
        FieldProfile(
            "amount",
            mean="100.0",
            stdev="15.0",
            min="-1e9",
            max="NaN",
            quantiles=(("0.05", "75.325"), ("0.5", "100.0"), ("0.95", "124.675")),
        ),
        FieldProfile("empty"),
    ),
)


def test_profile_baselines_round_trip_exactly_and_replace(store: SqlStore) -> None:
    first = ProfileBaseline(MODEL, DS, PROFILE, "history", T0)
    other = ProfileBaseline(OTHER_MODEL, DS2, PROFILE, "first_scan", T0)
    store.save_profile_baselines([first, other])

    assert store.profile_baselines_of([MODEL, "urn:li:mlModel:nope"]) == {
        MODEL: [first],
        "urn:li:mlModel:nope": [],
    }
    accepted = dataclasses.replace(
        first, profile=dataclasses.replace(PROFILE, row_count=5), source="accepted", captured_at=T1
    )
    store.save_profile_baselines([accepted])
    store.save_profile_baselines([])
    assert store.profile_baselines_of([MODEL, OTHER_MODEL]) == {
        MODEL: [accepted],
        OTHER_MODEL: [other],
    }


def test_record_scan_saves_profile_baselines_in_the_same_transaction(store: SqlStore) -> None:
    base = ProfileBaseline(MODEL, DS, PROFILE, "history", T0)
    scan(store, [finding()], T0, profile_baselines=[base])
    assert store.profile_baselines_of([MODEL]) == {MODEL: [base]}


def test_timestamps_come_back_aware_utc_whatever_zone_went_in(store: SqlStore) -> None:
    tokyo = timezone(timedelta(hours=9))
    captured = datetime(2025, 3, 1, 18, 30, 15, 123456, tzinfo=tokyo)
    store.save_baselines([Baseline(MODEL, DS, Schema(fields=()), "first_scan", captured)])
    got = store.baseline(MODEL, DS)
    assert got is not None
    assert got.captured_at == captured
    assert got.captured_at.tzinfo is UTC
    assert got.captured_at.hour == 9  # 18:30 in Tokyo is 09:30 UTC

    scan(store, [finding()], captured)
    incident = store.incidents()[0]
    assert incident.opened_at == captured
    assert incident.opened_at.tzinfo is UTC
    assert incident.updated_at.tzinfo is UTC


def test_naive_datetimes_are_refused(store: SqlStore) -> None:
    naive = datetime(2025, 3, 1, 9, 0)
    with pytest.raises(ValueError, match="naive"):
        store.save_baselines([Baseline(MODEL, DS, Schema(fields=()), "first_scan", naive)])
    with pytest.raises(ValueError, match="naive"):
        store.record_scan(
            IncidentChanges(), started_at=naive, now=T0, catalog="c", models=[], findings=0
        )
    assert store.baselines(MODEL) == []


# --- scans and the incident lifecycle


def test_record_scan_open_update_resolve_and_recur(store: SqlStore, raw: Engine) -> None:
    f = finding()

    opened = scan(store, [f], T0)
    assert len(opened.opened) == 1
    first = store.get(f.id)
    assert first is not None
    assert (first.generation, first.state, first.opened_at, first.updated_at) == (
        1,
        IncidentState.OPEN,
        T0,
        T0,
    )
    assert first == opened.opened[0]  # everything round-trips, evidence and path included

    louder = dataclasses.replace(f, severity=Severity.CRITICAL, message="now critical")
    updated = scan(store, [louder], T1)
    assert [i.id for i in updated.updated] == [f.id]
    second = store.get(f.id)
    assert second is not None
    assert (second.generation, second.state, second.severity, second.message) == (
        1,
        IncidentState.OPEN,
        Severity.CRITICAL,
        "now critical",
    )
    assert (second.opened_at, second.updated_at, second.seen_at) == (T0, T1, T1)

    scan(store, [], T2)
    resolved = store.get(f.id)
    assert resolved is not None
    assert (resolved.state, resolved.resolved_at, resolved.resolution) == (
        IncidentState.RESOLVED,
        T2,
        CLEARED,
    )
    assert resolved.seen_at == T1  # resolving finds nothing: it says when, not seen_at
    assert store.incidents(include_resolved=False) == []

    recurred = scan(store, [f], T3)
    assert [(i.id, i.generation) for i in recurred.opened] == [(f.id, 2)]
    latest = store.get(f.id)
    assert latest is not None
    assert (latest.generation, latest.state, latest.opened_at, latest.resolved_at) == (
        2,
        IncidentState.OPEN,
        T3,
        None,
    )
    assert store.incidents() == [latest]  # the latest generation only

    assert count(raw, "scan_runs") == 4
    assert count(raw, "incidents") == 2
    with raw.connect() as conn:
        runs = conn.execute(
            select(
                tables.scan_runs.c.opened, tables.scan_runs.c.updated, tables.scan_runs.c.resolved
            ).order_by(tables.scan_runs.c.id)
        ).all()
    assert [tuple(r) for r in runs] == [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0)]


def test_record_scan_stores_the_run(store: SqlStore, raw: Engine) -> None:
    run_ids = [
        store.record_scan(
            IncidentChanges(),
            started_at=T0,
            now=T1,
            catalog="gms:https://admin:hunter2@datahub.example.com:8080",
            models=[MODEL, OTHER_MODEL],
            findings=7,
            finished_at=T2,
        ).run_id
        for _ in range(2)
    ]
    assert run_ids[1] > run_ids[0]
    with raw.connect() as conn:
        run = (
            conn.execute(select(tables.scan_runs).where(tables.scan_runs.c.id == run_ids[0]))
            .one()
            ._mapping
        )
    assert (run["started_at"], run["now"], run["finished_at"]) == (T0, T1, T2)
    assert run["models"] == [MODEL, OTHER_MODEL]
    assert run["findings"] == 7
    assert "hunter2" not in run["catalog"]
    assert run["catalog"] == "gms:https://admin:***@datahub.example.com:8080"


def test_record_scan_saves_baselines_in_the_same_transaction(store: SqlStore) -> None:
    base = Baseline(MODEL, DS, Schema(fields=ODD_FIELDS), "first_scan", T0)
    scan(store, [finding()], T0, baselines=[base])
    assert store.baselines(MODEL) == [base]


def test_evidence_is_stored_as_plain_json(store: SqlStore) -> None:
    # Typed as JSON, but a plugin without type checking may still hand in other values.
    f = dataclasses.replace(
        finding(),
        evidence={
            "columns": ("a", "b"),
            "seen": T0,  # type: ignore[dict-item]
            "tags": frozenset({"y", "x"}),  # type: ignore[dict-item]
            "ratio": float("nan"),
            "severity": Severity.LOW,
            "deep": {"k": [1, 2.5, None, True]},
        },
    )
    scan(store, [f], T0)
    got = store.get(f.id)
    assert got is not None
    assert got.evidence == {
        "columns": ["a", "b"],
        "seen": T0.isoformat(),
        "tags": ["x", "y"],
        "ratio": "nan",
        "severity": "low",
        "deep": {"k": [1, 2.5, None, True]},
    }


def test_incidents_filter_by_model_and_state_newest_first(store: SqlStore) -> None:
    a = finding("a")
    b = finding("b")
    c = finding("c", model=OTHER_MODEL)
    scan(store, [a], T0)
    scan(store, [a, b, c], T1)
    store.resolve(b.id, at=T2, reason="false positive")

    assert [i.id for i in store.incidents()] == [*sorted([b.id, c.id]), a.id]
    assert [i.id for i in store.incidents(include_resolved=False)] == [c.id, a.id]
    assert {i.id for i in store.incidents(models=[MODEL])} == {a.id, b.id}
    assert [i.id for i in store.incidents(models=[MODEL], include_resolved=False)] == [a.id]
    assert store.incidents(models=["urn:li:mlModel:nope"]) == []


def test_incident_heads_are_each_latest_generation_state_and_times(store: SqlStore) -> None:
    """What a scan refreshes incidents from: the latest generation of each, packed."""
    a, b, c = finding("a"), finding("b"), finding("c", model=OTHER_MODEL)
    scan(store, [a, b, c], T0)
    store.acknowledge(a.id, by="ana", at=T1)
    scan(store, [a], T2)  # b resolved
    scan(store, [a, b], T3)  # b recurs: generation 2
    heads = store.incident_heads([MODEL])
    assert len(heads) == 2
    assert heads.get(a.id) == IncidentHead(
        generation=1,
        state=IncidentState.ACKNOWLEDGED,
        opened_at=T0,
        resolved_at=None,
        acknowledged_at=T1,
        acknowledged_by="ana",
        resolution=None,
        seen_at=T3,
        digest=content_digest(a),
    )
    assert heads.get(b.id) == IncidentHead(
        2, IncidentState.OPEN, T3, None, None, None, None, T3, content_digest(b)
    )
    assert heads.get(c.id) is None  # another model's
    assert list(heads.ids(open=True)) == sorted([a.id, b.id])
    assert list(heads.ids(open=False)) == []
    whole = IncidentHeads.of(store.incidents(models=[MODEL]))
    assert {i: heads.get(i) for i in (a.id, b.id)} == {i: whole.get(i) for i in (a.id, b.id)}
    assert len(store.incident_heads(["urn:li:mlModel:nope"])) == 0


def test_acknowledge_then_resolve_by_hand(store: SqlStore) -> None:
    f = finding()
    scan(store, [f], T0)

    acked = store.acknowledge(f.id, by="ana", at=T1)
    assert (acked.state, acked.acknowledged_by, acked.acknowledged_at) == (
        IncidentState.ACKNOWLEDGED,
        "ana",
        T1,
    )
    assert store.get(f.id) == acked
    assert store.acknowledge(f.id, by="bob", at=T2) == acked  # first taker stays on record

    done = store.resolve(f.id, at=T2, reason="dropped the column from the feature set")
    assert store.get(f.id) == done
    assert (done.state, done.resolved_at, done.resolution, done.acknowledged_by) == (
        IncidentState.RESOLVED,
        T2,
        "dropped the column from the feature set",
        "ana",
    )

    with pytest.raises(UsageError, match="is resolved"):
        store.acknowledge(f.id, by="ana", at=T3)
    with pytest.raises(UsageError, match="already resolved"):
        store.resolve(f.id, at=T3, reason="again")
    assert store.get(f.id) == done


def test_unknown_incident_id_is_a_usage_error(store: SqlStore) -> None:
    assert store.get("abc123") is None
    with pytest.raises(UsageError) as caught:
        store.acknowledge("abc123", by="ana", at=T0)
    assert str(caught.value) == "no incident abc123 — see `mlcopilot incidents list`"
    with pytest.raises(UsageError, match="no incident abc123"):
        store.resolve("abc123", at=T0, reason="x")


def test_scan_keeps_an_acknowledgement_made_while_it_ran(store: SqlStore) -> None:
    f = finding()
    scan(store, [f], T0)
    previous = store.incidents()  # the scan reads ...
    store.acknowledge(f.id, by="ana", at=T1)  # ... someone acknowledges meanwhile ...
    changes = reconcile(previous, [f], evaluated=EVERYTHING, now=T2)
    assert changes.updated[0].state is IncidentState.OPEN
    store.record_scan(changes, started_at=T2, now=T2, catalog="c", models=[MODEL], findings=1)

    got = store.get(f.id)
    assert got is not None
    assert (got.state, got.acknowledged_by, got.updated_at) == (
        IncidentState.ACKNOWLEDGED,
        "ana",
        T2,
    )


def test_a_resolved_by_hand_incident_recurs_on_the_next_scan(store: SqlStore) -> None:
    f = finding()
    scan(store, [f], T0)
    store.resolve(f.id, at=T1, reason="accepted risk")
    changes = scan(store, [f], T2)
    assert [(i.id, i.generation) for i in changes.opened] == [(f.id, 2)]


# --- atomicity and the database-enforced rules


def _snapshot(raw: Engine) -> tuple[list[object], list[object], list[object]]:
    with raw.connect() as conn:
        return (
            [tuple(r) for r in conn.execute(select(tables.scan_runs).order_by(text("id")))],
            [
                tuple(r)
                for r in conn.execute(select(tables.incidents).order_by(text("id, generation")))
            ],
            [tuple(r) for r in conn.execute(select(tables.baselines).order_by(text("dataset")))],
        )


def test_record_scan_is_all_or_nothing_when_an_insert_fails(store: SqlStore, raw: Engine) -> None:
    kept = finding("kept")
    scan(store, [kept], T0)
    before = _snapshot(raw)

    new = finding("new")
    changes = reconcile(store.incidents(), [new, kept], evaluated=EVERYTHING, now=T1)
    stale = reconcile([], [kept], evaluated=EVERYTHING, now=T1).opened[0]  # already open!
    broken = dataclasses.replace(changes, opened=(*changes.opened, stale))
    with pytest.raises(StoreConflict) as caught:
        store.record_scan(
            broken,
            started_at=T1,
            now=T1,
            catalog="c",
            models=[MODEL],
            findings=2,
            baselines=[Baseline(MODEL, DS2, Schema(fields=()), "first_scan", T1)],
        )
    assert "\n" not in str(caught.value)
    assert "nothing from this scan was saved" in str(caught.value)
    assert _snapshot(raw) == before
    assert store.get(new.id) is None


def test_record_scan_is_all_or_nothing_when_a_late_step_fails(store: SqlStore, raw: Engine) -> None:
    a, b = finding("a"), finding("b")
    scan(store, [a, b], T0)
    changes = reconcile(store.incidents(), [a, finding("c")], evaluated=EVERYTHING, now=T1)
    assert [i.id for i in changes.resolved] == [b.id]
    store.resolve(b.id, at=T1, reason="by hand")  # so the scan's last step finds nothing open
    before = _snapshot(raw)

    with pytest.raises(StoreConflict, match=f"incident {b.id}"):
        store.record_scan(changes, started_at=T1, now=T1, catalog="c", models=[MODEL], findings=2)

    assert _snapshot(raw) == before  # the run, the opened c and the refreshed a all rolled back


def test_two_scanners_opening_the_same_incident_conflict(store_url: str) -> None:
    f = finding()
    with open_store(store_url) as one, open_store(store_url) as two:
        first = reconcile(one.incidents(), [f], evaluated=EVERYTHING, now=T0)
        second = reconcile(two.incidents(), [f], evaluated=EVERYTHING, now=T0)
        one.record_scan(first, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=1)
        with pytest.raises(StoreConflict):
            two.record_scan(second, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=1)
        assert [i.generation for i in two.incidents()] == [1]


def _row(incident_id: str, generation: int, state: str, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": incident_id,
        "generation": generation,
        "state": state,
        "check_name": "pii_exposure",
        "severity": "high",
        "model": MODEL,
        "entity": DS,
        "message": "m",
        "path": [],
        "evidence": {},
        "opened_at": T0,
        "updated_at": T0,
        "resolved_at": T1 if state == "resolved" else None,
        "acknowledged_at": T1 if state == "acknowledged" else None,
    }
    row.update(extra)
    return row


def test_the_database_allows_one_open_generation_per_id(store: SqlStore, raw: Engine) -> None:
    i = tables.incidents
    with raw.begin() as conn:
        conn.execute(insert(i), [_row("x", 1, "resolved"), _row("x", 2, "open")])

    for state in ("open", "acknowledged"):
        with pytest.raises(IntegrityError), raw.begin() as conn:
            conn.execute(insert(i), _row("x", 3, state))
    with raw.begin() as conn:  # more resolved generations are fine
        conn.execute(insert(i), _row("x", 3, "resolved"))
    with pytest.raises(IntegrityError), raw.begin() as conn:  # reopening an old one is not
        conn.execute(
            update(i)
            .where(i.c.id == "x", i.c.generation == 1)
            .values(state="open", resolved_at=None)
        )
    with raw.connect() as conn:
        open_rows = conn.execute(
            select(func.count()).select_from(i).where(i.c.id == "x", i.c.state != "resolved")
        ).scalar_one()
    assert open_rows == 1


def test_the_database_checks_states_and_severities(store: SqlStore, raw: Engine) -> None:
    bad_rows = [
        _row("s", 1, "snoozed"),
        _row("v", 1, "open", severity="urgent"),
        _row("g", 0, "open"),
        _row("r", 1, "resolved", resolved_at=None),
    ]
    for bad in bad_rows:
        with pytest.raises(IntegrityError), raw.begin() as conn:
            conn.execute(insert(tables.incidents), bad)
    assert count(raw, "incidents") == 0


def test_incidents_with_generations_of_other_models_do_not_mix(store: SqlStore) -> None:
    a = finding(model=MODEL)
    b = finding(model=OTHER_MODEL)
    scan(store, [a, b], T0)
    scan(store, [b], T1)  # a resolved
    scan(store, [a, b], T2)  # a recurs
    by_id = {i.id: i for i in store.incidents()}
    assert (by_id[a.id].generation, by_id[a.id].state) == (2, IncidentState.OPEN)
    assert (by_id[b.id].generation, by_id[b.id].updated_at) == (1, T2)
    assert [i.model for i in store.incidents(models=[OTHER_MODEL])] == [OTHER_MODEL]


def test_store_satisfies_the_protocol(store: SqlStore) -> None:
    from mlcopilot.protocols import StateStore

    as_protocol: StateStore = store
    assert as_protocol.incidents() == []


def test_incidents_of_models_or_on_entities(store: SqlStore) -> None:
    churn_ds = finding(model=MODEL, entity=DS)
    churn_ds2 = finding(model=MODEL, entity=DS2)
    ltv_ds = finding(model=OTHER_MODEL, entity=DS)
    scan(store, [churn_ds, churn_ds2, ltv_ds], T0)
    scan(store, [churn_ds, churn_ds2], T1)  # ltv's resolves

    def ids(incidents: list[Incident]) -> list[str]:
        return sorted(i.id for i in incidents)

    many = [f"urn:li:mlModel:(urn:li:dataPlatform:mlflow,m{n},PROD)" for n in range(1200)]
    assert ids(store.incidents(models=[MODEL])) == sorted([churn_ds.id, churn_ds2.id])
    # more models than one IN list holds: the same answer, in the same order
    assert store.incidents(models=[*many, MODEL, OTHER_MODEL]) == store.incidents()
    assert ids(store.incidents(entities=[DS])) == sorted([churn_ds.id, ltv_ds.id])
    assert ids(store.incidents(entities=[DS], include_resolved=False)) == [churn_ds.id]
    assert store.incidents(models=[]) == []
    # by id: each id's latest generation, past one IN list of ids too
    every = store.incidents()
    named = [*(f"nope-{n}" for n in range(1200)), ltv_ds.id, churn_ds.id]
    assert store.incidents(ids=named) == [i for i in every if i.id in {ltv_ds.id, churn_ds.id}]
    with pytest.raises(ValueError, match="give one of models, entities and ids"):
        store.incidents(models=[MODEL], entities=[DS])
    with pytest.raises(ValueError, match="give one of models, entities and ids"):
        store.incidents(entities=[DS], ids=[ltv_ds.id])


def test_incidents_other_than_some_models(store: SqlStore) -> None:
    churn_ds = finding(model=MODEL, entity=DS)
    churn_ds2 = finding(model=MODEL, entity=DS2)
    ltv_ds = finding(model=OTHER_MODEL, entity=DS)
    scan(store, [churn_ds, churn_ds2, ltv_ds], T0)

    def ids(incidents: list[Incident]) -> list[str]:
        return sorted(i.id for i in incidents)

    on_both = store.incidents(entities=[DS, DS2], include_resolved=False)
    assert ids(store.incidents(entities=[DS, DS2], other_than=[MODEL])) == [ltv_ds.id]
    assert store.incidents(entities=[DS, DS2], other_than=[MODEL, OTHER_MODEL]) == []
    # Naming no model, or models without incidents there, leaves the answer as it was.
    assert store.incidents(entities=[DS, DS2], include_resolved=False, other_than=()) == on_both
    assert store.incidents(entities=[DS, DS2], other_than=["urn:li:mlModel:nope"]) == on_both
    # Past one IN list of entities and of kept ids: the same answer.
    many = [f"urn:li:dataset:(urn:li:dataPlatform:hive,t{n},PROD)" for n in range(1200)]
    assert store.incidents(entities=[*many, DS, DS2], other_than=[MODEL]) == [
        i for i in on_both if i.model == OTHER_MODEL
    ]


def test_baselines_of_share_one_schema_per_stored_text(store: SqlStore) -> None:
    """Models trained on one dataset store its schema once each; it is read back as one."""
    same = Schema(fields=ODD_FIELDS)
    other = Schema(fields=(SchemaField(path="id", type="NUMBER"),))
    store.save_baselines(
        [
            Baseline(MODEL, DS, same, "history", T0),
            Baseline(OTHER_MODEL, DS, Schema(fields=ODD_FIELDS), "first_scan", T1),
            Baseline(OTHER_MODEL, DS2, other, "accepted", T1),
        ]
    )
    found = store.baselines_of([MODEL, OTHER_MODEL])
    assert found == {
        MODEL: [Baseline(MODEL, DS, same, "history", T0)],
        OTHER_MODEL: [
            Baseline(OTHER_MODEL, DS, same, "first_scan", T1),
            Baseline(OTHER_MODEL, DS2, other, "accepted", T1),
        ],
    }
    assert found[MODEL][0].schema is found[OTHER_MODEL][0].schema
    assert found[OTHER_MODEL][1].schema is not found[MODEL][0].schema
    assert found == {m: store.baselines(m) for m in (MODEL, OTHER_MODEL)}


def test_a_scan_clock_is_never_behind_the_last_recorded_scan(store: SqlStore) -> None:
    """Another scanner that read its clock later, and committed first, does not refuse this one."""
    assert store.last_scan_at() is None
    before = datetime.now(UTC)
    assert clock_for(store) >= before  # nothing recorded: the system clock
    ahead = datetime.now(UTC) + timedelta(seconds=30)  # the other scanner's, committed first
    scan(store, [finding()], ahead)
    taken = clock_for(store)
    assert taken == ahead
    check_clock(store, taken)  # not refused
    with pytest.raises(UsageError, match="earlier than the last committed scan"):
        check_clock(store, datetime.now(UTC))  # what the system clock alone would have given


def test_a_shared_scan_refused_by_a_commit_in_between_starts_again_on_a_fresh_clock(
    store: SqlStore,
) -> None:
    """Another scanner commits a later scan between the clock's read and the scan's check."""
    started: list[datetime] = []

    def shared_scan(now: datetime) -> datetime:
        started.append(now)
        if len(started) == 1:
            scan(store, [finding()], now + timedelta(seconds=5))  # the other one's, committed
        check_clock(store, now)  # what a scan does first
        return now

    ran_at = on_shared_clock(store, shared_scan)
    assert len(started) == 2
    assert ran_at == started[1] >= started[0] + timedelta(seconds=5)

    # A store whose scans keep moving ahead of every clock taken: the refusal stands.
    def always_behind(now: datetime) -> datetime:
        scan(store, [finding()], max(now, store.last_scan_at() or now) + timedelta(seconds=5))
        check_clock(store, now)
        return now

    with pytest.raises(ClockBehind, match="earlier than the last committed scan"):
        on_shared_clock(store, always_behind)
