"""Two teams, every sink, killed anywhere: issue 26's "done when", end to end.

A catalog where two teams own two models: each team's incidents go to its own Slack channel
mentioning its people, the high one pages PagerDuty (the medium one does not), Teams gets a
card and the webhook a signed event per group — and the process killed at each step before
and after each new sink (kill -9 semantics: no cleanup, the row stays leased) loses nothing:
the next runs deliver every event, once wherever the receiver deduplicates (PagerDuty's
``dedup_key``, the webhook's ``Idempotency-Key``); Teams, which cannot, repeats at most the one
card the crash left uncertain, and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.incidents.payload import OutboxStatus
from mlcopilot.model import Severity
from testing.failpoints import Killed, kill_at
from testing.fakes.webhook import ACCEPTED, DUPLICATE
from testing.notify_world import World
from testing.routing_world import CUSTOMERS, GROWTH, PAYMENTS, Receivers, every_sink

pytestmark = pytest.mark.slow


def settle(w: World) -> None:
    """Runs until every row is delivered: past the dead relay's lease, then once more."""
    for _ in range(2):
        w.clock.advance(timedelta(minutes=5))
        result = w.scan()
        assert result.relay is not None


def assert_each_told_once(w: World, r: Receivers, *, teams_extra: int = 0) -> None:
    payments = w.slack._by_id_or_name(PAYMENTS)
    assert payments is not None
    # Slack: each team's own channel, one root each, its people named.
    (growth,) = [m for m in w.slack.roots() if m["channel"] == GROWTH]
    (team,) = [m for m in w.slack.roots() if m["channel"] == payments.id]
    assert "<@U0ALICE>" in str(growth["blocks"])
    assert "Bob Jones" in str(team["blocks"])
    assert len(w.github.issues) == 2
    # PagerDuty: the high incident paged once; the medium one not at all.
    assert len(r.pagerduty.alerts) == 1
    (alert,) = r.pagerduty.alerts
    assert alert.severity == "error"
    assert CUSTOMERS in alert.payload["source"]
    # The webhook: one opened event per group, each signed with the secret.
    opened = [e for e in r.webhook.events if e["type"] == "incident.opened"]
    assert len(opened) == 2
    # each signature checked on arrival by the receiver, with the secret and its clock
    assert {d.verdict for d in r.webhook.deliveries} <= {ACCEPTED, DUPLICATE}
    # Teams: a card per group, plus at most the one the crash left uncertain.
    assert len(r.teams.cards) == 2 + teams_extra
    with w.store() as store:
        waiting = store.outbox(statuses=[OutboxStatus.PENDING, OutboxStatus.SENDING])
        dead = store.outbox(statuses=[OutboxStatus.DEAD])
    assert waiting == []
    assert dead == []


def test_two_teams_each_hear_where_they_work(tmp_path: Path) -> None:
    with every_sink(tmp_path) as (w, r):
        result = w.scan()
        assert result.relay is not None
        assert result.relay.ok, result.relay
        assert_each_told_once(w, r)


POINTS = [
    f"{step}:{sink}"
    for sink in ("pagerduty", "teams", "webhook")
    for step in ("before_send", "after_send", "after_done")
]


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_each_step_of_each_new_sink_nothing_is_lost(tmp_path: Path, point: str) -> None:
    with every_sink(tmp_path) as (w, r):
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at(point))
        settle(w)
        # Teams takes no idempotency key: a card Teams accepted before the kill is sent again.
        assert_each_told_once(w, r, teams_extra=1 if point == "after_send:teams" else 0)


def test_the_whole_life_of_a_paged_incident(tmp_path: Path) -> None:
    with every_sink(tmp_path) as (w, r):
        w.scan()
        script: dict[str, Any] = w.script["pii_exposure"]
        script[CUSTOMERS] = []  # the PII column is gone: every sink hears it resolved
        w.clock.advance(timedelta(minutes=10))
        w.scan()
        (alert,) = r.pagerduty.alerts
        assert alert.state == "resolved"
        types = sorted(e["type"] for e in r.webhook.events)
        assert types == ["incident.opened", "incident.opened", "incident.resolved"]
        assert len(r.teams.cards) == 3
        script[CUSTOMERS] = [("a", Severity.CRITICAL, None)]  # it comes back, worse
        w.clock.advance(timedelta(minutes=10))
        w.scan()
        assert [a.state for a in r.pagerduty.alerts] == ["resolved", "triggered"]
        assert r.pagerduty.alerts[1].severity == "critical"


@pytest.mark.parametrize("sink", ["pagerduty", "webhook"])
def test_a_real_process_killed_after_the_receiver_accepted_tells_it_once(
    tmp_path: Path, sink: str
) -> None:
    """``kill -9`` for real: the scan process exits 137 right after the send, no cleanup."""
    from testing.builders import dataset, ml_model, write_metadata_file
    from testing.fakes.pagerduty import ROUTING_KEY, FakePagerDuty
    from testing.fakes.webhook import SECRET, FakeReceiver

    metadata = write_metadata_file(
        tmp_path / "meta.json",
        [
            *dataset("raw.customers", fields=[("email", "string")], field_tags={"email": ["PII"]}),
            *ml_model("churn", training_data=["raw.customers"]),
        ],
    )
    pagerduty, webhook = FakePagerDuty(), FakeReceiver()
    with pagerduty.running(), webhook.running():
        env = {
            **os.environ,
            "MLCOPILOT_ALLOW_LOCAL_SINKS": "1",
            "MLCOPILOT_GROUP_WAIT": "0",
            "MLCOPILOT_HOME": str(tmp_path / "home"),
            "MLCOPILOT_PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "MLCOPILOT_PAGERDUTY_URL": pagerduty.url,
            "MLCOPILOT_WEBHOOK_URL": webhook.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET": SECRET,
        }

        def mlcopilot(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "mlcopilot", *args],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={**env, **extra},
            )

        catalog = f"lite:{tmp_path / 'catalog.db'}"
        assert mlcopilot("catalog", "load", str(metadata), "--catalog", catalog).returncode == 0
        common = ("--catalog", catalog, "--state-url", f"sqlite:///{tmp_path / 'state.db'}")
        killed = mlcopilot(
            "scan",
            *common,
            "--now",
            "2026-03-02T09:00:00Z",
            MLCOPILOT_FAILPOINT=f"after_send:{sink}",
        )
        assert killed.returncode == 137, killed.stderr
        received = pagerduty.events if sink == "pagerduty" else webhook.deliveries
        assert len(received) == 1  # it got there; the process died before saying so
        rerun = mlcopilot("scan", *common, "--now", "2026-03-02T10:00:00Z")  # past the lease
        assert rerun.returncode == 0, rerun.stderr
        assert len(pagerduty.alerts) == 1
        assert len(webhook.events) == 1  # the resend had the same key: kept once
