"""Before the watcher starts: can it reach Kafka and the schema registry at all?

The Kafka source of DataHub Actions waits a minute for the broker and then raises librdkafka's
own error, after the action was created (every watched model walked, the start-up scan begun)
and with a line per connection attempt on stderr. ``mlcopilot watch`` asks first, quietly,
within ``wait`` seconds, so a wrong address is one line naming the address and the variable
that set it, and exit code 3 (:class:`~mlcopilot.errors.CatalogUnavailable`, the project's
"cannot be reached" code), before anything is scanned.

A broker or registry that answers at all passes: an authorization error or a missing topic is
for the source to report (a topic may be created after the consumer subscribes).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from mlcopilot.errors import CatalogUnavailable
from mlcopilot.redact import redact

CONNECT_WAIT_S = 30.0
"""How long the watcher waits at start for the broker and the registry to answer."""


def check_kafka(
    bootstrap: str,
    topics: Sequence[str],
    *,
    group: str,
    wait: float = CONNECT_WAIT_S,
    variable: str = "KAFKA_BOOTSTRAP_SERVER",
) -> None:
    """Ask the broker for the metadata of ``topics[0]`` until it answers or ``wait`` passes.

    The client is configured as the Kafka source configures its consumer (``KAFKA_PROPERTIES_*``
    for SASL and TLS), with librdkafka's own logging off.

    Raises:
        CatalogUnavailable: no broker answered at ``bootstrap`` within ``wait`` seconds.
    """
    from confluent_kafka import Consumer, KafkaException
    from datahub_actions.plugin.source.kafka.kafka_event_source import (
        kafka_consumer_config_from_env,
    )

    config: dict[str, object] = {
        **kafka_consumer_config_from_env(),
        "bootstrap.servers": bootstrap,
        "group.id": group,  # never joins: no subscribe, no commit
        "log_level": 0,
        "error_cb": lambda _error: None,
    }
    try:
        consumer = Consumer(config)
    except KafkaException as exc:  # a property librdkafka refuses
        raise CatalogUnavailable(f"cannot create a Kafka client for {bootstrap}: {exc}") from exc
    deadline = time.monotonic() + wait
    last = ""
    try:
        while True:
            try:
                consumer.list_topics(
                    topics[0], timeout=max(0.5, min(5.0, deadline - time.monotonic()))
                )
                return
            except KafkaException as exc:
                last = str(exc.args[0].str()) if exc.args else str(exc)
            if time.monotonic() >= deadline:
                raise CatalogUnavailable(
                    f"cannot reach Kafka at {bootstrap} ({variable}) within {wait:.0f}s: {last}"
                )
            time.sleep(0.2)  # a failure that returns at once (a bad address) must not spin
    finally:
        consumer.close()


def check_registry(
    url: str, *, wait: float = CONNECT_WAIT_S, variable: str = "SCHEMA_REGISTRY_URL"
) -> None:
    """GET ``url/subjects`` until anything answers (any HTTP status) or ``wait`` passes.

    Raises:
        CatalogUnavailable: nothing answered HTTP at ``url`` within ``wait`` seconds.
    """
    deadline = time.monotonic() + wait
    target = url.rstrip("/") + "/subjects"
    while True:
        try:
            with urllib.request.urlopen(target, timeout=max(0.5, min(5.0, wait))):
                return
        except urllib.error.HTTPError:  # it answered: auth and the rest are the source's
            return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise CatalogUnavailable(
                f"cannot reach the schema registry at {redact(url)} ({variable}) within "
                f"{wait:.0f}s: {redact(last)}"
            )
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
