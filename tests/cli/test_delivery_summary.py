"""The closing summary tells the whole delivery story, so it and the exit code (5) agree: a
possible duplicate and a run stopped at its deadline are said there too; and a run stopped
while rows wait behind a dead row says what holds them, not that they are due (issue 11)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mlcopilot.cli.render.terminal import print_relay
from mlcopilot.clock import SystemClock
from mlcopilot.model import Severity
from mlcopilot.notify.relay import Relay, RetryPolicy
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.github import GitHubSink
from mlcopilot.report.summary import ScanOutcome, summary_lines
from mlcopilot.store import open_store
from testing.fakes.github import FakeGitHub
from testing.fakes.http import Request, Response
from testing.installed_cli import MLCOPILOT, run_cli
from testing.notify_world import CUSTOMERS, notify_env, world
from tests.conftest import DEMO_DATA

pytestmark = pytest.mark.slow

ISSUES = r"/repos/acme/ml-alerts/issues"


class HeldCreate(FakeGitHub):
    """A GitHub whose first issue create waits (work not done yet) until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._held = False

    def _route(self, request: Request) -> Response:
        first = (
            request.method == "POST"
            and re.fullmatch(r".*" + ISSUES, request.path) is not None
            and not self._held
        )
        if first:
            self._held = True
            self.arrived.set()
            self.release.wait(20)
        return super()._route(request)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("catalog") / "home"
    assert run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    return home


def test_a_possible_duplicate_is_in_the_summary_and_exits_5(catalog: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    subprocess.run(["cp", "-a", str(catalog), str(home)], check=True)
    github = HeldCreate()
    with github.running():
        env: dict[str, str] = {
            **os.environ,
            "MLCOPILOT_HOME": str(home),
            "COLUMNS": "200",
            **notify_env(github),
            "MLCOPILOT_TEST_WRITE_SPACING": "0",
            "MLCOPILOT_GROUP_WAIT": "0s",
            "MLCOPILOT_WRITE_BACK": "false",  # GitHub rows only
        }
        # Process A scans on a clock in the past: its 120 s lease on the row it is sending
        # has long expired by the real clock another relay claims with.
        scan = subprocess.Popen(
            [str(MLCOPILOT), "scan", "--now", "2026-11-21T09:00:00Z"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert github.arrived.wait(120), "the scan never sent its first create"
            # Meanwhile another relay takes the row over (lease expired) and delivers it.
            other = relay_elsewhere(env)
            assert 1 in [item.id for item in other.delivered]
            github.release.set()  # A's create lands too: the duplicate the lease could not stop
            out, err = scan.communicate(timeout=120)
        finally:
            github.release.set()
            if scan.poll() is None:
                scan.kill()
                scan.wait()
    assert scan.returncode == 5, out + err
    assert "possible duplicate (outbox row 1, github open)" in out
    (line,) = [x for x in out.splitlines() if x.strip().startswith("delivery:")]
    assert (
        line.strip()
        == "delivery: 0 dead, 0 to retry, 1 possible duplicate (`mlcopilot outbox list`)"
    )
    assert len(github.created()) == len(other.delivered) + 1  # the other's, and A's late one


def relay_elsewhere(env: dict[str, str]) -> Any:
    """A second relay (its own store connection, the real clock) delivering the GitHub rows."""
    settings = NotifySettings.from_env(env)
    assert settings.github is not None
    home = Path(env["MLCOPILOT_HOME"])
    clock = SystemClock()
    with open_store(f"sqlite:///{home / 'state.db'}") as store:
        sink = GitHubSink(settings.github, clock=clock)
        return Relay(store, [sink], clock=clock, owner="elsewhere").run()


def test_a_run_stopped_at_its_deadline_is_in_the_summary(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = {
            "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]},
            "schema_drift": {CUSTOMERS: [("b", Severity.CRITICAL, "removed")]},
        }
        # GitHub writes are a second apart: the second group's issue is past the deadline.
        result = w.scan(retry=RetryPolicy(max_run=timedelta(seconds=1)))
    relay = result.relay
    assert relay is not None
    assert relay.stopped is not None
    assert not relay.retrying  # only the stop makes the run not ok
    assert not relay.dead
    lines = summary_lines(ScanOutcome(result, None))
    assert (
        "delivery: 0 dead, 0 to retry, the run stopped at its deadline with rows left for the "
        "next (`mlcopilot outbox list`)"
    ) in lines


def test_a_deadline_reached_after_a_row_died_says_what_holds_its_group(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b"), MLCOPILOT_GROUP_WAIT="0") as w:
        w.script = {
            "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]},
            "schema_drift": {CUSTOMERS: [("b", Severity.CRITICAL, "removed")]},
        }
        w.github.fail("POST", ISSUES, 422, {"message": "Validation Failed"})  # the first open
        result = w.scan(retry=RetryPolicy(max_run=timedelta(seconds=1)))
        with w.store() as store:
            pending = [i for i in store.outbox() if i.status.value == "pending"]
    relay = result.relay
    assert relay is not None
    ((dead, _error),) = relay.dead
    assert any(i.group_key != dead.group_key for i in pending)  # another group is still due
    assert relay.stopped is not None
    assert "still due" not in relay.stopped
    assert f"`mlcopilot outbox retry {dead.id}`" in relay.stopped
    console = Console(width=400, record=True, color_system=None)
    print_relay(relay, console)
    said = console.export_text()
    assert "still due" not in said
    assert (
        "stopped: the relay run reached its deadline (2 s); later rows of the same group wait "
        f"behind dead outbox row {dead.id} and go out only once it is retried (fix the cause, "
        f"then `mlcopilot outbox retry {dead.id}`); rows of other groups go out with the next run"
    ) in said
