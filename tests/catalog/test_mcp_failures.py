"""How the MCP backend fails: one clear line within a bounded time, never a hang or a zombie."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.mcp.catalog import McpCatalog, McpOptions, find_server
from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.protocols import WalkLimits
from testing.builders import dataset, ml_model, model_urn
from tests.catalog.datahub_backend import start_standin
from tests.catalog.mcp_backend import TEST_OPTIONS, mcp_catalog_for, needs_mcp

pytestmark = [needs_mcp, pytest.mark.slow]

TOKEN = "canary-token-7e3b9a1f0c2d4e6f"
MODEL = model_urn("churn")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    started = start_standin([*ml_model("churn"), *dataset("raw.x")], tmp_path / "standin")
    yield started
    started.__exit__(None, None, None)


def catalog(server: Any, tmp_path: Path, **options: Any) -> McpCatalog:
    """A catalog with a server process of its own (not the shared test server)."""
    options = {**TEST_OPTIONS, "server_env": {"HOME": str(tmp_path)}, **options}
    return McpCatalog(DataHubSettings(server=server.url, token=TOKEN), McpOptions(**options))


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def assert_clean(message: str) -> None:
    assert TOKEN not in message
    assert "\n" not in message


def test_missing_executable(server: Any, tmp_path: Path) -> None:
    broken = catalog(server, tmp_path, command=(str(tmp_path / "mcp-server-datahub"),))
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match=r"cannot run .*mcp-server-datahub") as caught:
        broken.lineage(MODEL, WalkLimits())
    assert time.monotonic() - started < 5
    assert_clean(str(caught.value))
    assert caught.value.exit_code == 3
    broken.close()


def test_executable_not_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CatalogUnavailable, match="pip install mcp-server-datahub"):
        find_server()


def test_server_that_exits_at_start(server: Any, tmp_path: Path) -> None:
    script = (
        "import sys; sys.stderr.write('Traceback (most recent call last):\\n  File x\\n"
        "requests.exceptions.ConnectionError: Failed to connect to DataHub\\n'); sys.exit(1)"
    )
    broken = catalog(server, tmp_path, command=(sys.executable, "-c", script))
    started = time.monotonic()
    why = "exited while starting: requests.exceptions.ConnectionError: Failed to connect"
    with pytest.raises(CatalogUnavailable, match=why) as c:
        broken.models()
    assert time.monotonic() - started < 10
    assert_clean(str(c.value))
    # The failure sticks: no second spawn, the same line again.
    with pytest.raises(CatalogUnavailable, match="exited while starting"):
        broken.models()
    broken.close()


def test_server_that_never_starts_is_stopped(server: Any, tmp_path: Path) -> None:
    before = children()
    script = "import time; time.sleep(120)"
    broken = catalog(server, tmp_path, command=(sys.executable, "-c", script), startup_timeout=1)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match="did not start within 1s"):
        broken.models()
    assert time.monotonic() - started < 10
    broken.close()
    assert children() <= before  # no zombie, no orphan


def test_real_server_that_cannot_read_config_is_bounded(server: Any, tmp_path: Path) -> None:
    """The real server retries GMS's /config for ~30 s; the start-up timeout caps the wait."""
    before = children()
    real = catalog(server, tmp_path, startup_timeout=2)
    real._gms.server_config()  # GMS answers us, then stops answering the server
    server.inject("GET /config", status=503)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match="mcp-server-datahub") as caught:
        real.lineage(MODEL, WalkLimits())
    assert time.monotonic() - started < 12
    assert_clean(str(caught.value))
    real.close()
    assert children() <= before


def test_unreachable_gms_fails_before_spawning(server: Any, tmp_path: Path) -> None:
    url = server.url
    server.__exit__(None, None, None)
    before = children()
    down = McpCatalog(
        DataHubSettings(server=url, token=TOKEN), McpOptions(**{**TEST_OPTIONS, "retries": 0})
    )
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match="connection refused") as caught:
        down.models()
    assert time.monotonic() - started < 5
    assert url in str(caught.value)
    assert_clean(str(caught.value))
    assert children() <= before
    down.close()


def test_tool_error_is_one_catalog_error(server: Any) -> None:
    shared = mcp_catalog_for(server)
    server.inject("GetEntityLineage", status=400, times=1)
    with pytest.raises(CatalogError, match="get_lineage failed") as caught:
        shared.lineage(MODEL, WalkLimits())
    assert not isinstance(caught.value, CatalogUnavailable)
    assert_clean(str(caught.value))
    assert shared.lineage(MODEL, WalkLimits()).root == MODEL  # the session is still usable
    shared.close()


def test_hung_tool_times_out(server: Any) -> None:
    shared = mcp_catalog_for(server, call_timeout=2)
    server.inject("GetEntityLineage", hang=True, times=1)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match="get_lineage did not answer within 2s"):
        shared.lineage(MODEL, WalkLimits())
    assert time.monotonic() - started < 6
    shared.close()


def test_refused_token_names_no_token(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = children()
    secured = start_standin(ml_model("churn"), tmp_path / "secured", token=TOKEN)
    try:
        wrong = McpCatalog(
            DataHubSettings(server=secured.url, token="wrong-" + TOKEN),
            McpOptions(**{**TEST_OPTIONS, "server_env": {"HOME": str(tmp_path)}}),
        )
        caplog.set_level(logging.DEBUG)
        with pytest.raises(CatalogError, match=r"refused the token \(401\) on search") as caught:
            wrong.models()
        assert not isinstance(caught.value, CatalogUnavailable)
        assert_clean(str(caught.value))
        assert TOKEN not in caplog.text
        assert children() > before  # the server runs while the catalog is open
        wrong.close()
        assert children() <= before  # and is gone once it is closed
        wrong.close()  # closing twice is harmless
    finally:
        secured.__exit__(None, None, None)


def test_server_that_dies_later_is_reported_at_once(server: Any, tmp_path: Path) -> None:
    before = children()
    real = catalog(server, tmp_path)
    assert real.models() == [MODEL]
    for process in psutil.Process().children(recursive=True):
        if process.pid not in before:
            process.kill()
    time.sleep(0.3)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match=r"mcp-server-datahub for .* has exited"):
        real.lineage(MODEL, WalkLimits())
    assert time.monotonic() - started < 5
    real.close()
    assert children() <= before


def test_close_ends_the_server_and_the_portal_thread(server: Any, tmp_path: Path) -> None:
    def portals() -> list[threading.Thread]:
        # anyio names the thread of the event loop it starts "<backend>-portal-<id>".
        return [t for t in threading.enumerate() if "-portal-" in t.name]

    processes, before = children(), set(portals())  # the shared test session's stays open
    real = catalog(server, tmp_path)
    assert real.models() == [MODEL]
    assert len(set(portals()) - before) == 1
    real.close()
    assert set(portals()) <= before
    assert children() <= processes
