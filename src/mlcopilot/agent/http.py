"""``mlcopilot mcp --transport streamable-http``: the server behind a bearer token.

Every HTTP request must carry ``Authorization: Bearer <MLCOPILOT_MCP_TOKEN>``; anything else
is answered 401 before it reaches the MCP app. The token is compared in constant time
(:func:`hmac.compare_digest`) and never logged: uvicorn's access log has the method and the
path only, and the server's own log lines never quote a request header.
"""

from __future__ import annotations

import hmac
import json
import os
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


def serve_http(server: FastMCP, *, host: str, port: int, token: str) -> None:
    """Serve ``server`` over streamable HTTP on ``host:port`` until interrupted."""
    import uvicorn

    config = uvicorn.Config(
        authenticated_app(server, token),
        host=host,
        port=port,
        log_level="warning",
        # The access log would be the only place a request shows up: method and path, no
        # headers; kept off by default (--verbose turns logging up, not this).
        access_log=False,
    )
    uvicorn.Server(config).run()
