"""The HTTP side of the DataHub backend: acryl-datahub's ``DataHubGraph``, with failures mapped.

Every call goes through the SDK's session (its auth header, retries on 429/5xx with backoff,
timeouts), and every call has a total deadline (:mod:`.deadline`): connect, send, the complete
answer, every retry and every wait between them end within :attr:`GmsClient.budget`, however
slowly the server sends its bytes, and by the scan's own bound (:attr:`GmsClient.until`) when
one is set. What fails is translated at this one boundary into mlcopilot's errors, with one
line that names the endpoint and the operation and never the token:

- unreachable, refused, DNS, timeout, 5xx/429 after the retries → :class:`CatalogUnavailable`
- 401/403 → :class:`CatalogError` saying the token was refused
- other HTTP errors, GraphQL errors, malformed JSON → :class:`CatalogError`

The constructor does no I/O. Each worker thread gets its own ``DataHubGraph`` (the SDK does
not promise its session is thread-safe); all are closed by :meth:`GmsClient.close`.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import msgspec
import requests
import urllib3
from datahub.configuration.common import ConfigurationError, GraphError, OperationalError
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.graph.client import DataHubGraph
from datahub.metadata.schema_classes import MetadataChangeProposalClass
from datahub.utilities.server_config_util import RestServiceConfig

from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.datahub.deadline import DeadlinePassed, bound_session, within
from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.text.wording import count

log = logging.getLogger(__name__)

Json = dict[str, Any]

DOCUMENTS_SINCE = (1, 4, 0)
"""The first DataHub Core release with the Document entity (mcp-server gates on the same)."""
DOCUMENTS_SINCE_CLOUD = (0, 3, 16)

_TOKEN_HINT = (
    "set DATAHUB_GMS_TOKEN to a personal access token of a user who may read metadata "
    "(and, for the write-back, edit tags, structured properties and incidents)"
)


def refused_token(url: str, status: int, operation: str) -> CatalogError:
    """The one line for a token GMS refused (401/403), whichever backend met it."""
    return CatalogError(
        f"DataHub at {url} refused the token ({status}) on {operation}: {_TOKEN_HINT}"
    )


_DECODE = msgspec.json.Decoder().decode


def loads(data: bytes | str) -> Any:
    """``data`` decoded as :func:`json.loads` decodes it, in C (msgspec) where it can be.

    A scan reads tens of megabytes of JSON from GMS, and GraphQL's ``RawAspect.payload`` puts
    every aspect in it as a JSON string inside the JSON answer: both decodings were the
    standard library's, the largest part of a large walk's own time (issue 27). msgspec refuses
    what the standard library accepts beyond JSON (``NaN``, ``Infinity``, a number past a
    float's range, a lone surrogate): that text is decoded by :func:`json.loads`, so the value
    is the same whichever decoded it, and malformed text raises its ``ValueError``.
    """
    try:
        return _DECODE(data)
    except msgspec.MsgspecError:
        return json.loads(data)


_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class GmsClient:
    """DataHub GMS over acryl-datahub's ``DataHubGraph``: GraphQL, OpenAPI, /config, emit.

    Args:
        settings: Server and credentials.
        timeout: Seconds each socket operation may wait (a connect, a read).
        retries: How often the SDK retries a 429/5xx/connection failure (with backoff) before
            the call fails.
        pool_size: Connections kept per worker thread.

    Every call ends within :attr:`budget`, ``(retries + 1) * timeout`` seconds: its
    attempts and the waits between them together (a wait that would end past it is not
    waited), and a server that sends its answer a byte at a time is cut off.
    """

    def __init__(
        self, settings: DataHubSettings, *, timeout: float, retries: int, pool_size: int = 4
    ) -> None:
        self.settings = settings
        self.timeout = timeout
        self.retries = retries
        self._pool_size = pool_size
        self._local = threading.local()
        self._graphs: list[DataHubGraph] = []
        self._lock = threading.Lock()
        self._config: RestServiceConfig | None = None
        self.until: float | None = None
        """A ``time.monotonic()`` no call may outlast (a scan's bound on its walk); None: none."""

    @property
    def budget(self) -> float:
        """Seconds one call may take in all, retries and their waits included."""
        return self.timeout * (self.retries + 1)

    @property
    def url(self) -> str:
        """The server URL as it may be shown."""
        return self.settings.display_url

    # --- calls ---------------------------------------------------------------------------

    def server_config(self) -> RestServiceConfig:
        """GMS's ``/config`` (fetched once): the server version and flavour."""
        if self._config is None:
            raw = self._request("GET", "/config", operation="GET /config")
            if not isinstance(raw, dict) or raw.get("noCode") != "true":
                raise CatalogError(
                    f"{self.url} is not DataHub GMS: /config does not say noCode=true "
                    "(is this the frontend? GMS is usually on port 8080, or <frontend>/api/gms)"
                )
            self._config = RestServiceConfig(raw_config=raw)
        return self._config

    def version(self) -> str | None:
        """The server's version string, e.g. ``v1.5.0``; None when /config does not say."""
        return self.server_config().service_version

    def supports_documents(self) -> bool:
        """True when the server has the Document entity (Core ≥ 1.4, Cloud ≥ 0.3.16)."""
        config = self.server_config()
        try:
            since = DOCUMENTS_SINCE_CLOUD if config.is_datahub_cloud else DOCUMENTS_SINCE
            return config.is_version_at_least(*since)
        except ValueError:  # an unparsable version string: assume nothing
            return False

    def graphql(self, operation: str, query: str, variables: Mapping[str, Any]) -> Json:
        """The ``data`` of one GraphQL operation; errors in the response raise CatalogError.

        Posted as the SDK's ``execute_graphql`` posts it (its session: auth, retries, this
        call's deadline; its URL), but decoded by :func:`loads`, and the query sent as written:
        ``execute_graphql`` parses and reprints every query to minify it, and formats the
        variables into a debug line whether or not it is logged.
        """
        body: dict[str, Any] = {"query": query, "operationName": operation}
        if variables:
            body["variables"] = dict(variables)
        with self._errors(f"GraphQL {operation}"):
            graph = self._graph()
            response = graph.session.post(
                f"{graph._gms_server}/api/graphql", data=json.dumps(body), headers=_JSON_HEADERS
            )
            response.raise_for_status()
            result = loads(response.content)
            if not isinstance(result, dict):
                raise CatalogError(
                    f"DataHub at {self.url} answered GraphQL {operation} with "
                    f"{type(result).__name__}, not an object"
                )
            if result.get("errors"):
                raise GraphError(result["errors"])  # as execute_graphql(format_exception=False)
            data = result["data"]
        if not isinstance(data, dict):
            raise CatalogError(f"DataHub at {self.url} answered GraphQL {operation} with no data")
        return data

    def batch_get(
        self, entity_type: str, items: Sequence[Json], *, system_metadata: bool = False
    ) -> list[Json]:
        """OpenAPI v3 ``batchGet`` of ``entity_type``: one envelope per entity found.

        An entity type GMS does not know answers 404/400 and yields no entities.
        """
        path = f"/openapi/v3/entity/{urllib.parse.quote(entity_type.lower())}/batchGet"
        params = {"systemMetadata": "true" if system_metadata else "false"}
        body = self._request(
            "POST",
            path,
            operation=f"OpenAPI batchGet {entity_type}",
            params=params,
            json_body=list(items),
            missing_ok=True,
        )
        if body is None:
            return []
        if not isinstance(body, list):
            raise CatalogError(
                f"DataHub at {self.url} answered OpenAPI batchGet {entity_type} with "
                f"{type(body).__name__}, not a list"
            )
        return [entity for entity in body if isinstance(entity, dict)]

    def incoming(
        self, urn: str, types: Sequence[str], *, start: int = 0, count: int = 1000
    ) -> Json:
        """One page of ``urn``'s incoming relationships of ``types`` (OpenAPI v1).

        Answers for any urn the graph index has edges to, existing or not: GraphQL's
        ``entities`` answers null for an urn with no aspects, so the reverse walk asks here
        for those. ``{start, count, total, entities: [{urn, relationshipType}]}``.
        """
        params = {
            "urn": urn,
            "direction": "INCOMING",
            "relationshipTypes": ",".join(types),
            "start": str(start),
            "count": str(count),
        }
        body = self._request(
            "GET",
            "/openapi/relationships/v1/",
            operation="OpenAPI relationships",
            params=params,
            missing_ok=True,
        )
        return body if isinstance(body, dict) else {}

    def timeseries(
        self,
        urn: str,
        aspect: str,
        *,
        limit: int,
        oldest_first: bool = False,
        start: int | None = None,
        end: int | None = None,
    ) -> list[Json]:
        """Events of a timeseries aspect of ``urn`` (Rest.li ``getTimeseriesAspectValues``).

        Newest ``timestampMillis`` first, or oldest first: the action's ``sort``, which
        GraphQL's timeseries fields do not offer. At most ``limit`` events, within
        ``[start, end]`` (epoch ms) when given. Each event is the aspect's JSON.
        """
        body: dict[str, Any] = {
            "urn": urn,
            "entity": urn.split(":", 3)[2],
            "aspect": aspect,
            "limit": limit,
        }
        if start is not None:
            body["startTimeMillis"] = start
        if end is not None:
            body["endTimeMillis"] = end
        if oldest_first:
            body["sort"] = {"field": "timestampMillis", "order": "ASCENDING"}
        answer = self._request(
            "POST",
            "/aspects",
            operation=f"timeseries {aspect}",
            params={"action": "getTimeseriesAspectValues"},
            json_body=body,
        )
        values = (
            ((answer or {}).get("value") or {}).get("values") if isinstance(answer, dict) else None
        )
        events: list[Json] = []
        for value in values if isinstance(values, list) else []:
            raw = (value.get("aspect") or {}).get("value") if isinstance(value, dict) else None
            try:
                event = loads(raw) if isinstance(raw, str) else None
            except ValueError:
                event = None
            if isinstance(event, dict):
                events.append(event)
        return events

    def emit(
        self, mcps: Sequence[MetadataChangeProposalWrapper | MetadataChangeProposalClass]
    ) -> None:
        """Write ``mcps`` (UPSERTs and PATCHes) in as few requests as the payload limits allow."""
        if mcps:
            with self._errors(f"write of {len(mcps)} aspect(s)"):
                self._graph().emit_mcps(list(mcps))

    def close(self) -> None:
        """Close every worker's session."""
        with self._lock:
            graphs, self._graphs = self._graphs, []
        for graph in graphs:
            graph.close()
        self._local = threading.local()

    # --- plumbing ------------------------------------------------------------------------

    def _graph(self) -> DataHubGraph:
        graph: DataHubGraph | None = getattr(self._local, "graph", None)
        if graph is None:
            config = self.settings.client_config(
                timeout_sec=self.timeout,
                retry_max_times=self.retries,
                pool_maxsize=self._pool_size,
                # One batch endpoint for every write, whatever the server version says.
                openapi_ingestion=False,
            )
            graph = DataHubGraph(config)
            bound_session(graph.session)  # every call within its deadline (see .deadline)
            self._local.graph = graph
            with self._lock:
                self._graphs.append(graph)
        return graph

    def _request(
        self,
        method: str,
        path: str,
        *,
        operation: str,
        params: Mapping[str, str] | None = None,
        json_body: object = None,
        missing_ok: bool = False,
    ) -> Any:
        session = self._graph().session
        url = f"{self.settings.server}{path}"
        with self._errors(operation):
            response = session.request(
                method,
                url,
                params=params,
                data=None if json_body is None else json.dumps(json_body),
                headers=_JSON_HEADERS,
            )
            if missing_ok and response.status_code in (400, 404):
                return None
            response.raise_for_status()
            return loads(response.content)

    @contextmanager
    def _errors(self, operation: str) -> Iterator[None]:
        """One call to GMS: within its deadline, its failures mapped to mlcopilot's errors."""
        until = self.until
        if until is not None and time.monotonic() >= until:
            raise CatalogUnavailable(
                f"DataHub at {self.url}: {operation} not made: past {_PAST_BOUND}"
            )
        with within(self.budget, until=until) as deadline:
            try:
                yield
            except CatalogError:
                raise
            except (
                requests.RequestException,
                OperationalError,
                GraphError,
                ConfigurationError,
                ValueError,
                KeyError,
                OSError,
            ) as exc:
                timed_out = time.monotonic() >= deadline or any(
                    isinstance(item, DeadlinePassed) for item in _chain(exc)
                )
                if timed_out:
                    self._timed_out(exc, operation, bound=until is not None and until <= deadline)
                self._raise_for(exc, operation)

    def _timed_out(self, exc: Exception, operation: str, *, bound: bool) -> NoReturn:
        """The call reached its deadline (or the scan's bound, when that came first)."""
        where = f"cannot reach DataHub at {self.url} ({operation})"
        budget = f"{self.budget:g} s" + (
            f", {count(self.retries, 'retry')} included" if self.retries else ""
        )
        passed = next((i for i in _chain(exc) if isinstance(i, DeadlinePassed)), None)
        if passed is not None and passed.wait is not None:
            answer = f"HTTP {passed.status}" if passed.status is not None else "a failure"
            why = f"{answer}, and the next retry ({passed.wait:g} s later) would be past " + (
                _PAST_BOUND if bound else f"the call's deadline ({budget})"
            )
        elif bound:
            why = f"no complete answer before {_PAST_BOUND}"
        else:
            why = f"no complete answer within {budget} (timed out)"
        raise CatalogUnavailable(f"{where}: {why}") from exc

    def _raise_for(self, exc: Exception, operation: str) -> NoReturn:
        where = f"DataHub at {self.url}"
        status = _status(exc)
        if status in (401, 403):
            raise refused_token(self.url, status, operation) from exc
        if status is not None and (status >= 500 or status == 429):
            raise CatalogUnavailable(
                f"{where} failed with HTTP {status} on {operation} (after {self.retries} retries)"
            ) from exc
        if status is not None:
            raise CatalogError(f"{where} answered HTTP {status} on {operation}") from exc
        if isinstance(exc, GraphError):
            raise CatalogError(
                f"{where}: {operation} failed: {self._scrub(_graph_error(exc))}"
            ) from exc
        reason = _connection_failure(exc, self.timeout)
        if reason is not None:
            raise CatalogUnavailable(f"cannot reach {where} ({operation}): {reason}") from exc
        raise CatalogError(
            f"{where} answered {operation} with malformed data: {self._scrub(_first_line(exc))}"
        ) from exc

    def _scrub(self, text: str) -> str:
        token = self.settings.token
        return text.replace(token, "***") if token else text


def gave_way(exc: BaseException) -> str | None:
    """Why a call ended that a lighter request may still get through, else None.

    GMS's rate limit (HTTP 429, its ``Retry-After`` too long to wait), a time limit of its
    own (504, e.g. a lineage walk past ``graph.timeoutSeconds`` behind a proxy) or no
    complete answer in time: the server is up but this request was too heavy or too many.
    None for anything else: unreachable, refused, a broken server (other 5xx), a bad token.
    """
    status = _status(exc)
    if status in (429, 504):
        return f"HTTP {status}"
    chain = list(_chain(exc))
    passed = next((i for i in chain if isinstance(i, DeadlinePassed)), None)
    if passed is not None and passed.status in (429, 504):
        return f"HTTP {passed.status}"
    if status is None and any(
        isinstance(i, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError, DeadlinePassed))
        for i in chain
    ):
        return "no complete answer in time"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or while handling, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind ``exc`` (the SDK wraps HTTPError in OperationalError)."""
    for item in _chain(exc):
        if isinstance(item, requests.HTTPError) and item.response is not None:
            status = item.response.status_code
            if status >= 400:
                return status
    return None


_PAST_BOUND = "the scan's time bound on its walk ([datahub] walk_timeout)"

_UNREACHABLE: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    # Most specific first: urllib3's NameResolutionError is a NewConnectionError, which is a
    # ConnectTimeoutError, so the causes of a failed connect come before any timeout.
    ((urllib3.exceptions.NameResolutionError, socket.gaierror), "host name not found"),
    ((ConnectionRefusedError,), "connection refused"),
    (
        (requests.exceptions.SSLError, urllib3.exceptions.SSLError, ssl.SSLError),
        "TLS handshake failed",
    ),
    (
        (requests.Timeout, urllib3.exceptions.ReadTimeoutError, TimeoutError),
        "no answer within {timeout:g}s",
    ),
    (
        (
            ConnectionResetError,
            ConnectionAbortedError,
            urllib3.exceptions.ProtocolError,
            http.client.RemoteDisconnected,
        ),
        "connection dropped",
    ),
    ((requests.ConnectionError, urllib3.exceptions.NewConnectionError), "connection failed"),
)
"""Why a server could not be reached, by the exception types behind the failure (as httpx's
``map_httpcore_exceptions``): the first row any exception in the chain is an instance of."""


def _connection_failure(exc: BaseException, timeout: float) -> str | None:
    """A short reason when ``exc`` means the server could not be reached; else None."""
    chain = list(_chain(exc))
    for types, reason in _UNREACHABLE:
        if any(isinstance(item, types) for item in chain):
            return reason.format(timeout=timeout)
    return None


def _graph_error(exc: GraphError) -> str:
    """The messages of a GraphQL error response, joined; at most 300 characters."""
    errors = exc.args[0] if exc.args else exc
    messages: list[str] = []
    if isinstance(errors, list):
        messages = [str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors]
    text = "; ".join(messages) or _first_line(exc)
    return text if len(text) <= 300 else text[:297] + "..."


def _first_line(exc: BaseException) -> str:
    text = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text if len(text) <= 300 else text[:297] + "..."
