"""The real DataHub Actions ``Pipeline`` running the ``mlcopilot`` action, fed by a test source.

The source is registered in DataHub Actions' own source registry, the way the framework's
tests register theirs, and hands the pipeline real ``EntityChangeEvent`` envelopes; everything
else (the pipeline, the filters, the entry point that finds the action, the worker, the Lite
catalog, the state database, the failed-events file) is what ``mlcopilot watch`` runs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")

from datahub.metadata.schema_classes import AuditStampClass, EntityChangeEventClass
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import EntityChangeEvent
from datahub_actions.pipeline.pipeline import Pipeline
from datahub_actions.pipeline.pipeline_context import PipelineContext
from datahub_actions.source.event_source import EventSource
from datahub_actions.source.event_source_registry import event_source_registry
from typer.testing import CliRunner

from mlcopilot.cli import app
from mlcopilot.model import Incident
from mlcopilot.settings import load_settings
from mlcopilot.store import open_store
from mlcopilot.watch.run import config_for
from tests.conftest import DEMO_DATA

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
STARTUP_INCIDENTS = 4
"""What the demo catalog opens on its first scan (PII, deprecated, two stale sources)."""
DEADLINE = 120.0


class QueueSource(EventSource):  # type: ignore[misc]  # untyped base class
    """Yields the envelopes a test puts on :data:`FEED` until the pipeline is stopped."""

    acked: ClassVar[list[tuple[EventEnvelope, bool]]] = []
    made: ClassVar[list[QueueSource]] = []

    def __init__(self) -> None:
        self.closed = False

    @classmethod
    def create(cls, config_dict: dict[str, Any], ctx: PipelineContext) -> QueueSource:
        cls.made.append(cls())
        return cls.made[-1]

    def events(self) -> Iterable[EventEnvelope]:
        while not self.stop_requested():
            try:
                yield FEED.get(timeout=0.05)
            except queue.Empty:
                continue

    def ack(self, event: EventEnvelope, processed: bool = True) -> None:
        QueueSource.acked.append((event, processed))

    def close(self) -> None:
        self.closed = True


FEED: queue.Queue[EventEnvelope] = queue.Queue()
event_source_registry.register("mlcopilot-test-queue", QueueSource)


def field_urn(path: str) -> str:
    return f"urn:li:schemaField:({CUSTOMERS},{path})"


def change(
    urn: str,
    category: str,
    operation: str,
    *,
    modifier: str | None = None,
    actor: str = "urn:li:corpuser:datahub",
) -> EventEnvelope:
    event = EntityChangeEvent.from_class(
        EntityChangeEventClass(
            entityType="dataset",
            entityUrn=urn,
            category=category,
            operation=operation,
            modifier=modifier,
            auditStamp=AuditStampClass(time=int(time.time() * 1000), actor=actor),
            version=0,
        )
    )
    return EventEnvelope("EntityChangeEvent_v1", event, {})


def load(name: str) -> None:
    ran = CliRunner().invoke(app, ["catalog", "load", str(DEMO_DATA / name)])
    assert ran.exit_code == 0, ran.output


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


class Watcher:
    def __init__(self, home: Path) -> None:
        self.home = home
        settings = load_settings()
        self.state_url = f"sqlite:///{settings.home_path / 'state.db'}"
        config = config_for(settings)
        config["source"] = {"type": "mlcopilot-test-queue", "config": {}}
        self.failed_log = settings.failed_events_path / config["name"] / "failed_events.log"
        self.pipeline = Pipeline.create(config)
        self.thread = threading.Thread(target=self.pipeline.run, daemon=True)

    def incidents(self) -> list[Incident]:
        with open_store(self.state_url, create=False, read_only=True) as store:
            return store.incidents(include_resolved=True)

    def idle(self) -> bool:
        """No rescan is due or being scanned (the next periodic full rescan is an hour away)."""
        now = datetime.now(UTC)
        with open_store(self.state_url, create=False, read_only=True) as store:
            return not any(r.claimed_by or r.due_at <= now for r in store.rescans())

    def send(self, *envelopes: EventEnvelope) -> None:
        before = len(QueueSource.acked)
        for envelope in envelopes:
            FEED.put(envelope)
        wait_until(lambda: len(QueueSource.acked) >= before + len(envelopes), "the acks")
        wait_until(self.idle, "the rescans")

    @property
    def recorded(self) -> int:
        return int(self.pipeline.action.recorded)


@pytest.fixture
def watcher(isolated_home: Path) -> Iterator[Watcher]:
    QueueSource.acked = []
    load("01_catalog.json")
    made = Watcher(isolated_home)
    made.thread.start()
    try:
        wait_until(lambda: len(made.incidents()) >= STARTUP_INCIDENTS, "the startup scan")
        wait_until(made.idle, "the startup scan to complete")
        yield made
    finally:
        made.pipeline.stop()
        made.thread.join(30)
        made.pipeline.close()


def test_an_action_that_cannot_start_closes_the_event_source_it_was_given(
    isolated_home: Path,
) -> None:
    """Pipeline.create opens the source before the action: a Kafka consumer left open would
    poll the broker for as long as the process lives."""
    load("01_catalog.json")
    settings = load_settings()
    config = config_for(settings)
    config["source"] = {"type": "mlcopilot-test-queue", "config": {}}
    config["action"]["config"]["catalog"] = f"lite:{isolated_home / 'nowhere' / 'catalog.db'}"
    QueueSource.made = []
    with pytest.raises(Exception, match="instantiate Action") as failed:
        Pipeline.create(config)
    assert "nowhere" in str(failed.value.__cause__ or failed.value.__context__)
    [source] = QueueSource.made
    assert source.closed


def drifts(w: Watcher) -> list[Incident]:
    return [i for i in w.incidents() if i.check == "schema_drift"]


def test_a_schema_change_on_an_upstream_dataset_opens_the_drift_incident(watcher: Watcher) -> None:
    assert not drifts(watcher)
    load("02_schema_change.json")  # signup_date dropped from raw.customers, as DataHub has it

    watcher.send(change(CUSTOMERS, "TECHNICAL_SCHEMA", "REMOVE", modifier=field_urn("signup_date")))

    opened = drifts(watcher)
    assert opened, "the schema change event rescanned the model and found the drift"
    assert {i.model for i in opened} == {MODEL}
    assert all(i.entity == CUSTOMERS for i in opened)
    assert all(processed for _, processed in QueueSource.acked)

    # The same event again (a rebalance, a replay): a rescan that finds nothing new.
    before = {(i.id, i.generation, i.state) for i in watcher.incidents()}
    watcher.send(change(CUSTOMERS, "TECHNICAL_SCHEMA", "REMOVE", modifier=field_urn("signup_date")))
    assert {(i.id, i.generation, i.state) for i in watcher.incidents()} == before


def test_a_field_level_event_rescans_the_model_reading_its_dataset(watcher: Watcher) -> None:
    recorded = watcher.recorded
    watcher.send(
        change(field_urn("email"), "GLOSSARY_TERM", "ADD", modifier="urn:li:glossaryTerm:x")
    )
    assert watcher.recorded == recorded + 1


def test_mlcopilots_own_write_back_causes_no_rescan(watcher: Watcher) -> None:
    recorded = watcher.recorded
    watcher.send(
        change(CUSTOMERS, "TAG", "ADD", modifier="urn:li:tag:mlcopilot-schema-drift"),
        change(
            MODEL,
            "STRUCTURED_PROPERTY",
            "MODIFY",
            modifier="urn:li:structuredProperty:io.mlcopilot.openRisks",
        ),
        change(CUSTOMERS, "TECHNICAL_SCHEMA", "ADD", actor="urn:li:corpuser:mlcopilot"),
    )
    assert watcher.recorded == recorded


def test_an_event_for_an_entity_no_model_reads_records_nothing(watcher: Watcher) -> None:
    recorded = watcher.recorded
    other = "urn:li:dataset:(urn:li:dataPlatform:hive,nobody.reads_this,PROD)"
    watcher.send(change(other, "TECHNICAL_SCHEMA", "REMOVE"))
    assert watcher.recorded == recorded


def test_a_poison_event_goes_to_the_failed_events_file_and_is_skipped(watcher: Watcher) -> None:
    poison = change("urn:li:dataset:(broken", "TECHNICAL_SCHEMA", "REMOVE")
    watcher.send(poison, change(CUSTOMERS, "DEPRECATION", "MODIFY"))

    logged = watcher.failed_log.read_text(encoding="utf-8").splitlines()
    assert len(logged) == 1
    assert "urn:li:dataset:(broken" in logged[0]
    assert EventEnvelope.from_json(logged[0]).event.entityUrn == "urn:li:dataset:(broken"
    assert watcher.pipeline.stats().get_failed_event_count() == 1
    # ...and the event after it was still processed (the pipeline did not stop).
    assert watcher.thread.is_alive()
