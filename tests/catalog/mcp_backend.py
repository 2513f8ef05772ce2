"""The MCP catalog over the stand-in GMS, with the real ``mcp-server-datahub`` process.

Starting the server takes about a second, and every contract test needs a catalog of its own,
so the tests share one server process: it talks to a :class:`Relay` on a fixed local port,
and each catalog points the relay at its own stand-in before its first call. The server reads
``/config`` once, at start-up; every stand-in reports the same version, so that is sound.
The SDK side of each catalog talks to its stand-in directly.
"""

from __future__ import annotations

import atexit
import http.client
import shutil
import tempfile
import threading
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.mcp.catalog import McpCatalog, McpOptions, find_server, server_environment
from mlcopilot.catalog.mcp.session import McpSession
from mlcopilot.errors import CatalogUnavailable
from tests.catalog.datahub_backend import UNAVAILABLE, start_standin


def _why_unavailable() -> str | None:
    if UNAVAILABLE is not None:
        return UNAVAILABLE
    try:
        find_server()
    except CatalogUnavailable as exc:
        return str(exc)
    return None


MCP_UNAVAILABLE = _why_unavailable()
needs_mcp = pytest.mark.skipif(MCP_UNAVAILABLE is not None, reason=MCP_UNAVAILABLE or "")

TEST_OPTIONS: dict[str, Any] = {
    "timeout": 5.0,
    "retries": 1,
    "startup_timeout": 20.0,
    "call_timeout": 20.0,
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Relay:
    """A local HTTP relay to whichever stand-in is current (set :attr:`target`)."""

    def __init__(self) -> None:
        self.target: str | None = None
        handler = type("Handler", (_RelayHandler,), {"relay": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _RelayHandler(BaseHTTPRequestHandler):
    relay: Relay
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out separately: no 40 ms ACK waits

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = urllib.parse.urlsplit(self.relay.target or "http://127.0.0.1:9")
        assert target.hostname is not None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        # Closed whatever happens: a stand-in a finished test stopped drops the connection
        # mid-answer, and an unclosed socket is a ResourceWarning in whichever test comes next.
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            status, reply, data = response.status, response.getheaders(), response.read()
        except (OSError, http.client.HTTPException) as exc:
            status, reply, data = 502, [], f"relay: {exc}".encode()
        finally:
            upstream.close()
        self.send_response(status)
        for key, value in reply:
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward


class SharedServer:
    """One ``mcp-server-datahub`` behind a :class:`Relay`, lent to every test catalog."""

    def __init__(self) -> None:
        self.relay = Relay()
        self.home = Path(tempfile.mkdtemp(prefix="mlcopilot-mcp-home-"))
        env = server_environment(DataHubSettings(server=self.relay.url), {"HOME": str(self.home)})
        self.session = McpSession(
            find_server(),
            env,
            label="mcp-server-datahub (shared test server)",
            startup_timeout=TEST_OPTIONS["startup_timeout"],
            call_timeout=TEST_OPTIONS["call_timeout"],
        )

    def catalog(self, server: Any, **options: Any) -> McpCatalog:
        """A catalog whose MCP calls reach ``server`` (a started stand-in) through the relay."""
        self.relay.target = server.url
        settings = DataHubSettings(server=server.url, token=server.token)
        return McpCatalog(settings, McpOptions(**{**TEST_OPTIONS, **options}), session=self.session)

    def close(self) -> None:
        self.session.close()
        self.relay.close()
        shutil.rmtree(self.home, ignore_errors=True)


_shared: SharedServer | None = None


def shared_server() -> SharedServer:
    """The process-wide shared server (started on first use, stopped at exit)."""
    global _shared
    if _shared is None:
        _shared = SharedServer()
        atexit.register(_shared.close)
    return _shared


class StandInMcpCatalog(McpCatalog):
    """An :class:`McpCatalog` that owns the stand-in it talks to and stops it on close."""

    server: Any

    def close(self) -> None:
        super().close()
        self.server.__exit__(None, None, None)


def mcp_catalog_for(server: Any, **options: Any) -> McpCatalog:
    """A catalog on the shared MCP server, for an already started stand-in."""
    return shared_server().catalog(server, **options)


def mcp_catalog(
    workdir: Path, mcps: Sequence[MetadataChangeProposalWrapper], **options: Any
) -> StandInMcpCatalog:
    """A catalog over a fresh stand-in holding ``mcps`` (the contract suite's factory)."""
    server = start_standin(mcps, workdir)
    shared = shared_server()
    shared.relay.target = server.url
    catalog = StandInMcpCatalog(
        DataHubSettings(server=server.url),
        McpOptions(**{**TEST_OPTIONS, **options}),
        session=shared.session,
    )
    catalog.server = server
    return catalog
