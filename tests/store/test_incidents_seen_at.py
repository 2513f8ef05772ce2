"""When a scan last found an incident (store migration 0009), on SQLite and PostgreSQL.

Only scans set ``seen_at``: acknowledging by hand leaves it, resolving keeps the last one. A
0008 database upgrades with each open incident's taken from the scan that last wrote it, and
downgrades back.
"""

from __future__ import annotations

from datetime import timedelta

from mlcopilot.model import IncidentState
from mlcopilot.store import open_store
from testing.migrations import migrate
from tests.store.test_store_contract import T0, T1, T2, finding, scan


def test_only_scans_set_when_an_incident_was_last_seen(store_url: str) -> None:
    with open_store(store_url) as store:
        f = finding()
        scan(store, [f], T0)
        scan(store, [f], T1)
        acked = store.acknowledge(f.id, by="ana", at=T2)
        assert (acked.updated_at, acked.seen_at) == (T2, T1)
        assert store.get(f.id) == acked


def test_a_0008_database_upgrades_with_each_open_incidents_last_scan(store_url: str) -> None:
    still_open, gone = finding("email"), finding("phone")
    with open_store(store_url) as store:
        scan(store, [still_open, gone], T0)
        scan(store, [still_open], T1)  # refreshes one, resolves the other
        store.acknowledge(still_open.id, by="ana", at=T1 + timedelta(hours=1))
    migrate(store_url, "0008", down=True)
    with open_store(store_url) as store:  # upgrades to head
        kept, resolved = store.get(still_open.id), store.get(gone.id)
    assert kept is not None
    assert resolved is not None
    assert (kept.state, kept.seen_at) == (IncidentState.ACKNOWLEDGED, T1)
    assert (resolved.state, resolved.seen_at) == (IncidentState.RESOLVED, None)
