"""The demo's world after its schema change, as the MCP server sees it.

The demo's catalog (DataHub Lite) is loaded and scanned as ``mlcopilot demo`` does: a first
scan, then the upstream change (``raw.customers`` renames ``country`` to ``country_code`` and
drops ``signup_date``) and a second scan, which opens the drift incidents. GitHub is the fake
over HTTP, so the incidents have real issues whose URLs the store remembers. Built once per
module; each test gets its own copy of the files.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from mlcopilot.agent.server import build_server
from mlcopilot.catalog.lite import open_lite_catalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import load_checks
from mlcopilot.clock import OffsetClock
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.scan import Delivery, ScanOptions, scan
from mlcopilot.scan.delivery import notification_sinks
from mlcopilot.settings import Settings, load_settings
from mlcopilot.store import default_state_url, open_store
from testing.fakes.github import FakeGitHub
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
FIRST, SECOND = datetime(2026, 11, 20, 9, tzinfo=UTC), datetime(2026, 11, 21, 9, tzinfo=UTC)
NOW = datetime(2026, 11, 22, 9, tzinfo=UTC)
"""The server's clock: a day after the second scan."""
UI = "https://datahub.example.com"


def _build(home: Path) -> None:
    github = FakeGitHub()
    checks = load_checks()
    catalog = open_lite_catalog(home / "catalog.db", create=True)
    store = open_store(default_state_url(home), create=True)
    try:
        with github.running():
            env = notify_env(github, MLCOPILOT_TEST_WRITE_SPACING="0")
            notify = NotifySettings.from_settings(load_settings(environ=env))
            for name, when in (("01_catalog.json", FIRST), ("02_schema_change.json", SECOND)):
                load_metadata_files(catalog, [DEMO_DATA / name])
                # As the demo: no group_wait, so the relay sends at once and nothing waits.
                delivery = Delivery(
                    sinks=notification_sinks(notify, OffsetClock(when)),
                    policy=replace(notify.policy, group_wait=timedelta(0)),
                    clock=OffsetClock(when),
                )
                result = scan(catalog, store, checks, ScanOptions(now=when), delivery=delivery)
                assert result.relay is not None
                assert result.relay.ok
    finally:
        store.close()
        catalog.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo-after-drift")
    _build(home)
    return home


@pytest.fixture
def demo_home(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the demo's home after the drift scan, this test's own."""
    home = tmp_path / "demo"
    shutil.copytree(pristine, home)
    return home


def demo_settings(home: Path, env: Mapping[str, str] | None = None) -> Settings:
    """The settings a user of that home has: its catalog and state, DataHub's UI for links."""
    environ = {"MLCOPILOT_HOME": str(home), "MLCOPILOT_DATAHUB_URL": UI, **(env or {})}
    return load_settings(environ=environ)


@dataclass
class Connected:
    """What a test does with a server: call it through a connected client session."""

    home: Path
    allow_writes: bool = False
    env: Mapping[str, str] | None = None
    """More environment for the server's settings (e.g. GitHub's)."""

    def run(self, conversation: Callable[[ClientSession], Awaitable[None]]) -> None:
        """Run ``conversation`` (an async function of the session) against a fresh server."""
        server = build_server(
            demo_settings(self.home, self.env), allow_writes=self.allow_writes, clock=lambda: NOW
        )

        async def main() -> None:
            async with create_connected_server_and_client_session(server) as client:
                await conversation(client)

        try:
            anyio.run(main)
        except BaseExceptionGroup as group:  # the session's task groups wrap a failed assert
            raise _first(group) from None


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


@pytest.fixture
def connect(demo_home: Path) -> Callable[..., Connected]:
    def make(*, allow_writes: bool = False) -> Connected:
        return Connected(demo_home, allow_writes=allow_writes)

    return make
