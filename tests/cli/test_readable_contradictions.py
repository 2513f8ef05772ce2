"""Lines that contradicted each other, or announced what did not happen (issue 25, item 13).

- ``incidents resolve`` against a DataHub that refuses the write-back said "catalog already up
  to date (wrote nothing)" and then "dead (... datahub writeback)": it says the second only.
- ``mcp --transport streamable-http`` on a port in use printed its "MCP server on ..." banner,
  then uvicorn's raw ``ERROR: [Errno 98]``: it is one ``error:`` line now, exit 2, no banner.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from testing.installed_cli import run_cli

DAY1 = "2026-11-20T09:00:00Z"
TOKEN = "test-token-" + "7" * 32


class _Refuses(BaseHTTPRequestHandler):
    """A DataHub that refuses every token (401): the write-back cannot go out."""

    def _refuse(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def refusing_datahub() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"datahub:http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_resolve_says_the_write_back_did_not_go_out_and_not_that_it_was_up_to_date(
    demo: Path, refusing_datahub: str
) -> None:
    assert run_cli(demo, "scan", "--now", DAY1, "--no-deliver").code == 0
    listed = run_cli(demo, "incidents", "list", "--format", "json")
    incident = listed.json()[0]["id"]

    ran = run_cli(demo, "incidents", "resolve", incident, "--catalog", refusing_datahub)

    assert ran.code == 5, ran.stderr
    assert f"Resolved {incident}" in ran.stdout
    assert "already up to date" not in ran.stdout
    assert "datahub writeback" in ran.stdout  # said once: not delivered, and why


def test_resolve_with_the_write_back_delivered_says_what_it_wrote(demo: Path) -> None:
    assert run_cli(demo, "scan", "--now", DAY1).code == 0
    incident = run_cli(demo, "incidents", "list", "--format", "json").json()[0]["id"]

    ran = run_cli(demo, "incidents", "resolve", incident)

    assert ran.code == 0, ran.stderr
    assert "Write-back wrote" in ran.stdout or "already up to date" in ran.stdout


def test_an_http_mcp_server_on_a_busy_port_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ran = run_cli(
            tmp_path,
            *("mcp", "--transport", "streamable-http", "--port", str(port)),
            env={"MLCOPILOT_MCP_TOKEN": TOKEN},
        )

    assert ran.code == 2
    assert ran.stdout == ""
    [line] = ran.stderr.splitlines()  # no banner before it
    assert line == (
        f"error: --port {port}: 127.0.0.1:{port} is already in use (another server listens "
        "there); choose another --port, or stop that server"
    )
