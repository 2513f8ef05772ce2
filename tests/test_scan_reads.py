"""A scan reads the scanned models' incidents, and other models' open ones on the same entities.

Not every incident in the store (a watcher scans a few models every second against an
estate's store), yet the write-back still sees what other models hold: an entity's risk tag
stays while any model has an open incident of that kind there.
"""

from __future__ import annotations

from pathlib import Path

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import builtin_infos
from mlcopilot.model import IncidentState, Severity, TagWrite
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import open_store
from testing.builders import model_urn
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
