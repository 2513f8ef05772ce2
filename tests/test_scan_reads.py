"""A scan reads the scanned models' incidents, and other models' open ones on the same entities.

Not every incident in the store (a watcher scans a few models every second against an
estate's store), yet the write-back still sees what other models hold: an entity's risk tag
stays while any model has an open incident of that kind there.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import builtin_infos, infos_of
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.writeback import plan_writeback
from mlcopilot.model import Incident, IncidentState, Severity, TagWrite
from mlcopilot.model.incident_heads import IncidentHeads
from mlcopilot.protocols import StateStore
from mlcopilot.scan import ScanOptions, _after, _held_by_others, _plan_writeback, scan
from mlcopilot.store import SqlStore, open_store
from testing.builders import dataset_urn, model_urn
from testing.notify_world import CUSTOMERS, World, scripted_checks, world

CHURN, LTV = model_urn("churn"), model_urn("ltv")
PII_TAG = builtin_infos()["pii_exposure"].tag


def scan_only(w: World, model: str) -> list[object]:
    with LiteCatalog(w.catalog_path) as catalog, open_store(w.state_url) as store:
        result = scan(
            catalog,
            store,
            scripted_checks(w.script),
            ScanOptions(now=w.clock.now(), models=[model]),
            delivery=w.delivery(catalog),
        )
    return list(result.writes)


def customers_tags(w: World) -> frozenset[str]:
    with LiteCatalog(w.catalog_path) as catalog:
        return catalog.nodes([CUSTOMERS])[CUSTOMERS].tags


def test_a_tag_another_model_still_needs_stays_when_one_model_resolves(tmp_path: Path) -> None:
    models = {"churn": ["raw.customers"], "ltv": ["raw.customers"]}
    with world(tmp_path, models=models) as w:
        w.script = {"pii_exposure": {CUSTOMERS: [("email", Severity.HIGH, None)]}}
        w.scan()
        assert PII_TAG in customers_tags(w)

        # churn no longer reads the column: its scan resolves its incident, ltv's stays open.
        w.script = {}
        w.clock.sleep(60)
        writes = scan_only(w, CHURN)

        with open_store(w.state_url) as store:
            states = {i.model: i.state for i in store.incidents()}
        assert states == {CHURN: IncidentState.RESOLVED, LTV: IncidentState.OPEN}
        assert TagWrite(CUSTOMERS, PII_TAG, present=False) not in writes
        assert PII_TAG in customers_tags(w)

        # Once ltv resolves too, the tag goes.
        w.clock.sleep(60)
        writes = scan_only(w, LTV)
        assert TagWrite(CUSTOMERS, PII_TAG, present=False) in writes
        assert PII_TAG not in customers_tags(w)


class _Incidents:
    """A store that answers everything but ``open_kinds``: the scan reads incidents instead."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "open_kinds":
            raise AttributeError(name)
        return getattr(self._store, name)


def test_tags_planned_from_the_kinds_others_hold_are_the_tags_planned_from_their_incidents(
    tmp_path: Path,
) -> None:
    """Asked of the store (``open_kinds``) or read as incidents, the write-back is the same."""
    orders = dataset_urn("raw.orders")
    models = {"churn": ["raw.customers", "raw.orders"], "ltv": ["raw.customers", "raw.orders"]}
    with world(tmp_path, models=models) as w:
        w.script = {
            "pii_exposure": {
                CUSTOMERS: [("email", Severity.HIGH, None), ("phone", Severity.HIGH, None)],
                orders: [("card", Severity.HIGH, None)],
            }
        }
        w.scan()
        # churn's scan resolves what it found; ltv's incidents, not rescanned, hold the tags.
        w.script = {"pii_exposure": {CUSTOMERS: [("email", Severity.HIGH, None)]}}
        checks = scripted_checks(w.script)
        infos = infos_of(checks)
        with LiteCatalog(w.catalog_path) as catalog, open_store(w.state_url) as store:
            previous = store.incidents(models=[CHURN])
            options = ScanOptions(now=w.clock.now(), models=[CHURN], dry_run=True)
            findings = scan(catalog, store, checks, options).findings
            covered = frozenset((CHURN, "pii_exposure", entity) for entity in (CUSTOMERS, orders))
            changes = reconcile(previous, findings, evaluated=covered, now=w.clock.now())
            assert changes.resolved  # something for the tags to decide
            planned = [
                _plan_writeback(
                    catalog,
                    _after(previous, changes),
                    _held_by_others(s, previous),
                    models=[CHURN],
                    infos=infos,
                )
                for s in (store, cast(StateStore, _Incidents(store)))
            ]
            # As a scan planned it when it read the other models' incidents themselves:
            others = store.incidents(
                entities=[CUSTOMERS, orders], include_resolved=False, other_than=[CHURN]
            )
            before = plan_writeback(
                _after(previous, changes),
                models=[CHURN],
                everything=_after([*previous, *others], changes),
                infos=infos,
            )
    tags = [[w for w in plan if isinstance(w, TagWrite)] for plan in planned]
    assert tags[0] == tags[1] == [w for w in before if isinstance(w, TagWrite)]
    assert TagWrite(orders, PII_TAG, present=True) in tags[0]  # held by ltv alone
    assert planned[0] == planned[1]


class _Reads:
    """The real store, its reads of whole incidents by id recorded."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.whole_reads: list[list[str]] = []
        """The ids named by each read of incidents by id (the scan's reads of whole ones)."""

    def incidents(self, **filters: Any) -> list[Incident]:
        if filters.get("content", True) and filters.get("ids") is not None:
            self.whole_reads.append(sorted(filters["ids"]))
        return self._store.incidents(**filters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _every_incident_whole(
    store: StateStore, models: Sequence[str], findings: object
) -> tuple[list[Incident], IncidentHeads]:
    """What a scan reconciled against before heads: every stored incident, read whole."""
    return store.incidents(models=models), IncidentHeads([])


def test_a_scan_reads_whole_only_the_incidents_it_does_not_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refreshed incidents are read as heads; the scans' outcomes are those of whole ones."""
    high, medium = Severity.HIGH, Severity.MEDIUM
    scripts: list[dict[str, Any]] = [
        {"pii_exposure": {CUSTOMERS: [("email", high, None), ("phone", high, None)]}},
        # email refreshed (its severity too), phone resolved
        {"pii_exposure": {CUSTOMERS: [("email", medium, None)]}},
        # email refreshed, phone found again: a recurrence
        {"pii_exposure": {CUSTOMERS: [("email", medium, None), ("phone", high, None)]}},
    ]
    outcomes = []
    for name in ("heads", "whole"):
        if name == "whole":
            monkeypatch.setattr(sys.modules["mlcopilot.scan"], "_previous", _every_incident_whole)
        with world(tmp_path / name) as w, w.store() as real:
            store = _Reads(real)
            seen = []
            for script in scripts:
                w.script = script
                result = w.scan(store=cast(SqlStore, store))
                seen.append((result.changes, result.writes))
                w.clock.sleep(60)
            stored = real.incidents()
            outcomes.append((seen, stored, store.whole_reads))
    (heads, heads_stored, heads_reads), (whole, whole_stored, _) = outcomes
    # The same changes, but that only heads carry the stored digest that tells a refresh
    # found as stored: email's severity changed in the second scan, not in the third.
    assert [changes.unchanged for changes, _ in heads] == [b"", b"\x00", b"\x01"]
    assert [changes.unchanged for changes, _ in whole] == [b"", b"\x00", b"\x00"]
    assert [(dataclasses.replace(c, unchanged=b""), w) for c, w in heads] == [
        (dataclasses.replace(c, unchanged=b""), w) for c, w in whole
    ]
    assert heads_stored == whole_stored
    assert all(i.message and i.path for i in heads_stored)
    resolved = next(i for i in heads_stored if i.field == "phone")
    assert resolved.generation == 2  # resolved in the second scan, opened again in the third
    # The first scan had nothing stored; the second and third read only phone's whole (the
    # one resolved, then the one recurring): never email's, which each refreshed.
    assert heads_reads == [[resolved.id], [resolved.id]]


class _ActsDuringTheWalk:
    """The real store; while the scan walks (when it asks for the baselines), a person acts."""

    def __init__(self, store: SqlStore, act: Callable[[SqlStore], None]) -> None:
        self._store = store
        self._act: Callable[[SqlStore], None] | None = act

    def baselined_datasets(self, models: Sequence[str]) -> dict[str, set[str]]:
        act, self._act = self._act, None
        if act is not None:
            act(self._store)
        return self._store.baselined_datasets(models)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_incident_acknowledged_during_the_walk_is_refreshed_as_acknowledged(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w, w.store() as real:
        w.script = {"pii_exposure": {CUSTOMERS: [("email", Severity.HIGH, None)]}}
        (opened,) = w.scan().changes.opened
        w.clock.sleep(60)

        def acknowledge(s: SqlStore) -> None:
            s.acknowledge(opened.id, by="ana", at=w.clock.now())

        store = _ActsDuringTheWalk(real, act=acknowledge)
        result = w.scan(store=cast(SqlStore, store))
        assert store._act is None  # it acted
        (refreshed,) = result.changes.updated
        assert (refreshed.state, refreshed.acknowledged_by) == (IncidentState.ACKNOWLEDGED, "ana")
        assert refreshed.message == opened.message
        assert real.incidents()[0].state is IncidentState.ACKNOWLEDGED
