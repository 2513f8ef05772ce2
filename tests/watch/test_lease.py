"""A scan longer than its lease keeps its claim while its watcher lives, and loses it once dead.

The store's ``renew_rescans`` on both backends, then the installed ``mlcopilot watch`` with a
short ``--lease`` on a DataHub (the stand-in) that turns slow, so its rescan outlasts several
leases: a second watcher's claims on the same state database get nothing while the first is
alive and scanning, and get the request once the first is killed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.store import SqlStore, open_store
from standin.fixtures import StandInFactory
from testing.broker import Events, WatchProcess
from testing.installed_cli import MLCOPILOT
from testing.postgres import fresh_schema
from tests.conftest import DEMO_DATA
from tests.watch.test_wire_watch import MODEL, STARTUP_INCIDENTS, Home, publish_schema_change

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
A = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,a,PROD)"
B = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,b,PROD)"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    with fresh_schema("mlc_lease") as url:
        yield url


@pytest.fixture
def store(state_url: str) -> Iterator[SqlStore]:
    with open_store(state_url) as opened:
        yield opened


def test_a_renewed_claim_is_not_taken_after_its_first_lease(store: SqlStore) -> None:
    store.request_rescans([A, B], reason="r", now=at(0))
    held = store.claim_rescans(owner="w1", now=at(1), lease=LEASE)
    for beat in (40, 80, 120):  # every renewal well within the lease, 2 leases past the claim
        assert store.renew_rescans(held, owner="w1", now=at(beat), lease=LEASE) == 2
    assert store.claim_rescans(owner="w2", now=at(150), lease=LEASE) == []
    # w1 stops renewing (it died): its last lease runs out at 180 s
    taken = store.claim_rescans(owner="w2", now=at(180), lease=LEASE)
    assert sorted(r.model for r in taken) == [A, B]
    assert [r.claimed_by for r in store.rescans()] == ["w2", "w2"]


def test_a_claim_lost_after_a_lapse_is_not_renewed(store: SqlStore) -> None:
    store.request_rescans([A, B], reason="r", now=at(0))
    held = store.claim_rescans(owner="w1", now=at(1), lease=LEASE, limit=1)
    store.claim_rescans(owner="w2", now=at(61), lease=LEASE)  # w1 missed its renewals
    assert store.renew_rescans(held, owner="w1", now=at(62), lease=LEASE) == 0
    assert {r.model: r.claimed_by for r in store.rescans()} == {A: "w2", B: "w2"}
    assert store.complete_rescans(held, owner="w1", now=at(63)) == 0


WIRE_LEASE_S = 2
"""The watcher's lease on the wire (renewed every 2/3 s)."""
SLOW_S = 8.0
"""What the catalog then adds to every request: the rescan's first request alone outlasts
several leases (and stays within the client's 30 s timeout, so the scan never fails)."""


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_live_watchers_long_scan_keeps_its_claim_and_a_killed_ones_is_taken(
    home: Home, events: Events, standin_factory: StandInFactory, backend: str
) -> None:
    pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")
    server = standin_factory(demo_records("01_catalog.json"))
    home.env["MLCOPILOT_CATALOG"] = f"datahub:{server.url}"
    postgres = fresh_schema("mlc_lease") if backend == "postgresql" else nullcontext(None)
    with postgres as pg:
        if pg is not None:
            home.env["MLCOPILOT_STATE_URL"] = home.state_url = pg
        watcher = start_watcher(home, events, f"--lease={WIRE_LEASE_S}s")
        try:
            server.write(demo_records("02_schema_change.json"))
            server.latency = SLOW_S  # DataHub is slow now: the rescan takes minutes
            publish_schema_change(events)
            watcher.wait_until(lambda: _holder(home) is not None, "the rescan claimed")
            owner = _holder(home)
            assert owner is not None
            assert owner.startswith("watch:"), owner
            # Three leases pass while the scan waits on DataHub; its claim is renewed.
            deadline = time.monotonic() + 3 * WIRE_LEASE_S
            while time.monotonic() < deadline:
                assert _second_watcher_claims(home) == [], "a live watcher's scan was taken"
                assert _holder(home) == owner
                time.sleep(0.5)
            assert watcher.running()
            assert home.drifts() == [], "the slow scan was meant to be still running"
            watcher.kill()  # a lost node: no renewal, no release
            taken: list[str] = []
            end = time.monotonic() + 10 * WIRE_LEASE_S
            while not taken and time.monotonic() < end:
                taken = _second_watcher_claims(home)
                time.sleep(0.5)
            assert taken == [MODEL]
            assert _holder(home) == "second"
        finally:
            watcher.kill()
            server.latency = 0.0


def demo_records(*names: str) -> list[dict[str, Any]]:
    """The demo's metadata files, as the stand-in ingests them."""
    return [r for n in names for r in json.loads((DEMO_DATA / n).read_text(encoding="utf-8"))]


def start_watcher(home: Home, events: Events, *extra: str) -> WatchProcess:
    """``mlcopilot watch EXTRA`` started, its startup scan committed and delivered."""
    env = {**home.env, "MLCOPILOT_HOME": str(home.path)}
    watcher = WatchProcess([str(MLCOPILOT)], env, home.path.parent / "first.log", *extra)
    watcher.start()
    try:
        watcher.wait_until(lambda: len(home.incidents()) >= STARTUP_INCIDENTS, "the startup scan")
        watcher.wait_until(lambda: home.idle(events), "the startup scan's notifications")
    except BaseException:
        watcher.kill()
        raise
    return watcher


def _holder(home: Home) -> str | None:
    with open_store(home.state_url, create=False) as store:
        return next((r.claimed_by for r in store.rescans() if r.model == MODEL), None)


def _second_watcher_claims(home: Home) -> list[str]:
    """What another watcher on this state database would take now (its claim, as the worker's)."""
    with open_store(home.state_url, create=False) as store:
        claimed = store.claim_rescans(owner="second", now=datetime.now(UTC), lease=LEASE)
    return [r.model for r in claimed]
