"""The sinks' HTTP stack over TLS, as every real GitHub and Slack call goes: the handshake on
the stack's own socket stream, verification, a kept-alive connection, and the call's deadline
after the handshake.

The local fakes speak plain HTTP; here a small HTTPS server holds a certificate for
``localhost`` made by a throw-away CA, which the stack trusts through ``SSL_CERT_FILE`` (as an
operator's corporate CA would be).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mlcopilot.notify.sinks.http import DeadlineTransport
from mlcopilot.notify.sinks.urls import AddressPolicy


@dataclass(frozen=True)
class Certs:
    ca: Path
    chain: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA and a certificate it signed for ``localhost`` and ``127.0.0.1``."""
    folder = tmp_path_factory.mktemp("tls")
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("mlcopilot test CA"))
        .issuer_name(_name("mlcopilot test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(ca_id, critical=False)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_id), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = Certs(folder / "ca.pem", folder / "chain.pem", folder / "key.pem")
    paths.ca.write_bytes(ca.public_bytes(pem))
    paths.chain.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    paths.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b'{"login": "mlcopilot-bot"}'

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        try:
            for byte in range(len(self.body)):
                if self.path == "/drip":  # a byte a second: no read ever waits long
                    self.wfile.flush()
                    time.sleep(1.0)
                self.wfile.write(self.body[byte : byte + 1])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):  # the client gave up
            self.close_connection = True


@pytest.fixture
def https(certs: Certs) -> Iterator[str]:
    """``https://localhost:PORT``: a server with the test CA's certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.chain, certs.key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def client(url: str, total_s: float = 5.0) -> httpx.Client:
    transport = DeadlineTransport(total_s, base_url=url, policy=AddressPolicy(allow_loopback=True))
    return httpx.Client(transport=transport, timeout=total_s)


def test_a_call_over_tls_is_verified_and_its_connection_kept_alive(
    https: str, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    handshakes: list[str] = []
    with client(https) as http:
        for _ in range(2):
            answer = http.get(f"{https}/user", extensions={"trace": _noting(handshakes)})
            assert answer.json() == {"login": "mlcopilot-bot"}
            assert answer.extensions["http_version"] == b"HTTP/1.1"
    assert len(handshakes) == 1  # one handshake: the second call reused the verified connection


def test_a_certificate_the_machine_does_not_trust_is_refused(
    https: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with client(https) as http, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY"):
        http.get(f"{https}/user")


def test_trust_set_later_in_the_same_process_is_honoured(
    https: str, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Transports share one verifying context per trust setting; a new setting gets its own.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with client(https) as http, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY"):
        http.get(f"{https}/user")
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    with client(https) as http:
        assert http.get(f"{https}/user").json() == {"login": "mlcopilot-bot"}
    monkeypatch.delenv("SSL_CERT_FILE")
    with client(https) as http, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY"):
        http.get(f"{https}/user")


def test_a_byte_a_second_over_tls_is_cut_at_the_calls_deadline(
    https: str, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    started = time.monotonic()
    with client(https, total_s=1.5) as http, pytest.raises(httpx.TimeoutException):
        http.get(f"{https}/drip")
    assert 1.5 <= time.monotonic() - started < 4.0


def _noting(seen: list[str]) -> Any:
    """A trace hook noting each TLS handshake httpcore starts."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.start_tls.started":
            seen.append(event)

    return trace
