"""``mlcopilot scan --shared``: scanners on one PostgreSQL state database split a full rescan.

Two installed ``mlcopilot scan --shared`` processes run at once against DataHub (the stand-in,
a little slow, so that each batch takes a while): one splits the full rescan into batches of
``watch.rescan_batch`` models, the other joins it, each scans the batches it claims. Between
them every model is reported once, every incident is recorded once and every Slack message is
posted once (each delivers what is due after its last batch, the other's rows included, under
the outbox's leases).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.model import OutboxStatus
from mlcopilot.store import open_store
from standin.fixtures import StandInFactory
from testing.builders import dataset, ml_model, model_urn
from testing.fakes.slack import FakeSlack
from testing.installed_cli import Ran, run_cli, run_installed
from testing.notify_world import notify_env
from testing.postgres import fresh_schema

NAMES = [f"m{i:02d}" for i in range(16)]
MODELS = sorted(model_urn(n) for n in NAMES)


def records() -> list[Any]:
    """Model ``mNN`` on ``raw.mNN``, whose ``email`` is tagged PII: one incident a model."""
    found: list[Any] = []
    for name in NAMES:
        found += dataset(
            f"raw.{name}",
            fields=[("email", "string"), ("a", "string")],
            field_tags={"email": ["PII"]},
        )
        found += ml_model(name, training_data=[f"raw.{name}"])
    return found


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema("mlc_scan_shared") as url:
        yield url


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        (["--model", "m00"], "--shared with --model"),
        (["--now", "2026-11-20T09:00:00Z"], "--shared with --now"),
        (["--dry-run"], "--shared with --dry-run"),
    ],
)
def test_shared_is_the_full_rescan_on_the_clock_of_the_moment(
    tmp_path: Path, flag: list[str], why: str
) -> None:
    ran = run_cli(tmp_path, "scan", "--shared", *flag)
    assert ran.code == 2
    assert why in ran.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_two_shared_scans_report_each_model_once_and_notify_once(
    tmp_path: Path, pg_url: str, standin_factory: StandInFactory
) -> None:
    server = standin_factory(records())
    server.latency = 0.05  # a batch takes a while: both scanners are at work while batches last
    slack = FakeSlack()
    with slack.running():
        env = {
            **notify_env(slack=slack),
            "MLCOPILOT_CATALOG": f"datahub:{server.url}",
            "MLCOPILOT_STATE_URL": pg_url,
            "MLCOPILOT_WRITE_BACK": "false",
            "MLCOPILOT_GROUP_WAIT": "0s",
            "MLCOPILOT_TEST_WRITE_SPACING": "0s",
            "MLCOPILOT_RESCAN_BATCH": "2",
        }
        with open_store(pg_url):
            pass  # migrate once, before the race
        ran: dict[str, Ran] = {}

        def scanner(name: str) -> None:
            home = tmp_path / name
            home.mkdir()
            ran[name] = run_installed(home, "scan", "--shared", "--format", "json", env=env)

        threads = [threading.Thread(target=scanner, args=(n,)) for n in ("one", "two")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
        with open_store(pg_url) as store:
            incidents = store.incidents()
            rows = store.outbox(limit=10_000)
            left = store.rescans()

    assert sorted(ran) == ["one", "two"]
    assert [r.code for r in ran.values()] == [0, 0], [r.stderr[-2000:] for r in ran.values()]
    reports = {name: json.loads(r.stdout) for name, r in ran.items()}
    reported = {name: [m["urn"] for m in report["models"]] for name, report in reports.items()}
    assert sorted(reported["one"] + reported["two"]) == MODELS, "each model in one report"
    assert reported["one"], "both scanners took batches"
    assert reported["two"], "both scanners took batches"
    for report in reports.values():
        assert any("full rescan shared through the state database" in n for n in report["notes"])
    assert left == []
    assert Counter(i.model for i in incidents) == Counter(MODELS)
    assert {i.generation for i in incidents} == {1}
    undelivered = [
        (r.sink, r.status, r.attempts) for r in rows if r.status is not OutboxStatus.DONE
    ]
    assert undelivered == []
    slack_rows = [r for r in rows if r.sink == "slack"]
    assert len(slack_rows) == len({r.dedupe_key for r in slack_rows})
    assert len(slack.roots()) == len({r.group_key for r in slack_rows})
