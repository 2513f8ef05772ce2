"""A Confluent Schema Registry stand-in serving DataHub's own Avro schemas, and Avro framing.

DataHub Actions' Kafka source decodes every message with confluent-kafka's
``AvroDeserializer``, which reads the schema id from the message's first five bytes (magic
byte 0, then the id, big-endian) and asks the registry for that schema. With confluent-kafka
2.16 it calls two endpoints: ``GET /associations/resources/<cluster>/<topic>`` (a 404 is
tolerated) and ``GET /schemas/ids/<id>?subject=<topic>-value``. This stand-in answers those,
plus the subject paths a Confluent serializer uses (``/subjects``, ``.../versions``, lookup
and register), over the schemas the installed acryl-datahub ships in
``datahub/metadata/schemas/``: what GMS itself writes to the topics, not a copy of it.

It is a :class:`~testing.fakes.http.FakeServer`, so a test can read what was asked
(``registry.requests``) and script an outage (``registry.fail(...)``).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import fastavro
from fastavro.types import Schema

from testing.fakes.http import FakeServer, Request, Response

PLATFORM_EVENT_ID = 1
"""The registry id of ``PlatformEvent.avsc`` (the ``PlatformEvent_v1`` topic's values)."""
METADATA_CHANGE_LOG_ID = 2
"""The registry id of ``MetadataChangeLog.avsc`` (both ``MetadataChangeLog_*_v1`` topics)."""

SCHEMA_FILES = {
    PLATFORM_EVENT_ID: "PlatformEvent.avsc",
    METADATA_CHANGE_LOG_ID: "MetadataChangeLog.avsc",
}

MAGIC_BYTE = b"\x00"


@cache
def schema_text(schema_id: int) -> str:
    """The ``.avsc`` JSON for ``schema_id``, as acryl-datahub ships it."""
    folder = resources.files("datahub.metadata").joinpath("schemas")
    return folder.joinpath(SCHEMA_FILES[schema_id]).read_text(encoding="utf-8")


@cache
def parsed_schema(schema_id: int) -> Schema:
    """``schema_id``'s schema, parsed once for fastavro."""
    return fastavro.parse_schema(json.loads(schema_text(schema_id)))


def frame(schema_id: int, record: Mapping[str, Any]) -> bytes:
    """``record`` in Confluent's wire format: magic byte, 4-byte schema id, Avro binary body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed_schema(schema_id), dict(record))
    return MAGIC_BYTE + schema_id.to_bytes(4, "big") + body.getvalue()


def _canonical(schema: str) -> str:
    """A schema compared by content, not by its whitespace (a lookup posts it re-serialized)."""
    return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))


class SchemaRegistry(FakeServer):
    """The registry's REST paths over DataHub's schemas.

    ``subjects`` maps a subject (``<topic>-value``) to a schema id; :meth:`add_topics` adds
    the three DataHub topics under whatever names a test gave them. A schema a client
    registers that is not one of DataHub's gets the next id, as a real registry would.
    """

    def __init__(self) -> None:
        super().__init__()
        self.schemas: dict[int, str] = {i: schema_text(i) for i in SCHEMA_FILES}
        self.subjects: dict[str, int] = {}
        self.route("GET", r"/schemas/ids/(\d+)", self._schema_by_id)
        self.route("GET", r"/schemas/ids/(\d+)/schema", self._raw_schema_by_id)
        self.route("GET", r"/subjects", self._subject_list)
        self.route("GET", r"/subjects/([^/]+)/versions", self._versions)
        self.route("GET", r"/subjects/([^/]+)/versions/(latest|1)", self._version)
        self.route("POST", r"/subjects/([^/]+)", self._lookup)
        self.route("POST", r"/subjects/([^/]+)/versions", self._register)
        # confluent-kafka >= 2.13 asks which schema a topic is associated with first; a
        # registry without associations (every OSS one) answers 404, which it tolerates.
        self.route("GET", r"/associations/.*", self._no_associations)

    def add_topics(self, platform_event: str, *mcl_topics: str) -> None:
        """Register the value subjects of a PlatformEvent topic and of MCL topics."""
        with self._lock:
            self.subjects[f"{platform_event}-value"] = PLATFORM_EVENT_ID
            for topic in mcl_topics:
                self.subjects[f"{topic}-value"] = METADATA_CHANGE_LOG_ID

    # --- handlers

    @staticmethod
    def _error(status: int, code: int, message: str) -> Response:
        return Response(
            status,
            {"error_code": code, "message": message},
            content_type="application/vnd.schemaregistry.v1+json",
        )

    @staticmethod
    def _ok(body: Any) -> Response:
        return Response(200, body, content_type="application/vnd.schemaregistry.v1+json")

    def _schema_by_id(self, request: Request, match: re.Match[str]) -> Response:
        schema = self.schemas.get(int(match[1]))
        if schema is None:
            return self._error(404, 40403, "Schema not found")
        return self._ok({"schema": schema})

    def _raw_schema_by_id(self, request: Request, match: re.Match[str]) -> Response:
        schema = self.schemas.get(int(match[1]))
        if schema is None:
            return self._error(404, 40403, "Schema not found")
        return self._ok(json.loads(schema))

    def _subject_list(self, request: Request, match: re.Match[str]) -> Response:
        with self._lock:
            return self._ok(sorted(self.subjects))

    def _versions(self, request: Request, match: re.Match[str]) -> Response:
        if match[1] not in self.subjects:
            return self._error(404, 40401, f"Subject '{match[1]}' not found.")
        return self._ok([1])

    def _version(self, request: Request, match: re.Match[str]) -> Response:
        schema_id = self.subjects.get(match[1])
        if schema_id is None:
            return self._error(404, 40401, f"Subject '{match[1]}' not found.")
        return self._ok(
            {"subject": match[1], "version": 1, "id": schema_id, "schema": self.schemas[schema_id]}
        )

    def _lookup(self, request: Request, match: re.Match[str]) -> Response:
        schema_id = self.subjects.get(match[1])
        if schema_id is None:
            return self._error(404, 40401, f"Subject '{match[1]}' not found.")
        posted = request.json().get("schema", "")
        if _canonical(posted) != _canonical(self.schemas[schema_id]):
            return self._error(404, 40403, "Schema not found")
        return self._ok(
            {"subject": match[1], "version": 1, "id": schema_id, "schema": self.schemas[schema_id]}
        )

    def _register(self, request: Request, match: re.Match[str]) -> Response:
        posted = _canonical(request.json().get("schema", ""))
        with self._lock:
            known = [i for i, text in self.schemas.items() if _canonical(text) == posted]
            schema_id = known[0] if known else max(self.schemas) + 1
            self.schemas[schema_id] = self.schemas.get(schema_id, posted)
            self.subjects[match[1]] = schema_id
        return self._ok({"id": schema_id})

    def _no_associations(self, request: Request, match: re.Match[str]) -> Response:
        return self._error(404, 40401, "Association not found")
