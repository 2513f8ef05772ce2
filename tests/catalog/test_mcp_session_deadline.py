"""The MCP session's bounds are totals, not gaps between messages (issue 25, item 1).

A tool that keeps the session busy with log and progress notifications, the MCP analogue of a
server sending a byte a second, is still cut off at the call's timeout; and a scan's bound
(``until``) ends calls that the timeout alone would let run on.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from mlcopilot.catalog.mcp.session import McpSession
from mlcopilot.errors import CatalogUnavailable

pytestmark = pytest.mark.slow  # a server process

CHATTY = """
import anyio
from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("chatty")


@server.tool()
async def chatty(ctx: Context) -> str:
    for step in range(600):
        await ctx.info(f"still working ({step})")
        await ctx.report_progress(step, 600)
        await anyio.sleep(0.1)
    return "done"


server.run()
"""


def session(tmp_path: Path, *, call_timeout: float) -> McpSession:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY, encoding="utf-8")
    return McpSession(
        [sys.executable, str(script)],
        {},
        label="chatty",
        startup_timeout=30,
        call_timeout=call_timeout,
    )


def test_a_tool_that_keeps_sending_notifications_ends_at_its_timeout(tmp_path: Path) -> None:
    chatty = session(tmp_path, call_timeout=1.5)
    try:
        chatty.start()
        started = time.monotonic()
        with pytest.raises(CatalogUnavailable, match=r"chatty did not answer within 1\.5s"):
            chatty.call("chatty", {})
        assert time.monotonic() - started < 4
    finally:
        chatty.close()


def test_a_scans_bound_ends_calls_the_timeout_would_let_run(tmp_path: Path) -> None:
    chatty = session(tmp_path, call_timeout=60)
    try:
        chatty.start()
        started = time.monotonic()
        until = started + 1.5
        with pytest.raises(CatalogUnavailable):
            chatty.call_all([("chatty", {})] * 6, until=until)  # two waves of 4 at most
        assert time.monotonic() - started < 4
        with pytest.raises(CatalogUnavailable, match="not called: past the scan's time bound"):
            chatty.call("chatty", {}, until=until)
    finally:
        chatty.close()
