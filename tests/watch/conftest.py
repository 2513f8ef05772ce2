"""Fixtures for the real-wire watch tests: a tansu broker, the schema registry, fresh topics.

One broker and one registry serve the whole session (starting tansu takes about 0.1 s, but
each test's topics and consumer group are its own, so tests never see each other's events).
When the broker cannot be installed or started here, every test that asks for it skips and
says why; nothing else does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from testing.broker import (
    Broker,
    BrokerUnavailable,
    Events,
    Topics,
    running_broker,
    tansu_available,
)
from testing.postgres import fresh_schema
from testing.schema_registry import SchemaRegistry

if TYPE_CHECKING:
    from tests.watch.test_wire_watch import Home

DEFAULT_PARTITIONS = 2


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A running Kafka-protocol broker on 127.0.0.1, for the session."""
    reason = tansu_available()
    if reason is not None:
        pytest.skip(f"no Kafka-compatible broker: {reason}")
    try:
        with running_broker(tmp_path_factory.mktemp("tansu")) as running:
            yield running
    except BrokerUnavailable as e:
        pytest.skip(f"no Kafka-compatible broker: {e}")


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """The schema-registry stand-in serving DataHub's Avro schemas, for the session."""
    registry = SchemaRegistry()
    with registry.running():
        yield registry


MakeTopics = Callable[[int], Topics]


@pytest.fixture
def make_topics(broker: Broker, schema_registry: SchemaRegistry) -> MakeTopics:
    """Create this test's three DataHub topics with N partitions and register their subjects."""

    def make(partitions: int = DEFAULT_PARTITIONS) -> Topics:
        topics = Topics.unique()
        broker.create_topics(topics.all, partitions)
        schema_registry.add_topics(*topics.all)
        return topics

    return make


@pytest.fixture
def topics(make_topics: MakeTopics) -> Topics:
    """This test's topics, two partitions each."""
    return make_topics(DEFAULT_PARTITIONS)


@pytest.fixture
def events(broker: Broker, topics: Topics) -> Iterator[Events]:
    """A producer writing to this test's topics as GMS does."""
    producer = Events(broker, topics)
    yield producer
    producer.close()


@pytest.fixture
def postgres_state_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for a state database shared by several watchers."""
    with fresh_schema("mlc_watch") as url:
        yield url


@pytest.fixture
def home(
    tmp_path: Path, broker: Broker, schema_registry: SchemaRegistry, topics: Topics
) -> Iterator[Home]:
    """A user's home for the watch tests: the demo's catalog, fake Slack, this test's topics."""
    from tests.watch.test_wire_watch import lite_home

    with lite_home(tmp_path, broker, schema_registry, topics) as made:
        yield made
