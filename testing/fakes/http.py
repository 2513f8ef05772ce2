"""A small threaded HTTP server on 127.0.0.1 that records requests and fails on command.

Subclasses route requests to handlers; tests script faults with :meth:`FakeServer.fail`:
an HTTP status with headers and body (optionally *after* doing the work, as a server whose
success was lost behind a 502 would), a delay longer than the client's timeout, or a dropped
connection; and with :meth:`FakeServer.slow_drip`, a slow drip: the real answer, its headers at once
and then its body one byte at a time (the server that keeps a per-read timeout from ever
firing).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        content_type = self.headers.get("content-type", "")
        if "application/x-www-form-urlencoded" in content_type:
            return {k: v[0] for k, v in parse_qs(self.text).items()}
        return json.loads(self.text) if self.body else {}


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    response: Response | None = None
    after: bool = False
    delay: float = 0.0
    drop: bool = False
    times: int = 1
    drip: float = 0.0
    """Seconds between the body's bytes (0: the body goes at once)."""


Handler = Callable[[Request, re.Match[str]], Response]


class FakeServer:
    """Routes ``(method, path regex)`` to handlers; records every request; scripted faults."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()
        self.drips_abandoned = 0
        """Slow drips the client hung up on before the body was complete."""

    # --- set-up

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(pattern + r"\Z"), handler))

    def fail(
        self,
        method: str,
        pattern: str,
        status: int = 500,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        after: bool = False,
        delay: float = 0.0,
        drop: bool = False,
        times: int = 1,
        content_type: str = "application/json; charset=utf-8",
    ) -> None:
        """Make the next ``times`` matching requests fail as described."""
        response = Response(status, body, headers or {}, content_type)
        with self._lock:
            self._faults.append(
                Fault(method, re.compile(pattern + r"\Z"), response, after, delay, drop, times)
            )

    def slow_drip(self, method: str, pattern: str, interval: float, *, times: int = 1) -> None:
        """Answer the next ``times`` matching requests for real, the body one byte per ``interval``.

        The work is done first (a post is stored), as a server whose answer is merely slow.
        """
        with self._lock:
            self._faults.append(
                Fault(method, re.compile(pattern + r"\Z"), None, times=times, drip=interval)
            )

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address, never bytes
        return f"http://{host}:{port}"

    @contextmanager
    def running(self) -> Iterator[FakeServer]:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                fake._dispatch(self)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        thread.start()
        try:
            yield self
        finally:
            self._stopping.set()  # a drip still going ends now
            self._server.shutdown()
            self._server.server_close()

    # --- queries

    def calls(self, method: str, pattern: str) -> list[Request]:
        rx = re.compile(pattern + r"\Z")
        return [r for r in self.requests if r.method == method and rx.match(r.path)]

    # --- dispatch

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""
        request = Request(
            method=h.command,
            path=parts.path,
            query={k: v[0] for k, v in parse_qs(parts.query).items()},
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
        )
        with self._lock:
            self.requests.append(request)
            fault = self._take_fault(request)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.drop:
            h.close_connection = True
            h.connection.shutdown(2)
            return
        response: Response
        if fault is not None and not fault.after and fault.response is not None:
            response = fault.response
        else:
            response = self._route(request)
            if fault is not None and fault.response is not None:
                response = fault.response
        if fault is not None and fault.drip:
            self._send_slowly(h, response, fault.drip)
        else:
            self._send(h, response)

    def _take_fault(self, request: Request) -> Fault | None:
        for fault in self._faults:
            if fault.method == request.method and fault.pattern.match(request.path):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _route(self, request: Request) -> Response:
        for method, pattern, handler in self._routes:
            match = pattern.match(request.path)
            if method == request.method and match:
                return handler(request, match)
        return Response(404, {"message": "Not Found"})

    @staticmethod
    def _payload(response: Response) -> bytes:
        if isinstance(response.body, str | bytes):
            return response.body.encode() if isinstance(response.body, str) else response.body
        return b"" if response.body is None else json.dumps(response.body).encode()

    @staticmethod
    def _send_head(h: BaseHTTPRequestHandler, response: Response, length: int) -> None:
        h.send_response(response.status)
        h.send_header("Content-Type", response.content_type)
        h.send_header("Content-Length", str(length))
        for name, value in response.headers.items():
            h.send_header(name, value)
        h.end_headers()

    def _send(self, h: BaseHTTPRequestHandler, response: Response) -> None:
        payload = self._payload(response)
        try:
            self._send_head(h, response, len(payload))
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _send_slowly(self, h: BaseHTTPRequestHandler, response: Response, interval: float) -> None:
        """The headers at once, then the body a byte per ``interval`` until the client hangs up."""
        payload = self._payload(response)
        h.close_connection = True  # whatever happens, this connection serves no other request
        try:
            self._send_head(h, response, len(payload))
            h.wfile.flush()
            for i in range(len(payload)):
                if self._stopping.wait(interval):
                    return
                h.wfile.write(payload[i : i + 1])
                h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: what we test for
            with self._lock:
                self.drips_abandoned += 1
