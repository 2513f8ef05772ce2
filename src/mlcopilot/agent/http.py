"""``mlcopilot mcp --transport streamable-http``: the server behind a bearer token.

Every HTTP request must carry ``Authorization: Bearer <MLCOPILOT_MCP_TOKEN>``; anything else
is answered 401 before it reaches the MCP app. The token is compared in constant time
(:func:`hmac.compare_digest`) and never logged: uvicorn's access log has the method and the
path only, and the server's own log lines never quote a request header.
"""

from __future__ import annotations

import errno
import hmac
import json
import logging
import os
import socket
from collections.abc import Mapping

from mcp.server.fastmcp import FastMCP
from starlette.types import ASGIApp, Receive, Scope, Send

from mlcopilot.errors import UsageError

TOKEN_VARIABLE = "MLCOPILOT_MCP_TOKEN"
MIN_TOKEN_LENGTH = 16
"""The shortest token accepted: anything shorter is guessable over the network."""


def token_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """The bearer token clients must send; refuses to serve HTTP without a usable one.

    Raises:
        UsageError: ``MLCOPILOT_MCP_TOKEN`` is unset, blank or shorter than
            :data:`MIN_TOKEN_LENGTH` (the message never quotes it).
    """
    token = (os.environ if environ is None else environ).get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise UsageError(
            f"--transport streamable-http needs a bearer token: set {TOKEN_VARIABLE} (e.g. "
            "`openssl rand -hex 32`); clients send it in the Authorization header"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise UsageError(
            f"{TOKEN_VARIABLE} is shorter than {MIN_TOKEN_LENGTH} characters; use a random "
            "one (e.g. `openssl rand -hex 32`)"
        )
    return token


class BearerToken:
    """ASGI middleware: HTTP requests without the right bearer token get 401, nothing else.

    Lifespan events pass through (the app's session manager starts in them).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass an authorised request on; answer any other with 401."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                # The scheme is case-insensitive (RFC 7235); the token is not.
                if scheme.lower() == b"bearer":
                    given = credentials.strip()
                break
        if given and hmac.compare_digest(given, self._expected):
            await self._app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "invalid_token",
                "error_description": f"send Authorization: Bearer <the server's {TOKEN_VARIABLE}>",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="mlcopilot"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def authenticated_app(server: FastMCP, token: str) -> ASGIApp:
    """The server's streamable-HTTP app (at ``/mcp``) behind :class:`BearerToken`."""
    return BearerToken(server.streamable_http_app(), token)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server, before anything says it is serving.

    The server is then started on this very socket (:func:`serve_http`), so nothing can take
    the port in between.

    Raises:
        UsageError: The port is taken, or the host is no address of this machine; one
            sentence naming the flag.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--host {host}: cannot listen there ({reason})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn binds: a port left in TIME_WAIT by an earlier run is free, one that a
        # live server listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"--port {port}: {host}:{port} is already in use (another server listens "
                "there); choose another --port, or stop that server"
            ) from None
        raise UsageError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})"
        ) from None
    return sock


SDK_HTTP_LOGGER = "mcp.server.streamable_http"
"""The MCP SDK's streamable-HTTP transport, which logs a client's normal disconnect (its event
stream closed) as an error with a ``ClosedResourceError`` traceback."""


class ClientGone(logging.Filter):
    """A client that hung up is not an error: its record becomes one DEBUG line, no traceback.

    Only a stream closed under the transport (``anyio.ClosedResourceError``,
    ``BrokenResourceError``) is so; every other error keeps its level and traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record; lower a disconnect's to DEBUG, without its traceback."""
        import anyio

        gone = record.exc_info[1] if record.exc_info else None
        if isinstance(gone, anyio.ClosedResourceError | anyio.BrokenResourceError):
            record.msg = f"{record.getMessage()}: the client disconnected"
            record.args = None
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def serve_http(server: FastMCP, *, sock: socket.socket, token: str) -> None:
    """Serve ``server`` over streamable HTTP on ``sock`` (:func:`listen`) until interrupted."""
    import uvicorn

    config = uvicorn.Config(
        authenticated_app(server, token),
        log_level="warning",
        # The access log would be the only place a request shows up: method and path, no
        # headers; kept off by default (--verbose turns logging up, not this).
        access_log=False,
    )
    sdk = logging.getLogger(SDK_HTTP_LOGGER)
    gone = ClientGone()
    sdk.addFilter(gone)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sdk.removeFilter(gone)
