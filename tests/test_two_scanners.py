"""Two scanners on one PostgreSQL store (issue 25, item 5).

The second scanner finds the notifications of the incidents both found being delivered by the
first (claimed under its lease). That is no failure of the second's: it says what the other
process is delivering and exits 0, and every notification goes out once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.installed_cli import Ran, run_cli, run_installed
from testing.notify_world import notify_env
from testing.postgres import fresh_schema
from tests.conftest import DEMO_DATA

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

DAY1 = "2026-11-20T09:00:00Z"


def test_the_scanner_whose_rows_another_delivers_says_so_and_exits_0(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.db"
    with LiteCatalog(catalog, create=True) as lite:
        load_metadata_files(lite, [DEMO_DATA / "01_catalog.json"])
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running(), fresh_schema() as state_url:
        env = notify_env(
            github,
            slack,
            MLCOPILOT_GROUP_WAIT="0",
            # GitHub writes 2 s apart: the first scanner holds its rows for several seconds.
            MLCOPILOT_TEST_WRITE_SPACING="2",
            MLCOPILOT_CATALOG=f"lite:{catalog}",
            MLCOPILOT_STATE_URL=state_url,
        )
        first: list[Ran] = []
        process = threading.Thread(
            target=lambda: first.append(run_installed(tmp_path, "scan", "--now", DAY1, env=env))
        )
        process.start()
        try:
            # Its relay claims every row in one batch, then sends: once a request arrives, the
            # rows are under its lease.
            started = time.monotonic()
            while not (github.requests or slack.requests) and time.monotonic() - started < 90:
                time.sleep(0.05)
            assert github.requests or slack.requests, "the first scanner never delivered"
            second = run_cli(tmp_path, "scan", "--now", DAY1, env=env)
        finally:
            process.join(timeout=180)
        assert second.code == 0, second.stdout + second.stderr
        said = " ".join(second.stdout.split())
        assert "being delivered by another process (`mlcopilot outbox list`)" in said, said
        assert "to retry" not in said
        (ran,) = first
        assert ran.code == 0, ran.stdout + ran.stderr
        assert len(github.issues) == 3  # once each: nothing lost, nothing twice
        assert len(slack.roots()) == 3
