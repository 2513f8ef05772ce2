"""The real-wire harness proved on DataHub Actions alone, before any mlcopilot code is in it.

The framework's own ``hello_world`` action, run by the real ``datahub actions`` command with
the real Kafka source, consumes what :class:`testing.broker.Events` publishes through tansu
and the schema-registry stand-in. If this fails, the watch tests' failures say nothing about
the product.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from testing.broker import Broker, Events, Topics, entity_change_event
from testing.schema_registry import METADATA_CHANGE_LOG_ID, PLATFORM_EVENT_ID, SchemaRegistry

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

DATAHUB = Path(sys.executable).parent / "datahub"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
EMAIL = f"urn:li:schemaField:({CUSTOMERS},email)"


def pipeline_yaml(name: str, broker: Broker, registry: SchemaRegistry, topics: Topics) -> str:
    """The hello_world pipeline on this test's topics (JSON is YAML)."""
    config: dict[str, Any] = {
        "name": name,
        "source": {
            "type": "kafka",
            "config": {
                "connection": {
                    "bootstrap": broker.bootstrap,
                    "schema_registry_url": registry.url,
                    # the group is new: without this it would start at the end, after our events
                    "consumer_config": {"auto.offset.reset": "earliest"},
                },
                "topic_routes": topics.routes(),
                "async_commit_enabled": False,
            },
        },
        "filters": [
            {
                "type": "event_type",
                "config": {
                    "filter": {
                        "EntityChangeEvent_v1": {"event": [{"category": "TECHNICAL_SCHEMA"}]},
                        "MetadataChangeLogEvent_v1": {"event": [{"aspectName": "operation"}]},
                    }
                },
            }
        ],
        "action": {"type": "hello_world"},
        "options": {"retry_count": 1, "failure_mode": "THROW"},
    }
    return json.dumps(config, indent=2)


def received(stdout: str) -> list[dict[str, Any]]:
    """The events hello_world printed (each a JSON object after its greeting line)."""
    decoder = json.JSONDecoder()
    found = []
    for chunk in stdout.split("Hello world! Received event:")[1:]:
        try:
            event, _ = decoder.raw_decode(chunk.strip())
        except json.JSONDecodeError:
            # The log was read while the action was still writing this event: not there yet.
            break
        found.append(event)
    return found


def wait_for(predicate: Any, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``predicate`` until true; fail (with the log) at the deadline or if the process died."""
    deadline = time.monotonic() + 90
    while not predicate():
        if process.poll() is not None:
            code = process.returncode
            pytest.fail(f"datahub actions exited {code} before {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within 90 s:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def test_hello_world_consumes_avro_framed_events_from_the_broker(
    broker: Broker,
    schema_registry: SchemaRegistry,
    topics: Topics,
    events: Events,
    tmp_path: Path,
) -> None:
    group = f"hello-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "hello.yaml"
    config.write_text(pipeline_yaml(group, broker, schema_registry, topics))

    # Published before the pipeline starts: a new group reads from the earliest offset.
    events.change(
        entity_change_event(
            CUSTOMERS,
            "TECHNICAL_SCHEMA",
            "REMOVE",
            modifier=EMAIL,
            parameters={"fieldPath": "email", "nullable": False},
        )
    )
    # A tag change and a versioned MCL the filter does not pass: consumed, acked, not acted on.
    events.change(entity_change_event(CUSTOMERS, "TAG", "ADD", modifier="urn:li:tag:PII"))
    events.aspect(CUSTOMERS, "globalTags", {"tags": [{"tag": "urn:li:tag:PII"}]})
    events.aspect(
        CUSTOMERS,
        "operation",
        {"timestampMillis": 1, "operationType": "INSERT", "lastUpdatedTimestamp": 1},
        timeseries=True,
    )
    events.flush()

    log = tmp_path / "actions.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(DATAHUB), "actions", "-c", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        wait_for(lambda: len(received(log.read_text())) >= 2, "two events", process, log)
        # The pipeline acks after act(); with synchronous commits the offsets follow at once.
        wait_for(
            lambda: (
                broker.committed(group, topics.platform_event, 2)
                == expected_offsets(events, topics.platform_event)
            ),
            "committed PlatformEvent offsets",
            process,
            log,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    got = received(log.read_text())
    assert [e["event_type"] for e in got] == ["EntityChangeEvent_v1", "MetadataChangeLogEvent_v1"]
    change = got[0]["event"]
    assert (change["entityUrn"], change["category"], change["operation"], change["modifier"]) == (
        CUSTOMERS,
        "TECHNICAL_SCHEMA",
        "REMOVE",
        EMAIL,
    )
    assert change["parameters"] == {"fieldPath": "email", "nullable": False}
    assert (got[1]["event"]["aspectName"], got[1]["event"]["entityUrn"]) == ("operation", CUSTOMERS)
    assert got[0]["meta"]["kafka"]["topic"] == topics.platform_event

    # The deserializer asked our registry for both schemas, by the ids the frames carry.
    asked = {r.path for r in schema_registry.requests}
    assert f"/schemas/ids/{PLATFORM_EVENT_ID}" in asked
    assert f"/schemas/ids/{METADATA_CHANGE_LOG_ID}" in asked


def expected_offsets(events: Events, topic: str) -> dict[int, int]:
    """The next offset per partition after what ``events`` delivered to ``topic``."""
    last: dict[int, int] = {}
    for sent_topic, partition, offset in events.sent:
        if sent_topic == topic:
            last[partition] = max(last.get(partition, -1), offset + 1)
    return last
