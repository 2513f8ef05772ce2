"""Every call to DataHub ends by its deadline, and a scan's walk by its bound (issue 25, item 1).

Against real sockets: a server that sends its headers (or not even those) and then one byte a
second, so no read ever waits long enough for a per-read timeout to fire; and a server whose
``Retry-After`` is longer than the call may take.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mlcopilot.catalog.datahub.client import GmsClient
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.datahub.doctor import run_doctor
from mlcopilot.errors import CatalogUnavailable
from testing.fakes.drip import drip_server
from testing.installed_cli import run_cli

TOKEN = "canary-token-5a1d0e9c"


def client(url: str, *, timeout: float, retries: int) -> GmsClient:
    return GmsClient(DataHubSettings(server=url, token=TOKEN), timeout=timeout, retries=retries)


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers"])
def test_an_answer_sent_a_byte_at_a_time_ends_by_the_calls_deadline(headers_too: bool) -> None:
    with drip_server(interval=0.2, lifetime=30, headers_too=headers_too) as drip:
        gms = client(drip.url, timeout=1.0, retries=1)
        try:
            for call in (gms.server_config, lambda: gms.graphql("q", "query q { me }", {})):
                started = time.monotonic()
                with pytest.raises(CatalogUnavailable) as caught:
                    call()
                took = time.monotonic() - started
                # Each read gets a byte within 0.2 s: only a total deadline ends the call.
                assert took < 4, f"{took:.1f} s"
                message = str(caught.value)
                assert "no complete answer within 2 s, 1 retry included (timed out)" in message
                assert TOKEN not in message
        finally:
            gms.close()


class _Busy(BaseHTTPRequestHandler):
    """503, and come back in an hour."""

    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Retry-After", "3600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def busy() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_retry_after_past_the_deadline_is_not_waited(busy: str) -> None:
    gms = client(busy, timeout=1.0, retries=2)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable) as caught:
        gms.server_config()
    gms.close()
    assert time.monotonic() - started < 3
    assert str(caught.value).endswith(
        "HTTP 503, and the next retry (3600 s later) would be past the call's deadline "
        "(3 s, 2 retries included)"
    )


def test_a_scans_bound_ends_a_call_in_progress() -> None:
    with drip_server(interval=0.2, lifetime=30) as drip:
        gms = client(drip.url, timeout=30.0, retries=2)
        gms.until = time.monotonic() + 1.0
        started = time.monotonic()
        with pytest.raises(CatalogUnavailable, match="no complete answer before the scan's"):
            gms.server_config()
        assert time.monotonic() - started < 3
        with pytest.raises(CatalogUnavailable, match="GET /config not made: past the scan's"):
            gms.server_config()  # past the bound: not even tried
        assert len(drip.requests) == 1
        gms.close()


def test_the_doctors_bound_is_per_call_in_all() -> None:
    with drip_server(interval=0.2, lifetime=30) as drip:
        started = time.monotonic()
        checks = run_doctor(f"datahub:{drip.url}", timeout=1.5)
        took = time.monotonic() - started
    assert took < 5, f"{took:.1f} s"
    failed = checks[-1]
    assert (failed.name, failed.ok) == ("reachable", False)
    assert failed.detail.endswith("(GET /config): no complete answer within 1.5 s (timed out)")


@pytest.mark.slow  # the doctor's own 10 s
def test_doctor_on_a_dripping_server_fails_within_its_10_s(tmp_path: Path) -> None:
    with drip_server(interval=1.0, lifetime=60) as drip:
        started = time.monotonic()
        ran = run_cli(tmp_path, "doctor", "--catalog", f"datahub:{drip.url}")
        took = time.monotonic() - started
    assert ran.code == 1, ran.stderr
    assert took < 20, f"{took:.0f} s"
    assert "FAIL" in ran.stdout
    assert "no complete answer within 10 s (timed out)" in ran.stdout


def test_a_scan_of_a_dripping_server_stops_at_its_walk_bound_with_exit_3(tmp_path: Path) -> None:
    with drip_server(interval=1.0, lifetime=60) as drip:
        started = time.monotonic()
        ran = run_cli(
            tmp_path,
            "scan",
            "--catalog",
            f"datahub:{drip.url}",
            env={"MLCOPILOT_WALK_TIMEOUT": "3s"},
        )
        took = time.monotonic() - started
    assert ran.code == 3, ran.stderr
    assert took < 15, f"{took:.0f} s"
    error = ran.stderr.strip().splitlines()[-1]
    assert error.startswith("error: the scan's walk did not finish within 3s ")
    assert "MLCOPILOT_WALK_TIMEOUT" in error
    assert "it stopped listing the catalog's models; nothing was recorded" in error
