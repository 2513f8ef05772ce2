"""``StandIn``: a threaded HTTP server that answers like DataHub GMS, backed by DataHub Lite.

Each request is recorded; faults (latency, an HTTP status, a hang) can be injected per path
or per GraphQL operation. The server binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from standin import gql
from standin.backend import Backend
from standin.faults import Fault, Faults, RateLimit, RecordedRequest, Recorder
from standin.incident_support import incident_on
from standin.rest import Api, Request, Response
from standin.sdl import load_schema

DEFAULT_VERSION = "v1.5.0"
ACTOR = "urn:li:corpuser:datahub"
_PUBLIC_PATHS = {"/config", "/config/", "/health"}  # GMS's authentication.excludedPaths


class StandIn:
    """A DataHub GMS stand-in serving one Lite file. Use as a context manager."""

    def __init__(
        self,
        lite_path: Path,
        *,
        version: str = DEFAULT_VERSION,
        token: str | None = None,
        sdl: Path | None = None,
        durable: bool = True,
        ml_incidents: bool = False,
    ) -> None:
        self.lite_path = Path(lite_path)
        self.version = version
        self.token = token
        self.latency = 0.0
        self.errors: list[str] = []  # tracebacks of resolver failures GMS would hide
        self._sdl = sdl
        self._backend = Backend(self.lite_path, load_schema(sdl), durable=durable)
        self._faults = Faults()
        self._rate_limits: list[RateLimit] = []
        self._recorder = Recorder()
        self._commit = uuid.uuid4().hex  # keys the SDK's on-disk schema cache per instance
        self._api = Api(self._backend, self._config(), self.errors)
        self._ml_incidents = False
        self.ml_incidents = ml_incidents
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # --- construction --------------------------------------------------------------------

    @classmethod
    def from_mcps(
        cls,
        mcps: Iterable[Any],
        workdir: Path,
        *,
        version: str = DEFAULT_VERSION,
        token: str | None = None,
        ml_incidents: bool = False,
    ) -> StandIn:
        """Write ``mcps`` (MCPWs, MCEs or file-sink dicts) into a new Lite file in ``workdir``."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        n = 0
        while (workdir / f"standin-{n}.db").exists():
            n += 1
        server = cls(
            workdir / f"standin-{n}.db", version=version, token=token, ml_incidents=ml_incidents
        )
        server._backend.write(list(mcps), settled=True)  # indexed long before any request
        return server

    @classmethod
    def from_lite(
        cls,
        path: Path,
        *,
        version: str = DEFAULT_VERSION,
        token: str | None = None,
        durable: bool = True,
        ml_incidents: bool = False,
    ) -> StandIn:
        """Serve an existing Lite file; writes through the API land in it.

        ``durable=False`` skips the fsync of each write: for a copy that is thrown away.
        """
        if not Path(path).exists():
            raise FileNotFoundError(path)
        return cls(
            Path(path), version=version, token=token, durable=durable, ml_incidents=ml_incidents
        )

    def _config(self) -> dict[str, Any]:
        # No "baseUrl": clients take that to mean OSS rather than DataHub Cloud.
        return {
            "noCode": "true",
            "datahub": {"serverType": "prod", "serverEnv": "core"},
            "versions": {"acryldata/datahub": {"version": self.version, "commit": self._commit}},
            "managedIngestion": {"enabled": True, "defaultCliVersion": "1.7.0"},
            "statefulIngestionCapable": True,
            "supportsImpactAnalysis": True,
            "patchCapable": True,
            "retention": "true",
            "timeZone": "GMT",
            "telemetry": {"enabledCli": False, "enabledIngestion": False},
            "datasetUrnNameCasing": False,
            "models": {},
        }

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, listening: socket.socket | None = None) -> StandIn:
        """Serve on a free port of 127.0.0.1, or accept on ``listening``.

        ``listening`` is a socket already listening: each of several stand-in processes
        listens on one port with ``SO_REUSEPORT``, and the kernel hands each connection to
        one of them, as GMS serves on all its cores.
        """
        if self._httpd is not None:
            return self
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"standin": self})
        if listening is None:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        else:
            self._httpd = ThreadingHTTPServer(
                listening.getsockname(), handler, bind_and_activate=False
            )
            self._httpd.socket.close()
            self._httpd.socket = listening
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll interval
            name="datahub-standin",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (releasing hung requests); the Lite file stays open for reuse."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self._backend.close()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- what tests use ------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("The stand-in is not running; use it as a context manager")
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._recorder.snapshot()

    def clear_requests(self) -> None:
        self._recorder.clear()

    @property
    def handler_seconds(self) -> float:
        return sum(r.duration_s for r in self._recorder.snapshot())

    def inject(
        self,
        pattern: str,
        *,
        latency: float = 0,
        status: int | None = None,
        hang: bool = False,
        times: int | None = None,
        body: str | None = None,
        hook: Callable[[], None] | None = None,
    ) -> Fault:
        """Apply a fault to requests matching ``pattern`` (a glob over ``"METHOD /path"``, the
        path, the GraphQL operationName or a root field). ``times=None`` means always.
        ``hook`` runs before the matching request is answered (it may call the server)."""
        return self._faults.add(Fault(pattern, latency, status, hang, times, body, hook))

    def clear_faults(self) -> None:
        self._faults.clear()

    def rate_limit(
        self,
        capacity: float,
        *,
        refill_tokens: float | None = None,
        period_s: float = 60.0,
        resolver: str | None = None,
        min_retry_after_s: int = 60,
    ) -> RateLimit:
        """Turn on a GMS rate limit (:class:`~standin.faults.RateLimit`): a token bucket of
        ``capacity`` requests refilled by ``refill_tokens`` (default ``capacity``) every
        ``period_s``, for every request or only GraphQL requests of one top-level
        ``resolver`` (a heavy-resolver bucket). Off by default, as in GMS."""
        limit = RateLimit(
            capacity,
            capacity if refill_tokens is None else refill_tokens,
            period_s,
            resolver,
            min_retry_after_s,
        )
        self._rate_limits.append(limit)
        return limit

    def clear_rate_limits(self) -> None:
        self._rate_limits.clear()

    def now(self) -> float:
        """The stand-in's clock (epoch seconds): what its caches, search lag and rate limits
        measure time by."""
        return self._backend.now()

    def advance(self, seconds: float) -> None:
        """Move the stand-in's clock forward (its caches age, its search index catches up,
        its rate-limit buckets refill) without waiting."""
        self._backend.clock_offset_s += seconds

    @property
    def ml_incidents(self) -> bool:
        """Whether this is a DataHub with incidents on ML entities (PRs #19112 and #19367).

        False (the default, as the SDL's DataHub): ``incidentInfo`` naming an ML model, feature
        or feature table is refused and those types have no GraphQL ``incidents``. True: both
        as today's DataHub. Settable, to upgrade (or downgrade) the server between requests.
        """
        return self._ml_incidents

    @ml_incidents.setter
    def ml_incidents(self, on: bool) -> None:
        self._ml_incidents = on
        self._backend.schema = load_schema(self._sdl, ml_incidents=on)
        self._backend.incident_types = incident_on(on)
        self._commit = uuid.uuid4().hex  # another schema: the SDK must not reuse its cache
        self._api.config = self._config()

    def write(self, mcps: Iterable[Any], *, settled: bool = True) -> None:
        """Write metadata directly (as an ingestion would), bypassing HTTP.

        ``settled=True``: as an ingestion that finished long ago (searchable at once);
        ``False``: written just now, so the search index lags it as it lags API writes.
        """
        self._backend.write(list(mcps), settled=settled)

    @property
    def backend(self) -> Backend:
        return self._backend


class _Handler(BaseHTTPRequestHandler):
    standin: StandIn
    protocol_version = "HTTP/1.1"  # keep-alive, as GMS; every response sets Content-Length
    # Without TCP_NODELAY a keep-alive response waits out the client's delayed ACK (~40 ms a
    # request), which would dominate every request count and benchmark.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def _handle(self, method: str) -> None:
        server = self.standin
        started = time.perf_counter()
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        query = parse_qs(split.query, keep_blank_values=True)
        req = Request(method, split.path, query, body, dict(self.headers.items()))
        op = self._graphql_operation(req)
        keys = [f"{method} {req.path}", req.path]
        if op is not None:
            keys += [k for k in (op.name, *op.root_fields) if k]
        fault = server._faults.take(keys)
        work = time.perf_counter() - started  # handler time so far; injected delays excluded
        delay = server.latency + (fault.latency if fault else 0)
        if delay:
            time.sleep(delay)
        if fault is not None and fault.hang:
            waited = time.perf_counter()
            server._stopping.wait()
            self.close_connection = True
            hung = delay + time.perf_counter() - waited
            self._record(req, op, 0, work, hung, 0, fault)
            return
        if fault is not None and fault.hook is not None:
            fault.hook()
        resumed = time.perf_counter()
        response = self._respond_to(req, op, fault)
        payload = b"" if response.body is None else json.dumps(response.body).encode()
        # Record before replying, so a client that has its answer also sees the record.
        work += time.perf_counter() - resumed
        self._record(req, op, response.status, work, delay, len(payload), fault)
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)

    def _graphql_operation(self, req: Request) -> gql.Operation | None:
        if req.path != "/api/graphql" or req.method != "POST":
            return None
        try:
            body = req.json() or {}
        except ValueError:
            return gql.Operation(None, None, (), None)
        return gql.inspect(str(body.get("query") or ""), body.get("operationName"))

    def _respond_to(self, req: Request, op: gql.Operation | None, fault: Fault | None) -> Response:
        server = self.standin
        authorized = self.headers.get("Authorization") == f"Bearer {server.token}"
        if server.token is not None and req.path not in _PUBLIC_PATHS and not authorized:
            return Response(401, {"message": "Unauthorized to perform this action.", "status": 401})
        if fault is not None and fault.status is not None:
            if fault.body is not None:
                try:
                    return Response(fault.status, json.loads(fault.body))
                except ValueError:
                    return Response(fault.status, {"message": fault.body, "status": fault.status})
            message = f"Injected HTTP {fault.status} by the DataHub stand-in"
            return Response(fault.status, {"message": message, "status": fault.status})
        limited = self._rate_limited(req, op)
        if limited is not None:
            return limited
        try:
            return server._api.dispatch(req, op, ACTOR)
        except (ValueError, KeyError, TypeError) as exc:
            return Response(400, {"message": f"Bad request: {exc}", "status": 400})
        except Exception as exc:  # a stand-in bug: GMS answers 500, it never drops the connection
            server.errors.append(traceback.format_exc())
            return Response(
                500,
                {
                    "exceptionClass": "com.linkedin.restli.server.RestLiServiceException",
                    "message": f"java.lang.RuntimeException: {type(exc).__name__}: {exc}",
                    "status": 500,
                },
            )

    def _rate_limited(self, req: Request, op: gql.Operation | None) -> Response | None:
        """GMS's 429 when a rate-limit bucket this request takes from is empty."""
        server = self.standin
        roots = op.root_fields if op is not None else ()
        now = server.now()
        for limit in list(server._rate_limits):
            if not limit.applies(req.path, roots):
                continue
            retry_after = limit.take(now)
            if retry_after is not None:
                headers = limit.headers(retry_after, graphql=op is not None)
                return Response(429, {"error": "Rate limit exceeded"}, headers)
        return None

    def _record(
        self,
        req: Request,
        op: gql.Operation | None,
        status: int,
        work: float,
        delay: float,
        response_bytes: int,
        fault: Fault | None,
    ) -> None:
        self.standin._recorder.add(
            RecordedRequest(
                method=req.method,
                path=req.path,
                query=req.query,
                operation=op.name if op else None,
                status=status,
                duration_s=work,
                body_bytes=len(req.body),
                response_bytes=response_bytes,
                root_fields=op.root_fields if op else (),
                injected_delay_s=delay,
                fault=fault.pattern if fault else None,
            )
        )
