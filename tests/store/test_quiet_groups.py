"""Planning leaves unchanged groups unread (``notify_sql._unquiet``), and plans what it would
have planned reading every group whole: random histories of scans of models sharing datasets,
acknowledgements and resolutions made by hand between them, and time passing reminders."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import (
    Delivered,
    NotifyPolicy,
    NotifyRequest,
    OutboxStatus,
    SinkRef,
)
from mlcopilot.model import PlannedRow, Severity
from mlcopilot.store import SqlStore, notify_sql, open_store
from mlcopilot.store import schema as tables
from tests.store.test_outbox_contract import LEASE
from tests.store.test_store_contract import DS, DS2, EVERYTHING, MODEL, OTHER_MODEL, T0, finding

MODELS = (MODEL, OTHER_MODEL)
FIELDS = ("email", "phone", "ssn")
NOTIFY = NotifyRequest(
    policy=NotifyPolicy(group_wait=timedelta(0), repeat_interval=timedelta(hours=6)),
    sinks=("github", "slack"),
    acknowledging=frozenset({"slack"}),
)


def _history(store: SqlStore, seed: int) -> list[PlannedRow]:
    """Forty steps of one seeded history: scans, acknowledgements, resolutions, time.

    Returns what each scan's dry run would have planned (before it recorded).
    """
    dry_runs: list[PlannedRow] = []
    rng = random.Random(seed)
    now = T0
    risks: dict[tuple[str, str, str], Severity | None] = {
        (model, entity, field): rng.choice((None, Severity.HIGH))
        for model in MODELS
        for entity in (DS, DS2)
        for field in FIELDS
    }
    for _ in range(40):
        now += timedelta(hours=rng.choice((0, 1, 3, 7)))
        step = rng.random()
        open_ids = [i.id for i in store.incidents(include_resolved=False)]
        if step < 0.15 and open_ids:
            store.acknowledge(rng.choice(open_ids), by=rng.choice(("ann", "bob")), at=now)
            continue
        if step < 0.25 and open_ids:
            store.resolve(rng.choice(open_ids), at=now, reason="by hand")
            continue
        if step < 0.45:
            _deliver(store, now)
            continue
        models = rng.sample(MODELS, rng.randint(1, 2))
        for key in risks:  # most risks stay as they were between two scans
            if rng.random() < 0.15:
                risks[key] = rng.choice((None, Severity.HIGH, Severity.MEDIUM))
        findings = [
            finding(field, model=model, entity=entity, severity=severity)
            for (model, entity, field), severity in sorted(risks.items())
            if model in models and severity is not None
        ]
        previous = store.incidents(models=models)
        changes = reconcile(previous, findings, evaluated=EVERYTHING, now=now)
        dry_runs += store.planned_notifications(changes, NOTIFY, now=now)
        store.record_scan(
            changes,
            started_at=now,
            now=now,
            catalog="c",
            models=models,
            findings=len(findings),
            notify=NOTIFY,
        )
    return dry_runs


def _deliver(store: SqlStore, now: datetime) -> None:
    """Send every row due: an issue or a thread per group (what later rows update)."""
    while claimed := store.claim(sinks=["github", "slack"], owner="me", now=now, lease=LEASE):
        for row in claimed:
            item = row.item
            ref = SinkRef(item.sink, f"{item.group_key}-{item.group_generation}", None)
            store.complete(item, Delivered(ref=ref), owner="me", now=now)


def _planned(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The outbox rows and notification groups the history left."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            outbox = tables.outbox
            rows = conn.execute(
                select(
                    outbox.c.sink,
                    outbox.c.action,
                    outbox.c.group_key,
                    outbox.c.group_generation,
                    outbox.c.seq,
                    outbox.c.payload,
                    outbox.c.status,
                    outbox.c.not_before,
                ).order_by(outbox.c.id)
            )
            groups = conn.execute(select(tables.notify_groups).order_by("key", "generation"))
            return [tuple(r) for r in rows], [tuple(g) for g in groups]
    finally:
        engine.dispose()


@pytest.mark.parametrize("seed", range(8))
def test_quiet_groups_left_unread_plan_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    skipped: list[int] = []
    unquiet = notify_sql._unquiet

    def counting(*args: Any) -> list[tuple[str, int]]:
        kept = unquiet(*args)
        skipped.append(len(args[1]) - len(kept))
        return kept

    monkeypatch.setattr(notify_sql, "_unquiet", counting)
    light = f"sqlite:///{tmp_path / 'light.db'}"
    store = open_store(light)
    light_dry_runs = _history(store, seed)
    store.close()

    monkeypatch.setattr(notify_sql, "_unquiet", lambda conn, groups, *rest: list(groups))
    whole = f"sqlite:///{tmp_path / 'whole.db'}"
    store = open_store(whole)
    whole_dry_runs = _history(store, seed)
    store.close()

    assert sum(skipped) > 0  # the history had unchanged groups, left unread
    rows, groups = _planned(light)
    assert rows  # it notified
    assert {r[1] for r in rows} >= {"open"}
    assert (rows, groups) == _planned(whole)
    assert light_dry_runs == whole_dry_runs  # planned beside the store, not after writing


def test_histories_reach_every_kind_of_decision(tmp_path: Path) -> None:
    """The seeds above cover updates, reminders, acknowledgements and resolutions."""
    actions: set[str] = set()
    for seed in range(8):
        url = f"sqlite:///{tmp_path / f'{seed}.db'}"
        store = open_store(url)
        _history(store, seed)
        actions |= {item.action for item in store.outbox(statuses=list(OutboxStatus), limit=10**6)}
        store.close()
    assert actions >= {"open", "update", "reminder", "acknowledge", "resolve"}
