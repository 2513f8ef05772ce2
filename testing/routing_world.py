"""Two teams, two models, every sink: the world routing and the new sinks are tested in.

``churn`` (trained on ``raw.customers``) belongs to the growth team: its group's Slack channel
is an id, Alice's Slack is a member id. ``fraud`` (on ``raw.payments``) belongs to payments:
its channel is a ``#name``, Bob's Slack a handle. The catalog holds the ``ownership``,
``corpGroup*`` and ``corpUser*`` aspects as DataHub writes them; the scripted findings are a
high one on customers and a medium one on payments. :func:`every_sink` adds PagerDuty, Teams
and the signed webhook, each a local server speaking its real API.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.model import Severity
from testing.builders import corp_group, corp_user, ds, model_urn, owned_by
from testing.fakes.pagerduty import ROUTING_KEY, FakePagerDuty
from testing.fakes.slack import FakeSlack
from testing.fakes.teams import FakeTeams
from testing.fakes.webhook import SECRET, FakeReceiver
from testing.notify_world import World, world

GROWTH = "C0GROWTHML"
PAYMENTS = "payments-ml"
CUSTOMERS = ds("raw.customers")
PAYMENTS_TABLE = ds("raw.payments")
CHURN, FRAUD = model_urn("churn"), model_urn("fraud")


def two_teams(w: World) -> None:
    """The owners of churn (growth) and fraud (payments), and how DataHub says to reach them."""
    with LiteCatalog(w.catalog_path) as catalog:
        catalog.ingest(
            [
                *corp_group("growth-ml", slack=GROWTH),
                *corp_group("payments-ml", slack=f"#{PAYMENTS}"),
                *corp_user("alice", display_name="Alice Liddell", slack="U0ALICE"),
                *corp_user("bob", display_name="Bob Jones", slack="bob.jones"),
                *owned_by(CHURN, ["urn:li:corpGroup:growth-ml", "urn:li:corpuser:alice"]),
                *owned_by(FRAUD, ["urn:li:corpGroup:payments-ml", "urn:li:corpuser:bob"]),
            ]
        )


@contextmanager
def teams_world(tmp_path: Path, **env: str) -> Iterator[World]:
    """A world where two teams own two models, with Slack channels for both."""
    slack = FakeSlack(channels=("#ml-alerts",))
    slack.add_channel("growth", GROWTH)
    slack.add_channel(PAYMENTS)
    models = {"churn": ["raw.customers"], "fraud": ["raw.payments"]}
    extra: dict[str, Any] = {"MLCOPILOT_GROUP_WAIT": "0", **env}  # variables, all of them
    with world(tmp_path, models=models, slack=slack, **extra) as w:
        two_teams(w)
        w.script = {
            "pii_exposure": {
                CUSTOMERS: [("a", Severity.HIGH, None)],
                PAYMENTS_TABLE: [("b", Severity.MEDIUM, None)],
            }
        }
        yield w


@dataclass
class Receivers:
    """PagerDuty, Teams and the webhook receiver, running."""

    pagerduty: FakePagerDuty
    teams: FakeTeams
    webhook: FakeReceiver


@contextmanager
def every_sink(tmp_path: Path, **env: str) -> Iterator[tuple[World, Receivers]]:
    """:func:`teams_world` with PagerDuty, Teams and the signed webhook configured too."""
    receivers = Receivers(FakePagerDuty(), FakeTeams(), FakeReceiver())
    with ExitStack() as stack:
        for server in (receivers.pagerduty, receivers.teams, receivers.webhook):
            stack.enter_context(server.running())
        sinks = {
            "MLCOPILOT_PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "MLCOPILOT_PAGERDUTY_URL": receivers.pagerduty.url,
            "MLCOPILOT_TEAMS_WEBHOOK_URL": receivers.teams.webhook_url,
            "MLCOPILOT_WEBHOOK_URL": receivers.webhook.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET": SECRET,
        }
        # The receiver checks signatures against its own (wall) clock, as the sink dates them.
        yield stack.enter_context(teams_world(tmp_path, **sinks, **env)), receivers
