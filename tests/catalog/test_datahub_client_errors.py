"""Why GMS could not be reached is read from the failure's exception types, on real sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from mlcopilot.catalog.datahub.client import GmsClient
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.errors import CatalogUnavailable


class _Plain(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[int]:
    """A plain-HTTP server: a TLS client handshaking with it fails."""
    server = HTTPServer(("127.0.0.1", 0), _Plain)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def hangs_up() -> Iterator[int]:
    """A server that accepts each connection and closes it without a word."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    listener.close()


def _unreachable(url: str) -> str:
    client = GmsClient(DataHubSettings(server=url, token=None), timeout=2.0, retries=0)
    try:
        with pytest.raises(CatalogUnavailable) as caught:
            client.server_config()
    finally:
        client.close()
    message = str(caught.value)
    assert message.startswith(f"cannot reach DataHub at {url} (GET /config): ")
    return message.rsplit(": ", 1)[1]


def test_unknown_host_is_host_name_not_found() -> None:
    assert _unreachable("http://no-such-host.invalid:8080") == "host name not found"


def test_tls_to_a_plain_http_server_is_a_failed_handshake(plain_http: int) -> None:
    assert _unreachable(f"https://127.0.0.1:{plain_http}") == "TLS handshake failed"


def test_a_server_that_hangs_up_dropped_the_connection(hangs_up: int) -> None:
    assert _unreachable(f"http://127.0.0.1:{hangs_up}") == "connection dropped"


def test_a_closed_port_is_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert _unreachable(f"http://127.0.0.1:{port}") == "connection refused"
