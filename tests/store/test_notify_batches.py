"""Notification planning reads groups in batches: the plan is the same whatever the batch size.

A scan touches thousands of groups, so their stored members and pending rows are read a batch
of groups per query and the scan's changes are indexed once. Here every batch size, down to
one group per query, must give the rows a group-by-group plan gives.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import NotifyPolicy, NotifyRequest
from mlcopilot.model import Finding, IncidentChanges, Severity
from mlcopilot.store import SqlStore, notify_sql
from mlcopilot.store import schema as t
from tests.store.test_store_contract import MODEL, finding, scan

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTIFY = NotifyRequest(
    policy=NotifyPolicy(group_wait=timedelta(0)),
    sinks=("github", "slack"),
    writeback=({"kind": "tag", "entity": "urn:li:tag:x", "tag": "urn:li:tag:x", "present": True},),
)
ENTITIES = [f"urn:li:dataset:(urn:li:dataPlatform:hive,raw.t{n},PROD)" for n in range(9)]


def _evaluated(model: str, check: str, entity: str) -> bool:
    return True


def _first() -> list[Finding]:
    """Two findings per entity: one group (check, entity) with two members each."""
    return [finding(field, entity=e) for e in ENTITIES for field in ("email", "phone")]


def _second() -> list[Finding]:
    """Some groups unchanged, some with a member changed, resolved, or added; new groups."""
    found: list[Finding] = []
    for n, entity in enumerate(ENTITIES):
        if n % 3 == 0:
            found += [finding("email", entity=entity), finding("phone", entity=entity)]
        elif n % 3 == 1:
            found += [
                finding("email", entity=entity, severity=Severity.CRITICAL),
                finding("ssn", entity=entity),
            ]
        # n % 3 == 2: the whole group resolves
    found.append(finding("email", entity="urn:li:dataset:(urn:li:dataPlatform:hive,new,PROD)"))
    found.append(finding(None, entity=ENTITIES[0], check="stale_source", message="stale"))
    return found


def _changes(store: SqlStore, findings: list[Finding], now: datetime) -> IncidentChanges:
    return reconcile(store.incidents(), findings, evaluated=_evaluated, now=now)


def _plan(store: SqlStore, changes: IncidentChanges, now: datetime) -> notify_sql.Plan:
    with store._read("planning") as conn:
        return notify_sql.plan(conn, changes, NOTIFY, now=now, run_id=None, lock=False)


@pytest.mark.parametrize("batch", [1, 2, 4])
def test_the_plan_does_not_depend_on_the_batch_size(
    store: SqlStore, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _changes(store, _first(), T0)
    expected_first = _plan(store, first, T0)
    store.record_scan(
        first, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=1, notify=NOTIFY
    )
    later = T0 + timedelta(days=1)
    second = _changes(store, _second(), later)
    assert second.opened
    assert second.updated
    assert second.resolved
    expected_second = _plan(store, second, later)
    # The first scan's rows are still pending: the second rewrites or cancels them.
    assert any(d.rewrites or d.cancels for d in expected_second.decisions)
    assert any(d.inserts for d in expected_second.decisions)

    monkeypatch.setattr(notify_sql, "_GROUPS_PER_QUERY", batch)
    assert _plan(store, second, later) == expected_second
    assert len(expected_first.decisions) == len(ENTITIES)


def test_a_batch_of_groups_is_read_through_the_group_index(store: SqlStore) -> None:
    """Each batch's incidents are searched for, not found by reading every incident.

    A row-value IN alone made SQLite read the whole table once per batch of 100 groups: a
    second scan of the 10,000-model estate spent 54 s there, 14 s through the index.
    """
    groups = [("k1", 1), ("k2", 3)]
    i = t.incidents
    query = select(i.c.id).where(*notify_sql._of_groups(groups)).order_by(i.c.id)
    with store._engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            pytest.skip("the query plan asked of SQLite")
        compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
        plan = [row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")]
    assert any("USING INDEX ix_incidents_group_key_group_generation" in step for step in plan)
    assert "SCAN incidents" not in plan


def test_the_groups_of_two_generations_of_one_incident_are_both_found(store: SqlStore) -> None:
    """A scan names one generation an incident; a hand-made change may name two."""
    f = finding("email")
    (first,) = scan(store, [f], T0, notify=NOTIFY).opened
    scan(store, [], T0 + timedelta(hours=1), notify=NOTIFY)  # resolved: its group closes
    (second,) = scan(store, [f], T0 + timedelta(hours=2), notify=NOTIFY).opened
    assert (first.generation, second.generation) == (1, 2)
    with store._engine.connect() as conn:
        each = [notify_sql._stored_groups_of(conn, [inc]) for inc in (first, second)]
        both = notify_sql._stored_groups_of(conn, [first, second])
    assert len(each[0] | each[1]) == 2  # two group generations
    assert both == each[0] | each[1]


def test_the_incidents_opened_in_one_group_share_its_assignment(store: SqlStore) -> None:
    """One (key, generation) per group, not per member: a first scan of an estate opens
    282,022 incidents in 14,378 groups."""
    changes = _changes(store, _first(), T0)
    with store._engine.connect() as conn:
        planned = notify_sql.plan(conn, changes, NOTIFY, now=T0, run_id=None, lock=False)
    by_group: dict[tuple[str, int], set[int]] = {}
    for pair in planned.assignments.values():
        by_group.setdefault(pair, set()).add(id(pair))
    assert len(planned.assignments) == 2 * len(ENTITIES)  # two members a group
    assert len(by_group) == len(ENTITIES)
    assert all(len(objects) == 1 for objects in by_group.values())
