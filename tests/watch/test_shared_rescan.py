"""The full rescan shared by several watchers: split into batches that each watcher takes.

The watchers here are the real :class:`~mlcopilot.watch.worker.Worker` (the scanner, its lease
renewal and its relay lanes) without the Kafka consumer, which plays no part in a full rescan:
two in this process, driven one claim at a time or running as threads, and one in a child
process killed while it holds a batch. What is checked is what the state database and the fake
Slack hold: every model scanned exactly once per full rescan, each batch by one watcher, every
incident and every notification once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.lineage.downstream import DownstreamIndex
from mlcopilot.model import OutboxStatus
from mlcopilot.protocols import ALL_MODELS
from mlcopilot.service import Service
from mlcopilot.settings import Settings, load_settings
from mlcopilot.store import SqlStore, open_store
from mlcopilot.watch import worker as worker_module
from mlcopilot.watch.worker import Worker, WorkerOptions
from standin.fixtures import StandInFactory
from testing.builders import dataset, ml_model, model_urn
from testing.fakes.slack import FakeSlack
from testing.notify_world import build_catalog, notify_env
from testing.postgres import fresh_schema
from tests.watch.test_wire_watch import slack_keys

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

NAMES = [f"m{i:02d}" for i in range(12)]
MODELS = sorted(model_urn(n) for n in NAMES)
FIELDS = ("a", "b", "c")
WAIT_S = 120.0
"""The longest any wait here lasts before the test fails (nothing sleeps a fixed time)."""


def table(name: str) -> str:
    return f"raw.{name}"


def catalog_of(path: Path) -> None:
    """Model ``mNN`` trained on ``raw.mNN`` alone: a change to one dataset is one model's."""
    build_catalog(path, {n: [table(n)] for n in NAMES}, FIELDS)


def drop_column(path: Path, column: str) -> None:
    """Every dataset loses ``column``, as DataHub would record a schema change."""
    kept = [(f, "string") for f in FIELDS if f != column]
    with LiteCatalog(path) as catalog:
        catalog.ingest([mcp for n in NAMES for mcp in dataset(table(n), fields=kept)])


def settings_for(home: Path, catalog: str, state_url: str, **env: str) -> Settings:
    return load_settings(
        environ={
            "MLCOPILOT_HOME": str(home),
            "MLCOPILOT_CATALOG": catalog,
            "MLCOPILOT_STATE_URL": state_url,
            "MLCOPILOT_WRITE_BACK": "false",
            "MLCOPILOT_GROUP_WAIT": "0s",
            "MLCOPILOT_TEST_WRITE_SPACING": "0s",
            **env,
        }
    )


def scanned_since(state_url: str, since: datetime) -> list[str]:
    """Every model of every scan committed since ``since``, once per scan that scanned it."""
    engine = create_engine(state_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT models, started_at FROM scan_runs ORDER BY id")).all()
    finally:
        engine.dispose()
    found: list[str] = []
    for models, started in rows:
        when = datetime.fromisoformat(started) if isinstance(started, str) else started
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if when >= since:
            found += models if isinstance(models, list) else json.loads(models)
    return found


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s")
        time.sleep(0.05)


def full_rescan_done(store: SqlStore) -> bool:
    """No batch waiting or held, and the full-rescan request itself not due or held."""
    rows = store.rescans()
    return not any(r.is_batch for r in rows) and all(
        r.model == ALL_MODELS and r.claimed_by is None and r.due_at > datetime.now(UTC)
        for r in rows
    )


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    with fresh_schema("mlc_shared") as url:
        yield url


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema("mlc_shared") as url:
        yield url


# --- two watchers, one claim at a time ---------------------------------------------------------


def test_the_watcher_that_claims_the_full_rescan_splits_it_and_both_take_batches(
    tmp_path: Path, state_url: str
) -> None:
    path = tmp_path / "catalog.db"
    catalog_of(path)
    settings = settings_for(tmp_path, f"lite:{path}", state_url, MLCOPILOT_RESCAN_BATCH="5")
    service = Service.from_settings(settings)
    options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=5)
    one = Worker(settings, DownstreamIndex(), options, owner="w1")
    two = Worker(settings, DownstreamIndex(), options, owner="w2")
    with open_store(state_url) as store:
        started = datetime.now(UTC)
        store.request_rescans([ALL_MODELS], reason="watch started", now=started)
        assert one.run_once(store, service)  # claims "*": 12 models in 3 batches of up to 5
        assert one.scans == 0, "splitting scans nothing itself"
        assert sorted(len(r.models) for r in store.rescans() if r.is_batch) == [2, 5, 5]
        assert two.run_once(store, service)
        assert one.run_once(store, service)
        assert two.run_once(store, service)
        assert not one.run_once(store, service)
        assert not two.run_once(store, service)
        assert full_rescan_done(store)
        [full] = store.rescans()
        assert full.due_at > started + timedelta(minutes=59)
    assert (one.batches, two.batches) == (1, 2)
    assert sorted(scanned_since(state_url, started)) == MODELS


def test_a_watcher_started_during_a_full_rescan_joins_it(tmp_path: Path, state_url: str) -> None:
    path = tmp_path / "catalog.db"
    catalog_of(path)
    settings = settings_for(tmp_path, f"lite:{path}", state_url)
    service = Service.from_settings(settings)
    options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=4)
    one = Worker(settings, DownstreamIndex(), options, owner="w1")
    two = Worker(settings, DownstreamIndex(), options, owner="w2")
    with open_store(state_url) as store:
        started = datetime.now(UTC)
        store.request_rescans([ALL_MODELS], reason="w1 started", now=started)
        one.run_once(store, service)  # split into 3 batches
        one.run_once(store, service)  # scans the first
        store.request_rescans([ALL_MODELS], reason="w2 started", now=datetime.now(UTC))
        two.run_once(store, service)  # claims "*" again: joins, no second rescan
        assert len([r for r in store.rescans() if r.is_batch]) == 2
        while one.run_once(store, service) or two.run_once(store, service):
            pass
        assert full_rescan_done(store)
    assert sorted(scanned_since(state_url, started)) == MODELS


def test_the_split_lists_models_from_datahubs_index_and_batches_skip_the_soft_deleted(
    tmp_path: Path, state_url: str, standin_factory: StandInFactory
) -> None:
    names = NAMES[:4]
    records = [mcp for n in names for mcp in dataset(table(n), fields=[("a", "string")])]
    for n in names:  # m01 soft-deleted: still in the search index, as GMS keeps it
        records += ml_model(n, training_data=[table(n)], removed=True if n == "m01" else None)
    server = standin_factory(records)
    settings = settings_for(tmp_path, f"datahub:{server.url}", state_url)
    service = Service.from_settings(settings)
    options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=2)
    one = Worker(settings, DownstreamIndex(), options, owner="w1")
    with open_store(state_url) as store:
        started = datetime.now(UTC)
        store.request_rescans([ALL_MODELS], reason="watch started", now=started)
        server.clear_requests()
        assert one.run_once(store, service)  # claims "*" and splits it
        # The split asked DataHub's search only: no model's aspects were read to make it.
        assert {r.operation for r in server.requests} == {"mlcopilotSearch"}
        batches = [r.models for r in store.rescans() if r.is_batch]
        assert sorted(m for b in batches for m in b) == sorted(model_urn(n) for n in names)
        while one.run_once(store, service):
            pass
        assert full_rescan_done(store)
    # The soft-deleted model was in a batch and not scanned, as `mlcopilot scan` lists none.
    scanned = scanned_since(state_url, started)
    assert sorted(scanned) == sorted(model_urn(n) for n in names if n != "m01")
    # Named with --model, it is scanned while it exists, as `mlcopilot scan --model` does.
    named = (model_urn("m01"), model_urn("m02"))
    options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=2, models=named)
    three = Worker(settings, DownstreamIndex(), options, owner="w3")
    with open_store(state_url) as store:
        again = datetime.now(UTC)
        store.request_rescans([ALL_MODELS], reason="watch --model started", now=again)
        while three.run_once(store, service):
            pass
    assert sorted(scanned_since(state_url, again)) == sorted(named)


def test_an_events_rescan_goes_before_the_full_rescans_batches(
    tmp_path: Path, state_url: str
) -> None:
    path = tmp_path / "catalog.db"
    catalog_of(path)
    settings = settings_for(tmp_path, f"lite:{path}", state_url)
    service = Service.from_settings(settings)
    worker = Worker(settings, DownstreamIndex(), WorkerOptions(rescan_batch=3), owner="w1")
    with open_store(state_url) as store:
        store.request_rescans([ALL_MODELS], reason="the hour", now=datetime.now(UTC))
        worker.run_once(store, service)  # split
        worker.run_once(store, service)  # the first batch
        changed = datetime.now(UTC)
        store.request_rescans([MODELS[-1]], reason="TECHNICAL_SCHEMA REMOVE", now=changed)
        worker.run_once(store, service)
        assert scanned_since(state_url, changed) == [MODELS[-1]]


# --- two watchers at once ----------------------------------------------------------------------


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    try:
        for each in workers:
            each.start()
        yield
    finally:
        for each in workers:
            each.stop(timeout=60)


def delivered(store: SqlStore) -> bool:
    return not store.outbox(statuses=[OutboxStatus.PENDING, OutboxStatus.SENDING])


@pytest.mark.postgres
def test_two_watchers_share_the_full_rescan_each_model_once_each_notification_once(
    tmp_path: Path, pg_url: str
) -> None:
    # A batch of this catalog scans in a fraction of a second, less than a watcher's poll: the
    # other watcher takes batches because the split's notification wakes it.
    path = tmp_path / "catalog.db"
    catalog_of(path)
    slack = FakeSlack()
    with slack.running():
        settings = settings_for(
            tmp_path, f"lite:{path}", pg_url, MLCOPILOT_RESCAN_BATCH="2", **notify_env(slack=slack)
        )
        options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=2)
        one = Worker(settings, DownstreamIndex(), options, owner="w1")
        two = Worker(settings, DownstreamIndex(), options, owner="w2")
        with open_store(pg_url) as store, running(one, two):
            # Both start-up requests make one full rescan: the first split it, the second
            # joined it.
            wait_until(lambda: full_rescan_done(store), "the start-up rescan")
            startup = scanned_since(pg_url, datetime.min.replace(tzinfo=UTC))
            assert sorted(startup) == MODELS
            assert store.incidents() == []

            drop_column(path, "b")  # every model's upstream changed: 12 drift incidents
            before = (one.batches, two.batches)
            hour = datetime.now(UTC)
            store.request_rescans([ALL_MODELS], reason="the hour", now=hour)
            wait_until(lambda: full_rescan_done(store), "the hourly rescan")
            wait_until(lambda: delivered(store), "every notification")

            assert sorted(scanned_since(pg_url, hour)) == MODELS
            took = (one.batches - before[0], two.batches - before[1])
            assert sum(took) == 6
            assert all(took), f"one watcher took every batch: {took}"
            incidents = store.incidents()
            rows = store.outbox(limit=10_000)
        drifts = Counter(i.model for i in incidents if i.check == "schema_drift")
        assert drifts == Counter(MODELS)
        assert {i.generation for i in incidents} == {1}
        keys = slack_keys(slack)
        assert keys, "Slack was told"
        assert [k for k, n in Counter(keys).items() if n > 1] == []
        assert all(r.status is OutboxStatus.DONE for r in rows)
        assert len(slack.roots()) == len({r.group_key for r in rows if r.sink == "slack"})


@pytest.mark.postgres
def test_watchers_on_postgresql_are_woken_by_requests_another_process_makes(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No watcher looks for requests of its own accord within the test: only PostgreSQL's
    # notifications bring in the other watcher's split and the other process's request.
    monkeypatch.setattr(worker_module, "POLL", 3600.0)
    path = tmp_path / "catalog.db"
    catalog_of(path)
    settings = settings_for(tmp_path, f"lite:{path}", pg_url)
    options = WorkerOptions(rescan_interval=timedelta(hours=1), rescan_batch=5)
    one = Worker(settings, DownstreamIndex(), options, owner="w1")
    two = Worker(settings, DownstreamIndex(), options, owner="w2")
    with open_store(pg_url) as store, running(one, two):
        wait_until(lambda: full_rescan_done(store), "the start-up rescan")
        assert sorted(scanned_since(pg_url, datetime.min.replace(tzinfo=UTC))) == MODELS
        asked = datetime.now(UTC)
        store.request_rescans([MODELS[0]], reason="an event another watcher heard", now=asked)
        wait_until(lambda: scanned_since(pg_url, asked) == [MODELS[0]], "the rescan asked for")
        assert store.rescans()[0].model == ALL_MODELS  # only the next hour's is left


# --- a watcher killed while it holds a batch ---------------------------------------------------

CHILD_LEASE = timedelta(seconds=2)


def _watch_in_child(settings: Settings) -> None:
    """A watcher (no consumer) that scans until it is killed."""
    options = WorkerOptions(rescan_interval=None, rescan_batch=100, lease=CHILD_LEASE)
    Worker(settings, DownstreamIndex(), options, owner=f"child:{os.getpid()}").start()
    threading.Event().wait()


def _batches(store: SqlStore) -> list[tuple[str, str | None]]:
    return [(r.model, r.claimed_by) for r in store.rescans() if r.is_batch]


@pytest.mark.postgres
def test_a_killed_watchers_batch_is_taken_over_after_its_lease_and_scanned_once(
    tmp_path: Path, pg_url: str, standin_factory: StandInFactory
) -> None:
    records = [mcp for n in NAMES[:3] for mcp in dataset(table(n), fields=[("a", "string")])]
    records += [mcp for n in NAMES[:3] for mcp in ml_model(n, training_data=[table(n)])]
    server = standin_factory(records)
    # Once the child has split the full rescan, DataHub stops answering: the batch's scan then
    # outlasts several leases, until the test lets it go.
    released = threading.Event()
    engine = create_engine(pg_url)

    def stall() -> None:
        with engine.connect() as conn:
            split = conn.execute(
                text("SELECT count(*) FROM rescan_requests WHERE models IS NOT NULL")
            ).scalar()
        if split:
            released.wait(WAIT_S)

    server.inject("POST /api/graphql", hook=stall)
    settings = settings_for(tmp_path, f"datahub:{server.url}", pg_url)
    started = datetime.now(UTC)
    child = multiprocessing.get_context("spawn").Process(target=_watch_in_child, args=(settings,))
    with open_store(pg_url) as store:
        try:
            child.start()
            wait_until(
                lambda: any(owner and owner.startswith("child:") for _, owner in _batches(store)),
                "the child's claim of the batch",
            )
            [(batch, holder)] = _batches(store)
            # Three leases pass while the child waits on DataHub; its claim is renewed.
            deadline = time.monotonic() + 3 * CHILD_LEASE.total_seconds()
            while time.monotonic() < deadline:
                assert _claim(store, "probe") == [], "a live watcher's batch was taken"
                time.sleep(0.25)
            assert child.is_alive()
            assert scanned_since(pg_url, started) == [], "the slow scan was meant to be running"
            child.kill()  # a lost node: no renewal, no release
            child.join(30)
        finally:
            if child.is_alive():
                child.kill()
            released.set()
            server.clear_faults()
            engine.dispose()
        assert _batches(store) == [(batch, holder)], "still held by the dead watcher"
        survivor = Worker(settings, DownstreamIndex(), WorkerOptions(lease=CHILD_LEASE), owner="w2")
        service = Service.from_settings(settings)
        wait_until(lambda: survivor.run_once(store, service), "the survivor's claim")
        assert survivor.batches == 1
        assert _batches(store) == []
    assert sorted(scanned_since(pg_url, started)) == sorted(model_urn(n) for n in NAMES[:3])


def _claim(store: SqlStore, owner: str) -> Sequence[Any]:
    """What another watcher on this state database would take now."""
    claimed = store.claim_rescans(
        owner=owner, now=datetime.now(UTC), lease=CHILD_LEASE, only_batches=True
    )
    return [r.model for r in claimed]
