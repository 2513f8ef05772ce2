"""The installed ``mlcopilot mcp`` over its real transports, with the official MCP client.

stdio: the client starts the command, as Claude Desktop or an IDE does. streamable HTTP: the
command runs as a server on a free port and refuses every request without its bearer token.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from testing.installed_cli import MLCOPILOT, run_cli
from tests.agent.conftest import CUSTOMERS, UI

pytestmark = pytest.mark.slow

CLOCK = "2026-11-22T09:00:00Z"
TOKEN = "test-token-" + "7" * 32
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _removed_column(structured: dict[str, Any] | None) -> dict[str, Any]:
    assert structured is not None
    return next(f for f in structured["findings"] if f["field"] == "signup_date")


def test_stdio_with_the_official_client_launching_the_installed_command(
    demo_home: Path, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=str(MLCOPILOT),
        args=["mcp", "--now", CLOCK],
        env={"MLCOPILOT_HOME": str(demo_home), "MLCOPILOT_DATAHUB_URL": UI},
    )
    errors = tmp_path / "stderr.txt"

    async def main() -> None:
        with errors.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                assert init.serverInfo.name == "mlcopilot"
                assert init.instructions is not None
                assert "scan_model" in init.instructions
                tools = {t.name for t in (await session.list_tools()).tools}
                assert tools == {
                    "scan_model",
                    "list_incidents",
                    "explain_incident",
                    "impact_of_change",
                }
                result = await session.call_tool("scan_model", {"model": "churn_predictor_v1"})
                assert not result.isError, result.content
                removed = _removed_column(result.structuredContent)
                assert removed["entity"] == CUSTOMERS
                assert removed["change"] == "removed"
                failed = await session.call_tool("explain_incident", {"incident_id": "nope"})
                assert failed.isError

    anyio.run(main)
    # Nothing but the protocol on stdout (the session would have failed), nothing on stderr.
    assert errors.read_text() == ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _http_server(home: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    env = {**os.environ, "MLCOPILOT_HOME": str(home), "MLCOPILOT_MCP_TOKEN": TOKEN}
    process = subprocess.Popen(
        [str(MLCOPILOT), "mcp", "--transport", "streamable-http", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a wait for the port, not a timed assertion
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    _, stderr = process.communicate(timeout=10)
                    pytest.fail(f"the server did not start: {stderr}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_streamable_http_needs_the_bearer_token(demo_home: Path) -> None:
    with _http_server(demo_home, "--now", CLOCK) as (url, process):
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}):
            refused = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in refused.text
        allowed = httpx.post(
            url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
        )
        assert allowed.status_code == 200, allowed.text
        assert "mlcopilot" in allowed.text

        async def main() -> None:
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with (
                client,
                streamable_http_client(url, http_client=client) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("scan_model", {"model": "churn_predictor_v1"})
                assert not result.isError, result.content
                assert _removed_column(result.structuredContent)["severity"] == "critical"

        anyio.run(main)
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert TOKEN not in stderr
    assert "streamable HTTP, bearer token required, read-only" in stderr
    # The client closed its session normally: nothing to report (no ClosedResourceError).
    assert "Traceback" not in stderr
    assert "error" not in stderr.lower()


@pytest.mark.parametrize("token", ["", "x9q7z"])
def test_streamable_http_refuses_to_start_without_a_usable_token(
    tmp_path: Path, token: str
) -> None:
    ran = run_cli(
        tmp_path,
        "mcp",
        "--transport",
        "streamable-http",
        "--port",
        str(_free_port()),
        env={"MLCOPILOT_MCP_TOKEN": token},
    )
    assert ran.code == 2
    assert ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith("error: ")
    assert "MLCOPILOT_MCP_TOKEN" in line
    if token:
        assert token not in line
