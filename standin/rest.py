"""GMS's REST surface: ``/config``, Rest.li ``/aspects`` and ``/entitiesV2``, OpenAPI v3 entity
reads and writes, timeseries values, relationships and the Timeline API. ``/api/graphql`` is
routed to :mod:`standin.gql`.

Response shapes follow what acryl-datahub 1.7 and mcp-server-datahub 0.8 parse (see
``datahub/ingestion/graph/client.py``, ``openapi.py`` and ``mcp_server_datahub/openapi_client.py``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from datahub.emitter.aspect import ASPECT_MAP, TIMESERIES_ASPECT_MAP
from datahub.emitter.serialization_helper import post_json_transform
from datahub.metadata.urns import Urn

from standin import gql, timeline
from standin.backend import Backend
from standin.catalog import key_aspect_name, key_of
from standin.edges import entity_type
from standin.incident_support import InvalidIncident, check_incident
from standin.patch import apply_patch
from standin.store import AspectRow

Json = dict[str, Any]
ACTOR = "urn:li:corpuser:datahub"


@dataclass
class Request:
    method: str
    path: str  # without the query string, still percent-encoded
    query: dict[str, list[str]]
    body: bytes
    headers: Mapping[str, str]

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int
    body: Any = None  # JSON-serialisable; None means an empty body
    headers: dict[str, str] = field(default_factory=dict)


class AlreadyExistsError(ValueError):
    """A CREATE / CREATE_ENTITY proposal for what is already stored."""


def not_found(message: str) -> Response:
    # Rest.li's error envelope; the SDK reads ``message`` when it raises.
    return Response(
        404,
        {
            "exceptionClass": "com.linkedin.restli.server.RestLiServiceException",
            "message": message,
            "status": 404,
        },
    )


def bad_request(message: str) -> Response:
    return Response(400, {"message": message, "status": 400})


def fqcn(aspect_name: str, urn: str) -> str | None:
    """``com.linkedin.schema.SchemaMetadata``: the key GMS wraps a Rest.li aspect in."""
    cls = ASPECT_MAP.get(aspect_name)
    if cls is None and aspect_name == key_aspect_name(urn):
        cls = type(Urn.from_string(urn).to_key_aspect())  # type: ignore[attr-defined]
    return cls.RECORD_SCHEMA.fullname.replace(".pegasus2avro", "") if cls else None


def system_metadata(row: AspectRow) -> Json:
    """Lite's system metadata plus ``version``, which GMS fills with the row's number
    (for v0, the logical newest version N)."""
    meta = dict(row.system_metadata)
    meta["version"] = str(row.latest_version if row.version == 0 else row.version)
    return meta


class Api:
    """Routes one request; ``config`` is the body served at ``/config``."""

    def __init__(self, backend: Backend, config: Json, errors: list[str]) -> None:
        self.backend = backend
        self.config = config
        self.errors = errors

    def dispatch(self, req: Request, op: gql.Operation | None, actor: str) -> Response:
        path, method = req.path, req.method
        if path in ("/config", "/config/") and method == "GET":
            return Response(200, self.config)
        if path == "/health" and method == "GET":
            return Response(200, {"status": "ok"})
        if path == "/api/graphql" and method == "POST" and op is not None:
            ctx = self.backend.catalog(actor)
            return Response(
                200, gql.run(self.backend.schema, ctx, req.json() or {}, op, self.errors)
            )
        if path == "/aspects" and method == "POST":
            return self._aspects_action(req)
        if path.startswith("/aspects/") and method == "GET":
            return self._get_aspect(unquote(path[len("/aspects/") :]), req)
        if path.startswith("/entitiesV2/") and method == "GET":
            return self._entities_v2(unquote(path[len("/entitiesV2/") :]), req)
        if path == "/entities" and method == "POST":
            return self._entities_action(req)
        if path.startswith("/openapi/v3/entity/"):
            return self._openapi_entity(req, path[len("/openapi/v3/entity/") :])
        for prefix in ("/openapi/v2/timeline/v1/", "/openapi/timeline/v1/"):
            if path.startswith(prefix) and method == "GET":
                return self._timeline(unquote(path[len(prefix) :]), req)
        if path.rstrip("/") == "/openapi/relationships/v1" and method == "GET":
            return self._relationships(req)
        return not_found(f"No resource for {method} {path}")

    # --- Rest.li reads ---------------------------------------------------------------------

    def _get_aspect(self, urn: str, req: Request) -> Response:
        name = req.param("aspect") or ""
        version = int(req.param("version") or 0)
        if name == key_aspect_name(urn):
            if not self.backend.index.exists(urn):
                return not_found(f"{urn} does not exist")
            return Response(200, {"version": 0, "aspect": {fqcn(name, urn): key_of(urn)}})
        row = self.backend.store.get(urn, name, version)
        key = fqcn(name, urn)
        if row is None or key is None:
            return not_found(f"Aspect {name} (version {version}) of {urn} not found")
        return Response(
            200,
            {
                "version": version,
                "aspect": {key: row.value},
                "systemMetadata": system_metadata(row),
            },
        )

    def _entities_v2(self, urn: str, req: Request) -> Response:
        wanted = None
        match = re.fullmatch(r"List\((.*)\)", req.param("aspects") or "")
        if match:
            wanted = [a for a in match.group(1).split(",") if a]
        aspects: Json = {}
        key_name = key_aspect_name(urn)
        if key_name and (wanted is None or key_name in wanted):
            aspects[key_name] = {
                "name": key_name,
                "type": "VERSIONED",
                "version": 0,
                "value": key_of(urn),
            }
        for name, row in self.backend.store.latest(urn, wanted).items():
            if name in TIMESERIES_ASPECT_MAP:
                continue
            aspects[name] = {
                "name": name,
                "type": "VERSIONED",
                "version": 0,
                "value": row.value,
                "created": {"time": row.created_on, "actor": ACTOR},
                "systemMetadata": system_metadata(row),
            }
        return Response(200, {"urn": urn, "entityName": entity_type(urn), "aspects": aspects})

    # --- Rest.li actions -------------------------------------------------------------------

    def _aspects_action(self, req: Request) -> Response:
        action = req.param("action")
        body = req.json() or {}
        try:
            if action == "ingestProposal":
                self._check_incidents([body["proposal"]])
                return Response(200, {"value": self._ingest_proposal(body["proposal"])})
            if action == "ingestProposalBatch":
                proposals = body["proposals"]
                self._check_incidents(proposals)  # GMS validates the batch, then writes it
                return Response(200, {"value": [self._ingest_proposal(p) for p in proposals]})
        except AlreadyExistsError as exc:  # GMS: a failed validation is 422, not 400
            return Response(422, {"message": f"Failed to validate: {exc}", "status": 422})
        except InvalidIncident as exc:  # ValidationException -> 422 (AspectResource)
            return Response(
                422,
                {
                    "exceptionClass": "com.linkedin.restli.server.RestLiServiceException",
                    "message": str(exc),
                    "status": 422,
                },
            )
        if action == "getTimeseriesAspectValues":
            return Response(200, {"value": self._timeseries(body)})
        return bad_request(f"Unsupported action {action}")

    def _check_incidents(self, proposals: list[Json]) -> None:
        """Refuse an ``incidentInfo`` naming an entity type ``IncidentOn`` does not allow."""
        for proposal in proposals:
            if proposal.get("aspectName") != "incidentInfo" or proposal.get("changeType") in (
                "PATCH",
                "DELETE",
            ):
                continue  # a patch is checked once applied (_write_patched)
            raw = (proposal.get("aspect") or {}).get("value")
            value = json.loads(raw) if isinstance(raw, str) else raw
            if isinstance(value, dict):
                check_incident(value.get("entities"), self.backend.incident_types)

    def _ingest_proposal(self, proposal: Json) -> str:
        urn = str(proposal["entityUrn"])
        change = proposal.get("changeType", "UPSERT")
        name = str(proposal.get("aspectName") or "")
        if change == "DELETE":
            self.backend.delete(urn, None if name in ("", key_aspect_name(urn)) else name)
            return urn
        if change == "PATCH":
            operations = json.loads((proposal.get("aspect") or {}).get("value") or "[]")
            self._patch(urn, name, operations, proposal.get("systemMetadata"))
            return urn
        if change in ("CREATE", "CREATE_ENTITY"):
            self._check_creatable(urn, name, change)
            proposal = {**proposal, "changeType": "UPSERT"}
        self.backend.write([proposal])
        return urn

    def _check_creatable(self, urn: str, name: str, change: str) -> None:
        """GMS's ``CreateIfNotExistsValidator``: CREATE needs the aspect, CREATE_ENTITY the
        entity, not to exist yet."""
        if change == "CREATE_ENTITY" and self.backend.index.exists(urn):
            raise AlreadyExistsError(
                f"Cannot perform CREATE_ENTITY on {urn}: the entity key already exists"
            )
        if change == "CREATE" and self.backend.store.get(urn, name, 0) is not None:
            raise AlreadyExistsError(f"Cannot perform CREATE on {name} of {urn}: it already exists")

    def _patch(self, urn: str, name: str, operations: Any, meta: Json | None) -> None:
        array_keys = None
        force = False
        if isinstance(operations, dict):  # GenericJsonPatch: {"patch": [...], "arrayPrimaryKeys"}
            array_keys = operations.get("arrayPrimaryKeys")
            force = operations.get("forceGenericPatch") is True
            operations = operations.get("patch", [])
        if not isinstance(operations, list):
            raise ValueError(f"Invalid JSON Patch for {name} of {urn}: not a list of operations")
        with self.backend.store.atomic():
            current = self.backend.store.get(urn, name, 0)
            value = apply_patch(
                name,
                current.value if current else None,
                operations,
                array_keys,
                force_generic=force,
            )
            self._write_patched(urn, name, value, meta)

    def _write_patched(self, urn: str, name: str, value: Json, meta: Json | None) -> None:
        # GMS turns the patched JSON into the aspect's record and validates it before writing.
        cls = ASPECT_MAP.get(name)
        try:
            valid = cls is not None and cls.from_obj(post_json_transform(copy.deepcopy(value)))
        except Exception as exc:  # the SDK raises Avro's own errors for a misfit
            raise ValueError(
                f"Patched {name} of {urn} does not fit DataHub's schema: {exc}"
            ) from exc
        if not valid or not valid.validate():
            raise ValueError(f"Patched {name} of {urn} does not fit DataHub's schema: {value}")
        if name == "incidentInfo":
            check_incident(value.get("entities"), self.backend.incident_types)
        record: Json = {
            "entityType": entity_type(urn),
            "entityUrn": urn,
            "changeType": "UPSERT",
            "aspectName": name,
            "aspect": {"json": value},
        }
        if meta:
            record["systemMetadata"] = meta
        self.backend.write([record])

    def _timeseries(self, body: Json) -> Json:
        urn, name = body["urn"], body["aspect"]
        rows = self.backend.store.history(urn, name)
        values = [r for r in rows if _timeseries_match(r.value, body)]
        # GMS sorts by timestampMillis, newest first, unless ``sort`` says otherwise
        # (``AspectResource.getTimeseriesAspectValues``'s SortCriterion).
        sort: Json = body["sort"] if isinstance(body.get("sort"), dict) else {}
        field = str(sort.get("field") or "timestampMillis")
        values.sort(
            key=lambda r: r.value.get(field, 0),
            reverse=str(sort.get("order") or "DESCENDING").upper() != "ASCENDING",
        )
        limit = body.get("limit", 10_000)  # the action's default
        values = values[: int(limit)] if limit is not None else values
        return {
            "entityName": body.get("entity") or entity_type(urn),
            "aspectName": name,
            "limit": limit,
            "values": [
                {
                    "aspect": {"value": json.dumps(r.value), "contentType": "application/json"},
                    "systemMetadata": r.system_metadata,
                }
                for r in values
            ],
        }

    def _entities_action(self, req: Request) -> Response:
        action = req.param("action")
        body = req.json() or {}
        if action == "delete":
            self.backend.delete(body["urn"])
            return Response(200, {"value": {"rows": 1}})
        if action == "ingest":
            self.backend.write([{"proposedSnapshot": body["entity"]["value"]}])
            return Response(200, {})
        return bad_request(f"Unsupported action {action}")

    # --- OpenAPI v3 ------------------------------------------------------------------------

    def _openapi_entity(self, req: Request, rest: str) -> Response:
        entity_name, _, tail = rest.partition("/")
        if tail == "batchGet" and req.method == "POST":
            return self._batch_get(entity_name, req)
        if not tail and req.method in ("POST", "PATCH"):
            return self._openapi_write(entity_name, req)
        urn, aspect = _split_urn_aspect(unquote(tail))
        if not urn:
            return not_found(f"No resource for {req.method} {req.path}")
        if req.method == "DELETE":
            self.backend.delete(urn, aspect)
            return Response(200, None)
        if req.method in ("GET", "HEAD") and aspect:
            version = int(req.param("version") or 0)
            row = self.backend.store.get(urn, aspect, version)
            if row is None:
                return Response(404, None if req.method == "HEAD" else {"message": "Not found"})
            if req.method == "HEAD":
                return Response(204, None)
            return Response(200, self._envelope(row, req.param("systemMetadata") == "true"))
        if req.method == "GET":
            if not self.backend.index.exists(urn):
                return not_found(f"{urn} does not exist")
            meta = req.param("systemMetadata") == "true"
            wanted = req.query.get("aspects") or None
            entity: Json = {"urn": urn}
            for name, row in self.backend.store.latest(urn, wanted).items():
                entity[name] = self._envelope(row, meta)
            return Response(200, entity)
        return not_found(f"No resource for {req.method} {req.path}")

    def _openapi_write(self, entity_name: str, req: Request) -> Response:
        try:
            return self._openapi_write_items(entity_name, req)
        except InvalidIncident as exc:  # GlobalControllerExceptionHandler: ValidationException
            return Response(400, {"error": "Validation Error", "message": str(exc)})

    def _openapi_write_items(self, entity_name: str, req: Request) -> Response:
        items = req.json() or []
        if req.method == "POST":
            for item in items:
                envelope = item.get("incidentInfo")
                if isinstance(envelope, dict) and isinstance(envelope.get("value"), dict):
                    check_incident(envelope["value"].get("entities"), self.backend.incident_types)
        records: list[Json] = []
        for item in items:
            urn = item["urn"]
            for name, envelope in item.items():
                if name == "urn" or not isinstance(envelope, dict):
                    continue
                if req.method == "PATCH":
                    self._patch(
                        urn, name, envelope.get("value") or {}, envelope.get("systemMetadata")
                    )
                    continue
                record: Json = {
                    "entityType": entity_name,
                    "entityUrn": urn,
                    "changeType": "UPSERT",
                    "aspectName": name,
                    "aspect": {"json": envelope.get("value")},
                }
                if envelope.get("systemMetadata"):
                    record["systemMetadata"] = envelope["systemMetadata"]
                records.append(record)
        self.backend.write(records)
        status = 202 if req.param("async") == "true" else 200
        return Response(status, [_echo(item) for item in items])

    def _envelope(self, row: AspectRow, with_meta: bool) -> Json:
        envelope: Json = {"value": row.value}
        if with_meta:
            envelope["systemMetadata"] = system_metadata(row)
            envelope["auditStamp"] = {"time": row.created_on, "actor": ACTOR}
        return envelope

    def _batch_get(self, entity_name: str, req: Request) -> Response:
        with_meta = req.param("systemMetadata") == "true"
        out = []
        for item in req.json() or []:
            urn = item.get("urn")
            if not urn or not self.backend.index.exists(urn):
                continue
            requested = {k: v for k, v in item.items() if k != "urn"}
            entity: Json = {"urn": urn}
            if not requested:
                for name, row in self.backend.store.latest(urn).items():
                    entity[name] = self._envelope(row, with_meta)
            for name, options in requested.items():
                headers = (options or {}).get("headers") or {}
                version = int(headers.get("If-Version-Match") or 0)
                found = self.backend.store.get(urn, name, version)
                if found is not None:
                    entity[name] = self._envelope(found, with_meta)
            out.append(entity)
        return Response(200, out)

    # --- relationships and timeline --------------------------------------------------------

    def _relationships(self, req: Request) -> Response:
        urn = req.param("urn") or ""
        outgoing = (req.param("direction") or "OUTGOING") == "OUTGOING"
        types = req.query.get("relationshipTypes") or []
        types = [t for value in types for t in value.split(",") if t]
        edges = self.backend.index.relationships(urn, types, outgoing=outgoing)
        start, count = int(req.param("start") or 0), int(req.param("count") or 100)
        page = edges[start : start + count]
        return Response(
            200,
            {
                "start": start,
                "count": len(page),
                "total": len(edges),
                "entities": [
                    {"urn": e.dst if outgoing else e.src, "relationshipType": e.rel} for e in page
                ],
            },
        )

    def _timeline(self, urn: str, req: Request) -> Response:
        categories = [
            c for value in req.query.get("categories") or [] for c in value.split(",") if c
        ]
        if not categories:
            return bad_request("At least one category is required")
        start = int(req.param("startTime") or -1)
        end = int(req.param("endTime") or 0)
        ctx = self.backend.catalog(ACTOR)
        return Response(
            200, timeline.transactions(ctx, urn, [c.upper() for c in categories], start, end)
        )


def _timeseries_match(value: Json, body: Json) -> bool:
    start, end = body.get("startTimeMillis"), body.get("endTimeMillis")
    ts = value.get("timestampMillis", 0)
    if (start is not None and ts < start) or (end is not None and ts > end):
        return False
    clauses = [c.get("and") or [] for c in (body.get("filter") or {}).get("or") or []]
    clauses += (
        [(body.get("filter") or {}).get("criteria") or []]
        if (body.get("filter") or {}).get("criteria")
        else []
    )
    if not clauses:
        return True
    for clause in clauses:
        ok = True
        for c in clause:
            wanted = c.get("values") or ([c["value"]] if c.get("value") is not None else [])
            have: Any = value
            for part in str(c.get("field", "")).split("."):
                have = have.get(part) if isinstance(have, dict) else None
            ok = ok and (str(have) in {str(w) for w in wanted}) != bool(c.get("negated"))
        if ok:
            return True
    return False


def _split_urn_aspect(tail: str) -> tuple[str | None, str | None]:
    """``<urn>`` or ``<urn>/<aspect>``; urns may themselves contain ``/``."""
    if not tail.startswith("urn:li:"):
        return None, None
    head, _, last = tail.rpartition("/")
    if head and last in ASPECT_MAP and head.count("(") == head.count(")"):
        return head, last
    return tail, None


def _echo(item: Json) -> Json:
    return {k: ({"value": v.get("value")} if isinstance(v, dict) else v) for k, v in item.items()}
